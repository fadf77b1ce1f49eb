"""Chapters 1-10, 12 and 13: every end-of-chapter exercise has a hidden solution, and each
chapter's student edition (student/<chapter>.ipynb) holds none of them.

(nbval runs student/*.ipynb top to bottom in `make test`; test_grading.py checks that
every edition is up to date and covers chapter 11's checkers.)
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import student_edition  # book/ is on pythonpath

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("[01][0-9]*_*.ipynb"))  # 12b too
# an exercise's text cell; the first of the harder ones opens their going-deeper section
ITEM = re.compile(
    r"^(?:## Exercises\s+)?(?:### Going deeper:[^\n]*\n+\*[^\n]*\*\s+)?(\d+)\. ", re.S
)


def _has_exercises(path: Path) -> bool:
    cells = nbformat.read(path, as_version=4).cells
    return any(c.cell_type == "markdown" and "## Exercises" in c.source for c in cells)


# chapter 11 is all exercises, with checkers instead of solutions
EXERCISE_CHAPTERS = [
    p for p in CHAPTERS if not p.name.startswith("11_") and _has_exercises(p)
]


def _id(path: Path) -> str:
    return path.stem


def _is_solution(cell) -> bool:
    return student_edition.SOLUTION_TAG in cell.metadata.get("tags", [])


def _exercise_cells(path: Path) -> list:
    """The cells from the "## Exercises" heading to the end of the chapter."""
    cells = nbformat.read(path, as_version=4).cells
    start = next(
        i
        for i, c in enumerate(cells)
        if c.cell_type == "markdown" and "## Exercises" in c.source
    )
    return cells[start:]


def test_the_chapters_with_exercises_are_found():
    expected = [f"{n:02d}" for n in range(1, 11)] + ["12", "12b", "13"]
    assert [p.name.split("_")[0] for p in EXERCISE_CHAPTERS] == expected


@pytest.mark.parametrize("path", EXERCISE_CHAPTERS, ids=_id)
def test_every_exercise_is_followed_by_its_solution(path):
    cells = _exercise_cells(path)
    numbers = []
    for i, cell in enumerate(cells):
        text = cell.source.split("## Exercises")[-1].lstrip()
        m = ITEM.match(text) if cell.cell_type == "markdown" else None
        if m and not _is_solution(cell):
            numbers.append(int(m.group(1)))
            assert i + 1 < len(cells) and _is_solution(cells[i + 1]), (
                f"{path.name}: exercise {m.group(1)} has no solution right after it"
            )
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 6, numbers
    # the whole section is exercises and their solutions: nothing else was added
    assert all(c.cell_type == "markdown" or _is_solution(c) for c in cells)


@pytest.mark.parametrize("path", EXERCISE_CHAPTERS, ids=_id)
def test_solutions_are_hidden_in_the_html_book(path):
    for cell in _exercise_cells(path):
        if not _is_solution(cell):
            continue
        if cell.cell_type == "code":
            assert "hide-input" in cell.metadata["tags"], cell.source[:80]
        else:  # a MyST dropdown: the answer shows on a click; four backticks, so
            # that a ``` code block inside the answer does not close it
            assert cell.source.startswith("````{admonition} Answer\n:class: dropdown\n")
            assert cell.source.rstrip().endswith("\n````")
            inner = cell.source.split("\n")[3:-1]
            assert not any(line.startswith("````") for line in inner), path.name


@pytest.mark.parametrize("path", EXERCISE_CHAPTERS, ids=_id)
def test_the_student_edition_holds_no_solution(path):
    student_path = ROOT / student_edition.STUDENT_DIR / path.name
    student = nbformat.read(student_path, as_version=4)
    assert student.metadata["transformer_edu"] == {
        "edition": "student",
        "chapter": path.stem,
    }
    chapter = nbformat.read(path, as_version=4).cells
    shared = {  # lines the chapter also has outside its solutions
        line.strip()
        for c in chapter
        if not _is_solution(c)
        for line in c.source.splitlines()
    }
    in_student = {line.strip() for c in student.cells for line in c.source.splitlines()}
    checked = 0
    for cell in chapter:
        if _is_solution(cell):
            for line in cell.source.splitlines():
                if line.strip() and line.strip() not in shared:
                    assert line.strip() not in in_student, f"solution: {line.strip()}"
                    checked += 1
    assert checked > 40
    assert not any(_is_solution(c) for c in student.cells)
    assert "{admonition} Answer" not in "\n".join(c.source for c in student.cells)
    # every other cell of the chapter is there, in order (the edition adds its note,
    # and the note on the book's numbers: book/colab_notebooks.py)
    kept = [c.id for c in chapter if not _is_solution(c)]
    added = ("student-edition", "book-numbers")
    assert [c.id for c in student.cells if c.id not in added] == kept


@pytest.mark.parametrize("path", EXERCISE_CHAPTERS, ids=_id)
def test_the_guide_links_the_student_edition(path):
    student = nbformat.read(
        ROOT / student_edition.STUDENT_DIR / path.name, as_version=4
    )
    badge = student.cells[0].source
    assert f"blob/main/student/{path.name}" in badge
    guide = (ROOT / student_edition.GUIDE).read_text(encoding="utf8")
    assert badge.split("](")[-1] in guide  # the same Colab link in the guide


def test_every_student_edition_is_up_to_date():
    assert student_edition.stale(ROOT) == [], "run: make student"
