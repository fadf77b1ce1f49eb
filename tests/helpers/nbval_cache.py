"""Execute each chapter once: what nbval runs, the book build reuses.

`make test` runs every chapter under nbval, then builds the book, whose myst-nb
would execute every chapter again (jupyter-cache, ``execute_notebooks: cache``). This
module records nbval's execution as nbclient records a notebook, and stores each chapter
that ran without an error in the build's execution cache (``_build/.jupyter_cache``),
where myst-nb finds it by the hash of its code cells: the build then executes nothing.

- nbval's kernels start with the book build's IPython profile (``book_extension``'s
  ``kernel_profile``: plotly's book renderer), so their outputs are the book's.
- Every iopub message nbval reads for a cell is also given to an nbclient
  ``NotebookClient`` (without a kernel of its own): its ``process_message`` fills the
  cell's outputs, display updates, ``clear_output`` and the widgets' state exactly as
  the build's execution would.
- A chapter enters the cache only when nbval ran all its code cells and none failed;
  anything else (a failed assert, a skipped cell, ``-k`` selecting some cells) leaves
  it out, and the book build executes it itself, as before.
- Two xdist workers write the cache: a file lock keeps its SQLite database to one
  writer at a time. The package digest that ``book_extension`` keeps beside the cache
  is checked first (a changed package empties the cache before any chapter enters it).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = ROOT / "_build"
CACHE_DIR = BUILD_DIR / ".jupyter_cache"  # jupyter-book's execution_cache_path
CACHE_LOCK = BUILD_DIR / "jupyter-cache.lock"
STORED = BUILD_DIR / "nbval-cached"  # a file per chapter this test run cached
AT_BUILD = BUILD_DIR / "nbval-cached-at-build"  # those cached when the build began
CHAPTERS = ROOT / "chapters"


class Recording:
    """One notebook's execution under nbval, as nbclient would have recorded it."""

    def __init__(self, path: Path, nb, kernel) -> None:
        from nbclient import NotebookClient

        self.path = path
        self.nb = copy.deepcopy(nb)  # nbval's cells stay as they were
        for cell in self.nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        self.client = NotebookClient(self.nb, record_timing=False)
        self.client.reset_execution_trackers()
        self.client.kc = kernel.kc  # Output widgets answer the kernel through it
        self.code_cells = [
            i for i, c in enumerate(self.nb.cells) if c.cell_type == "code"
        ]
        self.passed: set[int] = set()
        self.failed = False
        self.current: tuple[str, int] | None = None  # (execute msg_id, cell index)
        self.started = time.monotonic()

    def message(self, msg: dict) -> None:
        from nbclient.exceptions import CellExecutionComplete

        if self.current is None:
            return
        msg_id, index = self.current
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            return
        try:
            self.client.process_message(msg, self.nb.cells[index], index)
        except CellExecutionComplete:
            pass

    def complete(self) -> bool:
        return not self.failed and self.passed == set(range(len(self.code_cells)))

    def executed_notebook(self, language_info: dict | None):
        self.client.set_widgets_metadata()
        count = 0  # nbval runs without history: number the cells as nbclient does
        for index in self.code_cells:
            if self.nb.cells[index].source.strip():
                count += 1
                self.nb.cells[index].execution_count = count
        if language_info:
            self.nb.metadata["language_info"] = language_info
        return self.nb


def kernel_profile_dir() -> Path:
    """The book build's IPython profile (its plotly renderer), written if missing."""
    import book_extension  # book/ is on the tests' path (pyproject)

    return book_extension.kernel_profile(BUILD_DIR)


def reset_stale_cache() -> None:
    """As the book build does at its start: empty the cache if the package changed.
    (And forget which chapters an earlier test run cached.)"""
    import shutil

    import book_extension

    shutil.rmtree(STORED, ignore_errors=True)
    AT_BUILD.unlink(missing_ok=True)
    book_extension.reset_stale_cache(CACHE_DIR)


def store(recording: Recording, language_info: dict | None) -> None:
    """Put an executed chapter in the build's execution cache."""
    from filelock import FileLock  # a dependency of torch
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    nb = recording.executed_notebook(language_info)
    seconds = time.monotonic() - recording.started
    BUILD_DIR.mkdir(exist_ok=True)
    with FileLock(CACHE_LOCK):
        cache = get_cache(str(CACHE_DIR))
        record = cache.cache_notebook_bundle(
            CacheBundleIn(nb, str(recording.path), data={"execution_seconds": seconds}),
            check_validity=False,
            overwrite=True,
        )
    STORED.mkdir(exist_ok=True)
    (STORED / recording.path.name).write_text(f"{record.pk} {seconds:.1f}\n")


def stored_chapters() -> set[str]:
    """The chapters (file names) this test run put in the cache."""
    return {p.name for p in STORED.glob("*.ipynb")} if STORED.is_dir() else set()


def note_build_start() -> None:
    """Remember which chapters were in the cache when the book build began."""
    BUILD_DIR.mkdir(exist_ok=True)
    AT_BUILD.write_text("".join(f"{name}\n" for name in sorted(stored_chapters())))


def stored_at_build_start() -> set[str]:
    """The chapters this test run had cached when the book build began."""
    return set(AT_BUILD.read_text().split()) if AT_BUILD.exists() else set()


def install() -> None:
    """Patch nbval (once per process) to record each chapter and cache it."""
    from nbval import kernel, plugin

    if getattr(plugin.IPyNbCell, "_recorded", False):
        return

    get_message = kernel.RunningKernel.get_message

    def recording_get_message(self, stream, timeout=None):
        msg = get_message(self, stream, timeout=timeout)
        if msg.get("msg_type") == "kernel_info_reply":
            self._language_info = msg["content"].get("language_info")
        recording = getattr(self, "_recording", None)
        if recording is not None and stream == "iopub":
            recording.message(msg)
        return msg

    execute = kernel.RunningKernel.execute_cell_input

    def recording_execute(self, cell_input, allow_stdin=None):
        msg_id = execute(self, cell_input, allow_stdin=allow_stdin)
        recording = getattr(self, "_recording", None)
        if recording is not None and recording.current is not None:
            recording.current = (msg_id, recording.current[1])
        return msg_id

    runtest = plugin.IPyNbCell.runtest

    def recording_runtest(self):
        notebook = self.parent
        recording = _recording_for(notebook)
        if recording is None:
            return runtest(self)
        index = recording.code_cells[self.cell_num]
        recording.current = ("", index)
        recording.client.clear_before_next_output = False  # as nbclient, per cell
        try:
            runtest(self)
        except BaseException:
            recording.failed = True
            raise
        finally:
            recording.current = None
        recording.passed.add(self.cell_num)

    teardown = plugin.IPyNbFile.teardown

    def caching_teardown(self):
        recording = getattr(self, "_recording", None)
        try:
            if recording is not None and recording.complete():
                store(recording, getattr(self.kernel, "_language_info", None))
        finally:
            teardown(self)

    kernel.RunningKernel.get_message = recording_get_message
    kernel.RunningKernel.execute_cell_input = recording_execute
    plugin.IPyNbCell.runtest = recording_runtest
    plugin.IPyNbFile.teardown = caching_teardown
    plugin.IPyNbCell._recorded = True


def _recording_for(notebook) -> Recording | None:
    """The notebook's recording, begun at its first cell (chapters only)."""
    path = Path(str(notebook.fspath)).resolve()
    if path.parent != CHAPTERS or notebook.kernel is None:
        return None
    recording = getattr(notebook, "_recording", None)
    if recording is None:
        recording = notebook._recording = Recording(path, notebook.nb, notebook.kernel)
        notebook.kernel._recording = recording
    return recording
