"""The in-browser translators' figures: bytes, load time and latency (reported, not
asserted: they move with the machine's load).

    make book   # or any build of _build/html
    .venv/bin/python scripts/bench_browser.py [--html _build/html] [--reps 20]

Serves the folder on 127.0.0.1, opens chapter 12 (the Tatoeba model, int8) and
chapter 10 (the toy model) in headless Chromium (Debian's, as the tests; $CHROMIUM to
change) with every other host blocked, and prints for each:

- bytes fetched before the reader translates, and on first use (raw, and gzip as a
  compressing server sends them: from the JSON the build writes);
- the first use: fetching the runtime and the graphs, creating both sessions, and
  translating one sentence;
- after load, the median latency of a dev (chapter 12) or held-out (chapter 10)
  sentence whose greedy translation has 15 (10) tokens, greedy and beam 4, over
  ``--reps`` runs: decoding alone, and with drawing the view;
- the size of ``_build/html`` and of the translators' folders in it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book"))

from static_server import serve  # noqa: E402

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-quic"]  # fmt: skip
TIME_JS = """async ([text, beam, reps]) => {
  const r = document.querySelector(".tedu-translator");
  const compute = [], drawn = [];
  for (let i = 0; i < reps + 3; i++) {   // three warm-up runs
    const t0 = performance.now();
    const result = await r.translateText(text, beam, 0.6);
    const t1 = performance.now();
    if (i >= 3) { compute.push(result.ms); drawn.push(t1 - t0); }
  }
  return {compute, drawn, result: r.result};
}"""


def _mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def tatoeba_sentence(n: int = 15) -> str:
    """The first dev text of one sentence whose greedy translation has ``n`` tokens
    (onnxruntime in Python on the graphs the page fetches)."""
    import onnxruntime as ort

    from transformer_edu.browser.onnx_export import greedy_onnx
    from transformer_edu.tatoeba import default_tokenizer, load_tatoeba, split_sentences

    folder = ROOT / "_build" / "html" / "_static" / "tatoeba"
    meta = json.loads((folder / "translator.json").read_text(encoding="utf8"))
    enc = ort.InferenceSession(str(folder / meta["encoder"]))
    dec = ort.InferenceSession(str(folder / meta["decoder"]))
    tok = default_tokenizer()
    for pair in load_tatoeba("dev"):
        if len(split_sentences(pair.ja)) != 1:  # the page would translate each part
            continue
        ids = tok.encode(pair.ja)
        out, _, _ = greedy_onnx(enc, dec, ids, meta, len(ids) + 50)
        if len(out) == n + 1:  # n tokens, then EOS
            return pair.ja
    raise ValueError(f"no dev sentence translates into {n} tokens")


def toy_sentence(n: int = 10) -> str:
    from transformer_edu.checkpoint import toy_model
    from transformer_edu.data import load_corpus
    from transformer_edu.decoding import translate

    model, sv, tv = toy_model(progress=False)
    for pair in load_corpus("test"):
        if len(translate(model, pair.ja, sv, tv, trace=True).steps) == n + 1:
            return pair.ja
    raise ValueError(f"no held-out sentence translates into {n} tokens")


def measure(browser, base: str, page: str, sentence: str, reps: int, html: Path):
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    sizes: dict[str, int] = {}

    def finished(request):
        sizes[request.url.removeprefix(base)] = request.sizes()["responseBodySize"]

    tab.on("requestfinished", finished)
    tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
        (base, "data:", "blob:")) else r.abort())  # fmt: skip
    tab.goto(base + page, wait_until="load")
    tab.wait_for_timeout(3000)  # the page, its figures and the widget's first state
    before = dict(sizes)
    t0 = time.perf_counter()
    first = tab.evaluate(
        "async (t) => await document.querySelector('.tedu-translator')"
        ".translateText(t, 1, 0.6)", sentence)  # fmt: skip
    first_s = time.perf_counter() - t0
    load_ms = tab.evaluate(
        "() => { const m = document.querySelector('.tedu-translator').model;"
        " return m ? m.loadMs : null; }"
    )
    new = {k: v for k, v in sizes.items() if k not in before}
    print(f"{page}")
    print(f"  before first use: {_mb(sum(before.values()))} in {len(before)} requests")
    print(f"  fetched on first use: {_mb(sum(new.values()))}")
    for url, size in sorted(new.items(), key=lambda kv: -kv[1]):
        print(f"    {size:>12,}  {url}")
    folder = "tatoeba" if "12_real" in page else "translator"
    meta = json.loads((html / "_static" / folder / "translator.json").read_text())
    if "gzip_bytes" in meta:
        print(f"  the same, gzip-compressed: {_mb(sum(meta['gzip_bytes'].values()))}")
    print(f"  first use: {first_s * 1000:.0f} ms (model load {load_ms:.0f} ms, then "
          f"one translation)")  # fmt: skip
    s = first["sentences"][0]
    for beam in (1, 4):
        timing = tab.evaluate(TIME_JS, [sentence, beam, reps])
        out = timing["result"]["sentences"][0]
        print(f"  {'greedy' if beam == 1 else 'beam 4'}: {sentence} -> {out['text']!r} "
              f"({len(s['pieces'])} source pieces, {len(out['steps'])} output tokens), "
              f"median of {reps}: decoding {statistics.median(timing['compute']):.1f} "
              f"ms (min {min(timing['compute']):.1f}), with drawing "
              f"{statistics.median(timing['drawn']):.1f} ms")  # fmt: skip
    tab.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    print(f"_build/html: {_mb(_folder_bytes(args.html))} in all; the Tatoeba "
          f"translator's folder {_mb(_folder_bytes(args.html / '_static' / 'tatoeba'))}, "
          f"the toy's {_mb(_folder_bytes(args.html / '_static' / 'translator'))}, "
          f"onnxruntime-web "
          f"{_mb(_folder_bytes(args.html / '_static' / 'vendor' / 'onnxruntime-web'))}")  # fmt: skip
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    with serve(args.html) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS)
        measure(browser, base, "chapters/12_real_japanese.html", tatoeba_sentence(),
                args.reps, args.html)  # fmt: skip
        measure(browser, base, "chapters/10_decoding_and_attention.html",
                toy_sentence(), args.reps, args.html)  # fmt: skip
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
