"""Finding each student's notebook in a folder, and what of it the grader runs.

A folder of submissions holds notebooks (``ada.ipynb``: the student is ``ada``) or
folders, one per student, as learning platforms download them (``ada/…/any.ipynb``:
the student is ``ada``). Of a notebook the grader runs its imports, functions and
classes, its constants, and every other top-level assignment that one of those uses
(``device = torch.device(…)``, ``to_heads = lambda …``): what the notebook ran that
the answers need, and no training or check. Each statement runs on its own, so that
one that hangs or raises is named and the rest still load.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

CHAPTER = "11_exercises"  # the notebook whose exercises are graded
# a Colab badge or link names the notebook it opens: …/blob/main/student/11_….ipynb
_LINK = re.compile(r"/blob/[^/\s)]+/(?:[\w.-]+/)*(\d\d_[\w-]+)\.ipynb")


class NotASubmission(Exception):
    """The file is not a notebook of chapter 11 (the message says what it is)."""


@dataclass
class Snippet:
    """One top-level statement the grader runs, and what it defines."""

    code: str
    cell: int
    label: str  # e.g. "the definition of look_ahead_mask (cell 32)"
    defines: set[str] = field(default_factory=set)

    def order(self) -> dict:
        return {"code": self.code, "cell": self.cell, "label": self.label}


@dataclass
class Submission:
    student: str
    path: Path
    notes: list[str] = field(default_factory=list)


def find(folder: Path, names: set[str]) -> list[Submission]:
    """One submission per student: each notebook at the top of ``folder``, and each
    folder with notebooks anywhere below it (the one that names chapter 11, defines
    most exercise names and was saved last; the others are noted)."""
    found: dict[str, Submission] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix == ".ipynb":
            found[_unique(path.stem, found)] = Submission(path.stem, path)
        elif path.is_dir() and not path.name.startswith("."):
            notebooks = sorted(p for p in path.rglob("*.ipynb")
                               if ".ipynb_checkpoints" not in p.parts)  # fmt: skip
            if not notebooks:
                continue
            chosen = max(notebooks, key=lambda p: _score(p, names))
            sub = Submission(path.name, chosen)
            others = [str(p.relative_to(path)) for p in notebooks if p != chosen]
            if others:
                sub.notes.append(
                    f"graded {chosen.relative_to(path)}; also in the folder, not "
                    f"graded: {', '.join(others)}"
                )
            found[_unique(path.name, found)] = sub
    for key, sub in found.items():
        sub.student = key
    return list(found.values())


def _unique(name: str, taken: dict) -> str:
    if name not in taken:
        return name
    n = 2
    while f"{name}-{n}" in taken:
        n += 1
    return f"{name}-{n}"


def _score(path: Path, names: set[str]) -> tuple[int, int, float]:
    """Names the chapter, how many exercise names it defines, how recent."""
    try:
        nb = _load(path)
    except NotASubmission:
        return (-1, 0, 0.0)
    meta = (nb.get("metadata") or {}).get("transformer_edu") or {}
    code = "\n".join(_source(c) for c in nb["cells"] if isinstance(c, dict))
    defined = sum(bool(re.search(rf"\b(def|class)\s+{n}\b|\b{n}\s*=", code))
                  for n in names)  # fmt: skip
    return (int(meta.get("chapter") == CHAPTER), defined, path.stat().st_mtime)


def _load(path: Path) -> dict:
    try:
        nb = json.loads(path.read_text(encoding="utf8"))
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError(f"cells is a {type(cells).__name__}")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise NotASubmission(
            f"not a readable notebook: {type(e).__name__}: {str(e)[:120]}"
        ) from e
    return nb


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def chapter_of(nb: dict) -> tuple[str | None, str]:
    """The chapter a notebook says it belongs to, and how it says so."""
    meta = (nb.get("metadata") or {}).get("transformer_edu") or {}
    if meta.get("chapter"):
        return str(meta["chapter"]), "its metadata"
    for cell in nb["cells"]:
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
            m = _LINK.search(_source(cell))
            if m:
                return m.group(1), "its Colab link"
    return None, ""


def read_program(path: Path, names: set[str]) -> tuple[list[Snippet], list[str]]:
    """The statements to run (see the module's doc) and notes on cells skipped.

    ``names``: the names the exercises ask for. A notebook that names another
    chapter, or defines none of ``names``, is not a submission."""
    nb = _load(path)
    chapter, how = chapter_of(nb)
    if chapter is not None and chapter != CHAPTER:
        raise NotASubmission(
            f"a notebook of chapter {chapter} ({how}), not of {CHAPTER}"
        )
    statements, notes = [], []
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        code = _without_magics(_source(cell))
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            notes.append(f"cell {i} has a syntax error (line {e.lineno}): {e.msg}")
            continue
        for node in tree.body:
            statements.append((i, node, ast.get_source_segment(code, node) or ""))
    snippets = _needed(statements, names)
    if not any(s.defines & names for s in snippets):
        title = next(
            (line.strip() for c in nb["cells"]
             if isinstance(c, dict) and c.get("cell_type") == "markdown"
             for line in _source(c).splitlines() if line.startswith("# ")),
            "no title",
        )  # fmt: skip
        raise NotASubmission(
            f"not the notebook of {CHAPTER} ({title[:40]!r}): it defines none of the "
            f"{len(names)} names the exercises ask for ({', '.join(sorted(names)[:4])}, …)"
        )
    return snippets, notes


def _without_magics(source: str) -> str:
    """IPython's %magics and !shell lines are not Python: a `pass` in their place."""
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass"
        if line.lstrip().startswith(("%", "!"))
        else line
        for line in source.splitlines()
    )


_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                ast.ClassDef)  # fmt: skip
_ASSIGNMENTS = (ast.Assign, ast.AnnAssign, ast.AugAssign)


def _needed(statements: list, names: set[str]) -> list[Snippet]:
    """Imports and constants, and every definition or assignment that an answer
    needs (the names it reads, and theirs in turn), in the notebook's order. As when
    the notebook runs from the top, an answer's checker sees what the cells up to its
    own defined: a name rebound in a later cell is not the one it used."""
    kinds = [_kind(node) for _, node, _ in statements]
    kept = [k in ("import", "constant") for k in kinds]
    until = dict.fromkeys(names, float("inf"))  # name -> the last cell that reads it
    changed = True
    while changed:
        changed = False
        for j, (cell, node, _) in enumerate(statements):
            if kept[j] or kinds[j] == "other":
                continue
            defined = [n for n in _defined(node) if until.get(n, -1) >= cell]
            if defined:
                kept[j] = changed = True
                for name in _loaded(node):
                    until[name] = max(until.get(name, -1), cell)
    out = []
    for j, (cell, node, code) in enumerate(statements):
        if kept[j]:
            out.append(Snippet(code, cell, _label(node, cell), _defined(node)))
    return out


def _kind(node: ast.stmt) -> str:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import"
    if isinstance(node, _DEFINITIONS):
        return "definition"
    if isinstance(node, _ASSIGNMENTS) and _defined(node):
        value = getattr(node, "value", None)
        if value is None or isinstance(node, ast.AugAssign):
            return "assignment"
        try:
            ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return "assignment"
        return "constant"
    if isinstance(node, (ast.If, ast.Try)) and all(
        _kind(n) != "other" or isinstance(n, ast.Pass) for n in _body(node)
    ):
        return "assignment" if _defined(node) else "other"
    return "other"


def _body(node: ast.stmt) -> list[ast.stmt]:
    body = list(getattr(node, "body", [])) + list(getattr(node, "orelse", []))
    for handler in getattr(node, "handlers", []):
        body += handler.body
    return body + list(getattr(node, "finalbody", []))


def _defined(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    if isinstance(node, (ast.If, ast.Try)):
        return set().union(*(_defined(n) for n in _body(node)))
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [getattr(node, "target", None)]
    )
    out = set()
    for target in targets:
        for sub in ast.walk(target) if target is not None else ():
            if isinstance(sub, ast.Name):
                out.add(sub.id)
    return out


def _loaded(node: ast.stmt) -> set[str]:
    """The global names the statement reads: in a function or class, those that are
    not its own (parameters, locals); at the top level, every name read."""
    import symtable

    try:
        top = symtable.symtable(ast.unparse(node), "<cell>", "exec")
    except (SyntaxError, ValueError):
        return set()
    found = {s.get_name() for s in top.get_symbols() if s.is_referenced()}
    stack = list(top.get_children())
    while stack:
        table = stack.pop()
        stack += table.get_children()
        found |= {s.get_name() for s in table.get_symbols()
                  if s.is_referenced() and s.is_global()}  # fmt: skip
    return found


def _label(node: ast.stmt, cell: int) -> str:
    names = sorted(_defined(node))
    shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return f"the definition of {node.name} (cell {cell})"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return f"the import of {shown} (cell {cell})"
    return f"the assignment to {shown} (cell {cell})"
