"""Chapter 9: label smoothing and the warm-up learning-rate schedule."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor

from ..training import noam_lr, smoothed_targets
from .harness import (
    Case,
    CheckResult,
    as_tensor,
    call,
    close,
    drawn,
    expect,
    references,
    run_cases,
)

SMOOTHING_REFERENCES = references(smoothed_targets)
NOAM_REFERENCES = references(noam_lr)


def check_label_smoothing(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(target, vocab_size, smoothing)`` -> (N, V) target distributions:
    (1 - ε) one-hot + ε / V, what ``F.cross_entropy(label_smoothing=ε)`` trains to."""
    cases = [
        Case(
            f"N={len(target)}, V={V}, ε={eps}",
            partial(_run_smoothing, fn, target, V, eps),
        )
        for target, V, eps in drawn(
            [([1, 3, 0], 5, 0.1), ([0, 1], 2, 0.3), ([7], 50, 0.0)],
            _other_targets,
            seed=80,
        )
    ]
    return run_cases("check_label_smoothing", cases, quiet, SMOOTHING_REFERENCES)


def _other_targets(rng: random.Random, row: tuple) -> tuple:
    """As many targets, a vocabulary and ε drawn anew (ε = 0 stays 0: one-hot)."""
    target, V, eps = row
    V = rng.randint(2, 60)
    eps = round(rng.uniform(0.05, 0.4), 2) if eps else 0.0
    return [rng.randrange(V) for _ in target], V, eps


def _run_smoothing(fn: Callable, target: list[int], V: int, eps: float) -> None:
    tgt = torch.tensor(target)
    expected = smoothed_targets(tgt, V, eps)
    got = as_tensor(call(fn, tgt.clone(), V, eps), "targets")
    expect(
        "targets",
        got,
        expected,
        atol=1e-5,
        diagnose=lambda g: _smoothing_mistake(g, tgt, V, eps),
    )


def _smoothing_mistake(got: Tensor, tgt: Tensor, V: int, eps: float) -> str | None:
    sums = got.double().sum(-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
        return (
            f"each row must sum to 1 (yours sum to {float(sums[0]):.3f}): the true "
            "class keeps 1 - ε plus its share ε / V"
        )
    # the other convention: ε spread over the V - 1 wrong classes only
    one_hot = F.one_hot(tgt, V).double()
    other = one_hot * (1 - eps) + (1 - one_hot) * eps / (V - 1)
    if close(got, other, 1e-5, 1e-5):
        return (
            "you spread ε over the V - 1 wrong classes (another convention); this "
            "book follows F.cross_entropy: ε / V to every class, the true one included"
        )
    return None


def _other_schedule(rng: random.Random, row: tuple) -> tuple:
    """A model width and a warm-up drawn anew."""
    return rng.choice([32, 64, 128, 256, 512, 768, 1024]), rng.randint(10, 8000)


def check_noam_lr(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(step, d_model, warmup)`` -> the paper's learning rate
    d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) for steps >= 1."""
    cases = []
    for D, warmup in drawn([(512, 4000), (64, 100)], _other_schedule, seed=81):
        steps = [1, 2, warmup // 2, warmup, warmup + 1, 4 * warmup, 20 * warmup]
        label = f"d_model={D}, warmup={warmup}, steps {steps}"
        cases.append(Case(label, partial(_run_noam, fn, D, warmup, steps)))
    return run_cases("check_noam_lr", cases, quiet, NOAM_REFERENCES)


def _run_noam(fn: Callable, D: int, warmup: int, steps: list[int]) -> None:
    expected = torch.tensor([noam_lr(s, D, warmup) for s in steps])
    got = torch.tensor([float(as_tensor(call(fn, s, D, warmup), "lr")) for s in steps])
    expect(
        "lr",
        got,
        expected,
        atol=1e-9,
        rtol=1e-4,
        diagnose=lambda g: _noam_mistake(g, expected, steps, warmup),
    )


def _noam_mistake(got: Tensor, expected: Tensor, steps: list[int], warmup: int) -> str:
    ratio = got / expected
    if torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-4):
        return (
            f"right shape, wrong size (×{float(ratio[0]):.4g}): the factor "
            "d_model^-0.5 is missing or wrong"
        )
    peak = steps[int(got.argmax())]
    if peak != warmup:
        return (
            f"the peak is at step {peak}, not at step warmup={warmup}: warm-up is "
            "step · warmup^-1.5 (linear), decay step^-0.5, and the rate is their min"
        )
    return "lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)"
