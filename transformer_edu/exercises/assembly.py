"""Chapter 11's "build it yourself" exercises, what they share: the feed-forward network
(A.1, chapter 7), loading the package's weights into a learner's classes, and
``use_layers``, which puts a learner's layers into a trained model. The layers (A.2,
A.3) are in ``blocks``, the whole model (A.4) in ``whole_model``.

From A.2 on, the ``__init__`` is given to the learner with the package's names
(``self_attn``, ``cross_attn``, ``ffn``, ``norm1``…, ``src_embed``…): the exercise is
the wiring in ``forward``. With those names the checker loads the reference's weights
into the learner's module, and chapter 11's finish line loads a trained model's.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from ..model.feed_forward import GatedFeedForward, PositionwiseFeedForward, feed_forward
from .harness import (
    Case,
    CheckResult,
    Failure,
    call,
    drawn,
    expect,
    manual_seed,
    match,
    randn,
    references,
    require_registered,
    run_cases,
)
from .registry import exercise

TORCH_LAYERS = (
    (nn.TransformerEncoderLayer, "torch.nn.TransformerEncoderLayer"),
    (nn.TransformerDecoderLayer, "torch.nn.TransformerDecoderLayer"),
    (nn.TransformerEncoder, "torch.nn.TransformerEncoder"),
    (nn.TransformerDecoder, "torch.nn.TransformerDecoder"),
    (nn.Transformer, "torch.nn.Transformer"),
)
FFN_REFERENCES = references(
    PositionwiseFeedForward, GatedFeedForward, feed_forward, *TORCH_LAYERS
)
KEEP_THE_NAMES = (
    "keep the given __init__: its sub-modules carry the package's names (self_attn, "
    "ffn, norm1, …), so that the checker, and a trained model, can load weights into "
    "your layer"
)


# --- the position-wise feed-forward network -------------------------------------------

_FFN_NAMES = (("linear1", "linear2"), ("w_1", "w_2"))  # the package's, the Annotated's


def _find_ffn_layers(module: nn.Module, D: int, d_ff: int) -> tuple[nn.Linear, ...]:
    for names in _FFN_NAMES:
        layers = tuple(getattr(module, n, None) for n in names)
        if all(isinstance(m, nn.Linear) for m in layers):
            for n, m, shape in zip(names, layers, ((D, d_ff), (d_ff, D)), strict=True):
                if (m.in_features, m.out_features) != shape:
                    raise Failure(
                        f"{n} is Linear({m.in_features}, {m.out_features}), "
                        f"expected Linear{shape}",
                        hint="the first layer widens d_model to d_ff, the second "
                        "brings d_ff back to d_model",
                    )
            return layers
    raise Failure(
        "cannot find the two linear layers",
        hint="name them linear1 (nn.Linear(d_model, d_ff)) and linear2 "
        "(nn.Linear(d_ff, d_model)), so the checker can set their weights",
    )


def _ffn_variant(lin1: nn.Linear, lin2: nn.Linear, x: Tensor, mistake: str) -> Tensor:
    h = lin1(x)
    if mistake == "no activation":
        return lin2(h)
    if mistake == "gelu":
        return lin2(nn.functional.gelu(h))
    if mistake == "relu on the output too":
        return torch.relu(lin2(torch.relu(h)))
    raise ValueError(mistake)


_FFN_MISTAKES = [
    (
        "no ReLU between the two layers: two linear maps in a row are one linear map, "
        "FFN(x) = W₂ ReLU(W₁x + b₁) + b₂",
        "no activation",
    ),
    ("GELU where the paper uses ReLU: max(0, W₁x + b₁)", "gelu"),
    (
        "a ReLU on the output too: the second layer's output goes out as it is "
        "(it can be negative)",
        "relu on the output too",
    ),
]


# chapter=8: A.1–A.4 wire chapters 2, 3, 7 and 8 together, and are graded after
# exercise 8 and before chapter 10's, whose checks run the package's layers inside a
# model (a reference's calls count against its exercise in any later check too)
@exercise("A.1", "MyFeedForward", points=1, chapter=8)
def check_feed_forward(cls: type, quiet: bool = False) -> CheckResult:
    """Check a class ``cls(d_model, d_ff)`` whose ``forward(x)`` computes the paper's
    FFN(x) = W₂ ReLU(W₁ x + b₁) + b₂ on every position: (B, L, D) -> (B, L, D).

    Its layers must be ``nn.Linear`` attributes named linear1 and linear2 (or w_1 and
    w_2): the checker sets their weights.
    """
    table = [  # B, L, D, d_ff, seed
        (2, 5, 8, 32, 80),
        (1, 1, 6, 12, 81),
        (3, 2, 16, 8, 82),  # a narrower hidden layer: the shapes tell the layers apart
    ]
    cases = [
        Case(f"B={B}, L={L}, D={D}, d_ff={d_ff}", partial(_run_ffn, cls, *row))
        for row in drawn(table, _other_ffn, seed=83)
        for B, L, D, d_ff, _ in [row]
    ]
    return run_cases("check_feed_forward", cases, quiet, FFN_REFERENCES)


def _other_ffn(rng: random.Random, row: tuple) -> tuple:
    B, L, D, d_ff, seed = row
    D2 = rng.randrange(4, 21, 2)
    return (
        rng.randint(1, 3),
        (1 if L == 1 else rng.randint(2, 7)),
        D2,
        (rng.randint(D2 + 1, 4 * D2) if d_ff > D else rng.randint(2, D2 - 1)),
        seed,
    )


def _run_ffn(cls: type, B: int, L: int, D: int, d_ff: int, seed: int) -> None:
    manual_seed(seed)
    module = as_module(call(cls, D, d_ff), f"{cls.__name__}(d_model, d_ff)")
    lin1, lin2 = _find_ffn_layers(module, D, d_ff)
    require_registered(module, (lin1, lin2))
    ref = PositionwiseFeedForward(D, d_ff).eval()
    with torch.no_grad():
        for i, (mine, theirs) in enumerate(((ref.linear1, lin1), (ref.linear2, lin2))):
            theirs.weight.copy_(randn(*mine.weight.shape, seed=seed + i, std=0.5))
            mine.weight.copy_(theirs.weight)
            if theirs.bias is None:
                raise Failure(
                    "a layer has no bias",
                    hint="the paper's FFN has biases b₁ and b₂: nn.Linear keeps them "
                    "unless bias=False",
                )
            theirs.bias.copy_(randn(*mine.bias.shape, seed=seed + 10 + i, std=0.5))
            mine.bias.copy_(theirs.bias)
    module.eval()
    x = randn(B, L, D, seed=seed + 20)
    with torch.no_grad():
        expected = ref(x)
        got = call(module, x.clone())
    variants = [
        (hint, partial(_ffn_variant, ref.linear1, ref.linear2, x, m))
        for hint, m in _FFN_MISTAKES
    ]
    expect(
        "output",
        got,
        expected,
        diagnose=lambda g: match(g, variants),
        shape_hint=f"the output has the input's shape (B, L, d_model) = {(B, L, D)}",
    )


# --- what the assembly exercises share ----------------------------------------------

# the learner's attention may name its projections as exercise 5.2 allows, and the
# feed-forward's layers as A.1 does
_ALIASES = {"q_proj": "w_q", "k_proj": "w_k", "v_proj": "w_v", "out_proj": "w_o",
            "linear1": "w_1", "linear2": "w_2"}  # fmt: skip
# the package's wrappers that A.4's plain modules do without: TokenEmbedding keeps its
# table in .embedding, Generator its layer in .proj
_UNWRAPPED = (("_embed.embedding.", "_embed."), ("generator.proj.", "generator."))


def _learner_key(key: str, theirs: dict) -> str:
    """The name the learner's module gives the reference's parameter ``key``."""
    if key in theirs:
        return key
    candidates = [".".join(_ALIASES.get(part, part) for part in key.split("."))]
    for old, new in _UNWRAPPED:
        candidates += [c.replace(old, new) for c in [key, *candidates]]
    return next((c for c in candidates if c in theirs), key)


def as_module(obj: Any, what: str) -> nn.Module:
    if not isinstance(obj, nn.Module):
        raise Failure(
            f"{what} is not an nn.Module",
            hint="subclass nn.Module and call super().__init__()",
        )
    return obj


def load_reference(module: nn.Module, ref: nn.Module) -> None:
    """The reference's weights, in the learner's layer (the package's names, or 5.2's
    w_q… for the attention's projections)."""
    theirs = module.state_dict()
    state = {
        _learner_key(key, theirs): value for key, value in ref.state_dict().items()
    }
    missing = sorted(set(state) - set(theirs))
    extra = sorted(set(theirs) - set(state))
    if missing or extra:
        raise Failure(
            "the layer's parameters are not the package's: "
            + "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing[:4])}" if missing else "",
                    f"unexpected {', '.join(extra[:4])}" if extra else "",
                )
                if part
            ),
            hint=KEEP_THE_NAMES,
        )
    for key, value in state.items():
        if theirs[key].shape != value.shape:
            raise Failure(
                f"{key} has shape {tuple(theirs[key].shape)}, expected "
                f"{tuple(value.shape)}",
                hint=KEEP_THE_NAMES,
            )
    with torch.no_grad():
        module.load_state_dict(state)


def randomise(ref: nn.Module, seed: int) -> None:
    """Weights that tell every piece apart: LayerNorm gains and biases included."""
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(ref.named_parameters())):
            noise = randn(*p.shape, seed=seed + 100 + i, std=0.4)
            # the module that holds it: "norm1" of "encoder.layers.0.norm1.weight"
            owner = name.rpartition(".")[0].rpartition(".")[2]
            gain = name.endswith("weight") and owner.startswith("norm")
            p.copy_(1 + noise if gain else noise)  # a LayerNorm's γ near 1


def mask_error_hint(e: Exception) -> str | None:
    text = str(e)
    if "mask" in text and ("broadcast" in text or "shape" in text):
        return (
            "a mask does not fit its attention: the self-attention takes (…, T, T), "
            "the decoder's tgt_mask; the cross-attention takes (…, T, S), memory_mask"
        )
    if "must match the size" in text:
        return (
            "the shapes do not add up: a residual sum needs the sub-layer's output in "
            "x's shape; the cross-attention's queries are x (T rows), its keys and "
            "values memory (S rows): cross_attn(x, memory, memory, memory_mask)"
        )
    return None


def load_package_weights(module: nn.Module, trained: nn.Module) -> nn.Module:
    """Load a package model's (or layer's) weights into the learner's ``module``,
    whose parts carry the given ``__init__``'s names; ``module`` back."""
    try:
        load_reference(module, trained)
    except Failure as f:
        raise ValueError(f"{f.what} ({f.hint})") from None
    return module


# --- the learner's layers in a trained model -------------------------------------------


class _WithoutCache(nn.Module):
    """A learner's decoder layer as the package's decoder calls it: that passes a KV
    cache argument (chapter 10), which a layer without a cache must find empty."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def __getattr__(self, name: str) -> Any:  # self_attn, cross_attn… are the layer's
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["layer"], name)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None, cache=None):
        if cache is not None:
            raise RuntimeError(
                "this decoder layer keeps no KV cache: decode with use_cache=False "
                "(greedy_decode(model, src, use_cache=False))"
            )
        return self.layer(x, memory, tgt_mask, memory_mask)


@contextlib.contextmanager
def use_layers(
    model: nn.Module,
    encoder_layer: type | None = None,
    decoder_layer: type | None = None,
) -> Iterator[nn.Module]:
    """Inside the block, every encoder (decoder) layer of ``model`` is an instance of
    ``encoder_layer`` (``decoder_layer``), the learner's class of exercise A.2 (A.3),
    built with the layer's sizes and carrying its trained weights; the package's
    layers come back after. Decode with ``use_cache=False`` meanwhile::

        with use_layers(model, MyEncoderLayer, MyDecoderLayer):
            greedy_decode(model, src, use_cache=False)
    """
    swaps = []
    for stack, cls in ((model.encoder, encoder_layer), (model.decoder, decoder_layer)):
        if cls is None:
            continue
        for i, old in enumerate(stack.layers):
            mine = cls(old.self_attn.d_model, old.self_attn.n_heads,
                       old.ffn.linear1.out_features, dropout=old.dropout1.p,
                       norm_first=old.norm_first)  # fmt: skip
            load_reference(mine, old)
            mine.to(next(old.parameters()).device).train(old.training)
            new = _WithoutCache(mine) if stack is model.decoder else mine
            swaps.append((stack.layers, i, old))
            stack.layers[i] = new
    try:
        yield model
    finally:
        for layers, i, old in swaps:
            layers[i] = old
