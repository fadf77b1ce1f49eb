"""The toy translator as a widget: type Japanese, see every greedy step.

One implementation for every place it is shown. Its front end (``static/
translator.js``, an anywidget ES module) runs the exported ONNX graphs in the browser
with onnxruntime-web in the static book page, and in Jupyter or Colab asks this
module's Python side, which answers with ``trace_view`` of ``translate(...,
trace=True)``: both draw the same dictionary.
"""

from __future__ import annotations

import functools
from pathlib import Path

from .data import Vocab
from .decoding import translate
from .model import Transformer

STATIC = Path(__file__).parent / "static"
EXAMPLES = (
    "私は太郎です",
    "私は 太郎です",
    "花子は昨日公園で太郎に会いました",
    "彼女は毎朝電車で学校に行きます",
    "私はピカチュウです",
    "ピカチュウ",
)


def trace_view(
    model: Transformer, text: str, src_vocab: Vocab, tgt_vocab: Vocab, top_k: int = 5
) -> dict:
    """``translate(..., trace=True)`` as plain data (what the page computes itself).

    Keys: tokens, unknown, steps (prefix, top [token, p] pairs, top_ids, chosen,
    chosen_id, attn (L, H, S) nested lists), text; or only ``error`` (and tokens).
    """
    try:
        tr = translate(model, text, src_vocab, tgt_vocab, trace=True)
    except ValueError as e:  # empty, every word unknown, too long: say why
        return {"error": str(e)}
    itos = tgt_vocab.itos
    steps = [
        {
            "prefix": [itos[i] for i in s.prefix],
            "top": [[itos[i], p] for i, p in zip(s.top_ids, s.top_probs, strict=True)][
                :top_k
            ],
            "top_ids": s.top_ids[:top_k],
            "chosen": itos[s.chosen],
            "chosen_id": s.chosen,
            "attn": s.cross_attention.tolist(),  # (L, H, S)
        }
        for s in tr.steps
    ]
    return {"tokens": tr.tokens, "unknown": tr.unknown, "steps": steps, "text": tr.text}


@functools.cache
def _widget_class():
    """The AnyWidget subclass, made on first use (anywidget is a book extra)."""
    import anywidget
    import traitlets

    class Translator(anywidget.AnyWidget):
        _esm = STATIC / "translator.js"
        _css = STATIC / "translator.css"
        text = traitlets.Unicode(EXAMPLES[0]).tag(sync=True)  # the sentence shown first
        examples = traitlets.List(list(EXAMPLES)).tag(sync=True)  # buttons under it

    return Translator


def translator_widget(
    model: Transformer | None = None,
    src_vocab: Vocab | None = None,
    tgt_vocab: Vocab | None = None,
    text: str = EXAMPLES[0],
):
    """The widget; with a kernel, ``model`` (default: the trained toy model) answers."""
    if model is None:
        from .checkpoint import toy_model

        model, src_vocab, tgt_vocab = toy_model(progress=False)
    widget = _widget_class()(text=text)

    def on_msg(_widget, content, _buffers) -> None:
        # the front end asks {"type": "translate", "id", "text"}; answer the same id
        if isinstance(content, dict) and content.get("type") == "translate":
            result = trace_view(model, str(content.get("text", "")), src_vocab,
                                tgt_vocab)  # fmt: skip
            widget.send({"type": "result", "id": content.get("id"), "result": result})

    widget.on_msg(on_msg)
    return widget
