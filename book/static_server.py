"""Serve a folder on 127.0.0.1, as any static web server would serve the built book.

A browser refuses to ``fetch`` the translator's ``.wasm`` and ``.onnx`` files from a
``file://`` page; the browser test and ``scripts/bench_browser.py`` serve
``_build/html`` with this instead (the README's ``python -m http.server`` does the
same by hand).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 (the base's name)
        pass  # one line per request would bury the test output


@contextlib.contextmanager
def serve(directory: str | Path) -> Iterator[str]:
    """Serve ``directory`` on a free port of 127.0.0.1; yields its base URL."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"nothing to serve: {directory} is not a folder")
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
