"""Write the Japanese notebooks from the chapters and the catalogues (never by hand).

``ja/chapters/<name>.ipynb`` is a chapter whose markdown cells are translated from
``locale/ja/LC_MESSAGES/chapters/<name>.po`` (each paragraph, heading, list item,
table cell and admonition title looked up by its msgid); code cells are the
chapter's own; its MyST reads as the Japanese book does (``colab_notebooks``: the
numbers, citations and boxes as plain Markdown). ``student/ja/<name>.ipynb`` is its
student edition (the chapter without its solutions, as ``book/student_edition.py``
makes them); ``solutions/ja/<name>.ipynb`` its solutions edition (every solution
shown, as ``book/solutions_edition.py`` makes them). Each has its own Colab badge
and install cell. The Japanese pages' Colab buttons open these files.
Usage::

    python book/ja_notebooks.py           # (re)write the stale ones
    python book/ja_notebooks.py --check   # list them and exit 1; change nothing
"""

from __future__ import annotations

import copy
import re
import sys
from functools import cache
from pathlib import Path

import nbformat
from colab_notebooks import render_notebook
from solutions_edition import solutions_notebook
from student_edition import SOLUTIONS_DIR, has_solutions, student_notebook
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

JA_CHAPTERS = Path("ja") / "chapters"
JA_STUDENT = Path("student") / "ja"
JA_SOLUTIONS = Path(SOLUTIONS_DIR) / "ja"
PO_DIR = ROOT / "locale" / "ja" / "LC_MESSAGES"
STUDENT_NOTE = (
    "**学生版**　`make student` が `chapters/{name}` から生成したノートブックである。"
    "解答はこのファイルに含まれていない。各スタブを埋めてセルを実行すると、その下の"
    "チェッカーが何が正しく何が誤っているかを示す。後のセルは、チェッカーを通過した"
    "あなたの解答を使い、それまではどの演習を先に解くべきかを示す。"
)
SPACE = re.compile(r"\s+")
OPTION = re.compile(r"^:[\w-]+:")


def normalise(text: str) -> str:
    return SPACE.sub(" ", text).strip()


@cache
def catalogue(page: str) -> dict[str, str]:
    """{normalised msgid: msgstr} of one page's catalogue (translated, not fuzzy)."""
    from babel.messages.pofile import read_po

    path = PO_DIR / f"{page}.po"
    if not path.exists():
        return {}
    with path.open("rb") as f:
        cat = read_po(f, locale="ja")
    return {
        normalise(m.id): m.string
        for m in cat
        if m.id and m.string and not m.fuzzy and isinstance(m.id, str)
    }


def _parser():
    from markdown_it.renderer import RendererHTML
    from myst_parser.config.main import MdParserConfig
    from myst_parser.parsers.mdit import create_md_parser

    config = MdParserConfig(
        enable_extensions={"amsmath", "colon_fence", "dollarmath", "attrs_inline"}
    )
    return create_md_parser(config, RendererHTML)


_MD = None


def blocks(text: str, offset: int = 0) -> list[tuple[int, int, str]]:
    """(first line, end line, source text) of every block of ``text`` that a catalogue
    translates: paragraphs, headings, list items, table cells, admonition titles;
    directive bodies are searched too."""
    global _MD
    if _MD is None:
        _MD = _parser()
    found = []
    lines = text.splitlines()
    tokens = _MD.parse(text)
    block_map = None
    for token in tokens:
        if token.map:
            block_map = token.map
        if token.type == "inline" and block_map and token.content.strip():
            found.append((offset + block_map[0], offset + block_map[1], token.content))
        elif token.type in ("fence", "colon_fence") and token.info.startswith("{"):
            name, _, title = token.info.partition("}")
            if title.strip():
                found.append((offset + token.map[0], offset + token.map[0] + 1, title))
            # the body starts after the fence line and its :option: lines
            start = token.map[0] + 1
            while start < len(lines) and OPTION.match(lines[start]):
                start += 1
            end = token.map[1] - 1  # without the closing fence
            body = "\n".join(lines[start:end])
            found += blocks(body, offset + start)
    return found


def _flexible(source: str) -> re.Pattern:
    """``source`` with any run of whitespace (a line break and indentation) allowed
    where it has whitespace."""
    words = SPACE.split(source.strip())
    return re.compile(r"\s+".join(re.escape(w) for w in words))


def translate_markdown(text: str, table: dict[str, str]) -> str:
    """``text`` with each block found in ``table`` replaced by its translation."""
    lines = text.splitlines(keepends=True)
    # from the last block up, so that earlier line numbers stay valid
    for first, end, source in sorted(blocks(text), key=lambda b: (-b[0], -b[1])):
        target = table.get(normalise(source))
        if target is None:
            continue
        span = "".join(lines[first:end])
        m = _flexible(source).search(span)
        if not m:
            continue
        span = span[: m.start()] + target + span[m.end() :]
        lines[first:end] = [span]
    return "".join(lines)


def ja_chapter(path: Path, link: str, url: str, branch: str) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    table = catalogue(f"chapters/{path.stem}")
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = translate_markdown(cell.source, table)
        elif cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    sync_notebook(nb, link, url, branch)
    nb.metadata.setdefault("transformer_edu", {})["language"] = "ja"
    page = path.relative_to(path.parent.parent).with_suffix("").as_posix()
    return render_notebook(nb, page, "ja")  # the book's numbers, citations, boxes


def notebooks(root: Path = ROOT) -> dict[Path, str]:
    """Every Japanese notebook's path and the text it must have."""
    url, branch, book = repository(root)

    def link(rel: Path) -> str:
        return colab_link(url, branch, rel.as_posix(), book)

    found = {}
    for path in chapter_paths(root):
        if not path.exists():
            continue
        rel = JA_CHAPTERS / path.name
        nb = ja_chapter(path, link(rel), url, branch)
        found[root / rel] = nbformat.writes(nb) + "\n"
        if has_solutions(nb):
            srel = JA_STUDENT / path.name
            student = student_notebook(
                copy.deepcopy(nb), path.name, link(srel), url, branch
            )
            note = next(c for c in student.cells if c.get("id") == "student-edition")
            note.source = STUDENT_NOTE.format(name=path.name)
            student.metadata["transformer_edu"]["language"] = "ja"
            found[root / srel] = nbformat.writes(student) + "\n"
            arel = JA_SOLUTIONS / path.name
            solutions = solutions_notebook(
                nb, path.name, link(arel), link(srel), url, branch, "ja"
            )
            found[root / arel] = nbformat.writes(solutions) + "\n"
    return found


def stale(root: Path = ROOT) -> list[str]:
    return stale_files(notebooks(root), root)


def write(root: Path = ROOT) -> list[Path]:
    return write_files(notebooks(root))


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, stale, write, "the Japanese notebooks are up to date",
                          argv)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
