"""The assembled encoder-decoder Transformer (Vaswani et al., 2017)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..modern.switches import apply_switches
from .attention import MultiHeadAttention
from .config import TransformerConfig
from .embeddings import POSITIONAL_ENCODINGS, TokenEmbedding
from .layers import DecoderLayer, EncoderLayer, copy_torch_layer_
from .masks import causal_mask, padding_mask, target_mask
from .norm import LayerNorm


def _stack_kwargs(layer: nn.Module) -> dict:
    """The constructor arguments of ours that match an nn.Transformer*Layer."""
    attn = layer.self_attn
    return dict(
        d_model=attn.embed_dim,
        n_heads=attn.num_heads,
        d_ff=layer.linear1.out_features,
        dropout=layer.dropout.p,
        norm_first=layer.norm_first,
        layer_norm_eps=layer.norm1.eps,
    )


class _Stack(nn.Module):
    """N identical layers of ``layer_cls``, and a final LayerNorm if ``final_norm``
    (None: only for pre-LN, whose residual stream is never normalised otherwise)."""

    layer_cls: type[nn.Module]

    def __init__(
        self,
        n_layers: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        norm_first: bool = False,
        final_norm: bool | None = None,
        layer_norm_eps: float = 1e-5,
        fast: bool = True,
        attention_dropout: float | None = None,
        activation_dropout: float | None = None,
    ):
        super().__init__()
        layer = dict(
            d_model=d_model, n_heads=n_heads, d_ff=d_ff, dropout=dropout,
            norm_first=norm_first, layer_norm_eps=layer_norm_eps, fast=fast,
            attention_dropout=attention_dropout, activation_dropout=activation_dropout,
        )  # fmt: skip
        self.layers = nn.ModuleList(self.layer_cls(**layer) for _ in range(n_layers))
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = LayerNorm(d_model, layer_norm_eps, fast) if final_norm else None

    @classmethod
    def from_torch(cls, stack: nn.TransformerEncoder | nn.TransformerDecoder, **kwargs):
        """Ours, carrying exactly the weights of ``stack`` (ReLU; we are batch first)."""
        first = stack.layers[0]
        ours = cls(len(stack.layers), final_norm=stack.norm is not None,
                   **_stack_kwargs(first), **kwargs)  # fmt: skip
        ours.to(first.linear1.weight.device, first.linear1.weight.dtype)
        for mine, theirs in zip(ours.layers, stack.layers, strict=True):
            copy_torch_layer_(mine, theirs)
        if stack.norm is not None:
            ours.norm.load_state_dict(LayerNorm.from_torch(stack.norm).state_dict())
        return ours


class Encoder(_Stack):
    """N encoder layers (+ final LayerNorm); ``Encoder.from_torch(nn.TransformerEncoder)``.

    Shape: x (B, S, D) embedded source, src_mask broadcastable to (B, H, S, S) -> (B, S, D).
    """

    layer_cls = EncoderLayer

    def forward(self, x: Tensor, src_mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, src_mask)
        return x if self.norm is None else self.norm(x)


class Decoder(_Stack):
    """N decoder layers (+ final LayerNorm); ``Decoder.from_torch(nn.TransformerDecoder)``.

    ``cache`` is a list with one dict per layer for incremental decoding (see
    ``DecoderLayer``); create it with ``Decoder.new_cache()``.

    Shape: x (B, T, D) embedded target, memory (B, S, D), tgt_mask (B, H, T, T),
    memory_mask (B, H, T, S) -> (B, T, D).
    """

    layer_cls = DecoderLayer

    def new_cache(self, memory: Tensor | None = None) -> list[dict]:
        """One dict per layer; given ``memory`` (B, S, D), the cross-attention keys and
        values are projected now, once (beam search copies them to its K rows)."""
        if memory is None:
            return [{} for _ in self.layers]
        return [
            {"memory_kv": layer.cross_attn.project_kv(memory, memory)}
            for layer in self.layers
        ]

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        cache: list[dict] | None = None,
    ) -> Tensor:
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(
                f"cache has {len(cache)} entries for {len(self.layers)} layers"
            )
        for i, layer in enumerate(self.layers):
            x = layer(
                x, memory, tgt_mask, memory_mask, None if cache is None else cache[i]
            )
        return x if self.norm is None else self.norm(x)


class Generator(nn.Module):
    """The final linear layer: decoder vectors to unnormalised scores over the vocabulary.

    Shape: (B, T, D) -> (B, T, V) logits (apply log_softmax for log-probabilities).
    """

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(x)


class Transformer(nn.Module):
    """Embeddings + positional encoding, encoder, decoder and generator.

    Masks are built from the token ids (PAD = ``config.pad_idx``), so ``forward`` takes
    only tokens. Attention weights of every layer and head are kept after a forward
    pass when ``record_attention(True)`` is on (see ``attention_weights``).

    Shape: src (B, S), tgt (B, T) token ids -> logits (B, T, tgt_vocab_size).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model, c.pad_idx, "src")
        self.tgt_embed = (
            self.src_embed
            if c.share_embeddings
            else TokenEmbedding(c.tgt_vocab_size, c.d_model, c.pad_idx, "tgt")
        )
        pe = POSITIONAL_ENCODINGS[c.positional]
        self.src_pos = pe(c.d_model, c.max_len, c.dropout)
        self.tgt_pos = pe(c.d_model, c.max_len, c.dropout)
        stack = dict(
            d_model=c.d_model, n_heads=c.n_heads, d_ff=c.d_ff, dropout=c.dropout,
            norm_first=c.norm_first, final_norm=c.use_final_norm,
            layer_norm_eps=c.layer_norm_eps, fast=c.fast,
            attention_dropout=c.attention_dropout,
            activation_dropout=c.activation_dropout,
        )  # fmt: skip
        self.encoder = Encoder(c.n_encoder_layers, **stack)
        self.decoder = Decoder(c.n_decoder_layers, **stack)
        self.generator = Generator(c.d_model, c.tgt_vocab_size)
        apply_switches(self, c)  # chapter 13's successors, if the config names any
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform for every matrix (as the Annotated Transformer), zero biases
        of the projections kept as PyTorch's default, PAD rows of embeddings zeroed."""
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        with torch.no_grad():
            for emb in {self.src_embed, self.tgt_embed}:
                emb.weight[self.config.pad_idx].zero_()
        if self.config.tie_generator:
            # paper §3.4: the pre-softmax projection shares the target embedding matrix
            self.generator.proj.weight = self.tgt_embed.weight

    # -- the three steps, usable one at a time (decoding calls them separately) --

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """Source ids (B, S) -> memory (B, S, D) and its padding mask (B, 1, 1, S)."""
        src_mask = padding_mask(src, self.config.pad_idx)  # (B, 1, 1, S)
        memory = self.encoder(self.src_pos(self.src_embed(src)), src_mask)
        return memory, src_mask

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: list[dict] | None = None,
        offset: int = 0,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        """Target ids (B, T) -> decoder output (B, T, D).

        Without a cache ``tgt`` is the whole prefix. With a cache it holds only the new
        positions, starting at position ``offset``, and the cache holds the past.
        ``tgt_mask`` replaces the default self-attention mask (padding and look-ahead).
        """
        if tgt_mask is None and cache is None:
            tgt_mask = target_mask(tgt, self.config.pad_idx)  # (B, 1, T, T)
        elif tgt_mask is None:
            T = tgt.size(1)
            tgt_mask = causal_mask(
                T, tgt.device, key_size=offset + T
            )  # (1, 1, T, past+T)
        x = self.tgt_pos(self.tgt_embed(tgt), offset=offset)  # (B, T, D)
        return self.decoder(x, memory, tgt_mask, src_mask, cache)

    def forward(
        self, src: Tensor, tgt: Tensor, tgt_mask: Tensor | None = None
    ) -> Tensor:
        """Teacher-forced logits; ``tgt_mask`` overrides the decoder's self-attention
        mask (the book's leak experiment drops its look-ahead part)."""
        if src.dim() == 2 and tgt.dim() == 2 and src.size(0) != tgt.size(0):
            raise ValueError(
                f"src has batch size {src.size(0)} but tgt has {tgt.size(0)}"
            )
        memory, src_mask = self.encode(src)
        out = self.decode(tgt, memory, src_mask, tgt_mask=tgt_mask)
        return self.generator(out)  # (B, T, V)

    # -- looking inside --

    def attention_modules(self) -> dict[str, list[MultiHeadAttention]]:
        """The attention modules by kind: encoder_self, decoder_self, cross."""
        return {
            "encoder_self": [layer.self_attn for layer in self.encoder.layers],
            "decoder_self": [layer.self_attn for layer in self.decoder.layers],
            "cross": [layer.cross_attn for layer in self.decoder.layers],
        }

    def record_attention(self, enabled: bool = True) -> Transformer:
        """Keep (or stop keeping) every layer's and head's attention weights."""
        for mods in self.attention_modules().values():
            for m in mods:
                m.record_weights, m.attn_weights = enabled, None
        return self

    @property
    def recording_attention(self) -> bool:
        """Whether ``record_attention(True)`` is on: the state to restore after use."""
        return any(  # a learner's attention (exercises.use_layers) may not record
            getattr(m, "record_weights", False)
            for mods in self.attention_modules().values()
            for m in mods
        )

    def attention_weights(self) -> dict[str, list[Tensor]]:
        """Weights from the last forward: kind -> one (B, H, T_q, T_k) tensor per layer."""
        out = {}
        for kind, mods in self.attention_modules().items():
            if any(m.attn_weights is None for m in mods):
                raise RuntimeError(
                    "no attention weights recorded: call model.record_attention(True) "
                    "before the forward pass"
                )
            out[kind] = [m.attn_weights for m in mods]
        return out


def make_config(
    src_vocab_size: int, tgt_vocab_size: int, n_layers: int | None = None, **kwargs
) -> TransformerConfig:
    """The configuration ``make_model`` builds from the same arguments."""
    if n_layers is not None:
        kwargs.setdefault("n_encoder_layers", n_layers)
        kwargs.setdefault("n_decoder_layers", n_layers)
    return TransformerConfig(src_vocab_size, tgt_vocab_size, **kwargs)


def make_model(
    src_vocab_size: int, tgt_vocab_size: int, n_layers: int | None = None, **kwargs
) -> Transformer:
    """Build and initialise a Transformer; ``n_layers`` sets both stacks at once.

    Other keyword arguments are ``TransformerConfig`` fields (defaults: the paper's base).
    """
    return Transformer(make_config(src_vocab_size, tgt_vocab_size, n_layers, **kwargs))


def count_parameters(module: nn.Module, trainable_only: bool = True) -> int:
    """Number of parameters, each shared (tied) tensor counted once."""
    return sum(
        p.numel() for p in module.parameters() if p.requires_grad or not trainable_only
    )
