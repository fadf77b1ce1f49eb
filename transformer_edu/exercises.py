"""Checkers for the classroom exercises, and a zoo of real bugs they catch.

A checker runs a learner's function (or class) on several cases against the package's
reference and answers in plain words: which case failed, expected against got, and a
hint that names the likely mistake. It never raises for a wrong answer, and an
exception inside the learner's code is reported, not raised::

    from transformer_edu.exercises import check_causal_mask

    def my_causal_mask(T):
        return torch.ones(T, T, dtype=torch.bool).tril()

    check_causal_mask(my_causal_mask)  # prints the verdict, returns a CheckResult

Conventions the learner's code follows (the package's own):

- masks are boolean with **True = "may attend"**, broadcastable to (B, H, T_q, T_k);
- ``fn(q, k, v, mask=None)`` may return ``out`` or ``(out, weights)``;
- a multi-head attention class ``MyMHA(d_model, n_heads)`` keeps its projections in
  four ``nn.Linear(d_model, d_model)`` named ``w_q, w_k, w_v, w_o`` (or the package's
  ``q_proj, k_proj, v_proj, out_proj``); the checker writes its own weights into them.

``BUG_ZOO`` maps a name to a small wrong implementation (:class:`Bug`), the checkers
that catch it and a word their hint contains. ``CHECKERS`` maps checker names to
checkers. ``use_attention(model, fn)`` plugs an attention function into a model.
"""

from __future__ import annotations

import contextlib
import html
import math
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import attention as _attention
from .attention import MultiHeadAttention, scaled_dot_product_attention
from .embeddings import TokenEmbedding, sinusoidal_table
from .masks import causal_mask, padding_mask, target_mask
from .norm import LayerNorm

__all__ = [
    "BUG_ZOO",
    "CHECKERS",
    "Bug",
    "CheckResult",
    "check_add_positional_encoding",
    "check_causal_mask",
    "check_combine_heads",
    "check_greedy_decode",
    "check_label_smoothing",
    "check_layer_norm",
    "check_multi_head_attention",
    "check_noam_lr",
    "check_padding_mask",
    "check_positional_encoding",
    "check_scaled_dot_product_attention",
    "check_score_function",
    "check_split_heads",
    "check_token_embedding",
    "check_transformer_masks",
    "use_attention",
]

BOS, EOS = 1, 2  # the package's special ids (data.Vocab)


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


class _Failure(Exception):
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


class _NotImplementedYet(Exception):
    pass


@dataclass
class _Case:
    label: str
    run: Callable[[], None]


def _run(check: str, cases: Sequence[_Case], quiet: bool) -> CheckResult:
    """Run the cases in order; the first failure is the verdict."""
    total = len(cases)
    with torch.random.fork_rng(devices=[]):  # the learner's random state is kept
        result = _first_failure(check, cases)
    if result is None:
        names = " · ".join(c.label for c in cases)
        message = f"✓ {check}: all {total} cases pass ({names})."
        result = CheckResult(check, True, message, "passed", None, None, total, total)
    if not quiet:
        print(result.message)
    return result


def _first_failure(check: str, cases: Sequence[_Case]) -> CheckResult | None:
    total = len(cases)
    for i, case in enumerate(cases, 1):
        try:
            case.run()
        except _NotImplementedYet:
            message = (
                f"… {check}: your code is not implemented yet (it raised "
                "NotImplementedError). Fill in its body and run the cell again."
            )
            return CheckResult(
                check, False, message, "not implemented", case.label, None, i, total
            )
        except _Failure as f:
            lines = [f"✗ {check}: case {i}/{total} failed: {case.label}", f"  {f.what}"]
            if f.expected is not None and f.expected.startswith("\n"):  # a grid
                lines += [f"  expected:{f.expected}", f"  got:{f.got}"]
            elif f.expected is not None:
                lines += [f"  expected {f.expected}", f"  got      {f.got}"]
            if f.hint:
                lines.append(f"  hint: {f.hint}")
            return CheckResult(
                check, False, "\n".join(lines), "failed", case.label, f.hint, i, total
            )
        except Exception as e:  # the answer was too odd for the checker itself
            message = (
                f"✗ {check}: case {i}/{total} failed: {case.label}\n"
                f"  could not read your answer: {type(e).__name__}: {_short(str(e))}"
            )
            return CheckResult(
                check, False, message, "failed", case.label, None, i, total
            )
    return None


# --- calling the learner's code and comparing its answer ----------------------------

_TORCH_DIR = str(Path(torch.__file__).parent)


def _call(fn: Callable, *args: Any, on_error: Callable | None = None, **kw) -> Any:
    """Call learner code; its exceptions become failures that say where they came from."""
    try:
        return fn(*args, **kw)
    except NotImplementedError as e:
        raise _NotImplementedYet() from e
    except Exception as e:
        frames = [
            f
            for f in traceback.extract_tb(e.__traceback__)[1:]
            if not f.filename.startswith(_TORCH_DIR)
        ]
        where = ""
        if frames:
            f = frames[-1]
            line = (f.line or "").split("  #")[0].strip()  # without a trailing comment
            where = f"\n    at line {f.lineno} of {f.name}: {line}"
        hint = (on_error(e) if on_error else None) or _exception_hint(e)
        raise _Failure(
            f"your code raised {type(e).__name__}: {_short(str(e))}{where}", hint=hint
        ) from e


def _short(text: str, limit: int = 300) -> str:
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
        return (
            "view() needs memory laid out in order, and transpose() only swaps "
            "strides: use .reshape(...) or .contiguous().view(...) after a transpose."
        )
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


def _tensor(x: Any, what: str) -> Tensor:
    if isinstance(x, Tensor):
        return x.detach()
    if x is None:
        raise _Failure(
            f"{what} is None: did the function forget to return its result?",
            hint="end the function with a return statement",
        )
    try:
        return torch.as_tensor(x)
    except Exception as e:
        raise _Failure(
            f"{what} should be a tensor, got {type(x).__name__}",
            hint="return a torch.Tensor",
        ) from e


def _fmt(values: Tensor, n: int = 6) -> str:
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
        return f"{name} = {_fmt(expected)}", _fmt(got)
    row = _worst_row(expected, got)
    idx = ", ".join(map(str, row))
    return f"{name}[{idx}] = {_fmt(expected[row])}", _fmt(got[row])


def _close(a: Tensor, b: Tensor, atol: float, rtol: float) -> bool:
    return a.shape == b.shape and torch.allclose(
        a.double(), b.double(), atol=atol, rtol=rtol
    )


def _match(got: Tensor, variants: Sequence[tuple[str, Callable[[], Any]]], atol=1e-4):
    """The hint of the first known mistake whose output equals ``got``."""
    for hint, make in variants:
        try:
            out = make()
        except Exception:
            continue
        if isinstance(out, Tensor) and _close(got, out.detach(), atol, 1e-4):
            return hint
    return None


def _expect(
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
    """Fail unless ``got`` has the shape of ``expected`` and (nearly) its values."""
    got = _tensor(got, name)
    if tuple(got.shape) != tuple(expected.shape):
        hint = shape_hint(got) if callable(shape_hint) else shape_hint
        raise _Failure(
            f"{name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}",
            hint=hint,
        )
    if expected.dtype == torch.bool:
        if got.dtype != torch.bool:
            raise _Failure(
                f"{name} has dtype {got.dtype}, expected torch.bool",
                hint="masks are boolean (True = may attend): compare, or call .bool()",
            )
        if torch.equal(got, expected):
            return got
    elif _close(got, expected, atol, rtol) and not torch.isnan(got).any():
        return got
    exp_txt, got_txt = _excerpt(name, expected, got)
    hint = diagnose(got) if diagnose else None
    what = f"{name} differs from the reference"
    if expected.dtype != torch.bool:
        diff = (got.double() - expected.double()).abs()
        what += f" (largest difference {float(diff.nan_to_num(math.inf).max()):.3g})"
    raise _Failure(what, exp_txt, got_txt, hint or generic)


def _randn(*shape: int, seed: int, std: float = 1.0, dtype=torch.float32) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).to(dtype)


# --- chapter 1: score functions -----------------------------------------------------


def check_score_function(
    fn: Callable, kind: str = "dot", quiet: bool = False
) -> CheckResult:
    """Check a Luong/Bahdanau score function against ``seq2seq.SCORE_FUNCTIONS[kind]``.

    ``kind="dot"``: ``fn(query, keys)``; ``"general"``: ``fn(query, keys, W)``;
    ``"additive"``: ``fn(query, keys, W1, W2, v)``, where W, W1, W2, v are the
    ``nn.Linear`` layers to use. Shape: query (B, T, H), keys (B, S, H) -> (B, T, S).
    """
    from .seq2seq import SCORE_FUNCTIONS

    if kind not in SCORE_FUNCTIONS:
        raise ValueError(f"kind={kind!r}; expected one of {sorted(SCORE_FUNCTIONS)}")
    name = f"check_score_function[{kind}]"

    def case(B: int, T: int, S: int, H: int, seed: int) -> _Case:
        def run() -> None:
            torch.manual_seed(seed)
            ref = SCORE_FUNCTIONS[kind](H)
            query, keys = _randn(B, T, H, seed=seed), _randn(B, S, H, seed=seed + 1)
            layers = {"dot": (), "general": ("W",), "additive": ("W1", "W2", "v")}
            mods = [getattr(ref, a) for a in layers[kind]]
            with torch.no_grad():
                expected = ref(query, keys)
                got = _call(fn, query.clone(), keys.clone(), *mods, on_error=_score_err)

            def diagnose(got: Tensor) -> str | None:
                variants = [
                    (
                        "the scores come out as (B, S, T), transposed: rows are "
                        "queries, columns keys (query @ keys.transpose(1, 2))",
                        lambda: expected.transpose(1, 2),
                    )
                ]
                if kind == "additive":
                    variants.append(
                        (
                            "the tanh is missing: score = vᵀ tanh(W1 h + W2 s)",
                            lambda: ref.v(
                                ref.W1(query)[:, :, None] + ref.W2(keys)[:, None]
                            ).squeeze(-1),
                        )
                    )
                if kind == "general":
                    variants.append(
                        (
                            "W is applied to the queries (gives hᵀWᵀs); the book "
                            "applies it to the keys: query @ W(keys).transpose(1, 2)",
                            lambda: ref.W(query) @ keys.transpose(1, 2),
                        )
                    )
                with torch.no_grad():
                    return _match(got, variants)

            _expect(
                "scores",
                got,
                expected,
                diagnose=diagnose,
                shape_hint=lambda g: (
                    "transposed: rows are the T queries, columns the S keys"
                    if tuple(g.shape) == (B, S, T)
                    else "one score per (query, key) pair: shape (B, T, S)"
                ),
            )

        return _Case(f"B={B}, T={T}, S={S}, H={H}", run)

    cases = [case(2, 3, 5, 4, 10), case(1, 1, 4, 6, 11), case(3, 4, 4, 8, 12)]
    return _run(name, cases, quiet)


def _score_err(e: Exception) -> str | None:
    if "must match the size of tensor" in str(e):
        return (
            "to pair every query with every key, give the queries a key axis and the "
            "keys a query axis before adding: W1(q)[:, :, None, :] + W2(k)[:, None, "
            ":, :] broadcasts to (B, T, S, H)"
        )
    return None


# --- chapter 2: token embedding -----------------------------------------------------


def check_token_embedding(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(tokens, weight, pad_idx)`` -> (B, L, D): the rows of ``weight``
    (V, D) for each token, times sqrt(D), and exactly zero at padding positions."""

    def case(tokens: list[list[int]], V: int, D: int, pad: int, seed: int) -> _Case:
        def run() -> None:
            ids = torch.tensor(tokens)
            weight = _randn(V, D, seed=seed)  # the PAD row is NOT zero on purpose
            ref = TokenEmbedding(V, D, pad_idx=pad)
            with torch.no_grad():
                ref.embedding.weight.copy_(weight)
                expected = ref(ids)
            got = _call(fn, ids.clone(), weight.clone(), pad)

            def diagnose(got: Tensor) -> str | None:
                raw = weight[ids]
                is_pad = (ids == pad)[..., None]
                if not torch.allclose(got.masked_select(is_pad), torch.zeros(())):
                    if _close(got, raw * math.sqrt(D), 1e-4, 1e-4):
                        return (
                            "padding positions must come out as zeros: the weight's "
                            "PAD row is not guaranteed to be zero (weight tying, "
                            "init): zero them with masked_fill(tokens == pad_idx, 0)"
                        )
                scale_hints = [
                    ("not scaled: multiply the looked-up rows by √d_model", 1.0),
                    ("divided by √d_model; multiply instead", 1 / math.sqrt(D)),
                    ("scaled by d_model; the factor is √d_model", float(D)),
                ]
                for hint, factor in scale_hints:
                    if _close(got, (raw * factor).masked_fill(is_pad, 0), 1e-4, 1e-4):
                        return hint
                return None

            _expect("embeddings", got, expected, diagnose=diagnose)

        return _Case(f"{len(tokens)}×{len(tokens[0])} tokens, D={D}, pad={pad}", run)

    cases = [
        case([[5, 6, 7, 0], [8, 9, 0, 0]], 12, 16, 0, 20),
        case([[4, 2, 2, 1, 3]], 6, 9, 0, 21),
        case([[3, 0, 5], [3, 3, 4]], 7, 4, 3, 22),
    ]
    return _run("check_token_embedding", cases, quiet)


# --- chapter 3: positional encoding -------------------------------------------------


def _pe_variant(
    max_len: int,
    d_model: int,
    *,
    exponent: str = "2i",
    swap: bool = False,
    first: int = 0,
    halves: bool = False,
) -> Tensor:
    """The sinusoidal table, or one of the common ways to get it wrong."""
    pos = torch.arange(first, first + max_len, dtype=torch.float64)[:, None]
    col = torch.arange(d_model, dtype=torch.float64)[None, :]
    pair = torch.div(col, 2, rounding_mode="floor")
    power = {"2i": 2 * pair, "i": pair, "col": col, "2col": 2 * col}[exponent]
    angle = pos / 10000.0 ** (power / d_model)  # (L, D)
    if halves:  # all sines first, then all cosines
        half = (d_model + 1) // 2
        a = angle[:, 0::2]
        return torch.cat([a.sin(), a[:, : d_model - half].cos()], dim=1).float()
    even, odd = (torch.cos, torch.sin) if swap else (torch.sin, torch.cos)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = even(angle[:, 0::2])
    pe[:, 1::2] = odd(angle[:, 1::2])
    return pe.float()


def check_positional_encoding(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(max_len, d_model)`` -> the (max_len, d_model) sinusoidal table:
    PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D))."""

    def case(L: int, D: int) -> _Case:
        def run() -> None:
            expected = sinusoidal_table(L, D)
            got = _call(fn, L, D, on_error=_pe_err if D % 2 else None)

            def diagnose(got: Tensor) -> str | None:
                if L > 1 and torch.allclose(got, got[:1].expand_as(got)):
                    return (
                        "every position gets the same vector, so the model cannot "
                        "tell positions apart: were the angles overwritten (e.g. by "
                        "a fresh zeros array) before sin/cos were applied?"
                    )
                v = [
                    (
                        "sin and cos are swapped: even columns (2i) take the sine, "
                        "odd columns (2i+1) the cosine",
                        lambda: _pe_variant(L, D, swap=True),
                    ),
                    (
                        "wrong exponent: the frequency of columns 2i and 2i+1 is "
                        "1/10000^(2i/D); you used i/D (i = column pair index), so "
                        "frequencies fall too slowly",
                        lambda: _pe_variant(L, D, exponent="i"),
                    ),
                    (
                        "wrong exponent: you used the column index as i, giving "
                        "10000^(2·col/D); the pair (2i, 2i+1) shares 10000^(2i/D)",
                        lambda: _pe_variant(L, D, exponent="2col"),
                    ),
                    (
                        "wrong exponent: each column got its own frequency "
                        "10000^(col/D); columns 2i and 2i+1 must share 10000^(2i/D)",
                        lambda: _pe_variant(L, D, exponent="col"),
                    ),
                    (
                        "positions start at 1; the first position is pos = 0 "
                        "(its row is [0, 1, 0, 1, …])",
                        lambda: _pe_variant(L, D, first=1),
                    ),
                    (
                        "the sines and cosines are concatenated in two halves; the "
                        "paper interleaves them: sin in even columns, cos in odd",
                        lambda: _pe_variant(L, D, halves=True),
                    ),
                ]
                return _match(got, v)

            _expect(
                "table",
                got,
                expected,
                diagnose=diagnose,
                shape_hint=lambda g: (
                    "the table is transposed: one row per position, shape "
                    "(max_len, d_model)"
                    if tuple(g.shape) == (D, L)
                    else "return one row per position: shape (max_len, d_model)"
                ),
            )

        return _Case(f"max_len={L}, d_model={D}", run)

    cases = [case(10, 16), case(50, 64), case(7, 5), case(1, 4)]
    return _run("check_positional_encoding", cases, quiet)


def _pe_err(e: Exception) -> str | None:
    return (
        "with an odd d_model there is one more sine column (even indices) than "
        "cosine columns (odd indices): take d_model // 2 angles for the cosines"
    )


def check_add_positional_encoding(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(x, table)`` -> x + PE for batch-first x (B, T, D) and a table
    (max_len, D): every sentence gets row t of the table added at position t."""

    def case(B: int, T: int, D: int, seed: int) -> _Case:
        def run() -> None:
            table = sinusoidal_table(16, D)
            x = _randn(B, T, D, seed=seed)
            expected = x + table[:T]
            got = _call(fn, x.clone(), table.clone(), on_error=_add_pe_err)

            def diagnose(got: Tensor) -> str | None:
                added = got - x
                same = added[:, :1].expand_as(added)
                if B > 1 and torch.allclose(added, same, atol=1e-5):
                    return (
                        "each sentence gets one vector at all its positions (row b "
                        "of the table for sentence b): the table was sliced by the "
                        "batch axis, as code written for seq-first (T, B, D) input "
                        "does; with batch-first x the positions are x.size(1)"
                    )
                return None

            _expect("out", got, expected, diagnose=diagnose)

        return _Case(f"B={B}, T={T}, D={D}", run)

    cases = [case(2, 5, 8, 30), case(4, 4, 6, 31), case(5, 3, 8, 32), case(1, 1, 4, 33)]
    return _run("check_add_positional_encoding", cases, quiet)


def _add_pe_err(e: Exception) -> str | None:
    if "must match the size of tensor" in str(e):
        return (
            "the table has max_len rows but x only T positions: add the first T "
            "rows, table[: x.size(1)], which broadcast over the batch"
        )
    return None


# --- chapter 4: scaled dot-product attention ----------------------------------------


def _sdpa_variant(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: str = "sqrt",
    axis: int = -1,
    masking: str = "apply",
) -> Tensor:
    """Attention output computed right, or with one known mistake."""
    d_k = q.size(-1)
    factor = {
        "sqrt": 1 / math.sqrt(d_k),
        "none": 1.0,
        "times_sqrt": math.sqrt(d_k),
        "d": 1 / d_k,
        "sqrt_dv": 1 / math.sqrt(v.size(-1)),
    }[scale]
    scores = q @ k.transpose(-2, -1) * factor
    if mask is not None and masking != "ignore":
        blocked = mask if masking == "flip" else ~mask
        scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=axis) @ v


def _sdpa_variants(q, k, v, mask) -> list[tuple[str, Callable[[], Tensor]]]:
    def var(**kw):
        return lambda: _sdpa_variant(q, k, v, mask, **kw)

    out = [
        (
            "your weights sum to 1 along the query axis; softmax belongs on the key "
            "axis (dim=-1), so that each query's weights sum to 1",
            var(axis=-2),
        ),
        (
            "the scores are multiplied by √d_k instead of divided: x / d_k**-0.5 is "
            "x · √d_k. Divide by math.sqrt(d_k)",
            var(scale="times_sqrt"),
        ),
        (
            "the scores are not scaled: divide Q Kᵀ by √d_k before the softmax",
            var(scale="none"),
        ),
        ("the scores are divided by d_k; divide by √d_k", var(scale="d")),
    ]
    if v.size(-1) != q.size(-1):
        out.append(
            (
                "scaled by √d_v (the value size); the scale is √d_k = √q.size(-1)",
                var(scale="sqrt_dv"),
            )
        )
    if mask is not None:
        out += [
            (
                "masked keys still get weight: the mask never reaches the softmax. "
                "Mask the tensor you pass to softmax, and keep the result: "
                "scores = scores.masked_fill(~mask, ...) (masked_fill is not in place)",
                var(masking="ignore"),
            ),
            (
                "mask polarity is flipped: in this book True means 'may attend', so "
                "block where the mask is False (masked_fill(~mask, ...))",
                var(masking="flip"),
            ),
        ]
    return out


def _out_and_weights(result: Any, out_shape, w_shape) -> tuple[Any, Any]:
    if isinstance(result, (tuple, list)):
        if len(result) != 2:
            raise _Failure(
                f"returned {len(result)} values; return out or (out, weights)",
                hint="return out, weights",
            )
        a, b = result
        if (
            isinstance(a, Tensor)
            and isinstance(b, Tensor)
            and tuple(a.shape) == tuple(w_shape)
            and tuple(b.shape) == tuple(out_shape)
            and tuple(out_shape) != tuple(w_shape)
        ):
            raise _Failure(
                "the two results come in the wrong order",
                hint="return (out, weights): the output first",
            )
        return a, b
    return result, None


def check_scaled_dot_product_attention(
    fn: Callable, quiet: bool = False
) -> CheckResult:
    """Check ``fn(q, k, v, mask=None)`` -> out or (out, weights) against
    ``scaled_dot_product_attention``.

    Shape: q (..., T, d_k), k (..., S, d_k), v (..., S, d_v), mask broadcastable to
    (..., T, S), boolean, True = may attend -> out (..., T, d_v), weights (..., T, S).
    A query whose keys are all masked may get any finite output (zeros or the mean of
    the values) but never NaN.
    """

    def case(label, q, k, v, mask=None) -> _Case:
        def run() -> None:
            args = (q.clone(), k.clone(), v.clone())
            margs = () if mask is None else (mask.clone(),)
            exp_out, exp_w = scaled_dot_product_attention(q, k, v, mask)
            result = _call(fn, *args, *margs, on_error=_sdpa_err)
            out, w = _out_and_weights(result, exp_out.shape, exp_w.shape)
            out = _tensor(out, "out")
            if out.dtype != q.dtype:
                raise _Failure(
                    f"out has dtype {out.dtype} for inputs of dtype {q.dtype}",
                    hint="keep the input's dtype: no .float() or hard-coded float32",
                )
            # rows with no allowed key: any finite answer is fine (zero or mean of v)
            live = (
                torch.ones(exp_w.shape[:-1], dtype=torch.bool)
                if mask is None
                else mask.expand(exp_w.shape).any(-1)
            )  # (..., T)
            if tuple(out.shape) == tuple(exp_out.shape) and torch.isnan(out).any():
                dead_only = not torch.isnan(out[live]).any()
                raise _Failure(
                    "out contains NaN"
                    + (" in the rows whose keys are all masked" if dead_only else ""),
                    hint=(
                        "a query with every key masked gets -inf everywhere, and "
                        "softmax of all -inf is NaN (0/0). Fill with "
                        "torch.finfo(dtype).min (or -1e9) instead of -inf, or zero "
                        "those rows"
                        if dead_only
                        else "NaN appears: check for -inf, 0/0 or a negative sqrt"
                    ),
                )
            variants = _sdpa_variants(q, k, v, mask)

            def diagnose_out(got: Tensor) -> str | None:
                return _weights_hint(w, exp_w, mask, live) or _match(
                    got[live], [(h, (lambda m=m: m()[live])) for h, m in variants]
                )

            full = exp_out.masked_fill(~live[..., None], 0.0)
            got_live = out.masked_fill(~live[..., None], 0.0)
            if (
                tuple(out.shape) == tuple(exp_out.shape)
                and not torch.isfinite(out).all()
            ):
                raise _Failure("out contains inf", hint="check the masking fill value")
            _expect(
                "out",
                got_live if out.shape == exp_out.shape else out,
                full,
                diagnose=lambda g: diagnose_out(out),
                shape_hint=lambda g: (
                    f"out must be (..., T, d_v) = {tuple(exp_out.shape)}: "
                    "weights (…, T, S) @ v (…, S, d_v)"
                ),
                generic=(
                    "recompute by hand for one query: scores = q·k / √d_k, "
                    "masked keys get a very negative score, softmax over the keys, "
                    "then the weighted sum of the values"
                ),
            )
            if w is not None:
                w = _tensor(w, "weights")
                _expect(
                    "weights",
                    w.masked_fill(~live[..., None], 0.0)
                    if w.shape == exp_w.shape
                    else w,
                    exp_w,
                    diagnose=lambda g: _weights_hint(w, exp_w, mask, live),
                    shape_hint="weights must be (..., T, S): one row per query",
                )

        return _Case(label, run)

    B, H, T, S = 2, 3, 4, 5
    q2, k2, v2 = _randn(3, 16, seed=40), _randn(4, 16, seed=41), _randn(4, 16, seed=42)
    q4, k4 = _randn(B, H, T, 8, seed=43), _randn(B, H, S, 8, seed=44)
    v4 = _randn(B, H, S, 6, seed=45)
    pad = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    pad = pad[:, None, None, :]  # (B, 1, 1, S)
    qc, kc, vc = (_randn(B, H, T, 8, seed=s) for s in (46, 47, 48))
    dead = torch.ones(B, 1, T, S, dtype=torch.bool)
    dead[0, 0, 1] = False  # query 1 of sentence 0 may attend to nothing
    cases = [
        case("one head, no mask (T=3, S=4, d_k=16)", q2, k2, v2),
        case("batched heads, d_v ≠ d_k (B=2, H=3, T=4, S=5)", q4, k4, v4),
        case("padding mask (B, 1, 1, S)", q4, k4, v4, pad),
        case("causal mask (1, 1, T, T)", qc, kc, vc, causal_mask(T)),
        case("a query with every key masked", q4, k4, v4, dead),
        case("T = S = 1", q4[:, :, :1], k4[:, :, :1], v4[:, :, :1]),
        case(
            "float64, padding mask",
            q4.double(),
            k4.double(),
            v4.double(),
            pad,
        ),
    ]
    return _run("check_scaled_dot_product_attention", cases, quiet)


def _weights_hint(w, exp_w: Tensor, mask, live: Tensor) -> str | None:
    """Diagnose from the returned weights, when there are any of the right shape."""
    if not isinstance(w, Tensor) or w.shape != exp_w.shape:
        return None
    w = w.detach().double()
    rows_key = w.sum(-1)[live]
    rows_query = w.sum(-2)
    ok_key = torch.allclose(rows_key, torch.ones_like(rows_key), atol=1e-4)
    if not ok_key and torch.allclose(
        rows_query, torch.ones_like(rows_query), atol=1e-4
    ):
        return (
            "your weights sum to 1 along the query axis; softmax belongs on the key "
            "axis (dim=-1), so that each query's weights sum to 1"
        )
    if mask is not None:
        m = mask.expand(w.shape)
        if (w[~m & live[..., None]] > 1e-6).any():
            if (w[m] < 1e-9).all():
                return (
                    "mask polarity is flipped: in this book True means 'may "
                    "attend', so block where the mask is False"
                )
            return (
                "masked keys still get weight: the mask never reaches the softmax. "
                "Mask the tensor you pass to softmax, and keep the result: "
                "scores = scores.masked_fill(~mask, ...)"
            )
    if not ok_key:
        return (
            "each query's weights must sum to 1 over its allowed keys: mask the "
            "scores before the softmax rather than zeroing weights after it"
        )
    return None


def _sdpa_err(e: Exception) -> str | None:
    text = str(e)
    if "must match the size of tensor" in text or "size mismatch" in text:
        return (
            "a shape does not line up. Use k.transpose(-2, -1) (not k.T, which "
            "reverses every axis of a batched tensor), the value size d_v may "
            "differ from d_k, and masks broadcast from the right to (..., T, S)"
        )
    if "expected a bool" in text.lower() or "masked_fill_ only supports" in text:
        return "the mask is boolean already: use it (or ~mask) directly"
    return None


# --- chapter 5: heads ---------------------------------------------------------------


def check_split_heads(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(x, n_heads)``: (B, T, D) -> (B, H, T, Dh), where head h holds the
    features h·Dh … (h+1)·Dh - 1 of every token (``MultiHeadAttention.split_heads``)."""

    def case(B: int, T: int, D: int, H: int) -> _Case:
        def run() -> None:
            x = torch.arange(B * T * D, dtype=torch.float32).reshape(B, T, D)
            expected = MultiHeadAttention(D, H).split_heads(x)
            got = _call(fn, x.clone(), H, on_error=_view_err)
            Dh = D // H
            variants = [
                (
                    "heads are split with view(B, H, T, Dh) and no transpose: this "
                    "cuts the flat (T·D) memory into H blocks, so a 'head' mixes "
                    "features of different positions. View as (B, T, H, Dh), then "
                    "transpose(1, 2)",
                    lambda: x.reshape(B, H, T, Dh),
                ),
                (
                    "head h gets the strided features h, h+H, h+2H, …; it must get "
                    "the contiguous block h·Dh … (h+1)·Dh - 1: view(B, T, H, Dh)",
                    lambda: x.reshape(B, T, Dh, H).permute(0, 3, 1, 2),
                ),
            ]
            _expect(
                "heads",
                got,
                expected,
                atol=0,
                rtol=0,
                diagnose=lambda g: _match(g, variants, atol=0),
                shape_hint=lambda g: (
                    "the heads are not moved in front of the positions: "
                    "transpose(1, 2) after view(B, T, H, Dh)"
                    if tuple(g.shape) == (B, T, H, Dh)
                    else "the result must be (B, H, T, Dh)"
                ),
            )

        return _Case(f"B={B}, T={T}, D={D}, H={H}", run)

    cases = [case(2, 3, 8, 2), case(3, 5, 12, 3), case(1, 1, 4, 4), case(2, 4, 6, 1)]
    return _run("check_split_heads", cases, quiet)


def check_combine_heads(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(x)``: (B, H, T, Dh) -> (B, T, H·Dh), the inverse of split_heads."""

    def case(B: int, H: int, T: int, Dh: int) -> _Case:
        def run() -> None:
            x = torch.arange(B * H * T * Dh, dtype=torch.float32).reshape(B, H, T, Dh)
            expected = MultiHeadAttention(H * Dh, H).combine_heads(x)
            got = _call(fn, x.clone(), on_error=_view_err)
            variants = [
                (
                    "heads are combined with reshape/view straight to (B, T, D), "
                    "without moving the head axis back: positions get mixed. "
                    "transpose(1, 2) first, then reshape(B, T, D)",
                    lambda: x.reshape(B, T, H * Dh),
                )
            ]
            _expect(
                "combined",
                got,
                expected,
                atol=0,
                rtol=0,
                diagnose=lambda g: _match(g, variants, atol=0),
                shape_hint="the result must be (B, T, H·Dh)",
            )

        return _Case(f"B={B}, H={H}, T={T}, Dh={Dh}", run)

    cases = [case(2, 2, 3, 4), case(1, 3, 5, 2), case(2, 4, 1, 3)]
    return _run("check_combine_heads", cases, quiet)


def _view_err(e: Exception) -> str | None:
    if "view size is not compatible" in str(e):
        return (
            "view() after transpose() fails because the memory is no longer in "
            "order: use .reshape(...) or .contiguous().view(...)"
        )
    if "invalid for input of size" in str(e) or "shape '[" in str(e):
        return "the sizes do not multiply out: Dh = D // n_heads"
    return None


_PROJ_NAMES = (("w_q", "w_k", "w_v", "w_o"), ("q_proj", "k_proj", "v_proj", "out_proj"))


def _find_projections(module: nn.Module, D: int) -> list[nn.Linear]:
    for names in _PROJ_NAMES:
        layers = [getattr(module, n, None) for n in names]
        if all(isinstance(m, nn.Linear) for m in layers):
            for n, m in zip(names, layers, strict=True):
                if (m.in_features, m.out_features) != (D, D):
                    raise _Failure(
                        f"{n} is Linear({m.in_features}, {m.out_features}), "
                        f"expected Linear({D}, {D})",
                        hint="each projection maps d_model to d_model",
                    )
            return layers
    raise _Failure(
        "cannot find the projections",
        hint=(
            "name them w_q, w_k, w_v, w_o (each nn.Linear(d_model, d_model)), or "
            "q_proj, k_proj, v_proj, out_proj, so the checker can set their weights"
        ),
    )


def _mha_variant(
    projs: Sequence[nn.Linear],
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None,
    H: int,
    *,
    split: str = "ok",
    combine: str = "ok",
    out_proj: bool = True,
    **sdpa: Any,
) -> Tensor:
    """Multi-head attention computed right, or with one known mistake."""
    w_q, w_k, w_v, w_o = projs
    B, T, D = query.shape
    Dh = D // H

    def heads(x: Tensor) -> Tensor:
        L = x.size(1)
        if split == "view":
            return x.reshape(B, H, L, Dh)
        return x.reshape(B, L, H, Dh).transpose(1, 2)

    q, k, v = heads(w_q(query)), heads(w_k(key)), heads(w_v(value))
    if sdpa.pop("scale_d_model", False):
        q = q * math.sqrt(Dh) / math.sqrt(D)
    out = _sdpa_variant(q, k, v, mask, **sdpa)  # (B, H, T, Dh)
    if combine == "view":
        out = out.reshape(B, T, D)
    else:
        out = out.transpose(1, 2).reshape(B, T, D)
    return w_o(out) if out_proj else out


def check_multi_head_attention(cls: type, quiet: bool = False) -> CheckResult:
    """Check a class ``cls(d_model, n_heads)`` whose ``forward(query, key, value,
    mask=None)`` returns (B, T, D) (or (out, weights)) against ``MultiHeadAttention``.

    Its projections must be ``nn.Linear(d_model, d_model)`` attributes named w_q, w_k,
    w_v, w_o (or q_proj, k_proj, v_proj, out_proj): the checker sets their weights.
    """

    def case(label, B, T, S, D, H, mask_kind, seed) -> _Case:
        def run() -> None:
            torch.manual_seed(seed)
            module = _call(cls, D, H)
            if not isinstance(module, nn.Module):
                raise _Failure(
                    f"{cls!r}(d_model, n_heads) is not an nn.Module",
                    hint="subclass nn.Module and call super().__init__()",
                )
            projs = _find_projections(module, D)
            registered = {id(p) for p in module.parameters()}
            if not all(id(m.weight) in registered for m in projs):
                raise _Failure(
                    "the projections are not among module.parameters(): an "
                    "optimizer would never update them, and .to(device) would not "
                    "move them",
                    hint=(
                        "layers kept in a plain Python list or dict are invisible to "
                        "PyTorch: use nn.ModuleList / nn.ModuleDict, or assign each "
                        "one to an attribute"
                    ),
                )
            ref = MultiHeadAttention(D, H, bias=True, fast=False).eval()
            ref_projs = [ref.q_proj, ref.k_proj, ref.v_proj, ref.out_proj]
            with torch.no_grad():
                for i, (mine, theirs) in enumerate(zip(ref_projs, projs, strict=True)):
                    theirs.weight.copy_(_randn(D, D, seed=seed + i, std=D**-0.5 * 2))
                    mine.weight.copy_(theirs.weight)
                    if theirs.bias is not None:
                        theirs.bias.copy_(_randn(D, seed=seed + 10 + i, std=0.1))
                        mine.bias.copy_(theirs.bias)
                    else:
                        mine.bias.zero_()
            if hasattr(module, "eval"):
                module.eval()
            query = _randn(B, T, D, seed=seed + 20)
            key = query if S is None else _randn(B, S, D, seed=seed + 21)
            S_ = T if S is None else S
            mask = None
            if mask_kind == "padding":
                lengths = torch.tensor([S_ - 2, S_ - 1][:B])
                mask = (torch.arange(S_)[None, :] < lengths[:, None])[:, None, None]
            elif mask_kind == "causal":
                mask = causal_mask(T)
            with torch.no_grad():
                expected = ref(query, key, key, mask)
                margs = () if mask is None else (mask.clone(),)
                args = (query.clone(), key.clone(), key.clone())
                result = _call(module, *args, *margs, on_error=_sdpa_err)
            out = result[0] if isinstance(result, (tuple, list)) else result

            def diagnose(got: Tensor) -> str | None:
                def var(**kw):
                    return lambda: _mha_variant(projs, query, key, key, mask, H, **kw)

                variants = [
                    (
                        "heads are split with view(B, H, T, Dh) and no transpose, "
                        "mixing positions inside a head: view(B, T, H, Dh) then "
                        "transpose(1, 2)",
                        var(split="view"),
                    ),
                    (
                        "heads are combined without transposing back, mixing "
                        "positions: transpose(1, 2) then reshape(B, T, D)",
                        var(combine="view"),
                    ),
                    (
                        "the scores are scaled by √d_model; each head's scale is "
                        "√d_k with d_k = d_model / n_heads",
                        var(scale_d_model=True),
                    ),
                    ("the output projection w_o is not applied", var(out_proj=False)),
                ]
                with torch.no_grad():
                    variants += [
                        (
                            h.replace("Q Kᵀ", "each head's Q Kᵀ"),
                            var(**kw),
                        )
                        for h, kw in _named_sdpa_kwargs(mask is not None)
                    ]
                    return _match(got, variants)

            _expect(
                "out",
                out,
                expected,
                diagnose=diagnose,
                shape_hint=lambda g: (
                    "the output has one row per key: queries come from `query` "
                    "(the decoder), keys and values from `key`/`value`"
                    if S is not None and g.dim() == 3 and g.shape[1] == S
                    else f"the output must be (B, T, d_model) = {tuple(expected.shape)}"
                ),
            )

        return _Case(label, run)

    cases = [
        case("self-attention (B=2, T=4, D=8, H=2)", 2, 4, None, 8, 2, None, 50),
        case("cross-attention + padding (T=3, S=5)", 2, 3, 5, 8, 2, "padding", 51),
        case("causal self-attention (T=5, H=4)", 2, 5, None, 8, 4, "causal", 52),
        case("one head (D=6, H=1)", 2, 3, None, 6, 1, None, 53),
        case("T = 1", 1, 1, 4, 12, 3, "padding", 54),
    ]
    return _run("check_multi_head_attention", cases, quiet)


def _named_sdpa_kwargs(masked: bool) -> list[tuple[str, dict]]:
    out = [
        (
            "your weights sum to 1 along the query axis; softmax belongs on the key "
            "axis (dim=-1)",
            {"axis": -2},
        ),
        (
            "the scores are multiplied by √d_k instead of divided (x / d_k**-0.5 is "
            "x · √d_k)",
            {"scale": "times_sqrt"},
        ),
        ("the scores are not scaled: divide Q Kᵀ by √d_k", {"scale": "none"}),
    ]
    if masked:
        out += [
            (
                "masked keys still get weight: the mask never reaches the softmax",
                {"masking": "ignore"},
            ),
            (
                "mask polarity is flipped: True means 'may attend'",
                {"masking": "flip"},
            ),
        ]
    return out


# --- chapter 6: masks ---------------------------------------------------------------


def _grid(m: Tensor) -> str:
    rows = [" ".join("1" if x else "0" for x in row) for row in m.tolist()]
    return "\n" + "\n".join(f"      {r}" for r in rows)


def check_causal_mask(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(T)`` -> boolean (T, T) or (1, 1, T, T) look-ahead mask, True = may
    attend: row t (a query) may see columns 0 … t (keys), itself included."""

    def case(T: int) -> _Case:
        def run() -> None:
            expected = causal_mask(T)[0, 0]  # (T, T)
            got = _tensor(_call(fn, T), "mask")
            if got.dim() == 4 and tuple(got.shape[:2]) == (1, 1):
                got = got[0, 0]
            if tuple(got.shape) != (T, T):
                raise _Failure(
                    f"mask has shape {tuple(got.shape)}, expected ({T}, {T}) or "
                    f"(1, 1, {T}, {T})",
                    hint="one row per query position, one column per key position",
                )
            if got.dtype != torch.bool:
                additive = got.is_floating_point() and bool((got < -1e3).any())
                raise _Failure(
                    f"mask has dtype {got.dtype}, expected torch.bool",
                    hint=(
                        "this is an additive mask (0 / -inf), nn.Transformer's "
                        "style; the book's masks are boolean, True = may attend"
                        if additive
                        else "return a boolean tensor, True = may attend (.bool())"
                    ),
                )
            ones = torch.ones(T, T, dtype=torch.bool)
            known = [
                (
                    ~expected,
                    "mask polarity is flipped: True must mean 'may attend' (this is "
                    "nn.Transformer's convention, where True = blocked)",
                ),
                (
                    ones.triu(),
                    "the mask is transposed (upper triangular): row t is query t "
                    "and may see keys 0 … t, the lower triangle: use tril()",
                ),
                (
                    ones.tril(-1),
                    "off by one: the diagonal is blocked, so a position cannot "
                    "attend to itself (and the first one to anything): tril() with "
                    "diagonal=0",
                ),
                (
                    ones.tril(1),
                    "off by one: each position may also see the next one, which "
                    "leaks the token it must predict: tril() with diagonal=0",
                ),
                (ones, "nothing is blocked: future positions must be False"),
            ]
            hint = next(
                (h for m, h in known if T > 1 and torch.equal(got, m)), None
            ) or ("row t may attend to columns 0 … t and nothing later")
            if not torch.equal(got, expected):
                raise _Failure(
                    "the mask differs (rows = queries, columns = keys, 1 = may attend)",
                    _grid(expected),
                    _grid(got),
                    hint,
                )

        return _Case(f"T={T}", run)

    return _run("check_causal_mask", [case(4), case(1), case(2), case(7)], quiet)


def check_padding_mask(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(tokens, pad_idx)`` -> boolean (B, 1, 1, S), True at real tokens
    (keys that may be attended), for tokens (B, S)."""

    def case(tokens: list[list[int]], pad: int) -> _Case:
        def run() -> None:
            ids = torch.tensor(tokens)
            B, S = ids.shape
            expected = padding_mask(ids, pad)
            got = _tensor(_call(fn, ids.clone(), pad), "mask")
            shape = tuple(got.shape)
            if shape != (B, 1, 1, S):
                hint = "the mask must be (B, 1, 1, S) to broadcast over heads/queries"
                if shape in ((B, S), (B, 1, S)):
                    hint = (
                        f"shape {shape} broadcasts wrongly against the scores (B, "
                        "H, T, S): add the head and query axes, "
                        "mask[:, None, None, :]"
                    )
                elif shape == (B, 1, S, 1):
                    hint = "the mask runs along the keys (the last axis), not queries"
                raise _Failure(
                    f"mask has shape {shape}, expected {(B, 1, 1, S)}", hint=hint
                )
            if got.dtype != torch.bool:
                raise _Failure(
                    f"mask has dtype {got.dtype}, expected torch.bool",
                    hint="return a boolean tensor: tokens != pad_idx",
                )
            if not torch.equal(got, expected):
                hint = "True where the token is real, False at padding"
                if torch.equal(got, ~expected):
                    hint = "mask polarity is flipped: True = a real token (may attend)"
                elif pad != 0 and torch.equal(got, padding_mask(ids, 0)):
                    hint = "the padding id is hard-coded as 0; use the pad_idx argument"
                raise _Failure(
                    "the mask differs", _fmt(expected.flatten(), 12),
                    _fmt(got.flatten(), 12), hint,
                )  # fmt: skip

        return _Case(f"tokens {tokens}, pad_idx={pad}", run)

    cases = [
        case([[5, 6, 7, 0, 0], [8, 9, 0, 0, 0]], 0),
        case([[4, 5, 6]], 0),
        case([[0, 5, 3, 3], [7, 0, 2, 3]], 3),
        case([[9]], 0),
    ]
    return _run("check_padding_mask", cases, quiet)


# --- chapter 7: layer normalisation -------------------------------------------------

_NORM_PARAM_NAMES = (
    ("weight", "bias"), ("gamma", "beta"), ("a_2", "b_2"), ("scale", "bias"),
    ("g", "b"),
)  # fmt: skip


def _ln_variant(x, w, b, eps, *, unbiased=False, eps_outside=False, dim=-1, affine=1):
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    if eps_outside:
        y = (x - mean) / (var.sqrt() + eps)
    else:
        y = (x - mean) / torch.sqrt(var + eps)
    return y * w + b if affine == 1 else (y if affine == 0 else y * b + w)


def check_layer_norm(fn_or_class: Callable | type, quiet: bool = False) -> CheckResult:
    """Check a LayerNorm: a function ``fn(x, weight, bias, eps=1e-5)`` or a class
    ``cls(d_model, eps=1e-5)`` with parameters weight/bias (or gamma/beta, a_2/b_2).

    Expected: γ (x - μ) / sqrt(σ² + ε) + β, with μ and the *biased* σ² over the last
    axis of each token (``nn.LayerNorm``). Shape: (..., D) -> (..., D).
    """
    is_class = isinstance(fn_or_class, type)
    eps = 1e-5

    def case(label: str, x: Tensor, seed: int) -> _Case:
        def run() -> None:
            D = x.size(-1)
            w = (1 + _randn(D, seed=seed, std=0.5)).to(x.dtype)
            b = _randn(D, seed=seed + 1, std=0.5).to(x.dtype)
            if is_class:
                try:
                    module = fn_or_class(D, eps)
                except TypeError:
                    module = _call(fn_or_class, D)
                except NotImplementedError as e:
                    raise _NotImplementedYet() from e
                except Exception:
                    module = _call(fn_or_class, D, eps)
                names = next(
                    (
                        pair
                        for pair in _NORM_PARAM_NAMES
                        if all(
                            isinstance(getattr(module, n, None), Tensor) for n in pair
                        )
                    ),
                    None,
                )
                if names is None:
                    raise _Failure(
                        "cannot find the gain and bias parameters",
                        hint="name them weight and bias (or gamma and beta), each "
                        "an nn.Parameter of shape (d_model,)",
                    )
                module = module.to(x.dtype)
                with torch.no_grad():
                    getattr(module, names[0]).copy_(w)
                    getattr(module, names[1]).copy_(b)
                got = _call(module, x.clone())
            else:
                got = _call(fn_or_class, x.clone(), w.clone(), b.clone(), eps)
            ref = LayerNorm(D, eps, fast=False).to(x.dtype)
            with torch.no_grad():
                ref.weight.copy_(w)
                ref.bias.copy_(b)
                expected = ref(x)
            got_t = _tensor(got, "output")
            if got_t.shape == x.shape and torch.isnan(got_t).any():
                raise _Failure(
                    "the output contains NaN",
                    hint=(
                        "a token whose features are all equal has σ² = 0: ε must be "
                        "inside the square root, sqrt(σ² + ε), to avoid 0/0"
                    ),
                )

            def diagnose(got: Tensor) -> str | None:
                def var(**kw):
                    return lambda: _ln_variant(x, w, b, eps, **kw)

                return _match(
                    got,
                    [
                        (
                            "unbiased variance (divides by D - 1): LayerNorm uses "
                            "the biased one, x.var(-1, unbiased=False); note that "
                            "torch.std / torch.var default to unbiased",
                            var(unbiased=True),
                        ),
                        (
                            "ε belongs inside the square root: sqrt(σ² + ε), not σ + ε",
                            var(eps_outside=True),
                        ),
                        (
                            "unbiased std with ε outside the square root, "
                            "(x - μ) / (x.std(-1) + ε): LayerNorm divides by "
                            "sqrt(x.var(-1, unbiased=False) + ε)",
                            var(unbiased=True, eps_outside=True),
                        ),
                        (
                            "normalised over the wrong axis: LayerNorm normalises "
                            "each token over its own features (dim=-1)",
                            var(dim=-2),
                        ),
                        (
                            "normalised over the wrong axis: LayerNorm normalises "
                            "each token over its own features (dim=-1)",
                            var(dim=0),
                        ),
                        ("the gain γ and bias β are not applied", var(affine=0)),
                        ("γ and β are swapped: y · γ + β", var(affine=2)),
                    ],
                )

            _expect(
                "output",
                got_t,
                expected,
                atol=1e-4,
                rtol=1e-3,
                diagnose=diagnose,
                shape_hint="the output has the input's shape (..., D)",
            )

        return _Case(label, run)

    x1 = _randn(2, 3, 8, seed=60, std=3.0) + 2.0
    x2 = _randn(4, 16, seed=61, std=0.5) - 1.0
    flat = torch.full((3, 8), 0.5)  # row 0: exactly constant, σ² = 0
    flat[1] += _randn(8, seed=62, std=1e-3)  # nearly constant: σ² ~ 1e-6 << ε
    flat[2] = _randn(8, seed=63)
    cases = [
        case("(B=2, T=3, D=8), mean 2, std 3", x1, 70),
        case("(N=4, D=16)", x2, 71),
        case("constant and nearly constant tokens", flat, 72),
        case("float64", x1.double(), 73),
    ]
    return _run("check_layer_norm", cases, quiet)


# --- chapter 8: the masks of an encoder-decoder -------------------------------------


def check_transformer_masks(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(src, tgt, pad_idx)`` -> (src_mask, tgt_mask, memory_mask), the masks
    of encoder self-attention, decoder self-attention and cross-attention.

    Each must be boolean (True = may attend) and broadcast to the scores it masks:
    (B, H, S, S), (B, H, T, T) and (B, H, T, S).
    """
    H = 2

    def case(label: str, src: list[list[int]], tgt: list[list[int]]) -> _Case:
        def run() -> None:
            s, t = torch.tensor(src), torch.tensor(tgt)
            B, S = s.shape
            T = t.size(1)
            want = {
                "src_mask": (padding_mask(s), (B, H, S, S)),
                "tgt_mask": (target_mask(t), (B, H, T, T)),
                "memory_mask": (padding_mask(s), (B, H, T, S)),
            }
            result = _call(fn, s.clone(), t.clone(), 0)
            if not isinstance(result, (tuple, list)) or len(result) != 3:
                raise _Failure(
                    "expected three masks",
                    hint="return src_mask, tgt_mask, memory_mask",
                )
            for (name, (ref, full)), got in zip(want.items(), result, strict=True):
                got = _tensor(got, name)
                try:
                    ok_shape = torch.broadcast_shapes(got.shape, full) == full
                except RuntimeError:
                    ok_shape = False
                if not ok_shape:
                    hint = f"{name} must broadcast to (B, H, T_q, T_k) = {full}"
                    if got.dim() < 4:
                        hint += ": add the missing axes, e.g. mask[:, None, None, :]"
                    if name == "memory_mask" and got.shape[-1] == T != S:
                        hint = _CROSS_HINT
                    raise _Failure(
                        f"{name} has shape {tuple(got.shape)}, which does not "
                        f"broadcast to {full}",
                        hint=hint,
                    )
                if got.dtype != torch.bool:
                    raise _Failure(
                        f"{name} has dtype {got.dtype}",
                        hint="masks are boolean, True = may attend",
                    )
                g, r = got.expand(full), ref.expand(full)
                if torch.equal(g, r):
                    continue
                hint = _mask_hint(name, g, s, t, full)
                b = int((g != r).flatten(1).any(1).nonzero()[0])
                raise _Failure(
                    f"{name} differs for sentence {b} (rows = queries, columns = keys)",
                    _grid(r[b, 0]),
                    _grid(g[b, 0]),
                    hint,
                )

        return _Case(label, run)

    cases = [
        case("S=5, T=4 with padding", [[5, 6, 7, 8, 0], [9, 4, 0, 0, 0]],
             [[1, 5, 6, 0], [1, 7, 8, 9]]),
        case("S = T = 4 (fixed-length padding)", [[5, 6, 0, 0], [4, 5, 6, 7]],
             [[1, 8, 9, 4], [1, 5, 0, 0]]),
        case("no padding", [[4, 5, 6]], [[1, 7]]),
    ]  # fmt: skip
    return _run("check_transformer_masks", cases, quiet)


_CROSS_HINT = (
    "cross-attention's keys are the source tokens: its padding mask comes from src, "
    "not tgt (the queries' own padding needs no mask: the loss ignores those rows)"
)


def _mask_hint(name: str, g: Tensor, s: Tensor, t: Tensor, full) -> str:
    if name == "tgt_mask":
        if torch.equal(g, padding_mask(t).expand(full)):
            return (
                "the decoder's self-attention mask has no look-ahead part: position "
                "t sees later positions, so training can copy the answer. Combine "
                "padding_mask(tgt) & causal_mask(T)"
            )
        if torch.equal(g, causal_mask(t.size(1)).expand(full)):
            return "the target's padding keys are not masked: AND in padding_mask(tgt)"
        if torch.equal(g, ~target_mask(t).expand(full)):
            return "mask polarity is flipped: True = may attend"
        return "tgt_mask = padding_mask(tgt) & causal_mask(T)"
    if name == "memory_mask":
        if t.size(1) == s.size(1) and torch.equal(g, padding_mask(t).expand(full)):
            return _CROSS_HINT
        return "memory_mask = padding_mask(src): the keys are the source tokens"
    if t.size(1) == s.size(1) and torch.equal(g, padding_mask(t).expand(full)):
        return "the encoder attends over the source: build src_mask from src"
    return "src_mask = padding_mask(src)"


# --- chapter 9: label smoothing and the warm-up schedule ----------------------------


def check_label_smoothing(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(target, vocab_size, smoothing)`` -> (N, V) target distributions:
    (1 - ε) one-hot + ε / V, what ``F.cross_entropy(label_smoothing=ε)`` trains to."""
    from .training import smoothed_targets

    def case(target: list[int], V: int, eps: float) -> _Case:
        def run() -> None:
            tgt = torch.tensor(target)
            expected = smoothed_targets(tgt, V, eps)
            got = _tensor(_call(fn, tgt.clone(), V, eps), "targets")

            def diagnose(got: Tensor) -> str | None:
                sums = got.double().sum(-1)
                if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
                    return (
                        f"each row must sum to 1 (yours sum to {float(sums[0]):.3f}):"
                        " the true class keeps 1 - ε plus its share ε / V"
                    )
                one_hot = F.one_hot(tgt, V).double()
                other = one_hot * (1 - eps) + (1 - one_hot) * eps / (V - 1)
                if _close(got, other, 1e-5, 1e-5):
                    return (
                        "you spread ε over the V - 1 wrong classes (another "
                        "convention); this book follows F.cross_entropy: ε / V to "
                        "every class, the true one included"
                    )
                return None

            _expect("targets", got, expected, atol=1e-5, diagnose=diagnose)

        return _Case(f"N={len(target)}, V={V}, ε={eps}", run)

    cases = [case([1, 3, 0], 5, 0.1), case([0, 1], 2, 0.3), case([7], 50, 0.0)]
    return _run("check_label_smoothing", cases, quiet)


def check_noam_lr(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(step, d_model, warmup)`` -> the paper's learning rate
    d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) for steps >= 1."""
    from .training import noam_lr

    def case(D: int, warmup: int) -> _Case:
        steps = [1, 2, warmup // 2, warmup, warmup + 1, 4 * warmup, 20 * warmup]

        def run() -> None:
            expected = torch.tensor([noam_lr(s, D, warmup) for s in steps])
            got = torch.tensor(
                [float(_tensor(_call(fn, s, D, warmup), "lr")) for s in steps]
            )

            def diagnose(got: Tensor) -> str | None:
                peak = steps[int(got.argmax())]
                ratio = got / expected
                if torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-4):
                    return (
                        f"right shape, wrong size (×{float(ratio[0]):.4g}): the "
                        "factor d_model^-0.5 is missing or wrong"
                    )
                if peak != warmup:
                    return (
                        f"the peak is at step {peak}, not at step warmup={warmup}: "
                        "warm-up is step · warmup^-1.5 (linear), decay step^-0.5, "
                        "and the rate is their min"
                    )
                return "lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)"

            _expect("lr", got, expected, atol=1e-9, rtol=1e-4, diagnose=diagnose)

        return _Case(f"d_model={D}, warmup={warmup}, steps {steps}", run)

    return _run("check_noam_lr", [case(512, 4000), case(64, 100)], quiet)


# --- chapter 10: greedy decoding ----------------------------------------------------


class _ScriptedTranslator(nn.Module):
    """A fake model with a known greedy answer and the package's decoding interface.

    The next token after position t depends only on the token there, t and the
    source; after as many words as the source has, it is EOS. Vocabulary: 16 ids.
    ``decode`` also takes the package's (cache, offset) arguments, so
    ``decoding.greedy_decode`` runs on it too.
    """

    vocab_size = 16

    def __init__(self) -> None:
        super().__init__()
        self.generator = nn.Identity()  # decode() already returns logits
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList()  # no attention to record
        self.decoder = nn.Module()
        self.decoder.new_cache = list  # nothing to cache: no past is needed

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        memory = F.one_hot(src, self.vocab_size).float()  # (B, S, V)
        return memory, padding_mask(src)  # (B, S, V), (B, 1, 1, S)

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None,
        cache: list | None = None, offset: int = 0, tgt_mask: Tensor | None = None,
    ) -> Tensor:  # fmt: skip
        B, T = tgt.shape
        src = memory.argmax(-1)  # (B, S)
        n_real = src_mask.reshape(B, -1).sum(-1, keepdim=True)  # (B, 1)
        pos = offset + torch.arange(T)[None, :].expand(B, T)  # (B, T)
        at = src.gather(1, pos.clamp(max=src.size(1) - 1))  # (B, T)
        nxt = 4 + (3 * tgt + pos + at) % (self.vocab_size - 4)
        nxt = torch.where(pos >= n_real, torch.full_like(nxt, EOS), nxt)
        return F.one_hot(nxt, self.vocab_size).float() * 5.0  # (B, T, V)

    def forward(self, src: Tensor, tgt: Tensor, tgt_mask: Tensor | None = None):
        memory, src_mask = self.encode(src)
        return self.generator(self.decode(tgt, memory, src_mask))


def _greedy_variant(model, src, max_len, *, position=-1, bos=False, stop=True):
    memory, src_mask = model.encode(src)
    ys = torch.tensor([[BOS]])
    for _ in range(max_len):
        logits = model.generator(model.decode(ys, memory, src_mask))[:, position]
        nxt = int(logits.argmax(-1))
        ys = torch.cat([ys, torch.tensor([[nxt]])], dim=1)
        if stop and nxt == EOS:
            break
    out = ys[0].tolist()
    return out if bos else out[1:]


def check_greedy_decode(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(model, src, max_len)`` -> list of ids: greedy decoding of one
    sentence src (1, S), without BOS, up to and including EOS (or max_len ids).

    ``model`` has the package's interface: ``memory, src_mask = model.encode(src)``,
    ``model.decode(ys, memory, src_mask)`` -> (1, t, D), ``model.generator(h)`` ->
    logits; BOS = 1, EOS = 2.
    """
    from .decoding import greedy_decode
    from .model import make_model

    def case(label: str, model: nn.Module, src: list[int], max_len: int) -> _Case:
        def run() -> None:
            s = torch.tensor([src])
            with torch.no_grad():
                expected = greedy_decode(model, s, max_len=max_len).tokens[0]
                got = _call(fn, model, s.clone(), max_len)
            if isinstance(got, Tensor):
                got = got.flatten().tolist()
            try:
                got = [int(i) for i in got]
            except TypeError as e:
                raise _Failure(
                    f"expected a list of token ids, got {type(got).__name__}",
                    hint="return a list of ints, e.g. ys[0, 1:].tolist()",
                ) from e
            if got == expected:
                return
            hints = []
            core = got
            if got[:1] == [BOS]:
                hints.append("leave BOS out of the result: it was given, not predicted")
                core = got[1:]
            ends = expected[-1:] == [EOS]
            if core == expected:
                pass
            elif (
                ends and len(core) > len(expected) and core[: len(expected)] == expected
            ):
                hints.append("stop as soon as EOS is predicted")
            elif ends and core == expected[:-1]:
                hints.append("include the EOS that ended the sentence")
            else:
                with torch.no_grad():
                    first = _greedy_variant(model, s, max_len, position=0)
                if core == first or (len(set(core)) == 1 and len(set(expected)) > 1):
                    hints.append(
                        "the same token every step: read the prediction at the last "
                        "position, logits[:, -1], and feed the growing prefix back in"
                    )
            hint = "; and ".join(hints)
            raise _Failure(
                "the decoded ids differ",
                str(expected),
                str(got),
                hint
                or "loop: logits of the last position → argmax → append → stop at EOS",
            )

        return _Case(label, run)

    torch.manual_seed(0)
    real = make_model(16, 16, n_layers=1, d_model=16, n_heads=2, d_ff=32,
                      dropout=0.0, max_len=32).eval()  # fmt: skip
    scripted = _ScriptedTranslator()
    cases = [
        case("4-word source, room to finish", scripted, [5, 9, 7, 11], 10),
        case("max_len reached before EOS", scripted, [5, 9, 7, 11], 2),
        case("1-word source", scripted, [13], 6),
        case("a real (untrained) Transformer", real, [4, 8, 6], 6),
    ]
    return _run("check_greedy_decode", cases, quiet)


CHECKERS: dict[str, Callable[..., CheckResult]] = {
    f.__name__: f
    for f in (
        check_score_function,
        check_token_embedding,
        check_positional_encoding,
        check_add_positional_encoding,
        check_scaled_dot_product_attention,
        check_split_heads,
        check_combine_heads,
        check_multi_head_attention,
        check_causal_mask,
        check_padding_mask,
        check_layer_norm,
        check_transformer_masks,
        check_label_smoothing,
        check_noam_lr,
        check_greedy_decode,
    )
}


# --- plugging attention into a model ------------------------------------------------


@contextlib.contextmanager
def use_attention(model: nn.Module, fn: Callable) -> Iterator[nn.Module]:
    """Inside the ``with`` block every MultiHeadAttention of ``model`` computes its
    heads with ``fn(q, k, v, mask)`` (out or (out, weights)) instead of the package's.

    For experiments: a learner's attention, or a bug from the zoo, in a trained model.
    """
    modules = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    fast = [m.fast for m in modules]
    original = _attention.scaled_dot_product_attention

    def plugged(q, k, v, mask=None, dropout_p=0.0):
        result = fn(q, k, v, mask)
        out, w = result if isinstance(result, (tuple, list)) else (result, None)
        if w is None:
            w = torch.full((*q.shape[:-1], k.size(-2)), math.nan, dtype=q.dtype)
        return out, w

    try:
        for m in modules:
            m.fast = False  # the reference path calls scaled_dot_product_attention
        _attention.scaled_dot_product_attention = plugged
        yield model
    finally:
        _attention.scaled_dot_product_attention = original
        for m, f in zip(modules, fast, strict=True):
            m.fast = f


# --- the bug zoo ----------------------------------------------------------------------
# Each bug is a small, otherwise correct implementation with one real mistake, marked
# "BUG". Several come from the source articles of this book; the rest are the
# mistakes learners make most often.


def attention_mask_too_late(q, k, v, mask=None):
    """The mask is added to the raw scores after the softmax's input was computed."""
    scores = q @ k.transpose(-2, -1)
    scaled = scores / math.sqrt(q.size(-1))  # the softmax input is made here ...
    if mask is not None:
        # BUG: ... so this masked copy of the scores never reaches the softmax
        scores = scores + (~mask) * torch.finfo(scores.dtype).min
    weights = scaled.softmax(dim=-1)
    return weights @ v, weights


def attention_scale_multiplied(q, k, v, mask=None):
    """Divides by d_k ** -0.5, which multiplies by sqrt(d_k)."""
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / d_k**-0.5  # BUG: / d**-0.5 is * sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def attention_undefined_names(q, k, v, mask=None):
    """Names renamed in one place only: d_k is defined, depth and logits are used."""
    d_k = k.size(-1)  # noqa: F841
    scores = q @ k.transpose(-2, -1)
    attention_logits = scores / math.sqrt(depth)  # noqa: F821  BUG: never defined
    if mask is not None:
        logits += ~mask * -1e9  # noqa: F821, F841  BUG: not the name used below
    weights = attention_logits.softmax(dim=-1)
    return weights @ v, weights


def attention_no_scaling(q, k, v, mask=None):
    """Forgets to divide the scores by sqrt(d_k)."""
    scores = q @ k.transpose(-2, -1)  # BUG: no / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def attention_softmax_query_axis(q, k, v, mask=None):
    """Normalises over the queries instead of the keys."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-2)  # BUG: dim=-2 is the query axis
    return weights @ v, weights


def attention_mask_flipped(q, k, v, mask=None):
    """Treats True as "blocked" (nn.Transformer's polarity) with the book's masks."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        # BUG: the book's True means "may attend"; this blocks exactly those keys
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def attention_neg_inf(q, k, v, mask=None):
    """Masks with -inf, which turns a query with no allowed key into NaN."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # BUG: all -inf row -> NaN
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def causal_mask_upper(T):
    """The upper triangle: each position sees itself and the future, not the past."""
    return torch.ones(T, T, dtype=torch.bool).triu()  # BUG: triu instead of tril


def causal_mask_no_diagonal(T):
    """Off by one: a position may not attend to itself."""
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)  # BUG: -1, not 0


def causal_mask_torch_polarity(T):
    """nn.Transformer's mask (True = blocked) used where the book wants True = may."""
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)  # BUG: polarity


def padding_mask_pad_zero(tokens, pad_idx=0):
    """Ignores pad_idx and assumes the padding id is 0."""
    return (tokens != 0)[:, None, None, :]  # BUG: hard-coded 0


def masks_causal_unused(src, tgt, pad_idx=0):
    """Builds the look-ahead mask, then forgets to combine it into tgt_mask."""
    src_mask = padding_mask(src, pad_idx)  # (B, 1, 1, S)
    look_ahead = causal_mask(tgt.size(1))  # (1, 1, T, T), built ...  # noqa: F841
    tgt_mask = padding_mask(tgt, pad_idx)  # BUG: ... but never applied
    return src_mask, tgt_mask, src_mask


def masks_cross_from_target(src, tgt, pad_idx=0):
    """Builds the cross-attention mask from the target instead of the source."""
    src_mask = padding_mask(src, pad_idx)  # (B, 1, 1, S)
    tgt_mask = padding_mask(tgt, pad_idx) & causal_mask(tgt.size(1))  # (B, 1, T, T)
    memory_mask = padding_mask(tgt, pad_idx)  # BUG: cross-attention keys are src
    return src_mask, tgt_mask, memory_mask


def pe_angles_zeroed(max_len, d_model):
    """Overwrites the angle table with zeros before taking sin and cos."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (L, 1)
    i = torch.arange(d_model)[None, :]  # (1, D)
    angles = pos / 10000 ** (2 * (i // 2) / d_model)  # (L, D)
    angles = torch.zeros(angles.shape)  # BUG: meant as "allocate the output"
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = torch.sin(angles[:, 0::2])
    pe[:, 1::2] = torch.cos(angles[:, 1::2])
    return pe


def pe_sin_cos_swapped(max_len, d_model):
    """Cosines in the even columns, sines in the odd ones."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (L, 1)
    i = torch.arange(d_model)[None, :]  # (1, D)
    angles = pos / 10000 ** (2 * (i // 2) / d_model)  # (L, D)
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = torch.cos(angles[:, 0::2])  # BUG: even columns take the sine
    pe[:, 1::2] = torch.sin(angles[:, 1::2])
    return pe


def pe_exponent_i(max_len, d_model):
    """Uses i / d_model as the exponent where the formula has 2i / d_model."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (L, 1)
    i = torch.arange(d_model)[None, :] // 2  # (1, D): the pair index i
    angles = pos / 10000 ** (i / d_model)  # BUG: the exponent is 2i / d_model
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = torch.sin(angles[:, 0::2])
    pe[:, 1::2] = torch.cos(angles[:, 1::2])
    return pe


def add_pe_seq_first(x, table):
    """A seq-first table (max_len, 1, D) sliced by x.shape[0] on batch-first input."""
    pe = table[:, None, :]  # (max_len, 1, D), written for x of shape (T, B, D)
    return x + pe[: x.shape[0]]  # BUG: x is (B, T, D), so this slices by the batch


def split_heads_view_only(x, n_heads):
    """Reshapes straight to (B, H, T, Dh) without the transpose."""
    B, T, D = x.shape
    return x.view(B, n_heads, T, D // n_heads)  # BUG: cuts across positions


def combine_heads_reshape_only(x):
    """Reshapes (B, H, T, Dh) straight to (B, T, D) without moving the heads back."""
    B, H, T, Dh = x.shape
    return x.reshape(B, T, H * Dh)  # BUG: needs x.transpose(1, 2) first


class MHAViewWithoutTranspose(nn.Module):
    """Multi-head attention whose head split forgets the transpose."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        B, T, D = query.shape
        H = self.n_heads

        def split(x):
            return x.view(B, H, x.size(1), D // H)  # BUG: view(B, L, H, Dh).transpose

        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, Dh)
        return self.w_o(out.transpose(1, 2).reshape(B, T, D))


class MHAProjectionsInAList(nn.Module):
    """Keeps its four projections in a plain Python list, hidden from PyTorch."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        # BUG: a plain list does not register the layers (use nn.ModuleList)
        self.projections = [nn.Linear(d_model, d_model) for _ in range(4)]

    w_q = property(lambda self: self.projections[0])
    w_k = property(lambda self: self.projections[1])
    w_v = property(lambda self: self.projections[2])
    w_o = property(lambda self: self.projections[3])

    def forward(self, query, key, value, mask=None):
        B, T, D = query.shape
        H = self.n_heads

        def split(x):
            return x.view(B, x.size(1), H, D // H).transpose(1, 2)  # (B, H, L, Dh)

        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, Dh)
        return self.w_o(out.transpose(1, 2).reshape(B, T, D))


def layer_norm_unbiased(x, weight, bias, eps=1e-5):
    """Uses the unbiased variance (divides by D - 1)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)  # BUG: unbiased by default; need unbiased=False
    return weight * (x - mean) / torch.sqrt(var + eps) + bias


def layer_norm_eps_outside(x, weight, bias, eps=1e-5):
    """Adds eps to the standard deviation instead of the variance."""
    mean = x.mean(dim=-1, keepdim=True)
    std = x.var(dim=-1, keepdim=True, unbiased=False).sqrt()
    return weight * (x - mean) / (std + eps) + bias  # BUG: sqrt(var + eps)


def layer_norm_wrong_axis(x, weight, bias, eps=1e-5):
    """Normalises each feature over the tokens (dim=-2), BatchNorm-style."""
    mean = x.mean(dim=-2, keepdim=True)  # BUG: LayerNorm uses dim=-1
    var = x.var(dim=-2, keepdim=True, unbiased=False)
    return weight * (x - mean) / torch.sqrt(var + eps) + bias


def greedy_first_position(model, src, max_len):
    """Reads the prediction at position 0 instead of the newest position."""
    memory, src_mask = model.encode(src)
    ys = torch.tensor([[BOS]])
    for _ in range(max_len):
        logits = model.generator(model.decode(ys, memory, src_mask))  # (1, t, V)
        nxt = int(logits[0, 0].argmax())  # BUG: the newest position is logits[0, -1]
        ys = torch.cat([ys, torch.tensor([[nxt]])], dim=1)
        if nxt == EOS:
            break
    return ys[0, 1:].tolist()


@dataclass(frozen=True)
class Bug:
    """One exhibit of the zoo: a wrong implementation and who catches it."""

    name: str
    implementation: Callable  # a function or class with the exercise's signature
    description: str  # what goes wrong, in words
    origin: str  # where this bug was seen
    caught_by: tuple[str, ...]  # names in CHECKERS
    keyword: str  # a word the catching checker's hint contains
    chapter: int  # the chapter whose exercise it belongs to
    extra: dict = field(default_factory=dict)

    def check(self, quiet: bool = True) -> dict[str, CheckResult]:
        """Run every checker that should catch this bug."""
        return {
            c: CHECKERS[c](self.implementation, quiet=quiet) for c in self.caught_by
        }


_ARTICLE = "a source article of this book"
_COMMON = "a common learner mistake"
_SDPA = ("check_scaled_dot_product_attention",)


def _zoo(*bugs: Bug) -> dict[str, Bug]:
    return {b.name: b for b in bugs}


BUG_ZOO: dict[str, Bug] = _zoo(
    Bug("mask too late", attention_mask_too_late,
        "the mask is added to a tensor after the softmax input was taken from it, so "
        "masked keys keep their weight", f"{_ARTICLE} (Japanese, multi-head attention)",
        _SDPA, "never reaches", 4),
    Bug("scale multiplied", attention_scale_multiplied,
        "the scores are divided by d_k**-0.5, i.e. multiplied by √d_k: the softmax "
        "saturates", f"{_ARTICLE} (Japanese, multi-head attention)", _SDPA,
        "multiplied", 4),
    Bug("undefined names", attention_undefined_names,
        "variables renamed in one place only (depth, logits): the function cannot run",
        f"{_ARTICLE} (Korean, attention function)", _SDPA, "NameError", 4),
    Bug("no scaling", attention_no_scaling,
        "the scores are never divided by √d_k", _COMMON, _SDPA, "not scaled", 4),
    Bug("softmax over queries", attention_softmax_query_axis,
        "softmax(dim=-2): each key's weights sum to 1 instead of each query's",
        _COMMON, _SDPA, "query axis", 4),
    Bug("mask polarity flipped", attention_mask_flipped,
        "True is read as 'blocked': only the padding / the future is attended",
        _COMMON, _SDPA, "polarity", 6),
    Bug("-inf gives NaN", attention_neg_inf,
        "a query whose keys are all masked gets softmax(-inf, …, -inf) = NaN",
        _COMMON, _SDPA, "NaN", 6),
    Bug("causal mask upper", causal_mask_upper,
        "triu instead of tril: each position sees the future, not the past",
        _COMMON, ("check_causal_mask",), "transposed", 6),
    Bug("causal mask off by one", causal_mask_no_diagonal,
        "tril(-1): a position cannot attend to itself; the first one sees nothing",
        _COMMON, ("check_causal_mask",), "itself", 6),
    Bug("causal mask in nn.Transformer polarity", causal_mask_torch_polarity,
        "triu(1) (True = blocked) handed to code where True = may attend",
        _COMMON, ("check_causal_mask",), "polarity", 6),
    Bug("padding id hard-coded", padding_mask_pad_zero,
        "the padding mask ignores pad_idx and compares with 0",
        _COMMON, ("check_padding_mask",), "pad_idx", 6),
    Bug("look-ahead mask never applied", masks_causal_unused,
        "the causal mask is built but tgt_mask is only the padding mask: the decoder "
        "sees the token it must predict", _COMMON, ("check_transformer_masks",),
        "look-ahead", 8),
    Bug("cross mask from the target", masks_cross_from_target,
        "cross-attention is masked with the target's padding instead of the source's",
        _COMMON, ("check_transformer_masks",), "source", 8),
    Bug("PE angles zeroed", pe_angles_zeroed,
        "the angle table is overwritten with zeros before sin/cos: every position "
        "gets the same vector", f"{_ARTICLE} (Korean, positional encoding)",
        ("check_positional_encoding",), "same vector", 3),
    Bug("PE sin/cos swapped", pe_sin_cos_swapped,
        "cosines in the even columns and sines in the odd ones",
        _COMMON, ("check_positional_encoding",), "swapped", 3),
    Bug("PE exponent i", pe_exponent_i,
        "the exponent uses i / d_model instead of 2i / d_model",
        _COMMON, ("check_positional_encoding",), "exponent", 3),
    Bug("PE sliced by the batch", add_pe_seq_first,
        "a seq-first (max_len, 1, D) table sliced with x.shape[0] on batch-first "
        "input adds one vector per sentence instead of one per position",
        f"{_ARTICLE} (labml-style seq-first code used batch first)",
        ("check_add_positional_encoding",), "batch axis", 3),
    Bug("split heads without transpose", split_heads_view_only,
        "view(B, H, T, Dh) straight from (B, T, D) mixes positions inside a head",
        _COMMON, ("check_split_heads",), "transpose", 5),
    Bug("combine heads without transpose", combine_heads_reshape_only,
        "reshape(B, T, D) straight from (B, H, T, Dh) mixes positions",
        _COMMON, ("check_combine_heads",), "transpos", 5),
    Bug("MHA view without transpose", MHAViewWithoutTranspose,
        "a whole multi-head attention with the split-heads bug inside",
        _COMMON, ("check_multi_head_attention",), "transpose", 5),
    Bug("layers in a plain list", MHAProjectionsInAList,
        "sub-layers kept in a Python list are not registered: parameters() misses "
        "them, so the optimizer never trains them and .to() never moves them",
        f"{_ARTICLE} (Japanese, encoder blocks kept in a list)",
        ("check_multi_head_attention",), "ModuleList", 5),
    Bug("LayerNorm unbiased variance", layer_norm_unbiased,
        "x.var() divides by D - 1; LayerNorm divides by D",
        _COMMON, ("check_layer_norm",), "unbiased", 7),
    Bug("LayerNorm ε outside the root", layer_norm_eps_outside,
        "(x - μ) / (σ + ε) instead of (x - μ) / sqrt(σ² + ε)",
        _COMMON, ("check_layer_norm",), "inside the square root", 7),
    Bug("LayerNorm over the tokens", layer_norm_wrong_axis,
        "normalises each feature over the positions (dim=-2) instead of each token "
        "over its features", _COMMON, ("check_layer_norm",), "features", 7),
    Bug("greedy reads position 0", greedy_first_position,
        "the next token is read from the first position's logits, so it never "
        "changes", _COMMON, ("check_greedy_decode",), "last position", 10),
)  # fmt: skip
