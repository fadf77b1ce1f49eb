"""Chapter 5: splitting into heads, combining them, and a whole multi-head attention."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from ..model.attention import MultiHeadAttention, scaled_dot_product_attention
from ..model.masks import causal_mask
from .attention import attention_error_hint, attention_mistakes, attention_variant
from .harness import (
    Case,
    CheckResult,
    Failure,
    call,
    distinct,
    expect,
    manual_seed,
    match,
    randn,
    references,
    require_registered,
    run_cases,
)
from .registry import exercise
from .zoo import ARTICLE, COMMON, register

SPLIT_WITHOUT_TRANSPOSE = (
    "heads are split with view(B, H, T, Dh) and no transpose: this cuts the flat "
    "(T·D) memory into H blocks, so a 'head' mixes features of different positions. "
    "View as (B, T, H, Dh), then transpose(1, 2)"
)
COMBINE_WITHOUT_TRANSPOSE = (
    "heads are combined with reshape/view straight to (B, T, D), without moving the "
    "head axis back: positions get mixed. transpose(1, 2) first, then reshape(B, T, D)"
)


# the package's heads and torch's multi-head attention (F.multi_head_attention_forward,
# torch._native_multi_head_attention); attention itself may be reused, torch's too
HEADS_REFERENCES = references(
    MultiHeadAttention,
    (nn.MultiheadAttention, "torch.nn.MultiheadAttention"),
    torch_names=("multi_head_attention",),
)


def _reshape_error_hint(e: Exception) -> str | None:
    if "invalid for input of size" in str(e) or "shape '[" in str(e):
        return "the sizes do not multiply out: Dh = D // n_heads"
    return None  # a view after a transpose gets the harness's general hint


# --- split and combine ----------------------------------------------------------------


@exercise("5.1a", "split_heads", points=1)
def check_split_heads(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(x, n_heads)``: (B, T, D) -> (B, H, T, Dh), where head h holds the
    features h·Dh … (h+1)·Dh - 1 of every token (``MultiHeadAttention.split_heads``)."""
    cases = [
        Case(f"B={B}, T={T}, D={D}, H={H}", partial(_run_split, fn, B, T, D, H))
        for B, T, D, H in [(2, 3, 8, 2), (3, 5, 12, 3), (1, 1, 4, 4), (2, 4, 6, 1)]
    ]
    return run_cases("check_split_heads", cases, quiet, HEADS_REFERENCES)


def _run_split(fn: Callable, B: int, T: int, D: int, H: int) -> None:
    x = distinct(B, T, D, seed=B * T * D)  # distinct values show where each one went
    expected = MultiHeadAttention(D, H).split_heads(x)
    got = call(fn, x.clone(), H, on_error=_reshape_error_hint)
    Dh = D // H
    variants = [
        (SPLIT_WITHOUT_TRANSPOSE, lambda: x.reshape(B, H, T, Dh)),
        (
            "head h gets the strided features h, h+H, h+2H, …; it must get the "
            "contiguous block h·Dh … (h+1)·Dh - 1: view(B, T, H, Dh)",
            lambda: x.reshape(B, T, Dh, H).permute(0, 3, 1, 2),
        ),
    ]
    expect(
        "heads",
        got,
        expected,
        atol=0,
        rtol=0,
        diagnose=lambda g: match(g, variants, atol=0),
        shape_hint=lambda g: (
            "the heads are not moved in front of the positions: transpose(1, 2) "
            "after view(B, T, H, Dh)"
            if tuple(g.shape) == (B, T, H, Dh)
            else "the result must be (B, H, T, Dh)"
        ),
    )


@exercise("5.1b", "combine_heads", points=1)
def check_combine_heads(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(x)``: (B, H, T, Dh) -> (B, T, H·Dh), the inverse of split_heads."""
    cases = [
        Case(f"B={B}, H={H}, T={T}, Dh={Dh}", partial(_run_combine, fn, B, H, T, Dh))
        for B, H, T, Dh in [(2, 2, 3, 4), (1, 3, 5, 2), (2, 4, 1, 3)]
    ]
    return run_cases("check_combine_heads", cases, quiet, HEADS_REFERENCES)


def _run_combine(fn: Callable, B: int, H: int, T: int, Dh: int) -> None:
    x = distinct(B, H, T, Dh, seed=B * H * T * Dh)
    expected = MultiHeadAttention(H * Dh, H).combine_heads(x)
    got = call(fn, x.clone(), on_error=_reshape_error_hint)
    variants = [(COMBINE_WITHOUT_TRANSPOSE, lambda: x.reshape(B, T, H * Dh))]
    expect(
        "combined",
        got,
        expected,
        atol=0,
        rtol=0,
        diagnose=lambda g: match(g, variants, atol=0),
        shape_hint="the result must be (B, T, H·Dh)",
    )


# --- multi-head attention -------------------------------------------------------------

_PROJ_NAMES = (("w_q", "w_k", "w_v", "w_o"), ("q_proj", "k_proj", "v_proj", "out_proj"))


def _find_projections(module: nn.Module, D: int) -> list[nn.Linear]:
    """The four projections of the learner's module, under either set of names."""
    for names in _PROJ_NAMES:
        layers = [getattr(module, n, None) for n in names]
        if all(isinstance(m, nn.Linear) for m in layers):
            for n, m in zip(names, layers, strict=True):
                if (m.in_features, m.out_features) != (D, D):
                    raise Failure(
                        f"{n} is Linear({m.in_features}, {m.out_features}), "
                        f"expected Linear({D}, {D})",
                        hint="each projection maps d_model to d_model",
                    )
            return layers
    raise Failure(
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
    scale_d_model: bool = False,
    **attention: Any,
) -> Tensor:
    """Multi-head attention computed right, or with one known mistake."""
    w_q, w_k, w_v, w_o = projs
    B, T, D = query.shape
    Dh = D // H

    def heads(x: Tensor) -> Tensor:
        L = x.size(1)
        if split == "view":
            return x.reshape(B, H, L, Dh)
        return x.reshape(B, L, H, Dh).transpose(1, 2)  # (B, H, L, Dh)

    q, k, v = heads(w_q(query)), heads(w_k(key)), heads(w_v(value))
    if scale_d_model:  # turns attention_variant's 1/√Dh into 1/√D
        q = q * math.sqrt(Dh) / math.sqrt(D)
    out = attention_variant(q, k, v, mask, **attention)  # (B, H, T, Dh)
    if combine == "view":
        out = out.reshape(B, T, D)
    else:
        out = out.transpose(1, 2).reshape(B, T, D)
    return w_o(out) if out_proj else out


_MHA_MISTAKES = [  # (hint, the _mha_variant arguments that make the mistake)
    (SPLIT_WITHOUT_TRANSPOSE, {"split": "view"}),
    (COMBINE_WITHOUT_TRANSPOSE, {"combine": "view"}),
    (
        "the scores are scaled by √d_model; each head's scale is √d_k with "
        "d_k = d_model / n_heads",
        {"scale_d_model": True},
    ),
    ("the output projection w_o is not applied", {"out_proj": False}),
]


@exercise("5.2", "MyMultiHeadAttention", points=3)
def check_multi_head_attention(cls: type, quiet: bool = False) -> CheckResult:
    """Check a class ``cls(d_model, n_heads)`` whose ``forward(query, key, value,
    mask=None)`` returns (B, T, D) (or (out, weights)) against ``MultiHeadAttention``.

    Its projections must be ``nn.Linear(d_model, d_model)`` attributes named w_q, w_k,
    w_v, w_o (or q_proj, k_proj, v_proj, out_proj): the checker sets their weights.
    """
    table = [  # label, B, T, S (None: self-attention), D, H, mask, seed
        ("self-attention (B=2, T=4, D=8, H=2)", 2, 4, None, 8, 2, None, 50),
        ("cross-attention + padding (T=3, S=5)", 2, 3, 5, 8, 2, "padding", 51),
        ("causal self-attention (T=5, H=4)", 2, 5, None, 8, 4, "causal", 52),
        ("one head (D=6, H=1)", 2, 3, None, 6, 1, None, 53),
        ("T = 1", 1, 1, 4, 12, 3, "padding", 54),
    ]
    cases = [Case(label, partial(_run_mha, cls, *args)) for label, *args in table]
    return run_cases("check_multi_head_attention", cases, quiet, HEADS_REFERENCES)


def _run_mha(
    cls: type,
    B: int,
    T: int,
    S: int | None,
    D: int,
    H: int,
    mask_kind: str | None,
    seed: int,
) -> None:
    # 1) build the learner's module; its projections must be real, registered layers
    manual_seed(seed)
    module = call(cls, D, H)
    if not isinstance(module, nn.Module):
        raise Failure(
            f"{cls!r}(d_model, n_heads) is not an nn.Module",
            hint="subclass nn.Module and call super().__init__()",
        )
    projs = _find_projections(module, D)
    require_registered(module, projs, "the projections")
    # 2) give the reference and the learner's module the same weights
    ref = MultiHeadAttention(D, H, bias=True, fast=False).eval()
    ref_projs = [ref.q_proj, ref.k_proj, ref.v_proj, ref.out_proj]
    with torch.no_grad():
        for i, (mine, theirs) in enumerate(zip(ref_projs, projs, strict=True)):
            theirs.weight.copy_(randn(D, D, seed=seed + i, std=D**-0.5 * 2))
            mine.weight.copy_(theirs.weight)
            if theirs.bias is not None:
                theirs.bias.copy_(randn(D, seed=seed + 10 + i, std=0.1))
                mine.bias.copy_(theirs.bias)
            else:
                mine.bias.zero_()
    if hasattr(module, "eval"):
        module.eval()
    # 3) the inputs: self-attention (key is query) or cross-attention, and a mask
    query = randn(B, T, D, seed=seed + 20)
    key = query if S is None else randn(B, S, D, seed=seed + 21)
    S_ = T if S is None else S
    mask = None
    if mask_kind == "padding":
        lengths = torch.tensor([S_ - 2, S_ - 1][:B])
        mask = (torch.arange(S_)[None, :] < lengths[:, None])[:, None, None]
    elif mask_kind == "causal":
        mask = causal_mask(T)
    # 4) run both and compare
    with torch.no_grad():
        expected = ref(query, key, key, mask)
        margs = () if mask is None else (mask.clone(),)
        args = (query.clone(), key.clone(), key.clone())
        result = call(module, *args, *margs, on_error=attention_error_hint)
    out = result[0] if isinstance(result, (tuple, list)) else result
    mistakes = _MHA_MISTAKES + attention_mistakes(mask is not None, d_v_differs=False)
    variants = [
        (hint, partial(_mha_variant, projs, query, key, key, mask, H, **kw))
        for hint, kw in mistakes
    ]
    expect(
        "out",
        out,
        expected,
        diagnose=lambda g: match(g, variants),
        shape_hint=lambda g: (
            "the output has one row per key: queries come from `query` (the decoder), "
            "keys and values from `key`/`value`"
            if S is not None and g.dim() == 3 and g.shape[1] == S
            else f"the output must be (B, T, d_model) = {tuple(expected.shape)}"
        ),
    )


# --- the bug zoo: heads ---------------------------------------------------------------


@register(
    name="split heads without transpose",
    checker=check_split_heads,
    keyword="transpose",
    chapter=5,
    origin=COMMON,
    description="view(B, H, T, Dh) straight from (B, T, D) mixes positions inside a "
    "head",
)
def split_heads_view_only(x, n_heads):
    """Reshapes straight to (B, H, T, Dh) without the transpose."""
    B, T, D = x.shape
    return x.view(B, n_heads, T, D // n_heads)  # BUG: cuts across positions


@register(
    name="combine heads without transpose",
    checker=check_combine_heads,
    keyword="transpos",
    chapter=5,
    origin=COMMON,
    description="reshape(B, T, D) straight from (B, H, T, Dh) mixes positions",
)
def combine_heads_reshape_only(x):
    """Reshapes (B, H, T, Dh) straight to (B, T, D) without moving the heads back."""
    B, H, T, Dh = x.shape
    return x.reshape(B, T, H * Dh)  # BUG: needs x.transpose(1, 2) first


@register(
    name="MHA view without transpose",
    checker=check_multi_head_attention,
    keyword="transpose",
    chapter=5,
    origin=COMMON,
    description="a whole multi-head attention with the split-heads bug inside",
)
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


@register(
    name="layers in a plain list",
    checker=check_multi_head_attention,
    keyword="ModuleList",
    chapter=5,
    origin=f"{ARTICLE} (Japanese, encoder blocks kept in a list)",
    description="sub-layers kept in a Python list are not registered: parameters() "
    "misses them, so the optimizer never trains them and .to() never moves them",
)
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
