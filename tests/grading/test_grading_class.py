"""A class of 200 (issue 45): no submission stops the run, earns what it did not
solve, reads what it must not, outlasts its budget, or costs an honest student the
points they earned. Each submission is graded between two honest classmates with
full marks, through `make grade`, as a teacher runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import _submissions as subs  # tests/helpers: pyproject's pythonpath
import nbformat
import pytest
from test_grading import TIME_LIMIT, make_grade, read_grades, total

from transformer_edu.exercises import (
    CALLED_REFERENCE,
    check_causal_mask,
    check_noam_lr,
)
from transformer_edu.grading import EXERCISES, NAMES, read_program
from transformer_edu.grading.submissions import (
    MAX_CELLS,
    NotASubmission,
    readable,
)

ROOT = Path(__file__).resolve().parents[2]
FIRST, LAST = "aaa_first", "zzz_last"  # the honest classmates, graded first and last
SHIFT_JIS = "テスト"


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("class")
    out = tmp_path_factory.mktemp("grades")
    full = subs.with_answers(subs.solved())
    subs.write(folder, FIRST, full)
    for student, nb in subs.class_of_200().items():
        subs.write(folder, student, nb)
    # an honest notebook whose name is Shift-JIS bytes, as unzip extracts it
    path = os.fsencode(folder) + b"/" + subs.SHIFT_JIS_NAME + b".ipynb"
    with open(path, "wb") as f:
        f.write(json.dumps(full).encode("utf8"))
    subs.write(folder, LAST, full)
    result = make_grade(folder, out)
    return {"out": out, "by": read_grades(out), "stdout": result.stdout}


def _not_passed(rows: dict) -> dict[str, str]:
    return {e: r["status"] for e, r in rows.items() if r["status"] != "passed"}


def test_the_run_ends_and_every_student_has_every_row(graded):
    by = graded["by"]
    assert len(by) == 2 + len(subs.class_of_200()) + 1
    assert all(len(rows) == len(EXERCISES) for rows in by.values())
    for honest in (FIRST, LAST, SHIFT_JIS):
        assert total(by[honest]) == subs.MAX, _not_passed(by[honest])
    # the Shift-JIS name reads as Windows wrote it, in the tables and the feedback
    assert (graded["out"] / "feedback" / f"{SHIFT_JIS}.md").exists()
    lms = (graded["out"] / "lms.csv").read_text(encoding="utf8")
    assert f"\n{SHIFT_JIS}," in lms


@pytest.mark.parametrize("student", ["run_name_raises", "run_patches_stdout"])
def test_an_answer_that_upsets_the_runner_stops_nothing(graded, student):
    """An answer whose __name__ raises; a default argument that patches the type of
    sys.stdout (the runner's print count): both answers are right, and graded so."""
    rows = graded["by"][student]
    assert total(rows) == subs.MAX, _not_passed(rows)


def test_a_submission_makes_few_files_in_its_folder(graded):
    # its answer is right only if the grader stopped it before 100 files (it tries
    # 2,000 of 1 MB)
    rows = graded["by"]["run_fills_the_disk"]
    assert total(rows) == subs.MAX, _not_passed(rows)


def test_a_reference_run_through_another_reference_is_seen(graded):
    rows = graded["by"]["pts_inside_a_reference"]
    assert total(rows) == 0
    for ex, row in rows.items():
        assert CALLED_REFERENCE in row["verdict"], (ex, row["verdict"])


def test_torch_calls_from_inside_torch_s_own_handler_are_seen(graded):
    rows = graded["by"]["pts_inside_the_handler"]
    for ex, name in (("2", "embedding"), ("4", "scaled_dot_product_attention"),
                     ("7", "layer_norm")):  # fmt: skip
        assert rows[ex]["points"] == "0", rows[ex]
        assert CALLED_REFERENCE in rows[ex]["verdict"], rows[ex]["verdict"]
        assert name in rows[ex]["verdict"], rows[ex]["verdict"]


def test_the_solutions_cannot_be_read_at_grading_time(graded):
    rows = graded["by"]["pts_reads_the_solutions"]
    assert total(rows) == 0
    assert "PermissionError" in rows["1.1"]["note"], rows["1.1"]["note"]


def test_a_table_of_the_notebook_s_answers_earns_little(graded):
    """Each exercise is checked again on cases drawn for the run: answers written out
    for the notebook's cases pass its checks and little else."""
    table = subs.answers_from_a_table()
    for name, check in [
        ("look_ahead_mask", check_causal_mask),
        ("lr_at", check_noam_lr),
    ]:
        space: dict = {}
        exec(table[name], space)  # noqa: S102  the submission's own cell
        assert check(space[name], quiet=True)  # what the notebook showed: passed
    rows = graded["by"]["pts_answers_from_a_table"]
    # A.5's loop calls the notebook's lr_at, a table that lacks A.5's steps: KeyError
    failed = {"6.1": "failed", "9.2": "failed", "A.5": "failed"}
    assert _not_passed(rows) == failed, rows
    assert "KeyError" in rows["A.5"]["verdict"], rows["A.5"]
    assert float(rows["6.1"]["points"]) == 0.25  # T = 1 is drawn as itself
    assert float(rows["9.2"]["points"]) == 0
    for row in (rows["6.1"], rows["9.2"]):
        assert row["verdict"].startswith("on a case drawn for this run ("), row
        assert "KeyError" in row["verdict"], row
    assert "cases drawn from " in graded["stdout"]


def test_a_class_that_says_it_is_torch_s_earns_nothing(graded):
    rows = graded["by"]["pts_claims_a_torch_class"]
    assert _not_passed(rows) == {"7": "failed"}


def test_a_definition_that_never_returns_is_timed_out_once(graded):
    """Seeing what look_ahead_mask is never returns: that exercise is timed out, the
    notebook is not loaded again for it, and the rest is graded."""
    rows = graded["by"]["time_describe_hangs"]
    assert _not_passed(rows) == {"6.1": "timed out"}
    assert f"{TIME_LIMIT:g} s" in rows["6.1"]["verdict"], rows["6.1"]["verdict"]


def test_honest_mistakes_cost_only_their_own_exercise(graded):
    by = graded["by"]
    itself = by["honest_calls_itself"]
    assert _not_passed(itself) == {"1.1": "failed"}
    assert "RecursionError" in itself["1.1"]["verdict"], itself["1.1"]["verdict"]
    assert CALLED_REFERENCE not in itself["1.1"]["verdict"]
    # a @dataclass helper, a class made by a function under another name, a line
    # that continues an expression with `%`: graded as the notebook runs them
    for student in ("honest_dataclass", "honest_alias", "honest_continued_line"):
        assert total(by[student]) == subs.MAX, (student, _not_passed(by[student]))


def test_the_budget_of_a_notebook_covers_everything(tmp_path):
    """Definitions that each hang until the time limit: once the notebook's budget
    is spent, the exercises left are timed out, and the run goes on."""
    folder, out = tmp_path / "submissions", tmp_path / "grades"
    hang = (
        "def _forever():\n    while True:\n        pass\n\n"
        "def {}(*a, _=_forever()):\n    pass\n"
    )  # each definition runs past the time limit while the notebook loads
    answers = {name: hang.format(name) for name in ("dot_score", "embed", "attention")}
    subs.write(folder, "slow", subs.with_answers({**subs.solved(), **answers}))
    start = time.monotonic()
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "grade", f"SUBMISSIONS={folder}",
         f"GRADES={out}", "GRADE_ARGS=--time-limit 3 --submission-limit 7"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert time.monotonic() - start < 300  # not ~ definitions × restarts × limit
    rows = read_grades(out)["slow"]
    ran_out = [e for e, r in rows.items() if "ran out" in r["verdict"]]
    assert ran_out and all(rows[e]["status"] == "timed out" for e in ran_out)


def test_read_program_reads_cells_as_ipython_does(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# 11"),
            nbformat.v4.new_code_cell("%matplotlib inline\nimport torch"),
            nbformat.v4.new_code_cell(
                "from dataclasses import dataclass\n\n@dataclass\nclass Hyp:\n"
                "    score: float\n\n"
                "def look_ahead_mask(T):\n    n = (T\n         % 7)\n    Hyp(1.0)\n"
                "    return torch.ones(n, n).tril().bool()"
            ),
            nbformat.v4.new_code_cell("%%bash\necho hi"),
            nbformat.v4.new_code_cell("%%time\ndef pad_mask(tokens, pad_idx):\n"
                                      "    return tokens != pad_idx"),
        ],
    )  # fmt: skip
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    snippets, notes = read_program(path, NAMES)
    codes = [s.code for s in snippets]
    assert "@dataclass\nclass Hyp:\n    score: float" in codes
    assert any("% 7)" in c for c in codes)  # the continuation left alone
    assert any(c.startswith("def pad_mask") for c in codes)  # %%time runs its body
    assert notes == ["cell 4 is a %%bash cell: not graded"]
    assert {s.cell for s in snippets} == {2, 3, 5}  # counted from 1, Markdown too


def test_read_program_refuses_what_it_will_not_parse(tmp_path):
    cell = {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": []}
    path = tmp_path / "big.ipynb"
    path.write_text(json.dumps({"cells": [cell] * (MAX_CELLS + 1), "metadata": {}}))
    with pytest.raises(NotASubmission, match="cells"):
        read_program(path, NAMES)
    path.write_text("[1, 2, 3]")
    with pytest.raises(NotASubmission, match="list"):
        read_program(path, NAMES)


def test_file_names_read_as_their_writer_meant():
    assert readable(os.fsdecode("テスト".encode("cp932"))) == "テスト"
    assert readable(os.fsdecode("café".encode("cp1252"))) == "café"
    assert readable("ada") == "ada"
    assert readable("a\x1bb") == "a\\x1bb"
