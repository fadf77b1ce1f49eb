"""Beam search on the shipped Tatoeba model: with and without the KV cache, and
against greedy decoding, side by side.

Three ways to translate the same sentences, taken chunk by chunk in turn (A B C,
B C A, ...) so the machine's load hits them alike: beam search one sentence at a time
without a cache (``beam_search(..., use_cache=False)``, the readable reference and
what ``translate_batch`` ran before), the batched beam search with the cache
(``translate_batch(..., beam=K)``) and batched greedy decoding
(``translate_batch(..., beam=1)``). The first two must give the same translations.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..decoding import beam_search
from ..tatoeba.checkpoint import load_tatoeba_checkpoint
from ..tatoeba.data import load_tatoeba, normalise
from ..tatoeba.translate import translate_batch


@dataclass
class DecodingBenchConfig:
    """What the decoding benchmark translates, and how."""

    split: str = "test"
    limit: int | None = None  # only the first N pairs (None: the whole split)
    beam: int = 4
    alpha: float = 0.6  # the paper's length penalty
    chunk: int = 128  # sentences per turn: translate_batch's batch at beam 4


def run_decoding(
    cfg: DecodingBenchConfig, print_fn: Callable[[str], None] = print
) -> dict[str, float]:
    """Seconds of each side over the split, the ratios, and whether the cached
    search gave the uncached one's translations; the last line is the speed-up."""
    model, tok, _ = load_tatoeba_checkpoint()
    pairs = load_tatoeba(cfg.split)[: cfg.limit]
    sentences = sorted((normalise(p.ja) for p in pairs), key=len)  # as translate_batch
    chunks = [sentences[i : i + cfg.chunk] for i in range(0, len(sentences), cfg.chunk)]
    K, a = cfg.beam, cfg.alpha

    def uncached(chunk: list[str]) -> list[str]:
        out = []
        for s in chunk:
            src = torch.tensor([tok.encode(s)])
            hyps = beam_search(model, src, K, alpha=a, max_len=src.size(1) + 50,
                               use_cache=False)  # fmt: skip
            out.append(tok.decode(hyps[0][0]))
        return out

    sides = {
        "uncached": uncached,
        "cached": lambda chunk: translate_batch(model, tok, chunk, K, a),
        "greedy": lambda chunk: translate_batch(model, tok, chunk, 1),
    }
    seconds = dict.fromkeys(sides, 0.0)
    outputs: dict[str, list[str]] = {name: [] for name in sides}
    print_fn(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; shipped "
        f"Tatoeba model; {cfg.split} split, {len(sentences)} sentences in "
        f"{len(chunks)} chunks; beam {K}, alpha {a}"
    )
    names = list(sides)
    for i, chunk in enumerate(chunks):  # rotate the order so drift hits all alike
        for name in names[i % 3 :] + names[: i % 3]:
            start = time.perf_counter()
            outputs[name] += sides[name](chunk)
            seconds[name] += time.perf_counter() - start
    same = sum(u == c for u, c in zip(outputs["uncached"], outputs["cached"],
                                      strict=True))  # fmt: skip
    u, c, g = seconds["uncached"], seconds["cached"], seconds["greedy"]
    print_fn(
        f"beam {K}, one sentence at a time, no cache: {u:.1f} s; batched with the "
        f"KV cache: {c:.1f} s; greedy, batched with the cache: {g:.1f} s"
    )
    print_fn(f"same translations, cached vs uncached: {same} of {len(sentences)}")
    print_fn(f"beam {K} / greedy time: {c / g:.2f}")
    print_fn(f"cached beam search speed-up over uncached: {u / c:.2f}")
    return {"uncached_s": u, "cached_s": c, "greedy_s": g, "speedup": u / c,
            "beam_over_greedy": c / g, "same": same, "n": len(sentences)}  # fmt: skip
