"""Translation quality with sacreBLEU: corpus BLEU and chrF, each with its signature,
its 95 % bootstrap interval, and the paired test that compares two systems.

A score means little without the settings behind it (tokenizer, smoothing, casing):
sacreBLEU's signature names them, so every score this package prints carries one. It
means little without its uncertainty either: a test set is a sample of sentences, and
another sample would score differently. sacreBLEU estimates how much by **bootstrap
resampling** (Koehn 2004): it draws ``n_bootstrap`` test sets of the same size from
the sentences, with replacement, scores each, and reports the mean ± half the width
of the interval holding the middle 95 % of those scores. The resampling is seeded
(``SACREBLEU_SEED``, 12345 unless set), so the interval is reproducible; the signature
says ``bs:1000|seed:12345``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

N_BOOTSTRAP = 1000  # sacreBLEU's default number of resamples


class Score(NamedTuple):
    name: str  # "BLEU" or "chrF2"
    score: float  # 0-100
    signature: str  # e.g. nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0
    mean: float | None = None  # the mean of the bootstrap resamples' scores
    ci: float | None = None  # half the width of their 95 % interval

    @property
    def low(self) -> float | None:
        return None if self.ci is None else self.mean - self.ci

    @property
    def high(self) -> float | None:
        return None if self.ci is None else self.mean + self.ci

    def __str__(self) -> str:
        interval = (
            ""
            if self.ci is None
            else f", 95 % interval {self.low:.1f}–{self.high:.1f}"
            f" (bootstrap: μ = {self.mean:.1f} ± {self.ci:.1f})"
        )
        return f"{self.name} = {self.score:.1f}{interval}  ({self.signature})"


def _check(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
    if not hyps:
        raise ValueError("no sentences to score")


def _score(metric, hyps: Sequence[str], refs: Sequence[str], n_bootstrap: int) -> Score:
    _check(hyps, refs)
    if n_bootstrap < 1:
        raise ValueError(f"n_bootstrap={n_bootstrap} must be at least 1")
    result = metric.corpus_score(list(hyps), [list(refs)], n_bootstrap=n_bootstrap)
    if n_bootstrap == 1:
        return Score(result.name, float(result.score), str(metric.get_signature()))
    return Score(result.name, float(result.score), str(metric.get_signature()),
                 float(result._mean), float(result._ci))  # fmt: skip


def bleu(hyps: Sequence[str], refs: Sequence[str], n_bootstrap: int = 1) -> Score:
    """Corpus BLEU (sacreBLEU defaults: 13a tokenizer, exp smoothing, mixed case);
    with ``n_bootstrap`` > 1 its 95 % interval too (``N_BOOTSTRAP`` is the default
    sacreBLEU's command line uses)."""
    from sacrebleu.metrics import BLEU

    return _score(BLEU(), hyps, refs, n_bootstrap)


def chrf(hyps: Sequence[str], refs: Sequence[str], n_bootstrap: int = 1) -> Score:
    """Corpus chrF (character 6-grams, beta = 2), sacreBLEU defaults; with
    ``n_bootstrap`` > 1 its 95 % interval too."""
    from sacrebleu.metrics import CHRF

    return _score(CHRF(), hyps, refs, n_bootstrap)


def length_ratio(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Words of the outputs / words of the references, as BLEU counts them (13a), the
    ratio behind BLEU's brevity penalty."""
    from sacrebleu.metrics import BLEU

    _check(hyps, refs)
    result = BLEU().corpus_score(list(hyps), [list(refs)])
    return result.sys_len / result.ref_len


class Paired(NamedTuple):
    """Two systems on the same sentences, by sacreBLEU's paired bootstrap test."""

    name: str  # "BLEU" or "chrF2"
    baseline: Score  # each with its bootstrap interval
    system: Score
    p_value: float  # how often resampling makes a difference at least this large
    signature: str  # includes bs:N|seed:S

    @property
    def difference(self) -> float:
        return self.system.score - self.baseline.score


def paired_bootstrap(
    baseline: Sequence[str],
    system: Sequence[str],
    refs: Sequence[str],
    n_bootstrap: int = N_BOOTSTRAP,
) -> dict[str, Paired]:
    """sacreBLEU's paired bootstrap test of ``system`` against ``baseline`` (outputs
    for the same sentences, in the same order), for BLEU and chrF.

    It resamples the test set ``n_bootstrap`` times, scores both systems on each
    resample, and asks how often the difference between them strays from its mean by
    at least the difference actually observed: the p-value. A small p-value means a
    difference this large would rarely arise from the luck of which sentences were
    drawn, were the two systems equally good. With 1,000 resamples it is at least
    1/1001. Identical outputs are refused: sacreBLEU counts only deviations *larger*
    than the observed one, so a difference of exactly zero would get that smallest
    p-value.
    """
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    _check(baseline, refs)
    _check(system, refs)
    if list(baseline) == list(system):
        raise ValueError("the two systems' outputs are identical: nothing to test")
    if n_bootstrap < 2:
        raise ValueError(f"n_bootstrap={n_bootstrap} must be at least 2")
    test = PairedTest(
        [("baseline", list(baseline)), ("system", list(system))],
        {"BLEU": BLEU(), "chrF2": CHRF()}, [list(refs)], test_type="bs",
        n_samples=n_bootstrap,
    )  # fmt: skip
    signatures, results = test()
    out = {}
    for name in ("BLEU", "chrF2"):
        sig = str(signatures[name])
        base, sys_ = results[name]
        out[name] = Paired(
            name,
            Score(name, float(base.score), sig, float(base.mean), float(base.ci)),
            Score(name, float(sys_.score), sig, float(sys_.mean), float(sys_.ci)),
            float(sys_.p_value), sig,
        )  # fmt: skip
    return out
