"""Attention masks, and the one place where mask polarity is converted.

Polarity of every mask in this package: a boolean tensor where **True means "may
attend"** (the query position may look at the key position). This is the convention
of ``F.scaled_dot_product_attention`` and of the Annotated Transformer (1 = keep).
``nn.Transformer`` / ``nn.MultiheadAttention`` use the opposite (True = "may NOT
attend") or additive float masks (-inf = blocked); convert with :func:`from_torch_mask`
and :func:`to_torch_mask`, never by hand.

Shapes broadcast against attention scores of shape (B, H, T_q, T_k).
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_idx: int = 0) -> Tensor:
    """True where a key is a real token; shape (B, 1, 1, S) for tokens (B, S)."""
    if tokens.dim() != 2:
        raise ValueError(
            f"tokens must be (B, S) token ids, got shape {tuple(tokens.shape)}"
        )
    return (tokens != pad_idx)[:, None, None, :]  # (B, 1, 1, S)


def causal_mask(
    size: int, device: torch.device | str | None = None, key_size: int | None = None
) -> Tensor:
    """Look-ahead mask: position t may attend to positions <= t; shape (1, 1, T, T).

    With ``key_size`` S >= T the last T of S positions are the queries (incremental
    decoding), and the mask has shape (1, 1, T, S).
    """
    key_size = size if key_size is None else key_size
    if size < 0 or key_size < size:
        raise ValueError(
            f"need 0 <= size <= key_size, got size={size}, key_size={key_size}"
        )
    keep = torch.ones(size, key_size, dtype=torch.bool, device=device)
    return keep.tril(key_size - size)[None, None]  # (1, 1, T, S)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """A position may be attended only if every mask allows it (logical AND)."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out


def target_mask(tgt: Tensor, pad_idx: int = 0) -> Tensor:
    """Decoder self-attention mask: no padding keys and no look-ahead; (B, 1, T, T)."""
    return combine_masks(
        padding_mask(tgt, pad_idx), causal_mask(tgt.size(1), tgt.device)
    )


def from_torch_mask(mask: Tensor | None) -> Tensor | None:
    """Convert an nn.Transformer-style mask to this package's polarity.

    Accepts a boolean mask (True = may NOT attend) or an additive float mask
    (0 = allowed, -inf = blocked), and returns a boolean mask with True = may attend.
    """
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return ~mask
    if mask.is_floating_point():
        return mask == 0  # -inf (or any large negative bias) counts as blocked
    raise ValueError(f"cannot interpret a mask of dtype {mask.dtype}")


def to_torch_mask(mask: Tensor | None) -> Tensor | None:
    """Convert this package's mask (True = may attend) to nn.Transformer's (True = blocked)."""
    return None if mask is None else ~mask


def key_padding_from_torch(key_padding_mask: Tensor | None) -> Tensor | None:
    """nn.Transformer's ``*_key_padding_mask`` (B, S), True = pad -> ours (B, 1, 1, S)."""
    keep = from_torch_mask(key_padding_mask)
    return None if keep is None else keep[:, None, None, :]


def check_mask(mask: Tensor, batch: int, heads: int, t_q: int, t_k: int) -> None:
    """Raise ValueError unless ``mask`` is boolean and broadcasts to (B, H, T_q, T_k)."""
    if mask.dtype != torch.bool:
        raise ValueError(
            f"attention masks are boolean with True = may attend; got dtype {mask.dtype} "
            "(convert float or nn.Transformer masks with masks.from_torch_mask)"
        )
    want = (batch, heads, t_q, t_k)
    shape = tuple(mask.shape)
    if mask.dim() != 4:
        # a (B, S) mask would broadcast silently against (B, H, T, S) whenever B == T
        raise ValueError(
            f"attention masks have 4 dimensions (B or 1, H or 1, T_q or 1, T_k); got "
            f"shape {shape} (a (B, S) padding mask needs [:, None, None, :])"
        )
    ok = all(m in (1, w) for m, w in zip(reversed(shape), reversed(want), strict=False))
    if not ok:
        raise ValueError(
            f"mask of shape {shape} does not broadcast to the attention scores "
            f"(B, H, T_q, T_k) = {want}"
        )
