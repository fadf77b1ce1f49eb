"""No checker can be fooled by a wrapper: an answer that hands the exercise to one of
the package's or PyTorch's own implementations of it (a module, a functional, a tensor
method, a ``torch.ops`` operator, an alias) fails with "your code called the
reference" and the name of what it called; an answer written from the allowed
building blocks passes.

The two tables below are the list: per checker, the forbidden implementations (the
name the verdict shows, and an answer that calls it) and answers built from allowed
blocks (test_registry fails while a registered checker, or an exercise's kind, has
none). Each answer is source code that defines ``answer``, as a student's notebook
cell would (test_grading grades one such notebook through the command line).
"""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from transformer_edu import causal_mask
from transformer_edu.exercises import CALLED_REFERENCE, CHECKERS, CheckResult
from transformer_edu.exercises.registry import Exercise
from transformer_edu.model.seq2seq import SCORE_FUNCTIONS

# what every answer may use without importing it (the student notebook imports these)
PRELUDE = """\
import functools
import math

import torch
import torch.nn.functional as F
from torch import nn
"""

_LN = "def answer(x, weight, bias, eps=1e-5):\n    return "  # check_layer_norm's form
_ATT = "def answer(q, k, v, mask=None):\n    return "
_MHA_INIT = """\
class answer(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.h = n_heads
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
"""

_FFN_INIT = """\
class answer(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
"""
# the given __init__s of exercises A.2 and A.3 (chapter 11), the parts the package's
_ENC_INIT = """\
from transformer_edu import MultiHeadAttention, PositionwiseFeedForward
class answer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.ffn = PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
"""
_DEC_INIT = """\
from transformer_edu import MultiHeadAttention, PositionwiseFeedForward
class answer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.cross_attn = MultiHeadAttention(d_model, n_heads)
        self.ffn = PositionwiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1, self.dropout2 = nn.Dropout(dropout), nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
"""

# A.5's loop around one step's loss (the answers put it between the two)
_LOOP_HEAD = """
            def answer(model, batches, d_model, warmup, lr_factor=1.0, smoothing=0.1,
                       clip=1.0):
                opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98),
                                       eps=1e-9)
                model.train()
                losses = []
                for step, (src, tgt) in enumerate(batches, start=1):"""
_LOOP_TAIL = """
                    opt.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(model.parameters(), clip)
                    lr = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
                    for group in opt.param_groups:
                        group["lr"] = lr_factor * lr
                    opt.step()
                    losses.append(loss.item())
                return losses
            """
_MODEL_INIT = """\
from transformer_edu import Decoder, Encoder, padding_mask, sinusoidal_table, target_mask
class answer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model, n_heads, d_ff, n_layers,
                 dropout=0.1, norm_first=False, pad_idx=0, max_len=64):
        super().__init__()
        self.d_model, self.pad_idx = d_model, pad_idx
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_idx)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_idx)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        stack = dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                     dropout=dropout, norm_first=norm_first)
        self.encoder, self.decoder = Encoder(**stack), Decoder(**stack)
        self.generator = nn.Linear(d_model, tgt_vocab)
        self.generator.weight = self.tgt_embed.weight
"""

# checker (with its kind, for check_score_function): [(shown name, answer source)]
FORBIDDEN: dict[str, list[tuple[str, str]]] = {
    "check_score_function[dot]": [
        ("transformer_edu.model.seq2seq.DotScore", """
            from transformer_edu.model.seq2seq import DotScore
            def answer(query, keys):
                return DotScore(query.size(-1))(query, keys)
            """),
        ("transformer_edu.model.seq2seq.DotScore", """
            from transformer_edu.model.seq2seq import make_score
            def answer(query, keys):
                return make_score("dot", query.size(-1))(query, keys)
            """),
    ],
    "check_score_function[general]": [
        ("transformer_edu.model.seq2seq.GeneralScore", """
            from transformer_edu.model.seq2seq import SCORE_FUNCTIONS
            def answer(query, keys, W):
                score = SCORE_FUNCTIONS["general"](query.size(-1))
                score.W = W
                return score(query, keys)
            """),
    ],
    "check_score_function[additive]": [
        ("transformer_edu.model.seq2seq.AdditiveScore", """
            from transformer_edu.model.seq2seq import AdditiveScore
            def answer(query, keys, W1, W2, v):
                score = AdditiveScore(query.size(-1))
                score.W1, score.W2, score.v = W1, W2, v
                return score(query, keys)
            """),
    ],
    "check_token_embedding": [
        ("torch.nn.functional.embedding", """
            def answer(tokens, weight, pad_idx):
                x = F.embedding(tokens, weight) * math.sqrt(weight.size(1))
                return x.masked_fill((tokens == pad_idx)[..., None], 0.0)
            """),
        ("torch.nn.Embedding", """
            def answer(tokens, weight, pad_idx):
                return nn.Embedding.from_pretrained(weight)(tokens)
            """),
        ("torch.embedding", """
            def answer(tokens, weight, pad_idx):
                return torch.embedding(weight, tokens)
            """),
        ("torch.ops.aten.embedding.default", """
            def answer(tokens, weight, pad_idx):
                return torch.ops.aten.embedding.default(weight, tokens)
            """),
        ("torch.nn.functional.embedding_bag", """
            def answer(tokens, weight, pad_idx):
                rows = F.embedding_bag(tokens.reshape(-1, 1), weight, mode="sum")
                return rows.reshape(*tokens.shape, -1)
            """),
        ("transformer_edu.model.embeddings.TokenEmbedding", """
            from transformer_edu.model.embeddings import TokenEmbedding
            def answer(tokens, weight, pad_idx):
                emb = TokenEmbedding(*weight.shape, pad_idx=pad_idx)
                emb.embedding.weight.data = weight
                return emb(tokens)
            """),
    ],
    "check_positional_encoding": [
        ("transformer_edu.model.embeddings.sinusoidal_table", """
            from transformer_edu import sinusoidal_table
            def answer(max_len, d_model):
                return sinusoidal_table(max_len, d_model)
            """),
        ("transformer_edu.model.embeddings.SinusoidalPositionalEncoding", """
            from transformer_edu.model.embeddings import SinusoidalPositionalEncoding
            def answer(max_len, d_model):
                return SinusoidalPositionalEncoding(d_model, max_len).pe
            """),
    ],
    "check_add_positional_encoding": [
        ("transformer_edu.model.embeddings.LearnedPositionalEncoding", """
            from transformer_edu.model.embeddings import LearnedPositionalEncoding
            def answer(x, table):
                pe = LearnedPositionalEncoding(*table.shape[::-1])
                pe.pe.data = table
                return pe(x)
            """),
        ("transformer_edu.model.embeddings._PositionalEncoding", """
            from transformer_edu.model.embeddings import _PositionalEncoding
            class Table(_PositionalEncoding):
                def __init__(self, table):
                    super().__init__(table.size(1), len(table))
                    self.t, self.dropout = table, nn.Identity()
                def table(self):
                    return self.t
            def answer(x, table):
                return Table(table)(x)
            """),
    ],
    "check_scaled_dot_product_attention": [
        ("torch.nn.functional.scaled_dot_product_attention",
         _ATT + "F.scaled_dot_product_attention(q, k, v, attn_mask=mask)"),
        ("torch.nn.functional.scaled_dot_product_attention", """
            from torch.nn.functional import scaled_dot_product_attention as sdpa
            def answer(q, k, v, mask=None):
                return sdpa(q, k, v, attn_mask=mask)
            """),
        ("torch.nn.functional.scaled_dot_product_attention",  # no Python calls it
         _ATT + "functools.partial(F.scaled_dot_product_attention, attn_mask=mask)"
                "(q, k, v)"),
        ("torch.nn.functional.scaled_dot_product_attention",
         _ATT + "getattr(F, 'scaled_dot_product_' + 'attention')(q, k, v)"),
        ("torch.nn.functional.scaled_dot_product_attention",
         _ATT + "torch._C._nn.scaled_dot_product_attention(q, k, v)"),
        ("torch.ops.aten.scaled_dot_product_attention",
         _ATT + "torch.ops.aten.scaled_dot_product_attention(q, k, v)"),
        ("torch.ops.aten._scaled_dot_product_attention_math",
         _ATT + "torch.ops.aten._scaled_dot_product_attention_math(q, k, v)[0]"),
        ("torch._scaled_dot_product_flash_attention_for_cpu",
         _ATT + "torch._scaled_dot_product_flash_attention_for_cpu(q, k, v)[0]"),
        ("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default",
         _ATT + "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu"
                ".default(q, k, v)[0]"),
        ("torch.nn.MultiheadAttention", """
            def answer(q, k, v, mask=None):
                mha = nn.MultiheadAttention(q.size(-1), 1, batch_first=True)
                return mha(q.flatten(0, -3), k.flatten(0, -3), v.flatten(0, -3))[0]
            """),
        ("torch.nn.functional.multi_head_attention_forward", """
            def answer(q, k, v, mask=None):
                d = q.size(-1)
                eye = torch.eye(d, dtype=q.dtype)
                out, _ = F.multi_head_attention_forward(
                    q, k, v, d, 1, torch.cat([eye] * 3), None, None, None, False,
                    0.0, eye, None, use_separate_proj_weight=False)
                return out
            """),
        ("transformer_edu.model.attention.scaled_dot_product_attention", """
            from transformer_edu import scaled_dot_product_attention
            def answer(q, k, v, mask=None):
                return scaled_dot_product_attention(q, k, v, mask)
            """),
        ("transformer_edu.model.attention.MultiHeadAttention", """
            from transformer_edu import MultiHeadAttention
            def answer(q, k, v, mask=None):
                return MultiHeadAttention(q.size(-1), 1)(q, k, v, mask)
            """),
    ],
    "check_split_heads": [
        ("transformer_edu.model.attention.MultiHeadAttention", """
            from transformer_edu import MultiHeadAttention
            def answer(x, n_heads):
                return MultiHeadAttention(x.size(-1), n_heads).split_heads(x)
            """),
        ("transformer_edu.model.attention.MultiHeadAttention", """
            from types import SimpleNamespace
            from transformer_edu.model.attention import MultiHeadAttention as M
            def answer(x, n_heads):
                heads = SimpleNamespace(n_heads=n_heads, d_k=x.size(-1) // n_heads)
                return M.split_heads(heads, x)
            """),
    ],
    "check_combine_heads": [
        ("transformer_edu.model.attention.MultiHeadAttention", """
            from transformer_edu import MultiHeadAttention
            def answer(x):
                B, H, T, Dh = x.shape
                return MultiHeadAttention(H * Dh, H).combine_heads(x)
            """),
    ],
    "check_multi_head_attention": [
        ("torch.nn.MultiheadAttention", _MHA_INIT + """
        self.mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
    def forward(self, query, key, value, mask=None):
        return self.mha(query, key, value)[0]
"""),
        ("torch.nn.MultiheadAttention", _MHA_INIT + """
        self.layer = nn.TransformerEncoderLayer(d_model, n_heads, batch_first=True)
    def forward(self, query, key, value, mask=None):
        return self.layer.self_attn(query, key, value)[0]
"""),
        ("torch.nn.functional.multi_head_attention_forward", _MHA_INIT + """
    def forward(self, query, key, value, mask=None):
        lin = (self.w_q, self.w_k, self.w_v)
        out, _ = F.multi_head_attention_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1),
            query.size(-1), self.h, torch.cat([m.weight for m in lin]),
            torch.cat([m.bias for m in lin]), None, None, False, 0.0,
            self.w_o.weight, self.w_o.bias, need_weights=False)
        return out.transpose(0, 1)
"""),
        ("torch._native_multi_head_attention", _MHA_INIT + """
    def forward(self, query, key, value, mask=None):
        lin = (self.w_q, self.w_k, self.w_v)
        out, _ = torch._native_multi_head_attention(
            query, key, value, query.size(-1), self.h,
            torch.cat([m.weight for m in lin]), torch.cat([m.bias for m in lin]),
            self.w_o.weight, self.w_o.bias, need_weights=False)
        return out
"""),
        ("transformer_edu.model.attention.MultiHeadAttention", """
            from transformer_edu import MultiHeadAttention
            class answer(MultiHeadAttention):
                def forward(self, query, key, value, mask=None):
                    return super().forward(query, key, value, mask)
            """),
    ],
    "check_causal_mask": [
        ("transformer_edu.model.masks.causal_mask", """
            from transformer_edu import causal_mask
            def answer(T):
                return causal_mask(T)[0, 0]
            """),
        ("transformer_edu.model.masks.target_mask", """
            from transformer_edu.model.masks import target_mask
            def answer(T):
                return target_mask(torch.ones(1, T, dtype=torch.long))[0, 0]
            """),
        ("torch.nn.Transformer.generate_square_subsequent_mask", """
            def answer(T):
                return nn.Transformer.generate_square_subsequent_mask(T) == 0
            """),
        ("torch.nn.modules.transformer._generate_square_subsequent_mask", """
            from torch.nn.modules.transformer import _generate_square_subsequent_mask
            def answer(T):
                return _generate_square_subsequent_mask(T) == 0
            """),
        ("torch.nn.attention.bias.causal_upper_left", """
            from torch.nn.attention.bias import causal_upper_left
            def answer(T):
                return causal_upper_left(T, T)._materialize()
            """),
    ],
    "check_padding_mask": [
        ("transformer_edu.model.masks.padding_mask", """
            import transformer_edu.model.masks as masks
            def answer(tokens, pad_idx):
                return masks.padding_mask(tokens, pad_idx)
            """),
        ("transformer_edu.model.masks.key_padding_from_torch", """
            from transformer_edu.model.masks import key_padding_from_torch
            def answer(tokens, pad_idx):
                return key_padding_from_torch(tokens == pad_idx)
            """),
        ("transformer_edu.model.masks.target_mask", """
            from transformer_edu.model.masks import target_mask
            def answer(tokens, pad_idx):
                return target_mask(tokens, pad_idx)[:, :, -1:]  # the last query's row
            """),
    ],
    "check_layer_norm": [
        ("torch.nn.functional.layer_norm",
         _LN + "F.layer_norm(x, x.shape[-1:], weight, bias, eps)"),
        ("torch.nn.functional.layer_norm", """
            from torch.nn.functional import layer_norm as ln
            def answer(x, weight, bias, eps=1e-5):
                return ln(x, x.shape[-1:], weight, bias, eps)
            """),
        ("torch.nn.functional.layer_norm",
         _LN + "getattr(F, 'layer_' + 'norm')(x, x.shape[-1:], weight, bias, eps)"),
        ("torch.layer_norm", _LN + "torch.layer_norm(x, x.shape[-1:], weight, bias, eps)"),
        ("torch.layer_norm",  # no Python calls it
         _LN + "functools.partial(torch.layer_norm, eps=eps)(x, x.shape[-1:], weight,"
               " bias)"),
        ("torch.layer_norm",
         _LN + "next(map(torch.layer_norm, [x], [x.shape[-1:]], [weight], [bias]))"),
        ("torch.native_layer_norm",
         _LN + "torch.native_layer_norm(x, x.shape[-1:], weight, bias, eps)[0]"),
        ("torch.ops.aten.layer_norm",
         _LN + "torch.ops.aten.layer_norm(x, x.shape[-1:], weight, bias, eps)"),
        ("torch.ops.aten.native_layer_norm.default",
         _LN + "torch.ops.aten.native_layer_norm.default(x, x.shape[-1:], weight, bias,"
               " eps)[0]"),
        ("torch._refs.nn.functional.layer_norm",
         _LN + "torch._refs.nn.functional.layer_norm(x, x.shape[-1:], weight, bias, eps)"),
        ("torch.nn.functional.group_norm", """
            def answer(x, weight, bias, eps=1e-5):
                flat = x.reshape(-1, x.size(-1))  # one group of D channels per token
                return F.group_norm(flat, 1, None, None, eps).reshape(x.shape) * weight + bias
            """),
        ("torch.nn.LayerNorm", """
            class answer(nn.Module):
                def __init__(self, d_model, eps=1e-5):
                    super().__init__()
                    self.inner = nn.LayerNorm(d_model, eps)
                    self.weight, self.bias = self.inner.weight, self.inner.bias
                def forward(self, x):
                    return self.inner(x)
            """),
        ("transformer_edu.model.norm.LayerNorm", """
            from transformer_edu import LayerNorm
            class answer(LayerNorm):
                pass
            """),
        ("transformer_edu.model.norm.LayerNorm", """
            from transformer_edu.model.norm import LayerNorm
            def answer(x, weight, bias, eps=1e-5):
                return LayerNorm(x.size(-1), eps, fast=False).to(x.dtype)(x) * weight + bias
            """),
    ],
    "check_feed_forward": [
        ("transformer_edu.model.feed_forward.PositionwiseFeedForward", """
            from transformer_edu import PositionwiseFeedForward
            class answer(PositionwiseFeedForward):
                def forward(self, x):
                    return super().forward(x)
            """),
        ("torch.nn.TransformerEncoderLayer", _FFN_INIT + """
    def forward(self, x):
        layer = nn.TransformerEncoderLayer(x.size(-1), 1, self.linear1.out_features,
                                           dropout=0.0, batch_first=True)
        layer.linear1, layer.linear2 = self.linear1, self.linear2
        return layer._ff_block(x)
"""),
    ],
    "check_encoder_layer": [
        ("transformer_edu.model.layers.EncoderLayer", """
            from transformer_edu import EncoderLayer
            class answer(EncoderLayer):
                def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
                    super().__init__(d_model, n_heads, d_ff, dropout, norm_first,
                                     attention_dropout=0.0, activation_dropout=0.0)
            """),
        ("torch.nn.TransformerEncoderLayer", _ENC_INIT + """
    def forward(self, x, src_mask=None):
        layer = nn.TransformerEncoderLayer(x.size(-1), 1, 4 * x.size(-1),
                                           dropout=0.0, batch_first=True)
        return layer(x)
"""),
    ],
    "check_decoder_layer": [
        ("transformer_edu.model.layers.DecoderLayer", """
            from transformer_edu import DecoderLayer
            class answer(DecoderLayer):
                def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
                    super().__init__(d_model, n_heads, d_ff, dropout, norm_first,
                                     attention_dropout=0.0, activation_dropout=0.0)
            """),
        ("torch.nn.TransformerDecoderLayer", _DEC_INIT + """
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        layer = nn.TransformerDecoderLayer(x.size(-1), 1, 4 * x.size(-1),
                                           dropout=0.0, batch_first=True)
        return layer(x, memory)
"""),
    ],
    "check_transformer_forward": [
        ("transformer_edu.model.transformer.make_model", _MODEL_INIT + """
    def forward(self, src, tgt):
        from transformer_edu import make_model
        model = make_model(self.src_embed.num_embeddings, self.generator.out_features,
                           len(self.encoder.layers), d_model=self.d_model,
                           n_heads=self.encoder.layers[0].self_attn.n_heads,
                           d_ff=self.encoder.layers[0].ffn.linear1.out_features,
                           dropout=0.0, tie_generator=True)
        return model(src, tgt)
"""),
        ("torch.nn.Transformer", _MODEL_INIT + """
    def forward(self, src, tgt):
        inner = nn.Transformer(self.d_model, 2, 1, 1, 32, dropout=0.0, batch_first=True)
        return self.generator(inner(self.src_embed(src), self.tgt_embed(tgt)))
"""),
    ],
    "check_transformer_masks": [
        ("transformer_edu.model.masks.target_mask", """
            from transformer_edu.model.masks import padding_mask, target_mask
            def answer(src, tgt, pad_idx=0):
                src_mask = padding_mask(src, pad_idx)
                return src_mask, target_mask(tgt, pad_idx), src_mask
            """),
    ],
    "check_label_smoothing": [
        ("transformer_edu.toy.training.smoothed_targets", """
            import transformer_edu.toy.training as training
            def answer(target, vocab_size, smoothing):
                return training.smoothed_targets(target, vocab_size, smoothing)
            """),
    ],
    "check_train_loop": [
        ("transformer_edu.toy.training.sequence_loss", _LOOP_HEAD + """
                    from transformer_edu.toy.training import sequence_loss
                    loss = sequence_loss(model(src, tgt[:, :-1]), tgt[:, 1:], smoothing)
""" + _LOOP_TAIL),
        ("transformer_edu.toy.training.train", """
            from transformer_edu.toy.training import TrainConfig, train
            def answer(model, batches, d_model, warmup, lr_factor=1.0, smoothing=0.1,
                       clip=1.0):
                train(model, [], None, None, TrainConfig(epochs=0), progress=False)
                return []
            """),
    ],
    "check_noam_lr": [
        ("transformer_edu.toy.training.noam_lr", """
            from transformer_edu.toy.training import noam_lr
            def answer(step, d_model, warmup):
                return noam_lr(step, d_model, warmup)
            """),
        ("transformer_edu.toy.training.noam_lr", """
            from transformer_edu.toy.training import noam_lr
            def answer(step, d_model, warmup):
                return functools.partial(noam_lr, factor=1.0)(step, d_model, warmup)
            """),
    ],
    "check_greedy_decode": [
        ("transformer_edu.decoding.greedy_decode", """
            from transformer_edu.decoding import greedy_decode
            def answer(model, src, max_len):
                return greedy_decode(model, src, max_len=max_len).tokens[0]
            """),
        ("transformer_edu.decoding.beam_search", """
            from transformer_edu.decoding import beam_search
            def answer(model, src, max_len):
                return beam_search(model, src, 1, max_len=max_len)[0][0]
            """),
    ],
    "check_training_flops": [
        ("transformer_edu.modern.scaling.training_flops", """
            from transformer_edu.modern.scaling import training_flops
            def answer(d_model, n_layers, d_ff, src_tokens, tgt_tokens):
                return training_flops(d_model, n_layers, d_ff, src_tokens, tgt_tokens)
            """),
        ("transformer_edu.modern.scaling.non_embedding_params", """
            from transformer_edu.modern import scaling
            def answer(d_model, n_layers, d_ff, src_tokens, tgt_tokens):
                enc, dec = scaling.non_embedding_params(d_model, n_layers, d_ff)
                return 6 * (enc * src_tokens + dec * tgt_tokens)
            """),
    ],
    "check_length_penalty": [
        ("transformer_edu.decoding.length_penalty", """
            from transformer_edu.decoding import length_penalty
            def answer(length, alpha):
                return length_penalty(length, alpha)
            """),
    ],
    "check_beam_search": [
        ("transformer_edu.decoding.beam_search", """
            from transformer_edu.decoding import beam_search
            def answer(model, src, beam_size, max_len):
                return beam_search(model, src, beam_size, max_len=max_len)[0][0]
            """),
        ("transformer_edu.decoding.beam_search_batch", """
            from transformer_edu import decoding
            def answer(model, src, beam_size, max_len):
                return decoding.beam_search_batch(model, src, beam_size, max_len=max_len)[0][0][0]
            """),
    ],
    "check_cached_beam_step": [
        ("transformer_edu.decoding.reorder_cache", """
            from transformer_edu.decoding import reorder_cache
            def answer(model, ys, memory, src_mask, cache, parents):
                reorder_cache(cache, parents)
                h = model.decode(ys[:, -1:], memory, src_mask, cache, ys.size(1) - 1)
                return model.generator(h[:, -1]).log_softmax(-1), cache
            """),
    ],
    "check_top_p": [
        ("transformer_edu.decoding.next_token_probs", """
            from transformer_edu.decoding import next_token_probs
            def answer(logits, top_p):
                return next_token_probs(logits, top_p=top_p)
            """),
    ],
    "check_corpus_bleu": [
        ("sacrebleu.metrics.bleu.BLEU", """
            from sacrebleu.metrics import BLEU
            def answer(hyps, refs):
                bleu = BLEU(tokenize="none", smooth_method="none")
                return bleu.corpus_score([" ".join(h) for h in hyps],
                                         [[" ".join(r) for r in refs]]).score
            """),
        ("sacrebleu.corpus_bleu", """
            import sacrebleu
            def answer(hyps, refs):
                return sacrebleu.corpus_bleu([" ".join(h) for h in hyps],
                                             [[" ".join(r) for r in refs]],
                                             tokenize="none", smooth_method="none").score
            """),
    ],
}  # fmt: skip

# checker: answers written from the blocks the exercise allows
ALLOWED_BLOCKS: dict[str, list[str]] = {
    "check_score_function[dot]": [
        "def answer(query, keys):\n    return query @ keys.transpose(1, 2)",
        "def answer(query, keys):\n    return torch.bmm(query, keys.transpose(1, 2))",
    ],
    "check_score_function[general]": [
        "def answer(query, keys, W):\n"
        "    return torch.einsum('bth,bsh->bts', query, W(keys))",
    ],
    "check_score_function[additive]": [
        "def answer(query, keys, W1, W2, v):\n"
        "    return v(torch.tanh(W1(query)[:, :, None] + W2(keys)[:, None])).squeeze(-1)",
    ],
    "check_token_embedding": [
        """
        def answer(tokens, weight, pad_idx):
            x = weight[tokens] * math.sqrt(weight.size(1))  # indexing looks rows up
            return x * (tokens != pad_idx)[..., None]
        """,
        """
        def answer(tokens, weight, pad_idx):
            x = weight.index_select(0, tokens.flatten()).reshape(*tokens.shape, -1)
            return (x * weight.size(1) ** 0.5).masked_fill((tokens == pad_idx)[..., None], 0)
        """,
    ],
    "check_positional_encoding": [
        """
        def answer(max_len, d_model):
            pos = torch.arange(max_len, dtype=torch.float64)[:, None]
            freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)
            pe = torch.zeros(max_len, d_model, dtype=torch.float64)
            pe[:, 0::2] = torch.sin(pos * freq)
            pe[:, 1::2] = torch.cos(pos * freq[: d_model // 2])
            return pe.float()
        """,
    ],
    "check_add_positional_encoding": [
        "def answer(x, table):\n    return x + table[: x.size(1)].unsqueeze(0)",
    ],
    "check_scaled_dot_product_attention": [
        """
        def answer(q, k, v, mask=None):
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
            if mask is not None:
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            weights = F.softmax(scores, dim=-1)
            return weights @ v, weights
        """,
    ],
    "check_split_heads": [
        """
        def answer(x, n_heads):
            B, T, D = x.shape
            return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)
        """,
    ],
    "check_combine_heads": [
        """
        def answer(x):
            B, H, T, Dh = x.shape
            return x.permute(0, 2, 1, 3).contiguous().view(B, T, H * Dh)
        """,
    ],
    "check_multi_head_attention": [
        # attention itself is not this exercise: torch's and the package's may be used
        _MHA_INIT + """
    def forward(self, query, key, value, mask=None):
        B, T, D = query.shape
        def split(x):
            return x.view(B, x.size(1), self.h, D // self.h).transpose(1, 2)
        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.w_o(out.transpose(1, 2).reshape(B, T, D))
""",
        "from transformer_edu import scaled_dot_product_attention\n" + _MHA_INIT + """
    def forward(self, query, key, value, mask=None):
        B, T, D = query.shape
        def split(x):
            return x.view(B, x.size(1), self.h, D // self.h).transpose(1, 2)
        q, k, v = split(self.w_q(query)), split(self.w_k(key)), split(self.w_v(value))
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        return self.w_o(out.transpose(1, 2).reshape(B, T, D))
""",
    ],
    "check_causal_mask": [
        "def answer(T):\n    return torch.tril(torch.ones(T, T, dtype=torch.bool))",
        "def answer(T):\n    return torch.arange(T)[:, None] >= torch.arange(T)",
    ],
    "check_padding_mask": [
        "def answer(tokens, pad_idx):\n    return (tokens != pad_idx)[:, None, None, :]",
    ],
    "check_layer_norm": [
        """
        class answer(nn.Module):
            def __init__(self, d_model, eps=1e-5):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(d_model))
                self.bias = nn.Parameter(torch.zeros(d_model))
                self.eps = eps
            def forward(self, x):
                mean = x.mean(-1, keepdim=True)
                var = ((x - mean) ** 2).sum(-1, keepdim=True) / x.size(-1)
                return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias
        """,
        """
        def answer(x, weight, bias, eps=1e-5):
            var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
            return (x - mean) * torch.rsqrt(var + eps) * weight + bias
        """,
    ],
    "check_feed_forward": [
        _FFN_INIT + """
    def forward(self, x):
        return self.linear2(F.relu(self.linear1(x)))
""",
        _FFN_INIT + """
    def forward(self, x):
        return self.linear2(torch.clamp(self.linear1(x), min=0.0))
""",
    ],
    "check_encoder_layer": [
        # the given parts: the package's attention and feed-forward network
        _ENC_INIT + """
    def forward(self, x, src_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, src_mask))
            return x + self.dropout2(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))
        return self.norm2(x + self.dropout2(self.ffn(x)))
""",
    ],
    "check_decoder_layer": [
        _DEC_INIT + """
    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        blocks = [(lambda h: self.self_attn(h, h, h, tgt_mask), self.norm1, self.dropout1),
                  (lambda h: self.cross_attn(h, memory, memory, memory_mask), self.norm2,
                   self.dropout2),
                  (self.ffn, self.norm3, self.dropout3)]
        for f, norm, drop in blocks:
            x = x + drop(f(norm(x))) if self.norm_first else norm(x + drop(f(x)))
        return x
""",
    ],
    "check_transformer_forward": [
        # the given parts, and the package's masks and table
        _MODEL_INIT + """
    def embed(self, table, tokens):
        x = table(tokens) * math.sqrt(self.d_model)
        x = x.masked_fill((tokens == self.pad_idx).unsqueeze(-1), 0.0)
        return self.dropout(x + self.pe[: tokens.size(1)])
    def encode(self, src):
        src_mask = padding_mask(src, self.pad_idx)
        return self.encoder(self.embed(self.src_embed, src), src_mask), src_mask
    def decode(self, tgt, memory, src_mask):
        return self.decoder(self.embed(self.tgt_embed, tgt), memory,
                            target_mask(tgt, self.pad_idx), src_mask)
    def forward(self, src, tgt):
        memory, src_mask = self.encode(src)
        return self.generator(self.decode(tgt, memory, src_mask))
""",
    ],
    "check_transformer_masks": [
        # the exercise gives padding_mask and causal_mask
        """
        from transformer_edu import causal_mask, padding_mask
        def answer(src, tgt, pad_idx=0):
            tgt_mask = padding_mask(tgt, pad_idx) & causal_mask(tgt.size(1))
            return padding_mask(src, pad_idx), tgt_mask, padding_mask(src, pad_idx)
        """,
    ],
    "check_label_smoothing": [
        """
        def answer(target, vocab_size, smoothing):
            return (1 - smoothing) * F.one_hot(target, vocab_size) + smoothing / vocab_size
        """,
    ],
    "check_train_loop": [
        # F.cross_entropy with its label smoothing, and torch's clipping and Adam
        _LOOP_HEAD + """
                    logits = model(src, tgt[:, :-1])
                    loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(),
                                           ignore_index=0, label_smoothing=smoothing)
""" + _LOOP_TAIL,
    ],
    "check_noam_lr": [
        "def answer(step, d_model, warmup):\n"
        "    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)",
    ],
    "check_greedy_decode": [
        """
        def answer(model, src, max_len):
            memory, src_mask = model.encode(src)
            ys = torch.tensor([[1]])
            for _ in range(max_len):
                logits = model.generator(model.decode(ys, memory, src_mask)[:, -1])
                ys = torch.cat([ys, logits.argmax(-1, keepdim=True)], dim=1)
                if ys[0, -1] == 2:
                    break
            return ys[0, 1:].tolist()
        """,
    ],
    "check_training_flops": [
        # counting the parameters of a real layer is allowed: the formula is the task
        """
        from transformer_edu import DecoderLayer, EncoderLayer, count_parameters
        def answer(d_model, n_layers, d_ff, src_tokens, tgt_tokens):
            enc = count_parameters(EncoderLayer(d_model, 1, d_ff))
            dec = count_parameters(DecoderLayer(d_model, 1, d_ff))
            return 6 * n_layers * (enc * src_tokens + dec * tgt_tokens)
        """,
    ],
    "check_length_penalty": [
        "def answer(length, alpha):\n    return ((5 + length) / 6) ** alpha",
    ],
    "check_beam_search": [
        """
        def answer(model, src, beam_size, max_len):
            memory, src_mask = model.encode(src)
            ys, scores, done = torch.tensor([[1]]), torch.zeros(1), []
            for _ in range(max_len):
                k = ys.size(0)
                h = model.decode(ys, memory.expand(k, -1, -1),
                                 src_mask.expand(k, -1, -1, -1))
                logp = model.generator(h[:, -1]).log_softmax(-1)  # (k, V)
                total = (scores[:, None] + logp).flatten()
                top, idx = total.topk(min(beam_size, total.numel()))
                rows, toks = idx // logp.size(1), idx % logp.size(1)
                ys = torch.cat([ys[rows], toks[:, None]], dim=1)
                ended = toks == 2
                done += [(y[1:].tolist(), float(s)) for y, s in zip(ys[ended], top[ended])]
                best = max((s for _, s in done), default=-math.inf)
                live = ~ended & (top > best)
                if not live.any():
                    break
                ys, scores = ys[live], top[live]
            else:
                done += [(y[1:].tolist(), float(s)) for y, s in zip(ys, scores)]
            return max(done, key=lambda d: d[1])[0]
        """,
    ],
    "check_cached_beam_step": [
        """
        def answer(model, ys, memory, src_mask, cache, parents):
            for layer in cache:
                for name, (k, v) in list(layer.items()):
                    layer[name] = (k.index_select(0, parents), v.index_select(0, parents))
            h = model.decode(ys[:, -1:], memory, src_mask, cache, ys.size(1) - 1)
            return F.log_softmax(model.generator(h[:, -1]), dim=-1), cache
        """,
    ],
    "check_top_p": [
        """
        def answer(logits, top_p):
            probs = F.softmax(logits, dim=-1)
            p, order = torch.sort(probs, dim=-1, descending=True)
            keep = torch.cumsum(p, -1) - p < top_p
            mask = torch.zeros_like(keep).scatter(-1, order, keep)
            kept = torch.where(mask, probs, torch.zeros_like(probs))
            return kept / kept.sum(-1, keepdim=True)
        """,
    ],
    "check_corpus_bleu": [
        """
        from collections import Counter
        def answer(hyps, refs):
            hits, totals = [0] * 4, [0] * 4
            for h, r in zip(hyps, refs):
                for n in range(1, 5):
                    hg = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
                    rg = Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
                    hits[n - 1] += sum(min(c, rg[g]) for g, c in hg.items())
                    totals[n - 1] += sum(hg.values())
            if 0 in hits:
                return 0.0
            c, r = sum(map(len, hyps)), sum(map(len, refs))
            bp = min(1.0, math.exp(1 - r / c))
            return 100 * bp * math.exp(sum(math.log(a / b) for a, b in zip(hits, totals)) / 4)
        """,
    ],
}  # fmt: skip


def answer_source(source: str) -> str:
    """An answer's code as a notebook cell holds it."""
    return textwrap.dedent(source).strip() + "\n"


def load_answer(source: str):
    """Run an answer's code as a notebook would; its ``answer``."""
    namespace: dict = {"__name__": "__main__"}
    code = PRELUDE + answer_source(source)
    exec(compile(code, "<answer>", "exec"), namespace)
    return namespace["answer"]


def table_key(ex: Exercise) -> str:
    """The tables' key for one of the grader's exercises: its checker, with its kind."""
    return f"{ex.checker}[{ex.kind}]" if ex.kind else ex.checker


def check(key: str, answer) -> CheckResult:
    """Run the checker ``key`` names ("check_score_function[dot]": with its kind)."""
    name, _, kind = key.partition("[")
    kwargs = {"kind": kind.rstrip("]")} if kind else {}
    return CHECKERS[name](answer, quiet=True, **kwargs)


FORBIDDEN_CASES = [
    (key, *entry) for key, entries in FORBIDDEN.items() for entry in entries
]
ALLOWED_CASES = [
    (key, src) for key, sources in ALLOWED_BLOCKS.items() for src in sources
]


def test_the_tables_cover_every_kind_of_score():
    # every registered checker and exercise: test_registry; here, the kinds that no
    # exercise grades too (general)
    for table in (FORBIDDEN, ALLOWED_BLOCKS):
        kinds = {key for key in table if key.startswith("check_score_function[")}
        assert kinds == {f"check_score_function[{k}]" for k in SCORE_FUNCTIONS}


@pytest.mark.parametrize(
    "key, shown, source",
    FORBIDDEN_CASES,
    ids=[f"{key}-{i}-{shown}" for i, (key, shown, _) in enumerate(FORBIDDEN_CASES)],
)
def test_a_forbidden_implementation_fails_naming_it(key, shown, source):
    result = check(key, load_answer(source))
    assert not result and result.status == "failed", result.message
    # the first name shown is what the answer called (not what that called in turn)
    assert f"{CALLED_REFERENCE}: {shown}," in result.message, result.message


@pytest.mark.parametrize(
    "key, source",
    ALLOWED_CASES,
    ids=[f"{k}-{i}" for i, (k, _) in enumerate(ALLOWED_CASES)],
)
def test_an_answer_from_allowed_blocks_passes(key, source):
    result = check(key, load_answer(source))
    assert result, result.message


def test_the_watch_ends_with_the_check():
    # the checker's torch function mode is gone, and torch's own calls are free again
    answer = load_answer(FORBIDDEN["check_layer_norm"][0][1])
    assert not check("check_layer_norm", answer)
    assert not torch._C._is_torch_function_mode_enabled()
    x = torch.randn(2, 4)
    torch.testing.assert_close(
        answer(x, torch.ones(4), torch.zeros(4)), torch.layer_norm(x, (4,))
    )


def test_an_alias_bound_before_the_check_is_seen():
    from transformer_edu.model.masks import causal_mask as bound_early

    mine = bound_early  # the student's name for it

    result = CHECKERS["check_causal_mask"](lambda T: mine(T), quiet=True)
    assert not result and CALLED_REFERENCE in result.message
    assert "transformer_edu.model.masks.causal_mask" in result.message


def test_calling_the_reference_fails_even_when_the_answer_raises_afterwards():
    def sneaky(T):
        causal_mask(T)
        raise NotImplementedError

    result = CHECKERS["check_causal_mask"](sneaky, quiet=True)
    assert result.status == "failed" and CALLED_REFERENCE in result.message


def test_switching_the_profiler_off_is_reported():
    def off(T):
        sys.setprofile(None)
        return causal_mask(T)[0, 0]

    result = CHECKERS["check_causal_mask"](off, quiet=True)
    assert not result and "profiler" in result.message


def test_switching_the_profiler_off_does_not_hide_torch_functions():
    def off(x, weight, bias, eps=1e-5):
        sys.setprofile(None)
        return torch.layer_norm(x, x.shape[-1:], weight, bias, eps)

    result = CHECKERS["check_layer_norm"](off, quiet=True)
    assert not result and f"{CALLED_REFERENCE}: torch.layer_norm," in result.message


def test_the_previous_profiler_is_restored():
    calls = []

    def mine(frame, event, arg):
        calls.append(event)

    sys.setprofile(mine)
    try:
        CHECKERS["check_causal_mask"](lambda T: causal_mask(T)[0, 0], quiet=True)
        assert sys.getprofile() is mine
    finally:
        sys.setprofile(None)


def test_a_copy_of_the_references_code_is_the_reference():
    # a function made from a copy of the reference's code object, renamed and moved
    import types

    copied = causal_mask.__code__.replace(co_name="mine", co_firstlineno=1)
    mine = types.FunctionType(
        copied, causal_mask.__globals__, "mine", causal_mask.__defaults__
    )
    mine.__kwdefaults__ = causal_mask.__kwdefaults__
    result = CHECKERS["check_causal_mask"](lambda T: mine(T)[0, 0], quiet=True)
    assert (
        not result
        and f"{CALLED_REFERENCE}: transformer_edu.model.masks.causal_mask,"
        in (result.message)
    ), result.message


def test_switching_torch_function_modes_off_is_reported():
    def off(x, weight, bias, eps=1e-5):
        with torch._C.DisableTorchFunction():
            return torch.layer_norm(x, x.shape[-1:], weight, bias, eps)

    result = CHECKERS["check_layer_norm"](off, quiet=True)
    assert not result and "DisableTorchFunction" in result.message, result.message


def test_taking_the_checkers_mode_off_the_stack_is_reported():
    def popped(x, weight, bias, eps=1e-5):
        with torch.overrides._pop_mode_temporarily():
            return torch.layer_norm(x, x.shape[-1:], weight, bias, eps)

    result = CHECKERS["check_layer_norm"](popped, quiet=True)
    assert not result and "torch function mode" in result.message, result.message


def test_the_references_source_compiled_again_is_the_reference():
    """code_key is of the instructions, not of the file, and not of what the compiler
    chose from the rest of the file (a file that imports torch calls torch.ones with
    other instructions than a cell that does not): exec of the source is seen."""
    import inspect

    from transformer_edu.exercises.watch import code_key
    from transformer_edu.model import masks

    ns: dict = {}
    exec(
        inspect.getsource(masks.causal_mask),
        {"torch": torch, "Tensor": torch.Tensor},
        ns,
    )
    copy = ns["causal_mask"]
    assert copy.__code__.co_code != masks.causal_mask.__code__.co_code  # not the same
    assert code_key(copy.__code__) == code_key(masks.causal_mask.__code__)

    def mine(T):  # an honest answer is not the reference
        return torch.ones(T, T, dtype=torch.bool).tril()

    assert code_key(mine.__code__) != code_key(masks.causal_mask.__code__)
    # a method with no docstring, its lines typed again elsewhere: not a copy
    from transformer_edu.model.norm import LayerNorm

    ns = {}
    exec(
        textwrap.dedent(inspect.getsource(LayerNorm.forward)),
        {"torch": torch, "Tensor": torch.Tensor},
        ns,
    )
    forward = LayerNorm.forward.__code__
    assert not isinstance(forward.co_consts[0], str)
    assert code_key(ns["forward"].__code__) != code_key(forward)
    result = CHECKERS["check_causal_mask"](lambda T: copy(T)[0, 0], quiet=True)
    assert not result and "transformer_edu.model.masks.causal_mask" in result.message
