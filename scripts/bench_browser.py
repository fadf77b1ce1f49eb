"""The in-browser translators' figures: bytes, load time and latency (reported, not
asserted: they move with the machine's load).

    make book   # or any build of _build/html
    .venv/bin/python scripts/bench_browser.py [--html _build/html] [--reps 20]
        [--before OTHER_BUILD]

Serves the folder on 127.0.0.1, opens chapter 12 (the Tatoeba model, int8) and
chapter 10 (the toy model) in headless Chromium (Debian's, as the tests; $CHROMIUM to
change) with every other host blocked, single-threaded WASM (as the page sets it), and
prints for each:

- bytes fetched before the reader translates, and on first use (raw, and gzip as a
  compressing server sends them: from the JSON the build writes);
- the first use: fetching the runtime and the graphs, creating both sessions, and
  translating one sentence;
- after load, the median latency of a dev (chapter 12) or held-out (chapter 10)
  sentence whose greedy translation has 15 (10) tokens, greedy and beam 4, over
  ``--reps`` runs: decoding alone, and with drawing the view;
- the size of ``_build/html`` and of the translators' folders in it.

``--before`` names another build of the book (an older translator, say): both are
served and opened in the same browser, and their latencies are measured in turns
(``ROUNDS`` rounds of ``reps / ROUNDS`` runs each, so that a change of the machine's
load falls on both), then given side by side as a ratio.
"""

from __future__ import annotations

import argparse
import contextlib
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


def tatoeba_sentence(html: Path, n: int = 15) -> str:
    """The first dev text of one sentence whose greedy translation has ``n`` tokens
    (onnxruntime in Python on the graphs the page fetches)."""
    import onnxruntime as ort

    from transformer_edu.browser.onnx_export import greedy_onnx
    from transformer_edu.tatoeba.data import (
        default_tokenizer,
        load_tatoeba,
        split_sentences,
    )

    folder = html / "_static" / "tatoeba"
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
    from transformer_edu.decoding import translate
    from transformer_edu.toy.checkpoint import toy_model
    from transformer_edu.toy.data import load_corpus

    model, sv, tv = toy_model(progress=False)
    for pair in load_corpus("test"):
        if len(translate(model, pair.ja, sv, tv, trace=True).steps) == n + 1:
            return pair.ja
    raise ValueError(f"no held-out sentence translates into {n} tokens")


ROUNDS = 4  # with --before: the builds take turns, reps / ROUNDS runs at a time


def first_use(browser, base: str, page: str, sentence: str, html: Path, label: str):
    """Open ``page``, report its bytes and the first translation; returns the tab."""
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    sizes: dict[str, int] = {}

    def finished(request):
        sizes[request.url.removeprefix(base)] = request.sizes()["responseBodySize"]

    tab.on("requestfinished", finished)
    tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith(
        (base, "data:", "blob:")) else r.abort())  # fmt: skip
    tab.goto(base + page, wait_until="load", timeout=180_000)  # a loaded machine
    tab.wait_for_timeout(3000)  # the page, its figures and the widget's first state
    before = dict(sizes)
    t0 = time.perf_counter()
    tab.evaluate(
        "async (t) => await document.querySelector('.tedu-translator')"
        ".translateText(t, 1, 0.6)", sentence)  # fmt: skip
    first_s = time.perf_counter() - t0
    load_ms = tab.evaluate(
        "() => { const m = document.querySelector('.tedu-translator').model;"
        " return m ? m.loadMs : null; }"
    )
    new = {k: v for k, v in sizes.items() if k not in before}
    print(f"{page}{f' ({label})' if label else ''}")
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
    return tab


def measure(browser, builds: dict[str, tuple[str, Path]], page: str, sentence: str,
            reps: int) -> None:  # fmt: skip
    """First use, then greedy and beam-4 latency of each build (label -> base URL,
    folder); two builds take turns and are compared."""
    tabs = {label: first_use(browser, base, page, sentence, html, label)
            for label, (base, html) in builds.items()}  # fmt: skip
    rounds = ROUNDS if len(tabs) > 1 else 1
    for beam in (1, 4):
        runs = {label: {"compute": [], "drawn": []} for label in tabs}
        texts, n_pieces = {}, 0
        for _ in range(rounds):
            for label, tab in tabs.items():
                timing = tab.evaluate(TIME_JS, [sentence, beam, reps // rounds])
                runs[label]["compute"] += timing["compute"]
                runs[label]["drawn"] += timing["drawn"]
                out = timing["result"]["sentences"][0]
                texts[label] = (out["text"], len(out["steps"]))
                n_pieces = len(out["pieces"])
        name = "greedy" if beam == 1 else "beam 4"
        median = {label: statistics.median(r["compute"]) for label, r in runs.items()}
        for label, r in runs.items():
            text, n_out = texts[label]
            print(f"  {name}{f' ({label})' if label else ''}: {sentence} -> {text!r} "
                  f"({n_pieces} source pieces, {n_out} output tokens), median of "
                  f"{len(r['compute'])}: decoding {median[label]:.1f} ms (min "
                  f"{min(r['compute']):.1f}), with drawing "
                  f"{statistics.median(r['drawn']):.1f} ms")  # fmt: skip
        if len(tabs) == 2:
            (a, ta), (b, tb) = texts.items()
            same = "the same output" if ta == tb else "OUTPUTS DIFFER"
            print(
                f"  {name}: {b} / {a} = {median[b] / median[a]:.2f} of the median "
                f"decoding time ({median[a] / median[b]:.1f}x faster), {same}"
            )
    for tab in tabs.values():
        tab.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    p.add_argument("--before", type=Path, default=None,
                   help="another build to measure side by side (a ratio)")  # fmt: skip
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args()
    from playwright.sync_api import sync_playwright

    folders = {"": args.html} if args.before is None else {
        "before": args.before, "after": args.html}  # fmt: skip
    for label, html in folders.items():
        print(f"{label or '_build/html'}: {html}: {_mb(_folder_bytes(html))} in all; "
              f"the Tatoeba translator's folder "
              f"{_mb(_folder_bytes(html / '_static' / 'tatoeba'))}, the toy's "
              f"{_mb(_folder_bytes(html / '_static' / 'translator'))}, "
              f"onnxruntime-web "
              f"{_mb(_folder_bytes(html / '_static' / 'vendor' / 'onnxruntime-web'))}")  # fmt: skip
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    pages = [("chapters/12_real_japanese.html", tatoeba_sentence(args.html)),
             ("chapters/10_decoding_and_attention.html", toy_sentence())]  # fmt: skip
    with contextlib.ExitStack() as stack:
        builds = {label: (stack.enter_context(serve(html)), html)
                  for label, html in folders.items()}  # fmt: skip
        pw = stack.enter_context(sync_playwright())
        browser = pw.chromium.launch(executable_path=chromium, args=FLAGS)
        for page, sentence in pages:
            measure(browser, builds, page, sentence, args.reps)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
