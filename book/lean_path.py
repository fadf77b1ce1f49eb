"""The lean path through a chapter: which code cells the book shows, and which it folds.

The rule, written once (tests/book/test_lean_path.py holds every chapter to it):

- **Visible** (no tag): the code a reader needs to follow the idea. It holds no
  instrumentation: no import, no ``glue``/``Markdown`` (numbers for the prose), no
  ``assert``/``assert_close`` (the checks that prove the prose), no plotting
  (``go.``, ``px.``, ``plt.``, ``make_subplots``, ``viz.``, a figure's ``show`` /
  ``update_layout`` / ``add_trace`` ...).
- **Folded** (``hide-input``: one click opens it; its output stays visible): set-up,
  plotting, glue and assertions. A folded cell holds at least one such statement,
  or says with the tag ``setup`` that it is set-up code the idea does not need.
- **Listing** (``remove-input``): a cell that only calls ``show_source(...)``; the
  reader sees the package's code it displays, not the call.
- Exempt: the Colab install cell (``colab-install``), solutions (``solution``: their own
  rule, tests/book/test_student_editions.py), removed cells (``remove-cell``).

The core path (issue 42): a section whose heading starts ``Going deeper:`` (the
Japanese edition's 「さらに深く：」) is optional. It is a level-2 or level-3 section and
runs to the next heading of its level or above. Its heading begins a cell that says so
in ``OPTIONAL_LINE``; the book draws a bar beside it and folds it behind a button
(book_extension: the class ``going-deeper``; _static/going_deeper.js), so it can stand
where its subject is. A reader who skips it loses nothing the core needs: no code
cell after it on the core path reads a name that only a going-deeper section defines
(``off_path_problems``).

``python book/lean_path.py`` prints, per chapter, the visible code characters, the
reading time of the visible text (prose words and visible code words at 200 words a
minute) and of its core (the same, less the going-deeper sections), and
``--before REV`` the same for the chapters at a git revision.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = {"hide-input", "hide-cell"}
REMOVED = {"remove-input", "remove-cell"}
EXEMPT = {"colab-install", "solution", "remove-cell"}
PLOT_ROOTS = {"go", "px", "plt", "make_subplots", "viz", "ff"}
PLOT_METHODS = {
    "show", "update_layout", "add_trace", "add_traces", "update_xaxes",
    "update_yaxes", "add_annotation", "add_shape", "add_hline", "add_vline",
    "update_traces", "add_hrect", "add_vrect", "savefig", "imshow",
}  # fmt: skip
WORDS_PER_MINUTE = 200
GOING_DEEPER = ("Going deeper:", "さらに深く：")  # a heading's start, each edition
OPTIONAL_LINE = "*Off the core path: skip this section on a first reading.*"
HEADING = re.compile(r"^(#{1,6}) +(.*)$", re.MULTILINE)
MAGIC = re.compile(r"^\s*[%!].*$", re.MULTILINE)


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain ('' for anything else)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):  # go.Figure(...).show(): the chain's root call
        inner = dotted(node.func)
        return ".".join([inner, *reversed(parts)]) if inner else ""
    return ".".join(reversed(parts))


def instrumentation(source: str) -> set[str]:
    """The kinds of instrumentation a code cell holds: 'set-up', 'glue',
    'assertion', 'plotting', 'listing' (a ``show_source`` call)."""
    tree = ast.parse(MAGIC.sub("", source))
    kinds: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            kinds.add("set-up")
        elif isinstance(node, ast.Assert):
            kinds.add("assertion")
        elif isinstance(node, ast.Call):
            name = dotted(node.func)
            last = name.rsplit(".", 1)[-1]
            if last in ("glue", "Markdown"):
                kinds.add("glue")
            elif last.startswith("assert"):
                kinds.add("assertion")
            elif last == "show_source":
                kinds.add("listing")
            elif name.split(".", 1)[0] in PLOT_ROOTS or last in PLOT_METHODS:
                kinds.add("plotting")
    return kinds


def only_listings(source: str) -> bool:
    """True when every statement of the cell is a ``show_source(...)`` call."""
    body = ast.parse(MAGIC.sub("", source)).body
    return bool(body) and all(
        isinstance(s, ast.Expr)
        and isinstance(s.value, ast.Call)
        and dotted(s.value.func).rsplit(".", 1)[-1] == "show_source"
        for s in body
    )


@dataclass
class CellVerdict:
    index: int
    tags: tuple[str, ...]
    problem: str | None


def check_cells(cells: list[dict]) -> list[CellVerdict]:
    """Every code cell against the rule; ``problem`` is None when it keeps it."""
    verdicts = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        source = "".join(cell["source"])
        if tags & EXEMPT or not source.strip():
            continue
        kinds = instrumentation(source)
        problem = None
        if only_listings(source):
            if "remove-input" not in tags:
                problem = "a show_source cell must be tagged remove-input"
        elif "remove-input" in tags:
            problem = "remove-input is for show_source cells only"
        elif "listing" in kinds:
            problem = "show_source goes in a cell of its own (remove-input)"
        elif tags & HIDDEN:
            if not kinds and "setup" not in tags:
                problem = "folded but holds no instrumentation (tag it setup if it is)"
        elif kinds:
            problem = (
                f"visible but holds {', '.join(sorted(kinds))}: fold it or split it"
            )
        verdicts.append(CellVerdict(i, tuple(sorted(tags)), problem))
    return verdicts


def visible_code(cells: list[dict]) -> str:
    return "\n".join(
        "".join(c["source"])
        for c in cells
        if c["cell_type"] == "code"
        and not set(c.get("metadata", {}).get("tags", [])) & (HIDDEN | REMOVED | EXEMPT)
    )


def prose(cells: list[dict]) -> str:
    return "\n".join(
        "".join(c["source"])
        for c in cells
        if c["cell_type"] == "markdown"
        and not set(c.get("metadata", {}).get("tags", [])) & {"remove-cell", "solution"}
    )


def headings(cell: dict) -> list[tuple[int, str]]:
    """(level, title) of each Markdown heading in a markdown cell."""
    if cell["cell_type"] != "markdown":
        return []
    return [
        (len(m[1]), m[2].strip()) for m in HEADING.finditer("".join(cell["source"]))
    ]


def going_deeper(title: str) -> bool:
    return title.startswith(GOING_DEEPER)


def going_deeper_spans(cells: list[dict]) -> list[tuple[str, int, list[int]]]:
    """Each going-deeper section as (title, level, the indices of its cells): from
    its heading's cell to the cell before the next heading of its level or above."""
    out: list[tuple[str, int, list[int]]] = []
    current: tuple[str, int, list[int]] | None = None
    for i, cell in enumerate(cells):
        found = headings(cell)
        if current and any(level <= current[1] for level, _ in found):
            current = None
        if current is None:
            deeper = [(level, t) for level, t in found if going_deeper(t)]
            if deeper:
                current = (deeper[0][1], deeper[0][0], [])
                out.append(current)
        if current:
            current[2].append(i)
    return out


def core(cells: list[dict]) -> list[dict]:
    """The cells of the core path: all but the going-deeper sections'."""
    off = {i for _, _, span in going_deeper_spans(cells) for i in span}
    return [c for i, c in enumerate(cells) if i not in off]


def _names(source: str) -> tuple[set[str], set[str]]:
    """(the names a code cell binds, the names it reads)."""
    tree = ast.parse(MAGIC.sub("", source))
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store | ast.Del) else read).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):  # a parameter: a local name
            bound.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return bound, read


def off_path_problems(cells: list[dict]) -> list[str]:
    """Where the chapter breaks the going-deeper rule: a going-deeper heading outside
    levels 2 and 3, or not at the start of its cell, or in a cell without
    ``OPTIONAL_LINE``; or a core code cell after a going-deeper section that reads a
    name only going-deeper sections bind (a reader who skipped it would miss it)."""
    problems = []
    for cell in cells:
        text = "".join(cell["source"])
        for k, (level, title) in enumerate(headings(cell)):
            if not going_deeper(title):
                continue
            if level not in (2, 3):
                problems.append(f"{title!r}: a going-deeper section is level 2 or 3")
            if k or not text.lstrip().startswith("#"):
                problems.append(f"{title!r}: its heading must begin its cell")
            if OPTIONAL_LINE not in text:
                problems.append(f"{title!r}: its heading cell lacks {OPTIONAL_LINE!r}")
    spans = going_deeper_spans(cells)
    off = {i: title for title, _, span in spans for i in span}
    core_bound: set[str] = set()
    deeper_bound: dict[str, str] = {}
    for i, cell in enumerate(cells):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] != "code" or tags & EXEMPT:
            continue
        bound, read = _names("".join(cell["source"]))
        if i in off:
            for name in bound:
                deeper_bound.setdefault(name, off[i])
            continue
        for name in sorted(read - core_bound - bound):
            if name in deeper_bound:
                problems.append(
                    f"cell {i} reads {name!r}, which only {deeper_bound[name]!r} binds"
                )
        core_bound |= bound
    return problems


def report(cells: list[dict]) -> dict:
    code, text = visible_code(cells), prose(cells)
    all_code = sum(len("".join(c["source"])) for c in cells if c["cell_type"] == "code")
    words = len(text.split()) + len(code.split())
    kept = core(cells)
    core_words = len(prose(kept).split()) + len(visible_code(kept).split())
    return {
        "visible_code_chars": len(code),
        "all_code_chars": all_code,
        "prose_words": len(text.split()),
        "reading_minutes": round(words / WORDS_PER_MINUTE, 1),
        "core_minutes": round(core_words / WORDS_PER_MINUTE, 1),
    }


def chapters_at(rev: str | None) -> dict[str, list[dict]]:
    out = {}
    if rev is None:
        for path in sorted((ROOT / "chapters").glob("*.ipynb")):
            out[path.stem] = json.loads(path.read_text(encoding="utf8"))["cells"]
        return out
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", rev, "chapters/"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for name in sorted(n for n in names if n.endswith(".ipynb")):
        text = subprocess.run(
            ["git", "show", f"{rev}:{name}"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        out[Path(name).stem] = json.loads(text)["cells"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="a git revision to compare with")
    args = parser.parse_args(argv)
    now = {k: report(v) for k, v in chapters_at(None).items()}
    before = (
        {k: report(v) for k, v in chapters_at(args.before).items()}
        if args.before
        else {}
    )
    print(
        f"{'chapter':34} {'visible code':>14} {'of all code':>12} {'reading min':>12}"
        f" {'core min':>12}"
    )
    totals = {"": [0.0, 0.0], "at --before": [0.0, 0.0]}
    for name, r in now.items():
        b = before.get(name)
        vis = f"{r['visible_code_chars']:,}"
        mins, core_mins = f"{r['reading_minutes']}", f"{r['core_minutes']}"
        if b:
            vis = f"{b['visible_code_chars']:,} → {vis}"
            mins = f"{b['reading_minutes']} → {mins}"
            core_mins = f"{b['core_minutes']} → {core_mins}"
        print(
            f"{name:34} {vis:>14} {r['all_code_chars']:>12,} {mins:>12} {core_mins:>12}"
        )
        if name[:2] <= "09":  # the core chapters, 1 to 9
            for key, rep in (("", r), ("at --before", b)):
                if rep:
                    totals[key][0] += rep["reading_minutes"]
                    totals[key][1] += rep["core_minutes"]
    for key, (everything, kept) in totals.items():
        if everything:
            print(f"chapters 1-9{' ' + key if key else ''}: reading {everything:.1f} min,"
                  f" core {kept:.1f} min ({kept / everything:.0%})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
