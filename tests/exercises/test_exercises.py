"""The classroom checkers: they pass correct code, catch every bug in the zoo with the
right hint, and report (never raise) what goes wrong inside a learner's code."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_edu import (
    DecoderLayer,
    EncoderLayer,
    LayerNorm,
    MultiHeadAttention,
    PositionwiseFeedForward,
    causal_mask,
    exercises,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_table,
    target_mask,
)
from transformer_edu.decoding import (
    _next_log_probs,
    beam_search,
    greedy_decode,
    length_penalty,
    next_token_probs,
    reorder_cache,
)
from transformer_edu.exercises import BUG_ZOO, CHECKERS, CheckResult
from transformer_edu.exercises.bleu import corpus_bleu_reference
from transformer_edu.exercises.harness import count_every_case, drawing, drawn_cases
from transformer_edu.exercises.registry import EXERCISES
from transformer_edu.model.transformer import Transformer, make_config
from transformer_edu.modern.scaling import training_flops
from transformer_edu.toy.training import noam_lr, smoothed_targets

# --- the package's own code, wrapped to each exercise's signature --------------------
# (a checker fails code that calls the package's reference, unless it runs inside
# exercises.allow_references(): tests/grading/test_grading.py checks that side)


def _package_token_embedding(tokens, weight, pad_idx=0):
    from transformer_edu import TokenEmbedding

    emb = TokenEmbedding(*weight.shape, pad_idx=pad_idx)
    with torch.no_grad():
        emb.embedding.weight.copy_(weight)
        return emb(tokens)


class _PackageMHA(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.inner = MultiHeadAttention(d_model, n_heads)
        inner = self.inner
        self.q_proj, self.k_proj = inner.q_proj, inner.k_proj
        self.v_proj, self.out_proj = inner.v_proj, inner.out_proj

    def forward(self, query, key, value, mask=None):
        return self.inner(query, key, value, mask)


class _PackageFFN(PositionwiseFeedForward):
    def __init__(self, d_model, d_ff):
        super().__init__(d_model, d_ff)


class _PackageEncoderLayer(EncoderLayer):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first,
                         attention_dropout=0.0, activation_dropout=0.0)  # fmt: skip


class _PackageDecoderLayer(DecoderLayer):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first,
                         attention_dropout=0.0, activation_dropout=0.0)  # fmt: skip


class _PackageModel(Transformer):
    def __init__(self, src_vocab, tgt_vocab, d_model, n_heads, d_ff, n_layers,
                 dropout=0.1, norm_first=False, pad_idx=0, max_len=64):  # fmt: skip
        super().__init__(make_config(
            src_vocab, tgt_vocab, n_layers, d_model=d_model, n_heads=n_heads,
            d_ff=d_ff, dropout=0.0, norm_first=norm_first, pad_idx=pad_idx,
            max_len=max_len, tie_generator=True))  # fmt: skip
        for m in self.modules():  # the config keeps p < 1; the checker asks for 1
            if isinstance(m, nn.Dropout):
                m.p = dropout


REFERENCE = {
    "check_transformer_forward": _PackageModel,
    "check_feed_forward": _PackageFFN,
    "check_encoder_layer": _PackageEncoderLayer,
    "check_decoder_layer": _PackageDecoderLayer,
    "check_token_embedding": _package_token_embedding,
    "check_positional_encoding": sinusoidal_table,
    "check_add_positional_encoding": lambda x, table: x + table[: x.size(1)],
    "check_scaled_dot_product_attention": scaled_dot_product_attention,
    "check_split_heads": lambda x, h: MultiHeadAttention(x.size(-1), h).split_heads(x),
    "check_combine_heads": lambda x: MultiHeadAttention(
        x.size(1) * x.size(-1), x.size(1)
    ).combine_heads(x),
    "check_multi_head_attention": _PackageMHA,
    "check_causal_mask": causal_mask,
    "check_padding_mask": padding_mask,
    "check_layer_norm": LayerNorm,
    "check_transformer_masks": lambda s, t, pad_idx=0: (
        padding_mask(s, pad_idx),
        target_mask(t, pad_idx),
        padding_mask(s, pad_idx),
    ),
    "check_label_smoothing": smoothed_targets,
    "check_noam_lr": noam_lr,
    "check_train_loop": exercises.reference_loop,
    "check_greedy_decode": lambda m, src, n: greedy_decode(m, src, max_len=n).tokens[0],
    "check_training_flops": training_flops,
    "check_length_penalty": length_penalty,
    "check_beam_search": lambda m, src, k, n: beam_search(m, src, k, max_len=n)[0][0],
    "check_cached_beam_step": lambda m, ys, memory, src_mask, cache, parents: (
        _next_log_probs(m, ys, memory, src_mask, reorder_cache(cache, parents)),
        cache,
    ),
    "check_top_p": lambda logits, p: next_token_probs(logits, top_p=p),
    "check_corpus_bleu": corpus_bleu_reference,
}


# --- hand-written solutions, as a learner would write them --------------------------


def hand_token_embedding(tokens, weight, pad_idx=0):
    x = weight[tokens] * math.sqrt(weight.size(1))  # (B, L, D)
    return x * (tokens != pad_idx).unsqueeze(-1)


def hand_positional_encoding(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    pos = torch.arange(max_len).unsqueeze(1).float()  # (L, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
    return pe


def hand_add_positional_encoding(x, table):
    return x + table[: x.shape[1]].unsqueeze(0)


def hand_attention(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(k.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    return torch.matmul(F.softmax(scores, dim=-1), v)  # output only


def hand_split_heads(x, n_heads):
    B, T, D = x.shape
    return x.reshape(B, T, n_heads, D // n_heads).permute(0, 2, 1, 3)


def hand_combine_heads(x):
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 1, 3).contiguous().view(B, T, H * Dh)


class HandMHA(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.h, self.d_k = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)

    def forward(self, query, key, value, mask=None):
        B = query.size(0)

        def split(x):
            return x.view(B, -1, self.h, self.d_k).transpose(1, 2)

        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-1e9"))
        weights = scores.softmax(-1)
        out = (weights @ v).transpose(1, 2).reshape(B, -1, self.h * self.d_k)
        return self.w_o(out), weights


def hand_causal_mask(T):
    return torch.tril(torch.ones(1, 1, T, T)).bool()


def hand_padding_mask(tokens, pad_idx):
    return (tokens != pad_idx).unsqueeze(1).unsqueeze(2)


class HandLayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return self.gamma * (x - mu) * torch.rsqrt(var + self.eps) + self.beta


class HandFFN(nn.Module):  # the Annotated Transformer's names
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w_1, self.w_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w_2(self.w_1(x).clamp(min=0))


class HandBiasedMHA(HandMHA):  # exercise 5.2's names, with biases as the package
    def __init__(self, d_model, n_heads):
        super().__init__(d_model, n_heads)
        for name in ("w_q", "w_k", "w_v", "w_o"):
            setattr(self, name, nn.Linear(d_model, d_model))

    def forward(self, query, key, value, mask=None):
        return super().forward(query, key, value, mask)[0]


class HandEncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = HandBiasedMHA(d_model, n_heads)
        self.ffn = HandFFN(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, src_mask=None):
        subs = [(lambda h: self.self_attn(h, h, h, src_mask), self.norm1, self.dropout1),
                (self.ffn, self.norm2, self.dropout2)]  # fmt: skip
        for f, norm, drop in subs:
            x = x + drop(f(norm(x))) if self.norm_first else norm(x + drop(f(x)))
        return x


class HandDecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = HandBiasedMHA(d_model, n_heads)
        self.cross_attn = HandBiasedMHA(d_model, n_heads)
        self.ffn = HandFFN(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        subs = [
            (lambda h: self.self_attn(h, h, h, tgt_mask), self.norm1, self.dropout1),
            (lambda h: self.cross_attn(h, memory, memory, memory_mask), self.norm2,
             self.dropout2),
            (self.ffn, self.norm3, self.dropout3),
        ]  # fmt: skip
        for f, norm, drop in subs:
            x = x + drop(f(norm(x))) if self.norm_first else norm(x + drop(f(x)))
        return x


class HandTransformer(exercises.TransformerParts):  # the given __init__
    def encode(self, src):
        keep = src != self.pad_idx  # (B, S)
        x = self.src_embed(src) * self.d_model**0.5 * keep[..., None]
        x = self.dropout(x + self.pe[: src.size(1)])
        src_mask = keep[:, None, None, :]  # (B, 1, 1, S)
        return self.encoder(x, src_mask), src_mask

    def decode(self, tgt, memory, src_mask):
        T = tgt.size(1)
        keep = tgt != self.pad_idx
        y = self.tgt_embed(tgt) * self.d_model**0.5 * keep[..., None]
        y = self.dropout(y + self.pe[:T])
        look = torch.ones(T, T, dtype=torch.bool).tril()
        return self.decoder(y, memory, keep[:, None, None, :] & look, src_mask)

    def forward(self, src, tgt):
        return self.generator(self.decode(tgt, *self.encode(src)))


def hand_transformer_masks(src, tgt, pad_idx=0):
    T = tgt.size(1)
    src_mask = (src != pad_idx)[:, None, None, :]
    future = torch.ones(T, T, dtype=torch.bool).tril()
    tgt_mask = (tgt != pad_idx)[:, None, None, :] & future
    return src_mask, tgt_mask, src_mask


def hand_label_smoothing(target, vocab_size, smoothing):
    out = torch.full((len(target), vocab_size), smoothing / vocab_size)
    out[torch.arange(len(target)), target] += 1 - smoothing
    return out


def hand_noam_lr(step, d_model, warmup):
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def hand_greedy_decode(model, src, max_len):
    memory, src_mask = model.encode(src)
    ys = [1]
    for _ in range(max_len):
        out = model.decode(torch.tensor([ys]), memory, src_mask)  # (1, t, D)
        nxt = model.generator(out[:, -1]).argmax(-1).item()
        ys.append(nxt)
        if nxt == 2:
            break
    return ys[1:]


def hand_training_flops(d_model, n_layers, d_ff, src_tokens, tgt_tokens):
    D, F = d_model, d_ff
    attention = 4 * D * D + 4 * D  # four projections with their biases
    ffn = 2 * D * F + F + D
    encoder_layer = attention + ffn + 2 * 2 * D  # two LayerNorms
    decoder_layer = 2 * attention + ffn + 3 * 2 * D  # cross-attention, a third norm
    forward = 2 * n_layers * (encoder_layer * src_tokens + decoder_layer * tgt_tokens)
    return 3 * forward  # backward = twice the forward


def hand_length_penalty(length, alpha):
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def hand_beam_search(model, src, beam_size, max_len):
    # every extension of every live prefix, the best K kept; finished ones set aside
    memory, src_mask = model.encode(src)
    beams, done = [([1], 0.0)], []
    for _ in range(max_len):
        cands = []
        for ys, score in beams:
            h = model.decode(torch.tensor([ys]), memory, src_mask)
            logp = model.generator(h[:, -1]).log_softmax(-1)[0]
            cands += [(ys + [t], score + float(lp)) for t, lp in enumerate(logp)]
        cands.sort(key=lambda c: -c[1])
        beams = [c for c in cands[:beam_size] if c[0][-1] != 2]
        done += [c for c in cands[:beam_size] if c[0][-1] == 2]
        best = max((s for _, s in done), default=-math.inf)
        beams = [b for b in beams if b[1] > best]  # a sum only falls
        if not beams:
            break
    return max(done + beams, key=lambda c: c[1])[0][1:]


@torch.no_grad()
def hand_cached_beam_step(model, ys, memory, src_mask, cache, parents):
    for layer in cache:
        for name, (k, v) in list(layer.items()):
            layer[name] = (k[parents], v[parents])  # each survivor: its parent's past
    h = model.decode(ys[:, -1:], memory, src_mask, cache, ys.size(1) - 1)
    return model.generator(h[:, -1]).log_softmax(-1), cache


def hand_top_p(logits, top_p):
    probs = logits.softmax(-1)
    p, order = probs.sort(-1, descending=True)
    outside = p.cumsum(-1) - p >= top_p  # the tokens before already reach top_p
    kept = probs.masked_fill(torch.zeros_like(outside).scatter(-1, order, outside), 0)
    return kept / kept.sum(-1, keepdim=True)


def hand_corpus_bleu(hyps, refs):
    from collections import Counter

    hits, totals = [0] * 4, [0] * 4
    for h, r in zip(hyps, refs, strict=True):
        for n in range(1, 5):
            hg = Counter(tuple(h[i : i + n]) for i in range(len(h) - n + 1))
            rg = Counter(tuple(r[i : i + n]) for i in range(len(r) - n + 1))
            hits[n - 1] += sum(min(c, rg[g]) for g, c in hg.items())
            totals[n - 1] += sum(hg.values())
    if min(hits) == 0:
        return 0.0
    c, r = sum(map(len, hyps)), sum(map(len, refs))
    bp = 1.0 if c >= r else math.exp(1 - r / c)
    logs = [math.log(a / b) for a, b in zip(hits, totals, strict=True)]
    return 100 * bp * math.exp(sum(logs) / 4)


def hand_train_loop(model, batches, d_model, warmup, lr_factor=1.0, smoothing=0.1,
                    clip=1.0):  # fmt: skip
    """A.5 another way: a LambdaLR schedule (steps from 0) and the smoothed loss
    written out, summed over the real tokens and divided by their number."""
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: lr_factor * d_model**-0.5 * min((s + 1) ** -0.5,
                                                       (s + 1) * warmup**-1.5)
    )  # fmt: skip
    model.train()
    losses = []
    for src, tgt in batches:
        logits = model(src, tgt[:, :-1])
        log_p = logits.log_softmax(-1).flatten(0, 1)  # (B T, V)
        target = tgt[:, 1:].flatten()
        dist = F.one_hot(target, log_p.size(-1)) * (1 - smoothing)
        dist = dist + smoothing / log_p.size(-1)
        real = target != 0
        loss = -(dist * log_p).sum(-1)[real].sum() / real.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


HANDWRITTEN = {
    "check_token_embedding": hand_token_embedding,
    "check_positional_encoding": hand_positional_encoding,
    "check_add_positional_encoding": hand_add_positional_encoding,
    "check_scaled_dot_product_attention": hand_attention,
    "check_split_heads": hand_split_heads,
    "check_combine_heads": hand_combine_heads,
    "check_multi_head_attention": HandMHA,
    "check_causal_mask": hand_causal_mask,
    "check_padding_mask": hand_padding_mask,
    "check_layer_norm": HandLayerNorm,
    "check_feed_forward": HandFFN,
    "check_encoder_layer": HandEncoderLayer,
    "check_decoder_layer": HandDecoderLayer,
    "check_transformer_forward": HandTransformer,
    "check_transformer_masks": hand_transformer_masks,
    "check_label_smoothing": hand_label_smoothing,
    "check_noam_lr": hand_noam_lr,
    "check_train_loop": hand_train_loop,
    "check_greedy_decode": hand_greedy_decode,
    "check_training_flops": hand_training_flops,
    "check_length_penalty": hand_length_penalty,
    "check_beam_search": hand_beam_search,
    "check_cached_beam_step": hand_cached_beam_step,
    "check_top_p": hand_top_p,
    "check_corpus_bleu": hand_corpus_bleu,
}

SCORE_SOLUTIONS = {
    "dot": lambda q, k: q @ k.transpose(1, 2),
    "general": lambda q, k, W: torch.einsum("bth,bsh->bts", q, W(k)),
    "additive": lambda q, k, W1, W2, v: v(
        torch.tanh(W1(q).unsqueeze(2) + W2(k).unsqueeze(1))
    ).squeeze(-1),
}

# the checkers that take no kind (check_score_function's kinds: SCORE_SOLUTIONS)
CHECKERS_BUT_SCORE = sorted(set(CHECKERS) - {e.checker for e in EXERCISES if e.kind})


def test_every_checker_has_a_reference_and_a_handwritten_solution():
    assert set(REFERENCE) == set(HANDWRITTEN) == set(CHECKERS_BUT_SCORE)


@pytest.mark.parametrize("name", CHECKERS_BUT_SCORE)
def test_checker_passes_the_package_reference(name):
    with exercises.allow_references():  # the package's code, wrapped: see above
        result = CHECKERS[name](REFERENCE[name], quiet=True)
    assert result, result.message
    assert result.status == "passed" and result.message.startswith("✓")
    assert result.cases_run == result.cases_total >= 2


@pytest.mark.parametrize("name", CHECKERS_BUT_SCORE)
def test_checker_passes_a_handwritten_solution(name):
    result = CHECKERS[name](HANDWRITTEN[name], quiet=True)
    assert result, result.message


@pytest.mark.parametrize("kind", ["dot", "general", "additive"])
def test_score_function_checker(kind):
    assert exercises.check_score_function(SCORE_SOLUTIONS[kind], kind, quiet=True)
    wrong = exercises.check_score_function(
        lambda q, k, *a: SCORE_SOLUTIONS[kind](q, k, *a).transpose(1, 2), kind, True
    )
    assert not wrong and "transposed" in wrong.hint


def test_additive_score_without_broadcasting_is_explained():
    def no_broadcast(q, k, W1, W2, v):
        return v(torch.tanh(W1(q) + W2(k))).squeeze(-1)

    result = exercises.check_score_function(no_broadcast, "additive", quiet=True)
    assert not result and "RuntimeError" in result.message
    assert "[:, :, None, :]" in result.hint


ZOO_CHECKS = [(bug, check) for bug in BUG_ZOO.values() for check in bug.caught_by]


@pytest.mark.parametrize(
    "bug, check", ZOO_CHECKS, ids=[f"{b.name}-{c}" for b, c in ZOO_CHECKS]
)
def test_zoo_bug_fails_its_checker_with_the_right_hint(bug, check):
    result = CHECKERS[check](bug.implementation, quiet=True)
    assert not result
    assert result.status == "failed", result.message
    assert bug.keyword.lower() in result.message.lower(), result.message


def test_zoo_is_large_and_well_formed():
    assert len(BUG_ZOO) >= 6
    for bug in BUG_ZOO.values():
        assert bug.caught_by and all(c in CHECKERS for c in bug.caught_by)
        assert bug.description and bug.origin and bug.keyword
    from_articles = [b for b in BUG_ZOO.values() if "article" in b.origin]
    assert len(from_articles) >= 4


def test_bug_check_runs_every_catching_checker():
    bug = BUG_ZOO["scale multiplied"]
    verdicts = bug.check()
    assert list(verdicts) == list(bug.caught_by)
    assert not any(verdicts.values())


def test_an_exception_in_learner_code_is_reported_not_raised(capsys):
    def broken(q, k, v, mask=None):
        raise ValueError("boom at step 3")

    result = exercises.check_scaled_dot_product_attention(broken)
    assert not result and result.status == "failed"
    assert "ValueError: boom at step 3" in result.message
    assert "line" in result.message  # says where it happened
    assert result.message in capsys.readouterr().out  # printed, not raised


def test_an_exception_in_a_learner_class_is_reported():
    class Broken(nn.Module):
        def __init__(self, d_model, n_heads):
            super().__init__()
            raise KeyError("no such layer")

    result = exercises.check_multi_head_attention(Broken, quiet=True)
    assert not result and "KeyError" in result.message


def test_an_unfinished_stub_reports_not_implemented():
    def stub(T):
        raise NotImplementedError

    result = exercises.check_causal_mask(stub, quiet=True)
    assert not result
    assert result.status == "not implemented"
    assert "not implemented yet" in result.message


def test_a_function_returning_none_is_explained():
    result = exercises.check_causal_mask(lambda T: None, quiet=True)
    assert not result and "return" in result.hint


def test_odd_answers_never_crash_the_checkers():
    for name in CHECKERS_BUT_SCORE:
        for answer in ("text", 3, [1.0, 2.0], (None, None, None)):
            result = CHECKERS[name](lambda *a, answer=answer, **k: answer, quiet=True)
            assert isinstance(result, CheckResult) and not result, name


def test_failure_message_names_the_case_and_shows_numbers():
    result = exercises.check_scaled_dot_product_attention(
        BUG_ZOO["no scaling"].implementation, quiet=True
    )
    assert result.case and result.case in result.message
    assert "expected out[" in result.message and "got" in result.message
    assert result.cases_run == 1 and result.cases_total == 7


def test_nan_from_minus_inf_is_diagnosed_only_on_the_fully_masked_case():
    result = exercises.check_scaled_dot_product_attention(
        BUG_ZOO["-inf gives NaN"].implementation, quiet=True
    )
    assert result.case == "a query with every key masked"
    assert "NaN" in result.hint and "finfo" in result.hint


def test_weights_returned_in_the_wrong_order_are_explained():
    def swapped(q, k, v, mask=None):
        out, w = scaled_dot_product_attention(q, k, v, mask)
        return w, out

    with exercises.allow_references():  # swapped() calls the package's attention
        result = exercises.check_scaled_dot_product_attention(swapped, quiet=True)
    assert not result and "output first" in result.hint


def test_zeroing_weights_after_the_softmax_is_explained():
    def zero_after(q, k, v, mask=None):
        w = (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)
        w = w if mask is None else w * mask
        return w @ v, w

    result = exercises.check_scaled_dot_product_attention(zero_after, quiet=True)
    assert not result and "before the softmax" in result.hint


def test_layer_norm_without_eps_is_caught_on_a_constant_token():
    def no_eps(x, weight, bias, eps=1e-5):
        mu = x.mean(-1, keepdim=True)
        return weight * (x - mu) / x.var(-1, keepdim=True, unbiased=False).sqrt() + bias

    result = exercises.check_layer_norm(no_eps, quiet=True)
    assert not result and "NaN" in result.message and "σ² + ε" in result.hint


def test_layer_norm_function_form_passes():
    def fn(x, weight, bias, eps=1e-5):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return (x - mean) / torch.sqrt(var + eps) * weight + bias

    assert exercises.check_layer_norm(fn, quiet=True)
    with exercises.allow_references():  # torch's own, for the checker's sake
        assert exercises.check_layer_norm(
            lambda x, w, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, b, eps), True
        )


def test_greedy_hints_combine():
    def with_bos_no_stop(model, src, max_len):
        return [1, *hand_greedy_decode(model, src, max_len)] + [2, 2]

    result = exercises.check_greedy_decode(with_bos_no_stop, quiet=True)
    assert "BOS" in result.hint and "stop as soon as EOS" in result.hint


def test_checkers_leave_the_learners_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    exercises.check_multi_head_attention(HandMHA, quiet=True)  # seeds inside
    torch.testing.assert_close(torch.rand(3), expected)


def test_result_object_prints_nicely():
    with exercises.allow_references():
        ok = exercises.check_causal_mask(causal_mask, quiet=True)
    bad = exercises.check_causal_mask(BUG_ZOO["causal mask upper"].implementation, True)
    assert bool(ok) and not bool(bad)
    assert repr(ok).startswith("<CheckResult ✓") and "4/4" in repr(ok)
    assert "✗" in repr(bad) and "T=4" in repr(bad)
    assert "#2e7d32" in ok._repr_html_() and "#c62828" in bad._repr_html_()
    assert "hint" in bad._repr_html_()


def test_use_attention_plugs_a_function_into_a_model_and_restores_it():
    from transformer_edu import make_model
    from transformer_edu.model import attention

    torch.manual_seed(0)
    model = make_model(11, 11, n_layers=1, d_model=8, n_heads=2, d_ff=16, dropout=0.0)
    model.eval()
    src = torch.tensor([[4, 5, 6, 0]])
    tgt = torch.tensor([[1, 7, 8]])
    before = model(src, tgt)
    calls = []

    def spy(q, k, v, mask=None):
        calls.append(q.shape)
        return scaled_dot_product_attention(q, k, v, mask)[0]  # output only

    with exercises.use_attention(model, spy):
        inside = model(src, tgt)
        broken = exercises.attention_no_scaling
        with exercises.use_attention(model, broken):
            different = model(src, tgt)
    assert len(calls) == 3  # encoder self, decoder self, cross
    torch.testing.assert_close(inside, before)
    assert not torch.allclose(different, before)
    assert attention.scaled_dot_product_attention is scaled_dot_product_attention
    assert all(m.fast for m in model.modules() if isinstance(m, MultiHeadAttention))


def test_cached_beam_step_that_ignores_the_cache_is_told_to_use_it():
    @torch.no_grad()
    def whole_prefix(model, ys, memory, src_mask, cache, parents):
        h = model.decode(ys, memory, src_mask)  # right numbers, no cache
        return model.generator(h[:, -1]).log_softmax(-1), cache

    result = CHECKERS["check_cached_beam_step"](whole_prefix, quiet=True)
    assert not result and "newest token" in result.hint, result.message


def test_beam_search_checker_tells_greedy_apart():
    # the first case is a model where greedy's first choice loses
    result = CHECKERS["check_beam_search"](hand_greedy_decode_k, quiet=True)
    assert not result and "greedy" in result.hint, result.message


def hand_greedy_decode_k(model, src, beam_size, max_len):
    return hand_greedy_decode(model, src, max_len)


# --- cases drawn per run (the grader's second pass) -------------------------------------

DRAWS = [1, 2, 3, 97, 2**31 - 2, 123_456_789]  # the grader draws one in [1, 2**31 - 1]


@pytest.mark.parametrize("name", CHECKERS_BUT_SCORE)
def test_drawn_cases_pass_correct_code(name):
    """On every draw, the package's code and a handwritten solution pass: a drawn
    case is never one that only the fixed cases' answers fit."""
    for draw in DRAWS:
        with drawn_cases(draw):
            with exercises.allow_references():
                ref = CHECKERS[name](REFERENCE[name], quiet=True)
            hand = CHECKERS[name](HANDWRITTEN[name], quiet=True)
        assert ref and hand, (draw, ref.message, hand.message)
        assert ref.message.startswith("✓") and "drawn cases pass" in ref.message


@pytest.mark.parametrize("kind", ["dot", "general", "additive"])
def test_drawn_score_cases_pass_correct_code(kind):
    for draw in DRAWS:
        with drawn_cases(draw):
            assert exercises.check_score_function(SCORE_SOLUTIONS[kind], kind, True)


def _key(x) -> object:
    """What a table of answers could look an input up by: its exact value."""
    if isinstance(x, torch.Tensor):
        return ("tensor", tuple(x.shape), str(x.dtype), x.detach().numpy().tobytes())
    if isinstance(x, nn.Module):
        return (type(x).__name__, *(_key(v) for v in x.state_dict().values()))
    if isinstance(x, (list, tuple)):
        return tuple(_key(v) for v in x)
    if isinstance(x, dict):
        return tuple((k, _key(v)) for k, v in sorted(x.items()))
    return repr(x)


class _Table:
    """Answers the fixed cases from a table it filled from the package's code, and
    returns None for any input it has not seen."""

    def __init__(self, reference):
        self.reference, self.answers = reference, {}

    def __call__(self, *args):
        key = _key(args)
        if not drawing():
            self.answers[key] = self.reference(*args)
        return self.answers.get(key)


FUNCTION_CHECKERS = [
    n for n in CHECKERS_BUT_SCORE if not isinstance(REFERENCE[n], type)
]


@pytest.mark.parametrize("name", FUNCTION_CHECKERS)
def test_a_table_of_the_fixed_answers_fails_the_drawn_cases(name):
    """The fixed cases answered from a table pass; on the drawn cases of any run the
    table answers at most a third (a case whose input stays, such as T = 1)."""
    table = _Table(REFERENCE[name])
    with exercises.allow_references():  # the table is filled from the package's code
        assert CHECKERS[name](table, quiet=True), "the table answers the fixed cases"
    for draw in DRAWS:
        with count_every_case(), drawn_cases(draw):
            result = CHECKERS[name](table, quiet=True)
        assert not result and result.cases_passed <= result.cases_total / 3, (
            draw, result.cases_passed, result.cases_total, result.message
        )  # fmt: skip
        assert result.case.startswith("drawn: "), result.case


def test_a_draw_gives_the_same_cases_every_time():
    """The same draw, the same cases: a teacher can grade again exactly
    (--draw); another draw, other cases."""
    messages = []
    for draw in (5, 5, 6):
        with drawn_cases(draw), exercises.allow_references():
            result = CHECKERS["check_padding_mask"](
                REFERENCE["check_padding_mask"], True
            )
        messages.append(result.message)  # every case's label: its tokens
    assert messages[0] == messages[1] != messages[2]
    assert "drawn cases pass" in messages[0]


# --- the assembly exercises (A.1–A.3): mistakes named, a trained model's layers -----


def _post_ln_encoder(forward):
    """The package's encoder parts with ``forward`` as the learner wrote it."""
    return type("Answer", (exercises.EncoderLayerParts,), {"forward": forward})


def _post_ln_decoder(forward):
    return type("Answer", (exercises.DecoderLayerParts,), {"forward": forward})


def _enc_always_post(self, x, src_mask=None):
    x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))
    return self.norm2(x + self.dropout2(self.ffn(x)))


def _enc_no_dropout(self, x, src_mask=None):
    if self.norm_first:
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h, src_mask)
        return x + self.ffn(self.norm2(x))
    x = self.norm1(x + self.self_attn(x, x, x, src_mask))
    return self.norm2(x + self.ffn(x))


def _enc_no_mask(self, x, src_mask=None):
    return _enc_always_post(self, x, None)  # fails on the first masked case


def _enc_one_norm(self, x, src_mask=None):
    x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))
    return self.norm1(x + self.dropout2(self.ffn(x)))


def _dec(self, x, memory, tgt_mask=None, memory_mask=None, *, cross_first=False,
         t_mask=True, queries_from_memory=False):  # fmt: skip
    def self_block(h):
        return self.self_attn(h, h, h, tgt_mask if t_mask else None)

    def cross_block(h):
        if queries_from_memory:
            return self.cross_attn(memory, h, h)
        return self.cross_attn(h, memory, memory, memory_mask)

    blocks = [self_block, cross_block][:: -1 if cross_first else 1]
    x = self.norm1(x + self.dropout1(blocks[0](x)))
    x = self.norm2(x + self.dropout2(blocks[1](x)))
    return self.norm3(x + self.dropout3(self.ffn(x)))


@pytest.mark.parametrize(
    "answer, words",
    [
        (_post_ln_encoder(_enc_always_post), "post-LN and pre-LN are mixed up"),
        (_post_ln_encoder(_enc_no_dropout), "dropout(sublayer(x))"),
        (_post_ln_encoder(_enc_no_mask), "padding mask is not passed"),
        (_post_ln_encoder(_enc_one_norm), "one LayerNorm serves several"),
    ],
    ids=["order", "dropout", "mask", "one norm"],
)
def test_the_encoder_layer_checker_names_the_mistake(answer, words):
    result = exercises.check_encoder_layer(answer, quiet=True)
    assert not result and words in result.hint, result.message


@pytest.mark.parametrize(
    "options, words",
    [
        ({"cross_first": True}, "wrong order"),
        ({"t_mask": False}, "look-ahead mask (tgt_mask) is not passed"),
        ({"queries_from_memory": True}, "queries are x"),
    ],
    ids=["order", "look-ahead", "queries"],
)
def test_the_decoder_layer_checker_names_the_mistake(options, words):
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        return _dec(self, x, memory, tgt_mask, memory_mask, **options)

    result = exercises.check_decoder_layer(_post_ln_decoder(forward), quiet=True)
    assert not result and words in result.hint, result.message


def test_the_feed_forward_checker_names_a_missing_relu():
    result = exercises.check_feed_forward(
        type("NoReLU", (HandFFN,), {"forward": lambda self, x: self.w_2(self.w_1(x))}),
        quiet=True,
    )
    assert not result and "no ReLU" in result.hint


def test_use_layers_puts_the_learners_layers_into_a_model_and_restores_it():
    from transformer_edu import make_model

    torch.manual_seed(0)
    model = make_model(11, 13, n_layers=2, d_model=16, n_heads=4, d_ff=32,
                       dropout=0.0).eval()  # fmt: skip
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    tgt = torch.tensor([[1, 4, 5], [1, 6, 0]])
    layers = [*model.encoder.layers, *model.decoder.layers]
    with torch.no_grad():
        expected = model(src, tgt)
        with exercises.use_layers(model, HandEncoderLayer, HandDecoderLayer):
            assert isinstance(model.encoder.layers[1], HandEncoderLayer)
            got = model(src, tgt)
            uncached = greedy_decode(model, src[:1], max_len=6, use_cache=False)
            with pytest.raises(RuntimeError, match="use_cache=False"):
                greedy_decode(model, src[:1], max_len=6)
        assert torch.allclose(got, expected, atol=1e-5)
        assert uncached.tokens == greedy_decode(model, src[:1], max_len=6).tokens
    assert [*model.encoder.layers, *model.decoder.layers] == layers
