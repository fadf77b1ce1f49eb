"""transformer_edu.seeds: one switch shifts the seeds of every comparison of runs."""

import pytest

from transformer_edu.seeds import SEED_ENV, beyond_spread, seed_offset, seeds, spread


def test_seeds_start_at_zero_unless_the_switch_shifts_them(monkeypatch):
    monkeypatch.delenv(SEED_ENV, raising=False)
    assert seed_offset() == 0 and seeds(3) == [0, 1, 2] and seeds(2, start=5) == [5, 6]
    monkeypatch.setenv(SEED_ENV, "100")
    assert seeds(3) == [100, 101, 102] and seeds(1, start=5) == [105]
    monkeypatch.setenv(SEED_ENV, "")
    assert seeds(2) == [0, 1]


def test_a_bad_switch_or_count_says_what_was_wrong(monkeypatch):
    monkeypatch.setenv(SEED_ENV, "one")
    with pytest.raises(ValueError, match="TEDU_SEED='one' is not an integer"):
        seeds(3)
    monkeypatch.delenv(SEED_ENV)
    with pytest.raises(ValueError, match="n=0 seeds"):
        seeds(0)


def test_the_words_follow_the_spread():
    assert spread([1.0, 1.5, 1.2]) == pytest.approx(0.5)
    # means 1.0 and 2.0 differ by 1.0, more than either spread (0.2, 0.4)
    assert beyond_spread([0.9, 1.0, 1.1], [1.8, 2.0, 2.2])
    # means 1.0 and 1.3: the second setting's spread (0.6) is larger than 0.3
    assert not beyond_spread([0.9, 1.0, 1.1], [1.0, 1.3, 1.6])
    # a tie is within the noise, whatever the spread
    assert not beyond_spread([1.0, 1.0], [1.0, 1.0])


def test_the_toy_model_takes_the_shifted_seed_and_keeps_it_apart(monkeypatch, tmp_path):
    """Chapters 4, 5, 9 and 10 train or load the toy model: under TEDU_SEED it is
    trained from the shifted seed and saved under its own name, so that the model of
    seed 0 (the book's) is never overwritten or mistaken for another seed's."""
    from transformer_edu.toy.checkpoint import default_checkpoint_path
    from transformer_edu.toy.training import train_toy_model

    monkeypatch.setenv("TRANSFORMER_EDU_CHECKPOINT", str(tmp_path / "toy.pt"))
    monkeypatch.delenv(SEED_ENV, raising=False)
    assert default_checkpoint_path() == tmp_path / "toy.pt"
    monkeypatch.setenv(SEED_ENV, "7")
    assert default_checkpoint_path() == tmp_path / "toy.seed7.pt"
    *_, hist = train_toy_model(progress=False, device="cpu", epochs=1)
    assert hist.seed == 7
    *_, hist = train_toy_model(progress=False, device="cpu", epochs=1, seed=3)
    assert hist.seed == 3  # a seed named in the call is taken as it is
