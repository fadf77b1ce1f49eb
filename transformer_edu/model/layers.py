"""One encoder block and one decoder block, post-LN (the paper) or pre-LN."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .feed_forward import PositionwiseFeedForward
from .norm import LayerNorm


class EncoderLayer(nn.Module):
    """Self-attention then a feed-forward network, each wrapped in add & norm.

    ``dropout`` acts on each sub-layer's output (the paper's place); the attention
    weights and the feed-forward's hidden ReLU get ``attention_dropout`` and
    ``activation_dropout`` (None: ``dropout`` too, as in ``nn.TransformerEncoderLayer``).

    Shape: x (B, S, D), src_mask broadcastable to (B, H, S, S) -> (B, S, D).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        fast: bool = True,
        attention_dropout: float | None = None,
        activation_dropout: float | None = None,
    ):
        super().__init__()
        self.norm_first = norm_first
        p_attn = dropout if attention_dropout is None else attention_dropout
        p_act = dropout if activation_dropout is None else activation_dropout
        self.self_attn = MultiHeadAttention(d_model, n_heads, p_attn, fast=fast)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, p_act)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, fast)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, fast)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x: Tensor, src_mask: Tensor | None = None) -> Tensor:
        # Each sub-layer is wrapped in a residual connection and a LayerNorm: after
        # the sum (post-LN, the paper) or on the sub-layer's input (pre-LN).
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, src_mask: Tensor | None) -> Tensor:
        # every token looks at every (unmasked) token of the same sentence
        return self.dropout1(self.self_attn(x, x, x, src_mask))

    def _ff_block(self, x: Tensor) -> Tensor:
        # then each token is transformed on its own
        return self.dropout2(self.ffn(x))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder output, feed-forward.

    ``cache`` (a dict, one per layer) enables incremental decoding: pass only the new
    target positions; past keys/values and the memory's keys/values are kept in it.
    Dropout as in ``EncoderLayer``.

    Shape: x (B, T, D), memory (B, S, D), tgt_mask (B, H, T, T) and memory_mask
    (B, H, T, S), both broadcastable -> (B, T, D).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        fast: bool = True,
        attention_dropout: float | None = None,
        activation_dropout: float | None = None,
    ):
        super().__init__()
        self.norm_first = norm_first
        p_attn = dropout if attention_dropout is None else attention_dropout
        p_act = dropout if activation_dropout is None else activation_dropout
        self.self_attn = MultiHeadAttention(d_model, n_heads, p_attn, fast=fast)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, p_attn, fast=fast)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, p_act)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, fast)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, fast)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, fast)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def _sa_block(
        self, x: Tensor, tgt_mask: Tensor | None, cache: dict | None
    ) -> Tensor:
        # each target position looks at itself and earlier positions only
        if cache is None:
            return self.dropout1(self.self_attn(x, x, x, tgt_mask))
        # incremental: the new positions' keys/values join those of the past ones
        k, v = self.self_attn.project_kv(x, x)  # (B, H, t, Dh)
        if "self_kv" in cache:
            k = torch.cat([cache["self_kv"][0], k], dim=2)  # (B, H, past + t, Dh)
            v = torch.cat([cache["self_kv"][1], v], dim=2)
        cache["self_kv"] = (k, v)
        return self.dropout1(self.self_attn(x, attn_mask=tgt_mask, kv=(k, v)))

    def _mha_block(
        self, x: Tensor, memory: Tensor, memory_mask: Tensor | None, cache: dict | None
    ) -> Tensor:
        # queries from the decoder, keys and values from the encoder output
        if cache is None:
            return self.dropout2(self.cross_attn(x, memory, memory, memory_mask))
        if "memory_kv" not in cache:  # the encoder output does not change: project once
            cache["memory_kv"] = self.cross_attn.project_kv(memory, memory)
        return self.dropout2(
            self.cross_attn(x, attn_mask=memory_mask, kv=cache["memory_kv"])
        )

    def _ff_block(self, x: Tensor) -> Tensor:
        # position-wise feed-forward
        return self.dropout3(self.ffn(x))

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: dict | None = None,
    ) -> Tensor:
        # the encoder layer's two wrappings, around three sub-layers
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, cache)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, cache)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, cache))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, cache))
            x = self.norm3(x + self._ff_block(x))
        return x


def _copy_(dst: Tensor, src: Tensor | None, name: str) -> None:
    if src is None:
        raise ValueError(f"{name}: the source module has no such parameter")
    if dst.shape != src.shape:
        raise ValueError(f"{name}: shape {tuple(src.shape)} != ours {tuple(dst.shape)}")
    dst.copy_(src)


def _check_torch_layer(layer: nn.Module) -> None:
    if (
        getattr(layer, "activation_relu_or_gelu", 1) != 1
        and layer.activation is not F.relu
    ):
        raise ValueError(
            f"from_torch supports ReLU only, got activation {layer.activation}"
        )


def copy_torch_layer_(ours: nn.Module, theirs: nn.Module) -> None:
    """Copy an nn.Transformer{Encoder,Decoder}Layer's weights into ours, in place."""
    _check_torch_layer(theirs)
    pairs = [("self_attn", "self_attn")]
    if isinstance(ours, DecoderLayer):
        pairs.append(("cross_attn", "multihead_attn"))
    with torch.no_grad():
        for mine, their in pairs:
            fresh = MultiHeadAttention.from_torch(
                getattr(theirs, their), ours.self_attn.fast
            )
            getattr(ours, mine).load_state_dict(fresh.state_dict())
        for i in (1, 2):
            lin, their_lin = (
                getattr(ours.ffn, f"linear{i}"),
                getattr(theirs, f"linear{i}"),
            )
            _copy_(lin.weight, their_lin.weight, f"linear{i}.weight")
            _copy_(lin.bias, their_lin.bias, f"linear{i}.bias")
        n_norms = 3 if isinstance(ours, DecoderLayer) else 2
        for i in range(1, n_norms + 1):
            norm, their_norm = getattr(ours, f"norm{i}"), getattr(theirs, f"norm{i}")
            _copy_(norm.weight, their_norm.weight, f"norm{i}.weight")
            _copy_(norm.bias, their_norm.bias, f"norm{i}.bias")
