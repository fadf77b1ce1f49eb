"""Short, controlled training runs (chapter 13): models that differ in one thing,
trained by one recipe on the same batches for the same number of steps, and measured
on the same held-out pairs (loss, exact match, and what a translation costs).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from ..decoding import greedy_decode
from ..toy.data import Pair, Vocab, batches, build_vocabs, load_corpus, make_batch
from ..toy.training import (
    cooldown_factor,
    exact_match,
    noam_lr,
    paper_adam,
    sequence_loss,
)

# the small toy encoder–decoder that the comparisons start from (1 + 1 layers)
SMALL_MODEL = dict(
    n_layers=1, d_model=64, n_heads=4, d_ff=256, dropout=0.0, max_len=64,
    tie_generator=True,
)  # fmt: skip


@dataclass(frozen=True)
class Recipe:
    """How every compared model trains: the toy recipe of chapter 9, in fewer steps."""

    steps: int = 240  # optimizer steps, the same for every model
    batch_size: int = 32  # sentence pairs per step
    lr_factor: float = 0.5  # multiplies the paper's warm-up schedule
    warmup: int = 60  # steps of linear warm-up
    cooldown: float = 0.3  # last fraction of the steps: lr falls linearly to 5 %
    label_smoothing: float = 0.1
    clip_grad_norm: float = 1.0


@dataclass
class Result:
    """One trained model, measured on the held-out pairs."""

    steps: int
    src_tokens: int  # real source tokens in the training batches
    tgt_tokens: int  # real target tokens (the loss is over these)
    seconds: float  # training wall-clock time on this machine
    loss: float  # held-out cross-entropy per target token (nats), teacher-forced
    exact: float  # held-out greedy exact match


@cache
def toy_data() -> tuple[list[Pair], list[Pair], Vocab, Vocab]:
    """The toy corpus: training pairs, held-out pairs, source and target vocabularies."""
    train_pairs, test_pairs = load_corpus("train"), load_corpus("test")
    return train_pairs, test_pairs, *build_vocabs(train_pairs)


def train_steps(
    model: nn.Module, recipe: Recipe, seed: int = 0
) -> tuple[int, int, float]:
    """Train on the toy corpus for ``recipe.steps`` steps; the batches depend on the
    seed only, not on the model. Returns (source tokens, target tokens, seconds)."""
    train_pairs, _, sv, tv = toy_data()
    opt = paper_adam(model.parameters())
    d_model, total = model.config.d_model, recipe.steps

    def rate(s: int) -> float:  # the paper's warm-up, then a cool-down (chapter 9)
        lr = noam_lr(s + 1, d_model, recipe.warmup, recipe.lr_factor)
        return lr * cooldown_factor(s + 1, total, recipe.cooldown)

    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    model.train()
    step = n_src = n_tgt = 0
    start = time.perf_counter()
    epoch = 0
    while step < total:
        epoch += 1
        for b in batches(train_pairs, sv, tv, recipe.batch_size,
                         seed=seed * 100_003 + epoch, sort_by_length=True):  # fmt: skip
            loss = sequence_loss(
                model(b.src, b.tgt_in), b.tgt_out, recipe.label_smoothing
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), recipe.clip_grad_norm)
            opt.step()
            sched.step()
            n_src += int((b.src != Vocab.PAD).sum())
            n_tgt += b.ntokens
            step += 1
            if step == total:
                break
    model.eval()
    return n_src, n_tgt, time.perf_counter() - start


@torch.no_grad()
def heldout_loss(model: nn.Module, pairs: Sequence[Pair] | None = None) -> float:
    """Mean cross-entropy per target token (EOS included, no smoothing), teacher-forced."""
    _, test_pairs, sv, tv = toy_data()
    b = make_batch(list(pairs or test_pairs), sv, tv)
    logits = model(b.src, b.tgt_in)  # (N, T, V)
    return F.cross_entropy(
        logits.flatten(0, 1), b.tgt_out.flatten(), ignore_index=Vocab.PAD
    ).item()


def run(model: nn.Module, recipe: Recipe | None = None, seed: int = 0) -> Result:
    """Train ``model`` by the recipe, then measure it on the held-out pairs."""
    recipe = recipe or Recipe()
    _, test_pairs, sv, tv = toy_data()
    n_src, n_tgt, seconds = train_steps(model, recipe, seed)
    exact = exact_match(model, test_pairs, sv, tv)
    return Result(recipe.steps, n_src, n_tgt, seconds, heldout_loss(model), exact)


@dataclass
class Cost:
    """What translating one sentence costs, greedy with a KV cache."""

    flops: float  # floating-point operations of the matrix products, per sentence
    seconds: float  # wall-clock time per sentence, in batches, on this machine
    cache_floats: float  # numbers held in the KV cache at the end, per sentence


@contextmanager
def written_out_attention(model: nn.Module) -> Iterator[None]:
    """Every attention of ``model`` on its written-out path for a while: FLOPs are
    counted on it (PyTorch's fused kernel on the CPU escapes the FLOP counter)."""
    attentions = [m for m in model.modules() if hasattr(m, "record_weights")]
    fast = [m.fast for m in attentions]
    for m in attentions:
        m.fast = False
    try:
        yield
    finally:
        for m, f in zip(attentions, fast, strict=True):
            m.fast = f


@torch.no_grad()
def decoding_cost(model: nn.Module, n_sentences: int = 8) -> Cost:
    """Greedy-translate held-out sentences: the FLOPs one sentence at a time (no
    padding), the time and the final KV cache for the whole held-out split at once."""
    _, test_pairs, sv, tv = toy_data()
    with written_out_attention(model), FlopCounterMode(display=False) as counter:
        for p in test_pairs[:n_sentences]:
            src = make_batch([p], sv, tv).src  # (1, S)
            greedy_decode(model, src, max_len=len(p.tgt) + 5)
    caches: list[list[dict]] = []  # the cache greedy_decode makes, kept to measure
    new_cache = model.decoder.new_cache

    def kept_cache() -> list[dict]:
        caches.append(new_cache())
        return caches[-1]

    model.decoder.new_cache = kept_cache
    src = make_batch(test_pairs, sv, tv).src  # (N, S)
    try:
        start = time.perf_counter()
        greedy_decode(model, src, max_len=max(len(p.tgt) for p in test_pairs) + 5)
        seconds = time.perf_counter() - start
    finally:
        del model.decoder.new_cache  # the method again
    floats = sum(t.numel() for layer in caches[-1] for kv in layer.values() for t in kv)
    n = len(test_pairs)
    return Cost(counter.get_total_flops() / n_sentences, seconds / n, floats / n)


def step_flops(model: nn.Module, batch_size: int = 32) -> float:
    """FLOPs of one training step's forward and backward pass (the matrix products)
    on the first ``batch_size`` training pairs."""
    train_pairs, _, sv, tv = toy_data()
    b = make_batch(train_pairs[:batch_size], sv, tv)
    with written_out_attention(model), FlopCounterMode(display=False) as counter:
        sequence_loss(model(b.src, b.tgt_in), b.tgt_out).backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())
