"""The in-page translator's int8 graphs against the PyTorch model, on the test split.

    make book    # exports _build/html/_static/tatoeba/ (or: python -m transformer_edu
                 #   export-onnx --corpus tatoeba --out DIR, then --graphs DIR)
    python scripts/score_onnx.py [--graphs _build/html/_static/tatoeba]

Greedy decoding and beam search (K = 4, the paper's α = 0.6) of every test sentence,
by onnxruntime on the graphs the page fetches (the loops of browser/onnx_export.py,
which the page runs in JavaScript) and by PyTorch on the shipped model: BLEU and chrF
of each, and how many outputs differ.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    import onnxruntime as ort

    from transformer_edu.browser.onnx_export import beam_onnx, greedy_onnx
    from transformer_edu.metrics import bleu, chrf
    from transformer_edu.tatoeba import load_tatoeba
    from transformer_edu.tatoeba_train import load_tatoeba_checkpoint, translate_batch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", type=Path,
                   default=ROOT / "_build" / "html" / "_static" / "tatoeba")  # fmt: skip
    args = p.parse_args()
    meta = json.loads((args.graphs / "translator.json").read_text(encoding="utf8"))
    enc = ort.InferenceSession(str(args.graphs / meta["encoder"]))
    dec = ort.InferenceSession(str(args.graphs / meta["decoder"]))
    model, tok, _ = load_tatoeba_checkpoint()
    pairs = load_tatoeba("test")
    refs = [p.en for p in pairs]
    sizes = {k: v for k, v in meta["bytes"].items() if k.endswith(".onnx")}
    print(f"graphs: {sizes}, {sum(sizes.values()) / 1e6:.2f} MB together")
    for name, beam in (("greedy", 1), ("beam 4, α = 0.6", 4)):
        t0 = time.perf_counter()
        torch_out = translate_batch(model, tok, [p.ja for p in pairs], beam, 0.6)
        t1 = time.perf_counter()
        int8_out = []
        for pair in pairs:
            ids = tok.encode(pair.ja)
            limit = len(ids) + meta["extra_output"]
            if beam == 1:
                out, _, _ = greedy_onnx(enc, dec, ids, meta, limit)
            else:
                out = beam_onnx(enc, dec, ids, meta, beam, 0.6, limit)[0][0]
            int8_out.append(tok.decode(out))
        t2 = time.perf_counter()
        differ = sum(a != b for a, b in zip(torch_out, int8_out, strict=True))
        print(f"{name}: PyTorch BLEU {bleu(torch_out, refs).score:.2f} chrF "
              f"{chrf(torch_out, refs).score:.2f} ({t1 - t0:.0f} s); int8 graphs BLEU "
              f"{bleu(int8_out, refs).score:.2f} chrF {chrf(int8_out, refs).score:.2f} "
              f"({t2 - t1:.0f} s); {differ} of {len(pairs)} outputs differ")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
