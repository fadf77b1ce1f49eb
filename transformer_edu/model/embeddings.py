"""Token embeddings and positional encodings: what the first layer sees."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def check_token_ids(tokens: Tensor, vocab_size: int, name: str = "tokens") -> None:
    """Raise ValueError unless ``tokens`` is a non-empty (B, L) batch of ids < vocab_size.

    The ids' range is checked on the CPU only, so that a bad id is a clear error
    instead of an index error from deep inside the embedding; on a GPU reading it
    would make the host wait for the device on every call, and a bad id ends in the
    embedding's device-side assert.
    """
    if tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise ValueError(
            f"{name} must hold integer token ids, got dtype={tokens.dtype}"
        )
    if tokens.dim() != 2:
        raise ValueError(
            f"{name} must have shape (B, L), got {tuple(tokens.shape)} "
            f"({tokens.dim()} dims)"
        )
    if tokens.size(0) == 0:
        raise ValueError(f"{name} is an empty batch: shape {tuple(tokens.shape)}")
    if tokens.size(1) == 0:
        raise ValueError(f"{name} has length 0: shape {tuple(tokens.shape)}")
    if torch.compiler.is_exporting() or tokens.is_meta:
        # torch.export traces without values, and a meta tensor has none (tests run
        # the model on the meta device to catch tensors made on the wrong device)
        return
    if tokens.device.type != "cpu":  # no host sync per call (see above)
        return
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab_size:
        bad = hi if hi >= vocab_size else lo
        raise ValueError(
            f"{name} contains token id {bad} (min id {lo}, max id {hi}) but the "
            f"embedding has vocab_size={vocab_size} (valid ids 0..{vocab_size - 1})"
        )


class TokenEmbedding(nn.Module):
    """Lookup table scaled by sqrt(d_model); padding positions come out as zeros.

    Shape: tokens (B, L) int64 -> (B, L, D).
    """

    def __init__(
        self, vocab_size: int, d_model: int, pad_idx: int | None = 0, name="tokens"
    ):
        super().__init__()
        self.name = name  # how errors refer to the input ("src", "tgt")
        self.vocab_size, self.d_model, self.pad_idx = vocab_size, d_model, pad_idx
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_idx)
        self.scale = math.sqrt(d_model)

    @property
    def weight(self) -> nn.Parameter:
        return self.embedding.weight

    def forward(self, tokens: Tensor) -> Tensor:
        check_token_ids(tokens, self.vocab_size, self.name)
        x = self.embedding(tokens) * self.scale  # (B, L, D)
        if self.pad_idx is not None:
            # nn.Embedding's padding_idx keeps the row's gradient at zero, but weight
            # tying or init can still write to it: zero pads so they carry no signal.
            x = x.masked_fill((tokens == self.pad_idx).unsqueeze(-1), 0.0)
        return x


def sinusoidal_table(max_len: int, d_model: int) -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(...); (max_len, D)."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(D/2),)
    angle = pos / torch.pow(10000.0, two_i / d_model)  # (L, ceil(D/2))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # odd D has one cos fewer
    return pe.float()


class _PositionalEncoding(nn.Module):
    """Shared forward: add PE for positions offset..offset+L-1, then dropout."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.dropout = nn.Dropout(dropout)

    def table(self) -> Tensor:
        raise NotImplementedError

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """Shape: x (B, L, D) -> (B, L, D); ``offset`` is the first position's index."""
        length = x.size(1)
        if offset + length > self.max_len:
            raise ValueError(
                f"sequence length {offset + length} exceeds the positional encoding's "
                f"max_len={self.max_len}"
            )
        pe = self.table()[offset : offset + length]  # (L, D)
        return self.dropout(x + pe.to(x.dtype))


class SinusoidalPositionalEncoding(_PositionalEncoding):
    """The paper's fixed sin/cos encoding, added to the embeddings (a buffer, not learned)."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__(d_model, max_len, dropout)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)

    def table(self) -> Tensor:
        return self.pe


class LearnedPositionalEncoding(_PositionalEncoding):
    """One trained vector per position (BERT, GPT-2); knows nothing beyond max_len."""

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0):
        super().__init__(d_model, max_len, dropout)
        self.pe = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def table(self) -> Tensor:
        return self.pe


class NoPositionalEncoding(_PositionalEncoding):
    """The ablation: only dropout, so the encoder sees a bag of tokens."""

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        return self.dropout(x)


POSITIONAL_ENCODINGS = {
    "sinusoidal": SinusoidalPositionalEncoding,
    "learned": LearnedPositionalEncoding,
    "none": NoPositionalEncoding,
    # positions inside attention (chapter 13): nothing is added to the embeddings
    "rope": NoPositionalEncoding,
    "alibi": NoPositionalEncoding,
}
