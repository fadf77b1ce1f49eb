"""Score the recorded outputs of the shipped Tatoeba model, v3 (and of v2, the model
before it: chapter 12 names the three models v1, v2, v3), and record every figure
chapter 12 states about them.

    python scripts/record_tatoeba_outputs.py                                # first
    python scripts/record_tatoeba_outputs.py --commit c73b6fe --name v2
    python scripts/record_tatoeba_scores.py   # -> transformer_edu/tatoeba/weights/
                                              #      tatoeba_ja_en.scores.json

From ``tatoeba_ja_en.outputs.json`` (and ``.v2.outputs.json``), no model needed:
- every decoding on dev and test: BLEU and chrF, each with sacreBLEU's 95 % bootstrap
  interval and signature, and the length ratio;
- sacreBLEU's paired bootstrap test: the chosen decoding against greedy, and this
  model against v2, each decoding, on the whole test split (pairs
  neither trained on) and on its pairs whose English reference neither had among its
  training sentences (v2's split's leak left out: the fair comparison);
- what goes wrong: outputs with a word the training English never has, outputs that
  are verbatim training sentences, test BLEU by the length of the Japanese;
- the leak of v2's split: both models' test scores on the pairs whose
  reference occurs in v2's training English, and on the rest (the
  split of now has no such pairs; the shipped model, which never saw those references,
  measures how much easier those pairs are anyway).

CI re-scores the dev split greedily with the shipped model (tests/tatoeba/test_shipped_model.py)
and fails when it differs from the figure recorded here, and recomputes these scores
from the recorded outputs.
"""

from __future__ import annotations

import json
import sys

from transformer_edu.metrics import (
    N_BOOTSTRAP,
    Score,
    bleu,
    chrf,
    length_ratio,
    paired_bootstrap,
)
from transformer_edu.tatoeba.analysis import (
    LENGTH_BUCKETS,
    decoding_name,
    length_bucket,
    read_record,
)
from transformer_edu.tatoeba.checkpoint import shipped_model_path
from transformer_edu.tatoeba.data import load_tatoeba
from transformer_edu.tatoeba.translate import DEFAULT_ALPHA, DEFAULT_BEAM

SPLITS = ("dev", "test")
CHOSEN = decoding_name(DEFAULT_BEAM, DEFAULT_ALPHA)
PAPER = decoding_name(4, 0.6)
# the test pairs whose English reference neither model trained on
UNSEEN_BY_BOTH = "test, references unseen by both"


def interval(s: Score) -> dict:
    return {"score": round(s.score, 2), "mean": round(s.mean, 2), "ci": round(s.ci, 2),
            "low": round(s.low, 2), "high": round(s.high, 2)}  # fmt: skip


def score_row(hyps: list[str], refs: list[str]) -> dict:
    """BLEU and chrF with intervals and signatures, and the length ratio."""
    b, c = bleu(hyps, refs, N_BOOTSTRAP), chrf(hyps, refs, N_BOOTSTRAP)
    return {"pairs": len(refs), "bleu": interval(b), "chrf": interval(c),
            "length_ratio": round(length_ratio(hyps, refs), 4),
            "bleu_signature": b.signature, "chrf_signature": c.signature}  # fmt: skip


def paired_row(split, baseline, system, base_hyps, sys_hyps, refs) -> dict:
    tests = paired_bootstrap(base_hyps, sys_hyps, refs)
    return {
        "split": split, "baseline": baseline, "system": system, "pairs": len(refs),
        **{key: {"baseline": round(t.baseline.score, 2), "system": round(t.system.score, 2),
                 "difference": round(t.difference, 2), "p_value": round(t.p_value, 4),
                 "signature": t.signature}
           for key, t in (("bleu", tests["BLEU"]), ("chrf", tests["chrF2"]))},
    }  # fmt: skip


def scores_of(outputs: dict, refs: dict[str, list[str]]) -> list[dict]:
    rows = []
    for d in outputs["decodings"]:
        for s in SPLITS:
            rows.append({"split": s, "decoding": d["name"], "beam": d["beam"],
                         "alpha": d["alpha"], "limit": None,
                         **score_row(d[s], refs[s]),
                         "seconds": d[f"{s}_seconds"]})  # fmt: skip
            print(json.dumps({k: rows[-1][k] for k in ("split", "decoding", "bleu")}),
                  flush=True)  # fmt: skip
    return rows


def failures(outputs: dict, pairs: dict) -> dict:
    """Unseen words, verbatim training sentences, BLEU by source length (test)."""
    out = {}
    for d in outputs["decodings"]:
        row = {}
        for s in SPLITS:
            n = len(d[s])
            unseen = d[f"{s}_unseen"]
            row[s] = {"pairs": n, "with_unseen_word": len(unseen),
                      "unseen_rate": round(len(unseen) / n, 4),
                      "in_train": len(d[f"{s}_in_train"]),
                      "in_train_rate": round(len(d[f"{s}_in_train"]) / n, 4)}  # fmt: skip
        members = [[] for _ in LENGTH_BUCKETS]
        for i, p in enumerate(pairs["test"]):
            members[length_bucket(p.ja)].append(i)
        row["test_by_length"] = [
            {"chars": list(b), **score_row([d["test"][i] for i in m],
                                           [pairs["test"][i].en for i in m])}
            for b, m in zip(LENGTH_BUCKETS, members, strict=True)
        ]  # fmt: skip
        out[d["name"]] = row
    return out


def leaked_and_fair(v2: dict) -> dict[str, list[int]]:
    """The test pairs (their indices) whose reference occurs in v2's training English
    (the leak of v2's split: "seen"), and the rest ("unseen"),
    whose reference neither model trained on."""
    seen = set(v2["splits"]["test"]["en_in_train"])
    every = range(len(v2["splits"]["test"]["ids"]))
    return {"seen": [i for i in every if i in seen],
            "unseen": [i for i in every if i not in seen]}  # fmt: skip


def leak(records: dict, pairs: dict, parts_of: dict[str, list[int]]) -> dict:
    """Test scores of each model on the pairs whose reference occurs in v2's training
    English (the leak of v2's split), and on the rest."""
    out: dict = {}
    for who, rec in records.items():
        for d in rec["decodings"]:
            parts = {}
            for name, idx in parts_of.items():
                parts[name] = score_row([d["test"][i] for i in idx],
                                        [pairs["test"][i].en for i in idx])  # fmt: skip
            out.setdefault(d["name"], {})[who] = parts
    return {name: v for name, v in out.items() if len(v) == len(records)}


def main() -> int:
    stem = shipped_model_path().with_suffix("").name
    pairs = {s: load_tatoeba(s) for s in SPLITS}
    refs = {s: [p.en for p in pairs[s]] for s in SPLITS}
    records = {"v3": read_record(f"{stem}.outputs.json")}  # the shipped model
    try:
        records["v2"] = read_record(f"{stem}.v2.outputs.json")
    except FileNotFoundError:
        pass
    for name, rec in records.items():
        for s in SPLITS:
            if rec["splits"][s]["ids"] != [p.id for p in pairs[s]]:
                raise SystemExit(
                    f"{name}'s outputs are of other {s} pairs: record again"
                )
    now = records["v3"]
    by_name = {d["name"]: d for d in now["decodings"]}
    if CHOSEN not in by_name:
        raise SystemExit(f"no outputs of {CHOSEN} (the chosen decoding): record again")
    out = {
        "command": "python scripts/record_tatoeba_scores.py",
        "model": shipped_model_path().name,
        "trained_by": now["model"]["trained_by"],
        "commit": now["model"]["trained_at"],
        "outputs": f"{stem}.outputs.json",
        "n_bootstrap": N_BOOTSTRAP,
        "chosen": {"name": CHOSEN, "beam": DEFAULT_BEAM, "alpha": DEFAULT_ALPHA},
        "scores": scores_of(now, refs),
        "paired": [],
        "failures": failures(now, pairs),
    }
    for other in dict.fromkeys([CHOSEN, PAPER]):
        if other != "greedy" and other in by_name:
            out["paired"].append(paired_row(
                "test", "greedy", other, by_name["greedy"]["test"],
                by_name[other]["test"], refs["test"]))  # fmt: skip
    if "v2" in records:
        prev = records["v2"]
        out["v2"] = {
            "outputs": f"{stem}.v2.outputs.json",
            "trained_by": prev["model"]["trained_by"],
            "commit": prev["model"]["trained_at"],
            "scores": scores_of(prev, refs),
            "failures": failures(prev, pairs),
            "test_en_in_train": len(prev["splits"]["test"]["en_in_train"]),
            "dev_en_in_train": len(prev["splits"]["dev"]["en_in_train"]),
        }
        parts_of = leaked_and_fair(prev)
        out["leak"] = leak(records, pairs, parts_of)
        # and on the test pairs whose reference neither model had among its training
        # English (v2's split's leak left out): the fair comparison
        fair = parts_of["unseen"]
        for d in prev["decodings"]:
            if d["name"] in by_name:
                out["paired"].append(paired_row(
                    "test", f"v2, {d['name']}", f"v3, {d['name']}",
                    d["test"], by_name[d["name"]]["test"], refs["test"]))  # fmt: skip
                out["paired"].append(paired_row(
                    UNSEEN_BY_BOTH, f"v2, {d['name']}", f"v3, {d['name']}",
                    [d["test"][i] for i in fair],
                    [by_name[d["name"]]["test"][i] for i in fair],
                    [refs["test"][i] for i in fair]))  # fmt: skip
    path = shipped_model_path().with_suffix(".scores.json")
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
