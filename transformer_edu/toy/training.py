"""Training the toy translator: batches, teacher forcing, label smoothing, warm-up."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from ..decoding import greedy_decode
from ..devices import pick_device as pick_device  # chapter 12 imports it from here
from ..model.transformer import Transformer, make_model
from ..seeds import seeds
from .data import Pair, Vocab, batches, build_vocabs, load_corpus, make_batch


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's schedule: lr = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5).

    It rises linearly for ``warmup`` steps, then decays as 1/sqrt(step).
    """
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def cooldown_factor(
    step: float, total: float, fraction: float, floor: float = 0.05
) -> float:
    """1 until the last ``fraction`` of ``total`` steps, then down linearly to ``floor``.

    Not in the paper: a short cool-down lets a small model settle on its training set.
    (The Tatoeba run passes its progress through the time budget: ``step`` of 1.0.)
    """
    if fraction <= 0:
        return 1.0
    start = total * (1.0 - fraction)
    if step <= start:
        return 1.0
    return max(floor, 1.0 - (1.0 - floor) * (step - start) / (total - start))


def smoothed_targets(target: Tensor, vocab_size: int, smoothing: float) -> Tensor:
    """The distribution label smoothing trains towards: (1 - ε) one-hot + ε / V.

    This is what ``F.cross_entropy(..., label_smoothing=ε)`` uses. Shape: (N,) -> (N, V).
    """
    one_hot = F.one_hot(target, vocab_size).float()
    return (1.0 - smoothing) * one_hot + smoothing / vocab_size


def sequence_loss(logits: Tensor, tgt_out: Tensor, smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy over the real (non-PAD) target tokens.

    Shape: logits (B, T, V), tgt_out (B, T) -> scalar.
    """
    return F.cross_entropy(
        logits.flatten(0, 1), tgt_out.flatten(), ignore_index=Vocab.PAD,
        label_smoothing=smoothing,
    )  # fmt: skip


def paper_adam(params, fused: bool = True) -> torch.optim.Adam:
    """Adam as in the paper (β₁ 0.9, β₂ 0.98, ε 1e-9), lr 1 for a schedule to scale.

    ``fused`` uses PyTorch's fused kernel (every parameter updated in one kernel, not
    a few small ones per tensor) where this torch has one for the parameters' device;
    the same update up to float rounding. Otherwise the default implementation.
    """
    params = list(params)
    kw = dict(lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    if fused:
        try:
            return torch.optim.Adam(params, fused=True, **kw)
        except (RuntimeError, TypeError, ValueError):  # no fused kernel for the device
            pass
    return torch.optim.Adam(params, **kw)


@dataclass
class TrainConfig:
    """How to train (the model's own sizes live in TransformerConfig)."""

    epochs: int = 26  # passes over the training pairs
    batch_size: int = 64  # sentence pairs per step
    lr_factor: float = 0.3  # multiplies the paper's warm-up schedule
    warmup: int = 100  # steps of linear learning-rate warm-up
    cooldown: float = 0.3  # last fraction of steps where lr falls linearly to 5%
    clip_grad_norm: float | None = 1.0  # rescale larger gradients to this norm
    label_smoothing: float = 0.1  # ε of label smoothing
    seed: int = 0  # seeds the initial weights, dropout and the batch order
    eval_every: int = 0  # epochs between exact-match evaluations (0: only at the end)
    device: str | None = None  # None: CUDA, else MPS, else the CPU (pick_device)


@dataclass
class History:
    """What happened during training, for the book's plots."""

    step_loss: list[float] = field(default_factory=list)  # per optimizer step
    step_lr: list[float] = field(default_factory=list)
    epoch_loss: list[float] = field(default_factory=list)  # mean over the epoch
    epoch_token_acc: list[float] = field(default_factory=list)  # teacher-forced
    eval_epoch: list[int] = field(default_factory=list)  # epochs with an evaluation
    train_exact: list[float] = field(default_factory=list)  # greedy exact match
    eval_exact: list[float] = field(default_factory=list)  # on the held-out pairs
    seconds: float = 0.0  # wall-clock training time, evaluations included
    device: str = "cpu"
    seed: int = 0  # TrainConfig.seed: the initial weights, dropout and batch order

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def predict(
    model: Transformer, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab,
    batch_size: int = 256, max_len: int | None = None,
) -> list[list[str]]:  # fmt: skip
    """Greedy translations (English tokens) of the pairs' source sentences."""
    device = next(model.parameters()).device
    out: list[list[str]] = []
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i : i + batch_size]
        src = make_batch(chunk, src_vocab, tgt_vocab).src.to(device)
        limit = max_len or max(len(p.tgt) for p in chunk) + 5
        decoded = greedy_decode(model, src, max_len=limit)
        out += [tgt_vocab.decode(ids) for ids in decoded.tokens]
    return out


def exact_match(
    model: Transformer, pairs: Sequence[Pair], src_vocab: Vocab, tgt_vocab: Vocab
) -> float:
    """Fraction of pairs whose greedy translation equals the reference exactly."""
    if not pairs:
        return float("nan")
    guesses = predict(model, pairs, src_vocab, tgt_vocab)
    return sum(g == list(p.tgt) for g, p in zip(guesses, pairs, strict=True)) / len(
        pairs
    )


def train(
    model: Transformer,
    train_pairs: Sequence[Pair],
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    config: TrainConfig | None = None,
    eval_pairs: Sequence[Pair] | None = None,
    progress: bool = True,
    forward: Callable[[Transformer, Tensor, Tensor], Tensor] | None = None,
) -> History:
    """Train with teacher forcing, label smoothing and the warm-up schedule.

    ``forward(model, src, tgt_in) -> logits`` replaces ``model(src, tgt_in)`` (for
    experiments such as training without the look-ahead mask).
    """
    cfg = config or TrainConfig()
    device = pick_device(cfg.device)
    model.to(device)
    forward = forward or (lambda m, src, tgt_in: m(src, tgt_in))
    torch.manual_seed(cfg.seed)
    opt = paper_adam(model.parameters())
    d_model = model.config.d_model
    steps_per_epoch = -(-len(train_pairs) // cfg.batch_size)
    total = cfg.epochs * steps_per_epoch

    def rate(s: int) -> float:  # LambdaLR counts steps from 0, the paper from 1
        paper = noam_lr(s + 1, d_model, cfg.warmup, cfg.lr_factor)
        return paper * cooldown_factor(s + 1, total, cfg.cooldown)

    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)  # lr = 1 · rate(step)
    hist = History(device=str(device), seed=cfg.seed)
    start = time.perf_counter()
    bar = tqdm(total=total, disable=not progress, desc="train")
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        loss_sum = correct = count = 0.0
        for b in batches(train_pairs, src_vocab, tgt_vocab, cfg.batch_size,
                         seed=cfg.seed * 100_003 + epoch, sort_by_length=True):  # fmt: skip
            b = b.to(device)  # batches are built on the CPU
            logits = forward(model, b.src, b.tgt_in)  # (B, T, V): teacher forcing
            loss = sequence_loss(logits, b.tgt_out, cfg.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip_grad_norm:  # not in the paper: a safety net for large steps
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_grad_norm)
            lr = opt.param_groups[0]["lr"]  # the rate this step uses
            opt.step()
            sched.step()  # the next step's rate
            n = b.ntokens  # the loss is a mean over these: weigh it by them
            loss_sum += loss.item() * n
            real = b.tgt_out != Vocab.PAD  # accuracy over the same real tokens
            correct += int(((logits.argmax(-1) == b.tgt_out) & real).sum())
            count += n
            hist.step_loss.append(loss.item())
            hist.step_lr.append(lr)
            bar.update(1)
            bar.set_postfix(epoch=epoch, loss=f"{loss.item():.3f}")
        hist.epoch_loss.append(loss_sum / count)
        hist.epoch_token_acc.append(correct / count)
        if epoch == cfg.epochs or (cfg.eval_every and epoch % cfg.eval_every == 0):
            model.eval()
            hist.eval_epoch.append(epoch)
            hist.train_exact.append(
                exact_match(model, train_pairs, src_vocab, tgt_vocab)
            )
            if eval_pairs:
                hist.eval_exact.append(
                    exact_match(model, eval_pairs, src_vocab, tgt_vocab)
                )
    bar.close()
    model.eval()
    hist.seconds = time.perf_counter() - start
    return hist


# The default toy model and its training: 100 % exact match on the training pairs and
# at least 99 % on the held-out ones in about 15 s on 2 CPU cores (docs/RESULTS.md,
# "The toy model, the benchmarks, decoding").
# Chosen for that budget (the compute per step, not the steps, was the cost): one
# encoder and one decoder layer with a wider feed-forward network; dropout only where
# the paper puts it (sub-layer outputs, embeddings + PE: dropout's random numbers are a
# large share of a small model's step on the CPU); 26 epochs.
TOY_MODEL = dict(
    n_layers=1, d_model=128, n_heads=4, d_ff=512, dropout=0.1, attention_dropout=0.0,
    activation_dropout=0.0, max_len=64, tie_generator=True,
)  # fmt: skip
TOY_TRAINING = TrainConfig()


def train_toy_model(
    progress: bool = True,
    device: str | None = None,
    seed: int | None = None,
    **overrides,
) -> tuple[Transformer, Vocab, Vocab, History]:
    """Build the vocabularies and the default toy model, and train it on the corpus.

    ``seed`` (initial weights, dropout, batch order) defaults to 0 shifted by
    ``TEDU_SEED`` (transformer_edu.seeds), so that every chapter that trains or loads
    the toy model can be run again under another seed. Keyword arguments override
    TOY_MODEL fields or TrainConfig fields by name.
    """
    if seed is None:
        seed = seeds(1)[0]
    train_pairs, test_pairs = load_corpus("train"), load_corpus("test")
    src_vocab, tgt_vocab = build_vocabs(train_pairs)
    train_fields = set(TrainConfig.__dataclass_fields__)
    model_kw = {
        **TOY_MODEL,
        **{k: v for k, v in overrides.items() if k not in train_fields},
    }
    train_kw = {k: v for k, v in overrides.items() if k in train_fields}
    torch.manual_seed(seed)
    model = make_model(len(src_vocab), len(tgt_vocab), **model_kw)
    cfg = TrainConfig(
        **{**asdict(TOY_TRAINING), "seed": seed, "device": device, **train_kw}
    )
    hist = train(model, train_pairs, src_vocab, tgt_vocab, cfg, test_pairs, progress)
    return model, src_vocab, tgt_vocab, hist
