"""Training on real Japanese (Tatoeba) within a time budget, on one process or several
(translating and scoring: ``translate``; saving and loading: ``checkpoint``).

The same ``Transformer`` as the toy, trained the paper's way (token-count batches,
dropout 0.1, label smoothing 0.1, Adam with warm-up) but stopped by the clock, the
learning rate annealed to 0 over the budget's last fifth:
``train_tatoeba(minutes=...)`` evaluates dev BLEU at intervals, keeps the last
checkpoints and, at the end, their average when that scores higher (paper §6.1
averages the last 5 checkpoints).

Several processes: run the same command under ``torchrun --nproc_per_node=N``.
Each rank reads its own shard of every epoch's batches; gradients are summed by
``DistributedDataParallel`` (gloo on CPU, NCCL on GPU); the loss is normalised by the
*global* token count, so N ranks compute exactly the gradient of one process that
sees all N shards. Only rank 0 evaluates, logs and writes.
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..model.transformer import Transformer, make_model
from ..toy.data import Vocab
from ..toy.training import cooldown_factor, noam_lr, paper_adam, pick_device
from .data import (
    Encoded,
    SubwordTokenizer,
    TatoebaPair,
    TokenBatch,
    default_tokenizer,
    encode_pairs,
    load_tatoeba,
    make_token_batch,
    token_batches,
)
from .recipe import (
    TATOEBA_MODEL,
    TatoebaTrainConfig,
    autocast_choice,
    autocast_context,
    configure_backends,
    resolve_autocast,
)
from .translate import evaluate


@dataclass
class TatoebaHistory:
    step_loss: list[float] = field(default_factory=list)
    step_lr: list[float] = field(default_factory=list)  # the rate each step used
    eval_minutes: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_bleu: list[float] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)  # dev loss (no smoothing)
    tokens: int = 0  # source + target tokens seen (all ranks)
    seconds: float = 0.0
    train_seconds: float = 0.0  # of those, in training steps (evaluations left out)
    autocast: str | None = None  # what the forward ran under ("bf16" or None)
    steps: int = 0
    epochs: float = 0.0
    world_size: int = 1
    device: str = "cpu"
    averaged: bool = False  # the final weights are the average of the last checkpoints
    final_bleu: float = float("nan")

    def to_dict(self) -> dict:
        return asdict(self)


def average_state_dicts(states: list[dict[str, torch.Tensor]]) -> dict:
    """The element-wise mean of several checkpoints' weights (paper §6.1)."""
    if not states:
        raise ValueError("no checkpoints to average")
    keys = states[0].keys()
    if any(s.keys() != keys for s in states):
        raise ValueError("checkpoints with different parameters cannot be averaged")
    out = {}
    for k in keys:
        first = states[0][k]
        if first.is_floating_point():
            out[k] = sum(s[k].double() for s in states).div(len(states)).to(first.dtype)
        else:
            out[k] = first.clone()
    return out


@torch.no_grad()
def dev_loss(model: Transformer, data: Encoded, max_tokens: int = 6000) -> float:
    """Mean cross-entropy (no smoothing) per target token of ``data``."""
    was = model.training
    model.eval()
    device = next(model.parameters()).device
    total = count = 0.0
    for idx in token_batches(data, max_tokens, shuffle=False):
        b = make_token_batch(data, idx).to(device)
        logits = model(b.src, b.tgt_in)
        total += float(F.cross_entropy(logits.flatten(0, 1), b.tgt_out.flatten(),
                                       ignore_index=Vocab.PAD, reduction="sum"))  # fmt: skip
        count += b.ntokens
    model.train(was)
    return total / count


# --- training ----------------------------------------------------------------------


def _dist_info() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed(device: torch.device) -> bool:
    """Join the process group torchrun describes (WORLD_SIZE > 1); False if alone."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or dist.is_initialized():
        return dist.is_initialized()
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return True


def make_optimizer(
    model: torch.nn.Module, d_model: int, cfg: TatoebaTrainConfig
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """Adam (β 0.9/0.98, ε 1e-9) with the paper's warm-up schedule, as §5.3;
    PyTorch's fused kernel when ``cfg.fused_adam``."""
    opt = paper_adam(model.parameters(), fused=cfg.fused_adam)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: noam_lr(s + 1, d_model, cfg.warmup, cfg.lr_factor)
    )
    return opt, sched


def train_step(
    net: torch.nn.Module,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler,
    b: TokenBatch,
    cfg: TatoebaTrainConfig,
    world: int = 1,
    lr_scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step on ``b`` (``net``: the model, or its DDP wrapper), at the
    schedule's learning rate times ``lr_scale`` (the cool-down).

    Returns this rank's share of the global batch's loss per target token (a tensor
    on the device: reading it waits for the device), and the global (target tokens,
    source + target tokens seen): host numbers alone, all-reduced tensors under DDP.
    """
    counts: torch.Tensor | tuple[float, float]
    counts = (float(b.ntokens), float(b.seen))  # counted on the host: no wait
    if world > 1:
        counts = torch.tensor(counts, device=b.src.device)
        dist.all_reduce(counts)  # global target tokens and tokens seen
    ntok = counts[0]
    with autocast_context(b.src.device, cfg.autocast):
        logits = net(b.src, b.tgt_in)
    # the loss in float32 whatever the forward's dtype (log-softmax over 8,000 pieces)
    loss_sum = F.cross_entropy(
        logits.float().flatten(0, 1), b.tgt_out.flatten(), ignore_index=Vocab.PAD,
        label_smoothing=cfg.label_smoothing, reduction="sum",
    )  # fmt: skip
    # DDP averages gradients over ranks: scale so the result is the gradient
    # of (sum over all ranks' tokens) / (global token count)
    loss = loss_sum * world / ntok
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.clip_grad_norm:
        torch.nn.utils.clip_grad_norm_(net.parameters(), cfg.clip_grad_norm)
    for group in opt.param_groups:  # sched.step() below sets the next step's rate anew
        group["lr"] *= lr_scale
    opt.step()
    sched.step()
    return loss_sum.detach() / ntok, counts


def _to_host(values: list[torch.Tensor]) -> list[float]:
    """Scalars on the device, read back in one transfer (it waits for the device)."""
    return torch.stack(values).tolist()


def epoch_seed(seed: int, epoch: int) -> int:
    """The seed of epoch ``epoch``'s batch order (1 is the first) in a run of ``seed``."""
    return seed * 1_000_003 + epoch


def build_tatoeba_model(
    tok: SubwordTokenizer, seed: int = 0, **overrides
) -> Transformer:
    torch.manual_seed(seed)
    return make_model(len(tok), len(tok), **{**TATOEBA_MODEL, **overrides})


def train_tatoeba(
    model: Transformer | None = None,
    config: TatoebaTrainConfig | None = None,
    tok: SubwordTokenizer | None = None,
    train_pairs: list[TatoebaPair] | None = None,
    dev_pairs: list[TatoebaPair] | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> tuple[Transformer, TatoebaHistory]:
    """Train until ``config.minutes`` have passed (or ``max_steps``); returns the best
    weights seen by dev BLEU (the average of the last checkpoints when it wins).

    Under torchrun every rank calls this; each trains on its shard.
    """
    cfg = config or TatoebaTrainConfig()
    tok = tok or default_tokenizer()
    device = pick_device(cfg.device)
    if device.type == "cuda" and device.index is None and "LOCAL_RANK" in os.environ:
        # under torchrun, one GPU per rank (the caller's config is left as it was)
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    init_distributed(device)
    configure_backends(device)
    rank, world = _dist_info()
    if cfg.sync_every < 1:
        raise ValueError(f"sync_every={cfg.sync_every} must be at least 1")
    model = model or build_tatoeba_model(tok, cfg.seed, **cfg.model)
    model.to(device)
    train_pairs = train_pairs if train_pairs is not None else load_tatoeba("train")
    dev_pairs = dev_pairs if dev_pairs is not None else load_tatoeba("dev")
    dev_pairs = dev_pairs[: cfg.eval_sentences]
    if not train_pairs:
        raise ValueError("no training pairs")
    if cfg.batches_per_step < 1:
        raise ValueError(f"batches_per_step={cfg.batches_per_step} must be at least 1")
    data = encode_pairs(train_pairs, tok)
    dev_data = encode_pairs(dev_pairs, tok)
    net: torch.nn.Module = torch.compile(model, dynamic=True) if cfg.compile else model
    if world > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None
        )
    opt, sched = make_optimizer(model, model.config.d_model, cfg)
    hist = TatoebaHistory(world_size=world, device=str(device),
                          autocast=resolve_autocast(cfg.autocast, device))  # fmt: skip
    if rank == 0 and progress:
        log(f"forward pass: {autocast_choice(cfg.autocast, device)}")
    kept: list[dict] = []  # the last checkpoints (CPU copies)
    best_bleu, best_state = -1.0, None
    budget = cfg.minutes * 60.0
    start = time.perf_counter()
    next_eval = cfg.eval_minutes * 60.0
    bar = tqdm(total=round(budget), disable=not progress or rank != 0, unit="s",
               desc="train", bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} s{postfix}")  # fmt: skip
    step, epoch, done, lr_scale = 0, 0, False, 1.0
    tok_window, t_window = 0, start
    # Nothing in a step waits for the device: the losses (device tensors) and, under
    # DDP, the tokens seen are read back every cfg.sync_every steps, and the clock is
    # the host's. Meanwhile the host builds the next batch while the device works.
    pending: list[torch.Tensor] = []  # losses not read back yet
    seen_pending: list[torch.Tensor] = []  # DDP: global tokens seen, not read back
    eval_seconds = 0.0  # in evaluations (the loop's time is the rest)

    def read_back() -> None:
        nonlocal tok_window
        if pending:
            hist.step_loss.extend(_to_host(pending))
            pending.clear()
        if seen_pending:
            seen = int(sum(_to_host(seen_pending)))
            hist.tokens += seen
            tok_window += seen
            seen_pending.clear()

    def batch_on_device(idx: list[int]) -> TokenBatch:
        b = make_token_batch(data, idx)
        if device.type == "cuda":  # page-locked, so the copy overlaps the GPU's work
            return b.pin_memory().to(device, non_blocking=True)
        return b.to(device)

    def evaluate_now(elapsed: float) -> None:
        nonlocal best_bleu, best_state, eval_seconds
        read_back()
        began = time.perf_counter()
        model.eval()
        score = evaluate(model, tok, dev_pairs)[0].score if dev_pairs else float("nan")
        loss = dev_loss(model, dev_data) if dev_pairs else float("nan")
        model.train()
        hist.eval_minutes.append(elapsed / 60)
        hist.eval_steps.append(step)
        hist.eval_bleu.append(score)
        hist.eval_loss.append(loss)
        state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        kept.append(state)
        del kept[: -cfg.keep_last]
        if score > best_bleu:
            best_bleu, best_state = score, state
        log(f"[{elapsed / 60:5.1f} min] step {step}: dev BLEU {score:.2f} "
            f"(first {len(dev_pairs)} dev pairs), dev loss {loss:.3f}")  # fmt: skip
        eval_seconds += time.perf_counter() - began

    model.train()
    while not done:
        epoch += 1
        shard = token_batches(data, cfg.max_tokens, epoch_seed(cfg.seed, epoch), True,
                              rank, world)  # fmt: skip
        k = cfg.batches_per_step
        shard = [sum(shard[i : i + k], []) for i in range(0, len(shard) - k + 1, k)]
        if not shard:  # else the loop below would start new epochs forever
            raise ValueError(
                f"{len(train_pairs)} training pairs make fewer batches of "
                f"max_tokens={cfg.max_tokens} than ranks x batches_per_step = "
                f"{world} x {k}"
            )
        upcoming = batch_on_device(shard[0])
        for n_batch in range(len(shard)):
            b = upcoming
            hist.step_lr.append(sched.get_last_lr()[0] * lr_scale)
            step_loss, counts = train_step(net, opt, sched, b, cfg, world, lr_scale)
            step += 1
            if n_batch + 1 < len(shard):  # built while the device runs this step
                upcoming = batch_on_device(shard[n_batch + 1])
            if world > 1:  # each rank holds its share of the global batch's loss
                dist.all_reduce(step_loss)
                seen_pending.append(counts[1])
            else:
                hist.tokens += int(counts[1])
                tok_window += int(counts[1])
            pending.append(step_loss)
            synced = step % cfg.sync_every == 0
            if synced:
                read_back()
            elapsed = time.perf_counter() - start
            fraction = elapsed / budget if budget > 0 else 1.0
            if cfg.max_steps:
                fraction = max(fraction, step / cfg.max_steps)
            if world == 1:  # the host's clock decides; no need to ask the device
                stop = fraction >= 1.0
                lr_scale = cooldown_factor(fraction, 1.0, cfg.cooldown, 0.0)
            elif synced:  # rank 0's clock decides for everyone: a broadcast
                control = torch.tensor(
                    [float(fraction >= 1.0),
                     cooldown_factor(fraction, 1.0, cfg.cooldown, 0.0)],
                    device=device,
                )  # fmt: skip
                dist.broadcast(control, 0)
                stop, lr_scale = bool(control[0]), float(control[1])
            else:  # between broadcasts the rate holds and no rank stops
                stop = False
            if rank == 0:
                if elapsed >= next_eval and not stop:
                    evaluate_now(elapsed)
                    next_eval += cfg.eval_minutes * 60.0
                if time.perf_counter() - t_window > 5:
                    read_back()  # the bar shows the latest loss
                    rate = tok_window / (time.perf_counter() - t_window)
                    bar.set_postfix(epoch=epoch, step=step,
                                    loss=f"{hist.step_loss[-1]:.3f}",
                                    tok_s=f"{rate:,.0f}")  # fmt: skip
                    tok_window, t_window = 0, time.perf_counter()
                bar.n = min(round(time.perf_counter() - start), bar.total)
                bar.refresh()
            if stop:
                done = True
                hist.epochs = epoch - 1 + (n_batch + 1) / max(len(shard), 1)
                break
    read_back()  # waits for the device's last steps
    hist.train_seconds = time.perf_counter() - start - eval_seconds
    bar.close()
    hist.steps = step
    if rank == 0:
        evaluate_now(time.perf_counter() - start)
        if len(kept) > 1 and dev_pairs:  # nothing to choose by without dev pairs
            current = copy.deepcopy(model.state_dict())
            model.load_state_dict(average_state_dicts(kept))
            model.eval()
            avg = evaluate(model, tok, dev_pairs)[0].score
            log(f"average of the last {len(kept)} checkpoints: dev BLEU {avg:.2f}")
            if avg >= best_bleu:
                best_bleu, best_state, hist.averaged = avg, None, True
            model.load_state_dict(current)
        if best_state is not None:
            model.load_state_dict(best_state)
        elif hist.averaged:
            model.load_state_dict(average_state_dicts(kept))
        hist.final_bleu = best_bleu if dev_pairs else float("nan")
    hist.seconds = time.perf_counter() - start
    model.eval()
    return model, hist


def tokens_per_second(hist: TatoebaHistory) -> float:
    return hist.tokens / hist.seconds if hist.seconds else math.nan
