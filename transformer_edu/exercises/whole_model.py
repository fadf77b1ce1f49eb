"""The whole model, built yourself (A.4): ``encode``, ``decode`` and ``forward`` of an
encoder–decoder Transformer whose ``__init__`` is given (embeddings, the sinusoidal
table, the package's stacks, a tied generator), checked against the package's
``Transformer``."""

from __future__ import annotations

import random
from functools import partial

import torch
from torch import Tensor, nn

from ..model.embeddings import sinusoidal_table
from ..model.masks import padding_mask, target_mask
from ..model.transformer import Decoder, Encoder, Transformer, make_model
from .assembly import (
    as_module,
    load_reference,
    mask_error_hint,
    randomise,
)
from .harness import (
    Case,
    CheckResult,
    Failure,
    call,
    drawn,
    expect,
    generator,
    manual_seed,
    match,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import COMMON, register

# --- the whole model: embeddings, positions, masks, the stacks, the generator ---------

MODEL_REFERENCES = references(
    Transformer, make_model, (nn.Transformer, "torch.nn.Transformer")
)
NO_SCALE = (
    "the embeddings are not multiplied by √d_model (paper §3.4, chapter 2): the "
    "positional encoding, of size about 1 in every feature, drowns them"
)
_MODEL_MISTAKES = [  # (hint, the _model_variant mistake)
    (NO_SCALE, "no scale"),
    ("no positional encoding: add pe[:L] (chapter 3) to the scaled embeddings",
     "no pe"),
    ("the positional encoding is scaled with the embeddings, (emb + pe) · √d_model: "
     "scale the embeddings, then add pe", "pe scaled"),
    ("padding positions keep their embedding: zero them, as in exercise 2 "
     "(x.masked_fill((tokens == pad_idx)[..., None], 0))", "pads kept"),
    ("the decoder's self-attention has no look-ahead mask: tgt_mask is padding and "
     "causal (chapter 6: target_mask, or padding_mask & causal_mask)", "no look-ahead"),
    ("the padding masks are missing: the encoder's self-attention and the "
     "cross-attention need padding_mask(src) (chapter 6)", "no padding masks"),
    ("the cross-attention's mask is missing: memory_mask is src_mask, the source's "
     "padding", "no memory mask"),
    ("forward returns log-probabilities: it returns the generator's logits (the loss "
     "and the decoders apply log_softmax)", "log_softmax"),
]  # fmt: skip
# the mistakes that show in the encoder's output (memory) already
_EMBEDDING_MISTAKES = (
    "no scale",
    "no pe",
    "pe scaled",
    "pads kept",
    "no padding masks",
)


def _embedded(ref: Transformer, table: nn.Embedding, tokens: Tensor,
              mistake: str) -> Tensor:  # fmt: skip
    """Tokens embedded right (× √D, padding zeroed, plus the positions), or with one
    of the known mistakes of the embedding."""
    D, pad = ref.config.d_model, ref.config.pad_idx
    x, pos = table(tokens), sinusoidal_table(tokens.size(1), D)
    if mistake == "pe scaled":
        x = (x + pos) * D**0.5
    else:
        x = x if mistake == "no scale" else x * D**0.5
    if mistake != "pads kept":
        x = x.masked_fill((tokens == pad).unsqueeze(-1), 0.0)
    return x if mistake in ("no pe", "pe scaled") else x + pos


@torch.no_grad()
def _memory_variant(ref: Transformer, src: Tensor, mistake: str) -> Tensor:
    """The encoder's output computed right, or with one known mistake."""
    pad = ref.config.pad_idx
    mask = None if mistake == "no padding masks" else padding_mask(src, pad)
    return ref.encoder(_embedded(ref, ref.src_embed.embedding, src, mistake), mask)


@torch.no_grad()
def _model_variant(ref: Transformer, src: Tensor, tgt: Tensor, mistake: str) -> Tensor:
    """The model's logits computed right (eval mode), or with one known mistake."""
    pad = ref.config.pad_idx
    src_mask = None if mistake == "no padding masks" else padding_mask(src, pad)
    tgt_mask = (padding_mask(tgt, pad).expand(-1, -1, tgt.size(1), -1)
                if mistake == "no look-ahead" else target_mask(tgt, pad))  # fmt: skip
    memory_mask = None if mistake == "no memory mask" else src_mask
    memory = _memory_variant(ref, src, mistake)
    y = _embedded(ref, ref.tgt_embed.embedding, tgt, mistake)
    logits = ref.generator(ref.decoder(y, memory, tgt_mask, memory_mask))
    return logits.log_softmax(-1) if mistake == "log_softmax" else logits


@exercise("A.4", "MyTransformer", points=3, chapter=8)
def check_transformer_forward(cls: type, quiet: bool = False) -> CheckResult:
    """Check a class ``cls(src_vocab, tgt_vocab, d_model, n_heads, d_ff, n_layers,
    dropout=0.1, norm_first=False, pad_idx=0, max_len=64)`` whose ``encode(src)``
    returns the memory (B, S, D) and the source's padding mask (B, 1, 1, S), whose
    ``decode(tgt, memory, src_mask)`` returns the decoder's output (B, T, D), and whose
    ``forward(src, tgt)`` returns the logits (B, T, tgt_vocab): token embeddings × √D
    with padding zeroed, plus the sinusoidal positions, then dropout, the encoder and
    decoder stacks with their masks, and the tied generator.

    Its parts carry the given ``__init__``'s names (``src_embed``, ``tgt_embed``,
    ``encoder``, ``decoder``, ``generator``): the checker loads a package
    ``Transformer``'s weights into them.
    """
    table = [  # label, what, B, S, T, D, H, d_ff, n_layers, norm_first, dropout, seed
        ("post-LN, one layer: forward(src, tgt)", "forward", 2, 5, 4, 8, 2, 16, 1,
         False, 0.0, 110),
        ("encode(src) and decode(tgt, memory, src_mask) one at a time", "parts", 2, 6,
         3, 8, 2, 16, 1, False, 0.0, 111),
        ("pre-LN, two layers (final LayerNorms): forward", "forward", 3, 4, 6, 12, 3,
         24, 2, True, 0.0, 112),
        ("training mode, dropout p = 1: forward", "forward", 2, 5, 4, 8, 2, 16, 1,
         False, 1.0, 113),
    ]  # fmt: skip
    cases = [
        Case(label, partial(_run_model, cls, *row))
        for label, *row in drawn(table, _other_model, seed=114)
    ]
    return run_cases("check_transformer_forward", cases, quiet, MODEL_REFERENCES)


def _other_model(rng: random.Random, row: tuple) -> tuple:
    label, what, B, S, T, D, H, d_ff, n_layers, *rest = row
    H = rng.choice((1, 2, 4))
    D = H * rng.choice((2, 4))
    T = rng.randint(2, 6)
    S = rng.choice([s for s in range(2, 8) if s != T])
    return (label, what, rng.randint(2, 3), S, T, D, H, rng.choice((2, 4)) * D,
            n_layers, *rest)  # fmt: skip


def _tokens(B: int, L: int, V: int, seed: int, first: int | None) -> Tensor:
    """Token ids in 3 … V - 1, the last sentences shorter (PAD = 0 at their end); the
    decoder's rows start with BOS (1) as in training."""
    ids = torch.randint(3, V, (B, L), generator=generator(seed))
    for b in range(1, B):
        ids[b, max(1, L - b) :] = 0
    if first is not None:
        ids[:, 0] = first
    return ids


def _run_model(cls: type, what: str, B: int, S: int, T: int, D: int, H: int, d_ff: int,
               n_layers: int, norm_first: bool, p: float, seed: int) -> None:  # fmt: skip
    V_src, V_tgt = 11 + seed % 5, 13 + seed % 3
    manual_seed(seed)
    built = call(cls, V_src, V_tgt, D, H, d_ff, n_layers, dropout=p,
                 norm_first=norm_first)  # fmt: skip
    module = as_module(built, f"{cls.__name__}(src_vocab, tgt_vocab, d_model, n_heads, "
                     "d_ff, n_layers, dropout, norm_first)")  # fmt: skip
    ref = make_model(V_src, V_tgt, n_layers, d_model=D, n_heads=H, d_ff=d_ff,
                     dropout=0.0, norm_first=norm_first, tie_generator=True, fast=False,
                     max_len=64)  # fmt: skip
    for m in ref.modules():  # the config keeps p < 1; p = 1 drops everything, no noise
        if isinstance(m, nn.Dropout):
            m.p = p
    randomise(ref, seed)  # PAD rows included: zeroing their output is the learner's
    load_reference(module, ref)
    training = p > 0
    module.train(training)
    ref.train(training)
    src = _tokens(B, S, V_src, seed + 30, None)
    tgt = _tokens(B, T, V_tgt, seed + 31, 1)
    with torch.no_grad():
        expected = ref(src, tgt)
        # the layers' dropout at work, the embeddings' missing: "no dropout" with p = 1
        undropped = _model_variant(ref, src, tgt, "ok") if training else None
    ref.eval()
    variants = [(hint, partial(_model_variant, ref, src, tgt, m))
                for hint, m in _MODEL_MISTAKES]  # fmt: skip
    if training:
        variants = [(
            "in training mode the paper drops out the sums of the embeddings and the "
            "positional encodings (self.dropout), in the encoder and the decoder",
            lambda: undropped,
        )]  # fmt: skip
    shape_hint = (
        f"the logits are (B, T, tgt_vocab) = {(B, T, V_tgt)}: the generator maps "
        "each of the decoder's vectors to one score per target word"
    )
    if what == "parts":
        with torch.no_grad():
            memory, src_mask = ref.encode(src)
            got = call(module.encode, src.clone())
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise Failure(
                "encode(src) must return two things: memory and src_mask",
                hint="return memory, src_mask: decode (and greedy decoding) needs the "
                "source's padding mask for the cross-attention",
            )
        memory_variants = [(hint, partial(_memory_variant, ref, src, m))
                           for hint, m in _MODEL_MISTAKES if m in _EMBEDDING_MISTAKES]  # fmt: skip
        expect("src_mask", got[1], src_mask,
               shape_hint="the source's padding mask is (B, 1, 1, S), True = a real "
               "token: padding_mask(src, pad_idx)")  # fmt: skip
        expect("memory", got[0], memory, atol=1e-3, rtol=1e-3,
               diagnose=lambda g: match(g, memory_variants, atol=1e-3),
               shape_hint="memory is the encoder's output, (B, S, d_model)")  # fmt: skip
        with torch.no_grad():
            out = call(module.decode, tgt.clone(), memory.clone(), src_mask.clone())
            expected_out = ref.decode(tgt, memory, src_mask)
        expect("decode's output", out, expected_out, atol=1e-3, rtol=1e-3,
               shape_hint="decode returns the decoder's output, (B, T, d_model): "
               "forward applies the generator")  # fmt: skip
        return
    with torch.no_grad():
        got = call(module, src.clone(), tgt.clone(), on_error=mask_error_hint)
    expect("logits", got, expected, atol=1e-3, rtol=1e-3,
           diagnose=lambda g: match(g, variants, atol=1e-3),
           shape_hint=shape_hint)  # fmt: skip


class TransformerParts(nn.Module):
    """The model's parts, named as the package names them (A.4's given ``__init__``);
    ``encode``, ``decode`` and ``forward`` are the exercise."""

    def __init__(self, src_vocab, tgt_vocab, d_model, n_heads, d_ff, n_layers,
                 dropout=0.1, norm_first=False, pad_idx=0, max_len=64):  # fmt: skip
        super().__init__()
        self.d_model, self.pad_idx = d_model, pad_idx
        self.src_embed = nn.Embedding(src_vocab, d_model, padding_idx=pad_idx)
        self.tgt_embed = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_idx)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        stack = dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff,
                     dropout=dropout, norm_first=norm_first)  # fmt: skip
        self.encoder, self.decoder = Encoder(**stack), Decoder(**stack)
        self.generator = nn.Linear(d_model, tgt_vocab)
        self.generator.weight = self.tgt_embed.weight  # tied (paper §3.4)


@register(
    name="embeddings not scaled by √d_model",
    checker=check_transformer_forward,
    keyword="√d_model",
    chapter=8,
    origin=COMMON,
    description="the token embeddings go into the sum with the positional encoding "
    "unscaled, where the paper multiplies them by √d_model",
)
class TransformerNoScale(TransformerParts):
    """Adds the positions to the raw embeddings."""

    def _embed(self, table, tokens):
        x = table(tokens)  # BUG: the paper multiplies by math.sqrt(self.d_model)
        x = x.masked_fill((tokens == self.pad_idx).unsqueeze(-1), 0.0)
        return self.dropout(x + self.pe[: tokens.size(1)])

    def encode(self, src):
        src_mask = padding_mask(src, self.pad_idx)  # (B, 1, 1, S)
        return self.encoder(self._embed(self.src_embed, src), src_mask), src_mask

    def decode(self, tgt, memory, src_mask):
        tgt_mask = target_mask(tgt, self.pad_idx)  # (B, 1, T, T)
        return self.decoder(
            self._embed(self.tgt_embed, tgt), memory, tgt_mask, src_mask
        )

    def forward(self, src, tgt):
        memory, src_mask = self.encode(src)
        return self.generator(self.decode(tgt, memory, src_mask))
