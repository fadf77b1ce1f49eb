"""Build both editions: what `make book` runs (and the test run's book fixture).

1. The English edition: ``jupyter-book build . -W -n --keep-going --all`` into
   ``_build/html`` (every notebook executed, or read from the jupyter-cache).
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
JB_MAIN = "import sys; from jupyter_book.cli.main import main; sys.exit(main())"


def english_command() -> list[str]:
    jb = Path(sys.executable).with_name("jupyter-book")
    cli = [str(jb)] if jb.exists() else [sys.executable, "-c", JB_MAIN]
    return [*cli, "build", str(ROOT), "-W", "-n", "--keep-going", "--all"]


def japanese_command() -> list[str]:
    return [sys.executable, str(ROOT / "book" / "i18n.py"), "build"]


def main() -> int:
    env = dict(os.environ)
    # the kernels the build starts must be this interpreter's (the .venv's)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
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
