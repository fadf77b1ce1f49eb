# The README's quick start names two targets: `make book` and `make test`.
# Each sets up .venv from nothing (and the system packages the tests need).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# Book set-up, beyond .venv: the vendored JavaScript (npm ci, from the committed
# lock file) and, for the browser test, Debian's Chromium. Nothing is fetched later.
NPM_STAMP := book_assets/node_modules/.installed
CHROMIUM  ?= /usr/bin/chromium
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Kernels started by the build and by nbval must be the .venv's python.
VENV_PATH := PATH="$(CURDIR)/$(VENV)/bin:$$PATH"
JB_BUILD  := jupyter-book build . -W -n --keep-going --all
# --durations: every run (CI included) ends with its 25 slowest tests, where its time goes
PYTEST_ARGS ?= -q --durations=25
TEST_WORKERS ?= 2

.PHONY: book test lint clean demo student grade translations pdf

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

demo: $(STAMP)
	$(PY) -m transformer_edu demo

$(NPM_STAMP): book_assets/package.json book_assets/package-lock.json
	@command -v npm >/dev/null 2>&1 || { $(SUDO) apt-get update && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm; }
	npm ci --prefix book_assets --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

$(CHROMIUM):
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium

# Build the whole book, every notebook executed; a warning fails it: the English
# edition (_build/html/index.html), then the Japanese one from the catalogues
# (_build/html/ja/index.html), which reuses the execution cache (book/build.py).
book: $(STAMP) $(NPM_STAMP)
	$(VENV_PATH) $(PY) book/build.py

# The printable edition, one PDF per edition from the book just built, printed by the
# system Chromium (book/pdf.py: figures drawn as they stand, a title page, contents,
# bookmarks, page numbers) -> _build/pdf/attention-from-the-inside.{en,ja}.pdf
pdf: book $(CHROMIUM)
	$(VENV_PATH) CHROMIUM=$(CHROMIUM) $(PY) book/pdf.py

# After the English text changed: the English build (for the figures' strings), the
# message templates, the catalogues brought up to date (new messages untranslated,
# changed ones fuzzy: make test fails until they are translated), the Japanese
# notebooks written again.
translations: $(STAMP) $(NPM_STAMP)
	$(VENV_PATH) $(JB_BUILD)
	$(VENV_PATH) $(PY) book/i18n.py update
	$(PY) book/ja_notebooks.py

# Lint first (ruff check + format, as CI runs it), then in one pytest run: unit tests,
# every chapter run by nbval, the student edition of chapter 11 run unsolved (its stubs
# meet the checkers), the book build and the browser checks. Each chapter executes
# once: nbval's execution of a chapter that passed goes into the build's execution
# cache, so the book build executes nothing again (tests/helpers/nbval_cache.py). On both cores: two
# pytest-xdist workers (each test module and each notebook kept to one worker, in
# tests/conftest.py's order: --no-loadscope-reorder, else xdist runs the modules with
# the most tests first, the book tests among them, and the build executes the chapters); the
# book tests come last, and the first starts the book build once no worker still runs
# a notebook (tests/conftest.py): the build executes none (or, after a chapter failed,
# two notebooks at a time, book/build.py) while the other worker's unit tests go on.
# Not --book-early (the build at once, beside both workers): three busy processes on two
# cores once broke ch. 1's and ch. 10's timing asserts. The whole run's time from a fresh clone: DEVELOPING.md. The other student editions are
# their chapters minus solution cells that no kept cell depends on
# (tests/book/test_student_runs.py), so they run whenever their chapter runs; executing
# them again would add minutes.
# OMP_NUM_THREADS=1: the CLI test trains in a subprocess beside pytest; two torch
# processes of two threads each on two cores slow small models many-fold.
test: lint $(NPM_STAMP) $(CHROMIUM)
	$(VENV_PATH) CHROMIUM=$(CHROMIUM) OMP_NUM_THREADS=1 $(PY) -m pytest tests chapters $(STUDENT_RUN) --nbval-lax --nbval-current-env \
	  --nbval-cell-timeout=600 -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)

STUDENT_RUN := student/11_exercises.ipynb student/ja/11_exercises.ipynb
LINTED := transformer_edu tests book scripts chapters student

lint: $(STAMP)
	$(PY) -m ruff check $(LINTED)
	$(PY) -m ruff format --check $(LINTED)

# The notebooks a reader opens outside the book (the Colab badges'): the chapters'
# reading copies (en/chapters/), the student editions (student/, the chapters without
# their cells tagged "solution"), the solutions editions (solutions/, every solution
# shown) and their Japanese twins, with the book's numbers as the
# last build measured them (book/glue_values.json: `python book/colab_notebooks.py
# --record` after `make book`), citations and boxes as plain Markdown. And grade a
# folder of submitted notebooks into grades/ (grades.csv, lms.csv, feedback/).
student: $(STAMP)
	$(PY) book/colab_notebooks.py
	$(PY) book/student_edition.py
	$(PY) book/solutions_edition.py
	$(PY) book/ja_notebooks.py

# grade: every submission's code runs locked in a process of its own (Landlock, seccomp,
# an audit hook); the grades are decided in the grader's process (see the teacher's
# guide). GRADE_ARGS: e.g. --time-limit 60.
SUBMISSIONS ?= submissions
GRADES ?= grades
GRADE_ARGS ?=
grade: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m transformer_edu.grading $(SUBMISSIONS) --out $(GRADES) $(GRADE_ARGS)

clean:
	rm -rf _build
