"""Chapter 2: the token embedding (lookup, × √d_model, zeros at padding)."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

from ..model.embeddings import TokenEmbedding
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

# the lookup is the exercise too: torch's embedding (F.embedding, torch.embedding,
# F.embedding_bag, …) by name; indexing weight[tokens] is the building block
EMBEDDING_REFERENCES = references(
    TokenEmbedding,
    (nn.Embedding, "torch.nn.Embedding"),
    (nn.EmbeddingBag, "torch.nn.EmbeddingBag"),
    torch_names=("embedding",),
)


@exercise("2", "embed", points=1)
def check_token_embedding(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(tokens, weight, pad_idx)`` -> (B, L, D): the rows of ``weight``
    (V, D) for each token, times sqrt(D), and exactly zero at padding positions."""
    cases = [
        _case(fn, [[5, 6, 7, 0], [8, 9, 0, 0]], V=12, D=16, pad=0, seed=20),
        _case(fn, [[4, 2, 2, 1, 3]], V=6, D=9, pad=0, seed=21),
        _case(fn, [[3, 0, 5], [3, 3, 4]], V=7, D=4, pad=3, seed=22),
    ]
    return run_cases("check_token_embedding", cases, quiet, EMBEDDING_REFERENCES)


def _case(fn: Callable, tokens: list[list[int]], V: int, D: int, pad: int, seed: int):
    label = f"{len(tokens)}×{len(tokens[0])} tokens, D={D}, pad={pad}"
    return Case(label, partial(_run, fn, torch.tensor(tokens), V, D, pad, seed))


def _run(fn: Callable, ids: Tensor, V: int, D: int, pad: int, seed: int) -> None:
    weight = randn(V, D, seed=seed)  # the PAD row is NOT zero on purpose
    ref = TokenEmbedding(V, D, pad_idx=pad)
    with torch.no_grad():
        ref.embedding.weight.copy_(weight)
        expected = ref(ids)
    got = call(fn, ids.clone(), weight.clone(), pad)
    expect(
        "embeddings",
        got,
        expected,
        diagnose=lambda g: _mistake(g, weight[ids], ids == pad, D),
    )


def _mistake(got: Tensor, raw: Tensor, is_pad: Tensor, D: int) -> str | None:
    """Recognise unzeroed padding and a wrong scale from the looked-up rows ``raw``."""
    is_pad = is_pad[..., None]  # (B, L, 1)
    if not torch.allclose(got.masked_select(is_pad), torch.zeros(())):
        if close(got, raw * math.sqrt(D), 1e-4, 1e-4):
            return (
                "padding positions must come out as zeros: the weight's PAD row is "
                "not guaranteed to be zero (weight tying, init): zero them with "
                "masked_fill(tokens == pad_idx, 0)"
            )
    scale_hints = [
        ("not scaled: multiply the looked-up rows by √d_model", 1.0),
        ("divided by √d_model; multiply instead", 1 / math.sqrt(D)),
        ("scaled by d_model; the factor is √d_model", float(D)),
    ]
    for hint, factor in scale_hints:
        if close(got, (raw * factor).masked_fill(is_pad, 0), 1e-4, 1e-4):
            return hint
    return None
