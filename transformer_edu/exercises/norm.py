"""Chapter 7: layer normalisation, as a function or as a module."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

from ..model.norm import LayerNorm
from .harness import (
    Case,
    CheckResult,
    Failure,
    NotImplementedYet,
    as_tensor,
    call,
    expect,
    match,
    randn,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import COMMON, register

EPS = 1e-5  # nn.LayerNorm's default
WRONG_AXIS = (
    "normalised over the wrong axis: LayerNorm normalises each token over its own "
    "features (dim=-1)"
)

# torch's normalisation kernels: each computes (x - μ) / sqrt(σ² + ε) over some axes,
# LayerNorm's own on a reshaped (group_norm with one group, instance_norm, batch_norm)
# or centred (rms_norm) input
TORCH_NORMS = ("layer_norm", "group_norm", "instance_norm", "batch_norm", "rms_norm")
NORM_REFERENCES = references(
    LayerNorm, (nn.LayerNorm, "torch.nn.LayerNorm"), torch_names=TORCH_NORMS
)

# the names a learner's module may give its gain and bias
_PARAM_NAMES = (
    ("weight", "bias"),
    ("gamma", "beta"),
    ("a_2", "b_2"),
    ("scale", "bias"),
    ("g", "b"),
)


def _norm_variant(
    x: Tensor,
    w: Tensor,
    b: Tensor,
    *,
    unbiased: bool = False,
    eps_outside: bool = False,
    dim: int = -1,
    affine: str = "γ·y+β",
) -> Tensor:
    """LayerNorm computed right, or with one known mistake."""
    mean = x.mean(dim=dim, keepdim=True)
    var = x.var(dim=dim, keepdim=True, unbiased=unbiased)
    if eps_outside:
        y = (x - mean) / (var.sqrt() + EPS)
    else:
        y = (x - mean) / torch.sqrt(var + EPS)
    return {"γ·y+β": y * w + b, "y": y, "β·y+γ": y * b + w}[affine]


_MISTAKES = [  # (hint, the _norm_variant arguments that make the mistake)
    (
        "unbiased variance (divides by D - 1): LayerNorm uses the biased one, "
        "x.var(-1, unbiased=False); note that torch.std / torch.var default to "
        "unbiased",
        {"unbiased": True},
    ),
    (
        "ε belongs inside the square root: sqrt(σ² + ε), not σ + ε",
        {"eps_outside": True},
    ),
    (
        "unbiased std with ε outside the square root, (x - μ) / (x.std(-1) + ε): "
        "LayerNorm divides by sqrt(x.var(-1, unbiased=False) + ε)",
        {"unbiased": True, "eps_outside": True},
    ),
    (WRONG_AXIS, {"dim": -2}),
    (WRONG_AXIS, {"dim": 0}),
    ("the gain γ and bias β are not applied", {"affine": "y"}),
    ("γ and β are swapped: y · γ + β", {"affine": "β·y+γ"}),
]


@exercise("7", "MyLayerNorm", points=2)
def check_layer_norm(fn_or_class: Callable | type, quiet: bool = False) -> CheckResult:
    """Check a LayerNorm: a function ``fn(x, weight, bias, eps=1e-5)`` or a class
    ``cls(d_model, eps=1e-5)`` with parameters weight/bias (or gamma/beta, a_2/b_2).

    Expected: γ (x - μ) / sqrt(σ² + ε) + β, with μ and the *biased* σ² over the last
    axis of each token (``nn.LayerNorm``). Shape: (..., D) -> (..., D).
    """
    x1 = randn(2, 3, 8, seed=60, std=3.0) + 2.0
    x2 = randn(4, 16, seed=61, std=0.5) - 1.0
    flat = torch.full((3, 8), 0.5)  # row 0: exactly constant, σ² = 0
    flat[1] += randn(8, seed=62, std=1e-3)  # nearly constant: σ² ~ 1e-6 << ε
    flat[2] = randn(8, seed=63)
    table = [  # label, x, seed
        ("(B=2, T=3, D=8), mean 2, std 3", x1, 70),
        ("(N=4, D=16)", x2, 71),
        ("constant and nearly constant tokens", flat, 72),
        ("float64", x1.double(), 73),
    ]
    cases = [
        Case(label, partial(_run, fn_or_class, x, seed)) for label, x, seed in table
    ]
    return run_cases("check_layer_norm", cases, quiet, NORM_REFERENCES)


def _run(fn_or_class: Callable | type, x: Tensor, seed: int) -> None:
    D = x.size(-1)
    w = (1 + randn(D, seed=seed, std=0.5)).to(x.dtype)
    b = randn(D, seed=seed + 1, std=0.5).to(x.dtype)
    if isinstance(fn_or_class, type):
        module = _build(fn_or_class, D)
        names = next(
            (
                pair
                for pair in _PARAM_NAMES
                if all(isinstance(getattr(module, n, None), Tensor) for n in pair)
            ),
            None,
        )
        if names is None:
            raise Failure(
                "cannot find the gain and bias parameters",
                hint="name them weight and bias (or gamma and beta), each an "
                "nn.Parameter of shape (d_model,)",
            )
        module = module.to(x.dtype)
        with torch.no_grad():  # the checker's γ and β, so that they matter
            getattr(module, names[0]).copy_(w)
            getattr(module, names[1]).copy_(b)
        got = call(module, x.clone())
    else:
        got = call(fn_or_class, x.clone(), w.clone(), b.clone(), EPS)
    ref = LayerNorm(D, EPS, fast=False).to(x.dtype)
    with torch.no_grad():
        ref.weight.copy_(w)
        ref.bias.copy_(b)
        expected = ref(x)
    got = as_tensor(got, "output")
    if got.shape == x.shape and torch.isnan(got).any():
        raise Failure(
            "the output contains NaN",
            hint=(
                "a token whose features are all equal has σ² = 0: ε must be inside "
                "the square root, sqrt(σ² + ε), to avoid 0/0"
            ),
        )
    variants = [(hint, partial(_norm_variant, x, w, b, **kw)) for hint, kw in _MISTAKES]
    expect(
        "output",
        got,
        expected,
        atol=1e-4,
        rtol=1e-3,
        diagnose=lambda g: match(g, variants),
        shape_hint="the output has the input's shape (..., D)",
    )


def _build(cls: type, D: int) -> nn.Module:
    """``cls(D, eps)``, or ``cls(D)`` for a class that takes no eps."""
    try:
        return cls(D, EPS)
    except TypeError:
        return call(cls, D)
    except NotImplementedError as e:
        raise NotImplementedYet() from e
    except Exception:  # let call() report where the learner's code failed
        return call(cls, D, EPS)


# --- the bug zoo: layer norm ----------------------------------------------------------


@register(
    name="LayerNorm unbiased variance",
    checker=check_layer_norm,
    keyword="unbiased",
    chapter=7,
    origin=COMMON,
    description="x.var() divides by D - 1; LayerNorm divides by D",
)
def layer_norm_unbiased(x, weight, bias, eps=1e-5):
    """Uses the unbiased variance (divides by D - 1)."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)  # BUG: unbiased by default; need unbiased=False
    return weight * (x - mean) / torch.sqrt(var + eps) + bias


@register(
    name="LayerNorm ε outside the root",
    checker=check_layer_norm,
    keyword="inside the square root",
    chapter=7,
    origin=COMMON,
    description="(x - μ) / (σ + ε) instead of (x - μ) / sqrt(σ² + ε)",
)
def layer_norm_eps_outside(x, weight, bias, eps=1e-5):
    """Adds eps to the standard deviation instead of the variance."""
    mean = x.mean(dim=-1, keepdim=True)
    std = x.var(dim=-1, keepdim=True, unbiased=False).sqrt()
    return weight * (x - mean) / (std + eps) + bias  # BUG: sqrt(var + eps)


@register(
    name="LayerNorm over the tokens",
    checker=check_layer_norm,
    keyword="features",
    chapter=7,
    origin=COMMON,
    description="normalises each feature over the positions (dim=-2) instead of each "
    "token over its features",
)
def layer_norm_wrong_axis(x, weight, bias, eps=1e-5):
    """Normalises each feature over the tokens (dim=-2), BatchNorm-style."""
    mean = x.mean(dim=-2, keepdim=True)  # BUG: LayerNorm uses dim=-1
    var = x.var(dim=-2, keepdim=True, unbiased=False)
    return weight * (x - mean) / torch.sqrt(var + eps) + bias
