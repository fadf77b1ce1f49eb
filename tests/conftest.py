"""Shared fixtures: the book build (once per session) and headless Chromium.

`make test` runs unit tests, nbval over chapters/ and the book tests in one pytest
run, on both cores: pytest-xdist's ``-n 2 --dist loadscope``.

- The first book test starts the book build (a subprocess) and waits for it, once no
  worker still runs a notebook (each worker says what it is doing under
  ``_build/workers/``): by then nbval has run every chapter, and the build executes
  only what nbval did not run (a chapter that failed), a notebook per core. The other
  worker's unit tests go on beside the build. With
  ``--book-early`` (not used by `make test`, see the Makefile) the build starts at
  once, in xdist's controller, and the book tests wait for ``_build/book-build.json``
  (when it ended and how). Without it, the first worker to need the book builds it,
  holding a file lock; a worker that needs it too waits on the lock and reads how
  that build ended from ``_build/book-build.json`` (one build into ``_build``, not
  one per worker).
- The build builds into ``_build`` like `make book`, so the jupyter-cache it fills
  makes a later `make book` quick.
- Kernels start one at a time across processes (a file lock held from the choice of
  the kernel's ports until it answers): two Jupyter clients that pick their ports at
  the same moment can be handed the same ones (jupyter/jupyter_client#487), and a
  client talking to another's kernel waits for replies that never come. That was the
  ~300 s stall once seen when the build ran beside nbval.
- Scheduling (``loadscope``): every test keeps to its module's worker, so an nbval
  notebook's cells run in order in one kernel (``loadgroup`` with a group per
  notebook split them). The notebooks, the longest modules, come first; the book
  tests last. `make test` passes ``--no-loadscope-reorder``: by default xdist hands
  out the modules with the most tests first, whatever this order says, and the book
  tests, started at once, built the book beside nbval (executing every chapter twice).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbval_cache
import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "_build"
HTML_DIR = BUILD_DIR / "html"
BUILD_LOG = BUILD_DIR / "book-build.log"
BUILD_STATUS = BUILD_DIR / "book-build.json"  # written when an early build ends
KERNEL_LOCK = BUILD_DIR / "kernel-start.lock"
BUILD_LOCK = BUILD_DIR / "book-build.lock"  # held by the worker that builds
EARLY_BUILD_ENV = "TRANSFORMER_EDU_EARLY_BOOK_BUILD"  # the controller started it
SCREENSHOTS = BUILD_DIR / "screenshots"
BUILD_TIMEOUT_S = 30 * 60
WORKERS_DIR = BUILD_DIR / "workers"  # each xdist worker's phase: tests, book, done
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

_build_key = pytest.StashKey["BookBuild"]()
_phase_key = pytest.StashKey[str]()  # what this worker last wrote (_set_phase)


@dataclass
class BookBuild:
    """A running or finished `jupyter-book build`."""

    process: subprocess.Popen
    started: float
    log_file: object
    elapsed: float | None = None

    def wait(self) -> BookBuild:
        if self.elapsed is None:
            self.process.wait(timeout=BUILD_TIMEOUT_S)
            self.elapsed = time.monotonic() - self.started
            self.log_file.close()
        return self

    @property
    def returncode(self) -> int:
        return self.process.returncode

    @property
    def log(self) -> str:
        return BUILD_LOG.read_text(encoding="utf8", errors="replace")


@dataclass
class FinishedBuild:
    """A build another process ran (the xdist controller's early build)."""

    returncode: int
    elapsed: float

    @property
    def log(self) -> str:
        return BUILD_LOG.read_text(encoding="utf8", errors="replace")


def _record_when_done(build: BookBuild) -> None:
    build.wait()
    status = {"returncode": build.returncode, "elapsed": build.elapsed}
    tmp = BUILD_STATUS.with_suffix(".tmp")
    tmp.write_text(json.dumps(status))
    tmp.replace(BUILD_STATUS)


def _wait_for_early_build() -> FinishedBuild:
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while not BUILD_STATUS.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the book build did not end in {BUILD_TIMEOUT_S} s")
        time.sleep(1)
    return FinishedBuild(**json.loads(BUILD_STATUS.read_text()))


def kernel_start_lock():
    """The lock every kernel start in this test run holds (see the module's text)."""
    from filelock import FileLock  # a dependency of torch

    BUILD_DIR.mkdir(exist_ok=True)
    return FileLock(KERNEL_LOCK)


def _serialise_nbval_kernel_starts() -> None:
    from nbval import kernel

    if getattr(kernel.RunningKernel, "_start_locked", False):
        return
    start = kernel.RunningKernel.__init__

    def locked_init(self, *args, **kwargs):
        with kernel_start_lock():  # until the kernel has answered kernel_info
            start(self, *args, **kwargs)

    kernel.RunningKernel.__init__ = locked_init
    kernel.RunningKernel._start_locked = True


def book_command() -> list[str]:
    """What `make book` runs: both editions (book/build.py)."""
    return [sys.executable, str(ROOT / "book" / "build.py")]


def _start_build() -> BookBuild:
    BUILD_DIR.mkdir(exist_ok=True)
    nbval_cache.note_build_start()
    log_file = BUILD_LOG.open("w", encoding="utf8")
    env = dict(os.environ)
    # the kernels must be this interpreter's (the .venv's)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["TRANSFORMER_EDU_KERNEL_LOCK"] = str(KERNEL_LOCK)  # book_extension takes it
    process = subprocess.Popen(
        book_command(),
        cwd=ROOT,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    return BookBuild(process, time.monotonic(), log_file)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--book-built", action="store_true",
        help="test the book already in _build as it is (no build; for working on "
        "the book tests)",
    )  # fmt: skip
    parser.addoption(
        "--book-early", action="store_true",
        help="start the book build at once, beside the other tests (with -n N: in "
        "xdist's controller); the book tests wait for it",
    )  # fmt: skip


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _set_phase(config: pytest.Config, phase: str) -> None:
    """Say what this xdist worker is doing: "notebooks" (from its start until its
    first test that is no notebook), "tests" (others than the book's), "book" (it has
    reached the book tests, which come last) or "done"."""
    if not _is_xdist_worker(config) or config.stash.get(_phase_key, None) == phase:
        return  # (a test's setup calls this: the file is written on a change only)
    config.stash[_phase_key] = phase
    WORKERS_DIR.mkdir(parents=True, exist_ok=True)
    (WORKERS_DIR / config.workerinput["workerid"]).write_text(phase)


def _wait_for_notebooks(timeout_s: float = BUILD_TIMEOUT_S) -> None:
    """Before the book build, wait until no worker still runs (or may yet run) a
    notebook. The notebooks come first in the work queue, and loadscope hands out
    scopes in its order, so a worker past its notebooks gets no other; once none is in
    "notebooks", nbval has run every chapter it will, and the build reuses them all.
    (A chapter's timings would also be noisy with a third process on two cores.)"""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        phases = [f.read_text() for f in WORKERS_DIR.glob("*")]
        if "notebooks" not in phases:
            return
        time.sleep(1)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "book: needs the built book (builds it once)")
    _serialise_nbval_kernel_starts()
    # execute each chapter once: nbval's kernels start as the book build's do, and
    # each chapter nbval ran without an error enters the build's execution cache
    # (tests/helpers/nbval_cache.py), so the book build executes none of them again
    os.environ["IPYTHONDIR"] = str(nbval_cache.kernel_profile_dir())
    nbval_cache.install()
    _set_phase(config, "notebooks")
    if _is_xdist_worker(config) or config.getoption("book_built"):
        return
    nbval_cache.reset_stale_cache()  # before any worker writes to the cache
    BUILD_STATUS.unlink(missing_ok=True)  # an earlier run's; this run builds again
    shutil.rmtree(WORKERS_DIR, ignore_errors=True)  # before the workers start
    if config.getoption("book_early"):
        build = config.stash[_build_key] = _start_build()
        threading.Thread(target=_record_when_done, args=(build,), daemon=True).start()
        os.environ[EARLY_BUILD_ENV] = "1"  # the workers start after this


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    def rank(item: pytest.Item) -> int:  # the longest first, the book tests last
        if item.get_closest_marker("book"):
            return 2
        return 0 if item.nodeid.split("::")[0].endswith(".ipynb") else 1

    items.sort(key=rank)  # stable: each module keeps its order


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("book"):
        _set_phase(item.config, "book")
    elif not item.nodeid.split("::")[0].endswith(".ipynb"):
        _set_phase(item.config, "tests")  # its notebooks are done (they come first)


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    _set_phase(session.config, "done")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    build = config.stash.get(_build_key, None)
    if build is not None and build.elapsed is not None:
        terminalreporter.write_line(
            f"book build: {build.elapsed:.0f} s (exit {build.returncode}), "
            f"log {BUILD_LOG.relative_to(ROOT)}, screenshots "
            f"{SCREENSHOTS.relative_to(ROOT)}/"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    build = config.stash.get(_build_key, None)
    if build is not None and build.process.poll() is None:
        build.process.terminate()  # the run stopped early; don't leave it behind
        build.process.wait(timeout=60)


@pytest.fixture(scope="session")
def book(request: pytest.FixtureRequest) -> BookBuild:
    """The finished book build: the early one (``--book-early``), or one started
    when the first book test needs it."""
    if request.config.getoption("book_built"):
        return FinishedBuild(returncode=0, elapsed=0.0)
    build = request.config.stash.get(_build_key, None)
    if build is None and os.environ.get(EARLY_BUILD_ENV):
        return _wait_for_early_build()  # an xdist worker: the controller builds
    if build is not None:
        return build.wait()
    from filelock import FileLock  # a dependency of torch

    BUILD_DIR.mkdir(exist_ok=True)
    with FileLock(BUILD_LOCK, timeout=BUILD_TIMEOUT_S):  # one build per run
        if BUILD_STATUS.exists():  # another worker built it while this one waited
            return FinishedBuild(**json.loads(BUILD_STATUS.read_text()))
        _set_phase(request.config, "book")  # not in "notebooks" while it waits
        _wait_for_notebooks()
        build = request.config.stash[_build_key] = _start_build()
        _record_when_done(build)
    return build


@pytest.fixture(scope="session")
def browser():
    """Debian's headless Chromium driven by Playwright (no browser download)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} not found: `make test` installs Debian's chromium "
            "(apt-get install chromium), or set CHROMIUM=/path/to/chromium"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()
