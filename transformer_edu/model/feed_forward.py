"""The position-wise feed-forward network: the paper's (ReLU) and the gated ones."""

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


GATES = {"swiglu": F.silu, "geglu": F.gelu}  # the activation of each gated variant


class GatedFeedForward(nn.Module):
    """FFN(x) = W₂ (act(W₁ x) ⊙ V x), a gated linear unit (Shazeer, 2020): SwiGLU with
    act = SiLU (Swish), GEGLU with act = GELU. No biases, as in that paper and T5.

    Three matrices instead of two: d_ff = 2/3 of the ReLU network's keeps the parameter
    count. Shape: (B, L, D) -> (B, L, D).
    """

    def __init__(
        self, d_model: int, d_ff: int, dropout: float = 0.0, gate: str = "swiglu"
    ):
        super().__init__()
        if gate not in GATES:
            raise ValueError(f"gate={gate!r}; expected one of {sorted(GATES)}")
        self.gate, self.act = gate, GATES[gate]
        self.linear1 = nn.Linear(d_model, d_ff, bias=False)  # W₁: through act
        self.linear_v = nn.Linear(d_model, d_ff, bias=False)  # V: the linear half
        self.linear2 = nn.Linear(d_ff, d_model, bias=False)  # W₂
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        # each hidden unit is a product: the activated half gates the linear half
        hidden = self.act(self.linear1(x)) * self.linear_v(x)  # (B, L, d_ff)
        return self.linear2(self.dropout(hidden))


def feed_forward(kind: str, d_model: int, d_ff: int, dropout: float = 0.0) -> nn.Module:
    """The network TransformerConfig.ffn names: "relu" (the paper), "swiglu", "geglu"."""
    if kind == "relu":
        return PositionwiseFeedForward(d_model, d_ff, dropout)
    if kind in GATES:
        return GatedFeedForward(d_model, d_ff, dropout, kind)
    raise ValueError(f"ffn={kind!r}; expected 'relu', 'swiglu' or 'geglu'")
