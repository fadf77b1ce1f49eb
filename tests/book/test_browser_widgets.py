"""The models in the built pages, in headless Chromium, served on 127.0.0.1 with every
other host blocked (transformer_edu/browser/): chapter 10's toy translator against
PyTorch, chapter 12's Tatoeba translator against onnxruntime in Python on the same
int8 graphs (greedy and beam 4), chapter 13's sampler against the kernel, bad input,
the model fetched only on first use, and the page opened as a file."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import SCREENSHOTS
from test_book import HTML_DIR, MEASURE_JS, RENDERED_JS, SETTLE_JS  # its folder

from transformer_edu.browser.onnx_export import GraphSession, beam_onnx, greedy_onnx

pytestmark = pytest.mark.book

TOY_PAGE = "chapters/10_decoding_and_attention"
TATOEBA_PAGE = "chapters/12_real_japanese"
SAMPLER_PAGE = "chapters/13_where_it_led"
N_SENTENCES = 20  # sentences translated in the browser, per decoder
SETTLED = """(sel) => {
  const r = document.querySelector(sel);
  return r && ["done", "error", "unavailable", "idle"].includes(r.dataset.state);
}"""
TRANSLATE_JS = """async ([sel, text, beam, alpha]) => {
  const r = document.querySelector(sel);
  const result = await r.translateText(text, beam, alpha);
  return {result, shown: r.querySelector(".tedu-out").innerText, state: r.dataset.state,
          status: r.querySelector(".tedu-status").innerText};
}"""
TOY = ".tedu-translator"


@pytest.fixture(scope="module")
def served_book(book):
    """``_build/html`` over HTTP on 127.0.0.1: the widgets fetch their runtime."""
    from static_server import serve  # book/ is on pythonpath

    with serve(HTML_DIR) as base:
        yield base


def _served_tab(browser, base: str):
    """A tab that reaches only ``base``; console errors, blocked and failed requests,
    and every URL it asked for."""
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    log = {"errors": [], "blocked": [], "failed": [], "requested": []}
    tab.on("console", lambda m: m.type == "error" and log["errors"].append(m.text))
    tab.on("pageerror", lambda e: log["errors"].append(f"uncaught: {e}"))
    tab.on("requestfailed", lambda r: log["failed"].append(f"{r.url} ({r.failure})"))
    tab.on("request", lambda r: log["requested"].append(r.url))

    def only_local(route):
        if route.request.url.startswith((base, "data:", "blob:")):
            route.continue_()
        else:
            log["blocked"].append(route.request.url)
            route.abort()

    tab.route("**/*", only_local)
    return tab, log


def _log_problems(log: dict) -> list[str]:
    return [f"{k}: {log[k][:5]}" for k in ("errors", "blocked", "failed") if log[k]]


def _diff(a, b) -> float:
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b)).max())


# --- chapter 10: the toy model ---------------------------------------------------------


def test_toy_translator_in_the_browser_equals_pytorch(book, browser, served_book):
    from transformer_edu.browser.translator_widget import trace_view
    from transformer_edu.toy.checkpoint import toy_model
    from transformer_edu.toy.data import load_corpus

    model, sv, tv = toy_model(progress=False)
    pairs = load_corpus("test")
    sample = [pairs[i * len(pairs) // N_SENTENCES] for i in range(N_SENTENCES)]
    tab, log = _served_tab(browser, served_book)
    problems = []
    try:
        tab.goto(f"{served_book}{TOY_PAGE}.html", wait_until="load")
        tab.wait_for_function(SETTLED, arg=TOY, timeout=120_000)
        assert tab.evaluate(f"document.querySelector('{TOY}').dataset.state") == "done"
        tab.evaluate(SETTLE_JS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        tab.locator(TOY).screenshot(path=str(SCREENSHOTS / "translator_served.png"))
        worst = 0.0
        for n, pair in enumerate(sample):
            for beam in (1, 4) if n % 2 == 0 else (1,):
                got = tab.evaluate(TRANSLATE_JS, [TOY, pair.ja, beam, 0])["result"]
                (g,) = got["sentences"]
                (w,) = trace_view(model, pair.ja, sv, tv, beam=beam)["sentences"]
                if g.get("error") or g["pieces"] != w["pieces"]:
                    problems.append(f"{pair.ja}: {g.get('error') or g['pieces']}")
                    continue
                if [s["chosen_id"] for s in g["steps"]] != [
                    s["chosen_id"] for s in w["steps"]
                ] or g["text"] != w["text"]:
                    problems.append(f"{pair.ja} beam {beam}: {g['text']!r} != "
                                    f"{w['text']!r}")  # fmt: skip
                    continue
                for gs, ws in zip(g["steps"], w["steps"], strict=True):
                    worst = max(worst, _diff([p for _, p in gs["top"]],
                                             [p for _, p in ws["top"]]),
                                _diff(gs["attn"], ws["attn"]))  # fmt: skip
                if beam > 1:  # the best score (rivals within a hair may reorder)
                    worst = max(worst, abs(g["beams"][0][1] - w["beams"][0][1]))
        if worst >= 1e-4:
            problems.append(f"probabilities, attention or scores differ by {worst:.2g}")
        for text, message in [
            ("", "the sentence is empty"),
            ("ピカチュウ", "every word is unknown to the model: ピカチュウ"),
            ("私は" * 40, "more than the model's max_len=64"),
        ]:
            out = tab.evaluate(TRANSLATE_JS, [TOY, text, 1, 0])
            if out["state"] != "error" or message not in out["shown"]:
                problems.append(f"{text[:8]!r}: shows {out['shown'][:80]!r}")
    finally:
        tab.close()
    problems += _log_problems(log)
    assert not problems, "; ".join(problems)


# --- chapter 12: the Tatoeba model, int8 -------------------------------------------------


@pytest.fixture(scope="module")
def tatoeba_graphs(book):
    """onnxruntime in Python on the graphs the page fetches."""
    ort = pytest.importorskip("onnxruntime")
    folder = HTML_DIR / "_static" / "tatoeba"
    meta = json.loads((folder / "translator.json").read_text(encoding="utf8"))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    enc = ort.InferenceSession(str(folder / meta["encoder"]), opts)
    dec = ort.InferenceSession(str(folder / meta["decoder"]), opts)
    return enc, dec, meta


def _top_gap(got: dict[int, float], want: dict[int, float]) -> float:
    """The largest probability difference between two top-5 lists: of the tokens in
    both, and of a token in one only against the other's 5th (a tail swap)."""
    gaps = [abs(got[i] - want[i]) for i in got.keys() & want.keys()]
    gaps += [abs(got[i] - min(want.values())) for i in got.keys() - want.keys()]
    gaps += [abs(want[i] - min(got.values())) for i in want.keys() - got.keys()]
    return max(gaps)


def _ort_steps(enc, dec, meta, src_ids, out_ids) -> list[tuple[list[int], list, list]]:
    """Each step of producing out_ids: (top-5 ids, their probabilities, attention)."""
    session = GraphSession(enc, dec, src_ids)
    steps = []
    for j in range(len(out_ids)):
        prefix = [meta["bos_id"], *out_ids[:j]]
        logp, cross = session.step([prefix], None if j == 0 else [0])
        top = np.argsort(-logp[0], kind="stable")[: meta["top_k"]]
        steps.append((top.tolist(), np.exp(logp[0][top]).tolist(), cross[0]))
    return steps


def test_tatoeba_translator_in_the_browser_equals_onnxruntime(
    book, browser, served_book, tatoeba_graphs
):
    from transformer_edu.tatoeba.data import default_tokenizer, load_tatoeba

    enc, dec, meta = tatoeba_graphs
    tok = default_tokenizer()
    dev = load_tatoeba("dev")
    sample = [dev[i * len(dev) // N_SENTENCES] for i in range(N_SENTENCES)]
    sel = ".tedu-translator"
    tab, log = _served_tab(browser, served_book)
    problems = []
    try:
        tab.goto(f"{served_book}{TATOEBA_PAGE}.html", wait_until="load")
        tab.wait_for_function(SETTLED, arg=sel, timeout=60_000)
        tab.wait_for_timeout(500)
        status = tab.inner_text(f"{sel} .tedu-status")
        fetched = [u for u in log["requested"]
                   if re.search(r"\.(onnx|wasm)$|spm\.(js|json)$|ort\.wasm", u)]  # fmt: skip
        if fetched or "MB" not in status:
            problems.append(f"before first use: fetched {fetched}, status {status!r}")
        worst = dict.fromkeys(("top-5", "attention", "score"), 0.0)
        for n, pair in enumerate(sample):
            ids = tok.encode(pair.ja)
            limit = len(ids) + meta["extra_output"]
            for beam in (1, 4):
                got = tab.evaluate(TRANSLATE_JS, [sel, pair.ja, beam, 0.6])["result"]
                (g,) = got["sentences"]
                if beam == 1:
                    want, _, _ = greedy_onnx(enc, dec, ids, meta, limit)
                else:
                    hyps = beam_onnx(enc, dec, ids, meta, 4, 0.6, limit)
                    want = hyps[0][0]
                    # the best hypothesis's score (rivals within a hair may reorder)
                    worst["score"] = max(worst["score"],
                                         abs(g["beams"][0][1] - hyps[0][1]))  # fmt: skip
                if g.get("error") or g["pieces"] != tok.pieces(pair.ja):
                    problems.append(f"{pair.ja}: {g.get('error') or g['pieces']}")
                    continue
                chosen = [s["chosen_id"] for s in g["steps"]]
                if chosen != want:
                    problems.append(f"{pair.ja} beam {beam}: {tok.decode(chosen)!r} != "
                                    f"{tok.decode(want)!r}")  # fmt: skip
                    continue
                if g["text"] != tok.decode(want):
                    problems.append(f"{pair.ja}: text {g['text']!r}")
                for gs, (top, probs, attn) in zip(
                    g["steps"], _ort_steps(enc, dec, meta, ids, want), strict=True
                ):
                    worst["top-5"] = max(worst["top-5"], _top_gap(
                        dict(zip(gs["top_ids"], [p for _, p in gs["top"]],
                                 strict=True)), dict(zip(top, probs, strict=True))))  # fmt: skip
                    worst["attention"] = max(
                        worst["attention"], _diff(gs["attn"], attn)
                    )
            if n == 0:
                SCREENSHOTS.mkdir(parents=True, exist_ok=True)
                tab.locator(sel).screenshot(
                    path=str(SCREENSHOTS / "tatoeba_translator_beam.png")
                )
        if max(worst.values()) >= 1e-4:
            problems.append(f"largest differences {worst}")
        for text, message in [
            ("", "the text is empty"),
            ("Hello world", "“Hello world” is not Japanese"),
            ("🙂🙂", "has nothing to translate"),
            ("。！？", "has nothing to translate"),
            ("私は" * 20, "a sentence has 40 characters"),
        ]:
            out = tab.evaluate(TRANSLATE_JS, [sel, text, 1, 0.6])
            if out["state"] != "error" or message not in out["shown"]:
                problems.append(f"{text[:8]!r}: shows {out['shown'][:80]!r}")
        # a text of three sentences, one of them not Japanese: kept as it is
        out = tab.evaluate(
            TRANSLATE_JS, [sel, "私は太郎です。猫が好きです！OK!", 1, 0.6]
        )
        sources = [s["source"] for s in out["result"]["sentences"]]
        if sources != ["私は太郎です。", "猫が好きです!", "OK!"] or not out["result"][
            "text"
        ].endswith(" OK!"):
            problems.append(f"three sentences: {out['result']['text']!r} {sources}")
        for name, text, beam in [
            ("tatoeba_translator_long.png",
             "私は毎朝七時に起きます。それから朝ご飯を食べます！学校まで歩きますか？", 1),
            ("tatoeba_translator_rare_kanji.png", "彼は昨日𩸽を食べた。", 1),
            ("tatoeba_translator_greedy.png", sample[0].ja, 1),
        ]:  # fmt: skip
            tab.evaluate(TRANSLATE_JS, [sel, text, beam, 0.6])
            tab.locator(sel).screenshot(path=str(SCREENSHOTS / name))
    finally:
        tab.close()
    problems += _log_problems(log)
    assert not problems, "; ".join(problems[:12])


# --- chapter 13: the tiny GPT's sampler --------------------------------------------------

SAMPLE_JS = """async ([settings]) => {
  const r = document.querySelector(".tedu-sampler");
  return await r.sampleWith(settings);
}"""


def _sampler_state(page: Path) -> dict:
    """The sampler widget's saved state in the built page."""
    html = page.read_text(encoding="utf8")
    states = re.findall(
        r'<script type="application/vnd\.jupyter\.widget-state\+json">(.*?)</script>',
        html, re.DOTALL,
    )  # fmt: skip
    for text in states:
        for model in json.loads(text)["state"].values():
            if "onnx" in model.get("state", {}):
                return model["state"]
    raise AssertionError(f"{page}: no sampler widget state")


def test_sampler_in_the_browser_agrees_with_the_kernel(book, browser, served_book):
    """The page's samples equal the kernel's for the widget's first settings (its
    saved state holds what the kernel computed), and equal Python's sampler over
    onnxruntime on the same graph for other settings and seeds."""
    import torch

    ort = pytest.importorskip("onnxruntime")
    from transformer_edu.browser.sampler_widget import N_SAMPLES, sample
    from transformer_edu.toy.data import detokenize_en, tokenize_en

    state = _sampler_state(HTML_DIR / f"{SAMPLER_PAGE}.html")
    session = ort.InferenceSession(base64.b64decode(state["onnx"]))
    itos = state["itos"]
    stoi = {w: i for i, w in enumerate(itos)}

    def python_view(s: dict) -> list[str]:
        ids = [state["bos"], *(stoi.get(w, state["unk"]) for w in
                               tokenize_en(s["prompt"]))]  # fmt: skip

        def next_logits(prefix):
            x = np.array([prefix[-state["max_len"] :]], dtype=np.int64)
            return torch.from_numpy(session.run(None, {"tokens": x})[0])

        out = sample(next_logits, ids, N_SAMPLES, s["temperature"], s["top_k"],
                     s["top_p"], s["seed"], state["never"], state["eos"])  # fmt: skip
        return [detokenize_en(itos[i] for i in row if i > state["eos"]) for row in out]

    first = {k: state[k] for k in ("prompt", "temperature", "top_k", "top_p", "seed")}
    settings = [
        first,
        {**first, "seed": 7},
        {**first, "temperature": 0.5, "seed": 3},
        {**first, "temperature": 1.5, "top_k": 5},
        {**first, "top_p": 0.8, "seed": 11},
        {**first, "prompt": "Do you", "temperature": 0.0},
    ]
    tab, log = _served_tab(browser, served_book)
    problems = []
    try:
        tab.goto(f"{served_book}{SAMPLER_PAGE}.html", wait_until="load")
        tab.wait_for_selector(".tedu-sampler", timeout=60_000)
        shown = tab.inner_text(".tedu-sampler .tedu-samples")
        if shown.splitlines() != state["initial"]["samples"]:
            problems.append(f"first view {shown!r}")
        if any(re.search(r"\.wasm$|ort\.wasm", u) for u in log["requested"]):
            problems.append("the runtime was fetched before a control moved")
        for s in settings:
            got = tab.evaluate(SAMPLE_JS, [s])
            if s is first:  # the kernel's view: the same words, probabilities to 1e-5
                want = state["initial"]
                same = {k: got[k] == want[k] for k in ("tokens", "unknown", "samples")}
                same["next"] = [w for w, _ in got["next"]] == [
                    w for w, _ in want["next"]
                ]
                if (
                    not all(same.values())
                    or _diff([p for _, p in got["next"]], [p for _, p in want["next"]])
                    >= 1e-5
                ):
                    problems.append(f"page {got} != kernel {want}")
            if got["samples"] != python_view(s):
                problems.append(f"{s}: page {got['samples']} != {python_view(s)}")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        tab.locator(".tedu-sampler").screenshot(path=str(SCREENSHOTS / "sampler.png"))
    finally:
        tab.close()
    problems += _log_problems(log)
    assert not problems, "; ".join(problems)


# --- opened as a file; which pages load a runtime ------------------------------------


@pytest.mark.parametrize("page, sel", [(TOY_PAGE, TOY), (TATOEBA_PAGE, TOY),
                                       (SAMPLER_PAGE, ".tedu-sampler")])  # fmt: skip
def test_a_widget_opened_from_a_file_says_how_to_serve_the_book(
    book, browser, page, sel
):
    tab = browser.new_page()
    errors = []
    tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
    tab.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    try:
        tab.goto((HTML_DIR / f"{page}.html").as_uri(), wait_until="load")
        tab.wait_for_selector(f"{sel} .tedu-status", timeout=60_000)
        tab.wait_for_function(
            "(sel) => document.querySelector(sel + ' .tedu-status').innerText.trim()",
            arg=sel, timeout=60_000,
        )  # fmt: skip
        status = tab.inner_text(f"{sel} .tedu-status")
        # what needs no model works from the file: figures drawn, formulas typeset
        # (tests/book/test_pages.py checks these pages served, the others from their files)
        tab.evaluate(SETTLE_JS)
        tab.wait_for_function(RENDERED_JS, timeout=20_000)
        m = tab.evaluate(MEASURE_JS)
    finally:
        tab.close()
    assert "python -m http.server -d _build/html" in status and "\n" not in status
    assert not errors, errors
    assert m["figs"] and m["plots"] == m["figs"] and m["typeset"] == m["maths"], m


def test_only_the_model_pages_name_the_runtime(book):
    """The widgets' code (in their saved state) fetches onnxruntime-web; no other page
    of either edition names it, so no other page loads it."""
    naming = sorted(
        str(p.relative_to(HTML_DIR))
        for p in HTML_DIR.rglob("*.html")
        if "vendor/onnxruntime-web/" in p.read_text(encoding="utf8")
    )
    pages = [f"{p}.html" for p in (TOY_PAGE, TATOEBA_PAGE, SAMPLER_PAGE)]
    assert naming == sorted([*pages, *(f"ja/{p}" for p in pages)]), naming
    for folder in ("translator", "tatoeba"):
        graphs = {p.name for p in (HTML_DIR / "_static" / folder).glob("*.onnx")}
        assert graphs == {"encoder.onnx", "decoder_step.onnx"}, folder
