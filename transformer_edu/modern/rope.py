"""Rotary position embedding (RoPE, Su et al.): positions as rotations of q and k.

Instead of adding a vector to the embeddings (chapter 3), RoPE rotates each pair of
features of every query and key by an angle that grows with the token's position, at
the sinusoids' frequencies. A rotation by m·θ dotted with one by n·θ is a rotation by
(n - m)·θ: the attention score sees only the offset between the two tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..devices import wide_float

BASE = 10000.0  # as the sinusoids of the paper (chapter 3) and RoFormer


def rotary_angles(positions: Tensor, d_head: int, base: float = BASE) -> Tensor:
    """θ[p, i] = p · base^(-2i / d_head), one angle per position and pair of features.

    Shape: positions (...,) integers -> (..., d_head / 2) float32.
    """
    if d_head % 2:
        raise ValueError(f"RoPE rotates pairs of features: d_head={d_head} is odd")
    wide = wide_float(positions.device)  # float64, but float32 on MPS (it has none)
    two_i = torch.arange(0, d_head, 2, device=positions.device, dtype=wide)
    freq = base ** (-two_i / d_head)  # (d_head / 2,): the sinusoids' frequencies
    return (positions.to(wide)[..., None] * freq).float()  # (..., d_head / 2)


def apply_rotary(x: Tensor, positions: Tensor, base: float = BASE) -> Tensor:
    """Rotate the pairs (x₀, x₁), (x₂, x₃), … of each vector by its position's angles.

    Shape: x (B, H, L, Dh), positions (L,) or (B, L) -> (B, H, L, Dh).
    """
    angles = rotary_angles(positions, x.size(-1), base)  # (L, Dh/2) or (B, L, Dh/2)
    if angles.dim() == 3:
        angles = angles[:, None]  # (B, 1, L, Dh/2): the same angles in every head
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (B, H, L, Dh/2): each pair's two halves
    # [cos -sin; sin cos] applied to each pair (even, odd)
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.flatten(-2)  # (B, H, L, Dh): the pairs back in their places
