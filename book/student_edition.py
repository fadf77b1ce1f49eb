"""Write the student edition of every chapter that has solutions: ``student/<name>``.

A chapter marks each solution with the cell tag ``solution`` (the book shows it behind
"Show code"). The student edition is the chapter without those cells: their code is
absent, not hidden. A later cell whose code needs a solution carries the code to run
instead in its metadata, ``student_source`` (it uses the student's answer once its
checker passes, and says "solve exercise N first" until then). The edition gets its
own Colab badge and install cell (``sync_colab``) and metadata naming its chapter,
which the grader checks; its markdown reads as the book's (``colab_notebooks``). Usage::

    python book/student_edition.py           # (re)write student/*.ipynb
    python book/student_edition.py --check   # list the stale ones and exit 1
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import nbformat
from colab_notebooks import render_notebook
from sync_colab import (
    ROOT,
    chapter_paths,
    colab_link,
    generator_main,
    repository,
    stale_files,
    sync_notebook,
    write_files,
)

STUDENT_DIR = "student"
SOLUTIONS_DIR = "solutions"  # the solutions editions (book/solutions_edition.py)
SOLUTION_TAG = "solution"
GUIDE = "teachers_guide.md"  # the page that links each student edition
NOTE = (
    "**Student edition.** Generated from `chapters/{name}` by `make student`: the "
    "solutions are not in this file. Fill in each stub and run its cell; the checker "
    "under it says what is right and what is not. Later cells use your answers once "
    "they pass, and tell you which exercise to solve first until then."
)


def has_solutions(nb: nbformat.NotebookNode) -> bool:
    return any(SOLUTION_TAG in c.metadata.get("tags", []) for c in nb.cells)


def student_notebook(
    chapter: nbformat.NotebookNode, name: str, link: str, url: str, branch: str
) -> nbformat.NotebookNode:
    """The student edition of one chapter notebook (``name``: its file name)."""
    nb = copy.deepcopy(chapter)
    cells = []
    for cell in nb.cells:
        if SOLUTION_TAG in cell.metadata.get("tags", []):
            continue
        replacement = cell.metadata.pop("student_source", None)
        if replacement is not None:
            cell.source = replacement
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    nb.cells = cells
    sync_notebook(nb, link, url, branch)  # the badge first, then the install cell
    note = nbformat.v4.new_markdown_cell(NOTE.format(name=name))
    note.id = "student-edition"
    title = next(i for i, c in enumerate(nb.cells) if c.source.lstrip().startswith("#"))
    nb.cells.insert(title + 1, note)
    nb.metadata["transformer_edu"] = {"edition": "student", "chapter": Path(name).stem}
    return nb


def editions(root: Path = ROOT) -> dict[Path, str]:
    """Each student edition's path and the text it must have."""
    url, branch, book = repository(root)
    found = {}
    for path in chapter_paths(root):
        if not path.exists():
            continue
        chapter = nbformat.read(path, as_version=4)
        if not has_solutions(chapter):
            continue
        page = path.relative_to(root).with_suffix("").as_posix()
        chapter = render_notebook(chapter, page, "en", root)  # reads as the book
        target = root / STUDENT_DIR / path.name
        rel = target.relative_to(root).as_posix()
        link = colab_link(url, branch, rel, book)
        nb = student_notebook(chapter, path.name, link, url, branch)
        found[target] = nbformat.writes(nb) + "\n"
    return found


def stale(root: Path = ROOT) -> list[str]:
    """What is out of date: student editions, and the guide's Colab badges."""
    out = stale_files(editions(root), root)
    guide = root / GUIDE
    if guide.exists() and guide.read_text(encoding="utf8") != guide_text(root):
        out.append(f"{GUIDE}: its student-edition Colab badges are out of date")
    return out


# one line per edition: a text link, not Colab's badge image, which the book would
# load from Colab's host (the book loads nothing from another host)
BADGE_LINE = re.compile(
    r"^(?:- )?\[!?\[?Open the (student|solutions) edition of (\S+) in Colab\].*$", re.M
)
FOLDER = {"student": STUDENT_DIR, "solutions": SOLUTIONS_DIR}


def guide_text(root: Path = ROOT) -> str:
    """The guide with each student- and solutions-edition link pointing where
    _config.yml says."""
    url, branch, book = repository(root)
    text = (root / GUIDE).read_text(encoding="utf8")

    def badge(m: re.Match) -> str:
        edition, name = m.group(1), m.group(2)
        rel = f"{FOLDER[edition]}/{name}"
        link = colab_link(url, branch, rel, book)
        return f"- [Open the {edition} edition of {name} in Colab]({link})"

    return BADGE_LINE.sub(badge, text)


def write(root: Path = ROOT) -> list[Path]:
    """(Re)write the stale editions and the guide's badges; returns what changed."""
    changed = write_files(editions(root))
    guide = root / GUIDE
    if guide.exists() and guide.read_text(encoding="utf8") != guide_text(root):
        guide.write_text(guide_text(root), encoding="utf8")
        changed.append(guide)
    return changed


def main(argv: list[str] | None = None) -> int:
    return generator_main(
        __doc__, stale, write, "student editions are up to date", argv
    )


if __name__ == "__main__":
    sys.exit(main())
