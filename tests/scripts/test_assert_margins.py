"""scripts/assert_margins.py: the chapters' asserts rewritten to record their margins."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "assert_margins", ROOT / "scripts" / "assert_margins.py"
)
margins = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(margins)


def _run(source: str, tmp_path: Path, monkeypatch) -> list[dict]:
    """A rewritten cell executed after the prelude; what the recorder wrote."""
    out = tmp_path / "rows.json"
    monkeypatch.setenv("ASSERT_MARGINS_OUT", str(out))
    scope: dict = {}
    exec(margins.PRELUDE, scope)  # noqa: S102 - the script's own cell
    exec(margins.rewrite_cell(source, 3), scope)  # noqa: S102
    return json.loads(out.read_text())


def test_comparisons_in_asserts_are_recorded_with_their_margins(tmp_path, monkeypatch):
    source = (
        "import torch\n"
        "x, t = 0.04, torch.tensor(2.5)\n"
        "assert x < 0.1 < t, 'chained'\n"
        "assert abs(x - 0.05) < 0.02 and t is not None\n"
        "assert all(a > b for a, b in [(3, 1), (2, 1.5)])\n"
        "y = x < 0  # not in an assert: left alone\n"
    )
    rows = _run(source, tmp_path, monkeypatch)
    ordered = [(r["source"], r["op"], r.get("margin")) for r in rows if "margin" in r]
    assert ordered == [
        ("x < 0.1 < t", "<", pytest.approx(0.06)),
        ("x < 0.1 < t", "<", pytest.approx(2.4)),
        ("abs(x - 0.05) < 0.02", "<", pytest.approx(0.01)),
        ("a > b", ">", pytest.approx(2.0)),
        ("a > b", ">", pytest.approx(0.5)),
    ]
    exact = [r for r in rows if "margin" not in r]
    assert [(r["op"], r["ok"]) for r in exact] == [("is not", True)]
    assert all(r["ok"] for r in rows) and {r["key"] for r in rows} == {
        "cell 3, line 3", "cell 3, line 4", "cell 3, line 5"}  # fmt: skip


def test_a_failing_assert_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    rows = _run("v = 0.112\nassert v < 0.1\nafter = True\n", tmp_path, monkeypatch)
    assert rows == [{"key": "cell 3, line 2", "source": "v < 0.1", "op": "<",
                     "ok": False, "left": 0.112, "right": 0.1,
                     "margin": pytest.approx(-0.012)}]  # fmt: skip


def test_cells_without_asserts_or_not_python_are_left_alone():
    assert margins.rewrite_cell("x = 1\nprint(x)\n", 0) is None
    assert margins.rewrite_cell("%timeit assert 1 < 2\n", 0) is None


def test_the_summary_flags_failures_thin_margins_and_margins_within_the_spread():
    def rows(left, right):
        return [{"key": "k", "source": "a < b", "op": "<", "ok": left < right,
                 "left": left, "right": right, "margin": right - left}]  # fmt: skip

    results = {
        "fails": {"default": rows(0.09, 0.1), "avx2": rows(0.112, 0.1)},
        "thin": {"default": rows(0.98, 1.0), "avx2": rows(0.985, 1.0)},
        "moves": {"default": rows(0.5, 1.0), "avx2": rows(0.8, 1.0)},
        "safe": {"default": rows(0.5, 1.0), "avx2": rows(0.51, 1.0)},
    }
    flags = {t["chapter"]: t["flag"] for t in margins.summarise(results)}
    # "moves": 0.2 of margin, but the paths moved a side by 0.3
    assert flags == {"fails": "FAILS", "thin": "thin", "moves": "thin", "safe": ""}


def test_elementwise_comparisons_and_comprehension_filters_keep_their_meaning(
    tmp_path, monkeypatch
):
    """A tensor compared element by element goes back to the assert that reduces it
    (recorded as elementwise, not as a margin); a comprehension's `if` is not a claim."""
    source = (
        "import torch\n"
        "w = torch.tensor([0.0, 0.5, 1.0])\n"
        "assert (w >= 0).all() and (w == 0).any()\n"
        "assert all(0.1 < v < 10 for v, g in [(1.0, 0.5), (50.0, 2.0)] if g <= 1)\n"
    )
    rows = _run(source, tmp_path, monkeypatch)
    assert [(r["source"], r["op"], r["ok"]) for r in rows] == [
        ("w >= 0", "elementwise", True),  # .all(): every element is claimed
        # (w == 0).any() claims only that some element is 0: not recorded
        ("0.1 < v < 10", "<", True),
        ("0.1 < v < 10", "<", True),
    ]


def test_conditions_that_pick_a_value_and_asserts_meant_to_fail_are_left_alone(
    tmp_path, monkeypatch
):
    source = (
        "c = 0\n"
        "assert abs(1.0 - (0.5 if c > 0 else 1.0)) < 1e-6\n"
        "try:\n"
        "    assert c > 1, 'meant to fail'\n"
        "except AssertionError:\n"
        "    caught = True\n"
        "assert caught\n"
    )
    rows = _run(source, tmp_path, monkeypatch)
    assert [(r["source"], r["ok"]) for r in rows] == [
        ("abs(1.0 - (0.5 if c > 0 else 1.0)) < 1e-6", True)
    ]


def test_a_seed_path_shifts_the_seeds_of_a_comparison_of_runs(monkeypatch):
    from transformer_edu.seeds import seeds

    assert set(margins.SEED_PATHS) <= set(margins.ALL_PATHS)
    assert not set(margins.SEED_PATHS) & set(margins.PATHS)  # only when named
    shifted = set()
    for env in margins.SEED_PATHS.values():
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        shifted.add(tuple(seeds(3)))
    # each seed path runs the chapter's comparisons under seeds the default never uses
    assert len(shifted) == len(margins.SEED_PATHS) and (0, 1, 2) not in shifted


def test_a_comparison_under_not_is_a_claim_that_it_is_false(tmp_path, monkeypatch):
    rows = _run(
        "pairs = [(1, 2), (3, 4)]\n"
        "seen = {5, 6}\n"
        "assert not any(a in seen for a, _ in pairs)\n"
        "x = 3\n"
        "assert not (x < 2)\n"
        "assert not any(b > 3 for _, b in pairs)\n",
        tmp_path,
        monkeypatch,
    )
    by_line = {}
    for r in rows:
        by_line.setdefault(r["key"], []).append(r)
    # nothing of `seen` among the pairs: the assert holds, and each item says so
    assert [r["ok"] for r in by_line["cell 3, line 3"]] == [True, True]
    # not (3 < 2): holds, by a margin of 1
    (r,) = by_line["cell 3, line 5"]
    assert r["ok"] and r["margin"] == 1
    # 4 > 3 is the item that breaks `not any(...)`: reported failing, the run goes on
    assert [r["ok"] for r in by_line["cell 3, line 6"]] == [True, False]


def test_what_no_single_comparison_claims_is_left_as_it_is():
    # not all(...): some item fails, none in particular; not (a < b < c): some link
    for source in ("assert not all(a < 2 for a in xs)", "assert not (a < b < c)"):
        assert "compare" not in margins.rewrite_cell(source, 0)


# The committed record: every chapter's asserts measured over the grid (numeric
# paths × three seed offsets), keyed by the hash of the chapter's code cells.
CHAPTER_NAMES = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))


def test_the_record_covers_every_chapter_as_it_is_now_and_every_assert_clears_its_floor():
    """A chapter whose code changed since its record fails here with the command that
    records it again; so does an assert that failed on some run of the grid or, having
    moved between runs, held by less than the record's floor on its worst."""
    record = json.loads(margins.RECORD.read_text())
    assert record["floor"] == margins.FLOOR and record["why"]
    assert len(CHAPTER_NAMES) == 14
    problems = margins.record_problems(record, CHAPTER_NAMES)
    assert not problems, "\n".join(problems)
    # what is still open is said, comparison by comparison, in the record itself
    for name, items in record.get("open", {}).items():
        assert name in CHAPTER_NAMES and all(
            reason.strip() for reason in items.values()
        )
    # what it vouches for: each chapter measured on ≥ 2 paths × ≥ 3 seed offsets, and
    # the chapters that take seeds from transformer_edu.seeds run under each offset
    for name in CHAPTER_NAMES:
        entry = record["chapters"][name]
        assert set(entry["runs"]) <= set(margins.GRID), name  # older grids: 2 paths
        assert entry["rows"], f"{name}: no ordered comparison recorded"


def test_the_record_check_can_fail(monkeypatch):
    """A stale hash, a missing chapter, too few runs, a failing or thin assert: each is
    reported; a comparison whose margin no run moved may sit on its threshold."""
    name = "07_residual_norm_ffn"
    row = {"key": "cell 1, line 1", "source": "a < b", "ok": True, "worst_rel": 0.5,
           "worst_margin": 0.5, "spread": 0.1,
           "tightest": {"ratio": 5.0, "margin": 0.5, "moved": 0.1}}  # fmt: skip
    good = {"source_sha256": margins.source_hash(name), "runs": list(margins.GRID),
            "takes_seeds": margins.takes_seeds(name), "rows": [row]}  # fmt: skip
    record = {"floor": 1.0, "chapters": {name: good}}
    assert margins.record_problems(record, [name]) == []
    cases = {
        "code changed": {**good, "source_sha256": "0" * 64},
        "not ≥ 3 seeds": {**good, "runs": ["threads1", "avx2"]},
        "fails": {**good, "rows": [{**row, "ok": False}]},
        "moved its margin by 0.6": {
            **good,
            "rows": [
                {**row, "tightest": {"ratio": 0.5 / 0.6, "margin": 0.5, "moved": 0.6}}
            ],
        },
    }
    for words, entry in cases.items():
        problems = margins.record_problems(
            {**record, "chapters": {name: entry}}, [name]
        )
        assert len(problems) == 1 and words in problems[0], (words, problems)
    assert "not in the record" in margins.record_problems(record, ["01_x"])[0]
    # a thin comparison the record lists as open, with a reason, is known: no problem;
    # listed without a reason, or listed while it clears the floor, it is one
    thin = {**good, "rows": [{**row, "tightest": {"ratio": 0.5, "margin": 0.5,
                                                  "moved": 1.0}}]}  # fmt: skip
    listed = {name: {"cell 1, line 1: a < b": "why it is still thin"}}
    assert margins.record_problems(
        {**record, "chapters": {name: thin}, "open": listed}, [name]) == []  # fmt: skip
    unexplained = {name: {"cell 1, line 1: a < b": " "}}
    assert "without a reason" in margins.record_problems(
        {**record, "chapters": {name: thin}, "open": unexplained}, [name])[0]  # fmt: skip
    assert "take it off the list" in margins.record_problems(
        {**record, "chapters": {name: good}, "open": listed}, [name])[0]  # fmt: skip
    unmoved = {**row, "key": "cell 2, line 1", "worst_rel": 0.0, "spread": 0.0,
               "tightest": None}  # fmt: skip
    still = {**good, "rows": [row, unmoved]}
    assert margins.record_problems({**record, "chapters": {name: still}}, [name]) == []
    # ...but a record in which no run moved anything checked nothing
    (problem,) = margins.record_problems(
        {**record, "chapters": {name: {**good, "rows": [unmoved]}}}, [name]
    )
    assert "moved any of its comparisons" in problem
    # the same code measured on another CPU is held to the floor as well
    other = {**good, "measured_on": "another CPU", "rows": thin["rows"]}
    (problem,) = margins.record_problems(
        {**record, "chapters": {name: {**good, "other_cpus": [other]}}}, [name]
    )
    assert "moved its margin by 1" in problem


def test_what_only_some_operand_claims_is_left_as_it_is(tmp_path, monkeypatch):
    """`a or b` and `any(...)` hold when one operand does: the others are no claim."""
    rows = _run(
        "x, xs = 5, [1, 9]\n"
        "assert x < 1 or x > 2\n"
        "assert any(v > 4 for v in xs)\n"
        "assert not (x < 1 or x < 2)\n",
        tmp_path,
        monkeypatch,
    )
    assert [(r["key"], r["source"], r["ok"]) for r in rows] == [
        ("cell 3, line 4", "x < 1", True),
        ("cell 3, line 4", "x < 2", True),
    ]


def test_a_comparison_that_computes_a_value_is_not_a_claim(tmp_path, monkeypatch):
    """A comparison inside a list, a call's arguments or another comparison computes
    a value the assert then judges: rewriting it would change what the assert sees."""
    rows = _run(
        "moved, j = [False, True, True], 1\n"
        "assert moved == [t >= j for t in range(3)]\n"
        "assert sum(v > 0 for v in [1, -1]) == 1\n",
        tmp_path,
        monkeypatch,
    )
    assert [(r["source"], r["ok"]) for r in rows] == [
        ("moved == [t >= j for t in range(3)]", True),
        ("sum(v > 0 for v in [1, -1]) == 1", True),
    ]


def test_an_assert_inside_a_function_keeps_its_verdict(tmp_path, monkeypatch):
    """A chapter may call a checking function expecting it to fail: its assert still
    raises; the passing calls are recorded, the failing one is not (it was caught)."""
    rows = _run(
        "def check(x):\n"
        "    assert x < 1\n"
        "check(0.5)\n"
        "try:\n"
        "    check(2)\n"
        "except AssertionError:\n"
        "    caught = True\n"
        "assert caught\n",
        tmp_path,
        monkeypatch,
    )
    assert [(r["source"], r["ok"], r["margin"]) for r in rows] == [
        ("x < 1", True, pytest.approx(0.5))
    ]


def test_the_floor_compares_each_occurrence_with_how_far_the_runs_moved_it():
    def rows(*margins):
        return [{"key": "k", "source": "a < b", "op": "<", "ok": m > 0, "left": 1 - m,
                 "right": 1.0, "margin": m} for m in margins]  # fmt: skip

    results = {"ch": {"threads1": rows(0.50, 0.02), "avx2": rows(0.45, 0.03)}}
    (entry,) = margins.summarise(results)
    # the loop's second item binds: lowest 0.02, moved 0.01 (the first: 0.45, 0.05)
    assert entry["tightest"] == pytest.approx(
        {"ratio": 2.0, "margin": 0.02, "moved": 0.01}
    )


def test_a_new_measurement_keeps_the_same_code_measured_on_other_cpus():
    new = {"source_sha256": "a", "measured_on": "EPYC (avx2)", "rows": []}
    amx = {"source_sha256": "a", "measured_on": "Xeon (amx_tile)", "rows": [1]}
    kept = margins.with_other_cpus(new, amx)
    assert kept["other_cpus"] == [amx] and kept["rows"] == []
    # measured again on the Xeon: the EPYC's stays, the Xeon's old one goes
    again = {**amx, "rows": [2]}
    assert margins.with_other_cpus(again, kept)["other_cpus"] == [new]
    # changed code: what other CPUs measured no longer vouches for it
    assert "other_cpus" not in margins.with_other_cpus(
        {**new, "source_sha256": "b"}, kept
    )


def test_a_record_carries_over_a_change_of_module_paths_only():
    old = ["from transformer_edu.data import Vocab, make_batch\nimport torch\nv = Vocab()",
           "p = transformer_edu.models.__file__\nx = 1"]  # fmt: skip
    moved = ["import torch\n\nfrom transformer_edu.toy.data import Vocab, make_batch\n"
             "v = Vocab()", "p = transformer_edu.tatoeba.weights.__file__\nx = 1"]  # fmt: skip
    assert margins.moved_imports_only(old, moved) is None
    other_name = [moved[0].replace("make_batch", "batches"), moved[1]]
    assert "binds other names" in margins.moved_imports_only(old, other_name)
    aliased = ["from transformer_edu import tatoeba_train\nx = tatoeba_train.A"]
    renamed = ["from transformer_edu.tatoeba import train as tatoeba_train\n"
               "x = tatoeba_train.A"]  # fmt: skip
    assert margins.moved_imports_only(aliased, renamed) is None
    other_code = [moved[0], moved[1].replace("x = 1", "x = 2")]
    assert "beyond its imports" in margins.moved_imports_only(old, other_code)
    assert "cells became" in margins.moved_imports_only(old, moved[:1])
