"""Tests for transformer_edu/browser/translator_widget.py and its front end
(browser/static/translator.js): the view data, the kernel's answer to the front end,
and the page's JavaScript rules equal to the package's (the toy's segmenter, the
Tatoeba text's sentences and refusals, the length penalty), run by Node."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch
from _toy import tiny_trained

from transformer_edu.browser.translator_widget import (
    STATIC,
    tatoeba_view,
    trace_view,
    translator_widget,
)
from transformer_edu.decoding import beam_search, length_penalty, translate
from transformer_edu.tatoeba.data import (
    JAPANESE,
    MAX_JA_CHARS,
    load_tatoeba,
    normalise,
    plan_text,
    sentence_problem,
    split_sentences,
)
from transformer_edu.toy.data import load_corpus, segment

JS_CALL = Path(__file__).resolve().parents[1] / "helpers" / "js_call.mjs"
TRANSLATOR_JS = STATIC / "translator.js"


def js(module: Path, calls: list) -> list:
    """Results of calling the module's exported functions in Node."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the book's tests need it: npm)")
    with tempfile.TemporaryDirectory() as tmp:
        job, out = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job.write_text(json.dumps(calls), encoding="utf8")
        subprocess.run([node, str(JS_CALL), str(module), str(job), str(out)],
                       check=True, timeout=300)  # fmt: skip
        return json.loads(out.read_text(encoding="utf8"))


def test_trace_view_is_translate_trace_as_data():
    model, sv, tv, _, _ = tiny_trained()
    tr = translate(model, "私は太郎です", sv, tv, trace=True)
    view = trace_view(model, "私は太郎です", sv, tv)
    (s,) = view["sentences"]
    assert s["pieces"] == tr.tokens and s["text"] == view["text"] == tr.text
    assert len(s["steps"]) == len(tr.steps) and "beams" not in s
    for got, step in zip(s["steps"], tr.steps, strict=True):
        assert got["top_ids"] == step.top_ids and got["chosen_id"] == step.chosen
        torch.testing.assert_close(
            torch.tensor([p for _, p in got["top"]]), torch.tensor(step.top_probs)
        )
        torch.testing.assert_close(torch.tensor(got["attn"]), step.cross_attention)
    json.dumps(view)  # plain data: it crosses to the browser as JSON


def test_trace_view_with_a_beam_is_beam_search():
    model, sv, tv, _, _ = tiny_trained()
    view = trace_view(model, "私は太郎です", sv, tv, beam=3)
    (s,) = view["sentences"]
    src = torch.tensor([sv.encode(s["pieces"])])
    hyps = beam_search(model, src, 3, max_len=40)
    assert [score for _, score in s["beams"]] == [score for _, score in hyps]
    assert [st["chosen_id"] for st in s["steps"]] == hyps[0][0]
    assert s["text"] == translate(model, "私は太郎です", sv, tv, beam=3).text


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
    (s,) = trace_view(model, text, sv, tv)["sentences"]
    assert message in s["error"]


def test_widget_answers_the_front_end_with_the_same_id():
    pytest.importorskip("anywidget")
    model, sv, tv, _, _ = tiny_trained()
    widget = translator_widget(model, sv, tv)
    assert widget.get_state()["_esm"] == TRANSLATOR_JS.read_text()
    sent = []
    widget.send = lambda content, buffers=None: sent.append(content)
    widget._handle_custom_msg(
        {"type": "translate", "id": 7, "text": "私は 太郎です", "beam": 2}, []
    )
    widget._handle_custom_msg({"type": "other"}, [])
    assert len(sent) == 1 and sent[0]["id"] == 7 and sent[0]["type"] == "result"
    assert sent[0]["result"] == trace_view(model, "私は 太郎です", sv, tv, beam=2)


def test_tatoeba_view_splits_a_text_and_says_what_it_cannot_take():
    from transformer_edu.tatoeba.checkpoint import load_tatoeba_checkpoint

    model, tok, _ = load_tatoeba_checkpoint()
    view = tatoeba_view(model, tok, "私は太郎です。猫が好きです！OK!")
    sources = [s["source"] for s in view["sentences"]]
    assert sources == ["私は太郎です。", "猫が好きです!", "OK!"]
    first, _, ok = view["sentences"]
    assert first["pieces"] == tok.pieces("私は太郎です。") and first["error"] is None
    assert ok["text"] == "OK!" and ok["steps"] == []  # not Japanese: kept as it is
    assert view["text"].endswith(" OK!")
    bad = tatoeba_view(model, tok, "Hello world")["sentences"][0]["error"]
    assert bad.startswith("“Hello world” is not Japanese")
    beam = tatoeba_view(model, tok, "私は太郎です", beam=3, alpha=0.6)["sentences"][0]
    assert len(beam["beams"]) >= 1 and beam["text"] == beam["beams"][0][0]


# --- the page's rules in JavaScript, equal to the package's ------------------------

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
TEXTS = TRICKY + [
    "今日は雨です。明日は晴れ！本当？",
    "え!?本当?\n二行目\r\n三行目\u2028四",
    "Hello world",
    "🙂🙂",
    "。。",
    "ＡＢＣ１２３ ｶﾀｶﾅ。",
    "「こんにちは」と言った。OK!",
    "私は" * 20,
    "\t\n\x1c",
    "彼は𩸽を食べた。",
]


def _random_texts(n: int, seed: int = 0) -> list[str]:
    """Texts built from corpus sentences, punctuation, spaces, Latin words, emoji."""
    rng = random.Random(seed)
    ja = [p.ja for p in load_tatoeba("dev")]
    parts = ja + ["。", "！", "？", "!", "?", "\n", " ", "\u3000", "Hello", "OK", "🙂",
                  "…", "ｱｲｳ", "123"]  # fmt: skip
    return [
        "".join(rng.choice(parts) for _ in range(rng.randint(1, 6))) for _ in range(n)
    ]


def test_the_pages_segmenter_equals_data_segment():
    _, sv, _, _, _ = tiny_trained()
    texts = TRICKY + [p.ja for p in load_corpus("all")]
    lexicon = sv.itos  # what translate() and the page segment over
    got = js(TRANSLATOR_JS, [["segment", [t, lexicon]] for t in texts])
    want = [segment(t, lexicon=lexicon) for t in texts]
    diff = [(t, g, w) for t, g, w in zip(texts, got, want, strict=True) if g != w]
    assert not diff, diff[:5]


def _reason(message: str | None) -> str | None:
    """The page's key for the package's message."""
    if message is None:
        return None
    keys = {"is not Japanese": "notJapanese", "has nothing to translate": "nothing",
            "characters; the model was trained": "tooLong"}  # fmt: skip
    (key,) = [k for text, k in keys.items() if text in message]
    return key


def test_the_pages_text_rules_equal_the_packages():
    texts = TEXTS + _random_texts(2000) + [p.ja for p in load_tatoeba("dev")]
    calls = [["planText", [t, MAX_JA_CHARS]] for t in texts]
    calls += [["normalise", [t]] for t in texts]
    got = js(TRANSLATOR_JS, calls)
    plans, norms = got[: len(texts)], got[len(texts) :]
    assert norms == [normalise(t) for t in texts]
    for text, plan in zip(texts, plans, strict=True):
        try:
            want = plan_text(text)
        except ValueError:
            assert plan == {"error": ["emptyText"]}, text
            continue
        got_plan = plan["plan"]
        assert [p["source"] for p in got_plan] == split_sentences(text), text
        assert [p["translate"] for p in got_plan] == [p["translate"] for p in want]
        # the page words the reason in its own language: compare which reason
        for g, w in zip(got_plan, want, strict=True):
            assert (g["error"] and g["error"][0]) == _reason(w["error"]), (text, g, w)


def test_the_pages_japanese_characters_are_the_packages():
    """Every code point: kana or kanji to the page exactly when to the package."""
    marked = js(TRANSLATOR_JS, [["japaneseCodePoints", []]])[0]
    want = [c for c in range(0x110000) if JAPANESE.match(chr(c))]
    assert marked == want


def test_the_pages_length_penalty_is_the_packages():
    cases = [(n, a) for n in range(1, 60) for a in (0.0, 0.2, 0.6, 1.0, 1.5)]
    got = js(TRANSLATOR_JS, [["lengthPenalty", [n, a]] for n, a in cases])
    want = [length_penalty(n, a) for n, a in cases]
    assert max(abs(g - w) / w for g, w in zip(got, want, strict=True)) < 1e-15


def test_problems_are_worded_for_each_case():
    assert sentence_problem("猫です") is None
    assert "not Japanese" in sentence_problem("Hello")
    assert "nothing to translate" in sentence_problem("🙂!")
    assert f"at most {MAX_JA_CHARS}" in sentence_problem("猫" * (MAX_JA_CHARS + 1))
