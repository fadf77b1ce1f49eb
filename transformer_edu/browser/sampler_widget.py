"""A language model sampling in the page: prompt, temperature, top-k, top-p and seed.

Chapter 13's tiny GPT writes English continuations of a prompt. The widget
(``static/sampler.js``, an anywidget ES module) runs the model exported to ONNX with
onnxruntime-web in the static book page, and in Jupyter or Colab asks this module's
Python side. Both draw from the same distribution (``decoding.next_token_probs``,
computed in float64 from the model's float32 logits) with the same random numbers
(``Mulberry32``, a 32-bit generator written identically in both languages), so one
seed gives the same samples in the page and in the kernel.
"""

from __future__ import annotations

import base64
import functools
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from ..decoding import next_token_probs
from ..toy.data import Vocab, detokenize_en, tokenize_en

STATIC = Path(__file__).parent / "static"
TOP_WORDS = 10  # the next-word distribution the widget draws
N_SAMPLES = 5  # continuations per setting
MAX_NEW = 20  # most words a continuation adds


class Mulberry32:
    """A small 32-bit random generator (Tommy Ettinger's Mulberry32), the same in
    static/sampler.js: ``uniform()`` gives k / 2**32 for a 32-bit k."""

    def __init__(self, seed: int):
        self.state = seed & 0xFFFFFFFF

    def uniform(self) -> float:
        self.state = (self.state + 0x6D2B79F5) & 0xFFFFFFFF
        t = self.state
        t = ((t ^ (t >> 15)) * (t | 1)) & 0xFFFFFFFF
        t ^= (t + (((t ^ (t >> 7)) * (t | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296


def sample_index(probs: Sequence[float], u: float) -> int:
    """The index where the running sum of ``probs`` first passes ``u`` in [0, 1)
    (inverse transform sampling); the last index with mass if rounding leaves u."""
    total, last = 0.0, 0
    for i, p in enumerate(probs):
        if p > 0:
            total += p
            last = i
            if u < total:
                return i
    return last


def sample(
    next_logits: Callable[[list[int]], Tensor],
    prompt: list[int],
    n: int = N_SAMPLES,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    never: Sequence[int] = (),
    eos: int = Vocab.EOS,
    max_new: int = MAX_NEW,
) -> list[list[int]]:
    """``n`` continuations of ``prompt`` (ids), each up to EOS (included) or
    ``max_new`` ids. ``next_logits(ids)`` gives the (V,) logits after ``ids``;
    ``never`` are ids no sentence holds. Temperature 0: greedy (one continuation)."""
    rng = Mulberry32(seed)
    out = []
    for _ in range(1 if temperature == 0 else n):
        ids = list(prompt)
        for _ in range(max_new):
            logits = next_logits(ids).double()  # (V,)
            logits[list(never)] = -math.inf
            if temperature == 0:
                nxt = int(logits.argmax())
            else:
                probs = next_token_probs(logits[None], temperature, top_k, top_p)[0]
                nxt = sample_index(probs.tolist(), rng.uniform())
            ids.append(nxt)
            if nxt == eos:
                break
        out.append(ids[len(prompt) :])
    return out


def distribution(
    logits: Tensor, temperature: float, top_k: int, top_p: float, never: Sequence[int]
) -> list[tuple[int, float]]:
    """The ``TOP_WORDS`` most probable next ids and their probabilities (float64)."""
    z = logits.double().clone()
    z[list(never)] = -math.inf
    if temperature == 0:
        return [(int(z.argmax()), 1.0)]
    probs = next_token_probs(z[None], temperature, top_k, top_p)[0]
    p, ids = probs.topk(TOP_WORDS)
    return [(int(i), float(q)) for i, q in zip(ids, p, strict=True) if q > 0]


class LastLogits(nn.Module):
    """A language model's logits for the next token after its whole input.

    Shape: tokens (1, L) -> logits (V,).
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor) -> Tensor:
        return self.model(tokens)[0, -1]


def export_lm(model: nn.Module, max_len: int, example: Sequence[int]) -> bytes:
    """``model`` (tokens (1, L) -> logits (1, L, V)) as ONNX bytes (float32, L dynamic
    up to ``max_len``), for onnxruntime-web."""
    import logging
    import warnings

    from .onnx_export import OPSET

    L = torch.export.Dim("L", min=1, max=max_len)
    was = model.training
    model.eval()
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                LastLogits(model), (torch.tensor([list(example)]),), dynamo=True,
                opset_version=OPSET, input_names=["tokens"], output_names=["logits"],
                dynamic_shapes={"tokens": {1: L}}, external_data=False, verbose=False,
            )  # fmt: skip
    finally:
        log.setLevel(level)
        model.train(was)
    proto = program.model_proto
    for node in proto.graph.node:  # the exporter's debugging notes: not needed
        del node.metadata_props[:]
    buffer = io.BytesIO()
    buffer.write(proto.SerializeToString())
    return buffer.getvalue()


def sampler_view(model: nn.Module, vocab: Vocab, never: Sequence[int], prompt: str,
                 temperature: float, top_k: int, top_p: float, seed: int,
                 max_len: int) -> dict:  # fmt: skip
    """What the page computes itself: the prompt's tokens, the next-word distribution
    after it and the continuations."""
    words = tokenize_en(prompt)
    ids = [Vocab.BOS, *vocab.encode(words)][-max_len:]
    was = model.training
    model.eval()

    @torch.no_grad()
    def next_logits(prefix: list[int]) -> Tensor:
        return model(torch.tensor([prefix[-max_len:]]))[0, -1]

    try:
        dist = distribution(next_logits(ids), temperature, top_k, top_p, never)
        samples = sample(next_logits, ids, N_SAMPLES, temperature, top_k, top_p, seed,
                         never)  # fmt: skip
    finally:
        model.train(was)
    return {
        "tokens": words,
        "unknown": vocab.unknown(words),
        "next": [[vocab.itos[i], p] for i, p in dist],
        "samples": [detokenize_en(vocab.decode(s)) for s in samples],
    }


@functools.cache
def _widget_class():
    """The AnyWidget subclass, made on first use (anywidget is a book extra)."""
    import anywidget
    import traitlets

    class Sampler(anywidget.AnyWidget):
        _esm = STATIC / "sampler.js"
        _css = STATIC / "sampler.css"
        onnx = traitlets.Unicode("").tag(sync=True)  # the model, base64 ONNX bytes
        itos = traitlets.List([]).tag(sync=True)
        never = traitlets.List([]).tag(sync=True)
        bos = traitlets.Int(Vocab.BOS).tag(sync=True)
        eos = traitlets.Int(Vocab.EOS).tag(sync=True)
        unk = traitlets.Int(Vocab.UNK).tag(sync=True)
        max_len = traitlets.Int(32).tag(sync=True)
        prompt = traitlets.Unicode("I am").tag(sync=True)
        temperature = traitlets.Float(1.0).tag(sync=True)
        top_k = traitlets.Int(0).tag(sync=True)
        top_p = traitlets.Float(1.0).tag(sync=True)
        seed = traitlets.Int(0).tag(sync=True)
        # the view of the settings above, computed when the widget was made: shown
        # before the runtime loads (it loads when the reader first moves a control)
        initial = traitlets.Dict({}).tag(sync=True)

    return Sampler


def sampler_widget(model: nn.Module, vocab: Vocab, never: Sequence[int],
                   max_len: int, prompt: str = "I am", **settings):  # fmt: skip
    """The widget for ``model`` (tokens (1, L) -> logits (1, L, V)); settings:
    temperature, top_k, top_p, seed."""
    start = [Vocab.BOS, *vocab.encode(tokenize_en(prompt))]
    onnx = base64.b64encode(export_lm(model, max_len, start)).decode("ascii")
    widget = _widget_class()(onnx=onnx, itos=list(vocab.itos), never=list(never),
                             max_len=max_len, prompt=prompt, **settings)  # fmt: skip

    def view(content: dict) -> dict:
        return sampler_view(
            model, vocab, never, str(content.get("prompt", "")),
            float(content.get("temperature", 1.0)), int(content.get("top_k", 0)),
            float(content.get("top_p", 1.0)), int(content.get("seed", 0)), max_len,
        )  # fmt: skip

    widget.initial = view({"prompt": prompt, "temperature": widget.temperature,
                           "top_k": widget.top_k, "top_p": widget.top_p,
                           "seed": widget.seed})  # fmt: skip

    def on_msg(_widget, content, _buffers) -> None:
        if isinstance(content, dict) and content.get("type") == "sample":
            widget.send({"type": "result", "id": content.get("id"),
                         "result": view(content)})  # fmt: skip

    widget.on_msg(on_msg)
    return widget
