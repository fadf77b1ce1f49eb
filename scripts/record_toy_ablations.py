"""The ablation ladder: chapter 9's toy translator with one piece taken out at a time,
each trained under several seeds by chapter 9's recipe, measured on the toy's held-out
pairs.

    python scripts/record_toy_ablations.py               # seeds 0, 1, 2 (TEDU_SEED shifts them)
    python scripts/record_toy_ablations.py --seeds 5 --jobs 2

The model and recipe are the ones chapter 9 trains (``toy.training.TOY_MODEL``: one
layer each side, d_model 128, 4 heads, post-LN as in the paper, dropout 0.1;
``TOY_TRAINING``: 26 epochs, label smoothing 0.1, warm-up). A seed fixes the initial
weights, dropout and the batch order, the same for every variant. The variants differ
from the translator in one thing each:

- ``no positional encoding``: nothing added to the embeddings (``positional="none"``)
- ``1 head``: one head of 128 features instead of four of 32 (the same parameters)
- ``no residuals``: each sub-layer's output replaces its input, norm(f(x)), instead of
  norm(x + f(x))
- ``no LayerNorm``: every LayerNorm an identity, x + f(x)
- ``no feed-forward``: the FFN sub-layer adds nothing, norm(x + 0)
- ``no label smoothing``: the loss's targets one-hot (ε = 0 instead of 0.1)

For each: held-out loss (cross-entropy per target token, teacher-forced, no smoothing)
and greedy exact match on the held-out pairs, per seed, with the mean and the spread
(largest minus smallest). The record, ``transformer_edu/toy/ablations.json``, names the
machine, the torch threads of each run and the commit. About 40 s a run on one core.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from transformer_edu.devices import describe_machine
from transformer_edu.model.transformer import count_parameters, make_model
from transformer_edu.modern.experiments import heldout_loss, toy_data
from transformer_edu.seeds import seeds, spread
from transformer_edu.toy.training import (
    TOY_MODEL,
    TOY_TRAINING,
    TrainConfig,
    exact_match,
    train,
)

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "transformer_edu" / "toy" / "ablations.json"


def _layers(model: nn.Module) -> list[nn.Module]:
    return [*model.encoder.layers, *model.decoder.layers]


def _no_residuals(model: nn.Module) -> None:
    """Post-LN's norm(x + f(x)) becomes norm(f(x)): each block returns f(x) - x, so the
    layer's own sum cancels its input (the layers' code is left as it is)."""
    assert not model.config.norm_first, "written for post-LN"
    for layer in _layers(model):
        for name in ("_sa_block", "_mha_block", "_ff_block"):
            block = getattr(layer, name, None)
            if block is not None:
                setattr(layer, name,
                        lambda x, *a, _f=block, **k: _f(x, *a, **k) - x)  # fmt: skip


def _no_layer_norm(model: nn.Module) -> None:
    for stack in (model.encoder, model.decoder):
        for layer in stack.layers:
            for name in ("norm1", "norm2", "norm3"):
                if hasattr(layer, name):
                    setattr(layer, name, nn.Identity())
        if stack.norm is not None:
            stack.norm = nn.Identity()


def _no_feed_forward(model: nn.Module) -> None:
    for layer in _layers(model):
        layer.ffn = None  # its parameters leave the model
        layer._ff_block = torch.zeros_like


VARIANTS: dict[str, tuple[dict, Callable[[nn.Module], None] | None, dict]] = {
    # name: (model settings changed, surgery after building, recipe settings changed)
    "the toy translator": ({}, None, {}),
    "no positional encoding": ({"positional": "none"}, None, {}),
    "1 head": ({"n_heads": 1}, None, {}),
    "no residuals": ({}, _no_residuals, {}),
    "no LayerNorm": ({}, _no_layer_norm, {}),
    "no feed-forward": ({}, _no_feed_forward, {}),
    "no label smoothing": ({}, None, {"label_smoothing": 0.0}),
}


def build(name: str, seed: int) -> tuple[nn.Module, TrainConfig]:
    """The variant's model, initialised from ``seed`` as ``train_toy_model`` does,
    and its training settings."""
    settings, surgery, recipe = VARIANTS[name]
    _, _, sv, tv = toy_data()
    torch.manual_seed(seed)  # the initial weights: the same draw for every variant
    model = make_model(len(sv), len(tv), **{**TOY_MODEL, **settings})
    if surgery is not None:
        surgery(model)
    fields = {**asdict(TOY_TRAINING), "seed": seed, "device": "cpu", **recipe}
    return model, TrainConfig(**fields)


def one_run(job: tuple[str, int]) -> dict:
    name, seed = job
    torch.set_num_threads(THREADS)
    train_pairs, test_pairs, sv, tv = toy_data()
    model, cfg = build(name, seed)
    start = time.perf_counter()
    train(model, train_pairs, sv, tv, cfg, progress=False)
    seconds = time.perf_counter() - start
    return {"variant": name, "seed": seed,
            "loss": heldout_loss(model, test_pairs),  # train() left it in eval mode
            "exact": exact_match(model, test_pairs, sv, tv),
            "parameters": count_parameters(model), "seconds": seconds}  # fmt: skip


THREADS = 1  # torch threads per run (--jobs runs side by side)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    ap.add_argument(
        "--jobs", type=int, default=1, help="runs side by side (1 thread each)"
    )
    ap.add_argument("--out", type=Path, default=RECORD)
    args = ap.parse_args()
    jobs = [(name, seed) for seed in seeds(args.seeds) for name in VARIANTS]
    with ProcessPoolExecutor(args.jobs) as pool:
        runs = []
        for r in pool.map(one_run, jobs):
            runs.append(r)
            print(f"seed {r['seed']}  {r['variant']:>24}: held-out loss {r['loss']:.3f}, "
                  f"exact match {r['exact']:.1%}  ({r['seconds']:.0f} s)", flush=True)  # fmt: skip
    summary = {}
    for name in VARIANTS:
        rows = [r for r in runs if r["variant"] == name]
        summary[name] = {
            key: {"mean": sum(r[key] for r in rows) / len(rows),
                  "spread": spread(r[key] for r in rows)}
            for key in ("loss", "exact")
        }  # fmt: skip
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    record = {
        "command": "python scripts/record_toy_ablations.py"
        + (f" --seeds {args.seeds}" if args.seeds != 3 else "")
        + (f" --jobs {args.jobs}" if args.jobs != 1 else ""),
        "commit": commit, "machine": describe_machine(THREADS), "jobs": args.jobs,
        "torch": torch.__version__, "model": TOY_MODEL, "recipe": asdict(TOY_TRAINING),
        "seeds": seeds(args.seeds), "summary": summary, "runs": runs,
    }  # fmt: skip
    args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
