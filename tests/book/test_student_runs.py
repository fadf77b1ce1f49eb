"""A student edition runs whenever its chapter runs.

nbval runs every chapter; `make test` runs only chapter 11's student edition (its
stubs meet the checkers). For the others this proves that dropping the solution cells
cannot break a cell the edition keeps: the edition is its chapter minus those cells
(tests/book/test_student_editions.py), and no kept code cell after a solution reads a name
that only solution cells define.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
EDITIONS = sorted((ROOT / "student").glob("*.ipynb"))
SOLUTION = "solution"


def _python(source: str) -> str:
    # IPython's shell escapes and magics are not Python: a `pass` in their place
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass"
        if line.lstrip().startswith(("!", "%"))
        else line
        for line in source.splitlines()
    )


def _defined(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _read(tree: ast.AST) -> set[str]:
    return {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def names_only_solutions_define(chapter: nbformat.NotebookNode) -> dict[str, set]:
    """Kept code cell id -> the names it reads that only solution cells define."""
    solution_only: set[str] = set()
    kept_defined = set(dir(builtins))
    found = {}
    for cell in chapter.cells:
        if cell.cell_type != "code":
            continue
        # the edition runs a cell's `student_source` in its place where it has one
        source = cell.metadata.get("student_source", cell.source)
        tree = ast.parse(_python(source))
        if SOLUTION in cell.metadata.get("tags", []):
            solution_only |= _defined(tree) - kept_defined
            continue
        missing = (_read(tree) - _defined(tree)) & solution_only
        if missing:
            found[cell.get("id", "?")] = missing
        kept_defined |= _defined(tree)
        solution_only -= _defined(tree)
    return found


@pytest.mark.parametrize("edition", EDITIONS, ids=lambda p: p.stem)
def test_no_kept_cell_needs_a_solution(edition):
    chapter = nbformat.read(ROOT / "chapters" / edition.name, as_version=4)
    assert names_only_solutions_define(chapter) == {}


def test_the_dependency_check_can_fail():
    nb = nbformat.v4.new_notebook()
    solution = nbformat.v4.new_code_cell("def answer():\n    return 1")
    solution.metadata["tags"] = [SOLUTION]
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1"),
        solution,
        nbformat.v4.new_code_cell("print(answer() + x)"),
    ]
    assert list(names_only_solutions_define(nb).values()) == [{"answer"}]
