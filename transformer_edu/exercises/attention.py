"""Chapter 4: scaled dot-product attention, and plugging one into a model."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from ..model import attention as _attention
from ..model.attention import MultiHeadAttention, scaled_dot_product_attention
from ..model.masks import causal_mask
from .harness import (
    Case,
    CheckResult,
    Failure,
    as_tensor,
    call,
    expect,
    match,
    randn,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import ARTICLE, COMMON, register

SOFTMAX_OVER_QUERIES = (
    "your weights sum to 1 along the query axis; softmax belongs on the key axis "
    "(dim=-1), so that each query's weights sum to 1"
)
SCALE_MULTIPLIED = (
    "the scores are multiplied by √d_k instead of divided: x / d_k**-0.5 is x · √d_k. "
    "Divide by math.sqrt(d_k)"
)
NOT_SCALED = "the scores are not scaled: divide Q Kᵀ by √d_k before the softmax"
MASK_IGNORED = (
    "masked keys still get weight: the mask never reaches the softmax. Mask the "
    "tensor you pass to softmax, and keep the result: scores = "
    "scores.masked_fill(~mask, ...) (masked_fill is not in place)"
)
MASK_FLIPPED = (
    "mask polarity is flipped: in this book True means 'may attend', so block where "
    "the mask is False (masked_fill(~mask, ...))"
)


# torch's attention, by name: F.scaled_dot_product_attention and its kernels
# (torch.ops.aten._scaled_dot_product_flash_attention_for_cpu, …), multi-head
# attention (F.multi_head_attention_forward, torch._native_multi_head_attention)
TORCH_ATTENTION = (
    "scaled_dot_product",
    "_attention_forward",
    "_triton_scaled_dot_attention",
    "multi_head_attention",
    "flex_attention",
)
# attention written by the package or by torch: the exercise is to write it
ATTENTION_REFERENCES = references(
    scaled_dot_product_attention,
    MultiHeadAttention,
    (nn.MultiheadAttention, "torch.nn.MultiheadAttention"),
    torch_names=TORCH_ATTENTION,
)


def attention_variant(
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


def attention_mistakes(masked: bool, d_v_differs: bool) -> list[tuple[str, dict]]:
    """The known mistakes: each hint and the ``attention_variant`` arguments for it."""
    mistakes = [
        (SOFTMAX_OVER_QUERIES, {"axis": -2}),
        (SCALE_MULTIPLIED, {"scale": "times_sqrt"}),
        (NOT_SCALED, {"scale": "none"}),
        ("the scores are divided by d_k; divide by √d_k", {"scale": "d"}),
    ]
    if d_v_differs:
        mistakes.append(
            (
                "scaled by √d_v (the value size); the scale is √d_k = √q.size(-1)",
                {"scale": "sqrt_dv"},
            )
        )
    if masked:
        mistakes += [
            (MASK_IGNORED, {"masking": "ignore"}),
            (MASK_FLIPPED, {"masking": "flip"}),
        ]
    return mistakes


def attention_error_hint(e: Exception) -> str | None:
    """A hint for an exception raised inside attention code."""
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


@exercise("4", "attention", points=2)
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
    B, H, T, S = 2, 3, 4, 5
    q2, k2, v2 = randn(3, 16, seed=40), randn(4, 16, seed=41), randn(4, 16, seed=42)
    q4, k4 = randn(B, H, T, 8, seed=43), randn(B, H, S, 8, seed=44)
    v4 = randn(B, H, S, 6, seed=45)
    pad = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    pad = pad[:, None, None, :]  # (B, 1, 1, S)
    qc, kc, vc = (randn(B, H, T, 8, seed=s) for s in (46, 47, 48))
    dead = torch.ones(B, 1, T, S, dtype=torch.bool)
    dead[0, 0, 1] = False  # query 1 of sentence 0 may attend to nothing
    one = (q4[:, :, :1], k4[:, :, :1], v4[:, :, :1])
    f64 = (q4.double(), k4.double(), v4.double())
    cases = [
        Case("one head, no mask (T=3, S=4, d_k=16)", partial(_run, fn, q2, k2, v2)),
        Case(
            "batched heads, d_v ≠ d_k (B=2, H=3, T=4, S=5)",
            partial(_run, fn, q4, k4, v4),
        ),
        Case("padding mask (B, 1, 1, S)", partial(_run, fn, q4, k4, v4, pad)),
        Case("causal mask (1, 1, T, T)", partial(_run, fn, qc, kc, vc, causal_mask(T))),
        Case("a query with every key masked", partial(_run, fn, q4, k4, v4, dead)),
        Case("T = S = 1", partial(_run, fn, *one)),
        Case("float64, padding mask", partial(_run, fn, *f64, pad)),
    ]
    return run_cases(
        "check_scaled_dot_product_attention", cases, quiet, ATTENTION_REFERENCES
    )


def _run(fn: Callable, q: Tensor, k: Tensor, v: Tensor, mask=None) -> None:
    args = (q.clone(), k.clone(), v.clone())
    margs = () if mask is None else (mask.clone(),)
    exp_out, exp_w = scaled_dot_product_attention(q, k, v, mask)
    result = call(fn, *args, *margs, on_error=attention_error_hint)
    out, w = _out_and_weights(result, exp_out.shape, exp_w.shape)
    out = as_tensor(out, "out")
    if out.dtype != q.dtype:
        raise Failure(
            f"out has dtype {out.dtype} for inputs of dtype {q.dtype}",
            hint="keep the input's dtype: no .float() or hard-coded float32",
        )
    # rows with no allowed key: any finite answer is fine (zero or mean of v)
    live = (
        torch.ones(exp_w.shape[:-1], dtype=torch.bool)
        if mask is None
        else mask.expand(exp_w.shape).any(-1)
    )  # (..., T)
    same_shape = tuple(out.shape) == tuple(exp_out.shape)
    if same_shape and torch.isnan(out).any():
        dead_only = not torch.isnan(out[live]).any()
        raise Failure(
            "out contains NaN"
            + (" in the rows whose keys are all masked" if dead_only else ""),
            hint=(
                "a query with every key masked gets -inf everywhere, and softmax of "
                "all -inf is NaN (0/0). Fill with torch.finfo(dtype).min (or -1e9) "
                "instead of -inf, or zero those rows"
                if dead_only
                else "NaN appears: check for -inf, 0/0 or a negative sqrt"
            ),
        )
    if same_shape and not torch.isfinite(out).all():
        raise Failure("out contains inf", hint="check the masking fill value")
    # compare the live rows only; name the mistake from the weights, else the output
    mistakes = attention_mistakes(mask is not None, v.size(-1) != q.size(-1))
    variants = [
        (hint, lambda kw=kw: attention_variant(q, k, v, mask, **kw)[live])
        for hint, kw in mistakes
    ]
    expect(
        "out",
        out.masked_fill(~live[..., None], 0.0) if same_shape else out,
        exp_out.masked_fill(~live[..., None], 0.0),
        diagnose=lambda g: (
            _weights_mistake(w, exp_w, mask, live) or match(out[live], variants)
        ),
        shape_hint=(
            f"out must be (..., T, d_v) = {tuple(exp_out.shape)}: weights (…, T, S) "
            "@ v (…, S, d_v)"
        ),
        generic=(
            "recompute by hand for one query: scores = q·k / √d_k, masked keys get a "
            "very negative score, softmax over the keys, then the weighted sum of "
            "the values"
        ),
    )
    if w is not None:
        w = as_tensor(w, "weights")
        expect(
            "weights",
            w.masked_fill(~live[..., None], 0.0) if w.shape == exp_w.shape else w,
            exp_w,
            diagnose=lambda g: _weights_mistake(w, exp_w, mask, live),
            shape_hint="weights must be (..., T, S): one row per query",
        )


def _out_and_weights(result: Any, out_shape, w_shape) -> tuple[Any, Any]:
    """Split the answer into (out, weights); weights is None if only out came back."""
    if not isinstance(result, (tuple, list)):
        return result, None
    if len(result) != 2:
        raise Failure(
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
        raise Failure(
            "the two results come in the wrong order",
            hint="return (out, weights): the output first",
        )
    return a, b


def _weights_mistake(w, exp_w: Tensor, mask, live: Tensor) -> str | None:
    """Diagnose from the returned weights, when there are any of the right shape."""
    if not isinstance(w, Tensor) or w.shape != exp_w.shape:
        return None
    w = w.detach().double()
    # each query's weights must sum to 1; each key's summing to 1 is the wrong axis
    rows_key = w.sum(-1)[live]
    rows_query = w.sum(-2)
    ok_key = torch.allclose(rows_key, torch.ones_like(rows_key), atol=1e-4)
    ok_query = torch.allclose(rows_query, torch.ones_like(rows_query), atol=1e-4)
    if not ok_key and ok_query:
        return SOFTMAX_OVER_QUERIES
    # weight on a blocked key: all of it on blocked keys is the flipped polarity
    if mask is not None:
        m = mask.expand(w.shape)
        if (w[~m & live[..., None]] > 1e-6).any():
            return MASK_FLIPPED if (w[m] < 1e-9).all() else MASK_IGNORED
    if not ok_key:
        return (
            "each query's weights must sum to 1 over its allowed keys: mask the "
            "scores before the softmax rather than zeroing weights after it"
        )
    return None


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

    def plugged(q, k, v, mask=None, dropout_p=0.0, bias=None):
        if bias is not None:  # ALiBi's (chapter 13): fn(q, k, v, mask) has no place
            raise ValueError("use_attention: this model adds a bias to the scores")
        result = fn(q, k, v, mask)
        out, w = result if isinstance(result, (tuple, list)) else (result, None)
        if w is None:  # the model may record weights: NaN says there were none
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


# --- the bug zoo: attention -----------------------------------------------------------


@register(
    name="mask too late",
    checker=check_scaled_dot_product_attention,
    keyword="never reaches",
    chapter=4,
    origin=f"{ARTICLE} (Japanese, multi-head attention)",
    description="the mask is added to a tensor after the softmax input was taken "
    "from it, so masked keys keep their weight",
)
def attention_mask_too_late(q, k, v, mask=None):
    """The mask is added to the raw scores after the softmax's input was computed."""
    scores = q @ k.transpose(-2, -1)
    scaled = scores / math.sqrt(q.size(-1))  # the softmax input is made here ...
    if mask is not None:
        # BUG: ... so this masked copy of the scores never reaches the softmax
        scores = scores + (~mask) * torch.finfo(scores.dtype).min
    weights = scaled.softmax(dim=-1)
    return weights @ v, weights


@register(
    name="scale multiplied",
    checker=check_scaled_dot_product_attention,
    keyword="multiplied",
    chapter=4,
    origin=f"{ARTICLE} (Japanese, multi-head attention)",
    description="the scores are divided by d_k**-0.5, i.e. multiplied by √d_k: the "
    "softmax saturates",
)
def attention_scale_multiplied(q, k, v, mask=None):
    """Divides by d_k ** -0.5, which multiplies by sqrt(d_k)."""
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1) / d_k**-0.5  # BUG: / d**-0.5 is * sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@register(
    name="undefined names",
    checker=check_scaled_dot_product_attention,
    keyword="NameError",
    chapter=4,
    origin=f"{ARTICLE} (Korean, attention function)",
    description="variables renamed in one place only (depth, logits): the function "
    "cannot run",
)
def attention_undefined_names(q, k, v, mask=None):
    """Names renamed in one place only: d_k is defined, depth and logits are used."""
    d_k = k.size(-1)  # noqa: F841
    scores = q @ k.transpose(-2, -1)
    attention_logits = scores / math.sqrt(depth)  # noqa: F821  BUG: never defined
    if mask is not None:
        logits += ~mask * -1e9  # noqa: F821, F841  BUG: not the name used below
    weights = attention_logits.softmax(dim=-1)
    return weights @ v, weights


@register(
    name="no scaling",
    checker=check_scaled_dot_product_attention,
    keyword="not scaled",
    chapter=4,
    origin=COMMON,
    description="the scores are never divided by √d_k",
)
def attention_no_scaling(q, k, v, mask=None):
    """Forgets to divide the scores by sqrt(d_k)."""
    scores = q @ k.transpose(-2, -1)  # BUG: no / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@register(
    name="softmax over queries",
    checker=check_scaled_dot_product_attention,
    keyword="query axis",
    chapter=4,
    origin=COMMON,
    description="softmax(dim=-2): each key's weights sum to 1 instead of each query's",
)
def attention_softmax_query_axis(q, k, v, mask=None):
    """Normalises over the queries instead of the keys."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-2)  # BUG: dim=-2 is the query axis
    return weights @ v, weights


@register(
    name="mask polarity flipped",
    checker=check_scaled_dot_product_attention,
    keyword="polarity",
    chapter=6,
    origin=COMMON,
    description="True is read as 'blocked': only the padding / the future is attended",
)
def attention_mask_flipped(q, k, v, mask=None):
    """Treats True as "blocked" (nn.Transformer's polarity) with the book's masks."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        # BUG: the book's True means "may attend"; this blocks exactly those keys
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


@register(
    name="-inf gives NaN",
    checker=check_scaled_dot_product_attention,
    keyword="NaN",
    chapter=6,
    origin=COMMON,
    description="a query whose keys are all masked gets softmax(-inf, …, -inf) = NaN",
)
def attention_neg_inf(q, k, v, mask=None):
    """Masks with -inf, which turns a query with no allowed key into NaN."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # BUG: all -inf row -> NaN
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
