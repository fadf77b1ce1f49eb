"""Normalisation, written out from its formula: LayerNorm (the paper's) and RMSNorm."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LayerNorm(nn.Module):
    """y = γ (x - μ) / sqrt(σ² + ε) + β, with μ and σ² over the features of each token.

    ``fast=True`` computes the same with the fused ``F.layer_norm`` kernel (tested equal).
    Shape: (..., D) -> (..., D).
    """

    def __init__(self, d_model: int, eps: float = 1e-5, fast: bool = True):
        super().__init__()
        self.d_model, self.eps, self.fast = d_model, eps, fast
        self.weight = nn.Parameter(torch.ones(d_model))  # γ
        self.bias = nn.Parameter(torch.zeros(d_model))  # β

    def forward(self, x: Tensor) -> Tensor:
        if self.fast:
            return F.layer_norm(x, (self.d_model,), self.weight, self.bias, self.eps)
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1) one mean per token
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # biased, as in nn.LayerNorm
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias

    @classmethod
    def from_torch(cls, m: nn.LayerNorm, fast: bool = True) -> LayerNorm:
        """A LayerNorm carrying the weights of ``m`` (over the last dimension only)."""
        if len(m.normalized_shape) != 1 or not m.elementwise_affine:
            raise ValueError(
                f"from_torch needs a 1-D affine LayerNorm, got normalized_shape="
                f"{tuple(m.normalized_shape)}, elementwise_affine={m.elementwise_affine}"
            )
        ours = cls(m.normalized_shape[0], m.eps, fast).to(
            m.weight.device, m.weight.dtype
        )
        with torch.no_grad():
            ours.weight.copy_(m.weight)
            if m.bias is not None:
                ours.bias.copy_(m.bias)
        return ours


class RMSNorm(nn.Module):
    """y = γ x / sqrt(mean(x²) + ε): LayerNorm without the centring and without β
    (Zhang & Sennrich, 2019; T5, LLaMA). It equals LayerNorm on a token of mean 0.

    ``fast=True`` computes the same with the fused ``F.rms_norm`` kernel (tested equal).
    Shape: (..., D) -> (..., D).
    """

    def __init__(self, d_model: int, eps: float = 1e-5, fast: bool = True):
        super().__init__()
        self.d_model, self.eps, self.fast = d_model, eps, fast
        self.weight = nn.Parameter(torch.ones(d_model))  # γ

    def forward(self, x: Tensor) -> Tensor:
        if self.fast:
            return F.rms_norm(x, (self.d_model,), self.weight, self.eps)
        # the root mean square of each token's features: no mean is subtracted
        ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return self.weight * x / torch.sqrt(ms + self.eps)


NORMS = {"layer": LayerNorm, "rms": RMSNorm}  # TransformerConfig.norm -> its class
