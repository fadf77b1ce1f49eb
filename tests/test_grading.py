"""The classroom edition: the student notebook holds no solution and is up to date,
the grader turns a folder of notebooks into a table that survives bad submissions,
and it refuses, as the checkers do, an answer that calls a reference
(tests/test_references.py holds the table of them).

(nbval runs student/*.ipynb top to bottom, unsolved, in `make test`.)
"""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path

import nbformat
import pytest
import student_edition  # book/ is on pythonpath
from test_references import FORBIDDEN, answer_source  # tests/ is on sys.path

from transformer_edu.exercises import BUG_ZOO, CALLED_REFERENCE
from transformer_edu.exercises.grading import EXERCISES, grade, read_program, table

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "chapters" / "11_exercises.ipynb"
STUDENT = ROOT / "student" / "11_exercises.ipynb"


def _cells(path: Path) -> list[nbformat.NotebookNode]:
    return nbformat.read(path, as_version=4).cells


def _solution_cells() -> list[str]:
    """The cells tagged solution that define the answer (a function or class); a
    check that runs on an answer is tagged solution too, so that the student edition
    leaves it out, but it is not an answer."""
    return [
        c.source
        for c in _cells(CHAPTER)
        if "solution" in c.metadata.get("tags", [])
        and any(
            isinstance(n, (ast.FunctionDef, ast.ClassDef))
            for n in ast.parse(c.source).body
        )
    ]


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
    assert len(solutions) == 20
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
    stubs = code.count("raise NotImplementedError  # your code here")
    assert stubs == 19 + 2 * 2  # one in each function, two in each class
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
    for name in ("_config.yml", "_toc.yml", "teachers_guide.md"):
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


# --- grading --------------------------------------------------------------------------


def _student_nb() -> dict:
    return json.loads(STUDENT.read_text(encoding="utf8"))


def _with_answers(answers: dict[str, str]) -> dict:
    """The student edition with the stub cells defining these names replaced (a cell
    with two stubs, split_heads and combine_heads, gets both answers)."""
    nb = copy.deepcopy(_student_nb())
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        mine = [
            code
            for name, code in answers.items()
            if cell["cell_type"] == "code"
            and (f"def {name}(" in source or f"class {name}(" in source)
        ]
        if mine:
            cell["source"] = "\n\n".join(mine)
    return nb


def _solved() -> dict[str, str]:
    """Each exercise's solution, renamed to the stub's name."""
    renames = {
        "dot_score_solution": "dot_score",
        "additive_score_solution": "additive_score",
        "embed_solution": "embed",
        "sinusoidal_solution": "sinusoidal",
        "add_positions_solution": "add_positions",
        "attention_solution": "attention",
        "split_heads_solution": "split_heads",
        "combine_heads_solution": "combine_heads",
        "MultiHeadAttentionSolution": "MyMultiHeadAttention",
        "look_ahead_mask_solution": "look_ahead_mask",
        "pad_mask_solution": "pad_mask",
        "LayerNormSolution": "MyLayerNorm",
        "make_masks_solution": "make_masks",
        "smooth_solution": "smooth",
        "lr_at_solution": "lr_at",
        "greedy_solution": "greedy",
        "lp_solution": "lp",
        "beam_solution": "beam",
        "cached_step_solution": "cached_step",
        "top_p_solution": "top_p",
        "corpus_bleu_solution": "corpus_bleu",
    }
    answers = {}
    for code in _solution_cells():
        for old, new in sorted(renames.items(), key=lambda kv: -len(kv[0])):
            code = code.replace(old, new)
        first = next(n for n in ast.parse(code).body if hasattr(n, "name"))
        answers[first.name] = code  # into the stub cell that defines this name
    return answers


def _write(folder: Path, name: str, nb: dict | str) -> None:
    text = nb if isinstance(nb, str) else json.dumps(nb)
    (folder / f"{name}.ipynb").write_text(text, encoding="utf8")


BUGGY = {
    "zoo_mask_upper": ("look_ahead_mask", "causal mask upper", "6.1"),
    "zoo_no_scaling": ("attention", "no scaling", "4"),
    "zoo_layer_norm": ("MyLayerNorm", "LayerNorm unbiased variance", "7"),
}


def _zoo_cell(name: str, bug: str) -> str:
    """The zoo bug's code under the exercise's name, as a student would write it."""
    import inspect
    import textwrap

    impl = BUG_ZOO[bug].implementation
    lines = textwrap.dedent(inspect.getsource(impl)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("def "))
    source = "\n".join(lines[start + 1 :])  # the body; the decorator stays behind
    if name == "MyLayerNorm":  # the exercise is a class: wrap the zoo's function
        return (
            "import math\nimport torch\nfrom torch import nn\n\n"
            f"def _norm{inspect.signature(impl)}:\n{source}\n\n"
            "class MyLayerNorm(nn.Module):\n"
            "    def __init__(self, d_model, eps=1e-5):\n"
            "        super().__init__()\n"
            "        self.weight = nn.Parameter(torch.ones(d_model))\n"
            "        self.bias = nn.Parameter(torch.zeros(d_model))\n"
            "        self.eps = eps\n\n"
            "    def forward(self, x):\n"
            "        return _norm(x, self.weight, self.bias, self.eps)\n"
        )
    return (
        f"import math\nimport torch\n\ndef {name}{inspect.signature(impl)}:\n{source}"
    )


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> tuple[Path, Path, dict[str, dict[str, dict]]]:
    """One grading run over a folder of good, buggy and bad submissions."""
    folder = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("grades")
    _write(folder, "solved", _with_answers(_solved()))
    _write(folder, "unsolved", _student_nb())
    for student, (name, bug, _) in BUGGY.items():
        _write(folder, student, _with_answers({name: _zoo_cell(name, bug)}))
    _write(folder, "raises", _with_answers({"pad_mask": (
        "def pad_mask(tokens, pad_idx):\n    raise ValueError('boom')")}))  # fmt: skip
    _write(folder, "hangs", _with_answers({"look_ahead_mask": (
        "def look_ahead_mask(T):\n    while True:\n        pass")}))  # fmt: skip
    _write(folder, "prints", _with_answers({"lr_at": (
        "def lr_at(step, d_model, warmup):\n    print('x' * 1_000_000)\n"
        "    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)")}))  # fmt: skip
    canary = folder / "canary.txt"
    canary.write_text("keep me")
    _write(folder, "deletes", _with_answers({"smooth": (
        "import os, glob\n\ndef smooth(target, vocab_size, smoothing):\n"
        "    for f in glob.glob('*') + glob.glob('../*'):\n"
        "        os.remove(f) if os.path.isfile(f) else None\n"
        f"    os.remove({str(canary)!r})\n"
        "    raise RuntimeError('nothing left')")}))  # fmt: skip
    _write(folder, "cheats", _with_answers({"look_ahead_mask": (
        "from transformer_edu import causal_mask\n\n"
        "def look_ahead_mask(T):\n    return causal_mask(T)[0, 0]")}))  # fmt: skip
    _write(folder, "corrupt", '{"cells": [ this is not json')
    # chapter 7 defines a `smooth` of its own; an edition of it names its chapter
    chapter7 = json.loads(
        (ROOT / "chapters" / "07_residual_norm_ffn.ipynb").read_text()
    )
    _write(folder, "other_chapter", chapter7)
    chapter7["metadata"]["transformer_edu"] = {"chapter": "07_residual_norm_ffn"}
    _write(folder, "other_edition", chapter7)
    rows = grade(folder, out, time_limit=20)
    print(table(rows))
    by = {}
    for r in rows:
        by.setdefault(r.student, {})[r.exercise] = r.__dict__
    assert canary.read_text() == "keep me"
    return folder, out, by


def test_the_solution_gets_full_marks(graded):
    _, _, by = graded
    rows = by["solved"].values()
    assert all(r["status"] == "passed" for r in rows), [
        (r["exercise"], r["verdict"]) for r in rows if r["status"] != "passed"
    ]
    assert sum(r["points"] for r in rows) == sum(e.points for e in EXERCISES)


def test_the_unsolved_edition_is_not_implemented_everywhere(graded):
    _, _, by = graded
    assert {r["status"] for r in by["unsolved"].values()} == {"not implemented"}


def test_zoo_bugs_get_their_hints(graded):
    _, _, by = graded
    for student, (_, bug, exercise) in BUGGY.items():
        row = by[student][exercise]
        assert row["status"] == "failed" and row["points"] == 0
        assert BUG_ZOO[bug].keyword.lower() in (row["hint"] + row["verdict"]).lower()
        others = [r for e, r in by[student].items() if e != exercise]
        assert all(r["status"] == "not implemented" for r in others)


def test_bad_submissions_get_rows_that_say_what_happened(graded):
    _, _, by = graded
    assert "ValueError: boom" in by["raises"]["6.2"]["verdict"]
    hang = by["hangs"]["6.1"]
    assert hang["status"] == "timed out" and "time limit" in hang["verdict"]
    assert by["hangs"]["6.2"]["status"] == "not implemented"  # graded after the hang
    printed = by["prints"]["9.2"]
    assert printed["status"] == "passed" and "printed 14,000,014" in printed["note"]
    deleted = by["deletes"]["9.1"]
    assert "PermissionError" in deleted["verdict"], deleted
    assert CALLED_REFERENCE in by["cheats"]["6.1"]["verdict"]
    for student, says in [("corrupt", "not a readable notebook"),
                          ("other_chapter", "not the notebook of 11_exercises"),
                          ("other_edition", "chapter 07_residual_norm_ffn")]:  # fmt: skip
        rows = by[student].values()
        assert all(r["status"] == "error" and r["points"] == 0 for r in rows)
        assert all(says in r["verdict"] for r in rows), list(rows)[0]


def test_grades_are_written_to_a_csv_in_the_output_folder_only(graded):
    folder, out, by = graded
    assert sorted(p.name for p in out.iterdir()) == ["grades.csv"]
    lines = (out / "grades.csv").read_text(encoding="utf8").splitlines()
    assert lines[0].startswith("student,exercise,name,points,max_points,status")
    assert len(lines) == 1 + len(by) * len(EXERCISES)
    assert (folder / "canary.txt").exists()


def test_read_program_keeps_definitions_and_drops_run_time_code(tmp_path):
    nb = nbformat.v4.new_notebook(
        metadata={"transformer_edu": {"chapter": "11_exercises"}},
        cells=[
            nbformat.v4.new_code_cell("%pip install x\nimport math\nEPS = 1e-5"),
            nbformat.v4.new_code_cell("train_for_an_hour()\nresult = slow()"),
            nbformat.v4.new_code_cell("def look_ahead_mask(T):\n    return T"),
            nbformat.v4.new_code_cell("def broken(:"),
        ],
    )
    path = tmp_path / "a.ipynb"
    nbformat.write(nb, path)
    snippets, notes = read_program(path)
    assert snippets == [
        "import math",
        "EPS = 1e-5",
        "def look_ahead_mask(T):\n    return T",
    ]
    assert notes and "cell 3" in notes[0]


def _graders_children(grader_pid: int) -> list[int]:
    """Pids of the exercise-running processes a grader with this pid started."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue  # not a process, gone, or not ours
        if b"--child" in cmdline and (
            f"TRANSFORMER_EDU_GRADER_PID={grader_pid}".encode() in environ
        ):
            found.append(int(proc.name))
    return found


def _running(pid: int) -> bool:
    """True while the process exists and is not a zombie awaiting its parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _forbidden_answers() -> tuple[dict[str, str], dict[str, str]]:
    """For every exercise, the first answer of test_references' table of forbidden
    implementations, under the exercise's name; and the name its verdict must show."""
    import re

    answers, shown = {}, {}
    for ex in EXERCISES:
        key = f"{ex.checker}[{ex.kind}]" if ex.kind else ex.checker
        name, source = FORBIDDEN[key][0]
        answers[ex.name] = re.sub(r"\banswer\b", ex.name, answer_source(source))
        shown[ex.id] = name
    return answers, shown


def test_the_command_line_grades_as_grade_does(tmp_path):
    """`make grade` runs the module with `python -m`: its children must start too,
    and they refuse a call to a reference as the checkers do in the notebook."""
    import csv
    import os
    import subprocess
    import sys

    folder, out = tmp_path / "submissions", tmp_path / "grades"
    folder.mkdir()
    _write(folder, "solved", _with_answers(_solved()))
    forbidden, shown = _forbidden_answers()
    _write(folder, "calls_references", _with_answers(forbidden))
    subprocess.run(
        [sys.executable, "-m", "transformer_edu.exercises.grading", str(folder),
         "--out", str(out), "--time-limit", "60"],  # fmt: skip
        check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    with open(out / "grades.csv", encoding="utf8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * len(EXERCISES)
    solved = [r for r in rows if r["student"] == "solved"]
    assert all(r["status"] == "passed" for r in solved), [
        (r["exercise"], r["verdict"]) for r in solved if r["status"] != "passed"
    ]
    for r in (r for r in rows if r["student"] == "calls_references"):
        assert r["status"] == "failed" and r["points"] == "0", r
        assert f"{CALLED_REFERENCE}: {shown[r['exercise']]}," in r["verdict"], r


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_a_grader_killed_outright_leaves_no_student_code_running(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    folder, out = tmp_path / "submissions", tmp_path / "grades"
    folder.mkdir()
    _write(folder, "hangs", _with_answers({"look_ahead_mask": (
        "def look_ahead_mask(T):\n    while True:\n        pass")}))  # fmt: skip
    grader = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "transformer_edu.exercises.grading",
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
    deadline = time.monotonic() + 120
    try:
        while not (children := _graders_children(grader.pid)):
            assert grader.poll() is None, "the grader ended before starting a child"
            assert time.monotonic() < deadline, "the grader started no child"
            time.sleep(0.2)
        time.sleep(1.0)  # the child busy (importing, or in the endless loop)
    finally:
        grader.send_signal(signal.SIGKILL)  # no handler, no clean-up: gone at once
        grader.wait()
    deadline = time.monotonic() + 30
    while alive := [pid for pid in children if _running(pid)]:
        if time.monotonic() > deadline:
            for pid in alive:
                os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the grader's child {alive} outlived it by 30 s")
        time.sleep(0.2)
