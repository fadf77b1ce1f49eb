"""Grade a folder of submitted notebooks of chapter 11.

    python -m transformer_edu.grading SUBMISSIONS [--out grades]

The checkers are the tests: each exercise's points come from its checker's verdict
(partial credit: the share of its cases passed), and its hint goes into the table
and into the student's feedback file. Each answer is checked on the notebook's fixed
cases and again on cases drawn for the run from a secret number (``--draw``), and
gets the share of the pass where it did worse.

Where the grade is decided: in this process, which never runs a line of a student's
code. Each submission's code runs in a *runner* of its own (``runner``), forked by a
*warden* (``warden``) that imported torch once; the runner locks itself in before the
code loads (``confine``: Landlock, seccomp, an audit hook) and answers calls over a
pipe with signed messages (``wire``). The checker runs here, with proxies for the
student's function or class (``judge``, ``mirror``): its expected values are computed
here and compared here. Each student's grades are written (``report``) once their
runner, and every process it could have left behind, is gone; whatever goes wrong
with one notebook becomes that student's rows, and the run goes on.

Adding a graded exercise needs no change to the grader's machinery, and no table
to edit: it is read from the checkers' registry (``exercises.registry``).

1. Write its checker beside the chapter's others (``exercises/<topic>.py``), as they
   are written: ``check_x(fn, quiet=False, **options) -> CheckResult`` over
   ``harness.run_cases``; the learner's code is called only through
   ``harness.call(fn, ...)``; expected values are computed and compared in the
   checker; the references it refuses are named with ``harness.references(...)``
   (the grader's runner watches the same tables); its random inputs come from
   ``harness.randn``, ``manual_seed`` or ``generator`` and its tables of sizes,
   tokens or numbers pass through ``harness.drawn(table, draw_a_row)``, so that the
   grader's second pass checks other cases of the same kinds. Above it, the
   decorator that registers it: ``@exercise("6.1", "look_ahead_mask", points=1)``,
   the id as chapter 11 numbers it, the name the student defines, the points (its
   stars); ``kind=`` if the checker takes one; ``chapter=`` for a build-it-yourself
   exercise (A.n), the chapter it is graded with. The grader's ``EXERCISES`` (in
   the order it grades them: by chapter, a chapter's A.n after its numbered ones),
   ``exercises.CHECKERS`` and ``from transformer_edu.exercises import check_x``
   follow. (A new topic module: one line in ``exercises/__init__.py``'s list.)
2. Add its cells to chapter 11 (``chapters/11_exercises.ipynb``): its row in the
   table of exercises, its heading ``### Exercise 6.1 ★ …`` (as many stars as
   points), the task, the stub that calls the checker on the student's name, the
   solution (tagged ``solution``) and its box "What the checker catches"; then
   ``make translations`` and ``make student`` (the Japanese edition, the student and
   solutions editions).
3. Tests: its forbidden and allowed answers in ``tests/exercises/test_references.py`` and its
   reference and a handwritten answer in ``tests/exercises/test_exercises.py`` (tests fail while
   a registered checker has none, and while chapter 11 lacks its id, its stars or its
   stub: ``tests/exercises/test_registry.py``); ``tests/exercises/test_exercises.py`` then checks that its
   drawn cases pass correct code and fail a table of the fixed cases' answers.

What crosses to the student's process: the arguments ``call`` passes are pickled
(tensors, numbers, lists, the package's modules, a model included; a lambda or a
function defined inside the checker cannot go: give a module-level one), and what the
student's code returns comes back as plain values (tensors, numbers, lists, tuples,
dicts) or, for an object such as an ``nn.Module``, as a mirror whose calls run there.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from ..exercises import CHECKERS
from ..exercises.harness import (
    CALLED_REFERENCE,
    WATCH_FAILED,
    CheckResult,
    count_every_case,
    drawn_cases,
)
from ..exercises.registry import EXERCISES, Exercise
from .judge import RunnerGone, Warden, allowance, proxy
from .mirror import StudentExit
from .report import Row, table, write_all
from .submissions import (
    CHAPTER,
    NotASubmission,
    Snippet,
    Submission,
    copied,
    find,
    read_program,
)

TIME_LIMIT_S = 30.0  # per exercise, and per definition when the notebook loads
SUBMISSION_LIMIT_S = 300.0  # for one notebook: loading, restarts and every check
MAX_RESTARTS = 10  # fresh runners for one notebook after its first
OUTPUT_LIMIT = 4000  # characters printed in one check before the grader notes it


NAMES = {e.name for e in EXERCISES}
IDS = [e.id for e in EXERCISES]

__all__ = ["CHAPTER", "EXERCISES", "Exercise", "Limits", "NotASubmission", "Row", "grade",
           "grade_submission", "main", "read_program", "table"]  # fmt: skip


def _row(student: str, ex: Exercise, status: str, verdict: str, **more) -> Row:
    return Row(student, ex.id, ex.name, 0, ex.points, 0, 0, status, verdict, **more)


@dataclass
class Limits:
    """What one submission may take: seconds per exercise and per definition loaded,
    seconds for the whole notebook (loading, restarts and checks), restarts of its
    runner, and characters printed before the grader notes it. Seconds are of the CPU
    time its code uses, so that a busy machine costs no points. Code that waits
    without computing is stopped once it has idled ``judge.allowance`` of its limit
    (3 × the limit + 5 s; time spent ready to run while every core was busy is not
    idling), and a submission ends after that allowance of its budget on the wall
    clock."""

    time: float = TIME_LIMIT_S
    submission: float = SUBMISSION_LIMIT_S
    restarts: int = MAX_RESTARTS
    output: int = OUTPUT_LIMIT


class _Budget:
    """The budget of one submission: the CPU time its runners use, with the wall
    clock as the backstop for code that waits without computing (``judge``)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.wall_end = time.monotonic() + allowance(limits.submission)
        self.spent = 0.0  # CPU seconds of the runners that ended
        self.runner = None  # the one running now

    def start(self, runner) -> None:
        self.runner = runner

    def stop(self) -> None:
        if self.runner is not None:
            self.spent += self.runner.cpu_used() or 0.0
            self.runner = None

    def left(self) -> float:
        used = self.spent
        if self.runner is not None:
            used += self.runner.cpu_used() or 0.0
        return min(self.limits.submission - used, self.wall_end - time.monotonic())

    def limit(self, runner) -> None:
        """Set the runner's next step's limit: the exercise's, or what is left."""
        runner.set_limit(max(0.01, min(self.limits.time, self.left())), self.wall_end)


def grade_submission(sub: Submission, warden: Warden, workdir: Path,
                     limits: Limits, draw: int = 0) -> list[Row]:  # fmt: skip
    """Every exercise's row for one submission (never raises for a bad one); with a
    ``draw``, each exercise is checked on the fixed cases and on cases drawn from it
    (``harness.drawn_cases``)."""
    try:
        snippets, notes = read_program(sub.path, NAMES)
    except NotASubmission as e:
        return [_row(sub.student, ex, "error", str(e)) for ex in EXERCISES]
    notes = sub.notes + notes
    workdir.mkdir(parents=True)
    budget = _Budget(limits)
    skipped: dict[int, str] = {}  # snippet -> why it was skipped
    load_notes: dict[int, str] = {}  # snippet -> what it raised
    results: dict[str, Row] = {}
    pending = list(EXERCISES)
    retried: set[str] = set()  # exercises checked again after their runner ended
    for _ in range(limits.restarts + 1):  # each restart skips a definition, or retries
        if not pending or budget.left() <= 0:
            break
        order = {"snippets": [s.order() for s in snippets], "skip": set(skipped),
                 "output_limit": limits.output}  # fmt: skip
        runner = warden.runner(workdir, order)
        budget.start(runner)
        try:
            header, _ = runner.read()
            problems = header.get("problems")
            if type(problems) is list:
                notes += [
                    p[:300] for p in problems if type(p) is str and p not in notes
                ]
            if not _load(runner, snippets, skipped, load_notes, budget):
                continue  # a definition hung or crashed the runner: again without it
            while pending and runner.alive and budget.left() > 0:
                ex = pending[0]
                results[ex.id] = _check(runner, ex, sub.student, snippets, skipped,
                                        load_notes, budget, draw)  # fmt: skip
                pending.pop(0)
        except RunnerGone as gone:
            checking = runner.phase.startswith("while checking")
            if checking and pending and gone.status == "error" and runner.calls == 0 \
                    and pending[0].id not in retried:  # fmt: skip
                # it ended before this exercise's code ran (an earlier one's doing):
                # check it once more in a fresh runner
                retried.add(pending[0].id)
                continue
            if checking and pending:
                ex = pending.pop(0)
                results[ex.id] = _gone_row(sub.student, ex, gone)
            elif runner.phase == "starting":
                why = f"the grader's runner did not start: it {gone.why}"
                for ex in pending:
                    results[ex.id] = _row(sub.student, ex, "error", why)
                pending = []
        finally:
            runner.end(kill=True)
            budget.stop()
    for ex in pending:
        if budget.left() <= 0:
            why = (f"the grader's {limits.submission:g} s for the whole notebook ran "
                   "out before this exercise")  # fmt: skip
            results[ex.id] = _row(sub.student, ex, "timed out", why)
        else:
            why = (f"the grader restarted this notebook {limits.restarts} times (its "
                   "most) before this exercise")  # fmt: skip
            results[ex.id] = _row(sub.student, ex, "error", why)
    rows: list[Row] = []
    # what concerns the whole notebook goes on its first row (and into the feedback)
    notes += [f"{snippets[i].label} {why}" for i, why in skipped.items()]
    notes += [f"{snippets[i].label} {why}" for i, why in load_notes.items()]
    copies = copied(snippets, NAMES)  # answers that are the published solutions
    for ex in EXERCISES:
        row = results[ex.id]
        if not rows:
            row.note = "; ".join(filter(None, [row.note, *notes]))
        if ex.name in copies:
            row.note = "; ".join(filter(None, [row.note, copies[ex.name]]))
        rows.append(row)
    return rows


def _load(runner, snippets: list[Snippet], skipped: dict, load_notes: dict,
          budget: _Budget) -> bool:  # fmt: skip
    """Read the runner's loading of each definition; False when one of them stopped
    it (that one is skipped from now on)."""
    for i, snippet in enumerate(snippets):
        if i in skipped:
            continue
        runner.phase = f"while loading {snippet.label}"
        try:
            budget.limit(runner)
            runner.read()  # "loading i"
            header, _ = runner.read()  # "loaded i"
        except RunnerGone as gone:
            skipped[i] = f"{gone.why} when the grader loaded it: skipped"
            return False
        raised = header.get("raised")
        if raised and type(raised) is str:
            load_notes[i] = f"raised {raised[:300]} when the grader loaded it"
    runner.phase = "while checking"
    return True


def _check(runner, ex: Exercise, student: str, snippets: list[Snippet],
           skipped: dict, load_notes: dict, budget: _Budget,
           draw: int = 0) -> Row:  # fmt: skip
    runner.phase = f"while checking exercise {ex.id}"
    budget.limit(runner)
    runner.sets_used, runner.printed, runner.calls = set(), 0, 0
    try:
        fn = proxy(runner, ex.name)
    except RuntimeError as e:  # the runner's answer was not one the grader reads
        return _row(student, ex, "error", str(e)[:300])
    if fn is None:  # say why: what went wrong loading the cell that defines it
        cells = {s.cell for s in snippets if ex.name in s.defines}
        why = [f"{s.label} {load_notes.get(i) or skipped[i]}"
               for i, s in enumerate(snippets)
               if s.cell in cells and (i in load_notes or i in skipped)]  # fmt: skip
        verdict = f"{ex.name} is not defined" + (f": {'; '.join(why)}" if why else "")
        hung = any("time limit" in w for w in why)
        return _row(student, ex, "timed out" if hung else "missing", verdict)
    kwargs = {"kind": ex.kind} if ex.kind else {}
    try:
        with count_every_case():
            result = CHECKERS[ex.checker](fn, quiet=True, **kwargs)
            if draw and result.cases_passed:  # the fixed cases left points to lose
                budget.limit(runner)
                with drawn_cases(draw):
                    again = CHECKERS[ex.checker](fn, quiet=True, **kwargs)
                    result = _weaker(result, again)
    except RunnerGone:
        raise
    except StudentExit as e:
        return _row(student, ex, "error", f"your code raised {type(e).__name__}")
    except Exception as e:  # the checker could not handle what came back
        return _row(
            student,
            ex,
            "error",
            f"the grader could not check it: {type(e).__name__}: {e}"[:300],
        )
    verdict, status, hint = result.summary(), result.status, result.hint or ""
    called = [n for i in runner.sets_used for n in runner.called(i)]
    if status == "passed" and called:  # a reference called where no case looked
        status, hint = "failed", ""
        verdict = f"your code {CALLED_REFERENCE}: {', '.join(called)}"
        if all(n.startswith(WATCH_FAILED) for n in called):
            verdict = f"{called[0]} while your code ran: the exercise cannot be graded"
        result.cases_passed = 0
    elif status == "failed":  # the checker's second line says what went wrong
        lines = result.message.splitlines()
        verdict = lines[1].strip() if len(lines) > 1 else verdict
        if result.case and result.case.startswith("drawn: "):
            verdict = f"on a case drawn for this run ({result.case[7:]}): {verdict}"
    points = ex.points if status == "passed" else ex.points * _share(result)
    if status != "passed" and status != "failed":
        points = 0
    note = ""
    if runner.printed > budget.limits.output:
        note = f"printed {runner.printed:,} characters (the grader shows none)"
    return Row(student, ex.id, ex.name, points, ex.points, result.cases_passed,
               result.cases_total, status, verdict, hint, note, result.message)  # fmt: skip


def _share(result: CheckResult) -> float:
    return result.cases_passed / result.cases_total if result.cases_total else 0.0


def _weaker(fixed: CheckResult, drawn: CheckResult) -> CheckResult:
    """The pass that gives fewer points: the fixed cases' (the notebook's verdict) or,
    when it passed a smaller share, the drawn cases'. Code that passes the fixed
    cases from a table of their answers passes few drawn ones; an honest partial
    answer keeps the share the notebook showed."""
    if drawn.status == "not implemented":  # not what it said a moment ago: a failure
        drawn.status = "failed"
    return drawn if _share(drawn) < _share(fixed) else fixed


def _gone_row(student: str, ex: Exercise, gone: RunnerGone) -> Row:
    case = next(
        (n for n in getattr(gone, "__notes__", []) if n.startswith("case ")), ""
    )
    where = f" ({case})" if case else ""
    return _row(student, ex, gone.status, f"your code {gone.why}{where}")


def new_draw() -> int:
    """A secret number for one run's drawn cases (never 0: that is the fixed cases)."""
    return secrets.randbelow(2**31 - 1) + 1


def grade(submissions: Path, out: Path, limits: Limits | None = None,
          draw: int | None = None) -> list[Row]:  # fmt: skip
    """Grade every submission in ``submissions`` (see ``submissions.find``); write
    ``out/grades.csv``, ``out/lms.csv`` and ``out/feedback/<student>.md``, again as
    each student is graded (a run stopped halfway keeps the grades it gave).

    Each exercise is checked on its fixed cases and on as many drawn from ``draw``
    (a secret of this run, the same for every student, when None; 0: the fixed
    cases only), and gets the points of the pass where it did worse.

    Nothing one submission does stops the run: whatever goes wrong while grading it
    (in the grader too) becomes that student's rows, and the rest are graded."""
    limits = limits or Limits()
    draw = new_draw() if draw is None else draw
    subs = find(submissions, NAMES)
    if not subs:
        raise ValueError(f"no .ipynb file in {submissions} or in a folder of it")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="transformer_edu-grading-"))
    hidden = [str(submissions), str(out)]
    warden = Warden(hidden)
    rows: list[Row] = []
    left: list[int] = []
    try:
        for n, sub in enumerate(subs):
            folder = work / f"{n:04d}"
            try:
                own = grade_submission(sub, warden, folder, limits, draw)
            except (Exception, RunnerGone) as e:  # the grader's failure, not the grade
                own = _failed(sub, e)
                if warden.proc.poll() is not None:  # the warden itself ended: anew
                    left += warden.close()
                    warden = Warden(hidden)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            rows += own
            write_all(rows, out, IDS, only=[sub.student])
    finally:
        left += warden.close()
        shutil.rmtree(work, ignore_errors=True)
    if left:
        raise RuntimeError(f"processes {left} outlived grading")
    return rows  # every file was written as its student finished


def _failed(sub: Submission, e: BaseException) -> list[Row]:
    """The rows of a submission the grader could not grade, with what went wrong (the
    traceback's last lines in the first row's note, for the teacher to report)."""
    where = traceback.format_exception(e)[-3:]
    why = (f"the grader could not grade this notebook ({type(e).__name__}: "
           f"{str(e)[:200]}); the other students were graded: please report it")  # fmt: skip
    rows = [_row(sub.student, ex, "error", why) for ex in EXERCISES]
    rows[0].note = " ".join("".join(where).split())[:1000]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "submissions",
        type=Path,
        help="a folder of .ipynb files, or of one folder per student",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("grades"), help="output folder"
    )
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT_S,
                        help="CPU seconds per exercise (each of its two passes), and per "
                        "definition loaded (code that waits is stopped at 3 × this "
                        "+ 5 s on the wall clock)")  # fmt: skip
    parser.add_argument("--submission-limit", type=float, default=SUBMISSION_LIMIT_S,
                        help="CPU seconds for one notebook, everything included")  # fmt: skip
    parser.add_argument("--draw", type=int, default=None,
                        help="the number the run's drawn cases come from (default: "
                        "a new secret one; 0: only the fixed cases), to grade "
                        "again exactly as a run did")  # fmt: skip
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    start = time.monotonic()
    limits = Limits(time=args.time_limit, submission=args.submission_limit)
    draw = new_draw() if args.draw is None else args.draw
    rows = grade(args.submissions, args.out, limits, draw)
    print(table(rows, IDS))
    n = len({r.student for r in rows})
    print(f"\ngraded {n} submissions in {time.monotonic() - start:.0f} s; wrote "
          f"{args.out / 'grades.csv'}, {args.out / 'lms.csv'} and "
          f"{args.out / 'feedback'}/")  # fmt: skip
    if draw:
        print(f"cases drawn from {draw} (the same again: --draw {draw}; keep it from "
              "the students until the grades are final)")  # fmt: skip
    return 0
