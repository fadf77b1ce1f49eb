"""The checkers' registry: each exercise registered once, by the decorator above its
checker; the grader's table, ``CHECKERS`` and the checkers' names read from it; every
exercise in chapter 11 (its heading, its stars, its row of the table, its stub), and
every checker with answers that call its references in test_references' tables."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from test_references import ALLOWED_BLOCKS, FORBIDDEN, table_key  # its folder

from transformer_edu import exercises, grading
from transformer_edu.exercises import registry
from transformer_edu.exercises.registry import CHECKERS, EXERCISES, checker, exercise

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "11_exercises.ipynb"
HEADING = re.compile(r"^### Exercise (\S+) (★+) ", re.M)


@pytest.fixture
def scratch():
    """The registry as it is, given back after the test (which may register more)."""
    saved = dict(CHECKERS), list(EXERCISES), dict(registry._CHECKED_BY)
    yield
    CHECKERS.clear()
    CHECKERS.update(saved[0])
    EXERCISES[:] = saved[1]
    registry._CHECKED_BY.clear()
    registry._CHECKED_BY.update(saved[2])


def _a_checker(name: str, like=None):
    """A new checker called ``name``; with ``like``, defined where ``like`` is (as a
    module reloaded in a notebook defines its checkers again)."""

    def fn(fn, quiet=False):
        raise AssertionError("never called")

    fn.__name__ = fn.__qualname__ = name
    if like is not None:
        fn.__module__, fn.__qualname__ = like.__module__, like.__qualname__
    return fn


# --- one place ----------------------------------------------------------------------


def test_the_grader_and_the_package_read_the_registry():
    assert grading.EXERCISES is EXERCISES and exercises.CHECKERS is CHECKERS
    assert grading.IDS == [e.id for e in EXERCISES]
    assert grading.NAMES == {e.name for e in EXERCISES}
    for name, fn in CHECKERS.items():
        assert getattr(exercises, name) is fn and fn.__name__ == name
        assert name in exercises.__all__
    for ex in EXERCISES:
        assert CHECKERS[ex.checker].__name__ == ex.checker


def test_each_exercise_is_registered_once():
    ids, names = [e.id for e in EXERCISES], [e.name for e in EXERCISES]
    assert len(set(ids)) == len(ids) and len(set(names)) == len(names)
    assert set(registry._CHECKED_BY) == set(ids)


def test_the_grader_grades_by_chapter_numbered_exercises_first():
    # a chapter's A.n after its numbered exercises: A.1-A.4 with chapter 8's, A.5 9's
    order = [(e.chapter, not e.id[0].isdigit()) for e in EXERCISES]
    assert order == sorted(order)
    for e in EXERCISES:
        if e.id[0].isdigit():
            assert e.chapter == int(e.id.split(".")[0]), e
    # before decoding, A.1-A.4 (chapter 10's checks run the package's layers); A.5
    # after 9.2 (its reference, noam_lr, may serve the loop)
    ids = [e.id for e in EXERCISES]
    decoding = min(i for i, e in enumerate(EXERCISES) if e.chapter == 10)
    assert all(ids.index(a) < decoding for a in ("A.1", "A.2", "A.3", "A.4"))
    assert ids.index("9.2") < ids.index("A.5") < decoding
    # each checker where the grader checks its first exercise; the others after
    graded = list(dict.fromkeys(e.checker for e in EXERCISES))
    assert list(CHECKERS)[: len(graded)] == graded
    assert "check_training_flops" in list(CHECKERS)[len(graded) :]


def test_an_exercise_registered_twice_is_refused(scratch):
    look_ahead = CHECKERS["check_causal_mask"]
    before = list(EXERCISES)
    with pytest.raises(ValueError, match="exercise 6.1 is registered twice"):
        exercise("6.1", "another_mask", points=1)(_a_checker("check_another"))
    with pytest.raises(ValueError, match="exercise 6.1 is registered twice"):
        exercise("6.1", "look_ahead_mask", points=1)(look_ahead)  # stacked twice
    with pytest.raises(ValueError, match="'pad_mask' is exercise 6.2's already"):
        exercise("6.3", "pad_mask", points=1)(_a_checker("check_another"))
    with pytest.raises(ValueError, match="a checker named check_causal_mask already"):
        checker(_a_checker("check_causal_mask"))
    assert EXERCISES == before and CHECKERS["check_causal_mask"] is look_ahead


def test_a_reloaded_module_registers_its_checkers_again(scratch):
    old = CHECKERS["check_causal_mask"]
    reloaded = _a_checker("check_causal_mask", like=old)
    exercise("6.1", "look_ahead_mask", points=1)(reloaded)
    assert CHECKERS["check_causal_mask"] is reloaded
    assert [e.id for e in EXERCISES].count("6.1") == 1


def test_a_new_exercise_takes_its_place(scratch):
    window = _a_checker("check_window")
    assert exercise("6.3", "window_mask", points=2)(window) is window  # unchanged
    ids, names = [e.id for e in EXERCISES], list(CHECKERS)
    assert ids.index("6.3") == ids.index("6.2") + 1
    assert names.index("check_window") == names.index("check_padding_mask") + 1
    exercise("B.1", "later", points=1, chapter=9)(_a_checker("check_later"))
    assert [e.id for e in EXERCISES if e.chapter == 9] == ["9.1", "9.2", "A.5", "B.1"]


@pytest.mark.parametrize(
    "id, options, message",
    [
        ("6-1", {}, "is not numbered as chapter 11 numbers them"),
        ("A.9", {}, "needs chapter="),
        ("6.9", {"chapter": 7}, "is chapter 6's, not chapter=7"),
        ("6.9", {"points": 0}, "points=0"),
    ],
)
def test_a_malformed_exercise_is_refused(id, options, message):
    with pytest.raises(ValueError, match=message):
        exercise(id, "name", **{"points": 1, **options})


# --- chapter 11 ---------------------------------------------------------------------


def _chapter():
    """Chapter 11's cells, and the index of each exercise heading's cell by its id."""
    cells = nbformat.read(CHAPTER, as_version=4).cells
    headings = {}
    for i, cell in enumerate(cells):
        for m in HEADING.finditer(cell.source if cell.cell_type == "markdown" else ""):
            headings[m.group(1)] = (i, len(m.group(2)))
    return cells, headings


def test_every_exercise_is_in_chapter_11_and_every_exercise_there_is_registered():
    cells, headings = _chapter()
    assert set(headings) == {e.heading for e in EXERCISES}
    table = next(c.source for c in cells if c.source.startswith("## Exercises"))
    rows = {
        r.split("|")[1].strip(): r for r in table.splitlines() if r.startswith("| ")
    }
    starts = sorted(i for i, _ in headings.values()) + [len(cells)]
    for heading, (i, stars) in headings.items():
        mine = [e for e in EXERCISES if e.heading == heading]
        assert stars == sum(e.points for e in mine), f"exercise {heading}'s stars"
        assert f"| {'★' * stars} |" in rows[heading], f"exercise {heading}'s row"
        # the stub under the heading calls each exercise's checker on its name
        end = starts[starts.index(i) + 1]
        stubs = [
            c.source
            for c in cells[i:end]
            if c.cell_type == "code" and "solution" not in c.metadata.get("tags", [])
        ]
        for e in mine:
            assert f"`{e.checker}" in rows[heading], f"exercise {e.id}'s row"
            call = f"{e.checker}({e.name}" + (f', "{e.kind}")' if e.kind else ")")
            assert any(
                re.search(rf"^(def|class) {e.name}\b", s, re.M) and call in s
                for s in stubs
            ), f"exercise {e.id}: no stub defines {e.name} and calls {call}"


# --- the reference-refusal tests ------------------------------------------------------


@pytest.mark.parametrize("table", ["FORBIDDEN", "ALLOWED_BLOCKS"])
def test_every_registered_checker_has_reference_refusal_cases(table):
    rows = {"FORBIDDEN": FORBIDDEN, "ALLOWED_BLOCKS": ALLOWED_BLOCKS}[table]
    keys = {key for key, cases in rows.items() if cases}
    # an answer per exercise (with its kind), and per checker chapter 11 grades not
    missing = [table_key(e) for e in EXERCISES if table_key(e) not in keys]
    missing += [n for n in CHECKERS if not any(k.partition("[")[0] == n for k in keys)]
    missing = list(dict.fromkeys(missing))
    assert not missing, f"test_references.{table} has no answer for {missing}"
    unknown = {key.partition("[")[0] for key in rows} - set(CHECKERS)
    assert not unknown, f"test_references.{table} names no registered checker"
