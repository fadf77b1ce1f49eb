"""BLEU and chrF through sacreBLEU, against values worked out by hand."""

import pytest

from transformer_edu.metrics import Score, bleu, chrf


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
