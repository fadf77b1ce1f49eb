"""The trained Tatoeba model that ships with the package: its size, its record of how
it was trained, and its dev score, re-measured here and compared with the record."""

from __future__ import annotations

import json

import pytest

from transformer_edu.tatoeba import load_tatoeba
from transformer_edu.tatoeba_train import (
    evaluate,
    load_tatoeba_checkpoint,
    shipped_model_path,
)

RECORD = shipped_model_path().with_suffix(".scores.json")
# Greedy decoding is deterministic on one machine; another CPU's kernels may round a
# logit differently and flip a near-tie. Allow that much, no more.
TOLERANCE = 0.05


def recorded(split: str, beam: int, alpha: float, limit: int | None = None) -> dict:
    rows = json.loads(RECORD.read_text())["scores"]
    key = (split, beam, alpha, limit)
    return next(
        r for r in rows if (r["split"], r["beam"], r["alpha"], r["limit"]) == key
    )


def test_the_model_ships_small_with_its_training_record():
    path = shipped_model_path()
    assert path.stat().st_size <= 15_000_000, f"{path.stat().st_size:,} bytes > 15 MB"
    _, _, meta = load_tatoeba_checkpoint()
    assert meta["command"].startswith(
        "python -m transformer_edu train --corpus tatoeba"
    )
    assert meta["minutes"] <= 60 and isinstance(meta["seed"], int) and meta["commit"]
    hist = meta["history"]
    assert hist["eval_bleu"] and len(hist["eval_bleu"]) == len(hist["eval_minutes"])
    assert json.loads(path.with_suffix(".json").read_text())["commit"] == meta["commit"]


@pytest.fixture(scope="module")
def shipped():
    model, tok, _ = load_tatoeba_checkpoint()
    return model, tok


def test_dev_score_matches_the_recorded_figure(shipped):
    model, tok = shipped
    rec = recorded("dev", 1, 0.0)
    dev = load_tatoeba("dev")
    assert len(dev) == rec["pairs"]
    bleu, chrf, _ = evaluate(model, tok, dev)
    assert bleu.signature == rec["bleu_signature"]
    assert abs(bleu.score - rec["bleu"]) <= TOLERANCE, (bleu.score, rec["bleu"])
    assert abs(chrf.score - rec["chrf"]) <= TOLERANCE, (chrf.score, rec["chrf"])
