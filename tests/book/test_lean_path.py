"""Every chapter keeps the lean-path rule of book/lean_path.py: the teaching code is
visible; set-up, plotting, glue and assertions are folded; a listing cell shows only
the package's code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lean_path import (  # book/ is on pythonpath
    OPTIONAL_LINE,
    check_cells,
    going_deeper_spans,
    instrumentation,
    off_path_problems,
    report,
)
from sync_colab import toc_notebooks

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = toc_notebooks(ROOT)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf8"))["cells"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_keeps_the_lean_path_rule(path):
    cells = _cells(path)
    problems = [
        f"cell {v.index} {list(v.tags)}: {v.problem}"
        for v in check_cells(cells)
        if v.problem
    ]
    assert not problems, f"{path.name}:\n" + "\n".join(problems)
    assert report(cells)["visible_code_chars"] > 0, f"{path.name} shows no code"


def _code(source: str, *tags: str) -> dict:
    return {"cell_type": "code", "source": source, "metadata": {"tags": list(tags)}}


def test_the_rule_can_fail():
    cells = [
        _code("x = attention(q, k, v)\nprint(x.shape)"),  # teaching: fine
        _code("assert x.shape == (2, 3)"),  # visible assertion
        _code("glue('ch_x', 0.5, display=False)", "hide-input"),  # fine
        _code("y = x + 1", "hide-input"),  # folded teaching code
        _code("y = x + 1", "hide-input", "setup"),  # declared set-up: fine
        _code("show_source(MultiHeadAttention)"),  # a listing left visible
        _code("show_source(MultiHeadAttention)", "remove-input"),  # fine
        _code("fig = go.Figure()\nfig.show()"),  # visible plotting
        _code("x = 1", "remove-input"),  # remove-input on a non-listing
        _code("%pip install x", "colab-install", "hide-input"),  # exempt
    ]
    bad = [(v.index, v.problem.split(":")[0]) for v in check_cells(cells) if v.problem]
    assert bad == [
        (1, "visible but holds assertion"),
        (3, "folded but holds no instrumentation (tag it setup if it is)"),
        (5, "a show_source cell must be tagged remove-input"),
        (7, "visible but holds plotting"),
        (8, "remove-input is for show_source cells only"),
    ]


def test_instrumentation_kinds():
    assert instrumentation("import torch") == {"set-up"}
    assert instrumentation("torch.testing.assert_close(a, b)") == {"assertion"}
    assert instrumentation("display(Markdown(table))") == {"glue"}
    assert instrumentation("go.Figure(data=[]).update_layout(title='x')") == {
        "plotting"
    }
    assert instrumentation("out = model(src, tgt)\nprint(out.shape)") == set()


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_keeps_the_going_deeper_rule(path):
    """A going-deeper section says it is optional, and a reader who skips it misses
    nothing the core's code goes on to use."""
    cells = _cells(path)
    problems = off_path_problems(cells)
    assert not problems, f"{path.name}:\n" + "\n".join(problems)
    r = report(cells)
    assert r["core_minutes"] <= r["reading_minutes"]


def _md(source: str) -> dict:
    return {"cell_type": "markdown", "source": source, "metadata": {}}


def test_the_going_deeper_rule_can_fail():
    ok = [
        _md("# 1. A chapter\n\nThe idea."),
        _md("## The core\n\nMore of it."),
        _code("x = 1"),
        _md(f"### Going deeper: a detail\n\n{OPTIONAL_LINE}\n\nIt."),
        _code("y = x + 2"),
        _md("## More core\n\nText."),
        _code("z = x + 1"),
        _md(f"## Going deeper: another\n\n{OPTIONAL_LINE}\n\nIt."),
        _code("w = z"),
        _md("## Summary\n\n- x"),
    ]
    assert off_path_problems(ok) == []
    assert [(t, level, span) for t, level, span in going_deeper_spans(ok)] == [
        ("Going deeper: a detail", 3, [3, 4]),
        ("Going deeper: another", 2, [7, 8]),
    ]
    r = report(ok)
    assert r["core_minutes"] < r["reading_minutes"]  # the details are not core
    unmarked = [*ok[:3], _md("### Going deeper: a detail\n\nIt."), *ok[4:]]
    too_deep = [
        *ok[:3],
        _md(f"#### Going deeper: a detail\n\n{OPTIONAL_LINE}"),
        *ok[4:],
    ]
    mid_cell = [*ok[:3], _md(f"Text.\n\n### Going deeper: a detail\n\n{OPTIONAL_LINE}"),
                *ok[4:]]  # fmt: skip
    needed = [*ok[:6], _code("z = y + 1"), *ok[7:]]
    assert off_path_problems(unmarked) == [
        f"'Going deeper: a detail': its heading cell lacks {OPTIONAL_LINE!r}"
    ]
    assert off_path_problems(too_deep) == [
        "'Going deeper: a detail': a going-deeper section is level 2 or 3"
    ]
    assert off_path_problems(mid_cell) == [
        "'Going deeper: a detail': its heading must begin its cell"
    ]
    assert off_path_problems(needed) == [
        "cell 6 reads 'y', which only 'Going deeper: a detail' binds"
    ]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_each_chapter_says_what_it_assumes(path):
    """The learning goals (what the chapter builds) end with what it assumes."""
    goals = [
        "".join(c["source"])
        for c in _cells(path)
        if c["cell_type"] == "markdown" and "## Learning goals" in "".join(c["source"])
    ]
    assert len(goals) == 1, f"{path.name}: one learning-goals cell"
    assert "**Before you start:**" in goals[0], (
        f"{path.name} does not say what it assumes"
    )
