"""The trained Tatoeba model that ships with the package: its size, its record of how
it was trained, and its dev score, re-measured here and compared with the record; the
recorded scores recomputed from the recorded outputs; the decoding chosen on dev is
the command line's default."""

from __future__ import annotations

import json

import pytest

from transformer_edu.cli import build_parser
from transformer_edu.metrics import bleu, chrf
from transformer_edu.tatoeba.analysis import (
    decoding_name,
    narrowest_within_noise,
    read_record,
)
from transformer_edu.tatoeba.checkpoint import (
    load_tatoeba_checkpoint,
    shipped_model_path,
)
from transformer_edu.tatoeba.data import load_tatoeba
from transformer_edu.tatoeba.translate import DEFAULT_ALPHA, DEFAULT_BEAM, evaluate

STEM = shipped_model_path().with_suffix("").name
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
    assert isinstance(meta["seed"], int) and meta["commit"] and meta["machine"]
    # the budget is in steps where CPUs differ (issue 29): the run records the steps it
    # made, the minutes they took and on which CPU; a step budget ends the run first
    assert 0 < meta["minutes_taken"] <= meta["minutes"], meta["minutes_taken"]
    if meta["max_steps"]:
        assert meta["steps"] == meta["max_steps"], (meta["steps"], meta["max_steps"])
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
    bleu_, chrf_, hyps = evaluate(model, tok, dev)
    assert abs(bleu_.score - rec["bleu"]["score"]) <= TOLERANCE, (bleu_, rec["bleu"])
    assert abs(chrf_.score - rec["chrf"]["score"]) <= TOLERANCE, (chrf_, rec["chrf"])
    outputs = read_record(f"{STEM}.outputs.json")
    greedy = next(d for d in outputs["decodings"] if d["name"] == "greedy")["dev"]
    same = sum(a == b for a, b in zip(hyps, greedy, strict=True))
    assert same >= 0.99 * len(dev), f"{same} of {len(dev)} outputs as recorded"


@pytest.mark.parametrize("which", ["v3", "v2"])  # the shipped model and the one before
def test_recorded_scores_are_those_of_the_recorded_outputs(which):
    """Every score of the record, recomputed from the outputs it was computed from
    (its interval too: sacreBLEU's resampling is seeded)."""
    record = json.loads(RECORD.read_text())
    if which == "v2":
        record = record["v2"]
    outputs = read_record(record.get("outputs", f"{STEM}.outputs.json"))
    refs = {s: [p.en for p in load_tatoeba(s)] for s in ("dev", "test")}
    for row in record["scores"]:
        d = next(d for d in outputs["decodings"] if d["name"] == row["decoding"])
        hyps, r = d[row["split"]], refs[row["split"]]
        assert round(bleu(hyps, r).score, 2) == row["bleu"]["score"], row
        assert round(chrf(hyps, r).score, 2) == row["chrf"]["score"], row
        assert row["bleu"]["low"] < row["bleu"]["score"] < row["bleu"]["high"], row
        assert "bs:1000" in row["bleu_signature"]
    greedy_test = next(r for r in record["scores"]
                       if r["decoding"] == "greedy" and r["split"] == "test")  # fmt: skip
    d = next(d for d in outputs["decodings"] if d["name"] == "greedy")
    again = bleu(d["test"], refs["test"], n_bootstrap=1000)
    assert round(again.low, 2) == greedy_test["bleu"]["low"]


def test_the_decoding_chosen_on_dev_is_the_default_everywhere():
    """The sweep's choice (its record) = the package's constants = the command
    line's defaults = the decoding the scores' record calls chosen."""
    sweep = read_record(f"{STEM}.sweep.json")
    chosen = (sweep["chosen"]["beam"], sweep["chosen"]["alpha"])
    assert chosen == (DEFAULT_BEAM, DEFAULT_ALPHA)
    args = build_parser().parse_args(["evaluate"])
    assert (args.beam, args.alpha) == chosen
    scores = json.loads(RECORD.read_text())
    assert scores["chosen"]["name"] == decoding_name(*chosen)
    # the rule: the best dev BLEU, or the narrowest beam a paired test can't tell from it
    narrow = narrowest_within_noise(sweep["narrowest_within_noise"], sweep["noise_p"])
    assert chosen == (narrow["beam"], narrow["alpha"])
    assert narrow["bleu"] <= max(r["bleu"] for r in sweep["dev"])


def test_the_int8_record_scores_the_shipped_model():
    """scripts/score_onnx.py's record (chapter 12b's int8 figures) was made from the
    shipped model: the commit it names is the model's, and its PyTorch scores are the
    model's recorded test scores (the same outputs, so the same BLEU)."""
    meta = json.loads(shipped_model_path().with_suffix(".json").read_text())
    int8 = read_record(f"{STEM}.int8.json")
    assert int8["trained_at"] == meta["commit"], "re-run scripts/score_onnx.py"
    for row in int8["decodings"]:
        assert row["pairs"] == recorded("test", row["beam"], row["alpha"])["pairs"]
        assert row["torch"]["bleu"]["score"] == pytest.approx(
            recorded("test", row["beam"], row["alpha"])["bleu"]["score"], abs=0.01
        ), row["name"]


def test_the_seed_record_scores_its_outputs():
    """scripts/record_tatoeba_seeds.py's record (chapter 12's run-to-run spread): each
    seed's test BLEU and chrF recomputed from the outputs it records, the spread from
    those scores, and the runs alike but for the seed (the recipe, the steps)."""
    record = read_record("tatoeba_seeds.json")
    refs = [p.en for p in load_tatoeba("test")]
    assert len(record["runs"]) >= 3
    assert sorted(r["seed"] for r in record["runs"]) == sorted(set(record["seeds"]))
    for run in record["runs"]:
        assert run["steps"] == record["steps"], run["seed"]
        hyps = run["test_outputs"]
        assert round(bleu(hyps, refs).score, 2) == run["test"]["bleu"]["score"]
        assert round(chrf(hyps, refs).score, 2) == run["test"]["chrf"]["score"]
        assert run["test"]["bleu"]["low"] < run["test"]["bleu"]["score"]
    test = [r["test"]["bleu"]["score"] for r in record["runs"]]
    assert record["test_bleu_spread"] == round(max(test) - min(test), 2)
