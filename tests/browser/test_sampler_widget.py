"""Tests for transformer_edu/browser/sampler_widget.py and its front end
(browser/static/sampler.js): one seed, the same random numbers, the same
distribution and the same samples in Python and in the page's JavaScript (Node)."""

from __future__ import annotations

import base64
import math
import random

import pytest
import torch
from test_translator_widget import js  # its folder

from transformer_edu.browser.sampler_widget import (
    STATIC,
    Mulberry32,
    sample,
    sample_index,
    sampler_view,
    sampler_widget,
)
from transformer_edu.decoding import next_token_probs
from transformer_edu.toy.data import Vocab, tokenize_en

SAMPLER_JS = STATIC / "sampler.js"


def test_mulberry32_is_the_pages_generator():
    seeds = [0, 1, 7, 42, 2**31 - 1, 2**32 - 1]
    py = [[Mulberry32(s).uniform() for _ in range(1)] for s in seeds]
    streams = []
    for s in seeds:
        rng = Mulberry32(s)
        streams.append([rng.uniform() for _ in range(500)])
    got = js(SAMPLER_JS, [["mulberryStream", [s, 500]] for s in seeds])
    assert got == streams and [s[:1] for s in streams] == py
    assert all(0 <= u < 1 for s in streams for u in s)


def test_next_token_probs_and_sampling_are_the_pages():
    rng = random.Random(0)
    cases = []
    for _ in range(300):
        logits = [rng.gauss(0, 3) for _ in range(rng.randint(2, 40))]
        if rng.random() < 0.3:
            logits[
                rng.randrange(len(logits))
            ] = -1e30  # a word never said (JSON: no -inf)
        setting = (rng.choice([0.3, 0.7, 1.0, 1.5, 2.0]), rng.choice([0, 1, 3, 5]),
                   rng.choice([1.0, 0.9, 0.5, 0.2]))  # fmt: skip
        cases.append((logits, setting, rng.random()))
    calls = [["nextTokenProbs", [lg, *st]] for lg, st, _ in cases]
    got = js(SAMPLER_JS, calls)
    for (logits, setting, u), probs in zip(cases, got, strict=True):
        want = next_token_probs(torch.tensor([logits], dtype=torch.float64), *setting)
        assert (
            max(abs(a - b) for a, b in zip(probs, want[0].tolist(), strict=True))
            < 1e-12
        )
        assert sample_index(want[0].tolist(), u) == sample_index(probs, u)
    picked = js(SAMPLER_JS, [["sampleIndex", [p, u]] for p, (_, _, u) in
                             zip(got, cases, strict=True)])  # fmt: skip
    assert picked == [
        sample_index(p, u) for p, (_, _, u) in zip(got, cases, strict=True)
    ]


def test_the_pages_tokenizer_is_tokenize_en():
    texts = ["I am", "I am, Taro.", "  Do you like cats?!", "", "a\u3000b\tc", "...",
             "Hello , world"]  # fmt: skip
    assert js(SAMPLER_JS, [["tokenizeEn", [t]] for t in texts]) == [
        tokenize_en(t) for t in texts
    ]


class _Bigram(torch.nn.Module):
    """A tiny language model: the next word's logits depend on the last word."""

    def __init__(self, vocab_size: int):
        super().__init__()
        torch.manual_seed(0)
        self.table = torch.nn.Embedding(vocab_size, vocab_size)

    def forward(self, tokens):
        return self.table(tokens) * 2.0  # (B, L, V)


def _vocab():
    return Vocab.build([("I", "am", "Taro", "."), ("you", "are", "Hanako", ".")])


def test_sampling_is_seeded_and_greedy_at_temperature_zero():
    vocab = _vocab()
    model = _Bigram(len(vocab)).eval()
    never = [Vocab.PAD, Vocab.BOS, Vocab.UNK]

    def next_logits(ids):
        with torch.no_grad():
            return model(torch.tensor([ids]))[0, -1]

    prompt = [Vocab.BOS, *vocab.encode(["I"])]
    a = sample(next_logits, prompt, 5, 1.0, seed=3, never=never)
    assert a == sample(next_logits, prompt, 5, 1.0, seed=3, never=never)
    assert a != sample(next_logits, prompt, 5, 1.0, seed=4, never=never)
    assert all(not set(s) & set(never) for s in a)
    (greedy,) = sample(next_logits, prompt, 5, 0.0, never=never)
    first = next_logits(prompt).clone()
    first[never] = -math.inf
    assert greedy[0] == int(first.argmax())


def test_widget_exports_the_model_and_answers_the_kernel():
    pytest.importorskip("anywidget")
    ort = pytest.importorskip("onnxruntime")
    vocab = _vocab()
    model = _Bigram(len(vocab)).eval()
    never = [Vocab.PAD, Vocab.BOS, Vocab.UNK]
    widget = sampler_widget(model, vocab, never, max_len=8, prompt="I", seed=2)
    view = sampler_view(model, vocab, never, "I", 1.0, 0, 1.0, 2, 8)
    assert widget.initial == view and len(view["samples"]) == 5
    # the exported graph gives the model's logits
    session = ort.InferenceSession(base64.b64decode(widget.onnx))
    ids = [Vocab.BOS, *vocab.encode(["I", "am"])]
    (logits,) = session.run(None, {"tokens": torch.tensor([ids]).numpy()})
    torch.testing.assert_close(
        torch.from_numpy(logits), model(torch.tensor([ids]))[0, -1].detach()
    )
    sent = []
    widget.send = lambda content, buffers=None: sent.append(content)
    settings = {
        "prompt": "you",
        "temperature": 0.5,
        "top_k": 3,
        "top_p": 0.9,
        "seed": 1,
    }
    widget._handle_custom_msg({"type": "sample", "id": 3, **settings}, [])
    assert sent == [{"type": "result", "id": 3,
                     "result": sampler_view(model, vocab, never, "you", 0.5, 3, 0.9,
                                            1, 8)}]  # fmt: skip
