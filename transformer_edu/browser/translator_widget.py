"""The translators as a widget: type Japanese, see every decoding step.

One implementation for every place it is shown, for the toy model (chapter 10) and the
shipped Tatoeba model (chapter 12). Its front end (``static/translator.js``, an
anywidget ES module) runs the exported ONNX graphs in the browser with
onnxruntime-web in the static book page, and in Jupyter or Colab asks this module's
Python side, which answers with ``trace_view`` / ``tatoeba_view``: both draw the same
dictionary.

The view of a text: ``{"sentences": [...], "text": English}``; each sentence
``{"source", "pieces", "unknown", "text", "steps", "beams", "error"}``, where a step is
``{"prefix", "top": [[token, p]...], "top_ids", "chosen", "chosen_id", "attn"}`` (attn:
(L, H, S) nested lists, the cross-attention of that step) and ``beams`` the finished
hypotheses of beam search ``[[text, score]...]``, best first.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from ..decoding import _next_log_probs, beam_search, greedy_decode, translate
from ..model.transformer import Transformer
from ..toy.data import Vocab, detokenize_en

STATIC = Path(__file__).parent / "static"
EXAMPLES = (
    "私は太郎です",
    "私は 太郎です",
    "花子は昨日公園で太郎に会いました",
    "彼女は毎朝電車で学校に行きます",
    "私はピカチュウです",
    "ピカチュウ",
)
TOP_K = 5


@torch.no_grad()
def forced_steps(
    model: Transformer, src: torch.Tensor, out_ids: list[int], itos: list[str],
    top_k: int = TOP_K,
) -> list[dict]:  # fmt: skip
    """Each step of producing ``out_ids`` (EOS included) from ``src`` (1, S): the
    prefix given, the top-k next tokens and the cross-attention (L, H, S)."""
    was_training, was_recording = model.training, model.recording_attention
    model.eval()
    model.record_attention(True)
    try:
        memory, src_mask = model.encode(src)
        steps = []
        for j, chosen in enumerate(out_ids):
            ys = torch.tensor([[Vocab.BOS, *out_ids[:j]]], device=src.device)
            logp = _next_log_probs(model, ys, memory, src_mask, None)[0]  # (V,)
            probs, ids = logp.exp().topk(min(top_k, logp.numel()))
            cross = torch.stack(
                [w[0, :, -1] for w in model.attention_weights()["cross"]]
            )  # (L, H, S)
            steps.append({
                "prefix": [itos[i] for i in ys[0].tolist()],
                "top": [[itos[i], p] for i, p in zip(ids.tolist(), probs.tolist(),
                                                     strict=True)],
                "top_ids": ids.tolist(),
                "chosen": itos[chosen],
                "chosen_id": chosen,
                "attn": cross.tolist(),
            })  # fmt: skip
    finally:
        model.record_attention(was_recording)
        model.train(was_training)
    return steps


def trace_view(
    model: Transformer, text: str, src_vocab: Vocab, tgt_vocab: Vocab,
    top_k: int = TOP_K, beam: int = 1,
) -> dict:  # fmt: skip
    """The toy's view of one sentence (what the page computes itself): greedy
    decoding, or beam search of ``beam`` (no length penalty, as ``translate``)."""
    try:
        tr = translate(model, text, src_vocab, tgt_vocab, beam=beam)
    except ValueError as e:  # empty, every word unknown, too long: say why
        return {"sentences": [{"source": text, "error": str(e)}], "text": ""}
    device = next(model.parameters()).device
    src = torch.tensor([src_vocab.encode(tr.tokens)], device=device)
    sentence = {"source": text, "pieces": tr.tokens, "unknown": tr.unknown,
                "text": tr.text, "error": None}  # fmt: skip
    if beam > 1:
        hyps = beam_search(model, src, beam, max_len=40)
        out = hyps[0][0]
        sentence["beams"] = [
            [detokenize_en(tgt_vocab.decode(ids)), score] for ids, score in hyps
        ]
    else:
        out = greedy_decode(model, src, max_len=40).tokens[0]
    sentence["steps"] = forced_steps(model, src, out, tgt_vocab.itos, top_k)
    return {"sentences": [sentence], "text": tr.text}


def tatoeba_view(
    model: Transformer, tok, text: str, beam: int = 1, alpha: float = 0.6,
    top_k: int = TOP_K,
) -> dict:  # fmt: skip
    """The Tatoeba model's view of a text of any length: each sentence's pieces,
    output (greedy, or beam search with the length penalty ``alpha``) and steps."""
    from ..tatoeba.data import plan_text

    try:
        plan = plan_text(text)
    except ValueError as e:
        return {"sentences": [{"source": text, "error": str(e)}], "text": ""}
    device = next(model.parameters()).device
    itos = [tok.sp.id_to_piece(i) for i in range(len(tok))]
    sentences = []
    for p in plan:
        s = {"source": p["source"], "error": p["error"]}
        if p["translate"]:
            ids = tok.encode(p["source"])
            src = torch.tensor([ids], device=device)
            limit = len(ids) + 50
            if beam > 1:
                hyps = beam_search(model, src, beam, alpha=alpha, max_len=limit)
                out = hyps[0][0]
                s["beams"] = [[tok.decode(h), score] for h, score in hyps]
            else:
                out = greedy_decode(model, src, max_len=limit).tokens[0]
            s.update(pieces=[itos[i] for i in ids], unknown=[], text=tok.decode(out),
                     steps=forced_steps(model, src, out, itos, top_k))  # fmt: skip
        elif not p["error"]:
            s.update(pieces=[], unknown=[], text=p["source"], steps=[])
        sentences.append(s)
    english = " ".join(s["text"] for s in sentences if s.get("text") is not None)
    return {"sentences": sentences, "text": english}


@functools.cache
def _widget_class():
    """The AnyWidget subclass, made on first use (anywidget is a book extra)."""
    import anywidget
    import traitlets

    class Translator(anywidget.AnyWidget):
        _esm = STATIC / "translator.js"
        _css = STATIC / "translator.css"
        kind = traitlets.Unicode("toy").tag(sync=True)  # "toy" or "tatoeba"
        # where the page finds the graphs, under the book's _static/
        model_dir = traitlets.Unicode("translator").tag(sync=True)
        text = traitlets.Unicode(EXAMPLES[0]).tag(sync=True)  # the text shown first
        examples = traitlets.List(list(EXAMPLES)).tag(sync=True)  # buttons under it
        beam = traitlets.Int(1).tag(sync=True)  # 1: greedy
        alpha = traitlets.Float(0.0).tag(sync=True)  # length penalty (beam search)
        max_beam = traitlets.Int(6).tag(sync=True)
        # True: the runtime and the model load when the reader first translates
        lazy = traitlets.Bool(False).tag(sync=True)

    return Translator


def _answer(widget, view) -> None:
    def on_msg(_widget, content, _buffers) -> None:
        # the front end asks {"type": "translate", "id", "text", "beam", "alpha"}
        if isinstance(content, dict) and content.get("type") == "translate":
            result = view(str(content.get("text", "")), int(content.get("beam", 1)),
                          float(content.get("alpha", 0.0)))  # fmt: skip
            widget.send({"type": "result", "id": content.get("id"), "result": result})

    widget.on_msg(on_msg)


def translator_widget(
    model: Transformer | None = None,
    src_vocab: Vocab | None = None,
    tgt_vocab: Vocab | None = None,
    text: str = EXAMPLES[0],
    examples: list[str] | None = None,
):
    """The toy's widget; with a kernel, ``model`` (default: the trained toy model)
    answers. Greedy or beam search (the beam control), as ``translate``."""
    if model is None:
        from ..toy.checkpoint import toy_model

        model, src_vocab, tgt_vocab = toy_model(progress=False)
    widget = _widget_class()(text=text, examples=list(examples or EXAMPLES))
    _answer(widget, lambda t, beam, _alpha: trace_view(model, t, src_vocab, tgt_vocab,
                                                       beam=beam))  # fmt: skip
    return widget


def tatoeba_widget(model: Transformer | None = None, tok=None, text: str = "",
                   examples: list[str] | None = None):  # fmt: skip
    """Chapter 12's widget: the shipped Tatoeba model (default), any Japanese text,
    greedy or beam search with the length penalty α as controls, starting at the
    decoding chosen on dev (``tatoeba.translate.DEFAULT_BEAM`` / ``DEFAULT_ALPHA``)."""
    from ..tatoeba.translate import DEFAULT_ALPHA, DEFAULT_BEAM

    if model is None:
        from ..tatoeba.checkpoint import load_tatoeba_checkpoint

        model, tok, _ = load_tatoeba_checkpoint()
    examples = list(examples or [])
    widget = _widget_class()(kind="tatoeba", model_dir="tatoeba",
                             text=text or (examples[0] if examples else ""),
                             examples=examples, beam=DEFAULT_BEAM, alpha=DEFAULT_ALPHA,
                             max_beam=max(8, DEFAULT_BEAM), lazy=True)  # fmt: skip
    _answer(widget, lambda t, beam, alpha: tatoeba_view(model, tok, t, beam, alpha))
    return widget
