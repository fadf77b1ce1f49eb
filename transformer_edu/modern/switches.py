"""What changed since 2017 (chapter 13), as switches on the book's model.

``TransformerConfig`` may name a successor for a piece of the 2017 model:
``norm="rms"``, ``ffn="swiglu"`` / ``"geglu"``, ``n_kv_heads=G``,
``positional="rope"`` / ``"alibi"``, ``n_experts=E``. ``apply_switches`` puts each in
place of the original, in every layer. With the defaults it changes nothing: the
model stays the paper's, bit for bit, and its checkpoints load as before.
"""

from __future__ import annotations

from torch import nn

from ..model.attention import POSITIONS, GroupedQueryAttention, MultiHeadAttention
from ..model.config import TransformerConfig
from ..model.feed_forward import feed_forward
from ..model.norm import NORMS, LayerNorm
from .moe import MixtureOfExperts


def apply_switches(model: nn.Module, config: TransformerConfig) -> nn.Module:
    """Swap the pieces the config's switches name into every stack of ``model`` (its
    ``encoder`` if it has one, and its ``decoder``), in place; returns ``model``."""
    stacks = [
        s for s in (getattr(model, "encoder", None), model.decoder) if s is not None
    ]
    for stack in stacks:
        for layer in stack.layers:
            _swap_layer(layer, config)
        if config.norm != "layer" and isinstance(stack.norm, LayerNorm):
            stack.norm = _norm(stack.norm, config.norm)
    return model


def _swap_layer(layer: nn.Module, c: TransformerConfig) -> None:
    for name in ("norm1", "norm2", "norm3"):  # the decoder has a third
        old = getattr(layer, name, None)
        if c.norm != "layer" and isinstance(old, LayerNorm):
            setattr(layer, name, _norm(old, c.norm))
    if c.n_experts or c.ffn != "relu":
        d_model, d_ff = layer.ffn.linear1.in_features, layer.ffn.linear1.out_features
        p = layer.ffn.dropout.p  # the dropout on the hidden units stays
        layer.ffn = (
            MixtureOfExperts(d_model, d_ff, c.n_experts, c.expert_top_k, p, c.ffn)
            if c.n_experts
            else feed_forward(c.ffn, d_model, d_ff, p)
        )
    position = c.positional if c.positional in POSITIONS else None
    if c.n_kv_heads is not None or position:  # positions: self-attention only
        layer.self_attn = _attention(layer.self_attn, c.n_kv_heads, position)
    if c.n_kv_heads is not None and hasattr(layer, "cross_attn"):
        layer.cross_attn = _attention(layer.cross_attn, c.n_kv_heads, None)


def _norm(old: LayerNorm, kind: str) -> nn.Module:
    return NORMS[kind](old.d_model, old.eps, old.fast)


def _attention(
    old: MultiHeadAttention, n_kv_heads: int | None, position: str | None
) -> GroupedQueryAttention:
    bias = old.q_proj.bias is not None
    return GroupedQueryAttention(
        old.d_model, old.n_heads, old.dropout, bias, old.fast, n_kv_heads, position
    )
