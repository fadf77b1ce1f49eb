"""The in-browser translator's figures: load time, latency, bytes, and equality.

    make book   # or any build of _build/html with chapter 10
    .venv/bin/python scripts/bench_browser.py [--html _build/html] [--reps 20]

Serves the folder on 127.0.0.1, opens chapter 10 in headless Chromium (Debian's, as
the tests; $CHROMIUM to change) with every other host blocked, and prints:

- bytes the page loads (all of it; the translator's runtime and model apart);
- model load time (importing onnxruntime-web, fetching, creating both sessions) and
  the time from navigation to the first translation shown;
- latency of a held-out sentence with a 10-token translation, after the model is
  loaded: the median over ``--reps`` runs of the decoding alone, and with drawing;
- the largest difference from PyTorch over 20 held-out sentences (browser), and over
  the whole held-out split (onnxruntime in Python on the same graphs).

Times are reported, not asserted: they move with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book"))

from static_server import serve  # noqa: E402

PAGE = "chapters/10_decoding_and_attention.html"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
READY = """() => {
  const r = document.querySelector(".tedu-translator");
  return r && ["done", "error", "unavailable"].includes(r.dataset.state);
}"""
TIME_JS = """async ([text, reps]) => {
  const r = document.querySelector(".tedu-translator");
  const compute = [], drawn = [];
  for (let i = 0; i < reps + 3; i++) {   // three warm-up runs
    const t0 = performance.now();
    const result = await r.translateText(text);
    const t1 = performance.now();
    if (i >= 3) { compute.push(result.ms); drawn.push(t1 - t0); }
  }
  return {compute, drawn, result: r.result};
}"""


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def sentence_of_length(model, sv, tv, n: int = 10):
    """The first held-out sentence whose greedy translation has ``n`` tokens."""
    from transformer_edu.data import load_corpus
    from transformer_edu.decoding import translate

    for pair in load_corpus("test"):
        if len(translate(model, pair.ja, sv, tv, trace=True).steps) == n + 1:
            return pair.ja  # n tokens, then EOS
    raise ValueError(f"no held-out sentence translates into {n} tokens")


def browser_figures(html: Path, reps: int) -> None:
    import numpy as np
    from playwright.sync_api import sync_playwright

    from transformer_edu.browser.translator_widget import trace_view
    from transformer_edu.checkpoint import toy_model
    from transformer_edu.data import load_corpus

    model, sv, tv = toy_model(progress=False)
    sentence = sentence_of_length(model, sv, tv)
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    with serve(html) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS)
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        sizes: dict[str, int] = {}
        errors: list[str] = []

        def finished(request):
            size = request.sizes()["responseBodySize"]
            sizes[request.url.removeprefix(base)] = size

        tab.on("requestfinished", finished)
        tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
        tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
            (base, "data:", "blob:")) else r.abort())  # fmt: skip
        t0 = time.perf_counter()
        tab.goto(base + PAGE, wait_until="load")
        tab.wait_for_function(READY, timeout=180_000)
        first = time.perf_counter() - t0
        state = tab.evaluate(
            "() => { const r = document.querySelector('.tedu-translator');"
            " return {state: r.dataset.state, status: r.querySelector('.tedu-status')"
            ".textContent, load: r.model && r.model.loadMs,"
            " bytes: r.model && r.model.bytes}; }"
        )
        if state["state"] != "done":
            sys.exit(f"the translator did not translate: {state}")
        translator = {
            k: v
            for k, v in sizes.items()
            if "onnxruntime-web/" in k or "translator/" in k
        }
        print(f"page {PAGE}, served from {html}")
        print(f"  bytes loaded, whole page:           {_mb(sum(sizes.values()))} "
              f"in {len(sizes)} requests")  # fmt: skip
        print(f"  bytes loaded, runtime + model:      {_mb(sum(translator.values()))}")
        for url, size in sorted(translator.items(), key=lambda kv: -kv[1]):
            print(f"    {size:>12,}  {url}")
        print(f"  model load (import, fetch, 2 sessions): {state['load']:.0f} ms")
        print(f"  navigation -> first translation shown:  {first * 1000:.0f} ms")

        timing = tab.evaluate(TIME_JS, [sentence, reps])
        out = timing["result"]
        print(f"  latency, {sentence} -> {out['text']!r} "
              f"({len(out['tokens'])} source tokens, {len(out['steps'])} decoder steps), "
              f"median of {reps}:")  # fmt: skip
        print(f"    decoding (segment, encoder, greedy loop): "
              f"{statistics.median(timing['compute']):.1f} ms "
              f"(min {min(timing['compute']):.1f})")  # fmt: skip
        print(f"    decoding and drawing the view:            "
              f"{statistics.median(timing['drawn']):.1f} ms")  # fmt: skip

        pairs = load_corpus("test")
        sample = [pairs[i * len(pairs) // 20] for i in range(20)]
        worst_p = worst_a = 0.0
        same = 0
        for pair in sample:
            got = tab.evaluate(
                "(t) => document.querySelector('.tedu-translator').translateText(t)",
                pair.ja,
            )
            want = trace_view(model, pair.ja, sv, tv)
            ids = [s["chosen_id"] for s in got["steps"]]
            same += ids == [s["chosen_id"] for s in want["steps"]]
            for g, w in zip(got["steps"], want["steps"], strict=False):
                top_g, top_w = (np.array([p for _, p in x["top"]]) for x in (g, w))
                worst_p = max(worst_p, float(np.abs(top_g - top_w).max()))
                attn = np.abs(np.array(g["attn"]) - np.array(w["attn"]))
                worst_a = max(worst_a, float(attn.max()))
        print(f"  browser vs PyTorch, {len(sample)} held-out sentences: "
              f"{same}/{len(sample)} same tokens; top-5 probabilities differ by at "
              f"most {worst_p:.1e}, cross-attention by {worst_a:.1e}")  # fmt: skip
        print(f"  console errors: {errors or 'none'}")
        browser.close()


def python_figures() -> None:
    import numpy as np
    import onnxruntime as ort
    import torch

    from transformer_edu.browser.onnx_export import export_onnx, greedy_onnx
    from transformer_edu.checkpoint import toy_model
    from transformer_edu.data import Vocab, load_corpus
    from transformer_edu.decoding import greedy_decode

    model, sv, tv = toy_model(progress=False)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        paths = export_onnx(model.cpu(), sv, tv, tmp)
        seconds = time.perf_counter() - t0
        sizes = {k: p.stat().st_size for k, p in paths.items()}
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        enc = ort.InferenceSession(str(paths["encoder"]), opts)
        dec = ort.InferenceSession(str(paths["decoder"]), opts)
        meta = json.loads(paths["meta"].read_text(encoding="utf8"))
    print(
        f"export: {seconds:.1f} s; "
        + ", ".join(f"{k} {v:,} B" for k, v in sizes.items())
    )
    pairs = load_corpus("test")
    worst, same = 0.0, 0
    for pair in pairs:
        ids = sv.encode(pair.src)
        want = greedy_decode(model, torch.tensor([ids])).tokens[0]
        got, logps, _ = greedy_onnx(enc, dec, ids, meta)
        same += got == want
        with torch.no_grad():
            ref = model(torch.tensor([ids]), torch.tensor([[Vocab.BOS, *want[:-1]]]))
        if got == want:
            diff = np.abs(torch.stack(logps).numpy() - ref[0].log_softmax(-1).numpy())
            worst = max(worst, float(diff.max()))
    print(f"onnxruntime (Python) vs PyTorch, held-out split: {same}/{len(pairs)} same "
          f"tokens; log-probabilities differ by at most {worst:.1e}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--html", default=str(ROOT / "_build" / "html"))
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--no-python", action="store_true", help="skip the Python figures")
    args = p.parse_args()
    html = Path(args.html)
    if not (html / PAGE).exists():
        sys.exit(f"{html / PAGE} not found: build the book first (make book)")
    added = [html / "_static" / d for d in
             ("vendor/onnxruntime-web", "vendor/anywidget", "translator")]  # fmt: skip
    total = _folder_bytes(html)
    extra = sum(_folder_bytes(d) for d in added if d.exists())
    print(f"{html}: {_mb(total)} in all; the translator's files {_mb(extra)} of it "
          f"(without them: {_mb(total - extra)})")  # fmt: skip
    browser_figures(html, args.reps)
    if not args.no_python:
        python_figures()


if __name__ == "__main__":
    main()
