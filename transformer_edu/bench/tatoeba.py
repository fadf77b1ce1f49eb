"""Benchmarks on real Tatoeba batches: ours vs nn.Transformer, and DDP scaling.

``run_tatoeba``: our ``Transformer`` and its ``nn.Transformer`` counterpart, both in the
shipped configuration (``TATOEBA_MODEL``), take ``train_tatoeba``'s training step on
the same token batches in turn (A B, B A, ...), so the machine's load hits both alike.

``run_ddp``: PyTorch's launcher (``python -m torch.distributed.run --standalone``)
starts this module with 1 rank, then N ranks (gloo, CPU); each rank trains on its own
batches of ``max_tokens``, so the global batch grows with the ranks and the figure
compared is tokens per second.

Both time the training steps only: the batches are built before the clock starts,
and tokens are source + target tokens without padding, as ``train_tatoeba`` counts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from ..devices import describe_machine
from ..model.config import TransformerConfig
from ..model.transformer import count_parameters
from ..tatoeba.data import (
    Encoded,
    TokenBatch,
    default_tokenizer,
    encode_pairs,
    load_tatoeba,
    make_token_batch,
    token_batches,
)
from ..tatoeba.recipe import TATOEBA_MODEL, TatoebaTrainConfig, autocast_choice
from ..tatoeba.train import (
    _dist_info,
    build_tatoeba_model,
    epoch_seed,
    init_distributed,
    make_optimizer,
    train_step,
    train_tatoeba,
)
from .model import TorchTransformerModel


@dataclass
class TatoebaBenchConfig:
    """Sizes of the Tatoeba benchmarks (defaults: the shipped model's training)."""

    steps: int = 30  # timed training steps per model (per rank with --ddp)
    warmup_steps: int = 2  # untimed steps first: allocations, Adam state, DDP buckets
    max_tokens: int = 6000  # padded source + target tokens per batch (per rank)
    pairs: int | None = None  # the first N training pairs only (None: all of them)
    model: dict = field(default_factory=dict)  # overrides of TATOEBA_MODEL
    seed: int = 0
    device: str = "cpu"  # run_tatoeba only; DDP runs on the CPU (gloo)
    nproc: int = 2  # run_ddp: ranks compared with 1
    threads: int | None = None  # run_ddp: torch threads per rank (None: split cores)
    rounds: int = 2  # run_ddp: launches of each size, in the order 1 N N 1 ...
    timeout_s: float = 1800.0  # run_ddp: per launch

    def __post_init__(self) -> None:
        for name, low in (("steps", 1), ("warmup_steps", 0), ("max_tokens", 1),
                          ("nproc", 1), ("rounds", 1)):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name}={value!r} must be an integer >= {low}")

    @classmethod
    def quick(cls) -> TatoebaBenchConfig:
        """Tiny sizes, the same code paths: a smoke test."""
        return cls(steps=2, warmup_steps=1, max_tokens=300, pairs=400, rounds=1,
                   model=dict(d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1,
                              n_decoder_layers=1))  # fmt: skip


def tatoeba_train_step(
    model: nn.Module,
    d_model: int,
    cfg: TatoebaTrainConfig | None = None,
    net: nn.Module | None = None,
    world: int = 1,
) -> Callable[[TokenBatch], float]:
    """``train_tatoeba``'s optimizer and step (``train_step``) for any model, e.g. its
    ``nn.Transformer`` twin. ``net`` is the DDP wrapper, if any. Returns the loss."""
    cfg = cfg or TatoebaTrainConfig()
    net = model if net is None else net
    opt, sched = make_optimizer(model, d_model, cfg)

    def step(b: TokenBatch) -> float:
        # .item() waits for the device, as train_tatoeba does
        return train_step(net, opt, sched, b, cfg, world)[0].item()

    return step


def _batch_index(
    cfg: TatoebaBenchConfig, rank: int = 0, world: int = 1
) -> tuple[Encoded, list[list[int]]]:
    """The encoded pairs and the first warm-up + timed batches of epoch 1's shuffled
    order (this rank's share), as ``train_tatoeba`` with seed ``cfg.seed`` takes them."""
    pairs = load_tatoeba("train")[: cfg.pairs]
    data = encode_pairs(pairs, default_tokenizer())
    index = token_batches(data, cfg.max_tokens, epoch_seed(cfg.seed, 1), True, rank,
                          world)  # fmt: skip
    need = cfg.warmup_steps + cfg.steps
    if len(index) < need:
        raise ValueError(
            f"{len(pairs)} training pairs make {len(index)} batches of max_tokens="
            f"{cfg.max_tokens} per rank for {world} rank(s); the bench needs "
            f"warmup_steps + steps = {need}"
        )
    return data, index[:need]


def _batches(
    cfg: TatoebaBenchConfig, device: torch.device, rank: int = 0, world: int = 1
) -> tuple[list[TokenBatch], list[int]]:
    """The batches on ``device`` and each one's source + target tokens (no padding)."""
    data, index = _batch_index(cfg, rank, world)
    batches = [make_token_batch(data, i).to(device) for i in index]
    return batches, [b.seen for b in batches]


def _threads(n: int) -> str:
    return f"{n} thread{'s' if n != 1 else ''}"


def _timed(step: Callable[[TokenBatch], float], b: TokenBatch) -> float:
    start = time.perf_counter()
    step(b)
    return time.perf_counter() - start


def _describe(c: TransformerConfig) -> str:
    return (
        f"d_model {c.d_model}, {c.n_heads} heads, d_ff {c.d_ff}, "
        f"{c.n_encoder_layers}+{c.n_decoder_layers} layers, "
        f"{'pre' if c.norm_first else 'post'}-LN, vocabulary {c.src_vocab_size:,}"
        f"{', shared' if c.share_embeddings else ''}"
        f"{', tied generator' if c.tie_generator else ''}"
    )


def run_tatoeba(
    cfg: TatoebaBenchConfig, print_fn: Callable[[str], None] = print
) -> dict[str, float]:
    """Training tokens/s of ours and of nn.Transformer, side by side; the last line
    printed is the time ratio ours/nn.Transformer (below 1: ours faster)."""
    device = torch.device(cfg.device)
    batches, tokens = _batches(cfg, device)
    ours = build_tatoeba_model(default_tokenizer(), cfg.seed, **cfg.model).to(device)
    torch.manual_seed(cfg.seed)
    theirs = TorchTransformerModel.from_config(ours.config).to(device)
    n_ours, n_theirs = count_parameters(ours), count_parameters(theirs)
    if n_ours != n_theirs:
        raise RuntimeError(
            f"not the same configuration: ours has {n_ours:,} parameters, "
            f"nn.Transformer's {n_theirs:,}"
        )
    d_model = ours.config.d_model
    steps = {"ours": tatoeba_train_step(ours, d_model),
             "torch": tatoeba_train_step(theirs, d_model)}  # fmt: skip
    ours.train()
    theirs.train()
    warm_s = 0.0  # ours' warm-up steps, timed apart
    for b in batches[: cfg.warmup_steps]:
        warm_s += _timed(steps["ours"], b)
        steps["torch"](b)
    timed, timed_tokens = batches[cfg.warmup_steps :], tokens[cfg.warmup_steps :]
    times: dict[str, list[float]] = {"ours": [], "torch": []}
    for i, b in enumerate(timed):  # A B, B A, ...: drift in load hits both alike
        for name in ("ours", "torch") if i % 2 == 0 else ("torch", "ours"):
            times[name].append(_timed(steps[name], b))
    total = sum(timed_tokens)
    t_ours, t_theirs = sum(times["ours"]), sum(times["torch"])
    per_batch = statistics.median(
        o / t for o, t in zip(times["ours"], times["torch"], strict=True)
    )
    print_fn(
        f"torch {torch.__version__}, {_threads(torch.get_num_threads())}, {device}; "
        f"Tatoeba configuration: {_describe(ours.config)}; {n_ours:,} parameters each"
    )
    print_fn(
        f"{len(timed)} real Tatoeba batches (max_tokens {cfg.max_tokens:,}; "
        f"{total:,} source + target tokens), each trained on by both models in turn "
        f"(train_tatoeba's step) after {cfg.warmup_steps} warm-up step(s)"
    )
    print_fn(
        f"ours {total / t_ours:,.0f} tokens/s ({t_ours:.2f} s), nn.Transformer "
        f"{total / t_theirs:,.0f} tokens/s ({t_theirs:.2f} s); "
        f"median per-batch time ratio {per_batch:.3f}"
    )
    ratio = t_ours / t_theirs
    print_fn(
        f"time ratio ours/nn.Transformer: {ratio:.3f} "
        f"(below 1: ours faster; target <= 1.0)"
    )
    # the same steps inside train_tatoeba's loop (which builds each batch, moves it
    # and reads the loss back itself), warm-up steps included on both sides
    bare = sum(tokens) / (warm_s + t_ours)
    loop = loop_tokens_per_second(cfg, device)
    print_fn(
        f"train_tatoeba's loop, the same {len(tokens)} steps: {loop:,.0f} tokens/s "
        f"against the bare step's {bare:,.0f} (warm-up included): "
        f"x{loop / bare:.2f} of it"
    )
    return {"tokens": total, "ours_s": t_ours, "torch_s": t_theirs,
            "ours_tokens_per_s": total / t_ours, "torch_tokens_per_s": total / t_theirs,
            "time_ratio": ratio, "median_batch_ratio": per_batch,
            "step_tokens_per_s": bare, "loop_tokens_per_s": loop}  # fmt: skip


def loop_tokens_per_second(cfg: TatoebaBenchConfig, device: torch.device) -> float:
    """Tokens/s of ``train_tatoeba`` itself on the bench's batches (the same pairs,
    seed and first epoch, so the same steps as ``_batches``), with the device's
    recipe otherwise (``recipe_for``) and no evaluation; the loop's time only."""
    from ..tatoeba.recipe import recipe_for

    tok = default_tokenizer()
    model = build_tatoeba_model(tok, cfg.seed, **cfg.model)
    train_cfg = recipe_for(device, max_steps=cfg.warmup_steps + cfg.steps,
                           max_tokens=cfg.max_tokens, seed=cfg.seed, model=cfg.model,
                           eval_minutes=1e9)  # fmt: skip
    _, hist = train_tatoeba(model, train_cfg, tok, load_tatoeba("train")[: cfg.pairs],
                            [], progress=False, log=lambda line: None)  # fmt: skip
    return hist.tokens / hist.train_seconds


# --- the training recipe, change by change ---------------------------------------------

# Each recipe adds one change to the one before it; "before" is the recipe the first
# shipped model was trained with (dropout in all four places, Adam's default kernel,
# float32). Model overrides go to build_tatoeba_model, the rest to TatoebaTrainConfig.
RECIPES: dict[str, tuple[dict, dict]] = {
    "before": (
        dict(attention_dropout=None, activation_dropout=None, fast=True),
        dict(fused_adam=False, autocast=None),
    ),
    "+ paper's dropout": (dict(fast=True), dict(fused_adam=False, autocast=None)),
    "+ fused Adam": (dict(fast=True), dict(autocast=None)),
    "+ bf16 autocast": (dict(fast=True), dict(autocast="bf16")),
    # the shipped recipe where the CPU has native bf16 (autocast="auto" chooses)
    "+ written-out attention": ({}, dict(autocast="bf16")),
    "+ torch.compile": ({}, dict(autocast="bf16", compile=True)),  # not kept
}


def recipe_step(
    name: str, cfg: TatoebaBenchConfig, device: torch.device
) -> tuple[nn.Module, Callable[[TokenBatch], float]]:
    """A fresh model (the bench's seed) and train_tatoeba's step under recipe ``name``."""
    model_over, train_over = RECIPES[name]
    model = build_tatoeba_model(
        default_tokenizer(), cfg.seed, **{**cfg.model, **model_over}
    ).to(device)
    train_cfg = TatoebaTrainConfig(**train_over)
    net = torch.compile(model, dynamic=True) if train_cfg.compile else model
    model.train()
    return model, tatoeba_train_step(model, model.config.d_model, train_cfg, net=net)


def run_recipes(
    cfg: TatoebaBenchConfig,
    names: list[str] | None = None,
    print_fn: Callable[[str], None] = print,
) -> dict[str, dict[str, float]]:
    """Training tokens/s of each recipe on the same real batches, taken in turn (the
    order rotates batch by batch, so drift in the machine's load hits all alike); the
    ratios are to "before". The warm-up steps (compilation included) are timed apart."""
    names = names or list(RECIPES)
    device = torch.device(cfg.device)
    batches, tokens = _batches(cfg, device)
    steps, warm = {}, {}
    for name in names:
        _, steps[name] = recipe_step(name, cfg, device)
        start = time.perf_counter()
        for b in batches[: cfg.warmup_steps]:
            steps[name](b)
        warm[name] = time.perf_counter() - start
    timed, total = batches[cfg.warmup_steps :], sum(tokens[cfg.warmup_steps :])
    times: dict[str, list[float]] = {name: [] for name in names}
    losses: dict[str, list[float]] = {name: [] for name in names}
    for i, b in enumerate(timed):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            start = time.perf_counter()
            losses[name].append(steps[name](b))
            times[name].append(time.perf_counter() - start)
    base = sum(times[names[0]])
    print_fn(
        f"torch {torch.__version__}, {_threads(torch.get_num_threads())}, {device}; "
        f"{len(timed)} real Tatoeba batches (max_tokens {cfg.max_tokens:,}; "
        f"{total:,} source + target tokens) per recipe, taken in turn after "
        f"{cfg.warmup_steps} warm-up step(s)"
    )
    if device.type == "cpu":
        print_fn(f"machine: {describe_machine()}")
    print_fn(f"the shipped recipe (autocast='auto') here: "
             f"{autocast_choice('auto', device)}")  # fmt: skip
    out = {}
    for name in names:
        t = sum(times[name])
        out[name] = {"tokens_per_s": total / t, "seconds": t, "warmup_s": warm[name],
                     "speedup": base / t, "last_loss": losses[name][-1]}  # fmt: skip
        print_fn(
            f"{name:24} {total / t:8,.0f} tokens/s  x{base / t:.2f} of "
            f"{names[0]!r}  (warm-up {warm[name]:.1f} s; last loss "
            f"{losses[name][-1]:.3f})"
        )
    return out


def loss_curves(
    cfg: TatoebaBenchConfig,
    names: list[str],
    window: int = 50,
    print_fn: Callable[[str], None] = print,
) -> dict[str, list[float]]:
    """Train each recipe ``cfg.steps`` steps on the same batches (the epoch's shuffled
    order, in turn) from the same initial weights; print the mean training loss per
    ``window`` steps of each, and its largest gap to the first recipe's. A faster
    recipe that computes in lower precision must learn as the float32 one does."""
    device = torch.device(cfg.device)
    data, index = _batch_index(
        TatoebaBenchConfig(**{**asdict(cfg), "warmup_steps": 0}), 0, 1
    )
    steps = {name: recipe_step(name, cfg, device)[1] for name in names}
    losses: dict[str, list[float]] = {name: [] for name in names}
    for idx in index:
        b = make_token_batch(data, idx).to(device)
        for name in names:
            losses[name].append(steps[name](b))
    window = max(1, min(window, len(index)))
    n = len(index) // window
    means = window_means(losses, window)
    print_fn(
        f"training loss (label-smoothed, per target token), mean of each {window} "
        f"steps, {len(index)} steps of max_tokens {cfg.max_tokens:,}, same batches:"
    )
    print_fn("steps      " + "".join(f"{k:>25}" for k in names))
    for i in range(n):
        row = "".join(f"{means[k][i]:25.3f}" for k in names)
        print_fn(f"{i * window + 1:4}-{(i + 1) * window:<5}{row}")
    for k, gap in largest_gaps(means).items():
        print_fn(f"largest gap of {k!r} to {names[0]!r}: {gap:.3f}")
    return losses


def window_means(losses: dict[str, list[float]], window: int) -> dict[str, list[float]]:
    """The mean of each whole ``window`` of steps, recipe by recipe."""
    return {k: [statistics.fmean(v[i * window : (i + 1) * window])
                for i in range(len(v) // window)]
            for k, v in losses.items()}  # fmt: skip


def largest_gaps(means: dict[str, list[float]]) -> dict[str, float]:
    """Each later recipe's largest gap, window by window, to the first recipe's."""
    names = list(means)
    base = means[names[0]]
    return {k: max(abs(a - b) for a, b in zip(means[k], base, strict=True))
            for k in names[1:]}  # fmt: skip


# --- DDP scaling ---------------------------------------------------------------------


def ddp_worker(cfg: TatoebaBenchConfig, out: Path | None) -> dict | None:
    """One rank under torchrun: train ``steps`` timed steps on this rank's batches;
    rank 0 writes the global tokens/s to ``out`` (JSON) and returns it."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = torch.device("cpu")
    init_distributed(device)  # gloo when torchrun says WORLD_SIZE > 1
    rank, world = _dist_info()
    try:
        batches, tokens = _batches(cfg, device, rank, world)
        model = build_tatoeba_model(default_tokenizer(), cfg.seed, **cfg.model)
        net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
        step = tatoeba_train_step(model, model.config.d_model, net=net, world=world)
        model.train()
        for b in batches[: cfg.warmup_steps]:
            step(b)
        if world > 1:
            dist.barrier()
        start = time.perf_counter()
        for b in batches[cfg.warmup_steps :]:
            loss = step(b)
        seconds = time.perf_counter() - start
        total = torch.tensor([float(sum(tokens[cfg.warmup_steps :])), seconds])
        if world > 1:  # all ranks' tokens over the slowest rank's time
            dist.all_reduce(total[:1])
            dist.all_reduce(total[1:], op=dist.ReduceOp.MAX)
    finally:
        if world > 1:
            dist.destroy_process_group()
    if rank != 0:
        return None
    result = {"world": world, "threads": torch.get_num_threads(), "steps": cfg.steps,
              "tokens": int(total[0]), "seconds": float(total[1]),
              "tokens_per_s": float(total[0] / total[1]), "last_loss": loss}  # fmt: skip
    if out is not None:
        out.write_text(json.dumps(result))
    return result


def launch_command(cfg: TatoebaBenchConfig, nproc: int, out: Path) -> list[str]:
    """PyTorch's launcher running ``ddp_worker`` on ``nproc`` ranks of this machine."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", "-m", __name__,
            "--config", json.dumps(asdict(cfg)), "--out", str(out)]  # fmt: skip


def _launch(cfg: TatoebaBenchConfig, nproc: int, threads: int) -> dict:
    root = str(Path(__file__).resolve().parents[2])  # the package importable
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": str(threads)}
    cfg = TatoebaBenchConfig(**{**asdict(cfg), "threads": threads})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = launch_command(cfg, nproc, out)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                              timeout=cfg.timeout_s)  # fmt: skip
        if proc.returncode != 0 or not out.is_file():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
            raise RuntimeError(
                f"torch.distributed.run with {nproc} rank(s) exited with status "
                f"{proc.returncode}:\n" + "\n".join(tail)
            )
        result = json.loads(out.read_text())
    if result["world"] != nproc:
        raise RuntimeError(
            f"asked for {nproc} rank(s), the worker saw {result['world']}"
        )
    return result


def run_ddp(
    cfg: TatoebaBenchConfig, print_fn: Callable[[str], None] = print
) -> dict[str, float]:
    """Tokens/s of 1 rank and of ``nproc`` ranks under torch.distributed.run (gloo),
    the same batch size per rank; the last line printed is the speed-up."""
    n = cfg.nproc
    if n < 2:
        raise ValueError(f"nproc={n}: compare 1 rank with at least 2")
    _batch_index(cfg, 0, n)  # enough batches? (a clear error before launching)
    vocab = len(default_tokenizer())
    model = TransformerConfig(vocab, vocab, **{**TATOEBA_MODEL, **cfg.model})
    cores = torch.get_num_threads()
    threads = {1: cfg.threads or cores, n: cfg.threads or max(1, cores // n)}
    runs: dict[int, list[dict]] = {1: [], n: []}
    for r in range(cfg.rounds):  # 1 N, N 1, ...: drift in load hits both alike
        for size in (1, n) if r % 2 == 0 else (n, 1):
            runs[size].append(_launch(cfg, size, threads[size]))
    rate = {k: statistics.median(x["tokens_per_s"] for x in v) for k, v in runs.items()}
    print_fn(
        f"torch {torch.__version__}; python -m torch.distributed.run --standalone, "
        f"gloo on the CPU; model: {_describe(model)}; "
        f"{cfg.steps} timed step(s) per rank after {cfg.warmup_steps} warm-up, "
        f"max_tokens {cfg.max_tokens:,} per rank (the global batch grows with the ranks)"
    )
    for k in (1, n):
        print_fn(
            f"{k} rank{'s' if k > 1 else ''} x {_threads(threads[k])}: "
            f"{rate[k]:,.0f} tokens/s "
            f"(median of {len(runs[k])} launch{'es' if len(runs[k]) > 1 else ''})"
        )
    speedup = rate[n] / rate[1]
    print_fn(
        f"speed-up {n} ranks / 1 rank: {speedup:.2f}x tokens/s "
        f"(ideal {n:.2f}x; efficiency {speedup / n:.0%})"
    )
    return {"tokens_per_s_1": rate[1], f"tokens_per_s_{n}": rate[n],
            "speedup": speedup}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """The worker torchrun starts: ``--config`` (JSON of TatoebaBenchConfig), ``--out``."""
    p = argparse.ArgumentParser(description=main.__doc__)
    p.add_argument("--config", required=True)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    ddp_worker(TatoebaBenchConfig(**json.loads(args.config)), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
