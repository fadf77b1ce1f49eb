"""Chapters 7 and 8, built yourself: an encoder layer (A.2) and a decoder layer (A.3),
their ``forward`` the exercise (the ``__init__`` is given, with the package's names),
each checked against the package's ``EncoderLayer`` / ``DecoderLayer``, post-LN and
pre-LN, with dropout where the paper puts it."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from ..model.attention import MultiHeadAttention
from ..model.feed_forward import PositionwiseFeedForward
from ..model.layers import DecoderLayer, EncoderLayer
from ..model.masks import causal_mask
from .assembly import (
    TORCH_LAYERS,
    as_module,
    load_reference,
    mask_error_hint,
    randomise,
)
from .harness import (
    Case,
    CheckResult,
    call,
    drawn,
    expect,
    manual_seed,
    match,
    randn,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import COMMON, register

# torch's fused encoder layer (nn.TransformerEncoderLayer's fast path) by its name
LAYER_REFERENCES = references(
    EncoderLayer,
    DecoderLayer,
    *TORCH_LAYERS,
    torch_names=("transformer_encoder_layer",),
)

NO_RESIDUAL = (
    "no residual connection: each sub-layer's input is added back to its output, "
    "x + sublayer(x), before (post-LN) or without (pre-LN) the LayerNorm"
)
ORDER_SWAPPED = (
    "post-LN and pre-LN are mixed up: norm_first=False is the paper's "
    "x = norm(x + sublayer(x)); norm_first=True is x = x + sublayer(norm(x))"
)
NORM_IN_BRANCH = (
    "the LayerNorm sits inside the residual branch, x + norm(sublayer(x)); post-LN "
    "normalises the sum: norm(x + sublayer(x))"
)
NORMED_STREAM = (
    "pre-LN adds the sub-layer's output to the normalised input; the residual stream "
    "carries x itself: x + sublayer(norm(x))"
)
SHARED_NORM = (
    "one LayerNorm serves several sub-layers: each sub-layer has its own (norm1, "
    "norm2, norm3), with its own γ and β"
)
NO_DROPOUT = (
    "in training mode the paper drops each sub-layer's output before the residual "
    "sum, x + dropout(sublayer(x)): use dropout1, dropout2 (and dropout3) there"
)


def _sublayer(x: Tensor, f: Callable, norm: nn.Module, style: str) -> Tensor:
    """One sub-layer wrapped in add & norm, right (post / pre) or with a mistake."""
    return {
        "post": lambda: norm(x + f(x)),
        "pre": lambda: x + f(norm(x)),
        "post-no-residual": lambda: norm(f(x)),
        "pre-no-residual": lambda: f(norm(x)),
        "post-norm-in-branch": lambda: x + norm(f(x)),
        "pre-normed-stream": lambda: norm(x) + f(norm(x)),
    }[style]()


def _styles(norm_first: bool, mistake: str) -> tuple[str, str]:
    """(style of the attention sub-layers, style of the feed-forward one)."""
    base = "pre" if norm_first else "post"
    swapped = "post" if norm_first else "pre"
    return {
        "ok": (base, base),
        "swapped": (swapped, swapped),
        "no residual": (f"{base}-no-residual",) * 2,
        "no residual in the ffn": (base, f"{base}-no-residual"),
        "norm in branch": ("post-norm-in-branch",) * 2
        if not norm_first
        else ("?",) * 2,
        "normed stream": ("pre-normed-stream",) * 2 if norm_first else ("?",) * 2,
    }.get(mistake, (base, base))


_LAYER_MISTAKES = [
    (ORDER_SWAPPED, "swapped"),
    (NO_RESIDUAL, "no residual"),
    ("the feed-forward sub-layer has no residual connection", "no residual in the ffn"),
    (NORM_IN_BRANCH, "norm in branch"),
    (NORMED_STREAM, "normed stream"),
    (SHARED_NORM, "shared norm"),
]


def _encoder_variant(ref: EncoderLayer, x: Tensor, mask: Tensor | None,
                     norm_first: bool, mistake: str) -> Tensor:  # fmt: skip
    """The encoder layer computed right (eval mode), or with one known mistake."""
    attn, ffn_style = _styles(norm_first, mistake)
    m = None if mistake == "no mask" else mask
    norm2 = ref.norm1 if mistake == "shared norm" else ref.norm2
    x = _sublayer(x, lambda h: ref.self_attn(h, h, h, m), ref.norm1, attn)
    return _sublayer(x, ref.ffn, norm2, ffn_style)


def _decoder_variant(ref: DecoderLayer, x: Tensor, memory: Tensor, tgt_mask: Tensor,
                     memory_mask: Tensor | None, norm_first: bool,
                     mistake: str) -> Tensor:  # fmt: skip
    """The decoder layer computed right (eval mode), or with one known mistake."""
    attn, ffn_style = _styles(norm_first, mistake)
    t_mask = None if mistake == "no look-ahead mask" else tgt_mask
    m_mask = None if mistake == "no memory mask" else memory_mask
    norms = [ref.norm1, ref.norm2, ref.norm3]
    if mistake == "shared norm":
        norms = [ref.norm1] * 3

    def self_block(h: Tensor) -> Tensor:
        return ref.self_attn(h, h, h, t_mask)

    def cross_block(h: Tensor) -> Tensor:
        if mistake == "cross from x":  # keys and values from the decoder itself
            return ref.cross_attn(h, h, h, t_mask)
        return ref.cross_attn(h, memory, memory, m_mask)

    blocks = [self_block, cross_block]
    if mistake == "cross first":
        blocks = blocks[::-1]
    for block, norm in zip(blocks, norms, strict=False):
        x = _sublayer(x, block, norm, attn)
    return _sublayer(x, ref.ffn, norms[2], ffn_style)


@exercise("A.2", "MyEncoderLayer", points=2, chapter=8)
def check_encoder_layer(cls: type, quiet: bool = False) -> CheckResult:
    """Check a class ``cls(d_model, n_heads, d_ff, dropout=0.1, norm_first=False)``
    whose ``forward(x, src_mask=None)`` is one encoder layer: self-attention, then
    the feed-forward network, each wrapped in a residual connection and a LayerNorm
    (post-LN, the paper's, or pre-LN with ``norm_first=True``), each sub-layer's
    output dropped out before the sum. Shape: (B, S, D) -> (B, S, D).

    Its sub-modules carry the package's names (``self_attn``, ``ffn``, ``norm1``,
    ``norm2``, ``dropout1``, ``dropout2``): the checker loads ``EncoderLayer``'s
    weights into them and compares the outputs.
    """
    table = [  # label, B, S, D, H, d_ff, padding, norm_first, dropout, seed
        ("post-LN (the paper), no mask", 2, 5, 8, 2, 16, False, False, 0.0, 90),
        ("post-LN, padding mask", 2, 5, 8, 2, 16, True, False, 0.0, 91),
        ("pre-LN (norm_first=True), padding mask", 2, 6, 12, 3, 24, True, True,
         0.0, 92),
        ("training mode, dropout p = 1: every sub-layer's output dropped", 2, 4, 8,
         2, 16, True, False, 1.0, 93),
    ]  # fmt: skip
    cases = [
        Case(label, partial(_run_layer, cls, "encoder", *row))
        for label, *row in drawn(table, _other_layer, seed=94)
    ]
    return run_cases("check_encoder_layer", cases, quiet, LAYER_REFERENCES)


@exercise("A.3", "MyDecoderLayer", points=3, chapter=8)
def check_decoder_layer(cls: type, quiet: bool = False) -> CheckResult:
    """Check a class ``cls(d_model, n_heads, d_ff, dropout=0.1, norm_first=False)``
    whose ``forward(x, memory, tgt_mask=None, memory_mask=None)`` is one decoder
    layer: masked self-attention, cross-attention (queries from ``x``, keys and
    values from ``memory``), then the feed-forward network, each wrapped as in the
    encoder layer. Shape: x (B, T, D), memory (B, S, D) -> (B, T, D).

    Its sub-modules carry the package's names (``self_attn``, ``cross_attn``,
    ``ffn``, ``norm1``…``norm3``, ``dropout1``…``dropout3``).
    """
    table = [  # label, B, T, S, D, H, d_ff, padding, norm_first, dropout, seed
        ("post-LN, look-ahead mask only (T=4, S=6)", 2, 4, 6, 8, 2, 16, False, False,
         0.0, 95),
        ("post-LN, look-ahead and padding masks", 2, 4, 6, 8, 2, 16, True, False,
         0.0, 96),
        ("pre-LN (norm_first=True), both masks (T=5, S=3)", 2, 5, 3, 12, 3, 24, True,
         True, 0.0, 97),
        ("training mode, dropout p = 1: every sub-layer's output dropped", 2, 3, 5, 8,
         2, 16, True, False, 1.0, 98),
    ]  # fmt: skip
    cases = [
        Case(label, partial(_run_layer, cls, "decoder", *row))
        for label, *row in drawn(table, _other_layer, seed=99)
    ]
    return run_cases("check_decoder_layer", cases, quiet, LAYER_REFERENCES)


def _other_layer(rng: random.Random, row: tuple) -> tuple:
    """A row of the same kind with other sizes (the decoder's T ≠ S kept)."""
    label, *sizes = row
    H = rng.choice((1, 2, 4))
    D = H * rng.choice((2, 4, 6))
    d_ff = rng.choice((2, 3, 4)) * D
    if len(sizes) == 10:  # the decoder's row: T and S
        B, T, S, _, _, _, *rest = sizes
        T = rng.randint(2, 6)
        S = rng.choice([s for s in range(2, 8) if s != T])
        return (label, rng.randint(1, 3), T, S, D, H, d_ff, *rest)
    B, S, _, _, _, *rest = sizes
    return (label, rng.randint(1, 3), rng.randint(2, 7), D, H, d_ff, *rest)


def _run_layer(cls: type, kind: str, *row: Any) -> None:
    if kind == "decoder":
        B, T, S, D, H, d_ff, padding, norm_first, p, seed = row
    else:
        B, S, D, H, d_ff, padding, norm_first, p, seed = row
        T = S
    ref_cls = DecoderLayer if kind == "decoder" else EncoderLayer
    # 1) the learner's layer, built with the given __init__
    manual_seed(seed)
    what = f"{cls.__name__}(d_model, n_heads, d_ff, dropout, norm_first)"
    module = as_module(call(cls, D, H, d_ff, dropout=p, norm_first=norm_first), what)
    # 2) the reference: dropout only on the sub-layers' outputs, the paper's places
    ref = ref_cls(D, H, d_ff, dropout=p, norm_first=norm_first, fast=False,
                  attention_dropout=0.0, activation_dropout=0.0)  # fmt: skip
    randomise(ref, seed)
    load_reference(module, ref)
    training = p > 0
    module.train(training)
    ref.train(training)
    # 3) the inputs and masks: padding at the end of the second sentence
    x = randn(B, T, D, seed=seed + 20)
    memory = randn(B, S, D, seed=seed + 21) if kind == "decoder" else x
    src_pad = None
    if padding:
        lengths = torch.tensor([S, max(1, S - 2), S - 1][:B])
        src_pad = (torch.arange(S)[None, :] < lengths[:, None])[:, None, None]
    with torch.no_grad():
        if kind == "decoder":
            tgt_mask = causal_mask(T).expand(B, 1, T, T)
            if padding:
                t_len = torch.tensor([T, max(1, T - 1), T][:B])
                keep = torch.arange(T)[None, :] < t_len[:, None]  # (B, T)
                tgt_mask = tgt_mask & keep[:, None, None, :]
            inputs = (x, memory, tgt_mask, src_pad)
        else:
            tgt_mask = None
            inputs = (x, src_pad)
        expected = ref(*inputs)
        args = tuple(None if t is None else t.clone() for t in inputs)
        got = call(module, *args, on_error=mask_error_hint)
    ref.eval()
    if training:  # with p = 1 the eval-mode output is the answer of "no dropout"
        variants = [(NO_DROPOUT, partial(ref, *inputs))]
    elif kind == "decoder":
        mistakes = _LAYER_MISTAKES + [
            ("the look-ahead mask (tgt_mask) is not passed to the self-attention: each "
             "position sees the words after it", "no look-ahead mask"),
            ("memory_mask is not passed to the cross-attention: the source's padding "
             "is attended to", "no memory mask"),
            ("the cross-attention takes its keys and values from x; they come from "
             "the encoder output: cross_attn(x, memory, memory, memory_mask)",
             "cross from x"),
            ("the sub-layers are in the wrong order: masked self-attention first, "
             "then cross-attention, then the feed-forward network", "cross first"),
        ]  # fmt: skip
        variants = [
            (
                hint,
                partial(
                    _decoder_variant, ref, x, memory, tgt_mask, src_pad, norm_first, m
                ),
            )
            for hint, m in mistakes
        ]
    else:
        mistakes = _LAYER_MISTAKES + [
            ("the padding mask is not passed to the self-attention: padding tokens "
             "are attended to", "no mask"),
        ]  # fmt: skip
        variants = [
            (hint, partial(_encoder_variant, ref, x, src_pad, norm_first, m))
            for hint, m in mistakes
        ]
    expect(
        "output",
        got,
        expected,
        atol=1e-4,
        rtol=1e-3,
        diagnose=lambda g: match(g, variants, atol=1e-4),
        generic=NO_DROPOUT if training else None,
        shape_hint=lambda g: (
            "the output has one row per target position: queries come from x (the "
            "decoder), keys and values from memory"
            if kind == "decoder" and g.dim() == 3 and g.shape[1] == S
            else f"the output has x's shape {(B, T, D)}"
        ),
    )


# --- the given __init__s, shared by the stubs, the solutions and the zoo --------------


class EncoderLayerParts(nn.Module):
    """The encoder layer's parts, named as the package names them (the stub's
    ``__init__``); ``forward`` is the exercise."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.ffn = PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)


class DecoderLayerParts(nn.Module):
    """The decoder layer's parts, named as the package names them."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.cross_attn = MultiHeadAttention(d_model, n_heads)
        self.ffn = PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)


# --- the bug zoo: the layers ----------------------------------------------------------


@register(
    name="LayerNorm inside the residual branch",
    checker=check_encoder_layer,
    keyword="residual branch",
    chapter=7,
    origin=COMMON,
    description="x + norm(sublayer(x)) where post-LN normalises the sum, "
    "norm(x + sublayer(x))",
)
class EncoderLayerNormInBranch(EncoderLayerParts):
    """Normalises each sub-layer's output instead of the residual sum."""

    def forward(self, x, src_mask=None):
        if self.norm_first:
            x = x + self.dropout1(self.self_attn(*[self.norm1(x)] * 3, src_mask))
            return x + self.dropout2(self.ffn(self.norm2(x)))
        a = self.dropout1(self.self_attn(x, x, x, src_mask))
        x = x + self.norm1(a)  # BUG: post-LN is norm1(x + a)
        return x + self.norm2(self.dropout2(self.ffn(x)))


@register(
    name="cross-attention reads the decoder",
    checker=check_decoder_layer,
    keyword="memory",
    chapter=8,
    origin=COMMON,
    description="the cross-attention takes keys and values from the decoder's own "
    "states instead of the encoder output",
)
class DecoderLayerCrossFromX(DecoderLayerParts):
    """Attends over the target twice, never over the source."""

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))
            h = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(h, h, h, tgt_mask))  # BUG: memory
            return x + self.dropout3(self.ffn(self.norm3(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
        x = self.norm2(x + self.dropout2(self.cross_attn(x, x, x, tgt_mask)))  # BUG
        return self.norm3(x + self.dropout3(self.ffn(x)))
