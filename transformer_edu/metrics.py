"""Translation quality with sacreBLEU: corpus BLEU and chrF, each with its signature.

A score means little without the settings behind it (tokenizer, smoothing, casing):
sacreBLEU's signature names them, so every score this package prints carries one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple


class Score(NamedTuple):
    name: str  # "BLEU" or "chrF2"
    score: float  # 0-100
    signature: str  # e.g. nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0

    def __str__(self) -> str:
        return f"{self.name} = {self.score:.1f}  ({self.signature})"


def _check(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
    if not hyps:
        raise ValueError("no sentences to score")


def bleu(hyps: Sequence[str], refs: Sequence[str]) -> Score:
    """Corpus BLEU (sacreBLEU defaults: 13a tokenizer, exp smoothing, mixed case)."""
    from sacrebleu.metrics import BLEU

    _check(hyps, refs)
    metric = BLEU()
    result = metric.corpus_score(list(hyps), [list(refs)])
    return Score("BLEU", float(result.score), str(metric.get_signature()))


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> Score:
    """Corpus chrF (character 6-grams, beta = 2), sacreBLEU defaults."""
    from sacrebleu.metrics import CHRF

    _check(hyps, refs)
    metric = CHRF()
    result = metric.corpus_score(list(hyps), [list(refs)])
    return Score("chrF2", float(result.score), str(metric.get_signature()))
