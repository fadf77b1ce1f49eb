"""Measure the Tatoeba training recipe change by change, and record it for chapter 12.

    python scripts/record_tatoeba_recipes.py    # writes transformer_edu/tatoeba/weights/
                                                #   tatoeba_recipes.json
    python scripts/record_tatoeba_recipes.py --capped-only
        # only the AVX2-capped part, added to the record already there (with its own
        # date, commit and machine)

Run on an idle machine: ``bench --tatoeba --recipes`` (tokens/s of each recipe on
the same real batches, taken in turn) and ``bench --tatoeba --curves 200`` (the
training loss of float32 and of the bf16 recipes over the same 200 steps). Chapter 12
reads the file and says what each change bought, on the machine that measured it.

Then float32 against bf16 autocast again, in a process whose oneDNN and PyTorch
kernels are capped at AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
MKL_ENABLE_INSTRUCTIONS=AVX2``): what a CPU without AVX-512, so without native bf16,
does with the same change (it emulates bf16).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from transformer_edu.bench.tatoeba import (
    RECIPES,
    TatoebaBenchConfig,
    largest_gaps,
    loss_curves,
    run_recipes,
    window_means,
)
from transformer_edu.devices import describe_machine
from transformer_edu.tatoeba.recipe import autocast_choice

OUT = Path(__file__).resolve().parent.parent / "transformer_edu" / "tatoeba" / "weights"
STEPS, WARMUP, CURVE_STEPS, WINDOW = 30, 3, 200, 50
CURVES = ["+ fused Adam", "+ written-out attention"]
CAPPED = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
          "MKL_ENABLE_INSTRUCTIONS": "AVX2"}  # fmt: skip
CAPPED_STEPS, CAPPED_RECIPES = 3, ["+ fused Adam", "+ bf16 autocast"]


def capped() -> dict:
    """Float32 against bf16 autocast with the kernels capped at AVX2 (a child
    process: the caps are read when the libraries load)."""
    import os

    env = {**os.environ, **CAPPED}
    out = subprocess.run([sys.executable, __file__, "--capped-part"], env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def capped_only() -> int:
    path = OUT / "tatoeba_recipes.json"
    record = json.loads(path.read_text())
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    record["capped_at_avx2"] = {"date": started, "commit": _commit(), **capped()}
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}: capped_at_avx2")
    return 0


def capped_part() -> int:
    cfg = TatoebaBenchConfig(steps=CAPPED_STEPS, warmup_steps=1)
    rows = run_recipes(cfg, CAPPED_RECIPES, print_fn=lambda line: None)
    print(json.dumps({"env": CAPPED, "steps": CAPPED_STEPS, "machine": describe_machine(),
                      "autocast_auto": autocast_choice("auto", torch.device("cpu")),
                      "recipes": rows}))  # fmt: skip
    return 0


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
    avx2 = {"date": started, "commit": _commit(), **capped()}
    out = {
        "commands": ["python -m transformer_edu bench --tatoeba --recipes (steps 30)",
                     "python -m transformer_edu bench --tatoeba --curves 200"],
        "recorded_by": "python scripts/record_tatoeba_recipes.py",
        "date": started, "commit": _commit(), "torch": torch.__version__,
        "machine": describe_machine(),
        "autocast_auto": autocast_choice("auto", torch.device("cpu")),
        "steps": STEPS, "warmup_steps": WARMUP, "max_tokens": cfg.max_tokens,
        "recipes": rows,
        "curves": {"steps": CURVE_STEPS, "window": WINDOW, "mean_loss": means,
                   "largest_gap_to_float32": largest_gaps(means)},
        "capped_at_avx2": avx2,
    }  # fmt: skip
    path = OUT / "tatoeba_recipes.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    modes = {"--capped-part": capped_part, "--capped-only": capped_only}
    sys.exit(modes[sys.argv[1]]() if sys.argv[1:] and sys.argv[1] in modes else main())
