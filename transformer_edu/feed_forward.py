"""The position-wise feed-forward network."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = W₂ ReLU(W₁ x + b₁) + b₂, the same two layers applied to every position.

    Shape: (B, L, D) -> (B, L, D), with a hidden width d_ff.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))
