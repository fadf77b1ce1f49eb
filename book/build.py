"""Build both editions: what `make book` runs (and the test run's book fixture).

1. The English edition: ``jupyter-book build . -W -n --keep-going --all`` into
   ``_build/html`` (every notebook executed, or read from the jupyter-cache), with
   Sphinx's parallel read: as many notebooks at once as cores, at most 4.
2. The Japanese edition: ``book/i18n.py build`` into ``_build/html/ja`` from the
   catalogues, reusing the English build's execution cache (nothing executed).

Each step's time goes to ``_build/book-build-times.json``. The exit status is the
first failing step's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMES = ROOT / "_build" / "book-build-times.json"
# jupyter-book's command line, with Sphinx reading (so executing) JOBS notebooks at a
# time: its CLI has no -j, its build_sphinx takes jobs
JB_MAIN = (
    "import functools, sys; import jupyter_book.sphinx as s; "
    "s.build_sphinx = functools.partial(s.build_sphinx, jobs={jobs}); "
    "from jupyter_book.cli.main import main; sys.exit(main())"
)


def jobs() -> int:
    """Notebooks executed at once: one per core, at most 4 ($BOOK_JOBS overrides)."""
    return int(os.environ.get("BOOK_JOBS") or min(os.cpu_count() or 1, 4))


def english_command() -> list[str]:
    cli = [sys.executable, "-c", JB_MAIN.format(jobs=jobs())]
    return [*cli, "build", str(ROOT), "-W", "-n", "--keep-going", "--all"]


def japanese_command() -> list[str]:
    return [sys.executable, str(ROOT / "book" / "i18n.py"), "build"]


def main() -> int:
    env = dict(os.environ)
    # the kernels the build starts must be this interpreter's (the .venv's)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # one notebook per core: each kernel's torch gets its share of the cores (two
    # kernels of two threads each on two cores ran chapters 6 and 9 past the cell
    # timeout); make test sets OMP_NUM_THREADS=1 itself
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // jobs())))
    times = {}
    for name, command in (("en", english_command()), ("ja", japanese_command())):
        started = time.monotonic()
        print(f"[book/build.py] {name}: {' '.join(command)}", flush=True)
        code = subprocess.call(command, cwd=ROOT, env=env)
        times[name] = round(time.monotonic() - started, 1)
        print(f"[book/build.py] {name}: exit {code} in {times[name]:.0f} s", flush=True)
        TIMES.parent.mkdir(exist_ok=True)
        TIMES.write_text(json.dumps(times) + "\n")
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
