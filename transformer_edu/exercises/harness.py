"""What every checker shares: the verdict, the case runner, calling the learner's code
safely, and showing where a tensor differs from the reference.

A case is a function that returns when it passes and raises :class:`Failure` (what,
expected, got, hint) when it does not; :func:`run_cases` turns the first failure
into a :class:`CheckResult`. A checker names the references its exercise asks the
learner to write (:func:`references`, from ``watch``): the package's and torch's
Python functions by their bytecode, torch's own implementations also by name. A call
to one of them from inside the learner's code fails the case, however the learner
reached it.

The grader calls the learner's code in another process (``grading``): a
callable marked ``__transformer_edu_remote__`` runs there, and :func:`call` takes its
exception's frames and the references it called from that process.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import math
import random
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor

from .watch import (  # noqa: F401  re-exported: the checkers' and the grader's
    _ALLOWED,
    _FORBIDDEN,
    _SWITCHES,
    _TORCH_DIR,
    CALLED_REFERENCE,
    FORBIDDEN_SETS,
    TORCH_MODE_OFF,
    TORCH_OFF,
    WATCH_FAILED,
    Forbidden,
    _watching,
    allow_references,
    code_key,
    references,
)

BOOLEAN_MASK = "masks are boolean (True = may attend): compare, or call .bool()"
VIEW_AFTER_TRANSPOSE = (
    "view() needs memory laid out in order, and transpose() only swaps strides: use "
    ".reshape(...) or .contiguous().view(...) after a transpose."
)


# --- the verdict --------------------------------------------------------------------


@dataclass
class CheckResult:
    """What a checker found. Truthy when every case passed; ``message`` says it all."""

    check: str  # the checker's name, e.g. "check_causal_mask"
    passed: bool
    message: str  # the full verdict in plain words (what the checker printed)
    status: str = "passed"  # "passed", "failed" or "not implemented"
    case: str | None = None  # the first case that failed
    hint: str | None = None  # the likely mistake, when the checker recognised it
    cases_run: int = 0  # cases tried, the failing one included
    cases_total: int = 0
    cases_passed: int = 0  # when grading, every case is tried (count_every_case)

    def __bool__(self) -> bool:
        return self.passed

    def summary(self) -> str:
        """One line: the verdict without the details."""
        if self.passed:
            return f"✓ {self.check}: passed {self.cases_total}/{self.cases_total} cases"
        if self.status == "not implemented":
            return f"… {self.check}: not implemented yet"
        return (
            f"✗ {self.check}: failed case {self.cases_run}/{self.cases_total} "
            f"({self.case})"
        )

    def __repr__(self) -> str:
        return f"<CheckResult {self.summary()}>"

    def _repr_html_(self) -> str:
        colour = {"passed": "#2e7d32", "failed": "#c62828"}.get(self.status, "#9e9e9e")
        hint = (
            f"<br><b>hint:</b> {html.escape(self.hint)}"
            if self.hint and not self.passed
            else ""
        )
        return (
            f'<div style="border-left:4px solid {colour};padding:2px 8px;'
            f'margin:4px 0"><code>{html.escape(self.summary())}</code>{hint}</div>'
        )


class Failure(Exception):
    """One case failed: what happened, an optional expected/got excerpt and a hint."""

    def __init__(
        self,
        what: str,
        expected: str | None = None,
        got: str | None = None,
        hint: str | None = None,
    ):
        super().__init__(what)
        self.what, self.expected, self.got, self.hint = what, expected, got, hint


class NotImplementedYet(Exception):
    """The learner's code is still a stub (it raised NotImplementedError)."""


@dataclass
class Case:
    """One case of a checker: a label for the verdict and the code that checks it."""

    label: str  # e.g. "B=2, T=4, D=8"
    run: Callable[[], None]  # returns when the case passes, raises Failure when not


_COUNTING: ContextVar[bool] = ContextVar("counting", default=False)


@contextlib.contextmanager
def count_every_case() -> Iterator[None]:
    """Inside the block, a checker tries every case after the first failure too, to
    count those that pass (the grader's partial credit); its verdict is unchanged."""
    token = _COUNTING.set(True)
    try:
        yield
    finally:
        _COUNTING.reset(token)


# --- cases drawn per run (the grader's) -------------------------------------------------

_DRAW: ContextVar[int] = ContextVar("draw", default=0)
Row = TypeVar("Row")


@contextlib.contextmanager
def drawn_cases(draw: int) -> Iterator[None]:
    """Inside the block, checkers run their cases on inputs drawn from ``draw``, the
    grader's secret for one run (0: the fixed cases, the notebook's).

    Every seed a case names is mixed with ``draw`` (:func:`randn`, :func:`manual_seed`,
    :func:`generator`, :func:`distinct`), and every table of sizes, tokens or scalars
    is drawn anew row by row (:func:`drawn`): each case keeps its kind and what it
    tests, its inputs change, and so does the answer. A notebook that knows the fixed
    cases' answers does not know these.
    """
    token = _DRAW.set(draw)
    try:
        yield
    finally:
        _DRAW.reset(token)


def drawing() -> bool:
    """True inside :func:`drawn_cases`."""
    return bool(_DRAW.get())


def seed_of(seed: int) -> int:
    """``seed`` itself for the fixed cases, else ``seed`` mixed with the run's draw."""
    draw = _DRAW.get()
    if not draw:
        return seed
    digest = hashlib.blake2b(f"{seed}:{draw}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def manual_seed(seed: int) -> None:
    """``torch.manual_seed`` with the case's seed (mixed with the draw, if any)."""
    torch.manual_seed(seed_of(seed))


def generator(seed: int) -> torch.Generator:
    """A ``torch.Generator`` seeded with the case's seed (mixed with the draw)."""
    return torch.Generator().manual_seed(seed_of(seed))


def distinct(*shape: int, seed: int) -> Tensor:
    """Distinct float values, to show where each one went: 0, 1, 2, … in order, or
    the same numbers shuffled when the cases are drawn."""
    n = math.prod(shape)
    if not drawing():
        return torch.arange(n, dtype=torch.float32).reshape(shape)
    return torch.randperm(n, generator=generator(seed)).float().reshape(shape)


def drawn(
    fixed: Sequence[Row], draw: Callable[[random.Random, Row], Row], seed: int = 0
) -> list[Row]:
    """A checker's table of cases: ``fixed`` itself, or, when the cases are drawn,
    each row replaced by ``draw(rng, row)``, a row of the same kind."""
    if not drawing():
        return list(fixed)
    rng = random.Random(seed_of(seed))
    return [draw(rng, row) for row in fixed]


# --- running the cases ----------------------------------------------------------------


def run_cases(
    check: str,
    cases: Sequence[Case],
    quiet: bool,
    forbidden: Forbidden | None = None,
) -> CheckResult:
    """Run the cases in order; the first failure is the verdict.

    While the learner's code runs (:func:`call`), the ``forbidden`` references may not
    be called: the case fails with a message that says which one was.
    """
    total = len(cases)
    token = _FORBIDDEN.set(forbidden)
    try:
        with torch.random.fork_rng(devices=[]):  # the learner's random state is kept
            result = _first_failure(check, cases)
            if result is not None:
                result.cases_passed = result.cases_run - 1
                if result.status == "failed" and _COUNTING.get():
                    result.cases_passed = _count_the_rest(result, cases)
    finally:
        _FORBIDDEN.reset(token)
    if result is None:
        names = " · ".join(c.label for c in cases)
        message = f"✓ {check}: all {total} {_case_word()}s pass ({names})."
        result = CheckResult(
            check, True, message, "passed", cases_run=total, cases_total=total,
            cases_passed=total,
        )  # fmt: skip
    if not quiet:
        print(result.message)
    return result


def _count_the_rest(result: CheckResult, cases: Sequence[Case]) -> int:
    """Cases that pass, the first failure's predecessors included; none for code that
    called a reference. Anything but an ordinary exception stops the count."""
    if CALLED_REFERENCE in result.message:
        return 0
    passed = result.cases_run - 1
    for case in cases[result.cases_run :]:
        try:
            case.run()
        except Failure as f:
            if CALLED_REFERENCE in f.what:
                return 0
        except Exception:  # noqa: S110  a failing case: not counted
            pass
        else:
            passed += 1
    return passed


def _case_word() -> str:
    return "drawn case" if drawing() else "case"


def _first_failure(check: str, cases: Sequence[Case]) -> CheckResult | None:
    total, word = len(cases), _case_word()
    for i, case in enumerate(cases, 1):
        # every way a case can end but passing becomes a verdict, never an exception
        label = f"drawn: {case.label}" if drawing() else case.label
        failed = {"case": label, "cases_run": i, "cases_total": total}
        try:
            case.run()
        except NotImplementedYet:
            message = (
                f"… {check}: your code is not implemented yet (it raised "
                "NotImplementedError). Fill in its body and run the cell again."
            )
            return CheckResult(check, False, message, "not implemented", **failed)
        except Failure as f:
            lines = [
                f"✗ {check}: {word} {i}/{total} failed: {case.label}",
                f"  {f.what}",
            ]
            if f.expected is not None and f.expected.startswith("\n"):  # a grid
                lines += [f"  expected:{f.expected}", f"  got:{f.got}"]
            elif f.expected is not None:
                lines += [f"  expected {f.expected}", f"  got      {f.got}"]
            if f.hint:
                lines.append(f"  hint: {f.hint}")
            message = "\n".join(lines)
            return CheckResult(check, False, message, "failed", hint=f.hint, **failed)
        except Exception as e:  # the answer was too odd for the checker itself
            message = (
                f"✗ {check}: {word} {i}/{total} failed: {case.label}\n"
                f"  could not read your answer: {type(e).__name__}: {short(str(e))}"
            )
            return CheckResult(check, False, message, "failed", **failed)
        except BaseException as e:  # the grader stopped the code: say in which case
            e.add_note(
                f"case {i}/{total}: {case.label}" + (" (drawn)" if drawing() else "")
            )
            raise
    return None


def _used_reference(seen: list[str]) -> Failure:
    failed = [name for name in seen if name.startswith(WATCH_FAILED)]
    if failed and len(failed) == len(seen):  # the grader's runner: not the learner's
        return Failure(
            f"{failed[0]} while your code ran, so this case cannot be checked",
            hint="a recursion deep enough to reach Python's limit is the usual cause: "
            "does the function call itself?",
        )
    called = [name for name in seen if name not in _SWITCHES
              and not name.startswith(WATCH_FAILED)]  # fmt: skip
    if not called:
        return Failure(
            f"your code {_SWITCHES[seen[0]]}, so the checker cannot tell whether it "
            "called the reference",
            hint="leave the checker's watch alone: "
            + ", ".join(n for n in _SWITCHES if n in seen),
        )
    return Failure(
        f"your code {CALLED_REFERENCE}: {', '.join(called)}, which this exercise asks "
        "you to write yourself",
        hint=(
            "the checker tests your code, not a ready-made implementation (the "
            "package's or PyTorch's): compute the result from torch's building "
            "blocks (indexing, matmul, softmax, sum, mean, var, sqrt, …) instead"
        ),
    )


# --- calling the learner's code -----------------------------------------------------


def call(fn: Callable, *args: Any, on_error: Callable | None = None, **kw) -> Any:
    """Call learner code; its exceptions become failures that say where they came from.

    ``on_error(exception)`` may return a hint specific to the exercise. A call to one of
    the checker's forbidden references fails, whatever the code returned or raised.
    """
    seen: list[str] = []
    remote = getattr(fn, REMOTE, False)
    try:
        with _remote_watching(seen) if remote else _watching(seen):
            result = fn(*args, **kw)
    except NotImplementedError as e:
        if seen:
            raise _used_reference(seen) from e
        raise NotImplementedYet() from e
    except Exception as e:
        if seen:
            raise _used_reference(seen) from e
        # the last frame that is the learner's (not torch's) is where it went wrong
        tb = (
            getattr(e, REMOTE_FRAMES, None) or traceback.extract_tb(e.__traceback__)[1:]
        )
        frames = [f for f in tb if not f.filename.startswith(_TORCH_DIR)]
        where = ""
        if frames:
            f = frames[-1]
            line = (f.line or "").split("  #")[0].strip()  # without a trailing comment
            where = f"\n    at line {f.lineno} of {f.name}: {line}"
        hint = (on_error(e) if on_error else None) or _exception_hint(e)
        raise Failure(
            f"your code raised {type(e).__name__}: {short(str(e))}{where}", hint=hint
        ) from e
    if seen:
        raise _used_reference(seen)
    return result


REMOTE = "__transformer_edu_remote__"  # on a callable that runs in the grader's runner
REMOTE_FRAMES = "__transformer_edu_frames__"  # on its exception: the runner's frames
REMOTE_SEEN: ContextVar[list[str] | None] = ContextVar("remote_seen", default=None)


@contextlib.contextmanager
def _remote_watching(seen: list[str]) -> Iterator[None]:
    """The runner watches the learner's code; its reports land in ``seen``."""
    token = REMOTE_SEEN.set(seen)
    try:
        yield
    finally:
        REMOTE_SEEN.reset(token)


def short(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _exception_hint(e: Exception) -> str | None:
    text = str(e)
    if isinstance(e, NameError):
        return (
            "a NameError: the code uses a name that was never defined, often a "
            "variable renamed in one place only (depth vs d_k, logits vs "
            "attention_logits) or a misspelled function. Python finds it only when "
            "that line runs."
        )
    if "view size is not compatible" in text:
        return VIEW_AFTER_TRANSPOSE
    if "must match the size of tensor" in text or "shape mismatch" in text:
        return (
            "two tensors do not line up: print the shape of every intermediate "
            "result and compare with the shapes in the exercise."
        )
    if "mat1 and mat2" in text or "Expected size for first two dimensions" in text:
        return (
            "a matrix product with mismatched sizes: the key tensor needs "
            "k.transpose(-2, -1) (k.T reverses every axis of a batched tensor)."
        )
    return None


# --- reading and comparing the answer -----------------------------------------------


def as_tensor(x: Any, what: str) -> Tensor:
    """The answer as a detached tensor, or a failure that says what it was instead."""
    if isinstance(x, Tensor):
        return x.detach()
    if x is None:
        raise Failure(
            f"{what} is None: did the function forget to return its result?",
            hint="end the function with a return statement",
        )
    try:
        return torch.as_tensor(x)
    except Exception as e:
        raise Failure(
            f"{what} should be a tensor, got {type(x).__name__}",
            hint="return a torch.Tensor",
        ) from e


def fmt(values: Tensor, n: int = 6) -> str:
    """The first ``n`` values, rounded: ``[0.125, 1.000, …]`` (booleans as 0 / 1)."""
    flat = values.flatten().tolist()
    shown = []
    for v in flat[:n]:
        if isinstance(v, bool):
            shown.append("1" if v else "0")
        elif math.isnan(v) or math.isinf(v):
            shown.append(str(v))
        else:
            shown.append(f"{v:.3f}")
    return "[" + ", ".join(shown) + (", …]" if len(flat) > n else "]")


def grid(m: Tensor) -> str:
    """A (T_q, T_k) boolean mask as rows of 0 and 1, on lines of their own."""
    rows = [" ".join("1" if x else "0" for x in row) for row in m.tolist()]
    return "\n" + "\n".join(f"      {r}" for r in rows)


def _worst_row(expected: Tensor, got: Tensor) -> tuple[int, ...]:
    """Index (all axes but the last) of the row where got and expected differ most."""
    diff = (got.double() - expected.double()).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)
    if diff.dim() == 0:
        return ()
    rows = diff.amax(dim=-1) if diff.dim() > 1 else diff.reshape(1, -1).amax(-1)
    flat = int(rows.flatten().argmax())
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), rows.shape))


def _excerpt(name: str, expected: Tensor, got: Tensor) -> tuple[str, str]:
    if expected.dim() <= 1:
        return f"{name} = {fmt(expected)}", fmt(got)
    row = _worst_row(expected, got)
    idx = ", ".join(map(str, row))
    return f"{name}[{idx}] = {fmt(expected[row])}", fmt(got[row])


def close(a: Tensor, b: Tensor, atol: float, rtol: float) -> bool:
    """Same shape and allclose, compared in float64."""
    return a.shape == b.shape and torch.allclose(
        a.double(), b.double(), atol=atol, rtol=rtol
    )


@torch.no_grad()  # recomputing a mistake needs no gradient
def match(
    got: Tensor, variants: Sequence[tuple[str, Callable[[], Any]]], atol: float = 1e-4
) -> str | None:
    """The hint of the first known mistake whose output equals ``got``.

    ``variants`` pairs each hint with a function computing what that mistake gives.
    """
    for hint, make in variants:
        try:
            out = make()
        except Exception:  # a mistake that cannot happen for this input
            continue
        if isinstance(out, Tensor) and close(got, out.detach(), atol, 1e-4):
            return hint
    return None


def expect(
    name: str,
    got: Any,
    expected: Tensor,
    *,
    atol: float = 1e-4,
    rtol: float = 1e-4,
    shape_hint: str | Callable[[Tensor], str | None] | None = None,
    diagnose: Callable[[Tensor], str | None] | None = None,
    generic: str | None = None,
) -> Tensor:
    """Fail unless ``got`` has the shape of ``expected`` and (nearly) its values.

    On a difference, ``diagnose(got)`` names the mistake, else ``generic`` is the hint.
    """
    got = as_tensor(got, name)
    if tuple(got.shape) != tuple(expected.shape):
        hint = shape_hint(got) if callable(shape_hint) else shape_hint
        raise Failure(
            f"{name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}",
            hint=hint,
        )
    if expected.dtype == torch.bool:
        if got.dtype != torch.bool:
            raise Failure(
                f"{name} has dtype {got.dtype}, expected torch.bool", hint=BOOLEAN_MASK
            )
        if torch.equal(got, expected):
            return got
    elif close(got, expected, atol, rtol) and not torch.isnan(got).any():
        return got
    # it differs: show the row that differs most, and name the mistake if known
    exp_txt, got_txt = _excerpt(name, expected, got)
    hint = diagnose(got) if diagnose else None
    what = f"{name} differs from the reference"
    if expected.dtype != torch.bool:
        diff = (got.double() - expected.double()).abs()
        what += f" (largest difference {float(diff.nan_to_num(math.inf).max()):.3g})"
    raise Failure(what, exp_txt, got_txt, hint or generic)


def require_registered(
    module: torch.nn.Module, parts: Sequence[torch.nn.Module], what: str = "some layers"
) -> None:
    """Fail unless every parameter of ``parts`` is among ``module.parameters()``."""
    mine = {id(p) for p in module.parameters()}
    if not all(id(p) in mine for part in parts for p in part.parameters()):
        raise Failure(
            f"{what} are not among module.parameters(): an optimizer would never "
            "update them, and .to(device) would not move them",
            hint="layers kept in a plain Python list or dict are invisible to "
            "PyTorch: use nn.ModuleList / nn.ModuleDict, or assign each one to an "
            "attribute",
        )


def randn(*shape: int, seed: int, std: float = 1.0, dtype=torch.float32) -> Tensor:
    """Normal values that depend only on ``seed`` (and the run's draw, when the cases
    are drawn: :func:`drawn_cases`), drawn in float64, then cast."""
    g = generator(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).to(dtype)
