"""Chapter 13: a training run's compute, C ≈ 6 N D, for the book's encoder–decoder."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import torch

from ..modern.scaling import layer_params, non_embedding_params, training_flops
from .harness import (
    Case,
    CheckResult,
    as_tensor,
    call,
    drawn,
    expect,
    references,
    run_cases,
)
from .registry import checker
from .zoo import COMMON, register

FLOPS_REFERENCES = references(training_flops, non_embedding_params, layer_params)

# (d_model, n_layers, d_ff, source tokens, target tokens)
CASES = [
    (512, 6, 2048, 25_000, 25_000),  # the paper's base model, one batch of its size
    (64, 1, 256, 300, 340),  # chapter 13's small toy model, one batch
    (128, 2, 512, 0, 1_000),  # target tokens only
    (32, 3, 64, 1_000, 0),  # source tokens only
]


@checker  # chapter 13's exercise 8: not graded in chapter 11
def check_training_flops(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(d_model, n_layers, d_ff, src_tokens, tgt_tokens)`` -> the FLOPs of
    training the book's post-LN encoder–decoder (``n_layers`` layers in each stack) on
    that many tokens: 6 · (N_encoder · src_tokens + N_decoder · tgt_tokens), N the
    parameters of a stack's layers (biases and LayerNorms included, no embeddings)."""
    cases = [
        Case(
            f"d_model={D}, n_layers={L}, d_ff={F}, {S:,} source + {T:,} target tokens",
            partial(_run, fn, D, L, F, S, T),
        )
        for D, L, F, S, T in drawn(CASES, _other_model, seed=90)
    ]
    return run_cases("check_training_flops", cases, quiet, FLOPS_REFERENCES)


def _other_model(rng: random.Random, row: tuple) -> tuple:
    """A model and a batch drawn anew (no source or no target tokens stays so)."""
    _, _, _, S, T = row
    D, L = 32 * rng.randint(1, 32), rng.randint(1, 8)
    S, T = (rng.randint(100, 30_000) if n else 0 for n in (S, T))
    return D, L, D * rng.choice([2, 4]), S, T


def _run(fn: Callable, D: int, L: int, F: int, S: int, T: int) -> None:
    expected = torch.tensor(training_flops(D, L, F, S, T), dtype=torch.float64)
    got = as_tensor(call(fn, D, L, F, S, T), "FLOPs").double()
    expect(
        "FLOPs",
        got,
        expected,
        atol=0.5,
        rtol=1e-6,
        shape_hint="return one number: the FLOPs of the whole run",
        diagnose=lambda g: _mistake(float(g), D, L, F, S, T),
    )


def _mistake(got: float, D: int, L: int, F: int, S: int, T: int) -> str | None:
    n_enc, n_dec = non_embedding_params(D, L, F)
    enc_only = L * layer_params(D, F, cross_attention=False)
    bare = L * (4 * D * D + 2 * D * F)  # weight matrices only
    variants = [
        (
            2 * (n_enc * S + n_dec * T),
            "that is the forward pass only: the backward pass costs about twice "
            "the forward, so training is 6 N D, not 2 N D",
        ),
        (
            6 * (n_enc + n_dec) * (S + T),
            "every token counted through both stacks: a source token passes through "
            "the encoder only, a target token through the decoder only",
        ),
        (
            6 * enc_only * (S + T),
            "the decoder layer is not an encoder layer: it has a second attention "
            "(cross-attention, with its four projections) and a third LayerNorm",
        ),
        (
            6 * (bare * S + (bare + L * 4 * D * D) * T),
            "count the biases of every linear layer and the LayerNorms' γ and β too "
            "(chapter 8's parameter count)",
        ),
        (
            6 * (n_enc * S + n_dec * T) / L,
            "that is one layer per stack: each stack has n_layers layers",
        ),
    ]
    for value, hint in variants:
        if value and abs(got - value) <= 1e-6 * abs(value):
            return hint
    return None


# --- the bug zoo: counting compute ------------------------------------------------


@register(
    name="FLOPs of the forward pass only",
    checker=check_training_flops,
    keyword="backward",
    chapter=13,
    origin=COMMON,
    description="2 N D: counts the forward pass and forgets the backward's 4 N D",
)
def training_flops_forward_only(d_model, n_layers, d_ff, src_tokens, tgt_tokens):
    """Counts 2 FLOPs per parameter and token: the forward pass only."""
    attn = 4 * (d_model * d_model + d_model)
    ffn = 2 * d_model * d_ff + d_ff + d_model
    n_enc = n_layers * (attn + ffn + 4 * d_model)
    n_dec = n_layers * (2 * attn + ffn + 6 * d_model)
    return 2 * (n_enc * src_tokens + n_dec * tgt_tokens)  # BUG: 6, with the backward


@register(
    name="FLOPs of every token through both stacks",
    checker=check_training_flops,
    keyword="encoder only",
    chapter=13,
    origin=COMMON,
    description="N = both stacks for every token: an encoder–decoder is not a stack of "
    "2 L layers that every token passes through",
)
def training_flops_both_stacks(d_model, n_layers, d_ff, src_tokens, tgt_tokens):
    """Sends every token, source and target, through the encoder and the decoder."""
    attn = 4 * (d_model * d_model + d_model)
    ffn = 2 * d_model * d_ff + d_ff + d_model
    n_enc = n_layers * (attn + ffn + 4 * d_model)
    n_dec = n_layers * (2 * attn + ffn + 6 * d_model)
    return 6 * (n_enc + n_dec) * (src_tokens + tgt_tokens)  # BUG: each through its own
