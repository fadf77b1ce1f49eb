"""Turning a trained model into translations: greedy (with a step trace), beam search,
and incremental decoding with a key/value cache; and the distribution a sampler draws
from (temperature, top-k, top-p)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .data import Vocab, detokenize_en, segment
from .model import Transformer


@dataclass
class Step:
    """One greedy step: the prefix the decoder was given and what it predicted next."""

    prefix: list[int]  # target ids fed to the decoder (starts with BOS)
    top_ids: list[int]  # the k most probable next tokens, best first
    top_probs: list[float]  # their probabilities
    chosen: int  # the token greedy decoding appends (top_ids[0])
    cross_attention: (
        Tensor  # (L, H, S): each layer's and head's weights over the source
    )


@dataclass
class Decoded:
    """Output ids per sentence (without BOS, up to and including EOS) and their score."""

    tokens: list[list[int]]
    log_probs: list[float]  # sum of log p(token) over the output, EOS included
    steps: list[Step] = field(default_factory=list)  # only with trace=True


def _next_log_probs(
    model: Transformer, ys: Tensor, memory: Tensor, src_mask: Tensor,
    cache: list[dict] | None,
) -> Tensor:  # fmt: skip
    """log p(next token | prefix ys (B, t)) -> (B, V); with a cache only ys[:, -1] is new."""
    if cache is None:
        out = model.decode(ys, memory, src_mask)  # (B, t, D): the whole prefix again
    else:
        offset = ys.size(1) - 1
        out = model.decode(ys[:, -1:], memory, src_mask, cache, offset)  # (B, 1, D)
    return model.generator(out[:, -1]).log_softmax(dim=-1)  # (B, V)


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: Tensor,
    bos_id: int = Vocab.BOS,
    eos_id: int = Vocab.EOS,
    pad_id: int = Vocab.PAD,
    max_len: int = 50,
    use_cache: bool = True,
    trace: bool = False,
    top_k: int = 5,
    stop_at_eos: bool = True,
) -> Decoded:
    """Append the most probable token until EOS (or ``max_len`` tokens).

    ``trace=True`` (one sentence only) records each step's prefix, top-k next tokens
    and cross-attention. ``use_cache`` reuses past keys/values instead of recomputing
    the whole prefix each step; the result is the same.

    Shape: src (B, S) token ids.
    """
    if trace and src.size(0) != 1:
        raise ValueError(
            f"trace=True decodes one sentence, got a batch of {src.size(0)}"
        )
    was_training, was_recording = model.training, model.recording_attention
    model.eval()
    if trace:
        model.record_attention(True)
    try:
        memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
        B = src.size(0)
        ys = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        cache = model.decoder.new_cache() if use_cache else None
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        score = torch.zeros(B, device=src.device)
        steps: list[Step] = []
        for _ in range(max_len):
            logp = _next_log_probs(model, ys, memory, src_mask, cache)  # (B, V)
            best = logp.argmax(dim=-1)  # (B,)
            if trace:
                probs, ids = logp[0].exp().topk(min(top_k, logp.size(-1)))
                cross = torch.stack(
                    [w[0, :, -1] for w in model.attention_weights()["cross"]]
                )  # (L, H, S) for the newest position
                steps.append(Step(ys[0].tolist(), ids.tolist(), probs.tolist(),
                                  int(best[0]), cross))  # fmt: skip
            score += torch.where(done, 0.0, logp.gather(1, best[:, None])[:, 0])
            # rows that already finished emit PAD (as Seq2Seq.greedy_decode does); the
            # loop stops once every row has produced EOS
            best = best.masked_fill(done, pad_id)
            ys = torch.cat([ys, best[:, None]], dim=1)  # (B, t + 1)
            done |= best == eos_id
            if stop_at_eos and bool(done.all()):
                break
    finally:
        model.train(was_training)
        if trace:
            model.record_attention(was_recording)
    tokens = [_until_eos(row, eos_id) for row in ys[:, 1:].tolist()]
    return Decoded(tokens, score.tolist(), steps)


def _until_eos(ids: list[int], eos_id: int) -> list[int]:
    return ids[: ids.index(eos_id) + 1] if eos_id in ids else ids


def length_penalty(length: int, alpha: float) -> float:
    """Wu et al. (2016)'s length penalty, used by the paper with α = 0.6:
    lp(Y) = ((5 + |Y|) / 6) ** α. Beam search ranks log P(Y) / lp(Y), so a longer
    output is not beaten just for having more (negative) terms. α = 0: lp = 1."""
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    beam_size: int = 4,
    bos_id: int = Vocab.BOS,
    eos_id: int = Vocab.EOS,
    max_len: int = 50,
    alpha: float = 0.0,
) -> list[tuple[list[int], float]]:
    """Keep the ``beam_size`` most probable prefixes at each step (one sentence).

    Returns finished hypotheses (ids without BOS, EOS included) with their score, best
    first. The score is the summed log-probability divided by the length penalty
    ``length_penalty(len, alpha)`` (the paper's α = 0.6; 0 = none). Without a penalty
    the search stops once no live prefix can beat the best finished one (log-probs
    only fall as a sequence grows); with one, once ``beam_size`` hypotheses finished.

    Shape: src (1, S) token ids.
    """
    if src.size(0) != 1:
        raise ValueError(
            f"beam_search decodes one sentence, got a batch of {src.size(0)}"
        )
    if beam_size < 1:
        raise ValueError(f"beam_size={beam_size} must be at least 1")
    was_training = model.training
    model.eval()
    try:
        memory, src_mask = model.encode(src)
        ys = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (K, t)
        scores = torch.zeros(1, device=src.device)  # (K,)
        finished: list[tuple[list[int], float]] = []
        for _ in range(max_len):
            K = ys.size(0)
            logp = _next_log_probs(
                model,
                ys,
                memory.expand(K, -1, -1),
                src_mask.expand(K, -1, -1, -1),
                None,
            )  # (K, V)
            total = (scores[:, None] + logp).flatten()  # (K * V,)
            top, idx = total.topk(min(beam_size, total.numel()))
            rows, toks = idx // logp.size(1), idx % logp.size(1)
            keep = []
            for s, r, t in zip(top.tolist(), rows.tolist(), toks.tolist(), strict=True):
                if t == eos_id:
                    hyp = ys[r, 1:].tolist() + [t]
                    finished.append((hyp, s / length_penalty(len(hyp), alpha)))
                else:
                    keep.append((r, t, s))
            if alpha == 0:
                best_done = max((s for _, s in finished), default=float("-inf"))
                keep = [k for k in keep if k[2] > best_done]
            elif len(finished) >= beam_size:
                break
            if not keep:
                break
            r_idx = torch.tensor([k[0] for k in keep], device=src.device)
            t_idx = torch.tensor([[k[1]] for k in keep], device=src.device)
            ys = torch.cat([ys[r_idx], t_idx], dim=1)
            scores = torch.tensor([k[2] for k in keep], device=src.device)
        else:
            finished += [
                (y[1:], s / length_penalty(len(y) - 1, alpha))
                for y, s in zip(ys.tolist(), scores.tolist(), strict=True)
            ]
    finally:
        model.train(was_training)
    return sorted(finished, key=lambda h: -h[1])


@torch.no_grad()
def next_token_probs(
    logits: Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> Tensor:
    """The distribution a sample is drawn from: softmax(logits / τ), keeping only the
    ``top_k`` largest logits (0: all) and the most probable tokens whose mass first
    reaches ``top_p`` (1: all) — Fan et al. (2018), Holtzman et al. (2020).

    Shape: logits (n, V) -> probabilities (n, V).
    """
    if temperature <= 0:
        raise ValueError(f"temperature={temperature} must be positive (0 is argmax)")
    z = logits / temperature  # τ < 1 sharpens, τ > 1 flattens
    if top_k:  # keep the k largest logits
        kth = z.topk(min(top_k, z.size(-1)), dim=-1).values[:, -1:]  # (n, 1)
        z = z.masked_fill(z < kth, -math.inf)
    if top_p < 1.0:  # keep the most probable tokens until their mass reaches p
        p, order = z.softmax(-1).sort(dim=-1, descending=True)  # (n, V) each
        outside = p.cumsum(-1) - p >= top_p  # the tokens before already reach p
        drop = torch.zeros_like(outside).scatter(-1, order, outside)  # (n, V)
        z = z.masked_fill(drop, -math.inf)
    return z.softmax(-1)


@dataclass
class Translation:
    """A translated sentence and what was learned on the way."""

    text: str  # the English output, detokenized
    tokens: list[str]  # Japanese tokens the model read
    unknown: list[str]  # Japanese words not in the vocabulary (read as UNK)
    log_prob: float
    steps: list[Step] = field(default_factory=list)


def translate(
    model: Transformer,
    sentence: str,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    beam: int = 1,
    trace: bool = False,
    max_len: int = 40,
) -> Translation:
    """Segment, encode, decode and detokenize one Japanese sentence.

    Raises ValueError for an empty sentence, one made only of unknown words, or one
    longer than the model's positional encoding allows.
    """
    tokens = segment(sentence, lexicon=src_vocab.itos)
    if not tokens:
        raise ValueError("the sentence is empty")
    unknown = src_vocab.unknown(tokens)
    if all(t not in src_vocab for t in tokens):
        raise ValueError(f"every word is unknown to the model: {' '.join(unknown)}")
    limit = model.config.max_len
    if model.config.positional != "none" and len(tokens) > limit:
        raise ValueError(
            f"the sentence has {len(tokens)} tokens, more than the model's max_len={limit}"
        )
    device = next(model.parameters()).device
    src = torch.tensor([src_vocab.encode(tokens)], device=device)
    if beam > 1:
        ids, log_prob = beam_search(model, src, beam, max_len=max_len)[0]
        steps: list[Step] = []
    else:
        out = greedy_decode(model, src, max_len=max_len, trace=trace)
        ids, log_prob, steps = out.tokens[0], out.log_probs[0], out.steps
    text = detokenize_en(tgt_vocab.decode(ids))
    return Translation(text, tokens, unknown, log_prob, steps)
