"""Structural checks of the chapter notebooks (fast; nothing is executed here).

nbval runs them (`make test` passes chapters/ with --nbval-lax); the book build runs
them again. These tests check what a run cannot: how they are committed, the Colab
cells, and the parts every chapter must have.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from sync_colab import problems as colab_problems  # book/ is on pythonpath
from sync_colab import toc_files, toc_notebooks

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = toc_notebooks(ROOT)
REQUIRED_HEADINGS = ("learning goals", "summary", "exercises")
PLOTLY_CALL = re.compile(
    r"\bviz\.(heatmap|heatmap_slider|lines_slider|attention_heatmaps)\s*\("
    r"|\bgo\.Figure\s*\(|\bpx\.\w+\s*\(|\bmake_subplots\s*\("
)
# a control the reader moves: a plotly slider / dropdown / buttons (works with no
# kernel), or an ipywidget (which then says beside it that it needs a kernel)
CONTROL = re.compile(
    r"\bviz\.(explorer|heatmap_slider|lines_slider|attention_heatmaps)\s*\("
    r"|\b(sliders|updatemenus)\s*=|\binteract(ive|_manual)?\b|\bwidgets\.\w+\("
)
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*)$", re.MULTILINE)


def _id(path: Path) -> str:
    return path.stem


def _read(path: Path) -> nbformat.NotebookNode:
    if not path.exists():
        pytest.fail(f"{path.relative_to(ROOT)} is in _toc.yml but does not exist")
    return nbformat.read(path, as_version=4)


def test_toc_lists_chapters():
    assert toc_files(ROOT)[0] == "intro"
    assert CHAPTERS, "_toc.yml lists no notebook under chapters/"


def test_every_toc_chapter_exists():
    missing = [str(p.relative_to(ROOT)) for p in CHAPTERS if not p.exists()]
    assert not missing, f"in _toc.yml but missing: {missing}"


def test_every_chapter_notebook_is_in_the_toc():
    # only_build_toc_files: a notebook left out of _toc.yml silently leaves the book
    stray = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "chapters").glob("*.ipynb")
        if p not in CHAPTERS
    )
    assert not stray, f"chapters/ notebooks missing from _toc.yml: {stray}"


def missing_parts(nb: nbformat.NotebookNode) -> list[str]:
    """What a chapter lacks of the parts every chapter must have."""
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    headings = [h.lower() for h in HEADING.findall(markdown)]
    lacks = [
        f'a heading with "{name}"'
        for name in REQUIRED_HEADINGS
        if not any(name in h for h in headings)
    ]
    if not PLOTLY_CALL.search(code):
        lacks.append("a plotly figure (viz.heatmap..., go.Figure, px.*)")
    if not CONTROL.search(code):
        lacks.append("a control (a plotly slider, dropdown or buttons, or a widget)")
    return lacks


def committed_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """Cells committed with outputs or execution counts."""
    return [
        f"cell {i}"
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count is not None)
    ]


@pytest.mark.parametrize("path", CHAPTERS, ids=_id)
def test_chapter_is_committed_without_outputs(path):
    nb = _read(path)
    nbformat.validate(nb)
    dirty = committed_outputs(nb)
    assert not dirty, f"{path.name}: outputs or execution counts in {dirty}"


@pytest.mark.parametrize("path", CHAPTERS, ids=_id)
def test_chapter_uses_the_python3_kernel(path):
    spec = _read(path).metadata.get("kernelspec", {})
    assert spec.get("name") == "python3", f"{path.name}: kernelspec {spec}"


@pytest.mark.parametrize("path", CHAPTERS, ids=_id)
def test_chapter_colab_cells_agree_with_config(path):
    found = colab_problems(path, ROOT)
    assert not found, "; ".join(found) + " (run: python book/sync_colab.py)"


@pytest.mark.parametrize("path", CHAPTERS, ids=_id)
def test_chapter_has_the_required_parts(path):
    lacks = missing_parts(_read(path))
    assert not lacks, f"{path.name} lacks: " + ", ".join(lacks)


@pytest.mark.parametrize("path", CHAPTERS, ids=_id)
def test_chapter_sets_the_figure_defaults_once_before_any_figure(path):
    # importing transformer_edu.viz changes nothing; a chapter calls viz.setup()
    code = [c.source for c in _read(path).cells if c.cell_type == "code"]
    calls = [i for i, src in enumerate(code) if "viz.setup()" in src]
    assert len(calls) == 1, f"viz.setup() in {len(calls)} code cells, expected 1"
    figures = [i for i, src in enumerate(code) if PLOTLY_CALL.search(src)]
    assert not figures or calls[0] <= figures[0], "a figure is drawn before setup"


def test_structural_checks_can_fail():
    bare = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# Title\n\n## Summary"),
            nbformat.v4.new_code_cell("x = 1", execution_count=1),
        ]
    )
    assert missing_parts(bare) == [
        'a heading with "learning goals"',
        'a heading with "exercises"',
        "a plotly figure (viz.heatmap..., go.Figure, px.*)",
        "a control (a plotly slider, dropdown or buttons, or a widget)",
    ]
    assert committed_outputs(bare) == ["cell 1"]


def test_sync_colab_writes_cells_that_follow_the_config(tmp_path):
    import sync_colab

    (tmp_path / "chapters").mkdir()
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n  - file: chapters/01_x\n"
    )
    config = "repository:\n  url: https://github.com/{}/book\n  branch: main\n"
    (tmp_path / "_config.yml").write_text(config.format("me"))
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# 01 X"),
            nbformat.v4.new_code_cell("print(1)"),
        ]
    )
    path = tmp_path / "chapters" / "01_x.ipynb"
    nbformat.write(nb, path)
    assert len(sync_colab.problems(path, tmp_path)) == 2

    assert sync_colab.sync([path], tmp_path) == [path]
    cells = nbformat.read(path, as_version=4).cells
    assert [c.cell_type for c in cells] == ["markdown", "markdown", "code", "code"]
    # a chapter's badge opens its reading copy (book/colab_notebooks.py)
    assert (
        "colab.research.google.com/github/me/book/blob/main/en/chapters/01_x.ipynb"
        in (cells[0].source)
    )
    assert "git+https://github.com/me/book@main" in cells[2].source
    assert cells[3].source == "print(1)"
    assert sync_colab.problems(path, tmp_path) == []
    assert sync_colab.sync([path], tmp_path) == []  # idempotent

    (tmp_path / "_config.yml").write_text(config.format("you"))
    assert len(sync_colab.problems(path, tmp_path)) == 2
