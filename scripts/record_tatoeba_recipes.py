"""Measure the Tatoeba training recipe change by change, and record it for chapter 12.

    python scripts/record_tatoeba_recipes.py    # writes transformer_edu/models/
                                                #   tatoeba_recipes.json

Run on an idle machine: ``bench --tatoeba --recipes`` (tokens/s of each recipe on
the same real batches, taken in turn) and ``bench --tatoeba --curves 200`` (the
training loss of float32 and of the bf16 recipes over the same 200 steps). Chapter 12
reads the file and says what each change bought, on the machine that measured it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

from transformer_edu.bench_tatoeba import (
    RECIPES,
    TatoebaBenchConfig,
    largest_gaps,
    loss_curves,
    run_recipes,
    window_means,
)

OUT = Path(__file__).resolve().parent.parent / "transformer_edu" / "models"
STEPS, WARMUP, CURVE_STEPS, WINDOW = 30, 3, 200, 50
CURVES = ["+ fused Adam", "+ written-out attention"]


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=OUT)  # fmt: skip
    return out.stdout.strip() or "unknown"


def main() -> int:
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cfg = TatoebaBenchConfig(steps=STEPS, warmup_steps=WARMUP)
    rows = run_recipes(cfg, list(RECIPES))
    losses = loss_curves(TatoebaBenchConfig(steps=CURVE_STEPS, warmup_steps=0), CURVES,
                         WINDOW)  # fmt: skip
    means = window_means(losses, WINDOW)
    out = {
        "commands": ["python -m transformer_edu bench --tatoeba --recipes (steps 30)",
                     "python -m transformer_edu bench --tatoeba --curves 200"],
        "recorded_by": "python scripts/record_tatoeba_recipes.py",
        "date": started, "commit": _commit(), "torch": torch.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"{torch.get_num_threads()} torch threads",
        "steps": STEPS, "warmup_steps": WARMUP, "max_tokens": cfg.max_tokens,
        "recipes": rows,
        "curves": {"steps": CURVE_STEPS, "window": WINDOW, "mean_loss": means,
                   "largest_gap_to_float32": largest_gaps(means)},
    }  # fmt: skip
    path = OUT / "tatoeba_recipes.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
