"""ALiBi (Press et al., 2022): positions as a penalty on the attention scores.

Nothing is added to the embeddings; each head subtracts m_h · (distance between query
and key) from its scores, with a fixed slope m_h per head. The paper's models are
causal, where the distance is i - j; for a bidirectional encoder we use |i - j|.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def alibi_slopes(n_heads: int) -> Tensor:
    """The heads' slopes m: 2^(-8/n), 2^(-16/n), … for n a power of two; otherwise the
    slopes of the power of two below n and every other slope of the one above (the
    paper's code). Shape: (n_heads,)."""
    if n_heads < 1:
        raise ValueError(f"n_heads={n_heads} must be positive")

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)  # a geometric sequence that starts at its ratio
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_heads).is_integer():
        return torch.tensor(power_of_two(n_heads))
    below = 2 ** math.floor(math.log2(n_heads))
    extra = power_of_two(2 * below)[0::2][: n_heads - below]
    return torch.tensor(power_of_two(below) + extra)


def alibi_bias(n_heads: int, q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """-m_h · |i - j| for query position i and key position j, added to the scores.

    Shape: q_positions (T,) or (B, T), k_positions (S,) or (B, S)
    -> (H, T, S) or (B, H, T, S).
    """
    i, j = q_positions[..., :, None], k_positions[..., None, :]  # (.., T, 1) (.., 1, S)
    distance = (i - j).abs()[..., None, :, :].float()  # (.., 1, T, S)
    slopes = alibi_slopes(n_heads).to(distance.device)  # (H,)
    return -slopes[:, None, None] * distance  # (.., H, T, S)


def alibi_mask(bias: Tensor, mask: Tensor | None) -> Tensor:
    """The bias as the float mask that PyTorch's fused kernel adds to the scores, keys
    that ``mask`` blocks (True = may attend) at the dtype's most negative value.

    Shape: bias (H, T, S), mask broadcastable to (B, H, T, S) -> (B, H, T, S).
    """
    if mask is None:
        return bias
    return bias.masked_fill(~mask, torch.finfo(bias.dtype).min)
