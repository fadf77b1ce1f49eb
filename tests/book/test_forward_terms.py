"""No term before the chapter that defines it (issue 42, item 1), as a ratchet.

The glossary (``locale/ja/glossary.yml``) names the chapter that defines each term
(``chapter:``). In the main line of chapters 1-10 (the prose before a chapter's
"Exercises", without solutions; code, maths, roles and link targets are not prose), a
term used in a chapter before its own is a forward reference. ``KNOWN`` lists those the
book still has, each (chapter, term): a new one fails, and so does one that is gone
but still listed, so that the list only shrinks.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import yaml
from sync_colab import toc_files  # book/ is on pythonpath

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "locale" / "ja" / "glossary.yml"
NOT_PROSE = [
    re.compile(p, re.S)
    for p in (
        r"```.*?```",  # fenced code
        r"\$\$.*?\$\$",  # display maths
        r"\{[\w:-]+\}`[^`]*`",  # a role: glue, cite, ref
        r"`[^`]*`",  # inline code
        r"\$[^$\n]*\$",  # inline maths
        r"\]\([^)]*\)",  # a link target
    )
]
EXERCISES = re.compile(r"^## Exercises\b", re.M)

# what the book still has (chapter, term); fix one, then remove it here
KNOWN: set[tuple[int, str]] = set()


def main_line(path: Path) -> str:
    """A chapter's prose before its exercises, without solutions or non-prose."""
    parts = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "markdown" or "solution" in cell.metadata.get("tags", []):
            continue
        m = EXERCISES.search(cell.source)
        if m:
            parts.append(cell.source[: m.start()])
            break
        parts.append(cell.source)
    text = "\n".join(parts)
    for pattern in NOT_PROSE:
        text = pattern.sub(" ", text)
    return text


def forward_references(root: Path = ROOT) -> dict[tuple[int, str], int]:
    """{(chapter, term): uses} of each term in a chapter before the one defining it."""
    terms = [
        t for t in yaml.safe_load(GLOSSARY.read_text(encoding="utf8"))["terms"]
        if t.get("chapter")
    ]  # fmt: skip
    found: dict[tuple[int, str], int] = {}
    for page in toc_files(root):
        m = re.match(r"chapters/(\d+)_", page)
        if not m or int(m.group(1)) > 10:
            continue
        n, text = int(m.group(1)), main_line(root / f"{page}.ipynb")
        for term in terms:
            if term["chapter"] <= n:
                continue
            for word in [term["en"], *term.get("also", [])]:
                pattern = r"\b" + re.escape(word) + r"(?:s|es)?\b"
                uses = len(re.findall(pattern, text, re.I))
                if uses:
                    key = (n, term["en"])
                    found[key] = found.get(key, 0) + uses
    return found


def test_no_new_term_before_its_chapter_and_the_list_only_shrinks():
    found = set(forward_references())
    assert not found - KNOWN, (
        f"used before the chapter that defines it: {found - KNOWN}"
    )
    assert not KNOWN - found, f"fixed: remove from KNOWN {KNOWN - found}"


def test_the_count_can_fail(tmp_path):
    (tmp_path / "chapters").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            "# 1. A chapter\n\nBeam search and `beam search` and $beam search$."
        ),
        nbformat.v4.new_markdown_cell("## Exercises\n\n1. Use beam search."),
    ]
    nbformat.write(nb, tmp_path / "chapters" / "01_a.ipynb")
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: chapters/01_a\n"
    )
    assert forward_references(tmp_path) == {(1, "beam search"): 1}
