"""Grade a folder of submitted notebooks of chapter 11: one row per student and exercise.

    python -m transformer_edu.exercises.grading SUBMISSIONS [--out grades]

The checkers are the tests: each exercise's points come from its checker's verdict,
and its hint goes into the table. Each submission runs in a subprocess of its own, in
a fresh folder under the output folder, with a time limit per exercise and its printed
output capped; it may write or delete files only inside that folder. This protects the
grades from mistakes, not from an attacker: grade untrusted code in a container.
"""

from __future__ import annotations

import argparse
import ast
import csv
import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

CHAPTER = "11_exercises"  # the notebook whose exercises are graded
TIME_LIMIT_S = 30.0  # per exercise, and for loading the submission's code
STARTUP_S = 180.0  # for Python to start and import torch, before any student code
OUTPUT_LIMIT = 4000  # characters of printed output kept per submission


@dataclass(frozen=True)
class Exercise:
    """One graded item: the name the student defines and the checker that grades it."""

    id: str  # as numbered in the chapter, e.g. "6.1"
    name: str  # the function or class the student writes
    checker: str  # a key of exercises.CHECKERS
    points: int  # the exercise's stars
    kind: str | None = None  # check_score_function's kind


EXERCISES = [
    Exercise("1.1", "dot_score", "check_score_function", 1, "dot"),
    Exercise("1.2", "additive_score", "check_score_function", 2, "additive"),
    Exercise("2", "embed", "check_token_embedding", 1),
    Exercise("3.1", "sinusoidal", "check_positional_encoding", 2),
    Exercise("3.2", "add_positions", "check_add_positional_encoding", 1),
    Exercise("4", "attention", "check_scaled_dot_product_attention", 2),
    Exercise("5.1a", "split_heads", "check_split_heads", 1),
    Exercise("5.1b", "combine_heads", "check_combine_heads", 1),
    Exercise("5.2", "MyMultiHeadAttention", "check_multi_head_attention", 3),
    Exercise("6.1", "look_ahead_mask", "check_causal_mask", 1),
    Exercise("6.2", "pad_mask", "check_padding_mask", 1),
    Exercise("7", "MyLayerNorm", "check_layer_norm", 2),
    Exercise("8", "make_masks", "check_transformer_masks", 2),
    Exercise("9.1", "smooth", "check_label_smoothing", 1),
    Exercise("9.2", "lr_at", "check_noam_lr", 1),
    Exercise("10.1", "greedy", "check_greedy_decode", 3),
    Exercise("10.2", "lp", "check_length_penalty", 1),
    Exercise("10.3", "beam", "check_beam_search", 3),
    Exercise("10.4", "cached_step", "check_cached_beam_step", 2),
    Exercise("10.5", "top_p", "check_top_p", 1),
    Exercise("10.6", "corpus_bleu", "check_corpus_bleu", 2),
]


@dataclass
class Row:
    """One cell of the grade table: a student's result on one exercise."""

    student: str  # the submission's file name without .ipynb
    exercise: str
    name: str
    points: int
    max_points: int
    status: str  # passed, failed, not implemented, missing, timed out, error
    verdict: str  # the checker's one-line summary, or what happened instead
    hint: str = ""
    note: str = ""  # what else the grader saw: printed output, code it skipped


# --- reading a submission ---------------------------------------------------------

_KEPT = (
    ast.Import,
    ast.ImportFrom,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
)


class NotASubmission(Exception):
    """The file is not a notebook of chapter 11 (the message says what it is)."""


def read_program(path: Path) -> tuple[list[str], list[str]]:
    """The submission's imports, functions, classes and constants, as code snippets,
    and notes on the cells that could not be read. Nothing else runs: no training."""
    try:
        nb = json.loads(path.read_text(encoding="utf8"))
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError(f"cells is a {type(cells).__name__}")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise NotASubmission(
            f"not a readable notebook: {type(e).__name__}: {str(e)[:120]}"
        ) from e
    meta = (nb.get("metadata") or {}).get("transformer_edu") or {}
    chapter = meta.get("chapter")
    if chapter is not None and chapter != CHAPTER:
        raise NotASubmission(f"a notebook of chapter {chapter}, not of {CHAPTER}")
    snippets, notes = [], []
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        # IPython's %magics and !shell lines are not Python: a `pass` in their place
        lines = [
            line[: len(line) - len(line.lstrip())] + "pass"
            if line.lstrip().startswith(("%", "!"))
            else line
            for line in source.splitlines()
        ]
        code = "\n".join(lines)
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            notes.append(f"cell {i} has a syntax error (line {e.lineno}): {e.msg}")
            continue
        for node in tree.body:
            if isinstance(node, _KEPT) or _is_constant(node):
                snippets.append(ast.get_source_segment(code, node) or "")
    # without the student edition's metadata, the stubs' names tell the chapter
    names = {e.name for e in EXERCISES}
    found = {n for s in snippets for n in _defined(s)} & names
    if chapter is None and len(found) < len(names) / 2:
        title = next(
            (
                line.strip()
                for c in cells
                if isinstance(c, dict) and c.get("cell_type") == "markdown"
                for line in "".join(c.get("source", "")).splitlines()
                if line.startswith("# ")
            ),
            "no title",
        )
        raise NotASubmission(
            f"not the notebook of {CHAPTER} ({title[:40]!r}): it defines "
            f"{len(found)} of the {len(names)} names the exercises ask for"
        )
    return snippets, notes


def _is_constant(node: ast.stmt) -> bool:
    """An assignment of a literal or of another name (``EPS = 1e-5``, ``f = g``)."""
    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
        return False
    if isinstance(node.value, (ast.Name, ast.Attribute)):
        return True
    try:
        ast.literal_eval(node.value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _defined(snippet: str) -> set[str]:
    """The names a kept snippet defines at the top level."""
    node = ast.parse(snippet).body[0]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [getattr(node, "target", None)]
    )
    return {t.id for t in targets if isinstance(t, ast.Name)}


# --- grading one submission in a subprocess -------------------------------------------


def grade_submission(
    path: Path,
    workdir: Path,
    time_limit: float = TIME_LIMIT_S,
    output_limit: int = OUTPUT_LIMIT,
) -> list[Row]:
    """Every exercise's row for one notebook (never raises for a bad submission)."""
    student = path.stem
    try:
        snippets, notes = read_program(path)
    except NotASubmission as e:
        return [_row(student, ex, "error", str(e)) for ex in EXERCISES]
    workdir.mkdir(parents=True)
    (workdir / "program.json").write_text(json.dumps(snippets), encoding="utf8")
    results: dict[str, dict] = {}
    load_problem = ""
    pending = [ex.id for ex in EXERCISES]
    while pending:
        done, running, why = _run_child(workdir, pending, time_limit, output_limit)
        results.update(done)
        if running is None:  # finished, or ended between exercises
            break
        if running in ("startup", "load"):
            load_problem = (
                f"loading your code {why}" if running == "load"
                else f"the grader's Python did not start: it {why}"
            )  # fmt: skip
            break
        results[running] = {"status": "timed out" if "limit" in why else "error",
                            "verdict": f"your code {why}"}  # fmt: skip
        pending = [i for i in pending if i not in results]
    rows = []
    for ex in EXERCISES:
        got = results.get(ex.id)
        if got is None:
            what = load_problem or "the grader stopped before this exercise"
            status = "timed out" if "limit" in what else "error"
            rows.append(_row(student, ex, status, what))
            continue
        row = _row(student, ex, got["status"], got["verdict"], got.get("hint") or "")
        row.note = "; ".join(filter(None, [got.get("note", ""), *notes]))
        rows.append(row)
    return rows


def _row(student: str, ex: Exercise, status: str, verdict: str, hint: str = "") -> Row:
    points = ex.points if status == "passed" else 0
    return Row(student, ex.id, ex.name, points, ex.points, status, verdict, hint)


def _run_child(
    workdir: Path, pending: list[str], time_limit: float, output_limit: int
) -> tuple[dict[str, dict], str | None, str]:
    """Run the pending exercises in a fresh process: (results, the item running when it
    stopped early or None, why it stopped)."""
    read_end, write_end = os.pipe()
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env.update(
        PYTHONPATH=os.pathsep.join([package_root, env.get("PYTHONPATH", "")]),
        PYTHONDONTWRITEBYTECODE="1",  # no __pycache__ written anywhere
        HOME=str(workdir),  # caches (matplotlib, torch) go to the work folder
        TMPDIR=str(workdir),
        MPLCONFIGDIR=str(workdir),
        MPLBACKEND="Agg",
        OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
        TRANSFORMER_EDU_GRADER_PID=str(os.getpid()),  # the child's watchdog reads it
    )
    # This module by its import name: run as `python -m …grading`, __name__ is
    # "__main__", and `python -m __main__` is no module at all.
    command = [sys.executable, "-m", "transformer_edu.exercises.grading", "--child",
               str(write_end), str(output_limit), *pending]  # fmt: skip
    with open(workdir / "stderr.txt", "ab") as stderr:
        proc = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            pass_fds=[write_end],
            start_new_session=True,  # its own process group: killed as one
        )
    os.close(write_end)
    results: dict[str, dict] = {}
    running, deadline, buffer = "startup", time.monotonic() + STARTUP_S, b""
    why = ""
    with os.fdopen(read_end, "rb", buffering=0) as pipe:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([pipe], [], [], max(left, 0))
            if not ready:
                limit = STARTUP_S if running == "startup" else time_limit
                why = f"ran past the time limit of {limit:g} s"
                os.killpg(proc.pid, signal.SIGKILL)
                break
            chunk = pipe.read(65536)
            if not chunk:  # the process ended
                code = proc.wait()
                why = f"ended the grader's process (exit code {code})"
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                if "start" in message:
                    running = message["start"]
                    deadline = time.monotonic() + time_limit
                else:
                    results[message.pop("id")] = message
                    running = None
    proc.wait()
    if running is None:
        why = ""
    return results, running, why


# --- the child process ------------------------------------------------------------


class _Capped(io.TextIOBase):
    """A stdout that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int):
        self.limit, self.kept, self.total = limit, [], 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        room = self.limit - sum(map(len, self.kept))
        if room > 0:
            self.kept.append(text[:room])
        self.total += len(text)
        return len(text)

    def take(self) -> str:
        """A note on what was printed since the last call, and reset."""
        total = self.total
        self.kept, self.total = [], 0
        if total <= self.limit:
            return ""
        return f"printed {total:,} characters (the grader keeps {self.limit:,})"


def _guard_files(workdir: str) -> None:
    """From now on, writing or deleting a file outside ``workdir`` raises."""
    root = os.path.realpath(workdir)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    checked = {"os.remove", "os.unlink", "os.rmdir", "shutil.rmtree", "os.rename",
               "os.replace", "os.mkdir", "os.chmod", "os.truncate", "os.symlink",
               "os.link", "shutil.copyfile", "shutil.move"}  # fmt: skip

    def inside(path) -> bool:
        if isinstance(path, int):
            return True  # an open file descriptor: checked when it was opened
        path = os.fsdecode(path)
        full = os.path.realpath(os.path.join(root, path))
        return full == root or full.startswith(root + os.sep)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writes = (
                any(c in str(mode) for c in "wax+")
                if mode
                else bool(flags & write_flags)
            )
            paths = [path] if writes else []
        elif event in checked:
            paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]
        else:
            return
        for p in paths:
            if p is not None and not inside(p):
                raise PermissionError(
                    f"the grader lets submissions write only inside their own folder "
                    f"({event} {os.fsdecode(p)!r})"
                )

    sys.addaudithook(hook)


def _exit_with_grader(grader_pid: int, every_s: float = 0.5) -> threading.Thread:
    """Stop this process when the grader that started it is gone.

    The child runs in its own session (so that the grader can kill it as one group),
    so a grader killed outright (SIGKILL, a test run stopped) would otherwise leave it
    running: a student's endless loop busy on a core long after anybody reads its
    results. A daemon thread polls the parent's pid; Python switches threads inside
    loops and torch releases the GIL in its kernels, so it runs while student code does.
    """

    def watch() -> None:
        while os.getppid() == grader_pid:
            time.sleep(every_s)
        os._exit(3)

    thread = threading.Thread(target=watch, name="grader-watchdog", daemon=True)
    thread.start()
    return thread


def _child(fd: int, output_limit: int, pending: list[str]) -> None:
    """Load the program, then check each pending exercise; report on pipe ``fd``."""
    grader = os.environ.get("TRANSFORMER_EDU_GRADER_PID")
    _exit_with_grader(int(grader) if grader else os.getppid())
    pipe = os.fdopen(fd, "w", buffering=1)

    def send(**message) -> None:
        pipe.write(json.dumps(message) + "\n")
        pipe.flush()

    from transformer_edu.exercises import CHECKERS  # before the guard: it reads files

    captured = _Capped(output_limit)
    sys.stdout = sys.stderr = captured
    snippets = json.loads(Path("program.json").read_text(encoding="utf8"))
    _guard_files(os.getcwd())
    send(start="load")
    namespace: dict = {"__name__": "__main__"}
    for snippet in snippets:
        try:
            exec(compile(snippet, "<your notebook>", "exec"), namespace)
        except BaseException:  # noqa: S110  a failing import or def: the rest still runs
            pass
    loaded = captured.take()
    by_id = {ex.id: ex for ex in EXERCISES}
    for ex_id in pending:
        ex = by_id[ex_id]
        send(start=ex_id)
        fn = namespace.get(ex.name)
        if fn is None:
            send(id=ex_id, status="missing", verdict=f"{ex.name} is not defined")
            continue
        kwargs = {"kind": ex.kind} if ex.kind else {}
        try:
            result = CHECKERS[ex.checker](fn, quiet=True, **kwargs)
            verdict, status, hint = result.summary(), result.status, result.hint or ""
            if status == "failed":  # the checker's first line says what went wrong
                lines = result.message.splitlines()
                verdict = lines[1].strip() if len(lines) > 1 else verdict
        except BaseException as e:  # exit(), KeyboardInterrupt: still one row
            verdict, status, hint = f"your code raised {type(e).__name__}", "error", ""
        note = "; ".join(filter(None, [loaded, captured.take()]))
        loaded = ""
        send(id=ex_id, status=status, verdict=verdict, hint=hint, note=note)


# --- the whole folder -------------------------------------------------------------


def grade(
    submissions: Path,
    out: Path,
    time_limit: float = TIME_LIMIT_S,
    output_limit: int = OUTPUT_LIMIT,
) -> list[Row]:
    """Grade every ``*.ipynb`` in ``submissions``; write ``out/grades.csv``."""
    paths = sorted(submissions.glob("*.ipynb"))
    if not paths:
        raise ValueError(f"no .ipynb file in {submissions}")
    out.mkdir(parents=True, exist_ok=True)
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    rows: list[Row] = []
    for path in paths:
        workdir = work / path.stem
        rows += grade_submission(path, workdir, time_limit, output_limit)
        shutil.rmtree(workdir, ignore_errors=True)  # the next student starts clean
    shutil.rmtree(work, ignore_errors=True)
    with open(out / "grades.csv", "w", newline="", encoding="utf8") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    return rows


_MARK = {"not implemented": "·", "missing": "-", "failed": "✗", "timed out": "⏱",
         "error": "!"}  # fmt: skip


def table(rows: list[Row], width: int = 100) -> str:
    """The grades as text: student × exercise (points, or a mark for why none), each
    total, then the verdict and hint of every answer that failed."""
    ids = [ex.id for ex in EXERCISES]
    cells: dict[str, dict[str, str]] = {}
    totals: dict[str, list[int]] = {}
    for r in rows:
        mark = str(r.points) if r.status == "passed" else _MARK.get(r.status, "?")
        cells.setdefault(r.student, {})[r.exercise] = mark
        t = totals.setdefault(r.student, [0, 0])
        t[0], t[1] = t[0] + r.points, t[1] + r.max_points
    name_w = max(7, *(len(s) for s in cells))
    lines = [f"{'student':{name_w}s} " + " ".join(f"{i:>4s}" for i in ids) + "  total"]
    for student, marks in cells.items():
        p, m = totals[student]
        row = " ".join(f"{marks.get(i, '?'):>4s}" for i in ids)
        lines.append(f"{student:{name_w}s} {row}  {p}/{m}")
    lines.append(
        "points when passed; · not implemented, ✗ failed, ⏱ timed out, ! error, "
        "- missing"
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
    notes = [r for r in rows if r.note]
    for r in notes:
        lines.append(f"{r.student} {r.exercise} note: {r.note[: width - 20]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(int(argv[1]), int(argv[2]), argv[3:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="a folder of .ipynb files")
    parser.add_argument(
        "--out", type=Path, default=Path("grades"), help="output folder"
    )
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT_S,
                        help="seconds per exercise")  # fmt: skip
    args = parser.parse_args(argv)
    rows = grade(args.submissions, args.out, args.time_limit)
    print(table(rows))
    print(f"\nwrote {args.out / 'grades.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
