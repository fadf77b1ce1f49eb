"""The classroom edition: the student notebook holds no solution and is up to date.
The grader, run as a teacher runs it (`make grade`), turns a folder of notebooks into
grades that survive bad submissions and every trick that once fooled it (issue 34),
loses no honest work, and writes what a teacher hands back.

(nbval runs student/*.ipynb top to bottom, unsolved, in `make test`.)
"""

from __future__ import annotations

import ast
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import _submissions as subs  # tests/helpers: pyproject's pythonpath
import nbformat
import pytest
import student_edition  # book/ is on pythonpath

from transformer_edu.exercises import BUG_ZOO, CALLED_REFERENCE
from transformer_edu.grading import EXERCISES, NAMES, read_program

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = subs.CHAPTER
STUDENT = subs.STUDENT
IDS = [e.id for e in EXERCISES]
_cells = subs.cells
_solution_cells = subs.solution_cells


# --- the student edition -------------------------------------------------------------


def test_the_student_edition_is_up_to_date():
    assert student_edition.stale(ROOT) == [], "run: make student"


def test_every_solution_cell_is_tagged_and_every_exercise_has_one():
    solutions = _solution_cells()
    defined = {
        node.name
        for src in solutions
        for node in ast.parse(src).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }
    assert len(solutions) == len({e.heading for e in EXERCISES})  # 5.1: two in one
    # a solution cell holds the solution; no other cell defines a *_solution
    others = [
        c.source
        for c in _cells(CHAPTER)
        if c.cell_type == "code" and "solution" not in c.metadata.get("tags", [])
    ]
    for name in defined:
        assert not any(f"def {name}" in s or f"class {name}" in s for s in others)


def test_the_student_edition_holds_no_solution_code():
    student = {line.strip() for c in _cells(STUDENT) for line in c.source.splitlines()}
    # lines the chapter also has outside its solutions (a stub's `def` line) are fine
    shared = {
        line.strip()
        for c in _cells(CHAPTER)
        if "solution" not in c.metadata.get("tags", [])
        for line in c.source.splitlines()
    }
    checked = 0
    for source in _solution_cells():
        for line in source.splitlines():
            if line.strip() and line.strip() not in shared:
                assert line.strip() not in student, f"solution code: {line.strip()}"
                checked += 1
    assert checked > 60
    text = "\n".join(student)
    assert "_solution" not in text and "Solution(" not in text


def test_the_student_edition_keeps_every_stub_and_names_its_chapter():
    nb = nbformat.read(STUDENT, as_version=4)
    assert nb.metadata["transformer_edu"] == {
        "edition": "student",
        "chapter": "11_exercises",
    }
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for ex in EXERCISES:
        assert f"def {ex.name}(" in code or f"class {ex.name}(" in code, ex.name
    # every stub of the chapter: one in each function, two in each class, one in each
    # method of A.2-A.4 whose __init__ is given
    stub = "raise NotImplementedError  # your code here"
    chapter = [
        c.source
        for c in _cells(CHAPTER)
        if c.cell_type == "code" and "solution" not in c.metadata.get("tags", [])
    ]
    assert code.count(stub) == sum(s.count(stub) for s in chapter) >= len(EXERCISES)
    assert "Solve exercise 4 first" in code


def test_the_student_edition_has_its_own_colab_badge(tmp_path):
    nb = nbformat.read(STUDENT, as_version=4)
    assert "blob/main/student/11_exercises.ipynb" in nb.cells[0].source
    assert "colab-install" in next(
        c for c in nb.cells if c.cell_type == "code"
    ).metadata.get("tags", [])
    guide = (ROOT / "teachers_guide.md").read_text(encoding="utf8")
    assert nb.cells[0].source.split("](")[-1] in guide  # the same link in the guide


def test_a_stale_student_edition_is_detected(tmp_path):
    # what the edition is written from: the chapter, the book's config, the guide that
    # links to it, and (for its Markdown rendered as plain) the references and the values
    for name in ("_config.yml", "_toc.yml", "teachers_guide.md", "references.bib",
                 "book/glue_values.json"):  # fmt: skip
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((ROOT / name).read_text(encoding="utf8"))
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / CHAPTER.name).write_bytes(CHAPTER.read_bytes())
    assert len(student_edition.stale(tmp_path)) == 1  # never written
    assert student_edition.write(tmp_path) == [tmp_path / "student" / CHAPTER.name]
    assert student_edition.stale(tmp_path) == []
    config = (tmp_path / "_config.yml").read_text()
    (tmp_path / "_config.yml").write_text(
        config.replace("transformer-edu/attention", "someone/attention")
    )
    assert len(student_edition.stale(tmp_path)) == 2  # the notebook and the guide


# --- grading, through `make grade` ----------------------------------------------------

# seconds per exercise and per definition loaded, in these tests (`make grade`'s default
# is 30): two submissions run into it on purpose; an honest exercise's check or
# definition took at most 0.4 s of it on the project's 2-core machine, quiet
TIME_LIMIT = 6
BUGGY = {
    "zoo_mask_upper": ("look_ahead_mask", "causal mask upper", "6.1"),
    "zoo_no_scaling": ("attention", "no scaling", "4"),
    "zoo_layer_norm": ("MyLayerNorm", "LayerNorm unbiased variance", "7"),
}


def make_grade(
    folder: Path, out: Path, args: str = "", **env: str
) -> subprocess.CompletedProcess:
    """`make grade`, as a teacher runs it (``args``: more of the grader's options)."""
    result = subprocess.run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "grade",
            f"SUBMISSIONS={folder}",
            f"GRADES={out}",
            f"GRADE_ARGS=--time-limit {TIME_LIMIT} {args}",
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result


def read_grades(out: Path) -> dict[str, dict[str, dict]]:
    with open(out / "grades.csv", encoding="utf8") as f:
        rows = list(csv.DictReader(f))
    by: dict[str, dict[str, dict]] = {}
    for r in rows:
        by.setdefault(r["student"], {})[r["exercise"]] = r
    return by


def total(rows: dict[str, dict]) -> float:
    return sum(float(r["points"]) for r in rows.values())


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (its children, theirs, …), from /proc."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except (OSError, ValueError):
            continue
        parents[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        below = [p for p, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def _with_marker(marker: Path) -> list[int]:
    """Processes whose command line names ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if str(marker).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    """One `make grade` over a folder of good, buggy, bad, tricky and honest
    submissions; what it wrote, and when it returned."""
    folder = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("grades")
    markers = tmp_path_factory.mktemp("markers")
    w = subs.write
    w(folder, "solved", subs.with_answers(subs.solved()))
    w(folder, "unsolved", subs.student_nb())
    for student, (name, bug, _) in BUGGY.items():
        w(folder, student, subs.with_answers({name: subs.zoo_cell(name, bug)}))
    w(folder, "raises", subs.with_answers({"pad_mask": (
        "def pad_mask(tokens, pad_idx):\n    raise ValueError('boom')")}))  # fmt: skip
    w(folder, "hangs", subs.with_answers({"look_ahead_mask": (
        "def look_ahead_mask(T):\n    while True:\n        pass")}))  # fmt: skip
    w(folder, "prints", subs.with_answers({"lr_at": (
        "def lr_at(step, d_model, warmup):\n    print('x' * 1_000_000)\n"
        "    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)")}))  # fmt: skip
    canary = markers / "canary.txt"
    canary.write_text("keep me")
    w(folder, "deletes", subs.with_answers({"smooth": (
        "import os, glob\n\ndef smooth(target, vocab_size, smoothing):\n"
        "    for f in glob.glob('*') + glob.glob('../*'):\n"
        "        os.remove(f) if os.path.isfile(f) else None\n"
        f"    os.remove({str(canary)!r})\n"
        "    raise RuntimeError('nothing left')")}))  # fmt: skip
    w(folder, "cheats", subs.with_answers({"look_ahead_mask": (
        "from transformer_edu import causal_mask\n\n"
        "def look_ahead_mask(T):\n    return causal_mask(T)[0, 0]")}))  # fmt: skip
    forbidden, shown = subs.forbidden_answers()
    w(folder, "calls_references", subs.with_answers(forbidden))
    w(folder, "corrupt", '{"cells": [ this is not json')
    # chapter 7's notebook: its Colab link names it; an edition of it, its metadata
    chapter7 = json.loads(
        (ROOT / "chapters" / "07_residual_norm_ffn.ipynb").read_text()
    )
    w(folder, "other_chapter", chapter7)
    chapter7["metadata"]["transformer_edu"] = {"chapter": "07_residual_norm_ffn"}
    w(folder, "other_edition", chapter7)
    w(folder, "solutions_edition",
      json.loads((ROOT / "solutions" / "11_exercises.ipynb").read_text()))  # fmt: skip
    for student, nb in {**subs.holes(out, markers), **subs.honest()}.items():
        w(folder, student, nb)
    # one folder per student, as learning platforms download them
    ada = folder / "ada_1234_assignsubmission_file_"
    w(ada / "old", "draft", subs.student_nb())
    os.utime(ada / "old" / "draft.ipynb", (1e9, 1e9))
    w(ada, "Untitled", subs.with_answers(subs.solved()))
    result = make_grade(folder, out)
    returned = time.monotonic()
    print(result.stdout)
    return {
        "folder": folder, "out": out, "markers": markers, "canary": canary,
        "by": read_grades(out), "returned": returned, "stdout": result.stdout,
        "csv": (out / "grades.csv").read_bytes(), "shown": shown,
    }  # fmt: skip


def test_the_solution_gets_full_marks(graded):
    rows = graded["by"]["solved"].values()
    assert all(r["status"] == "passed" for r in rows), [
        (r["exercise"], r["verdict"]) for r in rows if r["status"] != "passed"
    ]
    assert total(graded["by"]["solved"]) == subs.MAX
    # the solutions as published, pasted into the stubs: each row notes it
    assert all("is the published solution's code" in r["note"] for r in rows)
    unsolved = graded["by"]["unsolved"].values()
    assert not any("published solution" in r["note"] for r in unsolved)


def test_the_unsolved_edition_is_not_implemented_everywhere(graded):
    assert {r["status"] for r in graded["by"]["unsolved"].values()} == {
        "not implemented"
    }


def test_zoo_bugs_get_their_hints_and_credit_for_the_cases_they_pass(graded):
    by = graded["by"]
    for student, (_, bug, exercise) in BUGGY.items():
        row = by[student][exercise]
        assert row["status"] == "failed", row
        assert float(row["points"]) < int(row["max_points"])
        share = int(row["cases_passed"]) / int(row["cases_total"])
        assert float(row["points"]) == pytest.approx(
            round(int(row["max_points"]) * share, 2)
        )
        assert BUG_ZOO[bug].keyword.lower() in (row["hint"] + row["verdict"]).lower()
        others = [r for e, r in by[student].items() if e != exercise]
        assert all(r["status"] == "not implemented" for r in others)


def test_bad_submissions_get_rows_that_say_what_happened(graded):
    by = graded["by"]
    assert "ValueError: boom" in by["raises"]["6.2"]["verdict"]
    hang = by["hangs"]["6.1"]
    assert hang["status"] == "timed out" and "time limit" in hang["verdict"]
    assert "case 1/4: T=4" in hang["verdict"]  # the case that hung
    assert by["hangs"]["6.2"]["status"] == "not implemented"  # graded after the hang
    printed = by["prints"]["9.2"]
    assert (
        printed["status"] == "passed"
        and "printed 28,000,028 characters" in printed["note"]  # fixed + drawn cases
    )
    deleted = by["deletes"]["9.1"]
    assert "PermissionError" in deleted["verdict"], deleted
    assert graded["canary"].read_text() == "keep me"
    assert CALLED_REFERENCE in by["cheats"]["6.1"]["verdict"]
    for student, says in [("corrupt", "not a readable notebook"),
                          ("other_chapter", "chapter 07_residual_norm_ffn (its Colab"),
                          ("other_edition", "chapter 07_residual_norm_ffn (its meta"),
                          ("solutions_edition", "the solutions edition of 11_exerc")]:  # fmt: skip
        rows = by[student].values()
        assert all(r["status"] == "error" and r["points"] == "0" for r in rows)
        assert all(says in r["verdict"] for r in rows), list(rows)[0]


def test_an_answer_that_calls_a_reference_fails_naming_it(graded):
    for r in graded["by"]["calls_references"].values():
        assert r["status"] == "failed" and r["points"] == "0", r
        assert f"{CALLED_REFERENCE}: {graded['shown'][r['exercise']]}," in r["verdict"]


# --- the tricks of issue 34: nothing for what was not solved ------------------------------


def test_every_trick_scores_nothing(graded):
    by = graded["by"]
    tricks = [s for s in by if s.startswith("hole_")]
    assert len(tricks) == 10
    scores = {s: total(by[s]) for s in tricks}
    assert scores == dict.fromkeys(tricks, 0), scores
    # the tricks that call references are told so
    assert CALLED_REFERENCE in by["hole_forges_sealed"]["6.1"]["verdict"]
    assert all(r["status"] == "failed" for r in by["hole_allow_references"].values())
    torch_off = by["hole_disable_torch_function"]
    assert "DisableTorchFunction" in torch_off["7"]["verdict"], torch_off["7"]
    assert "DisableTorchFunction" in torch_off["4"]["verdict"], torch_off["4"]
    assert torch_off["6.1"]["status"] == "failed"  # a copy of causal_mask's code
    # os.system and subprocess were refused: nothing ran
    for student in ("hole_os_system", "hole_setsid"):
        assert "PermissionError" in by[student]["7"]["verdict"], by[student]["7"]
    assert not list(graded["markers"].glob("os_system*"))
    # writing the outputs, or anywhere outside its folder: refused, nothing written
    wrote = by["hole_writes_outputs"]["1.1"]["note"]
    assert "raised RuntimeError: PermissionError PermissionError PermissionError " \
        "PermissionError" in wrote, wrote  # fmt: skip
    assert not list(graded["markers"].glob("written*"))
    # no signal handler, no signal to another process, no timer: all refused
    sent = by["hole_signals"]["1.1"]["note"]
    assert "raised RuntimeError: " + " ".join(["PermissionError"] * 5) in sent, sent
    copies = by["hole_copies_reference"]
    assert CALLED_REFERENCE + ": transformer_edu.model.masks.causal_mask" in \
        copies["6.1"]["verdict"]  # fmt: skip
    assert copies["6.2"]["status"] == "failed"  # the lying tensor is a plain one here
    assert copies["9.1"]["status"] == "error" and "ended" in copies["9.1"]["verdict"]


def test_nothing_a_submission_started_outlives_make_grade(graded):
    assert not _with_marker(graded["markers"])
    time.sleep(max(0.0, graded["returned"] + 10 - time.monotonic()))
    assert (graded["out"] / "grades.csv").read_bytes() == graded["csv"]
    assert not list(graded["markers"].glob("setsid*"))


@pytest.mark.skipif(sys.platform != "linux", reason="the warden's backstop is Linux's")
def test_the_warden_kills_a_process_that_escaped_the_locks(tmp_path):
    """With seccomp off (a switch for this test only), a submission does start a
    process of its own session; the warden, its subreaper, kills it all the same."""
    folder, out, marker = tmp_path / "in", tmp_path / "out", tmp_path / "escaped"
    subs.write(folder, "escapes", subs.escapes(marker))
    make_grade(folder, out, TRANSFORMER_EDU_GRADING_TEST_NO_SECCOMP="1")
    returned, written = time.monotonic(), (out / "grades.csv").read_bytes()
    assert not _with_marker(marker), "a process the submission started is running"
    time.sleep(max(0.0, returned + 10 - time.monotonic()))
    assert not marker.exists() and (out / "grades.csv").read_bytes() == written


# --- honest work is never lost ----------------------------------------------------------------


def test_honest_work_is_graded_as_the_notebook_would(graded):
    by = graded["by"]
    for student, (points, not_passed) in subs.EXPECTED_HONEST.items():
        rows = by[student]
        assert total(rows) == pytest.approx(points), [
            (e, r["status"], r["verdict"]) for e, r in rows.items()
            if r["status"] != "passed"
        ]  # fmt: skip
        if not_passed is not None:
            assert {e: r["status"] for e, r in rows.items()
                    if r["status"] != "passed"} == not_passed  # fmt: skip
    partial = by["honest_partial"]["6.2"]
    assert (partial["cases_passed"], partial["cases_total"]) == ("3", "4")
    hang = by["honest_hang_in_class_body"]["7"]
    assert "the definition of Forever (cell" in hang["verdict"], hang
    assert "ran past the time limit" in hang["verdict"]
    pasted = by["honest_new_notebook"]
    assert {e for e, r in pasted.items() if r["status"] == "passed"} == {
        "6.1",
        "6.2",
        "9.1",
    }
    assert all(r["status"] == "missing" for e, r in pasted.items()
               if e not in ("6.1", "6.2", "9.1"))  # fmt: skip


def test_one_folder_per_student_is_graded(graded):
    rows = graded["by"]["ada_1234_assignsubmission_file_"]
    assert total(rows) == subs.MAX
    assert (
        "graded Untitled.ipynb; also in the folder, not graded: old/draft.ipynb"
        in (rows["1.1"]["note"])
    )


# --- what a teacher hands back --------------------------------------------------------------


def test_the_outputs_are_the_detailed_table_the_lms_table_and_feedback(graded):
    out, by = graded["out"], graded["by"]
    assert sorted(p.name for p in out.iterdir()) == [
        "feedback", "grades.csv", "lms.csv",
    ]  # fmt: skip
    lines = (out / "grades.csv").read_text(encoding="utf8").splitlines()
    assert lines[0] == (
        "student,exercise,name,points,max_points,cases_passed,cases_total,status,"
        "verdict,hint,note"
    )
    assert len(list(csv.reader(lines))) == 1 + len(by) * len(EXERCISES)
    with open(out / "lms.csv", encoding="utf8") as f:
        lms = list(csv.reader(f))
    assert lms[0] == ["student", *IDS, "total", "max"]
    assert len(lms) == 1 + len(by)  # one row per student
    for row in lms[1:]:
        student, points = row[0], [float(x) for x in row[1:-2]]
        assert len(points) == len(IDS)
        assert float(row[-2]) == pytest.approx(total(by[student]))
        assert sum(points) == pytest.approx(float(row[-2]))
        assert row[-1] == str(subs.MAX)
    feedback = sorted(p.stem for p in (out / "feedback").iterdir())
    assert len(feedback) == len(by)
    text = (out / "feedback" / "zoo_no_scaling.md").read_text(encoding="utf8")
    assert text.startswith("# Feedback for zoo_no_scaling")
    row = by["zoo_no_scaling"]["4"]
    assert f"**{row['points']} / {subs.MAX} points**" in text
    assert row["hint"] and row["hint"] in text
    assert "case 1/" in text  # the checker's whole message


def test_a_named_draw_grades_the_same_twice_and_draw_0_the_fixed_cases(tmp_path):
    """`--draw N` checks with the cases drawn from N: two runs write the same tables,
    byte for byte. `--draw 0` checks the fixed cases only, where answers written out as
    a table of the fixed cases' results earn what the notebook's checks give them."""
    folder = tmp_path / "submissions"
    subs.write(folder, "solved", subs.with_answers(subs.solved()))
    subs.write(folder, "table", subs.with_answers(subs.answers_from_a_table()))
    tables = []
    for n, draw in enumerate(["7", "7", "0"]):
        out = tmp_path / f"grades{n}"
        result = make_grade(folder, out, f"--draw {draw}")
        tables.append((out / "grades.csv").read_bytes())
        assert ("cases drawn from " in result.stdout) == (draw != "0"), result.stdout
    assert tables[0] == tables[1]
    drawn, fixed = read_grades(tmp_path / "grades0"), read_grades(tmp_path / "grades2")
    for by in (drawn, fixed):
        assert total(by["solved"]) == subs.MAX
    for exercise in ("6.1", "9.2"):  # look_ahead_mask, lr_at: full marks on the
        row = fixed["table"][exercise]  # fixed cases, not on the drawn ones
        assert float(row["points"]) == float(row["max_points"]), row
        assert float(drawn["table"][exercise]["points"]) < float(row["max_points"])


def test_the_printed_table_has_totals(graded):
    line = next(x for x in graded["stdout"].splitlines() if x.startswith("solved "))
    assert line.endswith(f"{subs.MAX}/{subs.MAX}")


def test_read_program_keeps_what_the_answers_need_and_drops_run_time_code(tmp_path):
    nb = nbformat.v4.new_notebook(
        metadata={"transformer_edu": {"chapter": "11_exercises"}},
        cells=[
            nbformat.v4.new_code_cell("%pip install x\nimport math\nEPS = 1e-5"),
            nbformat.v4.new_code_cell("model = train_for_an_hour()\nresult = slow()"),
            nbformat.v4.new_code_cell("device = pick()\ndef helper(T):\n    return T"),
            nbformat.v4.new_code_cell("def look_ahead_mask(T):\n    return helper(T)"),
            nbformat.v4.new_code_cell("def unused(x):\n    return model(x)"),
            nbformat.v4.new_code_cell("def broken(:"),
        ],
    )
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    snippets, notes = read_program(path, NAMES)
    assert [s.code for s in snippets] == [
        "import math",
        "EPS = 1e-5",
        "def helper(T):\n    return T",
        "def look_ahead_mask(T):\n    return helper(T)",
    ]
    assert [s.label for s in snippets][
        -1
    ] == "the definition of look_ahead_mask (cell 4)"  # counted from 1, as one reads
    assert notes and "cell 6 has a syntax error" in notes[0]
    # a helper's global that the answer needs comes too; the model it never reads not
    nb.cells[2].source = "device = pick()\ndef helper(T):\n    return device"
    nbformat.write(nb, path)
    codes = [s.code for s in read_program(path, NAMES)[0]]
    assert "device = pick()" in codes and "model = train_for_an_hour()" not in codes


SLEEPS_ONCE = """\
import time
import torch
_slept = []

def look_ahead_mask(T):
    if not _slept:  # its first case waits 2.5 s, past the limit, computing nothing
        _slept.append(True)
        time.sleep(2.5)
    return torch.ones(T, T, dtype=torch.bool).tril()
"""

WAITS_FOR_EVER = """\
import time

def pad_mask(tokens, pad_idx):
    time.sleep(3600)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_time_limit_counts_cpu_time_and_the_wall_clock_stops_a_wait(tmp_path):
    """The limit counts the CPU time the student's code uses, so that a busy machine
    (a slow wall clock) costs no honest student a point: a pause past the limit is
    no failure. Code that waits for ever is stopped once it has idled 3 × the limit
    + 5 s, and its verdict says so."""
    folder, out = tmp_path / "submissions", tmp_path / "grades"
    subs.write(folder, "waits", subs.with_answers(
        {"look_ahead_mask": SLEEPS_ONCE, "pad_mask": WAITS_FOR_EVER}))  # fmt: skip
    start = time.monotonic()
    make_grade(folder, out, "--time-limit 1 --draw 0")
    took = time.monotonic() - start
    rows = read_grades(out)["waits"]
    assert rows["6.1"]["status"] == "passed", rows["6.1"]
    waited = rows["6.2"]
    assert waited["status"] == "timed out", waited
    assert "time limit of 1 s: it waited" in waited["verdict"]
    assert "without computing" in waited["verdict"]
    assert took > 8  # the idle allowance: 3 × 1 s + 5 s
    after = IDS[IDS.index("6.2") + 1]
    assert rows[after]["status"] == "not implemented"  # graded after the wait


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_grader_killed_outright_leaves_no_student_code_running(tmp_path):
    folder, out = tmp_path / "submissions", tmp_path / "grades"
    subs.write(folder, "hangs", subs.with_answers({"look_ahead_mask": (
        "def look_ahead_mask(T):\n    while True:\n        pass")}))  # fmt: skip
    grader = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "transformer_edu.grading",
            str(folder),
            "--out",
            str(out),
            "--time-limit",
            "600",
        ],  # fmt: skip
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    try:  # the warden and the runner it forked
        while len(below := _descendants(grader.pid)) < 2:
            assert grader.poll() is None, "the grader ended before starting a runner"
            assert time.monotonic() < deadline, "the grader started no runner"
            time.sleep(0.2)
        time.sleep(2.0)  # the runner busy (loading, or in the endless loop)
        below = _descendants(grader.pid)
    finally:
        grader.send_signal(signal.SIGKILL)  # no handler, no clean-up: gone at once
        grader.wait()
    deadline = time.monotonic() + 30
    while alive := [pid for pid in below if _running(pid)]:
        if time.monotonic() > deadline:
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the grader's processes {alive} outlived it by 30 s")
        time.sleep(0.2)


def _running(pid: int) -> bool:
    """True while the process exists and is not a zombie awaiting its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


# --- the notebook's verdict is the grader's -------------------------------------------------


MIXED = {  # honest answers, right and wrong, as a class writes them
    **subs.solved(),
    **subs.HELPERS,
    **subs.PARTIAL,
    "look_ahead_mask": subs.zoo_cell("look_ahead_mask", "causal mask upper"),
    "attention": subs.zoo_cell("attention", "no scaling"),
    "MyLayerNorm": subs.zoo_cell("MyLayerNorm", "LayerNorm unbiased variance"),
    "smooth": "def smooth(target, vocab_size, smoothing):\n    raise ValueError('boom')",
    "greedy": "def greedy(model, src, max_len):\n    raise NotImplementedError",
}
_MARKS = {"✓": "passed", "✗": "failed", "…": "not implemented"}


def _notebook_verdicts(nb: nbformat.NotebookNode) -> dict[str, tuple[str, str]]:
    """Exercise id -> (status, the line after the first) from an executed notebook's
    printed checker messages."""
    found = {}
    for cell in nb.cells:
        ids = cell.metadata.get("exercises")
        if not ids:
            continue
        text = "".join(
            o.get("text", "") for o in cell.outputs if o.output_type == "stream"
        )
        lines = text.splitlines()
        starts = [i for i, line in enumerate(lines) if line[:1] in _MARKS]
        assert len(starts) == len(ids), (ids, text[:500])
        for ex_id, i in zip(ids, starts, strict=True):
            what = lines[i + 1].strip() if i + 1 < len(lines) else ""
            found[ex_id] = (_MARKS[lines[i][0]], what)
    return found


def test_a_notebook_and_the_grader_give_the_same_verdicts(tmp_path):
    """Honest notebooks, run as a student runs them (every checker in its cell) and
    graded: each exercise's verdict is the same both ways."""
    from nbclient import NotebookClient

    folder, out = tmp_path / "in", tmp_path / "out"
    notebooks = {"both_solved": subs.compact({**subs.solved(), **subs.HELPERS}),
                 "both_mixed": subs.compact(MIXED)}  # fmt: skip
    verdicts = {}
    for name, nb in notebooks.items():
        path = subs.write(folder, name, nb)
        executed = nbformat.read(path, as_version=4)
        NotebookClient(executed, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()  # fmt: skip
        verdicts[name] = _notebook_verdicts(executed)
    make_grade(folder, out)
    by = read_grades(out)
    for name, seen in verdicts.items():
        assert set(seen) == set(IDS)
        for ex_id, (status, what) in seen.items():
            row = by[name][ex_id]
            assert row["status"] == status, (name, ex_id, row["verdict"], what)
            if status == "failed":
                assert row["verdict"] == what, (name, ex_id)
    assert {s for s, _ in verdicts["both_solved"].values()} == {"passed"}
    assert {s for s, _ in verdicts["both_mixed"].values()} == set(_MARKS.values())


def test_the_audit_hook_refuses_proc_however_the_path_is_spelled(tmp_path):
    """Where the kernel has no Landlock, the runner's audit hook alone keeps a
    submission out of /proc (its own memory, where the key lies): a str, bytes, or a
    link into /proc such as /dev/fd/.. all count; its own folder stays open."""
    from transformer_edu.grading import doors

    state = {"inside": None, "handling": 0, "phase": "", "recorded": set(),
             "off": False}  # fmt: skip
    hook, enable = doors._audit_hook(str(tmp_path), {"names": {}}, [], state, b"k")
    enable()
    for path in ("/proc/self/mem", b"/proc/self/mem", "/dev/fd/../mem",
                 b"/dev/fd/3", "../" * 30 + "proc/1/environ"):  # fmt: skip
        with pytest.raises(PermissionError, match="grader's process is its own"):
            hook("open", (path, "rb", 0))
    hook("open", (str(tmp_path / "mine.txt"), "w", 0))  # its folder: allowed
    hook("open", ("notes.txt", "r", 0))
    with pytest.raises(PermissionError, match="outside its folder"):
        hook("open", (b"/tmp/forged.csv", None, os.O_WRONLY | os.O_CREAT))


def test_no_cell_of_the_tables_starts_like_a_formula(tmp_path):
    """A student names the file; a spreadsheet must not run it as a formula."""
    from transformer_edu.grading.report import Row, write_all

    rows = [Row("=HYPERLINK(1)", "6.1", "look_ahead_mask", 1, 1, 4, 4,
                "passed", "@SUM(1)", "+1", "-x")]  # fmt: skip
    write_all(rows, tmp_path, ["6.1"])
    with open(tmp_path / "grades.csv", encoding="utf8") as f:
        detailed = next(csv.DictReader(f))
    assert detailed["student"] == "'=HYPERLINK(1)"
    assert (detailed["verdict"], detailed["hint"], detailed["note"]) == (
        "'@SUM(1)", "'+1", "'-x",
    )  # fmt: skip
    assert detailed["points"] == "1"
    with open(tmp_path / "lms.csv", encoding="utf8") as f:
        lms = list(csv.reader(f))
    assert lms[1] == ["'=HYPERLINK(1)", "1", "1", "1"]


def test_the_grader_hides_this_checkout_and_trusts_only_its_package():
    """The runner's walls are drawn around the checkout (whose chapter 11 holds the
    solutions) and its package; a wrong count of folders hid the folder above it and
    a class of students could read the solutions (found after grading/ moved)."""
    from transformer_edu.grading import doors, submissions

    assert (doors.REPOSITORY / "chapters" / "11_exercises.ipynb").is_file()
    assert submissions.SOLUTIONS_SOURCE.parent.parent == doors.REPOSITORY
    trusted = doors._trusted_files()
    assert str(doors.REPOSITORY / "transformer_edu") + os.sep in trusted
    assert str(doors.REPOSITORY) + os.sep not in trusted
