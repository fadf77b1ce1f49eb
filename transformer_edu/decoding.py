"""Turning a trained model into translations: greedy (with a step trace), beam search,
and incremental decoding with a key/value cache; and the distribution a sampler draws
from (temperature, top-k, top-p)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from .devices import wide_float
from .model.transformer import Transformer
from .toy.data import Vocab, detokenize_en, segment


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


def reorder_cache(cache: list[dict], order: Tensor, memory: bool = True) -> list[dict]:
    """Row ``i`` of every cached key/value becomes row ``order[i]``: after a beam step,
    the surviving prefixes' parents (fairseq's ``reorder_incremental_state``). In place.

    ``memory=False`` leaves the cross-attention keys/values alone: right when rows only
    move within a sentence, whose rows of the memory are all equal.
    """
    for layer in cache:
        for name, (k, v) in layer.items():
            if memory or name != "memory_kv":
                layer[name] = (k.index_select(0, order), v.index_select(0, order))
    return cache


@torch.no_grad()
def beam_search(
    model: Transformer,
    src: Tensor,
    beam_size: int = 4,
    bos_id: int = Vocab.BOS,
    eos_id: int = Vocab.EOS,
    max_len: int = 50,
    alpha: float = 0.0,
    use_cache: bool = True,
) -> list[tuple[list[int], float]]:
    """Keep the ``beam_size`` (K) most probable prefixes at each step (one sentence).

    Returns finished hypotheses (ids without BOS, EOS included) with their score, best
    first. The score is the summed log-probability divided by the length penalty
    ``length_penalty(len, alpha)`` (the paper's α = 0.6; 0 = none).

    Each step ranks the 2K best extensions of the live prefixes (as tensor2tensor and
    fairseq do): those among the first K that end in EOS finish, and the first K that do
    not stay live, so the beam stays K wide. A live prefix is dropped once it cannot
    beat the best finished hypothesis any more: its log-probability only falls and its
    penalty grows at most to ``length_penalty(max_len, alpha)``. The search stops when
    no prefix is live, or after ``max_len`` tokens (the live prefixes then count as
    finished). ``use_cache`` reuses past keys/values, reordered by the surviving
    parents at every step (``reorder_cache``); the result is the same.

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
        cache = model.decoder.new_cache() if use_cache else None
        ys = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (k, t)
        scores = torch.zeros(1, device=src.device)  # (k,) summed log-probabilities
        finished: list[tuple[list[int], float]] = []
        best_done = float("-inf")
        lp_max = length_penalty(max_len, alpha)  # the largest penalty an output gets
        for _ in range(max_len):
            k = ys.size(0)
            logp = _next_log_probs(
                model,
                ys,
                memory.expand(k, -1, -1),
                src_mask.expand(k, -1, -1, -1),
                cache,
            )  # (k, V)
            total = (scores[:, None] + logp).flatten()  # (k * V,)
            top, idx = total.topk(min(2 * beam_size, total.numel()))
            rows, toks = idx // logp.size(1), idx % logp.size(1)
            keep = []
            for i, (s, r, t) in enumerate(
                zip(top.tolist(), rows.tolist(), toks.tolist(), strict=True)
            ):
                if t == eos_id and i < beam_size:  # finished, if it made the top K
                    hyp = ys[r, 1:].tolist() + [t]
                    finished.append((hyp, s / length_penalty(len(hyp), alpha)))
                    best_done = max(best_done, finished[-1][1])
                elif t != eos_id and len(keep) < beam_size:
                    keep.append((r, t, s))
            # a live prefix whose best possible final score cannot win is dropped
            keep = [c for c in keep if c[2] / lp_max > best_done]
            if not keep:
                break
            r_idx = torch.tensor([c[0] for c in keep], device=src.device)
            t_idx = torch.tensor([[c[1]] for c in keep], device=src.device)
            ys = torch.cat([ys[r_idx], t_idx], dim=1)  # each survivor: parent + token
            scores = torch.tensor([c[2] for c in keep], device=src.device)
            if cache is not None:
                reorder_cache(cache, r_idx)  # the keys/values of each one's parent
        else:
            finished += [
                (y[1:], s / length_penalty(len(y) - 1, alpha))
                for y, s in zip(ys.tolist(), scores.tolist(), strict=True)
            ]
    finally:
        model.train(was_training)
    return sorted(finished, key=lambda h: -h[1])


@torch.no_grad()
def beam_search_batch(
    model: Transformer,
    src: Tensor,
    beam_size: int = 4,
    bos_id: int = Vocab.BOS,
    eos_id: int = Vocab.EOS,
    max_len: int | list[int] = 50,
    alpha: float = 0.0,
) -> list[list[tuple[list[int], float]]]:
    """``beam_search`` of every sentence of a batch at once, with the KV cache: the
    fast path (the same rules, the same hypotheses; the tests compare them).

    Each sentence has K rows; a row that is not live scores -inf. The memory's keys
    and values are projected once per sentence; the self-attention cache follows the
    surviving parents; a sentence whose search has stopped leaves the batch.
    ``max_len``: one limit for all, or one per sentence.

    Shape: src (B, S) token ids, padded with PAD -> B lists of hypotheses, best first.
    """
    B, K = src.size(0), beam_size
    limits = [max_len] * B if isinstance(max_len, int) else list(max_len)
    if len(limits) != B:
        raise ValueError(f"max_len has {len(limits)} limits for {B} sentences")
    if K < 1:
        raise ValueError(f"beam_size={beam_size} must be at least 1")
    dev, inf = src.device, float("inf")
    was_training = model.training
    model.eval()
    try:
        memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
        rows = torch.arange(B, device=dev).repeat_interleave(K)  # (B*K,)
        # the cross-attention keys/values, projected once per sentence, K rows each
        cache = reorder_cache(model.decoder.new_cache(memory), rows)
        src_mask = src_mask[rows]  # (B*K, 1, 1, S)
        ys = torch.full((B * K, 1), bos_id, dtype=torch.long, device=dev)  # (n*K, t)
        scores = torch.full((B, K), -inf, device=dev)  # (n, K) summed log-probs
        scores[:, 0] = 0.0  # one live prefix per sentence at first: BOS
        wide = wide_float(dev)  # float64 (float32 on MPS, which has none)
        best_done = torch.full((B,), -inf, dtype=wide, device=dev)
        lp_max = torch.tensor([length_penalty(m, alpha) for m in limits],
                              dtype=wide, device=dev)  # fmt: skip
        which = list(range(B))  # the input sentence of each block of K rows
        finished: list[list[tuple[list[int], float]]] = [[] for _ in range(B)]
        cand = torch.arange(2 * K, device=dev)  # (2K,)
        for step in range(1, max(limits) + 1):
            n = len(which)
            logp = _next_log_probs(model, ys, None, src_mask, cache)  # (n*K, V)
            V = logp.size(1)
            total = (scores.view(-1, 1) + logp).view(n, K * V)
            top, idx = total.topk(2 * K, dim=1)  # (n, 2K), best first
            parent = idx // V + torch.arange(n, device=dev)[:, None] * K  # rows
            toks = idx % V
            ended, valid = toks == eos_id, top > -inf
            # 1) candidates among the first K that end in EOS finish
            for b, c in (ended & valid)[:, :K].nonzero().tolist():
                hyp = ys[parent[b, c], 1:].tolist() + [eos_id]
                s = float(top[b, c]) / length_penalty(len(hyp), alpha)
                finished[which[b]].append((hyp, s))
                best_done[b] = max(float(best_done[b]), s)
            # 2) the first K that do not end in EOS stay live, in candidate order
            pos = (cand + (ended | ~valid) * 2 * K).topk(K, dim=1, largest=False)[1]
            s_live = top.gather(1, pos)  # (n, K)
            keep = (~ended & valid).gather(1, pos)
            # 3) dropped once they cannot beat the best finished hypothesis
            keep &= s_live.to(wide) / lp_max[:, None] > best_done[:, None]
            scores = s_live.masked_fill(~keep, -inf)
            order = parent.gather(1, pos)  # (n, K) the parent row of each survivor
            ys = torch.cat([ys[order.flatten()], toks.gather(1, pos).view(-1, 1)], 1)
            # 4) a sentence stops with no live prefix, or at its length limit
            live = keep.any(dim=1).tolist()
            stay = [b for b in range(n) if live[b] and limits[which[b]] > step]
            for b in range(n):
                if live[b] and limits[which[b]] == step:
                    for k in keep[b].nonzero()[:, 0].tolist():
                        y = ys[b * K + k, 1:].tolist()
                        s = float(scores[b, k]) / length_penalty(len(y), alpha)
                        finished[which[b]].append((y, s))
            if not stay:
                break
            if len(stay) < n:  # finished sentences leave the batch
                kept = torch.tensor(stay, device=dev)
                rows = (kept[:, None] * K + torch.arange(K, device=dev)).flatten()
                order = order[kept]
                ys, src_mask = ys[rows], src_mask[rows]
                scores, best_done, lp_max = scores[kept], best_done[kept], lp_max[kept]
                which = [which[b] for b in stay]
                reorder_cache(cache, order.flatten())
            else:  # rows moved only within their sentence: the memory's K/V stay
                reorder_cache(cache, order.flatten(), memory=False)
    finally:
        model.train(was_training)
    return [sorted(f, key=lambda h: -h[1]) for f in finished]


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
