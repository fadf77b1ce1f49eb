"""A mixture of experts: several feed-forward networks, and a router that sends each
token to a few of them (Shazeer et al., 2017; Switch Transformer, Fedus et al., 2022).

More parameters at the same compute per token: a token passes through ``top_k`` of
the ``n_experts`` networks, weighted by the router's probabilities.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..model.feed_forward import feed_forward


class MixtureOfExperts(nn.Module):
    """y = Σ over the token's top_k experts e of p_e(x) · FFN_e(x), where p = softmax(W_r x).

    The chosen experts' probabilities are not renormalised: with top_k = 1 (Switch)
    the router still learns from the output. After each forward, ``load`` holds the
    share of tokens whose first choice was each expert, and ``aux_loss`` Switch's
    load-balancing loss E · Σ_e load_e · mean p_e (1 when perfectly balanced; not
    added to the training loss here). Shape: (B, L, D) -> (B, L, D).
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        n_experts: int,
        top_k: int = 1,
        dropout: float = 0.0,
        ffn: str = "relu",
    ):
        super().__init__()
        if not 1 <= top_k <= n_experts:
            raise ValueError(f"top_k={top_k} must be in 1..n_experts={n_experts}")
        self.n_experts, self.top_k = n_experts, top_k
        self.router = nn.Linear(d_model, n_experts, bias=False)  # W_r
        self.experts = nn.ModuleList(
            feed_forward(ffn, d_model, d_ff, dropout) for _ in range(n_experts)
        )
        self.load: Tensor | None = None
        self.aux_loss: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        B, L, D = x.shape
        tokens = x.reshape(B * L, D)  # (N, D): routing is per token
        probs = self.router(tokens).softmax(dim=-1)  # (N, E)
        gate, chosen = probs.topk(self.top_k, dim=-1)  # (N, k) each
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)  # the tokens sent to e
            if rows.numel():  # each expert computes only its own tokens
                weighted = gate[rows, slot, None] * expert(tokens[rows])  # (n_e, D)
                out = out.index_add(0, rows, weighted)
        first = F.one_hot(chosen[:, 0], self.n_experts).float()  # (N, E)
        self.load = first.mean(0).detach()  # (E,): the share of each expert
        self.aux_loss = self.n_experts * (first.mean(0) * probs.mean(0)).sum()
        return out.view(B, L, D)
