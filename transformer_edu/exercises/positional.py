"""Chapter 3: the sinusoidal positional encoding, and adding it to a batch."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor

from ..model.embeddings import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    _PositionalEncoding,
    sinusoidal_table,
)
from .harness import (
    Case,
    CheckResult,
    call,
    drawn,
    expect,
    match,
    randn,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import ARTICLE, COMMON, register

TABLE_REFERENCES = references(sinusoidal_table, SinusoidalPositionalEncoding)
# the shared forward of the package's positional encodings adds the table
ADD_REFERENCES = references(
    _PositionalEncoding, SinusoidalPositionalEncoding, LearnedPositionalEncoding
)

SAME_VECTOR = (
    "every position gets the same vector, so the model cannot tell positions apart: "
    "were the angles overwritten (e.g. by a fresh zeros array) before sin/cos were "
    "applied?"
)
SLICED_BY_BATCH = (
    "each sentence gets one vector at all its positions (row b of the table for "
    "sentence b): the table was sliced by the batch axis, as code written for "
    "seq-first (T, B, D) input does; with batch-first x the positions are x.size(1)"
)


def _table_variant(
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


_TABLE_MISTAKES = [  # (hint, the _table_variant arguments that make the mistake)
    (
        "sin and cos are swapped: even columns (2i) take the sine, odd columns "
        "(2i+1) the cosine",
        {"swap": True},
    ),
    (
        "wrong exponent: the frequency of columns 2i and 2i+1 is 1/10000^(2i/D); you "
        "used i/D (i = column pair index), so frequencies fall too slowly",
        {"exponent": "i"},
    ),
    (
        "wrong exponent: you used the column index as i, giving 10000^(2·col/D); the "
        "pair (2i, 2i+1) shares 10000^(2i/D)",
        {"exponent": "2col"},
    ),
    (
        "wrong exponent: each column got its own frequency 10000^(col/D); columns 2i "
        "and 2i+1 must share 10000^(2i/D)",
        {"exponent": "col"},
    ),
    (
        "positions start at 1; the first position is pos = 0 (its row is "
        "[0, 1, 0, 1, …])",
        {"first": 1},
    ),
    (
        "the sines and cosines are concatenated in two halves; the paper interleaves "
        "them: sin in even columns, cos in odd",
        {"halves": True},
    ),
]


@exercise("3.1", "sinusoidal", points=2)
def check_positional_encoding(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(max_len, d_model)`` -> the (max_len, d_model) sinusoidal table:
    PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D))."""
    cases = [
        Case(f"max_len={L}, d_model={D}", partial(_run_table, fn, L, D))
        for L, D in drawn([(10, 16), (50, 64), (7, 5), (1, 4)], _other_size, seed=30)
    ]
    return run_cases("check_positional_encoding", cases, quiet, TABLE_REFERENCES)


def _other_size(rng: random.Random, row: tuple) -> tuple:
    """A table size drawn anew: one position stays one, an odd width stays odd."""
    L, D = row
    return (1 if L == 1 else rng.randint(2, 60)), rng.randrange(4, 65, 2) - D % 2


def _run_table(fn: Callable, L: int, D: int) -> None:
    expected = sinusoidal_table(L, D)
    got = call(fn, L, D, on_error=_odd_d_model_hint if D % 2 else None)
    expect(
        "table",
        got,
        expected,
        diagnose=lambda g: _table_mistake(g, L, D),
        shape_hint=lambda g: (
            "the table is transposed: one row per position, shape (max_len, d_model)"
            if tuple(g.shape) == (D, L)
            else "return one row per position: shape (max_len, d_model)"
        ),
    )


def _table_mistake(got: Tensor, L: int, D: int) -> str | None:
    if L > 1 and torch.allclose(got, got[:1].expand_as(got)):
        return SAME_VECTOR
    variants = [
        (hint, partial(_table_variant, L, D, **kw)) for hint, kw in _TABLE_MISTAKES
    ]
    return match(got, variants)


def _odd_d_model_hint(e: Exception) -> str:
    return (
        "with an odd d_model there is one more sine column (even indices) than "
        "cosine columns (odd indices): take d_model // 2 angles for the cosines"
    )


@exercise("3.2", "add_positions", points=1)
def check_add_positional_encoding(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(x, table)`` -> x + PE for batch-first x (B, T, D) and a table
    (max_len, D): every sentence gets row t of the table added at position t."""
    cases = [
        Case(f"B={B}, T={T}, D={D}", partial(_run_add, fn, B, T, D, seed))
        for B, T, D, seed in [
            (2, 5, 8, 30),
            (4, 4, 6, 31),
            (5, 3, 8, 32),
            (1, 1, 4, 33),
        ]
    ]
    return run_cases("check_add_positional_encoding", cases, quiet, ADD_REFERENCES)


def _run_add(fn: Callable, B: int, T: int, D: int, seed: int) -> None:
    table = sinusoidal_table(16, D)
    x = randn(B, T, D, seed=seed)
    expected = x + table[:T]
    got = call(fn, x.clone(), table.clone(), on_error=_add_error_hint)
    expect("out", got, expected, diagnose=lambda g: _add_mistake(g, x))


def _add_mistake(got: Tensor, x: Tensor) -> str | None:
    added = got - x  # (B, T, D): what was added at each position
    same = added[:, :1].expand_as(added)
    if x.size(0) > 1 and torch.allclose(added, same, atol=1e-5):
        return SLICED_BY_BATCH
    return None


def _add_error_hint(e: Exception) -> str | None:
    if "must match the size of tensor" in str(e):
        return (
            "the table has max_len rows but x only T positions: add the first T "
            "rows, table[: x.size(1)], which broadcast over the batch"
        )
    return None


# --- the bug zoo: positional encoding -----------------------------------------------


@register(
    name="PE angles zeroed",
    checker=check_positional_encoding,
    keyword="same vector",
    chapter=3,
    origin=f"{ARTICLE} (Korean, positional encoding)",
    description="the angle table is overwritten with zeros before sin/cos: every "
    "position gets the same vector",
)
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


@register(
    name="PE sin/cos swapped",
    checker=check_positional_encoding,
    keyword="swapped",
    chapter=3,
    origin=COMMON,
    description="cosines in the even columns and sines in the odd ones",
)
def pe_sin_cos_swapped(max_len, d_model):
    """Cosines in the even columns, sines in the odd ones."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (L, 1)
    i = torch.arange(d_model)[None, :]  # (1, D)
    angles = pos / 10000 ** (2 * (i // 2) / d_model)  # (L, D)
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = torch.cos(angles[:, 0::2])  # BUG: even columns take the sine
    pe[:, 1::2] = torch.sin(angles[:, 1::2])
    return pe


@register(
    name="PE exponent i",
    checker=check_positional_encoding,
    keyword="exponent",
    chapter=3,
    origin=COMMON,
    description="the exponent uses i / d_model instead of 2i / d_model",
)
def pe_exponent_i(max_len, d_model):
    """Uses i / d_model as the exponent where the formula has 2i / d_model."""
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (L, 1)
    i = torch.arange(d_model)[None, :] // 2  # (1, D): the pair index i
    angles = pos / 10000 ** (i / d_model)  # BUG: the exponent is 2i / d_model
    pe = torch.empty(max_len, d_model)
    pe[:, 0::2] = torch.sin(angles[:, 0::2])
    pe[:, 1::2] = torch.cos(angles[:, 1::2])
    return pe


@register(
    name="PE sliced by the batch",
    checker=check_add_positional_encoding,
    keyword="batch axis",
    chapter=3,
    origin=f"{ARTICLE} (labml-style seq-first code used batch first)",
    description="a seq-first (max_len, 1, D) table sliced with x.shape[0] on "
    "batch-first input adds one vector per sentence instead of one per position",
)
def add_pe_seq_first(x, table):
    """A seq-first table (max_len, 1, D) sliced by x.shape[0] on batch-first input."""
    pe = table[:, None, :]  # (max_len, 1, D), written for x of shape (T, B, D)
    return x + pe[: x.shape[0]]  # BUG: x is (B, T, D), so this slices by the batch
