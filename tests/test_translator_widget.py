"""Tests for transformer_edu/translator_widget.py and its front end: the view data, the
kernel's answer to the front end, and the JavaScript segmenter equal to data.segment."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch
from _toy import tiny_trained

from transformer_edu.data import load_corpus, segment
from transformer_edu.decoding import translate
from transformer_edu.translator_widget import STATIC, trace_view, translator_widget


def test_trace_view_is_translate_trace_as_data():
    model, sv, tv, _, _ = tiny_trained()
    tr = translate(model, "私は太郎です", sv, tv, trace=True)
    view = trace_view(model, "私は太郎です", sv, tv)
    assert view["tokens"] == tr.tokens and view["text"] == tr.text
    assert len(view["steps"]) == len(tr.steps)
    for got, step in zip(view["steps"], tr.steps, strict=True):
        assert got["top_ids"] == step.top_ids and got["chosen_id"] == step.chosen
        assert [p for _, p in got["top"]] == step.top_probs
        torch.testing.assert_close(torch.tensor(got["attn"]), step.cross_attention)
    json.dumps(view)  # plain data: it crosses to the browser as JSON


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "the sentence is empty"),
        ("ピカチュウ", "every word is unknown to the model: ピカチュウ"),
        ("私は" * 20 + "太郎です", "more than the model's max_len=32"),
    ],
)
def test_trace_view_names_bad_input(text, message):
    model, sv, tv, _, _ = tiny_trained()
    assert message in trace_view(model, text, sv, tv)["error"]


def test_widget_answers_the_front_end_with_the_same_id():
    pytest.importorskip("anywidget")
    model, sv, tv, _, _ = tiny_trained()
    widget = translator_widget(model, sv, tv)
    assert widget.get_state()["_esm"] == (STATIC / "translator.js").read_text()
    sent = []
    widget.send = lambda content, buffers=None: sent.append(content)
    widget._handle_custom_msg(
        {"type": "translate", "id": 7, "text": "私は 太郎です"}, []
    )
    widget._handle_custom_msg({"type": "other"}, [])
    assert len(sent) == 1 and sent[0]["id"] == 7 and sent[0]["type"] == "result"
    assert sent[0]["result"] == trace_view(model, "私は太郎です", sv, tv)


# the JavaScript segmenter, run by Node on the widget's own module
SEGMENT_JS = """
import { readFileSync } from "node:fs";
const { segment } = await import(process.argv[1]);
const { lexicon, texts } = JSON.parse(readFileSync(0, "utf8"));
const words = new Set(lexicon);
process.stdout.write(JSON.stringify(texts.map((t) => segment(t, words))));
"""
TRICKY = [
    "",
    "  。",
    "私は 太郎です",
    "私は\u3000太郎です",
    " 私は\u3000 太郎です。 ",
    "私は太郎です？",
    "あなたは学生ですか?",
    "私はピカチュウです",
    "ピカチュウ",
    "私は太郎です。。",
    "私。は太郎です",
    "abc私は😀です",
    "私 は  太郎 です",
]


def test_the_pages_segmenter_equals_data_segment():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the book's tests need it: npm)")
    _, sv, _, _, _ = tiny_trained()
    texts = TRICKY + [p.ja for p in load_corpus("all")]
    lexicon = sv.itos  # what translate() and the page segment over
    result = subprocess.run(
        [node, "--input-type=module", "-e", SEGMENT_JS, (STATIC / "translator.js").as_uri()],
        input=json.dumps({"lexicon": lexicon, "texts": texts}),
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    got = json.loads(result.stdout)
    want = [segment(t, lexicon=lexicon) for t in texts]
    diff = [(t, g, w) for t, g, w in zip(texts, got, want, strict=True) if g != w]
    assert not diff, diff[:5]
