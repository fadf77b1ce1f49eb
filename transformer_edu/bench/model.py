"""Side-by-side benchmarks: our model against torch.nn.Transformer, and the KV cache.

Both sides of each comparison run in one process, with the same thread count, the
same inputs and alternating repetitions, so the ratio is fair on a noisy machine.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..decoding import greedy_decode
from ..devices import cpu_name as cpu_name  # chapter 4 imports it from here
from ..model.config import TransformerConfig
from ..model.embeddings import sinusoidal_table
from ..model.transformer import Transformer, make_model


class TorchTransformerModel(nn.Module):
    """nn.Transformer with the same embeddings, positional encoding and generator.

    One vocabulary on both sides; ``n_decoder_layers`` (default ``n_layers``),
    ``norm_first``, ``share_embeddings`` and ``tie_generator`` as in TransformerConfig.
    ``from_config`` builds the counterpart of one of our models.
    """

    def __init__(self, vocab: int, d_model: int, n_heads: int, n_layers: int, d_ff: int,
                 dropout: float, max_len: int = 512, pad_idx: int = 0, *,
                 n_decoder_layers: int | None = None, norm_first: bool = False,
                 share_embeddings: bool = False, tie_generator: bool = False):  # fmt: skip
        super().__init__()
        self.d_model, self.pad_idx = d_model, pad_idx
        self.src_embed = nn.Embedding(vocab, d_model, padding_idx=pad_idx)
        self.tgt_embed = (
            self.src_embed
            if share_embeddings
            else nn.Embedding(vocab, d_model, padding_idx=pad_idx)
        )
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        n_dec = n_layers if n_decoder_layers is None else n_decoder_layers
        with warnings.catch_warnings():  # pre-LN turns off the (inference) nested path
            warnings.filterwarnings("ignore", "enable_nested_tensor is True")
            self.transformer = nn.Transformer(
                d_model, n_heads, n_layers, n_dec, d_ff, dropout, batch_first=True,
                norm_first=norm_first,
            )  # fmt: skip
        self.generator = nn.Linear(d_model, vocab)
        if tie_generator:  # paper §3.4, as our tie_generator
            self.generator.weight = self.tgt_embed.weight

    @classmethod
    def from_config(cls, c: TransformerConfig) -> TorchTransformerModel:
        """The nn.Transformer counterpart of ``Transformer(c)``: same sizes, same
        parameter count (nn.Transformer always has the stacks' final LayerNorms)."""
        unsupported = {
            "src_vocab_size != tgt_vocab_size": c.src_vocab_size != c.tgt_vocab_size,
            f"positional={c.positional!r}": c.positional != "sinusoidal",
            "no final LayerNorm": not c.use_final_norm,
        }
        bad = [k for k, v in unsupported.items() if v]
        if bad:
            raise ValueError(f"nn.Transformer has no counterpart for {', '.join(bad)}")
        return cls(c.src_vocab_size, c.d_model, c.n_heads, c.n_encoder_layers, c.d_ff,
                   c.dropout, c.max_len, c.pad_idx, n_decoder_layers=c.n_decoder_layers,
                   norm_first=c.norm_first, share_embeddings=c.share_embeddings,
                   tie_generator=c.tie_generator)  # fmt: skip

    def _embed(self, emb: nn.Embedding, ids: Tensor) -> Tensor:
        return self.dropout(emb(ids) * math.sqrt(self.d_model) + self.pe[: ids.size(1)])

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        T = tgt.size(1)
        # True = blocked: the future positions above the diagonal
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).triu(1)
        src_pad, tgt_pad = src == self.pad_idx, tgt == self.pad_idx  # True = pad
        out = self.transformer(
            self._embed(self.src_embed, src), self._embed(self.tgt_embed, tgt),
            tgt_mask=causal, src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )  # fmt: skip
        return self.generator(out)


@dataclass
class BenchConfig:
    """Sizes of the benchmark (defaults: the paper's base model, as the issue asks)."""

    vocab: int = 1000  # source and target vocabulary size
    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6  # per stack
    d_ff: int = 2048
    dropout: float = 0.1
    batch: int = 32
    length: int = 32  # source and target length
    reps: int = 5  # timed repetitions per side (after one warm-up)
    decode_tokens: int = 64  # greedy steps in the KV-cache benchmark
    seed: int = 0


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _batch(cfg: BenchConfig) -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(cfg.seed)
    B, L = cfg.batch, cfg.length
    src = torch.randint(4, cfg.vocab, (B, L), generator=g)
    tgt = torch.randint(4, cfg.vocab, (B, L + 1), generator=g)
    lengths = torch.randint(L // 2, L + 1, (B,), generator=g)
    src = src.masked_fill(torch.arange(L)[None] >= lengths[:, None], 0)  # some padding
    return src, tgt[:, :-1], tgt[:, 1:]


def train_step_times(cfg: BenchConfig) -> tuple[list[float], list[float]]:
    """Seconds per training step (forward + backward + Adam) for ours and torch's."""
    torch.manual_seed(cfg.seed)
    ours = make_model(
        cfg.vocab,
        cfg.vocab,
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_ff=cfg.d_ff,
        dropout=cfg.dropout,
        final_norm=True,
    )  # fmt: skip  (nn.Transformer has final norms)
    theirs = TorchTransformerModel(cfg.vocab, cfg.d_model, cfg.n_heads, cfg.n_layers,
                                   cfg.d_ff, cfg.dropout)  # fmt: skip
    src, tgt_in, tgt_out = _batch(cfg)
    steps = {}
    for name, model in (("ours", ours), ("torch", theirs)):
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)

        def step(model=model, opt=opt) -> None:
            logits = model(src, tgt_in)
            loss = F.cross_entropy(
                logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0
            )
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        step()  # warm-up: allocations, Adam state
        steps[name] = step
    times: dict[str, list[float]] = {"ours": [], "torch": []}
    for r in range(cfg.reps):  # alternate the order so drift hits both sides alike
        order = ("ours", "torch") if r % 2 == 0 else ("torch", "ours")
        for name in order:
            times[name].append(_seconds(steps[name]))
    return times["ours"], times["torch"]


def decode_times(
    cfg: BenchConfig, model: Transformer | None = None
) -> tuple[list[float], list[float]]:
    """Seconds to greedily decode ``decode_tokens`` tokens with and without the cache."""
    torch.manual_seed(cfg.seed)
    model = model or make_model(cfg.vocab, cfg.vocab, n_layers=cfg.n_layers,
                                d_model=cfg.d_model, n_heads=cfg.n_heads, d_ff=cfg.d_ff,
                                max_len=max(512, cfg.decode_tokens + 1))  # fmt: skip
    model.eval()
    src = _batch(cfg)[0][:1]
    kw = dict(max_len=cfg.decode_tokens, stop_at_eos=False)
    cached = greedy_decode(model, src, use_cache=True, **kw).tokens
    plain = greedy_decode(model, src, use_cache=False, **kw).tokens
    if cached != plain:
        raise RuntimeError(
            "KV-cache decoding gave a different output than plain decoding"
        )
    with_cache, without = [], []
    for _ in range(max(1, cfg.reps // 2 + 1)):
        with_cache.append(
            _seconds(lambda: greedy_decode(model, src, use_cache=True, **kw))
        )
        without.append(
            _seconds(lambda: greedy_decode(model, src, use_cache=False, **kw))
        )
    return with_cache, without


def run(cfg: BenchConfig, print_fn: Callable[[str], None] = print) -> dict[str, float]:
    """Run both benchmarks, print a report; the last line is the train-step ratio."""
    threads = torch.get_num_threads()
    print_fn(
        f"torch {torch.__version__}, {threads} threads; model d_model={cfg.d_model}, "
        f"heads={cfg.n_heads}, layers={cfg.n_layers}+{cfg.n_layers}, d_ff={cfg.d_ff}, "
        f"vocab={cfg.vocab}; batch {cfg.batch} x length {cfg.length}; {cfg.reps} reps"
    )
    dec_cache, dec_plain = decode_times(cfg)
    c, p = statistics.median(dec_cache), statistics.median(dec_plain)
    print_fn(
        f"greedy decoding of {cfg.decode_tokens} tokens: with KV cache {c * 1e3:.0f} ms, "
        f"without {p * 1e3:.0f} ms, speed-up {p / c:.2f}x (same tokens: yes)"
    )
    ours, theirs = train_step_times(cfg)
    o, t = statistics.median(ours), statistics.median(theirs)
    print_fn(
        f"train step (forward+backward+Adam): ours {o * 1e3:.0f} ms, "
        f"nn.Transformer {t * 1e3:.0f} ms (median of {cfg.reps})"
    )
    print_fn(f"train-step ratio ours/torch: {o / t:.3f}")
    return {"train_ours_s": o, "train_torch_s": t, "train_ratio": o / t,
            "decode_cache_s": c, "decode_plain_s": p, "kv_speedup": p / c}  # fmt: skip


# --- the toy model's training time ------------------------------------------------

# The default toy recipe before the 15-second target (two layers each side, dropout
# also on attention weights and the feed-forward's ReLU, 30 epochs): overrides of
# today's TOY_MODEL / TOY_TRAINING that give it back.
PREVIOUS_TOY = dict(
    n_layers=2, d_ff=256, attention_dropout=None, activation_dropout=None, epochs=30
)


def toy_training(
    seeds: tuple[int, ...] = (0, 1, 2),
    epochs: int | None = None,
    print_fn: Callable[[str], None] = print,
) -> dict[str, float]:
    """Train the default toy model and the previous recipe, alternating, per seed.

    Reports each run's seconds (evaluations included, as ``train`` counts them) and
    greedy exact match on the training and held-out pairs; the last line is the ratio
    of the median times, today's / previous. ``epochs`` shortens both (a smoke run).
    """
    from ..toy.training import train_toy_model

    short = {} if epochs is None else {"epochs": epochs}
    sides = {"default": short, "previous": {**PREVIOUS_TOY, **short}}
    print_fn(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU; "
             f"seeds {list(seeds)}; previous recipe: {PREVIOUS_TOY}")  # fmt: skip
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    for seed in seeds:
        for name, overrides in sides.items():
            _, _, _, h = train_toy_model(
                progress=False, device="cpu", seed=seed, **overrides
            )
            seconds[name].append(h.seconds)
            print_fn(
                f"{name:8s} seed {seed}: {h.seconds:5.1f} s, exact match training "
                f"{h.train_exact[-1]:.1%}, held-out {h.eval_exact[-1]:.1%}"
            )
    new, old = (statistics.median(seconds[name]) for name in sides)
    print_fn(f"toy training time, median: default {new:.1f} s, previous {old:.1f} s")
    print_fn(f"toy training time ratio default/previous: {new / old:.3f}")
    return {"default_s": new, "previous_s": old, "ratio": new / old}
