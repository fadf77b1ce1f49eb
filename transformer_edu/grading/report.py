"""What the grader writes: the detailed table, the table a learning platform imports,
one feedback file per student, and the summary it prints.

- ``grades.csv``: one row per student and exercise: points (partial credit: the
  exercise's stars times the share of its test cases passed), cases passed, status,
  the checker's verdict, its hint, notes.
- ``lms.csv``: one row per student, one column per exercise (its points), the total
  and the maximum: the shape Moodle's, Canvas's and most platforms' grade import take.
- ``feedback/<student>.md``: the student's total, a line per exercise, then each
  checker's whole message and hint for what did not pass, and what the grader noticed.
"""

from __future__ import annotations

import csv
import os
import re
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path


@dataclass
class Row:
    """One cell of the grade table: a student's result on one exercise."""

    student: str  # the submission's file name without .ipynb, or its folder's name
    exercise: str
    name: str
    points: float
    max_points: int
    cases_passed: int
    cases_total: int
    status: str  # passed, failed, not implemented, missing, timed out, error
    verdict: str  # the checker's one-line summary, or what happened instead
    hint: str = ""
    note: str = ""  # what else the grader saw: printed output, code it skipped
    message: str = ""  # the checker's whole message (in the feedback file only)


CSV_FIELDS = [f.name for f in fields(Row) if f.name != "message"]


def cell(value):
    """A text cell a spreadsheet will not run: one that starts like a formula (a
    student can name a file ``=HYPERLINK(…).ipynb``) gets a leading apostrophe."""
    if isinstance(value, str) and value.startswith(("=", "+", "-", "@", "\t", "\r")):
        return "'" + value
    return value


def points_text(points: float) -> str:
    return f"{round(points, 2):g}"


def _atomic(path: Path, write) -> None:
    """Write ``path`` whole or not at all (a temporary file, then a rename)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        # backslashreplace: a lone surrogate (a message the student's code made)
        # is written escaped rather than stopping the write
        with os.fdopen(fd, "w", newline="", encoding="utf8",
                       errors="backslashreplace") as f:  # fmt: skip
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_all(rows: list[Row], out: Path, exercise_ids: list[str],
              only: list[str] | None = None) -> list[Path]:  # fmt: skip
    """Every output file in ``out`` (of the feedback files, those of the students in
    ``only`` when given); returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    detailed, lms = out / "grades.csv", out / "lms.csv"

    def write_detailed(f) -> None:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in rows:
            d = {k: cell(v) for k, v in asdict(r).items() if k in CSV_FIELDS}
            d["points"] = points_text(r.points)
            writer.writerow(d)

    def write_lms(f) -> None:
        writer = csv.writer(f)
        writer.writerow(["student", *exercise_ids, "total", "max"])
        for student, own in by_student(rows).items():
            got = {r.exercise: r.points for r in own}
            total = sum(r.points for r in own)
            maximum = sum(r.max_points for r in own)
            writer.writerow([cell(student), *(points_text(got.get(i, 0)) for i in exercise_ids),
                             points_text(total), maximum])  # fmt: skip

    _atomic(detailed, write_detailed)
    _atomic(lms, write_lms)
    written = [detailed, lms]
    folder = out / "feedback"
    folder.mkdir(exist_ok=True)
    for student, own in by_student(rows).items():
        if only is not None and student not in only:
            continue
        path = folder / f"{_safe(student)}.md"
        _atomic(
            path, lambda f, own=own, student=student: f.write(feedback(student, own))
        )
        written.append(path)
    return written


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "student"


def by_student(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r.student, []).append(r)
    return out


_MARK = {"passed": "✓", "failed": "✗", "not implemented": "·", "missing": "-",
         "timed out": "⏱", "error": "!"}  # fmt: skip


def feedback(student: str, rows: list[Row]) -> str:
    """One student's feedback, in Markdown."""
    total = sum(r.points for r in rows)
    maximum = sum(r.max_points for r in rows)
    lines = [f"# Feedback for {student}", "",
             f"**{points_text(total)} / {maximum} points**", "",
             "| exercise | points | cases | result |", "|---|---|---|---|"]  # fmt: skip
    for r in rows:
        cases = f"{r.cases_passed}/{r.cases_total}" if r.cases_total else ""
        lines.append(
            f"| {r.exercise} `{r.name}` | {points_text(r.points)}/{r.max_points} | "
            f"{cases} | {_MARK.get(r.status, '?')} {r.status} |"
        )
    details = [r for r in rows if r.status not in ("passed", "not implemented")]
    for r in details:
        lines += ["", f"## Exercise {r.exercise}: `{r.name}` ({r.status})", ""]
        body = r.message or r.verdict
        lines += ["```text", *body.splitlines(), "```"]
        if r.hint and r.hint not in body:
            lines += ["", f"**Hint:** {r.hint}"]
    notes = list(dict.fromkeys(r.note for r in rows if r.note))
    if notes:
        lines += ["", "## What the grader noticed", ""]
        lines += [f"- {n}" for n in notes]
        if any(re.search(r"\bcell \d", n) for n in notes):
            lines += ["", "Cells are counted from the top of the notebook, Markdown "
                      "cells included, from 1."]  # fmt: skip
    return "\n".join(lines) + "\n"


def table(
    rows: list[Row], exercise_ids: list[str] | None = None, width: int = 100
) -> str:
    """The grades as text: student × exercise (points, or a mark for why none), each
    total, then the verdict and hint of every answer that failed."""
    exercise_ids = exercise_ids or list(dict.fromkeys(r.exercise for r in rows))
    cells: dict[str, dict[str, str]] = {}
    totals: dict[str, list[float]] = {}
    for r in rows:
        mark = points_text(r.points) if r.points or r.status == "passed" else (
            _MARK.get(r.status, "?") if r.status != "passed" else "0")  # fmt: skip
        cells.setdefault(r.student, {})[r.exercise] = mark
        t = totals.setdefault(r.student, [0, 0])
        t[0], t[1] = t[0] + r.points, t[1] + r.max_points
    name_w = max(7, *(len(s) for s in cells))
    head = " ".join(f"{i:>4s}" for i in exercise_ids)
    lines = [f"{'student':{name_w}s} {head}  total"]
    for student, marks in cells.items():
        p, m = totals[student]
        row = " ".join(f"{marks.get(i, '?'):>4s}" for i in exercise_ids)
        lines.append(f"{student:{name_w}s} {row}  {points_text(p)}/{m:g}")
    lines.append(
        "points (partial: the share of cases passed); · not implemented, ✗ failed, "
        "⏱ timed out, ! error, - missing"
    )
    details = [r for r in rows if r.status not in ("passed", "not implemented")]
    seen_errors: set[tuple[str, str]] = set()
    if details:
        lines += ["", "what went wrong:"]
    for r in details:
        if r.status == "error":  # one line for a whole unreadable notebook
            if (r.student, r.verdict) in seen_errors:
                continue
            seen_errors.add((r.student, r.verdict))
        text = f"{r.student} {r.exercise} ({r.name}) {r.status}: {r.verdict}"
        lines.append(text if len(text) <= width else text[: width - 1] + "…")
        if r.hint:
            hint = f"    hint: {r.hint}"
            lines.append(hint if len(hint) <= width else hint[: width - 1] + "…")
    for r in (r for r in rows if r.note):
        lines.append(f"{r.student} {r.exercise} note: {r.note[: width - 20]}")
    return "\n".join(lines)
