"""The in-page translator's int8 graphs against the PyTorch model, on the test split.

    make book    # exports _build/html/_static/tatoeba/ (or: python -m transformer_edu
                 #   export-onnx --corpus tatoeba --out DIR, then --graphs DIR)
    python scripts/score_onnx.py [--graphs _build/html/_static/tatoeba]
        # -> transformer_edu/tatoeba/weights/tatoeba_ja_en.int8.json (chapter 12b reads it)

Greedy decoding and the decoding chosen on dev (``tatoeba.translate.DEFAULT_BEAM`` /
``DEFAULT_ALPHA``) of every test sentence, by onnxruntime on the graphs the page
fetches (the loops of browser/onnx_export.py, which the page runs in JavaScript) and by
PyTorch on the shipped model: BLEU and chrF of each with their 95 % intervals,
sacreBLEU's paired test of int8 against PyTorch, how many outputs differ, and the
sizes of the graphs and of the checkpoint.
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
    from transformer_edu.devices import describe_machine
    from transformer_edu.metrics import N_BOOTSTRAP, bleu, chrf, paired_bootstrap
    from transformer_edu.tatoeba.analysis import decoding_name
    from transformer_edu.tatoeba.checkpoint import (
        load_tatoeba_checkpoint,
        shipped_model_path,
    )
    from transformer_edu.tatoeba.data import load_tatoeba
    from transformer_edu.tatoeba.translate import (
        DEFAULT_ALPHA,
        DEFAULT_BEAM,
        translate_batch,
    )

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--graphs", type=Path,
                   default=ROOT / "_build" / "html" / "_static" / "tatoeba")  # fmt: skip
    args = p.parse_args()
    meta = json.loads((args.graphs / "translator.json").read_text(encoding="utf8"))
    enc = ort.InferenceSession(str(args.graphs / meta["encoder"]))
    dec = ort.InferenceSession(str(args.graphs / meta["decoder"]))
    model, tok, model_meta = load_tatoeba_checkpoint()
    pairs = load_tatoeba("test")
    refs = [p.en for p in pairs]
    sizes = {k: v for k, v in meta["bytes"].items() if k.endswith(".onnx")}
    print(f"graphs: {sizes}, {sum(sizes.values()) / 1e6:.2f} MB together")
    out = {"command": "python scripts/score_onnx.py", "trained_at": model_meta.get("commit"),
           "graph_bytes": sum(sizes.values()),
           "checkpoint_bytes": shipped_model_path().stat().st_size,
           "machine": f"{describe_machine()}, onnxruntime {ort.__version__}",
           "decodings": []}  # fmt: skip

    def scored(hyps):
        b, c = bleu(hyps, refs, N_BOOTSTRAP), chrf(hyps, refs, N_BOOTSTRAP)
        return {k: {"score": round(s.score, 2), "low": round(s.low, 2),
                    "high": round(s.high, 2), "signature": s.signature}
                for k, s in (("bleu", b), ("chrf", c))}  # fmt: skip

    for beam, alpha in dict.fromkeys([(1, 0.0), (DEFAULT_BEAM, DEFAULT_ALPHA)]):
        name = decoding_name(beam, alpha)
        t0 = time.perf_counter()
        torch_out = translate_batch(model, tok, [p.ja for p in pairs], beam, alpha)
        t1 = time.perf_counter()
        int8_out = []
        for pair in pairs:
            ids = tok.encode(pair.ja)
            limit = len(ids) + meta["extra_output"]
            if beam == 1:
                o, _, _ = greedy_onnx(enc, dec, ids, meta, limit)
            else:
                o = beam_onnx(enc, dec, ids, meta, beam, alpha, limit)[0][0]
            int8_out.append(tok.decode(o))
        t2 = time.perf_counter()
        differ = sum(a != b for a, b in zip(torch_out, int8_out, strict=True))
        row = {"name": name, "beam": beam, "alpha": alpha, "pairs": len(pairs),
               "torch": scored(torch_out), "int8": scored(int8_out), "differ": differ,
               "torch_seconds": round(t1 - t0, 1), "int8_seconds": round(t2 - t1, 1)}  # fmt: skip
        if differ:
            t = paired_bootstrap(torch_out, int8_out, refs)["BLEU"]
            row["paired"] = {"difference": round(t.difference, 2),
                             "p_value": round(t.p_value, 4), "signature": t.signature}  # fmt: skip
        else:
            row["paired"] = {"difference": 0.0, "p_value": 1.0, "signature": None}
        print(json.dumps({k: row[k] for k in ("name", "differ", "paired")}), flush=True)
        out["decodings"].append(row)
    path = shipped_model_path().with_suffix(".int8.json")
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
