"""The solutions editions (solutions/, solutions/ja/): every solution and answer shown,
chapter 11's checkers explained; what a class is graded on kept apart from them.

(test_colab_notebooks.py checks that they are up to date and hold no MyST.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
import solutions_edition  # book/ is on pythonpath
import student_edition

from transformer_edu.exercises import BUG_ZOO
from transformer_edu.grading import EXERCISES, NAMES, read_program
from transformer_edu.grading.submissions import (
    NotASubmission,
    Snippet,
    _exercise_name,
    canonical,
    copied,
    published_solutions,
)

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = [
    p
    for p in sorted((ROOT / "chapters").glob("[01][0-9]*_*.ipynb"))
    if student_edition.has_solutions(nbformat.read(p, as_version=4))
]
EXERCISES_NB = ROOT / "chapters" / "11_exercises.ipynb"
TITLE = "What the checker catches"
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _solutions(nb) -> list:
    return [
        c
        for c in nb.cells
        if student_edition.SOLUTION_TAG in c.metadata.get("tags", [])
    ]


def _editions(path: Path) -> list[Path]:
    folder = ROOT / solutions_edition.SOLUTIONS_DIR
    return [folder / path.name, folder / "ja" / path.name]


def test_every_chapter_with_exercises_has_both_editions():
    assert len(CHAPTERS) == 14
    for path in CHAPTERS:
        for edition in _editions(path):
            meta = _read(edition).metadata["transformer_edu"]
            assert (meta["edition"], meta["chapter"]) == ("solutions", path.stem)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_solution_is_shown_and_the_code_is_the_chapter_s(path):
    chapter = _read(path)
    code = [c.source for c in chapter.cells if c.cell_type == "code"]
    for edition in _editions(path):
        nb = _read(edition)
        shown = _solutions(nb)
        assert [c.id for c in shown] == [c.id for c in _solutions(chapter)]
        for cell in shown:
            assert "hide-input" not in cell.metadata.get("tags", [])
            # an answer's box is open: no <details> without "open"
            assert not re.search(r"<details>", cell.source), (edition.name, cell.id)
        assert [c.source for c in nb.cells if c.cell_type == "code"] == code
        note = next(c for c in nb.cells if c.get("id") == solutions_edition.NOTE_ID)
        assert f"student/{'ja/' if 'ja' in edition.parts else ''}{path.name}" in (
            note.source
        )
        assert "teachers_guide.html#worked-solutions" in note.source


def _exercise_solutions() -> list[tuple[nbformat.NotebookNode, int, list]]:
    """Chapter 11's solution cells that define answers: (cell, index, exercises)."""
    by_name = {e.name: e for e in EXERCISES}
    found = []
    cells = _read(EXERCISES_NB).cells
    for i, cell in enumerate(cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or student_edition.SOLUTION_TAG not in tags:
            continue
        names = [
            _exercise_name(n.name)
            for n in ast.parse(cell.source).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))
        ]
        exercises = [by_name[n] for n in names if n in by_name]
        if exercises:
            found.append((cell, i, exercises))
    return found


def test_every_graded_exercise_says_what_its_checker_catches():
    cells = _read(EXERCISES_NB).cells
    solutions = _exercise_solutions()
    assert {e.id for _, _, exs in solutions for e in exs} == {e.id for e in EXERCISES}
    for cell, i, exercises in solutions:
        box = cells[i + 1]
        assert box.cell_type == "markdown" and box.id.endswith("-catches"), cell.id
        assert student_edition.SOLUTION_TAG in box.metadata.get("tags", [])
        assert box.source.startswith(f"````{{admonition}} {TITLE}\n:class: dropdown")
        bullets = [line for line in box.source.splitlines() if line.startswith("- ")]
        assert 3 <= len(bullets) <= 8, box.id
        checkers = {e.checker for e in exercises}
        for bug in BUG_ZOO.values():
            if bug.checker.__name__ in checkers:
                assert f"`{bug.name}`" in box.source, (box.id, bug.name)


def test_the_student_editions_have_no_catches_and_the_japanese_ones_are_translated():
    for path in (ROOT / "student" / "11_exercises.ipynb",
                 ROOT / "student" / "ja" / "11_exercises.ipynb"):  # fmt: skip
        assert not [
            c for c in _read(path).cells if c.get("id", "").endswith("-catches")
        ]
    english = {
        c.id: c.source
        for c in _read(ROOT / "solutions" / "11_exercises.ipynb").cells
        if c.get("id", "").endswith("-catches")
    }
    japanese = {
        c.id: c.source
        for c in _read(ROOT / "solutions" / "ja" / "11_exercises.ipynb").cells
        if c.get("id", "").endswith("-catches")
    }
    assert len(english) >= 25 and set(japanese) == set(english)
    for key, text in japanese.items():
        assert "<details open>" in text and TITLE not in text, key
        for line in text.splitlines():
            if line.startswith("- "):
                assert JAPANESE.search(line), (key, line)


def test_the_grader_refuses_the_solutions_edition():
    with pytest.raises(NotASubmission, match="the solutions edition of 11_exercises"):
        read_program(ROOT / "solutions" / "11_exercises.ipynb", NAMES)


PUBLISHED = {
    "def look_ahead_mask(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()": (
        "look_ahead_mask"
    )
}


def _snippet(code: str, name: str) -> Snippet:
    return Snippet(code, 3, f"the definition of {name} (cell 3)", {name})


def test_a_copied_answer_is_noted_and_a_rewritten_one_is_not():
    published = {
        canonical(ast.parse(code).body[0]): name for code, name in PUBLISHED.items()
    }
    copy = (
        "def look_ahead_mask(T):\n"
        '    """Mine."""\n'
        "    # True below the diagonal\n"
        "    return torch.ones(T, T,\n                      dtype=torch.bool).tril()"
    )
    renamed = (
        "def look_ahead_mask(n):\n    return torch.ones(n, n, dtype=torch.bool).tril()"
    )
    found = copied([_snippet(copy, "look_ahead_mask")], NAMES, published)
    assert found == {
        "look_ahead_mask": "the definition of look_ahead_mask (cell 3) is the "
        "published solution's code (comments, docstrings and layout aside)"
    }
    assert copied([_snippet(renamed, "look_ahead_mask")], NAMES, published) == {}
    # the published solution as the chapter names it, pasted in whole
    solution = "def look_ahead_mask_solution(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()"
    assert set(copied([_snippet(solution, "look_ahead_mask_solution")], NAMES,
                      published)) == {"look_ahead_mask"}  # fmt: skip


def test_every_published_solution_is_known_to_the_copy_check():
    assert set(published_solutions().values()) == NAMES


def test_the_guide_links_every_solutions_edition():
    guide = (ROOT / student_edition.GUIDE).read_text(encoding="utf8")
    for path in CHAPTERS:
        assert (
            f"[Open the solutions edition of {path.name} in Colab](https://colab."
            f"research.google.com/github/" in guide
        )
        assert f"/blob/main/solutions/{path.name})" in guide
