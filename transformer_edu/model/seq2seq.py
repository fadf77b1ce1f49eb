"""RNN encoder-decoders: the fixed-vector bottleneck, and attention that removes it.

Bottom up: token checks -> ``GRUEncoder`` -> score functions (dot, general,
additive) -> ``Attention`` -> ``GRUDecoder`` (fixed vector) and
``AttentionGRUDecoder`` (Luong-style) -> ``Seq2Seq``. Batch first throughout;
shape letters: B batch, S source length, T target length, D hidden size,
V target vocabulary size. Mask polarity: True = real token, may be attended.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .embeddings import check_token_ids

__all__ = [
    "SCORE_FUNCTIONS",
    "AdditiveScore",
    "Attention",
    "AttentionGRUDecoder",
    "DotScore",
    "GRUDecoder",
    "GRUEncoder",
    "GeneralScore",
    "Seq2Seq",
    "make_score",
]


# --- input checks -----------------------------------------------------------------


def _source_lengths(src: Tensor, pad_idx: int) -> Tensor:
    """Count real tokens per row; PADs must be trailing and every row non-empty."""
    real = src != pad_idx  # (B, S)
    lengths = real.sum(dim=1)  # (B,)
    empty = (lengths == 0).nonzero().flatten().tolist()
    if empty:
        raise ValueError(
            f"src rows {empty} are zero-length (all PAD id {pad_idx}); "
            "every source needs at least one real token"
        )
    positions = torch.arange(src.size(1), device=src.device)  # (S,)
    trailing = positions[None, :] < lengths[:, None]  # (B, S)
    if not torch.equal(real, trailing):
        rows = (real != trailing).any(dim=1).nonzero().flatten().tolist()
        raise ValueError(
            f"src rows {rows} have PAD (id {pad_idx}) before a real token; "
            "padding must be trailing"
        )
    return lengths


# --- encoder ----------------------------------------------------------------------


class GRUEncoder(nn.Module):
    """Embedding + one GRU layer; the final state is at each row's last real token."""

    def __init__(
        self, vocab_size: int, emb_dim: int, hidden_dim: int, pad_idx: int = 0
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.pad_idx = pad_idx
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_idx)
        self.gru = nn.GRU(emb_dim, hidden_dim, batch_first=True)

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Encode a right-padded batch.

        Shape:
            src: (B, S) token ids, PAD only at the end of a row.
            Returns states (B, S, D), zero at PAD positions, and final (1, B, D).
        """
        check_token_ids(src, self.vocab_size, "src")
        lengths = _source_lengths(src, self.pad_idx)  # (B,)
        x = self.embedding(src)  # (B, S, E)
        # Packing makes the GRU stop at each row's last real token, so trailing PADs
        # never reach the final state (without it, h_n is the state after the PADs).
        packed = pack_padded_sequence(
            x, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        packed_states, final = self.gru(packed)  # final: (1, B, D)
        states, _ = pad_packed_sequence(
            packed_states, batch_first=True, total_length=src.size(1)
        )  # (B, S, D)
        return states, final


# --- score functions --------------------------------------------------------------


class DotScore(nn.Module):
    """score(h, s) = hᵀ s (Luong "dot"); no parameters, no scaling."""

    def __init__(self, hidden_dim: int) -> None:
        super().__init__()

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """Shape: query (B, T, D), keys (B, S, D) -> scores (B, T, S)."""
        return query @ keys.transpose(1, 2)  # (B, T, S)


class GeneralScore(nn.Module):
    """score(h, s) = hᵀ W s (Luong "general")."""

    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.W = nn.Linear(hidden_dim, hidden_dim, bias=False)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """Shape: query (B, T, D), keys (B, S, D) -> scores (B, T, S)."""
        return query @ self.W(keys).transpose(1, 2)  # (B, T, S)


class AdditiveScore(nn.Module):
    """score(h, s) = vᵀ tanh(W₁ h + W₂ s) (Bahdanau "additive"; Luong's "concat")."""

    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.W1 = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.W2 = nn.Linear(hidden_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        """Shape: query (B, T, D), keys (B, S, D) -> scores (B, T, S)."""
        q = self.W1(query)[:, :, None, :]  # (B, T, 1, D)
        k = self.W2(keys)[:, None, :, :]  # (B, 1, S, D)
        # Broadcasting adds every query to every key: one hidden layer per pair.
        return self.v(torch.tanh(q + k)).squeeze(-1)  # (B, T, S)


SCORE_FUNCTIONS: dict[str, type[nn.Module]] = {
    "dot": DotScore,
    "general": GeneralScore,
    "additive": AdditiveScore,
}


def make_score(name: str, hidden_dim: int) -> nn.Module:
    """Build a score function by name: "dot", "general" or "additive"."""
    if name not in SCORE_FUNCTIONS:
        raise ValueError(
            f"unknown score function {name!r}; valid names are "
            f"{', '.join(repr(k) for k in SCORE_FUNCTIONS)}"
        )
    return SCORE_FUNCTIONS[name](hidden_dim)


# --- attention --------------------------------------------------------------------


def _check_key_mask(mask: Tensor, keys: Tensor) -> None:
    """Raise ValueError unless ``mask`` is (B, S) like ``keys`` and every row allows a key."""
    if mask.shape != keys.shape[:2]:
        raise ValueError(
            f"mask shape {tuple(mask.shape)} does not match keys (B, S) = "
            f"{tuple(keys.shape[:2])}"
        )
    empty = (~mask.any(dim=1)).nonzero().flatten().tolist()
    if empty:
        raise ValueError(f"mask rows {empty} allow no position to be attended")


class Attention(nn.Module):
    """Softmax over scores, then a weighted sum of the keys: c = Σ_j a(j) s_j."""

    def __init__(self, hidden_dim: int, score: str = "dot") -> None:
        super().__init__()
        self.score_name = score
        self.score = make_score(score, hidden_dim)

    def forward(
        self, query: Tensor, keys: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from each query over the keys (which are also the values).

        Shape:
            query: (B, D) or (B, T, D); keys: (B, S, D);
            mask: (B, S) bool, True = real token that may be attended.
            Returns context (B, D) or (B, T, D) and weights (B, S) or (B, T, S).
        """
        single = query.dim() == 2
        if single:
            query = query[:, None, :]  # (B, 1, D)
        scores = self.score(query, keys)  # (B, T, S)
        if mask is not None:
            _check_key_mask(mask, keys)
            # -inf becomes exactly 0 after softmax: PADs get no weight at all.
            scores = scores.masked_fill(~mask[:, None, :], float("-inf"))
        weights = F.softmax(scores, dim=-1)  # (B, T, S)
        context = weights @ keys  # (B, T, D)
        if single:
            return context[:, 0], weights[:, 0]  # (B, D), (B, S)
        return context, weights


# --- decoders ---------------------------------------------------------------------


class GRUDecoder(nn.Module):
    """GRU started from the encoder's final state; sees the source through it alone.

    This is the Sutskever et al. (2014) bottleneck: the fixed vector only
    initialises the decoder (it is not fed again at each step as in Cho et al. 2014).
    """

    def __init__(
        self, vocab_size: int, emb_dim: int, hidden_dim: int, pad_idx: int = 0
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_idx)
        self.gru = nn.GRU(emb_dim, hidden_dim, batch_first=True)
        self.out = nn.Linear(hidden_dim, vocab_size)

    def forward(
        self,
        tgt_in: Tensor,
        hidden: Tensor,
        memory: Tensor | None = None,
        src_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, None]:
        """Run T teacher-forced steps (T = 1 when decoding); memory is ignored.

        Shape:
            tgt_in: (B, T); hidden: (1, B, D).
            Returns logits (B, T, V), hidden (1, B, D), None (no attention).
        """
        x = self.embedding(tgt_in)  # (B, T, E)
        outputs, hidden = self.gru(x, hidden)  # (B, T, D), (1, B, D)
        return self.out(outputs), hidden, None  # (B, T, V)


class AttentionGRUDecoder(nn.Module):
    """Luong-style: GRU step first, then attend with its state h_i over all s_j.

    c_i = Σ_j a_i(j) s_j,  h̃_i = tanh(W_c [c_i; h_i]),  logits_i = W_o h̃_i.
    No input feeding, so all T teacher-forced steps run as one GRU call and one
    batched attention.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        score: str = "dot",
        pad_idx: int = 0,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_idx)
        self.gru = nn.GRU(emb_dim, hidden_dim, batch_first=True)
        self.attention = Attention(hidden_dim, score)
        self.W_c = nn.Linear(2 * hidden_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim, vocab_size)

    def forward(
        self, tgt_in: Tensor, hidden: Tensor, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Run T teacher-forced steps (T = 1 when decoding), attending at each.

        Shape:
            tgt_in: (B, T); hidden: (1, B, D); memory: (B, S, D); src_mask: (B, S).
            Returns logits (B, T, V), hidden (1, B, D), weights (B, T, S).
        """
        x = self.embedding(tgt_in)  # (B, T, E)
        states, hidden = self.gru(x, hidden)  # (B, T, D), (1, B, D)
        # 1) every decoder state attends over all encoder states at once
        context, weights = self.attention(states, memory, src_mask)  # (B,T,D), (B,T,S)
        # 2) combine what was read with the decoder's own state
        combined = torch.tanh(self.W_c(torch.cat([context, states], dim=-1)))  # (B,T,D)
        return self.out(combined), hidden, weights  # (B, T, V)


# --- the assembled model ----------------------------------------------------------


class Seq2Seq(nn.Module):
    """GRU encoder-decoder with a fixed vector (attention=None) or with attention."""

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        emb_dim: int = 64,
        hidden_dim: int = 128,
        attention: str | None = None,
        pad_idx: int = 0,
    ) -> None:
        super().__init__()
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.attention = attention
        self.pad_idx = pad_idx
        self.encoder = GRUEncoder(src_vocab_size, emb_dim, hidden_dim, pad_idx)
        if attention is None:
            self.decoder: nn.Module = GRUDecoder(
                tgt_vocab_size, emb_dim, hidden_dim, pad_idx
            )
        else:
            self.decoder = AttentionGRUDecoder(
                tgt_vocab_size, emb_dim, hidden_dim, attention, pad_idx
            )
        self.last_attention: Tensor | None = None  # (B, T, S) after forward

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Shape: src (B, S) -> memory (B, S, D), final (1, B, D), src_mask (B, S)."""
        memory, final = self.encoder(src)
        return memory, final, src != self.pad_idx

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits; ``self.last_attention`` keeps the weights (detached).

        Shape:
            src: (B, S); tgt_in: (B, T), starting with BOS.
            Returns logits (B, T, V).
        """
        check_token_ids(tgt_in, self.tgt_vocab_size, "tgt_in")
        memory, hidden, src_mask = self.encode(src)
        if tgt_in.size(0) != src.size(0):
            raise ValueError(
                f"batch sizes differ: src has B={src.size(0)}, "
                f"tgt_in has B={tgt_in.size(0)}"
            )
        logits, _, weights = self.decoder(tgt_in, hidden, memory, src_mask)
        self.last_attention = None if weights is None else weights.detach()
        return logits

    @torch.no_grad()
    def greedy_decode(
        self, src: Tensor, bos_id: int, eos_id: int, max_len: int
    ) -> tuple[Tensor, Tensor | None]:
        """Pick the most likely token each step until every row has produced EOS.

        Finished rows are treated as in ``decoding.greedy_decode``: they emit PAD
        from then on, and the loop stops once every row has produced EOS.

        Shape:
            src: (B, S). Returns tokens (B, T) with T <= max_len, without BOS, EOS
            kept, PAD after it; attention (B, T, S) (zero after EOS) or None.
        """
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= value < self.tgt_vocab_size:
                raise ValueError(
                    f"{name}={value} is outside the target vocabulary "
                    f"(tgt_vocab_size={self.tgt_vocab_size})"
                )
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1, got max_len={max_len}")
        memory, hidden, src_mask = self.encode(src)
        B = src.size(0)
        token = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
        tokens, weights = [], []
        for _ in range(max_len):
            logits, hidden, w = self.decoder(token, hidden, memory, src_mask)
            token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            # rows that already finished emit PAD and attend nowhere
            token = token.masked_fill(done[:, None], self.pad_idx)
            tokens.append(token)
            if w is not None:
                weights.append(w.masked_fill(done[:, None, None], 0.0))  # (B, 1, S)
            done = done | (token[:, 0] == eos_id)
            if bool(done.all()):
                break
        out = torch.cat(tokens, dim=1)  # (B, T)
        attn = torch.cat(weights, dim=1) if weights else None  # (B, T, S)
        return out, attn
