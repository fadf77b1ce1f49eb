"""transformer_edu/toy/ablations.json, the ablation ladder's record
(scripts/record_toy_ablations.py): every variant under every seed, and a summary that
is what its runs give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import transformer_edu.toy
from transformer_edu.seeds import spread
from transformer_edu.toy.training import TOY_MODEL, TOY_TRAINING

RECORD = Path(transformer_edu.toy.__file__).parent / "ablations.json"


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(RECORD.read_text())


def test_every_variant_ran_under_every_seed(record):
    names = list(record["summary"])
    assert names[0] == "the toy translator" and len(names) == 7
    assert len(record["seeds"]) >= 3
    ran = {(r["variant"], r["seed"]) for r in record["runs"]}
    assert ran == {(n, s) for n in names for s in record["seeds"]}
    assert len(record["runs"]) == len(ran)


def test_the_summary_is_what_the_runs_give(record):
    for name, summary in record["summary"].items():
        rows = [r for r in record["runs"] if r["variant"] == name]
        for key in ("loss", "exact"):
            values = [r[key] for r in rows]
            assert summary[key]["mean"] == pytest.approx(sum(values) / len(values))
            assert summary[key]["spread"] == pytest.approx(spread(values))


def test_the_record_was_made_with_todays_model_and_recipe(record):
    """A change to the toy model or its recipe makes the record stale: run the script
    again (8 minutes on 2 cores, 5 seeds)."""
    from dataclasses import asdict

    assert record["model"] == TOY_MODEL
    assert record["recipe"] == asdict(TOY_TRAINING)
