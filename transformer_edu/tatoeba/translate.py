"""Translating Japanese with a trained Tatoeba model, and scoring its translations.

``translate_batch`` turns sentences into English (greedy or beam search, batched by
length), ``translate_texts`` takes texts of any length (split into sentences by
``data.plan_text``), ``evaluate`` scores BLEU and chrF against the references. The
command line's ``translate`` and ``evaluate``, chapter 12's translator and the
training loop's dev scores all come through here."""

from __future__ import annotations

import torch

from ..decoding import beam_search_batch, greedy_decode
from ..metrics import Score, bleu, chrf
from ..model.transformer import Transformer
from ..toy.data import pad_rows
from .data import SubwordTokenizer, TatoebaPair, normalise, plan_text

# The decoding chosen on the dev split (scripts/sweep_tatoeba_decoding.py; its record,
# weights/tatoeba_ja_en.sweep.json, names the same, a test checks): the default of the
# command line's translate and evaluate, and of chapter 12's translator.
DEFAULT_BEAM = 8  # chosen on dev (scripts/sweep_tatoeba_decoding.py); 1: greedy
DEFAULT_ALPHA = 1.25  # the length penalty, when DEFAULT_BEAM > 1 (chosen on dev)


def translate_texts(
    model: Transformer,
    tok: SubwordTokenizer,
    texts: list[str],
    beam: int = 1,
    alpha: float = 0.6,
) -> list[tuple[str | None, str | None]]:
    """Texts of any length, their sentences translated in one batch (``plan_text``):
    ``(english, None)`` for each text, or ``(None, why)`` for a text with a sentence
    the model cannot take (or an empty one)."""
    plans: list[list[dict] | str] = []
    for text in texts:
        try:
            plan = plan_text(text)
        except ValueError as e:
            plans.append(str(e))
            continue
        bad = [p["error"] for p in plan if p["error"]]
        plans.append(bad[0] if bad else plan)
    todo = [p["source"] for plan in plans if isinstance(plan, list) for p in plan
            if p["translate"]]  # fmt: skip
    english = iter(translate_batch(model, tok, todo, beam, alpha))
    out: list[tuple[str | None, str | None]] = []
    for plan in plans:
        if isinstance(plan, str):
            out.append((None, plan))
            continue
        words = [next(english) if p["translate"] else p["source"] for p in plan]
        out.append((" ".join(words), None))
    return out


@torch.no_grad()
def translate_batch(
    model: Transformer,
    tok: SubwordTokenizer,
    sentences: list[str],
    beam: int = 1,
    alpha: float = 0.6,
    batch_size: int = 128,
    beam_rows: int = 512,
) -> list[str]:
    """English for each Japanese sentence: greedy (``beam=1``) or beam search with the
    paper's length penalty ``alpha``; at most source length + 50 tokens. Sentences
    are batched by length: ``batch_size`` of them, or with a beam as many as make
    ``beam_rows`` prefixes (``decoding.beam_search_batch``, the KV-cache fast path)."""
    device = next(model.parameters()).device
    sentences = [normalise(s) for s in sentences]
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    size = batch_size if beam == 1 else max(1, min(batch_size, beam_rows // beam))
    texts: dict[int, str] = {}
    for i in range(0, len(order), size):
        chunk = order[i : i + size]
        ids = tok.encode_batch([sentences[j] for j in chunk])
        src = pad_rows(ids)  # (B, S)
        if beam > 1:
            hyps = beam_search_batch(model, src.to(device), beam, alpha=alpha,
                                     max_len=[len(row) + 50 for row in ids])  # fmt: skip
            outputs = [h[0][0] for h in hyps]
        else:
            decoded = greedy_decode(model, src.to(device), max_len=src.size(1) + 50)
            outputs = decoded.tokens
        for j, row in zip(chunk, outputs, strict=True):
            texts[j] = tok.decode(row)
    return [texts[i] for i in range(len(sentences))]


def evaluate(
    model: Transformer,
    tok: SubwordTokenizer,
    pairs: list[TatoebaPair],
    beam: int = 1,
    alpha: float = 0.6,
) -> tuple[Score, Score, list[str]]:
    """BLEU and chrF of the model's translations of ``pairs`` against their English."""
    hyps = translate_batch(model, tok, [p.ja for p in pairs], beam, alpha)
    refs = [p.en for p in pairs]
    return bleu(hyps, refs), chrf(hyps, refs), hyps
