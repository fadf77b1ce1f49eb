"""The classroom edition: the student notebook holds no solution and is up to date,
the grader turns a folder of notebooks into a table that survives bad submissions,
and no checker can be fooled by wrapping the package's reference.

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
import torch
import torch.nn.functional as F
from torch import nn

from transformer_edu import (
    LayerNorm,
    MultiHeadAttention,
    TokenEmbedding,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_table,
    target_mask,
)
from transformer_edu.decoding import greedy_decode
from transformer_edu.exercises import BUG_ZOO, CALLED_REFERENCE, CHECKERS
from transformer_edu.exercises.grading import EXERCISES, grade, read_program, table
from transformer_edu.seq2seq import SCORE_FUNCTIONS
from transformer_edu.training import noam_lr, smoothed_targets

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = ROOT / "chapters" / "11_exercises.ipynb"
STUDENT = ROOT / "student" / "11_exercises.ipynb"


def _cells(path: Path) -> list[nbformat.NotebookNode]:
    return nbformat.read(path, as_version=4).cells


def _solution_cells() -> list[str]:
    return [
        c.source for c in _cells(CHAPTER) if "solution" in c.metadata.get("tags", [])
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
    assert len(solutions) == 15
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
    assert stubs == 14 + 2 * 2  # one in each function, two in each class
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


# --- checkers cannot be fooled by the reference ------------------------------------


def _wrapped_mha(d_model, n_heads):
    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = MultiHeadAttention(d_model, n_heads)
            self.q_proj, self.k_proj = self.inner.q_proj, self.inner.k_proj
            self.v_proj, self.out_proj = self.inner.v_proj, self.inner.out_proj

        def forward(self, q, k, v, mask=None):
            return self.inner(q, k, v, mask)

    return Wrapped()


class _TorchMHA(nn.Module):
    """nn.MultiheadAttention behind the exercise's interface."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.inner = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, q, k, v, mask=None):
        return self.inner(q, k, v)[0]


class _WrappedNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.inner = nn.LayerNorm(d_model, eps)
        self.weight, self.bias = self.inner.weight, self.inner.bias

    def forward(self, x):
        return self.inner(x)


class _PackageNorm(LayerNorm):
    """The package's LayerNorm, subclassed."""


def _torch_mask(T):
    return ~nn.Transformer.generate_square_subsequent_mask(T).isinf()


def _embed(tokens, weight, pad_idx):
    emb = TokenEmbedding(*weight.shape, pad_idx=pad_idx)
    with torch.no_grad():
        emb.embedding.weight.copy_(weight)
    return emb(tokens)


def _score(kind):
    def fn(query, keys, *layers):
        ref = SCORE_FUNCTIONS[kind](query.size(-1))
        names = {0: (), 1: ("W",), 3: ("W1", "W2", "v")}[len(layers)]
        for name, layer in zip(names, layers, strict=True):
            setattr(ref, name, layer)
        return ref(query, keys)

    return fn


WRAPPERS = [  # (checker, extra arguments, an answer that calls the reference)
    ("check_causal_mask", {}, lambda T: causal_mask(T)[0, 0]),
    ("check_causal_mask", {}, lambda T: target_mask(torch.ones(1, T).long())[0, 0]),
    ("check_causal_mask", {}, _torch_mask),
    ("check_padding_mask", {}, lambda t, p: padding_mask(t, p)),
    (
        "check_transformer_masks",
        {},
        lambda s, t, p=0: (padding_mask(s, p), target_mask(t, p), padding_mask(s, p)),
    ),  # fmt: skip
    (
        "check_scaled_dot_product_attention",
        {},
        lambda q, k, v, m=None: scaled_dot_product_attention(q, k, v, m),
    ),  # fmt: skip
    (
        "check_scaled_dot_product_attention",
        {},
        lambda q, k, v, m=None: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
    ),  # fmt: skip
    (
        "check_split_heads",
        {},
        lambda x, h: MultiHeadAttention(x.size(-1), h).split_heads(x),
    ),  # fmt: skip
    (
        "check_combine_heads",
        {},
        lambda x: MultiHeadAttention(x.size(1) * x.size(-1), x.size(1)).combine_heads(
            x
        ),
    ),  # fmt: skip
    ("check_multi_head_attention", {}, _wrapped_mha),
    ("check_multi_head_attention", {}, _TorchMHA),
    ("check_layer_norm", {}, _WrappedNorm),
    ("check_layer_norm", {}, _PackageNorm),
    (
        "check_layer_norm",
        {},
        lambda x, w, b, eps=1e-5: LayerNorm(x.size(-1), eps).to(x.dtype)(x) * w + b,
    ),  # fmt: skip
    ("check_positional_encoding", {}, lambda n, d: sinusoidal_table(n, d)),
    ("check_token_embedding", {}, _embed),
    ("check_label_smoothing", {}, lambda t, v, e: smoothed_targets(t, v, e)),
    ("check_noam_lr", {}, lambda s, d, w: noam_lr(s, d, w)),
    (
        "check_greedy_decode",
        {},
        lambda m, s, n: greedy_decode(m, s, max_len=n).tokens[0],
    ),  # fmt: skip
    ("check_score_function", {"kind": "dot"}, _score("dot")),
    ("check_score_function", {"kind": "additive"}, _score("additive")),
]


@pytest.mark.parametrize(
    "check, kwargs, answer",
    WRAPPERS,
    ids=[f"{c}-{i}" for i, (c, *_) in enumerate(WRAPPERS)],
)
def test_wrapping_the_reference_fails_with_a_message_that_says_so(
    check, kwargs, answer
):
    result = CHECKERS[check](answer, quiet=True, **kwargs)
    assert not result and result.status == "failed"
    assert CALLED_REFERENCE in result.message, result.message


def test_an_alias_bound_before_the_check_is_seen():
    from transformer_edu.masks import causal_mask as bound_early

    mine = bound_early  # the student's name for it

    result = CHECKERS["check_causal_mask"](lambda T: mine(T), quiet=True)
    assert not result and CALLED_REFERENCE in result.message
    assert "transformer_edu.masks.causal_mask" in result.message


def test_calling_the_reference_fails_even_when_the_answer_raises_afterwards():
    def sneaky(T):
        causal_mask(T)
        raise NotImplementedError

    result = CHECKERS["check_causal_mask"](sneaky, quiet=True)
    assert result.status == "failed" and CALLED_REFERENCE in result.message


def test_switching_the_profiler_off_is_reported():
    import sys

    def off(T):
        sys.setprofile(None)
        return causal_mask(T)[0, 0]

    result = CHECKERS["check_causal_mask"](off, quiet=True)
    assert not result and "profiler" in result.message


def test_the_previous_profiler_is_restored():
    import sys

    calls = []

    def mine(frame, event, arg):
        calls.append(event)

    sys.setprofile(mine)
    try:
        CHECKERS["check_causal_mask"](lambda T: causal_mask(T)[0, 0], quiet=True)
        assert sys.getprofile() is mine
    finally:
        sys.setprofile(None)


def test_helpers_an_exercise_allows_stay_allowed():
    # exercise 8 may use padding_mask and causal_mask; 5.2 may reuse attention
    def masks(src, tgt, pad_idx=0):
        tgt_mask = padding_mask(tgt, pad_idx) & causal_mask(tgt.size(1))
        return padding_mask(src, pad_idx), tgt_mask, padding_mask(src, pad_idx)

    assert CHECKERS["check_transformer_masks"](masks, quiet=True)

    class MHA(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.w_q, self.w_k = nn.Linear(d, d), nn.Linear(d, d)
            self.w_v, self.w_o = nn.Linear(d, d), nn.Linear(d, d)

        def forward(self, q, k, v, mask=None):
            B, T, D = q.shape

            def split(x):
                return x.view(B, x.size(1), self.h, D // self.h).transpose(1, 2)

            out, _ = scaled_dot_product_attention(
                split(self.w_q(q)), split(self.w_k(k)), split(self.w_v(v)), mask
            )
            return self.w_o(out.transpose(1, 2).reshape(B, T, D))

    assert CHECKERS["check_multi_head_attention"](MHA, quiet=True)
    # F.layer_norm is torch's functional form, not the module the exercise writes
    fn = lambda x, w, b, eps=1e-5: F.layer_norm(x, (x.size(-1),), w, b, eps)  # noqa: E731
    assert CHECKERS["check_layer_norm"](fn, quiet=True)


# --- grading --------------------------------------------------------------------------


def _student_nb() -> dict:
    return json.loads(STUDENT.read_text(encoding="utf8"))


def _with_answers(answers: dict[str, str]) -> dict:
    """The student edition with the stub cells defining these names replaced."""
    nb = copy.deepcopy(_student_nb())
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        for name, code in answers.items():
            if cell["cell_type"] == "code" and (
                f"def {name}(" in source or f"class {name}(" in source
            ):
                cell["source"] = code
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


def test_the_command_line_grades_as_grade_does(tmp_path):
    """`make grade` runs the module with `python -m`: its children must start too."""
    import csv
    import os
    import subprocess
    import sys

    folder, out = tmp_path / "submissions", tmp_path / "grades"
    folder.mkdir()
    _write(folder, "solved", _with_answers(_solved()))
    subprocess.run(
        [sys.executable, "-m", "transformer_edu.exercises.grading", str(folder),
         "--out", str(out), "--time-limit", "60"],  # fmt: skip
        check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    with open(out / "grades.csv", encoding="utf8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(EXERCISES)
    assert all(r["status"] == "passed" for r in rows), [
        (r["exercise"], r["verdict"]) for r in rows if r["status"] != "passed"
    ]


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
