"""Score the shipped Tatoeba model and record the figures beside it.

    python scripts/record_tatoeba_scores.py        # writes transformer_edu/models/
                                                   #   tatoeba_ja_en.scores.json

Greedy on the whole dev and test splits; greedy and beam search (K = 4) with and
without the paper's length penalty (α = 0.6) on the first 500 test pairs (beam search
decodes one sentence at a time; without a penalty it rarely stops early), and the
paper's setting (K = 4, α = 0.6) on the whole test split. CI re-scores the dev split greedily
(tests/test_shipped_model.py) and fails when it differs from the figure recorded here.
"""

from __future__ import annotations

import json
import sys
import time

import torch

from transformer_edu.tatoeba import load_tatoeba
from transformer_edu.tatoeba_train import (
    evaluate,
    load_tatoeba_checkpoint,
    shipped_model_path,
)

BEAM = 4
SUBSET = 500


def main() -> int:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model, tok, meta = load_tatoeba_checkpoint()
    runs = [("dev", 1, 0.0, None), ("test", 1, 0.0, None), ("test", 1, 0.0, SUBSET),
            ("test", BEAM, 0.0, SUBSET), ("test", BEAM, 0.6, SUBSET),
            ("test", BEAM, 0.6, None)]  # fmt: skip
    out = {"model": shipped_model_path().name, "trained_by": meta.get("command"),
           "commit": meta.get("commit"), "scores": []}  # fmt: skip
    for split, beam, alpha, limit in runs:
        pairs = load_tatoeba(split)[:limit]
        start = time.perf_counter()
        b, c, _ = evaluate(model, tok, pairs, beam, alpha)
        seconds = time.perf_counter() - start
        row = {"split": split, "limit": limit, "pairs": len(pairs), "beam": beam, "alpha": alpha,
               "bleu": round(b.score, 2), "chrf": round(c.score, 2),
               "bleu_signature": b.signature, "chrf_signature": c.signature,
               "seconds": round(seconds, 1)}  # fmt: skip
        print(json.dumps(row), flush=True)
        out["scores"].append(row)
    path = shipped_model_path().with_suffix(".scores.json")
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
