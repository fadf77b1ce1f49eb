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
import copy
import functools
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

CHAPTER = "11_exercises"  # the notebook whose exercises are graded
# what the grader reads of one notebook: beyond these it is refused, not parsed (the
# student edition is 0.2 MB, 99 cells, 40 kB of code; a notebook saved with its plots
# a few MB)
MAX_BYTES = 64 << 20
MAX_CELLS = 5_000
MAX_CODE = 2 << 20  # characters of code, every cell together
MAX_STATEMENTS = 10_000
# cell magics whose body IPython runs as Python in the notebook's namespace
_RUNS_ITS_BODY = ("time", "capture", "timeit")
# a Colab badge or link names the notebook it opens: …/blob/main/student/11_….ipynb
_LINK = re.compile(r"/blob/[^/\s)]+/(?:[\w.-]+/)*(\d\d_[\w-]+)\.ipynb")


class NotASubmission(Exception):
    """The file is not a notebook of chapter 11 (the message says what it is)."""


@dataclass
class Snippet:
    """One top-level statement the grader runs, and what it defines."""

    code: str
    cell: int
    label: str  # e.g. "the definition of look_ahead_mask (cell 33)": from 1
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
            name = readable(path.stem)
            found[_unique(name, found)] = Submission(name, path)
        elif path.is_dir() and not path.name.startswith("."):
            notebooks = sorted(p for p in path.rglob("*.ipynb")
                               if ".ipynb_checkpoints" not in p.parts)  # fmt: skip
            if not notebooks:
                continue
            chosen = max(notebooks, key=lambda p: _score(p, names))
            sub = Submission(readable(path.name), chosen)
            others = [readable(str(p.relative_to(path)))
                      for p in notebooks if p != chosen]  # fmt: skip
            if others:
                sub.notes.append(
                    f"graded {chosen.relative_to(path)}; also in the folder, not "
                    f"graded: {', '.join(others)}"
                )
            found[_unique(sub.student, found)] = sub
    for key, sub in found.items():
        sub.student = key
    return list(found.values())


def readable(name: str) -> str:
    """A file name as text: names that are not UTF-8 (unzip extracts a Windows zip's
    names as Shift-JIS bytes) read as Windows wrote them, else with their bytes
    escaped; control characters escaped."""
    raw = os.fsencode(name)
    for encoding in ("utf8", "cp932", "cp1252"):
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        if text.isprintable() or encoding == "utf8":
            name = text
            break
    else:
        name = raw.decode("utf8", "backslashreplace")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in name)[:200]


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
    meta = meta if isinstance(meta, dict) else {}
    code = "\n".join(_source(c) for c in nb["cells"] if isinstance(c, dict))
    defined = sum(bool(re.search(rf"\b(def|class)\s+{n}\b|\b{n}\s*=", code))
                  for n in names)  # fmt: skip
    return (int(meta.get("chapter") == CHAPTER), defined, path.stat().st_mtime)


def _load(path: Path) -> dict:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ValueError(f"{size / 2**20:.0f} MB, over the grader's "
                             f"{MAX_BYTES >> 20} MB")  # fmt: skip
        nb = json.loads(path.read_text(encoding="utf8"))
        if not isinstance(nb, dict):
            raise TypeError(f"the file holds a {type(nb).__name__}")
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError(f"cells is a {type(cells).__name__}")
        if len(cells) > MAX_CELLS:
            raise ValueError(f"{len(cells):,} cells, over the grader's {MAX_CELLS:,}")
        if not isinstance(nb.get("metadata", {}), dict):
            raise TypeError("its metadata is not a dict")
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError,
            RecursionError, MemoryError) as e:  # fmt: skip
        raise NotASubmission(
            f"not a readable notebook: {type(e).__name__}: {str(e)[:120]}"
        ) from e
    return nb


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(line for line in source if isinstance(line, str))
    return source if isinstance(source, str) else ""


def chapter_of(nb: dict) -> tuple[str | None, str]:
    """The chapter a notebook says it belongs to, and how it says so."""
    meta = (nb.get("metadata") or {}).get("transformer_edu") or {}
    meta = meta if isinstance(meta, dict) else {}
    if meta.get("chapter"):
        return str(meta["chapter"]), "its metadata"
    for cell in nb["cells"]:
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
            m = _LINK.search(_source(cell))
            if m:
                return m.group(1), "its Colab link"
    return None, ""


def edition_of(nb: dict) -> str | None:
    """The edition a notebook's metadata names ("student", "solutions"), if any."""
    meta = (nb.get("metadata") or {}).get("transformer_edu") or {}
    edition = meta.get("edition") if isinstance(meta, dict) else None
    return edition if isinstance(edition, str) else None


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
    if edition_of(nb) == "solutions":
        raise NotASubmission(
            f"the solutions edition of {CHAPTER} (its metadata): the published "
            "solutions, not a student's notebook"
        )
    statements, notes, code_size = [], [], 0
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        n = i + 1  # as a reader counts the notebook's cells: from the top, from 1
        code, why = as_python(_source(cell))
        if why:
            notes.append(f"cell {n} {why}: not graded")
            continue
        code_size += len(code)
        if code_size > MAX_CODE:
            notes.append(f"cell {n} and those below it: over the grader's "
                         f"{MAX_CODE >> 20} M characters of code, not graded")  # fmt: skip
            break
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            notes.append(f"cell {n} has a syntax error (line {e.lineno}): {e.msg}")
            continue
        except (ValueError, RecursionError, MemoryError) as e:
            notes.append(f"cell {n} cannot be read as Python "
                         f"({type(e).__name__}): not graded")  # fmt: skip
            continue
        for node in tree.body:
            statements.append((n, node, _segment(code, node)))
        if len(statements) > MAX_STATEMENTS:
            raise NotASubmission(f"over {MAX_STATEMENTS:,} top-level statements: "
                                 "the grader does not read it")  # fmt: skip
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


def as_python(source: str) -> tuple[str, str]:
    """The cell as IPython runs it (``%magic``, ``!shell`` and ``x = !cmd`` become
    calls of ``get_ipython()``, which does nothing in the grader; a line that merely
    continues an expression or a string is left alone); a cell magic that runs its
    body (``%%time``, ``%%capture``) gives its body. Or why the cell is not Python."""
    from IPython.core.inputtransformer2 import TransformerManager

    first, _, body = source.lstrip("\n").partition("\n")
    if first.startswith("%%"):
        magic = first[2:].split(maxsplit=1)[0] if first[2:].strip() else ""
        if magic not in _RUNS_ITS_BODY:
            return "", f"is a %%{magic} cell"
        source = body
    try:
        return TransformerManager().transform_cell(source), ""
    except (SyntaxError, ValueError, IndexError, RecursionError) as e:
        return "", f"cannot be read as IPython reads it ({type(e).__name__})"


def _segment(code: str, node: ast.stmt) -> str:
    """The statement's source, its decorators included (``ast`` starts a decorated
    definition at ``def``)."""
    decorators = getattr(node, "decorator_list", None)
    if not decorators:
        return ast.get_source_segment(code, node) or ""
    lines = code.splitlines(keepends=True)
    start = min(d.lineno for d in decorators) - 1
    return "".join(lines[start : node.end_lineno]).rstrip("\n")


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


# --- answers copied from the published solutions -----------------------------------
# The solutions are public (the book's "Show code", solutions/): an answer whose code
# is a published solution's, comments, docstrings and layout aside and with the
# solution's names (``attention_solution``, ``LayerNormSolution``) read as the
# exercises' (``attention``, ``MyLayerNorm``), is noted on its row for the teacher. It
# changes no points: a renamed variable is enough to pass it, and a one-line answer
# can be written so independently. See the teacher's guide.
SOLUTIONS_SOURCE = Path(__file__).resolve().parents[2] / "chapters" / f"{CHAPTER}.ipynb"


def _exercise_name(name: str) -> str:
    """A published solution's name as the exercise names it."""
    if name.endswith("_solution"):
        return name.removesuffix("_solution")
    if name.endswith("Solution"):
        return "My" + name.removesuffix("Solution")
    return name


class _Canonical(ast.NodeTransformer):
    def _body(self, node):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(
            getattr(body[0], "value", None), ast.Constant
        ) and isinstance(body[0].value.value, str):  # fmt: skip
            node.body = body[1:] or [ast.Pass()]
        return node

    def visit_FunctionDef(self, node):
        node.name = _exercise_name(node.name)
        return self._body(self.generic_visit(node))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node.name = _exercise_name(node.name)
        return self._body(self.generic_visit(node))

    def visit_Name(self, node):
        node.id = _exercise_name(node.id)
        return node


def canonical(node: ast.stmt) -> str:
    """``node`` (a definition) as the copy check compares it."""
    return ast.unparse(_Canonical().visit(copy.deepcopy(node)))


@functools.cache
def published_solutions(path: Path = SOLUTIONS_SOURCE) -> dict[str, str]:
    """{canonical code: exercise name} of the chapter's solutions ({} without it:
    the package installed without the repository)."""
    try:
        nb = json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError):
        return {}
    found = {}
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code" or "solution" not in (
            cell.get("metadata") or {}
        ).get("tags", []):
            continue
        try:
            tree = ast.parse(_source(cell))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found[canonical(node)] = _exercise_name(node.name)
    return found


def copied(snippets: list[Snippet], names: set[str],
           published: dict[str, str] | None = None) -> dict[str, str]:  # fmt: skip
    """{exercise name: note} for each answer that is a published solution's code."""
    published = published_solutions() if published is None else published
    notes = {}
    for s in snippets:
        try:
            node = ast.parse(s.code).body[0]
        except (SyntaxError, IndexError, ValueError, RecursionError):
            continue
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            continue
        name = published.get(canonical(node))
        if name in names:
            notes[name] = (
                f"{s.label} is the published solution's code (comments, docstrings "
                "and layout aside)"
            )
    return notes
