"""A decoder-only translator (chapter 13): one stack reads "source <bos> target" and
predicts the target, the way a GPT would translate; ``prefix=True`` lets the source
positions see each other both ways (a prefix LM, Raffel et al. 2020, §3.2).

It has the Transformer's interface (``encode``, ``decode``, ``generator``,
``decoder.new_cache``), so ``train``, ``greedy_decode`` and ``exact_match`` run it
unchanged. Its "memory" is what its KV cache holds once it has read the source: the
keys and values of the source positions, in every layer.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..model.attention import POSITIONS
from ..model.config import TransformerConfig
from ..model.embeddings import (
    POSITIONAL_ENCODINGS,
    NoPositionalEncoding,
    TokenEmbedding,
)
from ..model.layers import DecoderLayer, EncoderLayer
from ..model.masks import causal_mask, combine_masks, padding_mask
from ..model.transformer import Generator, Transformer, _Stack, make_config
from .switches import apply_switches


class DecoderOnlyLayer(EncoderLayer):
    """A GPT block: an encoder layer (the mask makes it causal) whose self-attention
    can keep a KV cache, as the decoder's does.

    Shape: x (B, L, D), mask broadcastable to (B, H, L, past + L) -> (B, L, D).
    """

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: dict | None = None
    ) -> Tensor:
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), mask, cache)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, mask, cache))
            x = self.norm2(x + self._ff_block(x))
        return x

    # the decoder's masked self-attention with its KV cache, one home for both: without
    # a cache it is the encoder layer's; with one, the new positions' keys and values
    # (G heads of them under grouped-query attention) join those of the past ones
    _sa_block = DecoderLayer._sa_block


class DecoderOnlyStack(_Stack):
    """N ``DecoderOnlyLayer`` (+ final norm); ``cache`` is one dict per layer.

    Shape: x (B, L, D), mask broadcastable to (B, H, L, past + L) -> (B, L, D).
    """

    layer_cls = DecoderOnlyLayer

    def new_cache(self) -> list[dict]:
        return [{} for _ in self.layers]

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: list[dict] | None = None
    ) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, None if cache is None else cache[i])
        return x if self.norm is None else self.norm(x)


class DecoderOnlyTranslator(nn.Module):
    """Source and target embeddings, one stack of ``config.n_decoder_layers`` layers
    over "source <bos> target", and the generator; the loss is on the target only,
    as the encoder–decoder's. ``config.n_encoder_layers`` must be 0.

    A target token at step t sits at position S_b + t of its row (S_b: the source's
    real length), whatever the padding. RoPE and ALiBi are not supported here.
    Shape: src (B, S), tgt (B, T) token ids -> logits (B, T, tgt_vocab_size).
    """

    reset_parameters = Transformer.reset_parameters  # initialised as the Transformer

    def __init__(self, config: TransformerConfig, prefix: bool = False):
        super().__init__()
        self.config = c = config
        self.prefix = prefix  # True: the source positions see each other both ways
        if c.n_encoder_layers:
            raise ValueError(
                f"a decoder-only model has no encoder: n_encoder_layers="
                f"{c.n_encoder_layers}, expected 0 (n_decoder_layers sets its depth)"
            )
        if c.positional in POSITIONS:
            raise ValueError(
                f"positional={c.positional!r} is not supported by the decoder-only "
                "translator (its padded rows would shift the distances)"
            )
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_idx, "src")
        self.tgt_embed = (
            self.src_embed
            if c.share_embeddings
            else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_idx, "tgt")
        )
        # one sequence, one positional encoding: source 0..S-1, then the target
        self.pos = POSITIONAL_ENCODINGS[c.positional](c.d_model, c.max_len, c.dropout)
        self.decoder = DecoderOnlyStack(
            c.n_decoder_layers, c.d_model, c.n_heads, c.d_ff, c.dropout,
            norm_first=c.norm_first, final_norm=c.use_final_norm,
            layer_norm_eps=c.layer_norm_eps, fast=c.fast,
            attention_dropout=c.attention_dropout,
            activation_dropout=c.activation_dropout,
        )  # fmt: skip
        self.generator = Generator(c.d_model, c.tgt_vocab_size)
        apply_switches(self, c)
        self.reset_parameters()

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Read the source once. Source ids (B, S) -> memory (B, S, L·2·G·Dh), every
        layer's keys and values of the source positions, and the padding mask
        (B, 1, 1, S)."""
        src_mask = padding_mask(src, self.config.pad_idx)  # (B, 1, 1, S)
        mask = src_mask  # prefix LM: the source sees itself both ways
        if not self.prefix:  # GPT: each source word sees the ones before it only
            mask = combine_masks(src_mask, causal_mask(src.size(1), src.device))
        cache = self.decoder.new_cache()
        self.decoder(self.pos(self.src_embed(src)), mask, cache)  # fills the cache
        return self._pack(cache), src_mask

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor,
        cache: list[dict] | None = None,
        offset: int = 0,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        """Target ids (B, T) -> outputs (B, T, D), as ``Transformer.decode``: without a
        cache ``tgt`` is the whole prefix; with one it holds the new positions from
        ``offset`` on. ``tgt_mask`` (B, 1, T, T) replaces the look-ahead mask."""
        B, T = tgt.shape
        S = memory.size(1)
        if cache is None:
            cache = self.decoder.new_cache()
        if not cache[0]:  # the first step: the source's keys and values come first
            cache[:] = self._unpack(memory)
        # the queries see every real source word and the target up to themselves
        if tgt_mask is None:
            tgt_mask = causal_mask(T, tgt.device, key_size=offset + T)
        mask = torch.cat(
            [src_mask.expand(B, 1, T, S), tgt_mask.expand(B, 1, T, offset + T)], dim=-1
        )  # (B, 1, T, S + offset + T)
        x = self.tgt_embed(tgt)  # (B, T, D)
        if isinstance(self.pos, NoPositionalEncoding):
            x = self.pos(x)
        else:  # row b's target starts right after its S_b real source words
            start = src_mask.sum(-1).view(B, 1)  # (B, 1): S_b
            positions = start + offset + torch.arange(T, device=tgt.device)  # (B, T)
            if int(positions.max()) >= self.pos.max_len:
                raise ValueError(
                    f"source + target length {int(positions.max()) + 1} exceeds the "
                    f"positional encoding's max_len={self.pos.max_len}"
                )
            x = self.pos.dropout(x + self.pos.table()[positions].to(x.dtype))
        return self.decoder(x, mask, cache)

    def forward(
        self, src: Tensor, tgt: Tensor, tgt_mask: Tensor | None = None
    ) -> Tensor:
        """Teacher-forced logits over the target vocabulary: (B, T, V)."""
        memory, src_mask = self.encode(src)
        return self.generator(self.decode(tgt, memory, src_mask, tgt_mask=tgt_mask))

    # -- the source's keys and values as one tensor, batch first (beam search can
    #    expand it as it expands an encoder's memory) --

    def _kv_shape(self) -> tuple[int, int, int]:
        attn = self.decoder.layers[0].self_attn
        return (
            len(self.decoder.layers),
            getattr(attn, "n_kv_heads", attn.n_heads),
            attn.d_k,
        )

    def _pack(self, cache: list[dict]) -> Tensor:
        kv = torch.stack([torch.stack(layer["self_kv"]) for layer in cache])
        L, _, B, G, S, Dh = kv.shape  # (L, 2, B, G, S, Dh)
        return kv.permute(2, 4, 0, 1, 3, 5).reshape(B, S, L * 2 * G * Dh)

    def _unpack(self, memory: Tensor) -> list[dict]:
        L, G, Dh = self._kv_shape()
        B, S, _ = memory.shape
        kv = memory.reshape(B, S, L, 2, G, Dh).permute(2, 3, 0, 4, 1, 5)
        return [{"self_kv": (kv[i, 0], kv[i, 1])} for i in range(L)]  # (B, G, S, Dh)

    # -- looking inside (as the Transformer; there is no cross-attention) --

    def attention_modules(self) -> dict[str, list[nn.Module]]:
        return {"decoder_self": [layer.self_attn for layer in self.decoder.layers]}

    record_attention = Transformer.record_attention
    recording_attention = Transformer.recording_attention
    attention_weights = Transformer.attention_weights


def make_decoder_only(
    src_vocab_size: int,
    tgt_vocab_size: int,
    n_layers: int,
    prefix: bool = False,
    **kwargs,
) -> DecoderOnlyTranslator:
    """A decoder-only translator of ``n_layers`` layers; other keyword arguments are
    ``TransformerConfig`` fields, as for ``make_model``."""
    config = make_config(
        src_vocab_size, tgt_vocab_size, n_encoder_layers=0,
        n_decoder_layers=n_layers, **kwargs,
    )  # fmt: skip
    return DecoderOnlyTranslator(config, prefix)
