"""Write the solutions edition of every chapter that has solutions: ``solutions/<name>``.

For a learner who works alone: the chapter as its reading copy has it
(``colab_notebooks``: the book's numbers, citations and boxes as plain Markdown), with
every cell tagged ``solution`` shown, not folded: the worked solutions' code is no
longer hidden and each answer's ``<details>`` box is open. Under each exercise of
chapter 11 a box says what its checker catches (the chapter's cells ending in
``-catches``, tagged ``solution`` like the solutions, so the student edition has none
of them). A note after the title says what the edition is, points to the student
edition to try first, and tells a teacher where to read how to keep a graded class
apart from it. The edition gets its own Colab badge and install cell (``sync_colab``)
and metadata naming its chapter and edition (the grader refuses it as a submission).
The Japanese twins, ``solutions/ja/<name>``, are written by ``book/ja_notebooks.py``.
Usage::

    python book/solutions_edition.py           # (re)write solutions/*.ipynb
    python book/solutions_edition.py --check   # list the stale ones and exit 1
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import nbformat
from colab_notebooks import en_chapter, references_page
from student_edition import SOLUTION_TAG, SOLUTIONS_DIR, STUDENT_DIR, has_solutions
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

NOTE_ID = "solutions-edition"
NOTE = {
    "en": (
        "**Solutions edition.** Generated from `chapters/{name}` by `make student`: "
        "the whole chapter, with every exercise's worked solution and answer shown"
        "{catches}. Try each exercise first in the [student edition]({student}), which "
        "has none of them, and come back here to compare. Teachers: "
        "[the teacher's guide]({guide}) says how to keep a graded class apart from this "
        "edition."
    ),
    "ja": (
        "**解答編**　`make student` が `chapters/{name}` から生成したノートブックである。"
        "章の全体に、各演習の解答例と答えをすべて開いた形で載せている{catches}。"
        "まず[学生版]({student})（解答を含まない）で各演習に取り組み、"
        "そのあとここで見比べること。教師へ：採点するクラスをこの解答編から切り離す方法は、"
        "[教師のための手引き]({guide})にある。"
    ),
}
CATCHES = {
    "en": ", and under each exercise what its checker catches",
    "ja": "。各演習の下には、そのチェッカーが見抜く誤りも示す",
}
DETAILS = re.compile(r"<details>(?=\s*<summary>)")


def has_catches(nb: nbformat.NotebookNode) -> bool:
    return any(str(c.get("id", "")).endswith("-catches") for c in nb.cells)


def solutions_notebook(
    chapter: nbformat.NotebookNode,
    name: str,
    link: str,
    student: str,
    url: str,
    branch: str,
    lang: str = "en",
) -> nbformat.NotebookNode:
    """The solutions edition of one chapter's reading copy (``name``: its file name;
    ``student``: where its student edition opens)."""
    nb = copy.deepcopy(chapter)
    for cell in nb.cells:
        if SOLUTION_TAG not in cell.metadata.get("tags", []):
            continue
        if cell.cell_type == "code":
            cell.metadata["tags"] = [
                t for t in cell.metadata["tags"] if t != "hide-input"
            ]
        else:
            cell.source = DETAILS.sub("<details open>", cell.source)
    sync_notebook(nb, link, url, branch)  # the badge first, then the install cell
    catches = CATCHES[lang] if has_catches(nb) else ""
    note = nbformat.v4.new_markdown_cell(
        NOTE[lang].format(
            name=name, catches=catches, student=student, guide=guide_section(lang)
        )
    )
    note.id = NOTE_ID
    title = next(i for i, c in enumerate(nb.cells) if c.source.lstrip().startswith("#"))
    nb.cells.insert(title + 1, note)
    meta = nb.metadata.setdefault("transformer_edu", {})
    meta.update({"edition": "solutions", "chapter": Path(name).stem})
    if lang != "en":
        meta["language"] = lang
    return nb


def guide_section(lang: str, root: Path = ROOT) -> str:
    """The teacher's guide's section on the solutions, where the book is published."""
    page = references_page(root, lang).removesuffix("bibliography.html")
    return f"{page}teachers_guide.html#worked-solutions"


def editions(root: Path = ROOT) -> dict[Path, str]:
    """Each English solutions edition's path and the text it must have."""
    url, branch, book = repository(root)
    found = {}
    for path in chapter_paths(root):
        if not path.exists():
            continue
        if not has_solutions(nbformat.read(path, as_version=4)):
            continue
        rel = f"{SOLUTIONS_DIR}/{path.name}"
        student = colab_link(url, branch, f"{STUDENT_DIR}/{path.name}", book)
        link = colab_link(url, branch, rel, book)
        nb = solutions_notebook(
            en_chapter(path, root), path.name, link, student, url, branch
        )
        found[root / rel] = nbformat.writes(nb) + "\n"
    return found


def stale(root: Path = ROOT) -> list[str]:
    return stale_files(editions(root), root)


def write(root: Path = ROOT) -> list[Path]:
    return write_files(editions(root))


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, stale, write, "solutions editions are up to date",
                          argv)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
