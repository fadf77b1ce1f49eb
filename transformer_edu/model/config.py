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
    positional: str = "sinusoidal"  # "sinusoidal", "learned", "none" (an ablation);
    # or inside attention (chapter 13): "rope" (rotary) or "alibi" (distance penalty)
    norm_first: bool = False  # False: post-LN as in the paper; True: pre-LN
    final_norm: bool | None = None  # LayerNorm after each stack; None = norm_first
    share_embeddings: bool = False  # one embedding for source and target (shared vocab)
    tie_generator: bool = False  # generator weight = target embedding (paper §3.4)
    fast: bool = True  # fused kernels (SDPA, F.layer_norm); False: the written-out path
    layer_norm_eps: float = 1e-5  # epsilon inside LayerNorm's square root
    pad_idx: int = 0  # the padding token id, on both sides
    # what changed since 2017 (chapter 13); the defaults are the paper's model
    norm: str = "layer"  # "layer" (LayerNorm) or "rms" (RMSNorm: no centring, no β)
    ffn: str = "relu"  # feed-forward: "relu" (the paper's), "swiglu" or "geglu" (gated)
    n_kv_heads: int | None = None  # key/value heads: None = n_heads; 1 = multi-query
    n_experts: int = 0  # 0: one feed-forward network per layer; E > 0: E, routed
    expert_top_k: int = 1  # experts each token is sent to (when n_experts > 0)

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
        positionals = ("sinusoidal", "learned", "none", "rope", "alibi")
        if self.positional not in positionals:
            raise ValueError(
                f"positional={self.positional!r}; expected one of {positionals}"
            )
        if self.positional == "rope" and self.d_k % 2:
            raise ValueError(f"RoPE rotates pairs of features: d_k={self.d_k} is odd")
        choices = {"norm": ("layer", "rms"), "ffn": ("relu", "swiglu", "geglu")}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name}={getattr(self, name)!r}; expected one of {allowed}"
                )
        kv = self.n_kv_heads
        if kv is not None and (not isinstance(kv, int) or kv < 1 or self.n_heads % kv):
            raise ValueError(
                f"n_kv_heads={kv!r} must divide n_heads={self.n_heads} (or be None)"
            )
        if self.n_experts < 0 or (
            self.n_experts and not 1 <= self.expert_top_k <= self.n_experts
        ):
            raise ValueError(
                f"n_experts={self.n_experts}, expert_top_k={self.expert_top_k}: need "
                "n_experts >= 0 and 1 <= expert_top_k <= n_experts"
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
