"""Chapter 10: greedy decoding, checked on a scripted fake model and a real one."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..data import Vocab
from ..decoding import beam_search, greedy_decode
from ..masks import padding_mask
from ..model import make_model
from .harness import Case, CheckResult, Failure, call, references, run_cases
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


def check_greedy_decode(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(model, src, max_len)`` -> list of ids: greedy decoding of one
    sentence src (1, S), without BOS, up to and including EOS (or max_len ids).

    ``model`` has the package's interface: ``memory, src_mask = model.encode(src)``,
    ``model.decode(ys, memory, src_mask)`` -> (1, t, D), ``model.generator(h)`` ->
    logits; BOS = 1, EOS = 2.
    """
    torch.manual_seed(0)
    real = make_model(
        16, 16, n_layers=1, d_model=16, n_heads=2, d_ff=32, dropout=0.0, max_len=32
    ).eval()
    scripted = _ScriptedTranslator()
    table = [  # label, model, src, max_len
        ("4-word source, room to finish", scripted, [5, 9, 7, 11], 10),
        ("max_len reached before EOS", scripted, [5, 9, 7, 11], 2),
        ("1-word source", scripted, [13], 6),
        ("a real (untrained) Transformer", real, [4, 8, 6], 6),
    ]
    cases = [Case(label, partial(_run, fn, *args)) for label, *args in table]
    return run_cases("check_greedy_decode", cases, quiet, GREEDY_REFERENCES)


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
