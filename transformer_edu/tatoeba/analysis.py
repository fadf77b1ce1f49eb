"""What the Tatoeba model gets wrong, measured: the words it spells that its training
English never had, its scores by the length of the source, the leak a split can hide,
and where its cross-attention looks.

The real model does not retrain when the book builds, so its outputs and scores are
records that ship beside it (``weights/*.json``, written by the scripts each record
names); ``read_record`` reads one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from importlib import resources

import torch
from torch import Tensor

from ..model.transformer import Transformer
from .data import MAX_JA_CHARS, SubwordTokenizer

# a word: letters (any script), with apostrophes inside ("don't", "Tom's")
WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")
# Japanese sentence lengths in characters, shortest group first (all sentences fit one)
LENGTH_BUCKETS = ((1, 6), (7, 10), (11, 14), (15, 18), (19, 22), (23, MAX_JA_CHARS))


def english_words(text: str) -> list[str]:
    """The words of ``text``, lower-cased: "Tom's cat." -> ["tom's", "cat"]."""
    return WORD.findall(text.lower())


def vocabulary(texts: Iterable[str]) -> set[str]:
    """Every word (``english_words``) of ``texts``."""
    return {w for t in texts for w in english_words(t)}


def unseen_words(text: str, known: set[str]) -> list[str]:
    """The words of ``text`` that ``known`` lacks, each once, in order."""
    return list(dict.fromkeys(w for w in english_words(text) if w not in known))


def length_bucket(ja: str) -> int:
    """Which of ``LENGTH_BUCKETS`` a Japanese sentence's length falls in."""
    for i, (lo, hi) in enumerate(LENGTH_BUCKETS):
        if lo <= len(ja) <= hi:
            return i
    raise ValueError(f"{len(ja)} characters: outside 1-{MAX_JA_CHARS}")


def decoding_name(beam: int, alpha: float) -> str:
    """How records and prints name a decoding: "greedy" or "beam 4, α 0.6"."""
    return "greedy" if beam == 1 else f"beam {beam}, α {alpha:g}"


def narrowest_within_noise(rivals: Sequence[dict], noise_p: float) -> dict:
    """The second step of the rule that chose the default decoding on dev
    (scripts/sweep_tatoeba_decoding.py): of each beam's best setting, narrowest beam
    first, each with its paired test's p-value against the best dev BLEU, the first
    that the test cannot tell from the best (p >= ``noise_p``)."""
    return next(r for r in rivals if r["p_value_against_best"] >= noise_p)


def read_record(name: str) -> dict:
    """A record that ships in ``transformer_edu/tatoeba/weights/`` (JSON), e.g.
    ``read_record("tatoeba_ja_en.scores.json")``."""
    path = resources.files("transformer_edu").joinpath("tatoeba", "weights", name)
    return json.loads(path.read_text(encoding="utf-8"))


# --- cross-attention ------------------------------------------------------------------


@torch.no_grad()
def cross_attention(
    model: Transformer, tok: SubwordTokenizer, ja: str, en_ids: Sequence[int]
) -> Tensor:
    """Every decoder layer's and head's cross-attention while the model reads ``ja``
    and is fed ``en_ids`` (BOS first; its own output, say), one forward pass.

    Shape: -> (L, H, T, S): T = len(en_ids) + 1 target positions (the one after the
    last predicts EOS), S = the source's pieces.
    """
    device = next(model.parameters()).device
    src = torch.tensor([tok.encode(ja)], device=device)
    tgt = torch.tensor([[tok.BOS, *en_ids]], device=device)
    layers = model.decoder.layers
    was = model.training
    model.eval()
    for layer in layers:
        layer.cross_attn.record_weights = True
    try:
        model(src, tgt)
        return torch.stack([layer.cross_attn.attn_weights[0] for layer in layers])
    finally:
        for layer in layers:
            layer.cross_attn.record_weights = False
            layer.cross_attn.attn_weights = None
        model.train(was)


def attention_entropy(weights: Tensor) -> Tensor:
    """The entropy (nats) of each attention distribution over the keys: 0 when one
    key takes all the weight, ln S when all S keys share it equally.

    Shape: weights (..., S), rows summing to 1 -> (...).
    """
    w = weights.clamp_min(0)
    return -(w * torch.log(w.clamp_min(1e-30))).sum(-1)


def head_entropies(
    model: Transformer, tok: SubwordTokenizer, sources: Sequence[str],
    outputs: Sequence[Sequence[int]],
) -> tuple[Tensor, float]:  # fmt: skip
    """Each decoder layer's and head's cross-attention entropy, averaged over every
    target position of every (source, output ids) pair; and the mean entropy of a
    uniform distribution over the same sources (ln S per position), to compare.

    Shape: -> (L, H), float.
    """
    total, uniform, count = None, 0.0, 0
    for ja, ids in zip(sources, outputs, strict=True):
        att = cross_attention(model, tok, ja, ids)  # (L, H, T, S)
        ent = attention_entropy(att.float()).sum(-1)  # (L, H)
        total = ent if total is None else total + ent
        T, S = att.shape[-2:]
        uniform += T * math.log(S)
        count += T
    if not count:
        raise ValueError("no sentences")
    return total / count, uniform / count
