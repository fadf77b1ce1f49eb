"""Chapters 6 and 8: the look-ahead and padding masks, and the three masks of an
encoder-decoder. Masks are boolean, True = "may attend"."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn
from torch.nn.modules import transformer as _torch_transformer

from ..model.masks import causal_mask, key_padding_from_torch, padding_mask, target_mask
from .harness import (
    BOOLEAN_MASK,
    Case,
    CheckResult,
    Failure,
    as_tensor,
    call,
    drawn,
    fmt,
    grid,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import COMMON, register

POLARITY_FLIPPED = (
    "mask polarity is flipped: True must mean 'may attend' (nn.Transformer's "
    "convention is the opposite, True = blocked)"
)
CROSS_FROM_TARGET = (
    "cross-attention's keys are the source tokens: its padding mask comes from src, "
    "not tgt (the queries' own padding needs no mask: the loss ignores those rows)"
)


# the package's masks, and torch's, that each exercise asks the learner to write
CAUSAL_REFERENCES = references(
    causal_mask,
    target_mask,
    (
        nn.Transformer.generate_square_subsequent_mask,
        "torch.nn.Transformer.generate_square_subsequent_mask",
    ),
    _torch_transformer._generate_square_subsequent_mask,
    # torch.nn.attention.bias (not imported here: it takes seconds), by name
    torch_names=("causal_upper_left", "causal_lower_right", "CausalBias"),
)
PADDING_REFERENCES = references(padding_mask, target_mask, key_padding_from_torch)
MASKS_REFERENCES = references(target_mask)  # padding_mask and causal_mask are given


# --- the look-ahead mask ------------------------------------------------------------


@exercise("6.1", "look_ahead_mask", points=1)
def check_causal_mask(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(T)`` -> boolean (T, T) or (1, 1, T, T) look-ahead mask, True = may
    attend: row t (a query) may see columns 0 … t (keys), itself included."""
    sizes = drawn((4, 1, 2, 7), _other_length, seed=60)
    cases = [Case(f"T={T}", partial(_run_causal, fn, T)) for T in sizes]
    return run_cases("check_causal_mask", cases, quiet, CAUSAL_REFERENCES)


def _other_length(rng: random.Random, T: int) -> int:
    """A length none of the fixed cases has (one position stays one)."""
    return 1 if T == 1 else rng.choice([t for t in range(3, 17) if t not in (4, 7)])


def _run_causal(fn: Callable, T: int) -> None:
    expected = causal_mask(T)[0, 0]  # (T, T)
    got = as_tensor(call(fn, T), "mask")
    if got.dim() == 4 and tuple(got.shape[:2]) == (1, 1):
        got = got[0, 0]
    if tuple(got.shape) != (T, T):
        raise Failure(
            f"mask has shape {tuple(got.shape)}, expected ({T}, {T}) or "
            f"(1, 1, {T}, {T})",
            hint="one row per query position, one column per key position",
        )
    if got.dtype != torch.bool:
        additive = got.is_floating_point() and bool((got < -1e3).any())
        raise Failure(
            f"mask has dtype {got.dtype}, expected torch.bool",
            hint=(
                "this is an additive mask (0 / -inf), nn.Transformer's style; the "
                "book's masks are boolean, True = may attend"
                if additive
                else BOOLEAN_MASK
            ),
        )
    if torch.equal(got, expected):
        return
    # the known wrong masks, each with its hint (for T = 1 they are all alike)
    ones = torch.ones(T, T, dtype=torch.bool)
    known = [
        (~expected, POLARITY_FLIPPED),
        (
            ones.triu(),
            "the mask is transposed (upper triangular): row t is query t and may see "
            "keys 0 … t, the lower triangle: use tril()",
        ),
        (
            ones.tril(-1),
            "off by one: the diagonal is blocked, so a position cannot attend to "
            "itself (and the first one to anything): tril() with diagonal=0",
        ),
        (
            ones.tril(1),
            "off by one: each position may also see the next one, which leaks the "
            "token it must predict: tril() with diagonal=0",
        ),
        (ones, "nothing is blocked: future positions must be False"),
    ]
    hint = next((h for m, h in known if T > 1 and torch.equal(got, m)), None)
    raise Failure(
        "the mask differs (rows = queries, columns = keys, 1 = may attend)",
        grid(expected),
        grid(got),
        hint or "row t may attend to columns 0 … t and nothing later",
    )


# --- the padding mask ---------------------------------------------------------------


@exercise("6.2", "pad_mask", points=1)
def check_padding_mask(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(tokens, pad_idx)`` -> boolean (B, 1, 1, S), True at real tokens
    (keys that may be attended), for tokens (B, S)."""
    cases = [
        Case(f"tokens {tokens}, pad_idx={pad}", partial(_run_padding, fn, tokens, pad))
        for tokens, pad in drawn(
            [
                ([[5, 6, 7, 0, 0], [8, 9, 0, 0, 0]], 0),
                ([[4, 5, 6]], 0),
                ([[0, 5, 3, 3], [7, 0, 2, 3]], 3),
                ([[9]], 0),
            ],
            _other_padding,
            seed=61,
        )
    ]
    return run_cases("check_padding_mask", cases, quiet, PADDING_REFERENCES)


def _other_padding(rng: random.Random, row: tuple) -> tuple:
    """Tokens of the same shape drawn anew: a sentence padded in the fixed case is
    padded (1 to as many PADs), one without padding gets none; a non-zero PAD stays
    non-zero, and then 0 is an ordinary token."""
    tokens, fixed_pad = row
    pad = rng.randint(1, 9) if fixed_pad else 0
    return [_redrawn(rng, r, fixed_pad, pad) for r in tokens], pad


def _redrawn(rng: random.Random, sentence: list[int], fixed_pad: int, pad: int,
             first: tuple[int, ...] = ()) -> list[int]:  # fmt: skip
    """``sentence`` drawn anew, as long, starting with ``first``: padded with 1 to
    as many ``pad`` as it had ``fixed_pad`` (none when it had none)."""
    n_pad = sentence.count(fixed_pad)
    n_pad = rng.randint(1, n_pad) if n_pad else 0
    return [*first, *_tokens(rng, len(sentence) - len(first), n_pad, pad)]


def _tokens(rng: random.Random, S: int, n_pad: int, pad: int) -> list[int]:
    """S ids of 0-9, the last ``n_pad`` of them PAD (at random places when PAD is not
    0, as in the fixed case), the others not PAD."""
    words = [rng.choice([i for i in range(10) if i != pad]) for _ in range(S - n_pad)]
    if pad == 0:
        return words + [pad] * n_pad
    for _ in range(n_pad):
        words.insert(rng.randint(1, len(words)) if words else 0, pad)
    return words


def _run_padding(fn: Callable, tokens: list[list[int]], pad: int) -> None:
    ids = torch.tensor(tokens)
    B, S = ids.shape
    expected = padding_mask(ids, pad)
    got = as_tensor(call(fn, ids.clone(), pad), "mask")
    shape = tuple(got.shape)
    if shape != (B, 1, 1, S):
        hint = "the mask must be (B, 1, 1, S) to broadcast over heads/queries"
        if shape in ((B, S), (B, 1, S)):
            hint = (
                f"shape {shape} broadcasts wrongly against the scores (B, H, T, S): "
                "add the head and query axes, mask[:, None, None, :]"
            )
        elif shape == (B, 1, S, 1):
            hint = "the mask runs along the keys (the last axis), not queries"
        raise Failure(f"mask has shape {shape}, expected {(B, 1, 1, S)}", hint=hint)
    if got.dtype != torch.bool:
        raise Failure(
            f"mask has dtype {got.dtype}, expected torch.bool",
            hint="return a boolean tensor: tokens != pad_idx",
        )
    if torch.equal(got, expected):
        return
    hint = "True where the token is real, False at padding"
    if torch.equal(got, ~expected):
        hint = POLARITY_FLIPPED
    elif pad != 0 and torch.equal(got, padding_mask(ids, 0)):
        hint = "the padding id is hard-coded as 0; use the pad_idx argument"
    raise Failure(
        "the mask differs", fmt(expected.flatten(), 12), fmt(got.flatten(), 12), hint
    )


# --- the three masks of an encoder-decoder (chapter 8) ------------------------------


@exercise("8", "make_masks", points=2)
def check_transformer_masks(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(src, tgt, pad_idx)`` -> (src_mask, tgt_mask, memory_mask), the masks
    of encoder self-attention, decoder self-attention and cross-attention.

    Each must be boolean (True = may attend) and broadcast to the scores it masks:
    (B, H, S, S), (B, H, T, T) and (B, H, T, S).
    """
    table = drawn([  # label, src, tgt (PAD = 0, BOS = 1)
        ("S=5, T=4 with padding",
         [[5, 6, 7, 8, 0], [9, 4, 0, 0, 0]], [[1, 5, 6, 0], [1, 7, 8, 9]]),
        ("S = T = 4 (fixed-length padding)",
         [[5, 6, 0, 0], [4, 5, 6, 7]], [[1, 8, 9, 4], [1, 5, 0, 0]]),
        ("no padding", [[4, 5, 6]], [[1, 7]]),
    ], _other_pair, seed=62)  # fmt: skip
    cases = [
        Case(label, partial(_run_three, fn, src, tgt)) for label, src, tgt in table
    ]
    return run_cases("check_transformer_masks", cases, quiet, MASKS_REFERENCES)


def _other_pair(rng: random.Random, row: tuple) -> tuple:
    """Sources and targets of the same shapes drawn anew, padded (PAD = 0) where the
    fixed case's sentences were; each target starts with BOS."""
    label, src, tgt = row
    return (label, [_redrawn(rng, r, 0, 0) for r in src],
            [_redrawn(rng, r, 0, 0, first=(1,)) for r in tgt])  # fmt: skip


def _run_three(fn: Callable, src: list[list[int]], tgt: list[list[int]]) -> None:
    H = 2  # any number of heads: the masks must broadcast over them
    s, t = torch.tensor(src), torch.tensor(tgt)
    B, S = s.shape
    T = t.size(1)
    want = {  # name -> (reference, the shape of the scores it masks)
        "src_mask": (padding_mask(s), (B, H, S, S)),
        "tgt_mask": (target_mask(t), (B, H, T, T)),
        "memory_mask": (padding_mask(s), (B, H, T, S)),
    }
    result = call(fn, s.clone(), t.clone(), 0)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        raise Failure(
            "expected three masks", hint="return src_mask, tgt_mask, memory_mask"
        )
    for (name, (ref, full)), got in zip(want.items(), result, strict=True):
        got = as_tensor(got, name)
        try:
            ok_shape = torch.broadcast_shapes(got.shape, full) == full
        except RuntimeError:
            ok_shape = False
        if not ok_shape:
            hint = f"{name} must broadcast to (B, H, T_q, T_k) = {full}"
            if got.dim() < 4:
                hint += ": add the missing axes, e.g. mask[:, None, None, :]"
            if name == "memory_mask" and got.shape[-1] == T != S:
                hint = CROSS_FROM_TARGET
            raise Failure(
                f"{name} has shape {tuple(got.shape)}, which does not broadcast to "
                f"{full}",
                hint=hint,
            )
        if got.dtype != torch.bool:
            raise Failure(f"{name} has dtype {got.dtype}", hint=BOOLEAN_MASK)
        g, r = got.expand(full), ref.expand(full)
        if torch.equal(g, r):
            continue
        # show the first sentence whose mask differs
        b = int((g != r).flatten(1).any(1).nonzero()[0])
        raise Failure(
            f"{name} differs for sentence {b} (rows = queries, columns = keys)",
            grid(r[b, 0]),
            grid(g[b, 0]),
            _three_masks_mistake(name, g, s, t, full),
        )


def _three_masks_mistake(name: str, g: Tensor, s: Tensor, t: Tensor, full) -> str:
    """Name the mistake in mask ``name`` (expanded to ``full``), or say the formula."""
    tgt_padding = padding_mask(t).expand(full) if t.size(1) == s.size(1) else None
    if name == "tgt_mask":
        if torch.equal(g, padding_mask(t).expand(full)):
            return (
                "the decoder's self-attention mask has no look-ahead part: position t "
                "sees later positions, so training can copy the answer. Combine "
                "padding_mask(tgt) & causal_mask(T)"
            )
        if torch.equal(g, causal_mask(t.size(1)).expand(full)):
            return "the target's padding keys are not masked: AND in padding_mask(tgt)"
        if torch.equal(g, ~target_mask(t).expand(full)):
            return POLARITY_FLIPPED
        return "tgt_mask = padding_mask(tgt) & causal_mask(T)"
    if name == "memory_mask":
        if tgt_padding is not None and torch.equal(g, tgt_padding):
            return CROSS_FROM_TARGET
        return "memory_mask = padding_mask(src): the keys are the source tokens"
    if tgt_padding is not None and torch.equal(g, tgt_padding):
        return "the encoder attends over the source: build src_mask from src"
    return "src_mask = padding_mask(src)"


# --- the bug zoo: masks -------------------------------------------------------------


@register(
    name="causal mask upper",
    checker=check_causal_mask,
    keyword="transposed",
    chapter=6,
    origin=COMMON,
    description="triu instead of tril: each position sees the future, not the past",
)
def causal_mask_upper(T):
    """The upper triangle: each position sees itself and the future, not the past."""
    return torch.ones(T, T, dtype=torch.bool).triu()  # BUG: triu instead of tril


@register(
    name="causal mask off by one",
    checker=check_causal_mask,
    keyword="itself",
    chapter=6,
    origin=COMMON,
    description="tril(-1): a position cannot attend to itself; the first one sees "
    "nothing",
)
def causal_mask_no_diagonal(T):
    """Off by one: a position may not attend to itself."""
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)  # BUG: -1, not 0


@register(
    name="causal mask in nn.Transformer polarity",
    checker=check_causal_mask,
    keyword="polarity",
    chapter=6,
    origin=COMMON,
    description="triu(1) (True = blocked) handed to code where True = may attend",
)
def causal_mask_torch_polarity(T):
    """nn.Transformer's mask (True = blocked) used where the book wants True = may."""
    return torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)  # BUG: polarity


@register(
    name="padding id hard-coded",
    checker=check_padding_mask,
    keyword="pad_idx",
    chapter=6,
    origin=COMMON,
    description="the padding mask ignores pad_idx and compares with 0",
)
def padding_mask_pad_zero(tokens, pad_idx=0):
    """Ignores pad_idx and assumes the padding id is 0."""
    return (tokens != 0)[:, None, None, :]  # BUG: hard-coded 0


@register(
    name="look-ahead mask never applied",
    checker=check_transformer_masks,
    keyword="look-ahead",
    chapter=8,
    origin=COMMON,
    description="the causal mask is built but tgt_mask is only the padding mask: the "
    "decoder sees the token it must predict",
)
def masks_causal_unused(src, tgt, pad_idx=0):
    """Builds the look-ahead mask, then forgets to combine it into tgt_mask."""
    src_mask = padding_mask(src, pad_idx)  # (B, 1, 1, S)
    look_ahead = causal_mask(tgt.size(1))  # (1, 1, T, T), built ...  # noqa: F841
    tgt_mask = padding_mask(tgt, pad_idx)  # BUG: ... but never applied
    return src_mask, tgt_mask, src_mask


@register(
    name="cross mask from the target",
    checker=check_transformer_masks,
    keyword="source",
    chapter=8,
    origin=COMMON,
    description="cross-attention is masked with the target's padding instead of the "
    "source's",
)
def masks_cross_from_target(src, tgt, pad_idx=0):
    """Builds the cross-attention mask from the target instead of the source."""
    src_mask = padding_mask(src, pad_idx)  # (B, 1, 1, S)
    tgt_mask = padding_mask(tgt, pad_idx) & causal_mask(tgt.size(1))  # (B, 1, T, T)
    memory_mask = padding_mask(tgt, pad_idx)  # BUG: cross-attention keys are src
    return src_mask, tgt_mask, memory_mask
