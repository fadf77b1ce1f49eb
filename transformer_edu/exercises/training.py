"""Chapter 9: label smoothing and the warm-up learning-rate schedule; and the loop
that trains a model with them (chapter 11's exercise A.5)."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..model.transformer import make_model
from ..toy.data import Vocab
from ..toy.training import (
    noam_lr,
    sequence_loss,
    smoothed_targets,
    train,
    train_toy_model,
)
from .harness import (
    Case,
    CheckResult,
    Failure,
    as_tensor,
    call,
    close,
    drawn,
    expect,
    generator,
    manual_seed,
    match,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import COMMON, register

SMOOTHING_REFERENCES = references(smoothed_targets)
NOAM_REFERENCES = references(noam_lr)


@exercise("9.1", "smooth", points=1)
def check_label_smoothing(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(target, vocab_size, smoothing)`` -> (N, V) target distributions:
    (1 - ε) one-hot + ε / V, what ``F.cross_entropy(label_smoothing=ε)`` trains to."""
    cases = [
        Case(
            f"N={len(target)}, V={V}, ε={eps}",
            partial(_run_smoothing, fn, target, V, eps),
        )
        for target, V, eps in drawn(
            [([1, 3, 0], 5, 0.1), ([0, 1], 2, 0.3), ([7], 50, 0.0)],
            _other_targets,
            seed=80,
        )
    ]
    return run_cases("check_label_smoothing", cases, quiet, SMOOTHING_REFERENCES)


def _other_targets(rng: random.Random, row: tuple) -> tuple:
    """As many targets, a vocabulary and ε drawn anew (ε = 0 stays 0: one-hot)."""
    target, V, eps = row
    V = rng.randint(2, 60)
    eps = round(rng.uniform(0.05, 0.4), 2) if eps else 0.0
    return [rng.randrange(V) for _ in target], V, eps


def _run_smoothing(fn: Callable, target: list[int], V: int, eps: float) -> None:
    tgt = torch.tensor(target)
    expected = smoothed_targets(tgt, V, eps)
    got = as_tensor(call(fn, tgt.clone(), V, eps), "targets")
    expect(
        "targets",
        got,
        expected,
        atol=1e-5,
        diagnose=lambda g: _smoothing_mistake(g, tgt, V, eps),
    )


def _smoothing_mistake(got: Tensor, tgt: Tensor, V: int, eps: float) -> str | None:
    sums = got.double().sum(-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
        return (
            f"each row must sum to 1 (yours sum to {float(sums[0]):.3f}): the true "
            "class keeps 1 - ε plus its share ε / V"
        )
    # the other convention: ε spread over the V - 1 wrong classes only
    one_hot = F.one_hot(tgt, V).double()
    other = one_hot * (1 - eps) + (1 - one_hot) * eps / (V - 1)
    if close(got, other, 1e-5, 1e-5):
        return (
            "you spread ε over the V - 1 wrong classes (another convention); this "
            "book follows F.cross_entropy: ε / V to every class, the true one included"
        )
    return None


def _other_schedule(rng: random.Random, row: tuple) -> tuple:
    """A model width and a warm-up drawn anew."""
    return rng.choice([32, 64, 128, 256, 512, 768, 1024]), rng.randint(10, 8000)


@exercise("9.2", "lr_at", points=1)
def check_noam_lr(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(step, d_model, warmup)`` -> the paper's learning rate
    d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) for steps >= 1."""
    cases = []
    for D, warmup in drawn([(512, 4000), (64, 100)], _other_schedule, seed=81):
        steps = [1, 2, warmup // 2, warmup, warmup + 1, 4 * warmup, 20 * warmup]
        label = f"d_model={D}, warmup={warmup}, steps {steps}"
        cases.append(Case(label, partial(_run_noam, fn, D, warmup, steps)))
    return run_cases("check_noam_lr", cases, quiet, NOAM_REFERENCES)


def _run_noam(fn: Callable, D: int, warmup: int, steps: list[int]) -> None:
    expected = torch.tensor([noam_lr(s, D, warmup) for s in steps])
    got = torch.tensor([float(as_tensor(call(fn, s, D, warmup), "lr")) for s in steps])
    expect(
        "lr",
        got,
        expected,
        atol=1e-9,
        rtol=1e-4,
        diagnose=lambda g: _noam_mistake(g, expected, steps, warmup),
    )


def _noam_mistake(got: Tensor, expected: Tensor, steps: list[int], warmup: int) -> str:
    ratio = got / expected
    if torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-4):
        return (
            f"right shape, wrong size (×{float(ratio[0]):.4g}): the factor "
            "d_model^-0.5 is missing or wrong"
        )
    peak = steps[int(got.argmax())]
    if peak != warmup:
        return (
            f"the peak is at step {peak}, not at step warmup={warmup}: warm-up is "
            "step · warmup^-1.5 (linear), decay step^-0.5, and the rate is their min"
        )
    return "lr = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)"


# --- the training loop (A.5) -----------------------------------------------------------

LOOP_REFERENCES = references(train, train_toy_model, sequence_loss)
_LOOP_MISTAKES = [  # (hint, the _reference_loop mistake)
    ("the decoder reads the whole target and is scored on the same tokens: teacher "
     "forcing feeds tgt[:, :-1] (BOS w₁ … w_n) and scores each position against the "
     "next token, tgt[:, 1:] (w₁ … w_n EOS)", "no shift"),
    ("the targets are the decoder's own inputs, tgt[:, :-1]: each position is scored "
     "against the next token, tgt[:, 1:]", "inputs as targets"),
    ("the padding positions count in the loss: ignore_index=0 (PAD) leaves them out, "
     "and the mean is over the real tokens", "pads counted"),
    ("the loss is not label-smoothed: F.cross_entropy(…, label_smoothing=smoothing) "
     "(chapter 9, exercise 9.1)", "no smoothing"),
    ("the loss is summed over the tokens: it is their mean (reduction='mean', "
     "F.cross_entropy's default)", "summed"),
    ("the gradients are never zeroed: backward() adds to each .grad, so every step "
     "carries all the earlier steps' gradients; call opt.zero_grad() before "
     "loss.backward()", "no zero_grad"),
    ("the gradients are not clipped (or clipped after opt.step(), too late): "
     "nn.utils.clip_grad_norm_(model.parameters(), clip) between backward() and "
     "step()", "no clipping"),
    ("the learning rate is never set: the optimizer keeps its lr = 1.0; set each "
     "param group's lr to lr_factor · lr_at(step, d_model, warmup) before "
     "opt.step()", "lr never set"),
    ("the learning rate lags one step (set after opt.step()?): step s uses "
     "lr_factor · lr_at(s, d_model, warmup), set before its opt.step()", "lr late"),
    ("the learning rate is one step ahead: the first step uses lr_at(1, …) (the paper "
     "counts steps from 1; a scheduler stepped before the optimizer runs ahead)",
     "lr ahead"),
    ("lr_factor is missing: the rate is lr_factor · lr_at(step, d_model, warmup)",
     "no factor"),
]  # fmt: skip
EVAL_MODE = (
    "the model stays in eval mode, so its dropout is off: call model.train() before "
    "the loop (the model may arrive in eval mode, as it does after greedy decoding)"
)


def reference_loop(
    model: nn.Module, batches: list, d_model: int, warmup: int,
    lr_factor: float = 1.0, smoothing: float = 0.1, clip: float = 1.0,
    mistake: str = "",
) -> list[float]:  # fmt: skip
    """A.5's loop, right (``mistake`` empty) or with one known mistake: one step per
    ``(src, tgt)`` batch, teacher forcing, the label-smoothed mean loss over the real
    tokens, gradients clipped to norm ``clip``, the paper's Adam at the rate
    ``lr_factor · noam_lr(step, d_model, warmup)`` (steps from 1); the losses back."""
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    if mistake != "eval mode":
        model.train()
    losses = []
    for step, (src, tgt) in enumerate(batches, start=1):
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # (B, T): BOS w…, w… EOS
        if mistake == "no shift":
            tgt_in = tgt_out = tgt
        elif mistake == "inputs as targets":
            tgt_out = tgt_in
        logits = model(src, tgt_in)  # (B, T, V)
        loss = F.cross_entropy(
            logits.flatten(0, 1), tgt_out.flatten(),
            ignore_index=-100 if mistake == "pads counted" else Vocab.PAD,
            label_smoothing=0.0 if mistake == "no smoothing" else smoothing,
            reduction="sum" if mistake == "summed" else "mean",
        )  # fmt: skip
        if mistake != "no zero_grad":
            opt.zero_grad()
        loss.backward()
        if mistake != "no clipping":
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        at = {"lr ahead": step + 1, "lr late": step - 1}.get(mistake, step)
        factor = 1.0 if mistake == "no factor" else lr_factor
        lr = factor * noam_lr(at, d_model, warmup) if at >= 1 else 1.0
        if mistake != "lr never set":
            for group in opt.param_groups:
                group["lr"] = lr
        opt.step()
        losses.append(loss.item())
    return losses


def _loop_batches(n: int, B: int, S: int, T: int, V_src: int, V_tgt: int,
                  seed: int) -> list[tuple[Tensor, Tensor]]:  # fmt: skip
    """``n`` batches of ``(src, tgt)``: source ids with padding at the end of some
    rows, targets BOS w₁ … w_k EOS then PAD, of different lengths (k <= T - 1)."""
    gen = generator(seed)
    out = []
    for _ in range(n):
        src = torch.randint(3, V_src, (B, S), generator=gen)
        tgt = torch.randint(3, V_tgt, (B, T + 1), generator=gen)
        tgt[:, 0] = Vocab.BOS
        for b in range(B):
            end = T - b % 3  # EOS at T, T - 1 or T - 2: then padding
            tgt[b, end], tgt[b, end + 1 :] = Vocab.EOS, Vocab.PAD
            src[b, S - b % 2 :] = Vocab.PAD
        out.append((src, tgt))
    return out


# chapter=9: graded after 9.2, whose reference, noam_lr, may serve the loop (and
# count against 9.2)
@exercise("A.5", "train_loop", points=3, chapter=9)
def check_train_loop(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(model, batches, d_model, warmup, lr_factor=1.0, smoothing=0.1,
    clip=1.0)``, which trains ``model`` one step per ``(src, tgt)`` batch (``tgt`` is
    BOS w₁ … w_n EOS, padded with 0) and returns the loss of each step, before its
    update: teacher forcing (the decoder reads ``tgt[:, :-1]`` and is scored against
    ``tgt[:, 1:]``), the label-smoothed cross-entropy averaged over the real tokens,
    gradients clipped to norm ``clip``, and the paper's Adam (given) at the rate
    ``lr_factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5)``, steps counted
    from 1. The losses are compared, step by step, with the reference loop's from
    the same start.
    """
    table = [  # label, steps, B, S, T, D, H, warmup, lr_factor, smoothing, clip share, p, seed
        ("one step: teacher forcing and the label-smoothed loss", 1, 3, 5, 5, 16, 2,
         4, 1.0, 0.1, 0.5, 0.0, 120),
        ("six steps over three batches: warm-up then decay (warmup=3), clipping", 6, 3,
         5, 5, 16, 2, 3, 1.0, 0.1, 0.5, 0.0, 121),
        ("five steps, no smoothing, lr_factor=2, warmup=8", 5, 4, 4, 6, 8, 2, 8, 2.0,
         0.0, 0.25, 0.0, 122),
        ("the model arrives in eval mode, dropout p = 1: train() switches it on", 4, 3,
         5, 4, 16, 2, 2, 1.0, 0.1, 1.0, 1.0, 123),
    ]  # fmt: skip
    cases = [
        Case(label, partial(_run_loop, fn, *row))
        for label, *row in drawn(table, _other_loop, seed=124)
    ]
    return run_cases("check_train_loop", cases, quiet, LOOP_REFERENCES)


def _other_loop(rng: random.Random, row: tuple) -> tuple:
    label, steps, B, S, T, D, H, warmup, factor, eps, share, p, seed = row
    H = rng.choice((1, 2, 4))
    D = H * rng.choice((4, 8))
    eps = round(rng.uniform(0.05, 0.3), 2) if eps else 0.0
    warmup = rng.randint(2, 8) if steps > 1 else warmup
    return (label, steps, rng.randint(2, 4), rng.randint(3, 6), rng.randint(3, 6), D,
            H, warmup, rng.choice((0.5, 1.0, 2.0)), eps, share, p,
            rng.randrange(10_000))  # fmt: skip


def _run_loop(fn: Callable, steps: int, B: int, S: int, T: int, D: int, H: int,
              warmup: int, factor: float, eps: float, share: float, p: float,
              seed: int) -> None:  # fmt: skip
    V_src, V_tgt = 11 + seed % 5, 13 + seed % 3
    manual_seed(seed)
    model = make_model(V_src, V_tgt, 1, d_model=D, n_heads=H, d_ff=2 * D,
                       dropout=0.0, tie_generator=True, fast=False, max_len=32)  # fmt: skip
    for m in model.modules():  # the config keeps p < 1; p = 1 drops all, no noise
        if isinstance(m, nn.Dropout):
            m.p = p
    model.eval()  # as a model arrives after decoding: the loop must call train()
    data = _loop_batches(min(steps, 3), B, S, T, V_src, V_tgt, seed + 40)
    data = [data[i % len(data)] for i in range(steps)]
    clip = share * _first_gradient_norm(copy.deepcopy(model), data[0], eps)
    start = copy.deepcopy(model)
    expected = torch.tensor(reference_loop(copy.deepcopy(start), data, D, warmup,
                                           factor, eps, clip))  # fmt: skip
    args = ([(s.clone(), t.clone()) for s, t in data], D, warmup, factor, eps, clip)
    got = _losses(call(fn, model, *args, on_error=_loop_error_hint), steps)
    variants = [
        (hint, partial(_variant, start, data, D, warmup, factor, eps, clip, mistake))
        for hint, mistake in _LOOP_MISTAKES
    ]
    if p > 0:
        variants = [(EVAL_MODE, partial(_variant, start, data, D, warmup, factor, eps,
                                        clip, "eval mode"))]  # fmt: skip
    expect("losses", got, expected, atol=1e-3, rtol=1e-3,
           diagnose=lambda g: match(g, variants, atol=1e-3))  # fmt: skip


def _variant(start: nn.Module, data: list, *args: Any) -> Tensor:
    *settings, mistake = args
    with torch.enable_grad():  # harness.match recomputes mistakes under no_grad
        losses = reference_loop(copy.deepcopy(start), data, *settings, mistake)
    return torch.tensor(losses)


def _first_gradient_norm(model: nn.Module, batch: tuple, eps: float) -> float:
    """The gradient norm of the first step: ``clip`` is a share of it, so that
    clipping acts (and a loop that does not clip shows)."""
    src, tgt = batch
    model.train()
    logits = model(src, tgt[:, :-1])
    F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(),
                    ignore_index=Vocab.PAD, label_smoothing=eps).backward()  # fmt: skip
    grads = [q.grad.flatten() for q in model.parameters() if q.grad is not None]
    return float(torch.cat(grads).norm())


def _losses(got: Any, steps: int) -> Tensor:
    """The returned losses as a (steps,) tensor, or a failure that says why not."""
    if isinstance(got, (list, tuple)) and got and isinstance(got[0], Tensor):
        try:
            got = [float(x) for x in got]
        except Exception:
            pass
    losses = as_tensor(got, "losses")
    if losses.shape != (steps,):
        raise Failure(
            f"losses has shape {tuple(losses.shape)}, expected ({steps},)",
            hint="return one loss per batch, each a float (loss.item()), in the "
            "order of the steps",
        )
    return losses


def _loop_error_hint(e: Exception) -> str | None:
    if isinstance(e, ZeroDivisionError):
        return (
            "a learning rate at step 0: the paper counts steps from 1 (enumerate("
            "batches, start=1)); a LambdaLR counts from 0: lambda s: lr_at(s + 1, …)"
        )
    if "size" in str(e) and ("match" in str(e) or "Expected input batch" in str(e)):
        return (
            "the logits (B, T, V) and the targets (B, T) must line up: flatten both, "
            "logits.flatten(0, 1) and tgt_out.flatten(), for F.cross_entropy"
        )
    return None


@register(
    name="gradients never zeroed",
    checker=check_train_loop,
    keyword="zero_grad",
    chapter=9,
    origin=COMMON,
    description="the training loop never zeroes the gradients, so backward() adds "
    "each step's gradient to all the earlier ones",
)
def train_loop_no_zero_grad(model, batches, d_model, warmup, lr_factor=1.0,
                            smoothing=0.1, clip=1.0):  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    losses = []
    for step, (src, tgt) in enumerate(batches, start=1):
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(),
                               ignore_index=0, label_smoothing=smoothing)  # fmt: skip
        loss.backward()  # BUG: opt.zero_grad() first, or the gradients add up
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        for group in opt.param_groups:
            group["lr"] = lr_factor * noam_lr(step, d_model, warmup)
        opt.step()
        losses.append(loss.item())
    return losses
