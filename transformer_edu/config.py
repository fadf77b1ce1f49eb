"""The one configuration object of the assembled model."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class TransformerConfig:
    """Sizes and switches of an encoder-decoder Transformer (defaults: the paper's base)."""

    src_vocab_size: int  # number of source token ids
    tgt_vocab_size: int  # number of target token ids
    d_model: int = 512  # width of every token vector (D)
    n_heads: int = 8  # attention heads (H); d_model must be divisible by it
    n_encoder_layers: int = 6  # encoder blocks (N in the paper)
    n_decoder_layers: int = 6  # decoder blocks
    d_ff: int = 2048  # hidden width of the position-wise feed-forward network
    dropout: float = 0.1  # on embeddings+PE and sub-layer outputs (the paper's places)
    attention_dropout: float | None = None  # on attention weights; None: = dropout
    activation_dropout: float | None = None  # on the FFN's hidden ReLU; None: = dropout
    max_len: int = 512  # longest sequence the positional encoding covers
    positional: str = "sinusoidal"  # "sinusoidal", "learned" or "none" (an ablation)
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN
    final_norm: bool | None = None  # LayerNorm after each stack; None = norm_first
    share_embeddings: bool = False  # one embedding for source and target (shared vocab)
    tie_generator: bool = False  # generator weight = target embedding (paper §3.4)
    fast: bool = True  # fused kernels (SDPA, F.layer_norm); False: the written-out path
    layer_norm_eps: float = 1e-5  # epsilon inside LayerNorm's square root
    pad_idx: int = 0  # the padding token id, on both sides

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        for name in ("n_encoder_layers", "n_decoder_layers", "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}={value!r} must be a non-negative integer")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, name)
            if (value is not None or name == "dropout") and not 0.0 <= value < 1.0:
                raise ValueError(f"{name}={value} must be in [0, 1)")
        if self.positional not in ("sinusoidal", "learned", "none"):
            raise ValueError(
                f"positional={self.positional!r}; expected 'sinusoidal', 'learned' "
                "or 'none'"
            )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "share_embeddings=True needs one vocabulary, but "
                f"src_vocab_size={self.src_vocab_size} != "
                f"tgt_vocab_size={self.tgt_vocab_size}"
            )
        if not 0 <= self.pad_idx < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"pad_idx={self.pad_idx} is outside the vocabularies")

    @property
    def d_k(self) -> int:
        """Size of one head (Dh = d_k = d_v = d_model / n_heads)."""
        return self.d_model // self.n_heads

    @property
    def use_final_norm(self) -> bool:
        return self.norm_first if self.final_norm is None else self.final_norm

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TransformerConfig:
        d = dict(d)
        # checkpoints written before fast_attention was renamed and fused_qkv removed
        if "fast_attention" in d:
            d.setdefault("fast", d.pop("fast_attention"))
        if d.get("fused_qkv") is False:
            del d["fused_qkv"]
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown TransformerConfig fields: {unknown}")
        return cls(**d)
