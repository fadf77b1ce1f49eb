"""Chapter 1: the score functions of seq2seq attention (dot, general, additive)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

from ..model.seq2seq import SCORE_FUNCTIONS
from .harness import (
    Case,
    CheckResult,
    call,
    expect,
    manual_seed,
    match,
    randn,
    references,
    run_cases,
)
from .registry import exercise

SCORES_TRANSPOSED = (
    "the scores come out as (B, S, T), transposed: rows are the T queries, columns "
    "the S keys (query @ keys.transpose(1, 2))"
)

SCORE_REFERENCES = references(*SCORE_FUNCTIONS.values())

# the nn.Linear layers each kind of score takes, as attributes of the reference
_LAYERS = {"dot": (), "general": ("W",), "additive": ("W1", "W2", "v")}


@exercise("1.1", "dot_score", points=1, kind="dot")
@exercise("1.2", "additive_score", points=2, kind="additive")
def check_score_function(
    fn: Callable, kind: str = "dot", quiet: bool = False
) -> CheckResult:
    """Check a Luong/Bahdanau score function against ``seq2seq.SCORE_FUNCTIONS[kind]``.

    ``kind="dot"``: ``fn(query, keys)``; ``"general"``: ``fn(query, keys, W)``;
    ``"additive"``: ``fn(query, keys, W1, W2, v)``, where W, W1, W2, v are the
    ``nn.Linear`` layers to use. Shape: query (B, T, H), keys (B, S, H) -> (B, T, S).
    """
    if kind not in SCORE_FUNCTIONS:
        raise ValueError(f"kind={kind!r}; expected one of {sorted(SCORE_FUNCTIONS)}")
    cases = [
        _case(fn, kind, B=2, T=3, S=5, H=4, seed=10),
        _case(fn, kind, B=1, T=1, S=4, H=6, seed=11),
        _case(fn, kind, B=3, T=4, S=4, H=8, seed=12),
    ]
    return run_cases(f"check_score_function[{kind}]", cases, quiet, SCORE_REFERENCES)


def _case(fn: Callable, kind: str, B: int, T: int, S: int, H: int, seed: int) -> Case:
    label = f"B={B}, T={T}, S={S}, H={H}"
    return Case(label, partial(_run, fn, kind, B, T, S, H, seed))


def _run(fn: Callable, kind: str, B: int, T: int, S: int, H: int, seed: int) -> None:
    manual_seed(seed)  # the reference's layers: fn gets the very same ones
    ref = SCORE_FUNCTIONS[kind](H)
    query, keys = randn(B, T, H, seed=seed), randn(B, S, H, seed=seed + 1)
    layers = [getattr(ref, a) for a in _LAYERS[kind]]
    with torch.no_grad():
        expected = ref(query, keys)
        hint = _error_hint if kind == "additive" else None  # W1, W2: additive only
        got = call(fn, query.clone(), keys.clone(), *layers, on_error=hint)
    expect(
        "scores",
        got,
        expected,
        diagnose=lambda g: _mistake(g, kind, ref, query, keys, expected),
        shape_hint=lambda g: (
            SCORES_TRANSPOSED
            if tuple(g.shape) == (B, S, T)
            else "one score per (query, key) pair: shape (B, T, S)"
        ),
    )


def _mistake(
    got: Tensor,
    kind: str,
    ref: nn.Module,
    query: Tensor,
    keys: Tensor,
    expected: Tensor,
) -> str | None:
    """The hint for a known wrong score, recognised by recomputing it."""
    variants = [(SCORES_TRANSPOSED, lambda: expected.transpose(1, 2))]
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
                "W is applied to the queries (gives hᵀWᵀs); the book applies it to the "
                "keys: query @ W(keys).transpose(1, 2)",
                lambda: ref.W(query) @ keys.transpose(1, 2),
            )
        )
    return match(got, variants)


def _error_hint(e: Exception) -> str | None:
    if "must match the size of tensor" in str(e):
        return (
            "to pair every query with every key, give the queries a key axis and the "
            "keys a query axis before adding: W1(q)[:, :, None, :] + W2(k)[:, None, "
            ":, :] broadcasts to (B, T, S, H)"
        )
    return None
