"""Grade the published solutions while busy loops load every core: a busy machine
must cost an honest student no point (the grader's limits count CPU time).

    python scripts/grade_under_load.py [--loops 6] [--time-limit 2]

Writes chapter 11 with every solution filled in as one student's notebook (the
tests' helper, ``tests/helpers/_submissions.py``), starts ``--loops`` processes that
spin, grades the notebook with ``python -m transformer_edu.grading`` and the fixed
cases only (``--draw 0``), and prints the points, the rows not passed and the wall
time. Not a test: it loads the machine on purpose, which would slow the tests
beside it.
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _spin() -> None:
    while True:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=6, help="busy processes")
    parser.add_argument("--time-limit", type=float, default=2.0,
                        help="the grader's --time-limit (CPU seconds)")  # fmt: skip
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT / p) for p in ("tests/helpers", "tests/exercises",
                                            "tests", "book")]  # fmt: skip
    import _submissions as subs

    work = Path(tempfile.mkdtemp(prefix="grade-under-load-"))
    subs.write(work / "submissions", "solved", subs.with_answers(subs.solved()))
    loops = [multiprocessing.Process(target=_spin, daemon=True)
             for _ in range(args.loops)]  # fmt: skip
    for p in loops:
        p.start()
    start = time.monotonic()
    try:
        subprocess.run(
            [sys.executable, "-m", "transformer_edu.grading", str(work / "submissions"),
             "--out", str(work / "grades"), "--time-limit", str(args.time_limit),
             "--draw", "0"],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
    finally:
        took = time.monotonic() - start
        for p in loops:
            p.terminate()
    with open(work / "grades" / "grades.csv", encoding="utf8") as f:
        rows = list(csv.DictReader(f))
    points = sum(float(r["points"]) for r in rows)
    most = sum(float(r["max_points"]) for r in rows)
    missed = [f"{r['exercise']} {r['status']}: {r['verdict'][:120]}"
              for r in rows if r["status"] != "passed"]  # fmt: skip
    print(f"{args.loops} busy loops on {multiprocessing.cpu_count()} cores, "
          f"--time-limit {args.time_limit:g}: {points:g} of {most:g} points "
          f"in {took:.0f} s")  # fmt: skip
    for line in missed:
        print("  not passed:", line)
    return 0 if points == most else 1


if __name__ == "__main__":
    sys.exit(main())
