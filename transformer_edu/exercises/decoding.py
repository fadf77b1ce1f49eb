"""Chapter 10: greedy decoding and beam search (checked on scripted fake models and a
real one), the length penalty and one beam step with a reordered KV cache (top-p:
exercises.sampling; corpus BLEU: exercises.bleu)."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..decoding import (
    _next_log_probs,
    beam_search,
    beam_search_batch,
    greedy_decode,
    length_penalty,
    reorder_cache,
)
from ..model.masks import padding_mask
from ..model.transformer import make_model
from ..toy.data import Vocab
from .harness import (
    Case,
    CheckResult,
    Failure,
    as_tensor,
    call,
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

BOS, EOS, PAD = Vocab.BOS, Vocab.EOS, Vocab.PAD
GREEDY_REFERENCES = references(greedy_decode, beam_search)
SAME_TOKEN_EVERY_STEP = (
    "the same token every step: read the prediction at the last position, "
    "logits[:, -1], and feed the growing prefix back in"
)


class _ScriptedTranslator(nn.Module):
    """A fake model with a known greedy answer and the package's decoding interface.

    The next token after position t depends only on the token there, t and the
    source; after as many words as the source has, it is EOS. Vocabulary: 16 ids.
    ``decode`` also takes the package's (cache, offset) arguments, so
    ``decoding.greedy_decode`` runs on it too.
    """

    vocab_size = 16
    recording_attention = False  # greedy_decode restores it; there is nothing to record

    def __init__(self) -> None:
        super().__init__()
        self.generator = nn.Identity()  # decode() already returns logits
        self.encoder = nn.Module()
        self.encoder.layers = nn.ModuleList()  # no attention to record
        self.decoder = nn.Module()
        self.decoder.new_cache = list  # nothing to cache: no past is needed

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        memory = F.one_hot(src, self.vocab_size).float()  # (B, S, V)
        return memory, padding_mask(src)  # (B, S, V), (B, 1, 1, S)

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: list | None = None,
        offset: int = 0,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        B, T = tgt.shape
        src = memory.argmax(-1)  # (B, S)
        n_real = src_mask.reshape(B, -1).sum(-1, keepdim=True)  # (B, 1)
        pos = offset + torch.arange(T)[None, :].expand(B, T)  # (B, T)
        at = src.gather(1, pos.clamp(max=src.size(1) - 1))  # (B, T)
        # a made-up rule, so that a wrong loop gives a different sentence
        nxt = 4 + (3 * tgt + pos + at) % (self.vocab_size - 4)
        nxt = torch.where(pos >= n_real, torch.full_like(nxt, EOS), nxt)
        return F.one_hot(nxt, self.vocab_size).float() * 5.0  # (B, T, V)

    def forward(self, src: Tensor, tgt: Tensor, tgt_mask: Tensor | None = None):
        memory, src_mask = self.encode(src)
        return self.generator(self.decode(tgt, memory, src_mask))


@torch.no_grad()
def _greedy_variant(model: nn.Module, src: Tensor, max_len: int, position: int):
    """Greedy decoding that reads the logits at ``position`` (-1 is right)."""
    # mirrors decoding.greedy_decode (finished rows get PAD, stop when all are done)
    memory, src_mask = model.encode(src)  # (B, S, D), (B, 1, 1, S)
    ys = torch.full((src.size(0), 1), BOS, dtype=torch.long)  # (B, 1)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_len):
        out = model.decode(ys, memory, src_mask)  # (B, t, D)
        best = model.generator(out[:, position]).argmax(dim=-1)  # (B,)
        best = best.masked_fill(done, PAD)
        ys = torch.cat([ys, best[:, None]], dim=1)  # (B, t + 1)
        done |= best == EOS
        if bool(done.all()):
            break
    rows = ys[:, 1:].tolist()  # without BOS, cut after the first EOS
    return [row[: row.index(EOS) + 1] if EOS in row else row for row in rows]


@exercise("10.1", "greedy", points=3)
def check_greedy_decode(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(model, src, max_len)`` -> list of ids: greedy decoding of one
    sentence src (1, S), without BOS, up to and including EOS (or max_len ids).

    ``model`` has the package's interface: ``memory, src_mask = model.encode(src)``,
    ``model.decode(ys, memory, src_mask)`` -> (1, t, D), ``model.generator(h)`` ->
    logits; BOS = 1, EOS = 2.
    """
    real = _untrained_model()
    scripted = _ScriptedTranslator()
    table = drawn([  # label, model, src, max_len
        ("4-word source, room to finish", scripted, [5, 9, 7, 11], 10),
        ("max_len reached before EOS", scripted, [5, 9, 7, 11], 2),
        ("1-word source", scripted, [13], 6),
        ("a real (untrained) Transformer", real, [4, 8, 6], 6),
    ], _other_source, seed=14)  # fmt: skip
    cases = [Case(label, partial(_run, fn, *args)) for label, *args in table]
    return run_cases("check_greedy_decode", cases, quiet, GREEDY_REFERENCES)


def _untrained_model() -> nn.Module:
    """The real Transformer of the decoding cases: small, untrained, with fixed
    weights (or weights drawn for the run, when the cases are drawn)."""
    manual_seed(0)
    model = make_model(
        16, 16, n_layers=1, d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=32
    ).eval()
    with torch.no_grad():  # it never predicts PAD or BOS: a PAD fed back to the
        # decoder is masked when the prefix is decoded whole, not when it is cached
        model.generator.proj.bias[[PAD, BOS]] = -1e4
    return model


def _other_source(rng: random.Random, row: tuple) -> tuple:
    """A case of the same kind with a source of the same length drawn anew."""
    label, model, src, *rest = row
    return (label, model, [rng.randint(4, 15) for _ in src], *rest)


def _run(fn: Callable, model: nn.Module, src: list[int], max_len: int) -> None:
    s = torch.tensor([src])  # (1, S)
    with torch.no_grad():
        expected = greedy_decode(model, s, max_len=max_len).tokens[0]
        got = call(fn, model, s.clone(), max_len)
    if isinstance(got, Tensor):
        got = got.flatten().tolist()
    try:
        got = [int(i) for i in got]
    except TypeError as e:
        raise Failure(
            f"expected a list of token ids, got {type(got).__name__}",
            hint="return a list of ints, e.g. ys[0, 1:].tolist()",
        ) from e
    if got != expected:
        raise Failure(
            "the decoded ids differ",
            str(expected),
            str(got),
            _mistakes(got, expected, model, s, max_len)
            or "loop: logits of the last position → argmax → append → stop at EOS",
        )


def _mistakes(got: list[int], expected: list[int], model, s, max_len) -> str:
    """Every mistake recognised in ``got``, joined: a BOS kept, and how the loop ran."""
    hints = []
    core = got
    if got[:1] == [BOS]:
        hints.append("leave BOS out of the result: it was given, not predicted")
        core = got[1:]
    ends = expected[-1:] == [EOS]
    if core == expected:
        pass  # BOS was the only mistake
    elif ends and len(core) > len(expected) and core[: len(expected)] == expected:
        hints.append("stop as soon as EOS is predicted")
    elif ends and core == expected[:-1]:
        hints.append("include the EOS that ended the sentence")
    else:
        first = _greedy_variant(model, s, max_len, position=0)[0]
        if core == first or (len(set(core)) == 1 and len(set(expected)) > 1):
            hints.append(SAME_TOKEN_EVERY_STEP)
    return "; and ".join(hints)


# --- the bug zoo: decoding ------------------------------------------------------------


@register(
    name="greedy reads position 0",
    checker=check_greedy_decode,
    keyword="last position",
    chapter=10,
    origin=COMMON,
    description="the next token is read from the first position's logits, so it "
    "never changes",
)
def greedy_first_position(model, src, max_len):
    """Reads the prediction at position 0 instead of the newest position."""
    memory, src_mask = model.encode(src)
    ys = torch.tensor([[BOS]])
    for _ in range(max_len):
        logits = model.generator(model.decode(ys, memory, src_mask))  # (1, t, V)
        nxt = int(logits[0, 0].argmax())  # BUG: the newest position is logits[0, -1]
        ys = torch.cat([ys, torch.tensor([[nxt]])], dim=1)
        if nxt == EOS:
            break
    return ys[0, 1:].tolist()


# --- the length penalty ----------------------------------------------------------------

LENGTH_PENALTY_REFERENCES = references(length_penalty)


@exercise("10.2", "lp", points=1)
def check_length_penalty(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(length, alpha)`` -> Wu et al.'s lp(Y) = ((5 + |Y|) / 6) ** α, the
    divisor of a finished hypothesis's summed log-probability (α = 0: 1)."""
    table = drawn(
        [(0.6, [1, 2, 5, 10, 30]), (0.0, [1, 7, 40]), (1.0, [1, 3, 12])],
        _other_lengths,
        seed=18,
    )
    cases = [
        Case(f"α={alpha}, lengths {lengths}", partial(_run_lp, fn, alpha, lengths))
        for alpha, lengths in table
    ]
    return run_cases("check_length_penalty", cases, quiet, LENGTH_PENALTY_REFERENCES)


def _other_lengths(rng: random.Random, row: tuple) -> tuple:
    """Lengths (1 among them) and α drawn anew; α = 0 stays 0 (lp = 1)."""
    alpha, lengths = row
    alpha = round(rng.uniform(0.2, 1.5), 2) if alpha else 0.0
    return alpha, [1, *sorted(rng.sample(range(2, 61), len(lengths) - 1))]


def _run_lp(fn: Callable, alpha: float, lengths: list[int]) -> None:
    expected = torch.tensor([length_penalty(n, alpha) for n in lengths]).double()
    got = torch.tensor(
        [float(as_tensor(call(fn, n, alpha), "lp")) for n in lengths]
    ).double()
    n = torch.tensor(lengths).double()
    expect(
        "lp",
        got,
        expected,
        atol=1e-9,
        rtol=1e-6,
        diagnose=lambda g: match(
            g,
            [
                (LP_NO_OFFSET, lambda: n**alpha),
                (LP_NO_OFFSET, lambda: (n / 6) ** alpha),
                (
                    "the exponent is α, not 1/α: lp = ((5 + |Y|) / 6) ** α",
                    lambda: ((5 + n) / 6) ** (1 / alpha),
                ),
            ],
            atol=1e-9,
        ),
        generic="lp(Y) = ((5 + |Y|) / 6) ** α, with |Y| the output's length",
    )


LP_NO_OFFSET = (
    "that is |Y| ** α (another normalisation); the paper's penalty is "
    "((5 + |Y|) / 6) ** α: the 5 and the 6 keep a short output's penalty near 1"
)


@register(
    name="length penalty without the 5",
    checker=check_length_penalty,
    keyword="(5 + |Y|)",
    chapter=10,
    origin=COMMON,
    description="|Y| ** α instead of ((5 + |Y|) / 6) ** α: the short outputs' "
    "penalty is far from 1",
)
def length_penalty_no_offset(length, alpha):
    """Divides by |Y| ** α: the mean log-probability per token at α = 1."""
    return length**alpha  # BUG: lp(Y) = ((5 + |Y|) / 6) ** α


# --- top-p (nucleus) filtering ----------------------------------------------------------

BEAM_REFERENCES = references(beam_search, beam_search_batch, greedy_decode)


class _MarkovTranslator(_ScriptedTranslator):
    """A fake model whose next-token distribution depends only on the previous token:
    ``table[prev]`` holds (token, probability) pairs; the rest share what is left.

    The default table is a trap for greedy decoding: after BOS, 5 (0.55) beats 6
    (0.45), but every sentence that starts with 5 is far less probable than 6 8 EOS.
    """

    TRAP = {
        BOS: [(5, 0.55), (6, 0.44)],
        5: [(10, 0.2), (11, 0.18), (EOS, 0.17), (12, 0.15), (13, 0.14), (14, 0.13)],
        6: [(8, 0.9), (EOS, 0.05)],
        8: [(EOS, 0.9), (9, 0.08)],
        10: [(EOS, 0.6), (4, 0.35)],
        11: [(EOS, 0.6), (4, 0.35)],
        4: [(EOS, 0.5), (4, 0.45)],
    }

    def __init__(self, table: dict | None = None) -> None:
        super().__init__()
        V = self.vocab_size
        logp = torch.full((V, V), 1e-4).log()
        for prev, row in (table or self.TRAP).items():
            p = torch.full((V,), (1 - sum(q for _, q in row)) / (V - len(row)))
            for tok, q in row:
                p[tok] = q
            logp[prev] = p.log()
        self.register_buffer("logp", logp)  # (V, V): row = previous token

    def decode(self, tgt, memory, src_mask, cache=None, offset=0, tgt_mask=None):
        return self.logp[tgt]  # (B, T, V): log-probabilities, the generator's output

    @classmethod
    def relabelled(cls, seed: int) -> dict:
        """The trap itself, or, when the cases are drawn, the same trap with the word
        ids 4-15 shuffled (BOS and EOS kept): the same decisions, other answers."""
        ids = list(range(4, cls.vocab_size))
        new = drawn([ids], lambda rng, row: rng.sample(row, len(row)), seed)[0]
        to = {BOS: BOS, EOS: EOS, **dict(zip(ids, new, strict=True))}
        return {to[p]: [(to[t], q) for t, q in row] for p, row in cls.TRAP.items()}


@exercise("10.3", "beam", points=3)
def check_beam_search(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(model, src, beam_size, max_len)`` -> the best hypothesis's ids: beam
    search of one sentence src (1, S) ranked by the summed log-probability (no length
    penalty), without BOS, up to and including EOS; prefixes still live after
    ``max_len`` tokens count as finished. Same interface as ``check_greedy_decode``.
    """
    real = _untrained_model()
    trap = _MarkovTranslator(_MarkovTranslator.relabelled(seed=15)).eval()
    table = drawn([  # label, model, src, beam_size, max_len
        ("a model where greedy ≠ beam, K=2", trap, [5, 9, 7], 2, 8),
        ("the same model, K=1 (greedy)", trap, [5, 9, 7], 1, 8),
        ("the same model, K=4", trap, [5, 9, 7], 4, 8),
        ("max_len=2 before any EOS", trap, [5, 9, 7], 2, 2),
        ("a real (untrained) Transformer, K=3", real, [4, 8, 6], 3, 6),
    ], _other_source, seed=16)  # fmt: skip
    cases = [Case(label, partial(_run_beam, fn, *args)) for label, *args in table]
    return run_cases("check_beam_search", cases, quiet, BEAM_REFERENCES)


def _run_beam(fn: Callable, model, src: list[int], K: int, max_len: int) -> None:
    s = torch.tensor([src])  # (1, S)
    with torch.no_grad():
        expected = beam_search(model, s, K, max_len=max_len)[0][0]
        got = _ids(call(fn, model, s.clone(), K, max_len))
    if got != expected:
        greedy = greedy_decode(model, s, max_len=max_len).tokens[0]
        by_last = _beam_by_last_token(model, s, K, max_len)
        hint = "keep the K best prefixes by their summed log-probability at each step"
        if got == by_last and by_last != expected:
            hint = BEAM_BY_LAST_TOKEN
        elif got == greedy and K > 1:
            hint = (
                "that is greedy's output: keep K prefixes alive, extend each by every "
                "token, and keep the K best of the K·V extensions"
            )
        raise Failure("the best hypothesis differs", str(expected), str(got), hint)


def _ids(got) -> list[int]:
    if isinstance(got, Tensor):
        got = got.flatten().tolist()
    try:
        return [int(i) for i in got]
    except TypeError as e:
        raise Failure(
            f"expected a list of token ids, got {type(got).__name__}",
            hint="return the best hypothesis as a list of ints (without BOS)",
        ) from e


BEAM_BY_LAST_TOKEN = (
    "the prefixes are ranked by their last token's log-probability; rank them by the "
    "summed log-probability of the whole prefix"
)


@torch.no_grad()
def _beam_by_last_token(model, src, K, max_len):
    return beam_rank_by_last_token(model, src, K, max_len)


@register(
    name="beam ranks by the last token",
    checker=check_beam_search,
    keyword="summed",
    chapter=10,
    origin=COMMON,
    description="each extension is scored by its own token's log-probability, not "
    "by the prefix's running sum, so the beam forgets how it got there",
)
@torch.no_grad()
def beam_rank_by_last_token(model, src, beam_size, max_len):
    """Beam search (stop when the best candidate ends in EOS) that ranks by the newest
    token's log-probability only."""
    memory, src_mask = model.encode(src)
    beams = [([BOS], 0.0)]
    for _ in range(max_len):
        cands = []
        for ys, _score in beams:
            h = model.decode(torch.tensor([ys]), memory, src_mask)
            logp = model.generator(h[:, -1]).log_softmax(-1)[0]
            top = logp.topk(beam_size)
            for lp, tok in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                cands.append((ys + [tok], lp))  # BUG: should be _score + lp
        cands.sort(key=lambda c: -c[1])
        if cands[0][0][-1] == EOS:
            return cands[0][0][1:]
        beams = [c for c in cands if c[0][-1] != EOS][:beam_size]
    return beams[0][0][1:]


# --- one beam step with a KV cache, reordered ----------------------------------------

CACHE_STEP_REFERENCES = references(
    reorder_cache, beam_search, beam_search_batch, _next_log_probs
)


@exercise("10.4", "cached_step", points=2)
def check_cached_beam_step(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(model, ys, memory, src_mask, cache, parents)`` -> (log-probs (k, V),
    cache): one beam step with the package's KV cache.

    ``cache`` (``model.decoder.new_cache()``, one dict per layer) holds the keys and
    values of the previous step's k prefixes, in that step's row order; ``ys`` (k, t)
    are the surviving prefixes, each its parent's prefix plus a new token, and
    ``parents`` (k,) the previous row of each. Reorder the cache by ``parents``, feed
    only the newest token (``model.decode(ys[:, -1:], memory, src_mask, cache, t - 1)``)
    and return log p(next token | ys) with the cache that now holds t positions.
    """
    table = drawn([  # n_layers, parents, t
        (1, [2, 0, 0], 3), (2, [1, 3, 3, 0], 4), (1, [0, 1], 2),
    ], _other_parents, seed=17)  # fmt: skip
    cases = [
        Case(_cache_label(*args), partial(_run_cache_step, fn, *args)) for args in table
    ]
    return run_cases("check_cached_beam_step", cases, quiet, CACHE_STEP_REFERENCES)


def _other_parents(rng: random.Random, row: tuple) -> tuple:
    """Parents drawn anew: some row reordered (or, as the fixed case, none)."""
    n_layers, parents, t = row
    k = len(parents)
    if parents == sorted(parents) and len(set(parents)) == k:
        return row  # the case without reordering stays one
    while (new := [rng.randrange(k) for _ in range(k)]) == list(range(k)):
        pass
    return n_layers, new, t


def _cache_label(n_layers: int, parents: list[int], t: int) -> str:
    k = len(parents)
    if parents == list(range(k)):
        return f"k={k}, parents {parents} (no reordering needed)"
    return f"k={k}, parents {parents}, {n_layers} layer{'s' * (n_layers > 1)}"


@torch.no_grad()
def _cache_state(n_layers: int, k: int, t: int):
    """A real (untrained) model, a source, k different prefixes of t - 1 tokens and
    the cache after decoding them (one token at a time)."""
    manual_seed(n_layers)
    model = make_model(
        16, 16, n_layers=n_layers, d_model=16, n_heads=2, d_ff=32, dropout=0.0,
        max_len=32,
    ).eval()  # fmt: skip
    src = torch.tensor([[4, 9, 6, 11]])  # (1, S)
    memory, src_mask = model.encode(src)
    memory, src_mask = memory.expand(k, -1, -1), src_mask.expand(k, -1, -1, -1)
    g = generator(7 + k)
    prev = torch.randint(4, 16, (k, t - 1), generator=g)  # (k, t - 1)
    prev[:, 0] = BOS
    cache = model.decoder.new_cache()
    for i in range(t - 1):
        model.decode(prev[:, i : i + 1], memory, src_mask, cache, i)
    return model, memory, src_mask, prev, cache


def _run_cache_step(fn: Callable, n_layers: int, parents: list[int], t: int) -> None:
    k = len(parents)
    model, memory, src_mask, prev, cache = _cache_state(n_layers, k, t)
    order = torch.tensor(parents)
    g = generator(t)
    ys = torch.cat([prev[order], torch.randint(4, 16, (k, 1), generator=g)], 1)
    with torch.no_grad():
        h = model.decode(ys, memory, src_mask)  # (k, t, D): the whole prefixes again
        expected = model.generator(h[:, -1]).log_softmax(-1)  # (k, V)
        stale = _step_without_reordering(model, ys, memory, src_mask, prev)
        out = call(fn, model, ys.clone(), memory, src_mask, cache, order.clone())
    if not isinstance(out, tuple) or len(out) != 2:
        raise Failure(
            f"expected (log_probs, cache), got {type(out).__name__}",
            hint="return the next-token log-probabilities and the updated cache",
        )
    got, new_cache = out
    expect(
        "log_probs",
        got,
        expected,
        atol=1e-4,
        diagnose=lambda g: match(g, [(CACHE_NOT_REORDERED, lambda: stale)]),
        generic="reorder every layer's cached keys and values by parents "
        "(index_select on dim 0), then decode the newest token with the cache",
    )
    lengths = {
        kv[0].size(2)
        for layer in (new_cache if isinstance(new_cache, list) else [])
        if isinstance(layer, dict)
        for name, kv in layer.items()
        if name == "self_kv"
    }
    if lengths != {t}:
        raise Failure(
            f"the returned cache holds {sorted(lengths)} positions, expected {t}",
            hint="feed only the newest token, ys[:, -1:], with the cache and offset "
            "t - 1: the cache grows by one position per step",
        )


@torch.no_grad()
def _step_without_reordering(model, ys, memory, src_mask, prev):
    cache = model.decoder.new_cache()
    for i in range(prev.size(1)):
        model.decode(prev[:, i : i + 1], memory, src_mask, cache, i)
    t = ys.size(1)
    h = model.decode(ys[:, -1:], memory, src_mask, cache, t - 1)
    return model.generator(h[:, -1]).log_softmax(-1)


CACHE_NOT_REORDERED = (
    "cache not reordered after reselection: each survivor attended to the keys and "
    "values of the row it had before, not its parent's; index_select every layer's "
    "cached keys and values by parents first"
)


@register(
    name="cache not reordered after reselection",
    checker=check_cached_beam_step,
    keyword="reordered after reselection",
    chapter=10,
    origin=COMMON,
    description="the survivors of a beam step take their parents' prefixes but keep "
    "the old rows' cached keys and values",
)
@torch.no_grad()
def cache_step_not_reordered(model, ys, memory, src_mask, cache, parents):
    """Decodes the newest token with the cache as it was, in the old row order."""
    # BUG: each layer's cached keys/values should be index_select-ed by parents first
    h = model.decode(ys[:, -1:], memory, src_mask, cache, ys.size(1) - 1)
    return model.generator(h[:, -1]).log_softmax(-1), cache
