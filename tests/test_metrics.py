"""BLEU and chrF through sacreBLEU, against values worked out by hand."""

import random

import pytest

from transformer_edu.metrics import (
    N_BOOTSTRAP,
    Score,
    bleu,
    chrf,
    length_ratio,
    paired_bootstrap,
)


def test_bleu_of_a_case_computed_by_hand():
    """hyp "the cat sat on the mat", ref "the cat sat on a mat" (13a leaves the words
    as they are). Clipped n-gram precisions: 1-grams 5/6 ("the" twice, once in the
    reference), 2-grams 3/5, 3-grams 2/4, 4-grams 1/3; equal lengths, so BP = 1 and
    BLEU = (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = (1/12) ** (1/4) = 0.537285."""
    score = bleu(["the cat sat on the mat"], ["the cat sat on a mat"])
    assert score.name == "BLEU"
    assert score.score == pytest.approx(53.7285, abs=1e-4)
    assert bleu(["a b c d e"], ["a b c d e"]).score == pytest.approx(100.0)


def test_bleu_brevity_penalty_by_hand():
    """hyp "a b c d" against "a b c d e": all precisions 1, BP = exp(1 - 5/4)."""
    score = bleu(["a b c d"], ["a b c d e"]).score
    assert score == pytest.approx(100 * 0.7788008, abs=1e-4)


def test_chrf_of_a_case_computed_by_hand():
    """hyp "abcdefg", ref "abcdefh": of the 8 - n character n-grams on each side, the
    7 - n inside "abcdef" match, so precision = recall = (7 - n) / (8 - n) for
    n = 1..6 and chrF = their mean = (6/7 + 5/6 + 4/5 + 3/4 + 2/3 + 1/2) / 6."""
    score = chrf(["abcdefg"], ["abcdefh"])
    assert score.name == "chrF2"
    assert score.score == pytest.approx(73.4524, abs=1e-4)
    assert chrf(["xyz"], ["abc"]).score == pytest.approx(0.0)


def test_every_score_carries_its_signature():
    for score in (bleu(["a cat"], ["a cat"]), chrf(["a cat"], ["a cat"])):
        assert isinstance(score, Score)
        assert "version:" in score.signature and "nrefs:1" in score.signature
        assert score.signature in str(score)
    assert "tok:13a" in bleu(["a"], ["a"]).signature


def test_bad_inputs_name_the_counts():
    with pytest.raises(ValueError, match="2 hypotheses for 1 references"):
        bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no sentences"):
        chrf([], [])


# --- intervals and the paired test ----------------------------------------------------


def _corpus(noise: float, seed: int, n: int = 300) -> tuple[list[str], list[str]]:
    """References of 8 random words, and outputs with a share ``noise`` of them
    replaced at random."""
    rng = random.Random(seed)
    words = "the a cat dog sat ran on under mat table I am Taro you are".split()
    refs = [" ".join(rng.choices(words, k=8)) for _ in range(n)]
    hyps = [
        " ".join(w if rng.random() > noise else rng.choice(words) for w in r.split())
        for r in refs
    ]
    return hyps, refs


def test_bootstrap_interval_surrounds_the_score_and_is_reproducible():
    hyps, refs = _corpus(0.3, seed=0)
    for metric in (bleu, chrf):
        plain = metric(hyps, refs)
        assert plain.ci is None and plain.low is None and "interval" not in str(plain)
        s = metric(hyps, refs, n_bootstrap=N_BOOTSTRAP)
        assert s.score == plain.score  # the score itself does not change
        assert s.low < s.score < s.high and 0 < s.ci < 10
        assert "bs:1000" in s.signature and "seed:12345" in s.signature
        assert f"{s.low:.1f}–{s.high:.1f}" in str(s)
        assert metric(hyps, refs, n_bootstrap=N_BOOTSTRAP) == s  # seeded


def test_more_sentences_give_a_narrower_interval():
    few, many = (bleu(*_corpus(0.3, seed=1, n=n), n_bootstrap=500) for n in (100, 1600))
    assert many.ci < few.ci / 2  # about 1/sqrt(16) as wide


def test_paired_bootstrap_tells_a_better_system_from_noise():
    worse, refs = _corpus(0.3, seed=2)
    better, _ = _corpus(0.1, seed=2)  # same references, fewer words replaced
    clear = paired_bootstrap(worse, better, refs)
    for name in ("BLEU", "chrF2"):
        r = clear[name]
        assert r.difference > 5 and r.p_value < 0.01, r
        assert r.p_value == pytest.approx(1 / 1001)  # no resample came near
        assert "bs:1000" in r.signature
    nudged = list(worse)
    nudged[0] = refs[0]  # one sentence of 300 fixed: within the noise
    small = paired_bootstrap(worse, nudged, refs)["BLEU"]
    assert 0 < small.difference < 1 and small.p_value > 0.05, small
    with pytest.raises(ValueError, match="identical"):
        paired_bootstrap(worse, list(worse), refs)


def test_length_ratio_counts_words_as_bleu_does():
    assert length_ratio(["a b c d"], ["a b c d e"]) == pytest.approx(0.8)
    assert length_ratio(["a b, c."], ["a b c"]) == pytest.approx(5 / 3)  # 13a splits
