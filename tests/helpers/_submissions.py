"""Submitted notebooks for the grader's tests: solved, buggy, broken, honest in ways
a class is, and each trick that once fooled the grader (issue 34), on top of the
unsolved student edition, so that a trick that works shows as points.

``build(folder, grades)`` writes them all; ``HOLES`` names the tricks and
``EXPECTED_HONEST`` what the honest ones should score. ``class_of_200`` holds those of
issue 45 (points not earned, a run stopped, time, honest work lost).
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import re
import textwrap
from pathlib import Path

import nbformat
from test_references import (  # tests/exercises: pyproject's pythonpath
    FORBIDDEN,
    answer_source,
    table_key,
)

from transformer_edu.exercises import BUG_ZOO
from transformer_edu.grading import EXERCISES, NAMES
from transformer_edu.grading.submissions import _exercise_name

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "chapters" / "11_exercises.ipynb"
STUDENT = ROOT / "student" / "11_exercises.ipynb"
MAX = sum(e.points for e in EXERCISES)


def cells(path: Path) -> list[nbformat.NotebookNode]:
    return nbformat.read(path, as_version=4).cells


def solution_cells() -> list[str]:
    """The chapter's code cells tagged solution that define an answer (the boxes
    tagged solution under them, "What the checker catches", are markdown)."""
    return [
        c.source
        for c in cells(CHAPTER)
        if c.cell_type == "code"
        and "solution" in c.metadata.get("tags", [])
        and any(
            isinstance(n, (ast.FunctionDef, ast.ClassDef))
            for n in ast.parse(c.source).body
        )
    ]


def student_nb() -> dict:
    return json.loads(STUDENT.read_text(encoding="utf8"))


def with_answers(answers: dict[str, str], nb: dict | None = None) -> dict:
    """The student edition with the stub cells defining these names replaced (a cell
    with two stubs, split_heads and combine_heads, gets both answers)."""
    nb = copy.deepcopy(nb or student_nb())
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


def solution_renames(sources: list[str] | None = None) -> dict[str, str]:
    """Each solution's name -> the stub's name it answers (dot_score_solution:
    dot_score), in ``sources`` (default: ``solution_cells()``)."""
    return {
        node.name: _exercise_name(node.name)
        for code in (solution_cells() if sources is None else sources)
        for node in ast.parse(code).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
        and _exercise_name(node.name) in NAMES
    }


def solved() -> dict[str, str]:
    """Each exercise's solution, renamed to the stub's name (dot_score_solution:
    dot_score, LayerNormSolution: MyLayerNorm)."""
    sources = solution_cells()
    renames = solution_renames(sources)
    answers = {}
    for code in sources:
        for old, new in sorted(renames.items(), key=lambda kv: -len(kv[0])):
            code = code.replace(old, new)
        first = next(n for n in ast.parse(code).body if hasattr(n, "name"))
        answers[first.name] = code  # into the stub cell that defines this name
    return answers


def zoo_cell(name: str, bug: str) -> str:
    """The zoo bug's code under the exercise's name, as a student would write it."""
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


def forbidden_answers() -> tuple[dict[str, str], dict[str, str]]:
    """For every exercise, the first answer of test_references' table of forbidden
    implementations, under the exercise's name; and the name its verdict must show."""
    answers, shown = {}, {}
    for ex in EXERCISES:
        name, source = FORBIDDEN[table_key(ex)][0]
        answers[ex.name] = re.sub(r"\banswer\b", ex.name, answer_source(source))
        shown[ex.id] = name
    return answers, shown


def write(folder: Path, name: str, nb: dict | str) -> Path:
    text = nb if isinstance(nb, str) else json.dumps(nb)
    path = folder / f"{name}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf8")
    return path


# --- the tricks (issue 34): each must score 0 -------------------------------------------

# A class body runs when the grader loads the notebook: each trick sits in one, as the
# base class of the MyLayerNorm stub (so that the grader must load it).
_BASE = "class MyLayerNorm(Sneaky, nn.Module):\n" + textwrap.indent(
    "def __init__(self, d_model, eps=1e-5):\n"
    "    super().__init__()\n"
    "    raise NotImplementedError  # your code here\n\n"
    "def forward(self, x):\n"
    "    raise NotImplementedError  # your code here\n",
    "    ",
)

REPLACES_CHECKERS = """\
class Sneaky:
    import transformer_edu.exercises as _ex
    from transformer_edu.exercises.harness import CheckResult as _R

    def _pass(fn, quiet=False, _R=_R, **kw):
        return _R("check", True, "✓ passed", "passed", cases_run=1, cases_total=1)

    for _name in list(_ex.CHECKERS):
        _ex.CHECKERS[_name] = _pass
"""

FAKE_RESULTS = """\
class Sneaky:
    import json as _json, os as _os, sys as _sys
    _ids = {ids!r}
    for _fd in range(3, 64):
        for _id in _ids:
            _line = _json.dumps({{"id": _id, "status": "passed", "verdict": "ok",
                                 "hint": "", "note": ""}}) + "\\n"
            try:
                _os.write(_fd, _line.encode())
            except OSError:
                pass
    _os._exit(0)
"""

# the notebook's own signing door: a signed answer for look_ahead_mask, computed by the
# reference, written to every descriptor, then the process ends
FORGES_SEALED = """\
import io, os, struct, sys
import torch
from transformer_edu.model.masks import causal_mask

def look_ahead_mask(T):
    value = causal_mask(T)[0, 0]
    blob = io.BytesIO()
    torch.save({"value": value}, blob)
    header = {"status": "ok", "rng": bytes(torch.get_rng_state().numpy())}
    sealed = []
    sys.audit("transformer_edu.seal", repr(header), blob.getvalue(), sealed)
    for fd in range(3, 64):
        try:
            os.write(fd, struct.pack(">I", len(sealed[0])) + sealed[0])
        except (OSError, IndexError):
            pass
    os._exit(0)
"""

ALLOW_REFERENCES = """\
class Sneaky:
    from transformer_edu.exercises import allow_references as _allow
    _door = _allow()
    _door.__enter__()  # and never leaves
"""

DISABLE_TORCH_FUNCTION = {
    "MyLayerNorm": """\
import torch
import torch.nn.functional as F
from torch import nn

class MyLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        with torch._C.DisableTorchFunction():
            return torch.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
""",
    "attention": """\
import torch
import torch.nn.functional as F

def attention(q, k, v, mask=None):
    with torch._C.DisableTorchFunction():
        return torch._C._nn.scaled_dot_product_attention(q, k, v, mask)
""",
    "look_ahead_mask": """\
def look_ahead_mask(T):
    import types
    from transformer_edu.model.masks import causal_mask as cm

    code = cm.__code__.replace(co_name="mine", co_firstlineno=1)
    copy = types.FunctionType(code, cm.__globals__, "mine", cm.__defaults__)
    copy.__kwdefaults__ = cm.__kwdefaults__
    return copy(T)[0, 0]
""",
}

OS_SYSTEM = """\
class Sneaky:
    import os as _os
    _os.system("touch {marker}")
"""

SETSID = """\
class Sneaky:
    import subprocess as _sp
    _sp.Popen(["setsid", "sh", "-c",
               "sleep 5; echo 'hacked,1,x,25,25' >> {grades}/grades.csv; touch {marker}"])
"""

# with seccomp switched off for a test of the warden: a process started all the same,
# through a fresh copy of the module subprocess uses (no audit event, no module attribute
# the runner replaced), in a session of its own
ESCAPES = """\
class Sneaky:
    import importlib.util as _u, os as _os
    _spec = _u.find_spec("_posixsubprocess")
    _fresh = _u.module_from_spec(_spec)
    _spec.loader.exec_module(_fresh)
    _args = [b"/bin/sh", b"-c", b"sleep 3; touch {marker}; sleep 600"]
    _fresh.fork_exec(_args, [b"/bin/sh"], True, (), None, None, -1, -1, -1, -1, -1, -1,
                     *_os.pipe(), False, True, -1, None, None, None, -1, None, False)
"""

# tried on the grader after it was rebuilt (issue 34): each scores 0 through make grade

# a class body writes the outputs, and outside its folder; says what it could do
WRITES_OUTPUTS = """\
class Sneaky:
    import os as _os
    _out = []
    for _p in ({grades}/'grades.csv', {grades}/'lms.csv', {marker}, '/tmp/forged.csv'):
        try:
            with open(_p, 'w') as _f:
                _f.write('hacked,25')
            _out.append('WROTE ' + str(_p))
        except OSError as _e:
            _out.append(type(_e).__name__)
    raise RuntimeError(' '.join(_out))
"""

# signals: ignore the alarm, kill the parent, every process, by pidfd, a timer off
SIGNALS = """\
import os as _os, signal as _signal

def _tries():
    return [
        lambda: _signal.signal(_signal.SIGALRM, _signal.SIG_IGN),
        lambda: _os.kill(_os.getppid(), 9),
        lambda: _os.kill(-1, 9),
        lambda: _signal.pidfd_send_signal(_os.pidfd_open(_os.getppid()), 9),
        lambda: _signal.setitimer(_signal.ITIMER_REAL, 0),
    ]

class Sneaky:
    _out = []
    for _t in _tries():
        try:
            _t()
            _out.append('DID')
        except Exception as _e:
            _out.append(type(_e).__name__)
    raise RuntimeError(' '.join(_out))
"""

COPIES_REFERENCE = {
    # the package's source compiled again, in the answer: the same instructions
    "look_ahead_mask": """\
import inspect
from transformer_edu.model import masks as _m

def look_ahead_mask(T):
    ns = {}
    exec(inspect.getsource(_m.causal_mask), {"torch": torch, "Tensor": torch.Tensor}, ns)
    return ns["causal_mask"](T)[0, 0]
""",
    # a tensor whose comparisons all say yes
    "pad_mask": """\
class Yes(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal", "eq", "__eq__",
                                             "isclose", "all"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

def pad_mask(tokens, pad_idx):
    return torch.zeros(tokens.shape[0], 1, 1, tokens.shape[1],
                       dtype=torch.bool).as_subclass(Yes)
""",
    # the runner ended from inside an answer
    "smooth": """\
import os

def smooth(target, vocab_size, smoothing):
    os._exit(0)
""",
}


def _sneaky(trick: str) -> dict:
    """The unsolved edition whose MyLayerNorm stub stands on ``trick``'s class."""
    return with_answers({"MyLayerNorm": trick + "\n\n" + _BASE})


def holes(grades: Path, markers: Path) -> dict[str, dict]:
    """Each trick as a submission, by name."""
    ids = [e.id for e in EXERCISES]
    forbidden, _ = forbidden_answers()
    opened = dict(forbidden)
    opened["MyLayerNorm"] = ALLOW_REFERENCES + "\n\n" + re.sub(
        r"class MyLayerNorm\((.*?)\)", r"class MyLayerNorm(Sneaky, \1)",
        forbidden["MyLayerNorm"],
    )  # fmt: skip
    return {
        "hole_replaces_checkers": _sneaky(REPLACES_CHECKERS),
        "hole_fake_results": _sneaky(FAKE_RESULTS.format(ids=ids)),
        "hole_forges_sealed": with_answers({"look_ahead_mask": FORGES_SEALED}),
        "hole_allow_references": with_answers(opened),
        "hole_disable_torch_function": with_answers(DISABLE_TORCH_FUNCTION),
        "hole_os_system": _sneaky(OS_SYSTEM.format(marker=markers / "os_system")),
        "hole_setsid": _sneaky(SETSID.format(grades=grades, marker=markers / "setsid")),
        "hole_writes_outputs": _sneaky(WRITES_OUTPUTS.format(
            grades=f"__import__('pathlib').Path({str(grades)!r})",
            marker=repr(str(markers / "written")))),
        "hole_signals": _sneaky(SIGNALS),
        "hole_copies_reference": with_answers(COPIES_REFERENCE),
    }  # fmt: skip


def escapes(marker: Path) -> dict:
    return _sneaky(ESCAPES.format(marker=marker))


# --- honest work (issue 34): none of it lost ---------------------------------------------

HELPERS = {
    "split_heads": """\
to_heads = lambda x, H: x.reshape(x.size(0), x.size(1), H, -1).transpose(1, 2)

def split_heads(x, n_heads):
    # (B, T, D) -> (B, H, T, Dh)
    return to_heads(x, n_heads)

def combine_heads(x):
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)
""",
    "look_ahead_mask": """\
from collections import namedtuple

device = torch.device("cpu")
Shape = namedtuple("Shape", "rows cols")

def look_ahead_mask(T):
    shape = Shape(T, T)
    return torch.ones(shape.rows, shape.cols, dtype=torch.bool, device=device).tril()
""",
}

PARTIAL = {  # right for pad_idx 0 only: 3 of the 4 cases pass
    "pad_mask": """\
def pad_mask(tokens, pad_idx):
    return (tokens != 0)[:, None, None, :]
""",
}

HANG_IN_CLASS_BODY = """\
class Forever:
    while True:
        pass

class MyLayerNorm(Forever):
    pass
"""


def new_notebook() -> dict:
    """Three answers pasted into a fresh notebook (as in a new Colab one)."""
    answers = solved()
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# my homework"),
            nbformat.v4.new_code_cell(
                "import torch\nimport torch.nn.functional as F\nfrom torch import nn"
            ),
            nbformat.v4.new_code_cell(answers["look_ahead_mask"]),
            nbformat.v4.new_code_cell(answers["pad_mask"]),
            nbformat.v4.new_code_cell(answers["smooth"]),
        ]
    )
    return json.loads(nbformat.writes(nb))


def honest() -> dict[str, dict]:
    everything = solved()
    return {
        "honest_helpers": with_answers({**everything, **HELPERS}),
        "honest_partial": with_answers({**everything, **PARTIAL}),
        "honest_hang_in_class_body": with_answers(
            {**everything, "MyLayerNorm": HANG_IN_CLASS_BODY}
        ),
        "honest_new_notebook": new_notebook(),
    }


EXPECTED_HONEST = {  # total points, and the rows that are not "passed"
    "honest_helpers": (MAX, {}),
    "honest_partial": (MAX - 1 + 0.75, {"6.2": "failed"}),
    "honest_hang_in_class_body": (MAX - 2, {"7": "timed out"}),
    "honest_new_notebook": (3, None),  # the other exercises: missing
}


def compact(answers: dict[str, str]) -> dict:
    """A short honest notebook for running both ways: the student edition's imports,
    then one cell per exercise, its answer and its checker (as the edition has it)."""
    edition = student_nb()
    imports = next(
        c for c in edition["cells"]
        if c["cell_type"] == "code" and "from transformer_edu.exercises import" in
        "".join(c["source"])
    )  # fmt: skip
    nb = nbformat.v4.new_notebook(
        metadata={"transformer_edu": {"chapter": "11_exercises"}}
    )
    nb.cells.append(nbformat.v4.new_code_cell("".join(imports["source"])))
    done = set()
    for ex in EXERCISES:
        if ex.name in done:
            continue
        stub = next(
            "".join(c["source"]) for c in edition["cells"]
            if c["cell_type"] == "code" and re.search(
                rf"^(def|class) {ex.name}\b", "".join(c["source"]), re.M)
        )  # fmt: skip
        checks = [line for line in stub.splitlines() if line.startswith("check_")]
        defined = [
            e for e in EXERCISES if re.search(rf"^(def|class) {e.name}\b", stub, re.M)
        ]
        done |= {e.name for e in defined}
        body = "\n\n".join(dict.fromkeys(answers.get(e.name, "") for e in defined))
        body = "\n".join(
            x
            for x in body.splitlines()
            if not x.startswith(("check_", "assert check_"))
        )
        cell = nbformat.v4.new_code_cell((body or stub) + "\n\n" + "\n".join(checks))
        cell.metadata["exercises"] = [e.id for e in defined]
        nb.cells.append(cell)
    return json.loads(nbformat.writes(nb))


# --- a class of 200 (issue 45): each graded between two honest classmates ----------------

# A torch class the answer says it is: the judge once rebuilt torch's own class from the
# description and ran its forward in the grader's process, unwatched
CLAIMS_TORCH = """\
import torch
from torch import nn

class MyLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps
        self.normalized_shape = (d_model,)
        self.elementwise_affine = True

    def forward(self, x):
        return x

MyLayerNorm.__module__ = "torch.nn.modules.normalization"
MyLayerNorm.__qualname__ = "LayerNorm"
"""

# A reference the watch knows but no exercise forbids (a scaling exercise's), handed an
# object whose arithmetic runs the real answer: while a watched reference ran, the watch
# once ignored every call.
INSIDE_A_REFERENCE = """\
from transformer_edu.modern.scaling import layer_params

class _Runs:
    def __init__(self, fn):
        self.fn = fn
    def __mul__(self, other):
        self.out = self.fn()
        return 0
    __rmul__ = __mul__
    def __add__(self, other):
        return 0
    __radd__ = __add__

def _inside(fn):
    box = _Runs(fn)
    layer_params(box, box, False)
    return box.out
"""

# torch's own handler for a call runs with torch's function modes off: an object whose
# __index__ torch.zeros reads once ran torch's builtins unseen
INSIDE_THE_HANDLER = """\
import math
import torch
import torch.nn.functional as F
from torch import nn

class _Index:
    def __init__(self, fn):
        self.fn = fn
    calls = 0

    def __index__(self):  # torch.zeros reads it twice, then three times in its handler
        self.calls += 1
        if self.calls == 3:
            self.out = self.fn()
        return 1

def _inside(fn):
    box = _Index(fn)
    torch.zeros(box)
    return box.out

def embed(tokens, weight, pad_idx):
    x = _inside(lambda: torch.embedding(weight, tokens)) * math.sqrt(weight.size(1))
    return x.masked_fill((tokens == pad_idx)[..., None], 0.0)

def attention(q, k, v, mask=None):
    return _inside(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))

class MyLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        return _inside(lambda: torch.layer_norm(x, x.shape[-1:], self.weight,
                                                self.bias, self.eps))
"""

# the chapter's notebook, solutions and all, read from the repository the grader runs
READS_SOLUTIONS = """\
import json
import pathlib
import transformer_edu

def _solutions():
    root = pathlib.Path(transformer_edu.__file__).resolve().parents[1]
    nb = json.loads((root / "chapters" / "11_exercises.ipynb").read_text())
    found = {}
    exec("import math; import torch; from torch import nn; "
         "import torch.nn.functional as F", found)  # the chapter's imports
    for cell in nb["cells"]:
        if "solution" in cell.get("metadata", {}).get("tags", []):
            code = "".join(cell["source"]).replace("assert check_", "check_")
            try:
                exec(code, found)
            except Exception:
                pass
    return found

_SOLVED = _solutions()
"""


def _inside_answers(prelude: str) -> dict[str, str]:
    """Every exercise's forbidden answer, called through ``_inside`` (from ``prelude``)."""
    forbidden, _ = forbidden_answers()
    answers = {}
    for name, code in forbidden.items():
        code = re.sub(rf"^(def|class) {name}\b", rf"\1 _ref_{name}", code, flags=re.M)
        if code.lstrip().startswith("class") or "\nclass " in code:
            wrapper = (
                f"class {name}(_ref_{name}):\n"
                "    def __init__(self, *a, **k):\n"
                f"        _inside(lambda: super({name}, self).__init__(*a, **k))\n"
                "    def forward(self, *a, **k):\n"
                f"        return _inside(lambda: super({name}, self).forward(*a, **k))\n"
            )
        else:
            wrapper = (f"def {name}(*a, **k):\n"
                       f"    return _inside(lambda: _ref_{name}(*a, **k))\n")  # fmt: skip
        answers[name] = f"{code}\n\n{wrapper}"
    answers[EXERCISES[0].name] = prelude + "\n\n" + answers[EXERCISES[0].name]
    return answers


def _solution_lookups() -> dict[str, str]:
    """Each answer bound to the chapter's solution of the same exercise, read at
    grading time (the names as ``solved`` renames them)."""
    pairs = solution_renames().items()
    answers = {
        new: f"{new} = _SOLVED[{old!r}]\n"
        if new[0].isupper()  # a class
        else f"def {new}(*a, **k):\n    return _SOLVED[{old!r}](*a, **k)\n"
        for old, new in pairs
    }
    first = EXERCISES[0].name
    answers[first] = READS_SOLUTIONS + "\n\n" + answers[first]
    return answers


NAME_RAISES = """\
import torch

class _Named:
    @property
    def __name__(self):
        raise KeyError("no name")
    def __call__(self, T):
        return torch.ones(T, T, dtype=torch.bool).tril()

look_ahead_mask = _Named()
"""

PATCHES_STDOUT = """\
import sys

def dot_score(query, keys,
              _=setattr(type(sys.stdout), "take", lambda self: "a lot")):
    return query @ keys.transpose(1, 2)  # (B, T, S)
"""

FILLS_THE_DISK = """\
import torch

def look_ahead_mask(T):
    made = 0
    try:
        for i in range(2000):  # 2 GB, if nothing stops it
            with open(f"filler{i}", "wb") as f:
                f.write(b"x" * (1 << 20))
            made += 1
    except OSError:
        pass
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return mask if made < 100 else ~mask  # right only where the grader stopped it
"""

DESCRIBE_HANGS = """\
import torch

class _Hangs:
    @property
    def __class__(self):
        while True:
            pass
    def __call__(self, T):
        return torch.ones(T, T, dtype=torch.bool).tril()

look_ahead_mask = _Hangs()
"""

CALLS_ITSELF = """\
def dot_score(query, keys):
    return dot_score(query, keys)  # meant: the helper of the cell above
"""


def _with_dataclass(beam: str) -> str:
    head, body = beam.split("\n", 1)
    return (
        "from dataclasses import dataclass\n\n@dataclass\nclass Hyp:\n"
        "    tokens: list\n    score: float\n\n"
        f"{head}\n    Hyp(tokens=[1], score=0.0)\n{body}"
    )


def _aliased(layer_norm: str) -> str:
    """The answer class made by a function, under another name (bound to the
    exercise's name only in the notebook's namespace)."""
    code = layer_norm.split("\n\nassert check_")[0].replace("MyLayerNorm", "LayerNorm2")
    return (
        "def _layer_norm_class():\n"
        + textwrap.indent(code, "    ")
        + "\n    return LayerNorm2\n\n\nMyLayerNorm = _layer_norm_class()\n"
    )


CONTINUED = """\
def lr_at(step, d_model, warmup):
    step = (step
            % 10**12)  # a line IPython reads as the expression's, not a magic
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
"""


def answers_from_a_table() -> dict[str, str]:
    """look_ahead_mask and lr_at as tables of the fixed cases' answers, written out
    as literals: they pass the notebook's checks and answer nothing else."""
    from transformer_edu.model.masks import causal_mask
    from transformer_edu.toy.training import noam_lr

    masks = {T: causal_mask(T)[0, 0].tolist() for T in (4, 1, 2, 7)}
    rates = {
        (s, D, w): noam_lr(s, D, w)
        for D, w in [(512, 4000), (64, 100)]
        for s in [1, 2, w // 2, w, w + 1, 4 * w, 20 * w]
    }
    return {
        "look_ahead_mask": f"import torch\n_MASKS = {masks!r}\n\n\n"
        "def look_ahead_mask(T):\n    return torch.tensor(_MASKS[T])\n",
        "lr_at": f"_RATES = {rates!r}\n\n\n"
        "def lr_at(step, d_model, warmup):\n    return _RATES[step, d_model, warmup]\n",
    }


def class_of_200() -> dict[str, dict]:
    """The submissions of issue 45, by the name they are graded under."""
    everything = solved()
    return {
        "pts_inside_a_reference": with_answers(_inside_answers(INSIDE_A_REFERENCE)),
        "pts_inside_the_handler": with_answers(
            {**everything, "embed": INSIDE_THE_HANDLER}
            | {"attention": "", "MyLayerNorm": ""}
        ),
        "pts_reads_the_solutions": with_answers(_solution_lookups()),
        "pts_answers_from_a_table": with_answers(
            {**everything, **answers_from_a_table()}
        ),
        "pts_claims_a_torch_class": with_answers(
            {**everything, "MyLayerNorm": CLAIMS_TORCH}
        ),
        "run_name_raises": with_answers({**everything, "look_ahead_mask": NAME_RAISES}),
        "run_patches_stdout": with_answers({**everything, "dot_score": PATCHES_STDOUT}),
        "run_fills_the_disk": with_answers(
            {**everything, "look_ahead_mask": FILLS_THE_DISK}
        ),
        "time_describe_hangs": with_answers(
            {**everything, "look_ahead_mask": DESCRIBE_HANGS}
        ),
        "honest_calls_itself": with_answers({**everything, "dot_score": CALLS_ITSELF}),
        "honest_dataclass": with_answers(
            {**everything, "beam": _with_dataclass(everything["beam"])}
        ),
        "honest_alias": with_answers(
            {**everything, "MyLayerNorm": _aliased(everything["MyLayerNorm"])}
        ),
        "honest_continued_line": with_answers({**everything, "lr_at": CONTINUED}),
    }


SHIFT_JIS_NAME = "テスト".encode("cp932")  # as unzip extracts a Windows zip's name
