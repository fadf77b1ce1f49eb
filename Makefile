# The README's quick start names two targets: `make book` and `make test`.
# Each sets up .venv from nothing (and the system packages the tests need).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: book test lint clean demo

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

demo: $(STAMP)
	$(PY) -m transformer_edu demo

book: $(STAMP)
	$(PY) -m transformer_edu demo

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check transformer_edu tests
	$(PY) -m ruff format --check transformer_edu tests

clean:
	rm -rf _build
