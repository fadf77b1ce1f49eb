"""Chapter 10: corpus BLEU by hand, on token lists, checked against sacreBLEU
(``tokenize="none"``, no smoothing)."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from functools import partial

import torch

from .harness import (
    Case,
    CheckResult,
    Forbidden,
    as_tensor,
    call,
    drawn,
    expect,
    match,
    references,
    run_cases,
)
from .registry import exercise
from .zoo import COMMON, register


def _sacrebleu_references() -> Forbidden:
    import sacrebleu
    from sacrebleu.metrics import BLEU

    from ..metrics import bleu

    return references(
        bleu, BLEU, (sacrebleu.corpus_bleu, "sacrebleu.corpus_bleu"),
        (sacrebleu.sentence_bleu, "sacrebleu.sentence_bleu"),
    )  # fmt: skip


# built when the module loads, as the other checkers' tables are: the grader hands
# every table to the runner that watches the learner's calls (grading.judge.tables)
BLEU_REFERENCES = _sacrebleu_references()


def corpus_bleu_reference(hyps: list[list[str]], refs: list[list[str]]) -> float:
    """sacreBLEU's corpus BLEU (0-100) of pre-tokenised sentences, one reference each,
    without smoothing: brevity penalty × the geometric mean of the 1-4-gram precisions."""
    from sacrebleu.metrics import BLEU

    metric = BLEU(tokenize="none", smooth_method="none", force=True)
    return float(
        metric.corpus_score(
            [" ".join(h) for h in hyps], [[" ".join(r) for r in refs]]
        ).score
    )


@exercise("10.6", "corpus_bleu", points=2)
def check_corpus_bleu(fn: Callable, quiet: bool = False) -> CheckResult:
    """Check ``fn(hyps, refs)`` -> corpus BLEU in 0-100 against sacreBLEU
    (``tokenize="none"``, no smoothing), for lists of token lists, one reference per
    hypothesis: counts clipped per sentence and summed over the corpus, then
    BP · exp(mean of log p_1..p_4), BP = min(1, exp(1 - r / c))."""
    w = str.split
    table = [
        ("two sentences, as long as their references",
         [w("the cat sat on the mat"), w("a dog runs in the park today")],
         [w("the cat sat on a mat"), w("the dog runs in the park today")]),
        ("repeated words (clipped counts)",
         [w("the the the cat sat on a mat"), w("I am Taro")],
         [w("the cat sat on the mat"), w("I am Taro")]),
        ("hypotheses shorter than their references (brevity penalty)",
         [w("I like cats"), w("he is a student at the school")],
         [w("I like cats more than dogs"), w("he is a student at that school")]),
        ("one sentence", [w("we went to the park yesterday")],
         [w("we went to the park on sunday")]),
    ]  # fmt: skip
    table = drawn(table, _other_words, seed=100)
    cases = [Case(label, partial(_run_bleu, fn, h, r)) for label, h, r in table]
    return run_cases("check_corpus_bleu", cases, quiet, BLEU_REFERENCES)


_POOL = (
    "a an the this that my your his her our cat dog bird fish tree park river city "
    "school house room book pen car train bus road hill sea sky sun rain snow wind "
    "red blue green big small old new good bad we you he she they I am is are was "
    "sat ran saw went came ate read wrote sang slept on in at to from with by today"
).split()


def _other_words(rng: random.Random, row: tuple) -> tuple:
    """The case with every word renamed (one new word per old one, so repeats stay
    repeats) and a few words more at the end of one sentence and its reference: the
    same kind of corpus, another score."""
    label, hyps, refs = row
    old = sorted({w for s in hyps + refs for w in s})
    to = dict(zip(old, rng.sample(_POOL, len(old)), strict=True))
    hyps, refs = [[to[w] for w in s] for s in hyps], [[to[w] for w in s] for s in refs]
    i, tail = rng.randrange(len(hyps)), rng.choices(_POOL, k=rng.randint(1, 3))
    hyps[i], refs[i] = hyps[i] + tail, refs[i] + tail
    return label, hyps, refs


def _run_bleu(fn: Callable, hyps: list, refs: list) -> None:
    expected = torch.tensor([corpus_bleu_reference(hyps, refs)]).double()
    got = as_tensor(call(fn, [list(h) for h in hyps], [list(r) for r in refs]), "BLEU")
    got = got.reshape(-1).double()
    variants = [
        ("BLEU is on a 0-100 scale: multiply by 100", lambda: expected / 100),
        (BLEU_SENTENCE_MEAN,
         lambda: torch.tensor([sum(corpus_bleu_reference([h], [r])
                                   for h, r in zip(hyps, refs, strict=True))
                               / len(hyps)]).double()),
        ("the brevity penalty is missing: BP = exp(1 - r / c) when the hypotheses "
         "are shorter (c < r)", lambda: torch.tensor([_bleu_no_bp(hyps, refs)])),
    ]  # fmt: skip
    expect(
        "BLEU",
        got,
        expected,
        atol=1e-4,
        rtol=1e-6,
        shape_hint="return one number, the corpus's BLEU",
        diagnose=lambda g: match(g, variants, atol=1e-4),
        generic="sum the clipped n-gram matches and the n-gram counts over the whole "
        "corpus, then BP · exp(mean of log p_n) · 100",
    )


BLEU_SENTENCE_MEAN = (
    "that is the mean of sentence BLEUs; corpus BLEU sums the clipped matches and "
    "counts over the corpus first, then takes one geometric mean"
)


def _bleu_no_bp(hyps: list, refs: list) -> float:
    c = sum(len(h) for h in hyps)
    r = sum(len(x) for x in refs)
    bp = 1.0 if c >= r else math.exp(1 - r / c)
    return corpus_bleu_reference(hyps, refs) / bp


@register(
    name="BLEU averaged over sentences",
    checker=check_corpus_bleu,
    keyword="corpus",
    chapter=10,
    origin=COMMON,
    description="the mean of sentence-level BLEU scores, not one BLEU from the "
    "corpus's summed n-gram counts",
)
def bleu_sentence_mean(hyps, refs):
    """Averages sentence BLEU (each one computed correctly)."""
    scores = []
    for h, r in zip(hyps, refs, strict=True):
        logs = []
        for n in range(1, 5):
            hg = Counter(tuple(h[i : i + n]) for i in range(len(h) - n + 1))
            rg = Counter(tuple(r[i : i + n]) for i in range(len(r) - n + 1))
            hit = sum(min(k, rg[g]) for g, k in hg.items())
            logs.append(math.log(hit / sum(hg.values())) if hit else -math.inf)
        bp = min(1.0, math.exp(1 - len(r) / len(h)))
        scores.append(100 * bp * math.exp(sum(logs) / 4))
    return sum(scores) / len(scores)  # BUG: sum the counts over the corpus first


# --- beam search ------------------------------------------------------------------------
