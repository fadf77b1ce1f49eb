"""Shared fixtures: the book build (once per session) and headless Chromium.

`make test` runs unit tests, nbval over chapters/ and the book tests in one pytest
run. Tests marked ``book`` are moved to the end of the run; the first of them starts
the book build (a subprocess) and waits for it. It builds into ``_build`` like
`make book`, so the jupyter-cache it fills makes a later `make book` quick.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "_build"
HTML_DIR = BUILD_DIR / "html"
BUILD_LOG = BUILD_DIR / "book-build.log"
SCREENSHOTS = BUILD_DIR / "screenshots"
BUILD_TIMEOUT_S = 30 * 60
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


def book_command() -> list[str]:
    jb = Path(sys.executable).with_name("jupyter-book")
    cli = [str(jb)] if jb.exists() else [sys.executable, "-c", _JB_MAIN]
    return [*cli, "build", str(ROOT), "-W", "-n", "--keep-going", "--all"]


_JB_MAIN = "import sys; from jupyter_book.cli.main import main; sys.exit(main())"


def _start_build() -> BookBuild:
    BUILD_DIR.mkdir(exist_ok=True)
    log_file = BUILD_LOG.open("w", encoding="utf8")
    env = dict(os.environ)
    # the kernels must be this interpreter's (the .venv's)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONUNBUFFERED", "1")
    process = subprocess.Popen(
        book_command(),
        cwd=ROOT,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    return BookBuild(process, time.monotonic(), log_file)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "book: needs the built book (builds it once)")


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    book_items = [item for item in items if item.get_closest_marker("book")]
    if not book_items:
        return
    items[:] = [item for item in items if not item.get_closest_marker("book")]
    items.extend(book_items)


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
    """The finished book build, started when the first book test needs it.

    Not earlier, beside nbval: with two kernels starting side by side, a build
    kernel stalled for ~300 s in two of two runs (cause not pinned down; the
    kernels talk over localhost TCP), which cost more than the overlap saved.
    """
    build = request.config.stash.get(_build_key, None)
    if build is None:
        build = request.config.stash[_build_key] = _start_build()
    return build.wait()


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
