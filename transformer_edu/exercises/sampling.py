"""Chapter 10: top-p (nucleus) filtering of a next-token distribution, checked against
``decoding.next_token_probs`` (ties, p = 1, a tiny p, a single token)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor

from ..decoding import (
    next_token_probs,
)
from .harness import (
    Case,
    CheckResult,
    call,
    close,
    expect,
    randn,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import COMMON, register

TOP_P_REFERENCES = references(next_token_probs)


@exercise("10.5", "top_p", points=1)
def check_top_p(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(logits, top_p)`` -> probabilities (n, V): softmax(logits) restricted
    to the most probable tokens whose mass first reaches ``top_p`` (the token that
    crosses it included), renormalised; ``top_p = 1`` keeps every token.

    Shape: logits (n, V) -> (n, V).
    """
    ties = torch.tensor([[2.0, 2.0, 0.0, 0.0, -1.0]])  # two tokens share the top
    table = [  # label, logits, top_p
        ("n=3, V=10, p=0.9", randn(3, 10, seed=10, std=2.0), 0.9),
        ("n=2, V=10, p=0.5", randn(2, 10, seed=11, std=2.0), 0.5),
        ("p=1 keeps every token", randn(2, 6, seed=12), 1.0),
        ("a tiny p keeps the most probable token", randn(2, 8, seed=13), 0.01),
        ("a tie at the top", ties, 0.5),
        ("a single token (V=1)", torch.tensor([[0.3], [-2.0]]), 0.7),
    ]
    cases = [Case(label, partial(_run_top_p, fn, *args)) for label, *args in table]
    return run_cases("check_top_p", cases, quiet, TOP_P_REFERENCES)


def _run_top_p(fn: Callable, logits: Tensor, top_p: float) -> None:
    expected = next_token_probs(logits, top_p=top_p)
    got = call(fn, logits.clone(), top_p)
    probs = logits.softmax(-1)
    expect(
        "probabilities",
        got,
        expected,
        atol=1e-5,
        diagnose=lambda g: _top_p_mistake(g, probs, top_p),
        generic="sort by probability, keep tokens until their mass reaches p, zero "
        "the rest and renormalise",
    )


def _top_p_mistake(got: Tensor, probs: Tensor, top_p: float) -> str | None:
    got = got.double()
    if (got.sum(-1) - 1).abs().max() > 1e-4 and torch.isfinite(got).all():
        return "renormalise: the kept probabilities must sum to 1"
    p, order = probs.double().sort(-1, descending=True)
    strict = p.cumsum(-1) > top_p  # BUG's rule: drops the token that crosses p
    drop = torch.zeros_like(strict).scatter(-1, order, strict)
    kept = probs.double().masked_fill(drop, 0.0)
    variant = kept / kept.sum(-1, keepdim=True)
    if not torch.isfinite(got).all() or close(got.nan_to_num(0.0), variant, 1e-5, 1e-4):
        return TOP_P_CROSSING
    return None


TOP_P_CROSSING = (
    "keep the token whose probability makes the mass reach p: the nucleus is the "
    "smallest set with mass ≥ p, so it always holds at least one token"
)


@register(
    name="top-p drops the crossing token",
    checker=check_top_p,
    keyword="reach p",
    chapter=10,
    origin=COMMON,
    description="keeps the tokens whose cumulative mass stays ≤ p, so the token that "
    "crosses p is lost, and a small p keeps nothing",
)
def top_p_drops_crossing_token(logits, top_p):
    """Keeps cumsum ≤ p, one token short of the nucleus."""
    probs = logits.softmax(-1)
    p, order = probs.sort(-1, descending=True)
    drop_sorted = p.cumsum(-1) > top_p  # BUG: should be cumsum - p >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    kept = probs.masked_fill(drop, 0.0)
    return kept / kept.sum(-1, keepdim=True)


# --- corpus BLEU by hand ----------------------------------------------------------------
