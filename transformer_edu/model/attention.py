"""Scaled dot-product attention and multi-head attention.

Two paths compute the same thing: a reference path written out step by step (what the
book teaches, and the one that can hand back the attention weights) and a fast path
through ``F.scaled_dot_product_attention`` (nanoGPT's ``flash`` flag). Tests prove that
they agree. Masks are boolean with True = may attend (see ``masks.py``).

``GroupedQueryAttention`` is the same attention as models write it since 2017
(chapter 13): fewer key/value heads than query heads, and positions inside attention;
it runs ``MultiHeadAttention.forward``, where both are one step each.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..modern.alibi import alibi_bias, alibi_mask
from ..modern.rope import apply_rotary
from .masks import causal_mask, check_mask, combine_masks


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """softmax(Q Kᵀ / sqrt(d_k)) V, returning the output and the attention weights.

    Shape: query (..., T, d_k), key (..., S, d_k), value (..., S, d_v),
    mask broadcastable to (..., T, S) with True = may attend
    -> output (..., T, d_v), weights (..., T, S) (before dropout).
    ``bias`` (broadcastable to (..., T, S)) is added to the scores: ALiBi, chapter 13.
    """
    d_k = query.size(-1)
    # 1) similarity of every query with every key; dividing by sqrt(d_k) keeps the
    #    variance of the scores near 1 whatever the head size
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., T, S)
    if bias is not None:
        scores = scores + bias  # a position signal inside attention (chapter 13)
    if mask is not None:
        # 2) blocked keys get the dtype's most negative finite value, not -inf, so a
        #    row with every key blocked stays finite instead of turning into NaN
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    # 3) normalise over the keys: each query's weights sum to 1
    weights = scores.softmax(dim=-1)  # (..., T, S)
    if mask is not None:
        # 4) blocked keys get exactly 0, and a fully blocked row attends to nothing
        weights = weights.masked_fill(~mask, 0.0)
    # 5) the output is the weighted average of the values
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ value, weights  # (..., T, d_v), (..., T, S)


class MultiHeadAttention(nn.Module):
    """H attention heads of size d_model / H side by side, then one output projection.

    Set ``record_weights = True`` to keep the last forward's weights in
    ``attn_weights`` (B, H, T, S); it switches to the reference path, so it costs
    nothing when off. ``fast=False`` forces the reference path.
    """

    # what a later variant does to the heads before the scores (chapter 13's
    # GroupedQueryAttention.before_scores); the paper's attention does nothing there
    before_scores: Callable[..., tuple[Tensor, ...]] | None = None

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        fast: bool = True,
    ):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout, self.fast = dropout, fast
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.record_weights = False
        self.attn_weights: Tensor | None = None

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, L, D) -> (B, H, L, Dh): head h gets features h*Dh .. (h+1)*Dh - 1."""
        B, L, _ = x.shape
        return x.view(B, L, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, L, Dh)

    def combine_heads(self, x: Tensor) -> Tensor:
        """(B, H, L, Dh) -> (B, L, D): the inverse of ``split_heads``."""
        B, _, L, _ = x.shape
        return x.transpose(1, 2).reshape(B, L, self.d_model)  # (B, L, D)

    def project_q(self, query: Tensor) -> Tensor:
        """Queries in heads: (B, T, D) -> (B, H, T, Dh)."""
        return self.split_heads(self.q_proj(query))

    def project_kv(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values in heads: (B, S, D) -> two (B, H, S, Dh) (cacheable)."""
        return self.split_heads(self.k_proj(key)), self.split_heads(self.v_proj(value))

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        kv: tuple[Tensor, Tensor] | None = None,
    ) -> Tensor:
        """Attend from ``query`` to ``key``/``value`` (self-attention when omitted).

        ``kv`` passes keys and values already projected into heads (a cache), instead
        of ``key``/``value``.

        Shape: query (B, T, D), key and value (B, S, D), attn_mask broadcastable to
        (B, H, T, S) with True = may attend -> (B, T, D).
        """
        if query.dim() != 3 or query.size(-1) != self.d_model:
            raise ValueError(
                f"query must be (B, T, d_model={self.d_model}), got {tuple(query.shape)}"
            )
        if kv is None:
            key = query if key is None else key
            value = key if value is None else value
            if (
                key.dim() != 3
                or key.shape[0] != query.shape[0]
                or key.shape[-1] != self.d_model
            ):
                raise ValueError(
                    f"key must be (B={query.shape[0]}, S, d_model={self.d_model}), "
                    f"got {tuple(key.shape)}"
                )
            if value.shape != key.shape:
                raise ValueError(
                    f"value shape {tuple(value.shape)} differs from key shape {tuple(key.shape)}"
                )
        B, T, _ = query.shape
        # 1) project: queries from `query`, keys and values from `key`/`value`,
        #    each split into H heads of size Dh (one matmul for all heads)
        q = self.project_q(query)  # (B, H, T, Dh)
        k, v = self.project_kv(key, value) if kv is None else kv  # (B, H, S, Dh)
        S = k.size(2)
        if T == 0 or S == 0:
            raise ValueError(f"attention over an empty sequence: T={T}, S={S}")
        # 2) attend in every head at once, to the keys the mask allows
        mask = attn_mask
        if is_causal:
            mask = combine_masks(mask, causal_mask(T, query.device, key_size=S))
        if mask is not None:
            check_mask(mask, B, self.n_heads, T, S)
        bias = None  # the paper adds positions to the embeddings, not in here
        if self.before_scores is not None:  # chapter 13's variants
            q, k, v, bias = self.before_scores(q, k, v)
        p = self.dropout if self.training else 0.0  # no dropout in eval mode
        if self.record_weights or not self.fast:
            # the reference path, written out step by step; it returns the weights
            out, weights = scaled_dot_product_attention(q, k, v, mask, p, bias)
            self.attn_weights = weights.detach() if self.record_weights else None
        else:
            # the fast path: PyTorch's fused kernel, same result, no weights
            fused = mask if bias is None else alibi_mask(bias, mask)  # a float mask
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=fused, dropout_p=p)
            if mask is not None:
                # a query with no allowed key gets 0, as on the reference path
                out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        # 3) concatenate the heads and mix them with W_o
        return self.out_proj(self.combine_heads(out))  # (B, T, D)

    @classmethod
    def from_torch(
        cls, m: nn.MultiheadAttention, fast: bool = True
    ) -> MultiHeadAttention:
        """A MultiHeadAttention carrying exactly the weights of ``m`` (batch first)."""
        if not m._qkv_same_embed_dim:
            raise ValueError("from_torch needs kdim == vdim == embed_dim")
        if m.bias_k is not None or m.add_zero_attn:
            raise ValueError("from_torch does not support add_bias_kv or add_zero_attn")
        bias = m.in_proj_bias is not None
        ours = cls(m.embed_dim, m.num_heads, m.dropout, bias, fast)
        ours.to(device=m.in_proj_weight.device, dtype=m.in_proj_weight.dtype)
        with torch.no_grad():
            # PyTorch keeps W_q, W_k, W_v stacked in one (3D, D) in_proj_weight
            projs = (ours.q_proj, ours.k_proj, ours.v_proj)
            for proj, w in zip(projs, m.in_proj_weight.chunk(3), strict=True):
                proj.weight.copy_(w)
            if bias:
                for proj, b in zip(projs, m.in_proj_bias.chunk(3), strict=True):
                    proj.bias.copy_(b)
            ours.out_proj.weight.copy_(m.out_proj.weight)
            if bias:
                ours.out_proj.bias.copy_(m.out_proj.bias)
        return ours


POSITIONS = ("rope", "alibi")  # position signals that act inside attention


class GroupedQueryAttention(MultiHeadAttention):
    """Multi-head attention with G key/value heads, each shared by H / G query heads
    (grouped-query attention, Ainslie et al. 2023; G = 1 is multi-query attention,
    Shazeer 2019; G = H is the paper's), and an optional position signal inside
    attention: ``position="rope"`` rotates queries and keys, ``"alibi"`` subtracts a
    distance penalty from the scores (chapter 13).

    A cache (``project_kv``) holds G heads instead of H: the memory that sharing saves.
    It holds the keys before RoPE's rotation, which is applied at every attention.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        fast: bool = True,
        n_kv_heads: int | None = None,
        position: str | None = None,
    ):
        super().__init__(d_model, n_heads, dropout, bias, fast)
        G = n_heads if n_kv_heads is None else n_kv_heads
        if not 1 <= G <= n_heads or n_heads % G:
            raise ValueError(f"n_heads={n_heads} is not a multiple of n_kv_heads={G}")
        if position not in (None, *POSITIONS):
            raise ValueError(f"position={position!r}; expected None, 'rope' or 'alibi'")
        if position == "rope" and self.d_k % 2:
            raise ValueError(f"RoPE rotates pairs of features: d_k={self.d_k} is odd")
        self.n_kv_heads, self.position = G, position
        # keys and values for G heads only: (D, G·Dh) matrices instead of (D, D)
        self.k_proj = nn.Linear(d_model, G * self.d_k, bias=bias)
        self.v_proj = nn.Linear(d_model, G * self.d_k, bias=bias)

    def project_kv(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values in G heads: (B, S, D) -> two (B, G, S, Dh) (cacheable)."""
        B, S, _ = key.shape
        k = self.k_proj(key).view(B, S, self.n_kv_heads, self.d_k).transpose(1, 2)
        v = self.v_proj(value).view(B, S, self.n_kv_heads, self.d_k).transpose(1, 2)
        return k, v  # (B, G, S, Dh) each

    def before_scores(
        self, q: Tensor, k: Tensor, v: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """RoPE rotates q and k, ALiBi makes a bias for the scores (``position_inside``);
        then each of the G key/value heads serves the H / G query heads of its group,
        in a row. Shape: q (B, H, T, Dh), k and v (B, G, S, Dh) -> q, k, v (B, H, ·, Dh),
        bias (H, T, S) or None."""
        bias = None
        if self.position is not None:
            q, k, bias = self.position_inside(q, k)
        group = self.n_heads // self.n_kv_heads
        if group > 1:  # G = H: nothing to share
            k = k.repeat_interleave(group, dim=1)  # (B, H, S, Dh)
            v = v.repeat_interleave(group, dim=1)
        return q, k, v, bias

    def position_inside(
        self, q: Tensor, k: Tensor
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """RoPE: q and k rotated by their positions; ALiBi: a bias for the scores.

        The keys sit at positions 0..S-1 and the queries are the last T of them
        (self-attention, with or without a cache).
        Shape: q (B, H, T, Dh), k (B, G, S, Dh) -> the same two, bias (H, T, S) or None.
        """
        T, S = q.size(2), k.size(2)
        k_pos = torch.arange(S, device=q.device)  # where the keys sit...
        q_pos = k_pos[S - T :]  # ...and the queries: the last T of them
        if self.position == "rope":  # rotate each by its own position
            return apply_rotary(q, q_pos), apply_rotary(k, k_pos), None
        bias = alibi_bias(self.n_heads, q_pos, k_pos).to(q.dtype)  # -m_h |i - j|
        return q, k, bias
