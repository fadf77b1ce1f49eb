"""How close each chapter's asserts come to failing, under several numeric paths.

    python scripts/assert_margins.py                      # every chapter, 3 paths
    python scripts/assert_margins.py 07_residual_norm_ffn --paths default avx2
    python scripts/assert_margins.py --report _build/assert-margins.json   # again
    python scripts/assert_margins.py 12_real_japanese --paths default seed100 seed200

A seeded run is deterministic on one machine, but another instruction set, another
thread count or another BLAS sums in another order, and an assert that sits near its
threshold passes here and fails there. This script rewrites every comparison inside a
chapter's ``assert`` statements (``a < b``, ``a < 0.1 < b``, ``abs(x - y) < tol``, those
inside ``all(...)`` too) into a call that records both sides and lets the run go on,
executes the chapter under each numeric path, and reports each comparison's margin:

- ``default``: the kernels this CPU picks, 2 torch threads;
- ``threads1``: 1 torch thread (another summation order in every reduction);
- ``avx2``: oneDNN, MKL and PyTorch's own kernels capped at AVX2
  (``ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2``),
  as on a CPU without AVX-512 (and without native bf16), 1 thread;
- ``noavx``: the same capped below AVX (``ATEN_CPU_CAPABILITY=default``,
  ``ONEDNN_MAX_CPU_ISA=SSE41``, ``MKL_ENABLE_INSTRUCTIONS=SSE4_2``), 1 thread: other
  kernels on every x86-64 CPU, so that the record's grid moves a chapter that takes no
  seed even on a CPU whose own kernels are the AVX2 ones (there ``threads1`` and
  ``avx2`` are one path, run once);
- ``seed100``, ``seed200`` (only when named): the default path with ``TEDU_SEED``
  shifting the seeds of every comparison of training runs that takes them from
  ``transformer_edu.seeds`` (a short run under another seed lands elsewhere in its
  noise, as it does on another CPU).

For ``a < b`` the margin is ``b - a`` (``a - b`` for ``>``), relative to the larger of
the two sides' sizes. A comparison is flagged when it fails on some path, when its
smallest relative margin is under 5 %, or when its margin is under three times the
spread the paths gave its two sides (the next CPU may move them that far again).
Exact comparisons (``==``, ``is``, ``in``) and non-numbers are listed as exact.
The report goes to ``_build/assert-margins.json`` and is printed as a table.

``--record`` runs the record's grid instead: every path of ``GRID_PATHS`` under every
seed offset of ``GRID_SEEDS`` (``noavx`` only for a chapter that takes no seed; a path
that is another on this CPU is not run twice; two chapters at a time, about half an
hour for all 14 on a 2-core machine), and writes each chapter's margins into
``book/assert_margins.json`` with the hash of the chapter's code cells.
``tests/scripts/test_assert_margins.py`` holds every chapter to that record: a chapter whose
code changed since its record, or an assert below the record's floor, fails::

    python scripts/assert_margins.py --record                    # every chapter
    python scripts/assert_margins.py --record 07_residual_norm_ffn   # one, again
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
REPORT = ROOT / "_build" / "assert-margins.json"
PATHS = {
    "default": {"OMP_NUM_THREADS": "2"},
    "threads1": {"OMP_NUM_THREADS": "1"},
    "avx2": {
        "OMP_NUM_THREADS": "1",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
    },
    "noavx": {
        "OMP_NUM_THREADS": "1",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
        "ATEN_CPU_CAPABILITY": "default",
    },
}
SEED_PATHS = {
    f"seed{k}": {"OMP_NUM_THREADS": "2", "TEDU_SEED": str(k)} for k in (100, 200)
}
# The record's grid: each numeric path under each seed offset. "threads1" is the
# kernels this CPU picks on one thread (as `make test` runs the chapters), "avx2" those
# of a CPU without AVX-512 and without native bf16 (bf16 emulated), "noavx" kernels no
# CPU of ours picks, which differ from both on every x86-64 CPU; the seed offsets move
# every seed a comparison of training runs takes from transformer_edu.seeds (the toy
# model's included). A chapter that takes seeds runs "noavx" under none of them: its
# seeds move it further than any numeric path, and kernels below AVX, which none of
# our CPUs runs, would time its timing asserts on a machine we do not have.
GRID_PATHS, GRID_SEEDS = ("threads1", "avx2", "noavx"), (0, 100, 200)
SEEDLESS_ONLY = ("noavx",)  # paths run only for chapters that take no seed
GRID = {
    path + (f"+seed{k}" if k else ""): {**PATHS[path], **({"TEDU_SEED": str(k)} if k else {})}
    for path in GRID_PATHS
    for k in GRID_SEEDS
}  # fmt: skip
ALL_PATHS = {**PATHS, **SEED_PATHS, **GRID}
RECORD = ROOT / "book" / "assert_margins.json"
# The floor, and why: the grid's runs are a handful of draws of the noise another
# CPU or seed adds, and they show how far that noise moves each comparison's margin.
# A comparison must hold on its worst run by at least FLOOR times that move, so that
# one more draw moving it as far again below its lowest would still leave it true.
# A margin no run moved (counts,
# lengths, exact arithmetic) may sit on its threshold: no CPU or seed moves it.
FLOOR = 1.0
FLOOR_WHY = (
    "Occurrence by occurrence (an assert in a loop claims once per item), each "
    "comparison's lowest margin over the grid's runs must be at least the floor times "
    "how far those runs moved that margin (largest minus smallest). The runs are a few "
    "draws of the noise another CPU or seed adds; a claim that one more move as large "
    "as those already seen would reverse is not yet a claim about the model. A margin "
    "that no run moved (counts, lengths, exact arithmetic) may sit on its threshold."
)
ORDERED = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
EXACT = {ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not",
         ast.In: "in", ast.NotIn: "not in"}  # fmt: skip
RECORDER = "__assert_margins__"
MIN_RELATIVE, SPREAD_FACTOR = 0.05, 3.0

# The first cell of every rewritten chapter: the recorder the comparisons call.
PRELUDE = f"""
import json as _json, math as _math, operator as _op, os as _os, time as _time

_HOLDS = {{"<": _op.lt, "<=": _op.le, ">": _op.gt, ">=": _op.ge, "==": _op.eq,
          "!=": _op.ne, "is": _op.is_, "is not": _op.is_not,
          "in": lambda a, b: a in b, "not in": lambda a, b: a not in b}}


def _number(v):
    if isinstance(v, bool):
        return None
    try:
        f = float(v)  # a Python or NumPy number, a one-element tensor or array
    except (TypeError, ValueError, RuntimeError):
        return None
    return f if _math.isfinite(f) else None


def _elementwise(v):
    size = v.numel() if hasattr(v, "numel") else getattr(v, "size", None)  # torch, NumPy
    return getattr(v, "ndim", 0) > 0 and isinstance(size, int) and size > 1


class _Margins:
    def __init__(self, path):
        self.path, self.rows, self.written = path, [], 0.0

    def flush(self):
        # the end of every rewritten cell calls it; a long cell's comparisons are
        # written every few seconds (once per comparison made a corpus-wide
        # `all(...)` quadratic: 200,000 rewrites of a growing file)
        with open(self.path, "w") as f:
            _json.dump(self.rows, f)
        self.written = _time.monotonic()

    def _maybe_flush(self):
        if _time.monotonic() - self.written > 2.0:
            self.flush()

    def compare(self, key, source, values, ops, expect=True, raises=False):
        # expect=False: the assert claims the comparison is False (under `not`);
        # raises=True (an assert inside a function): the assert keeps its verdict, and
        # a comparison that fails is not recorded (uncaught, it is the cell's error)
        if len(ops) == 1 and any(_elementwise(v) for v in values):
            # a tensor or array compared element by element: the assert reduces the
            # result (.all(), .any()) and judges it, so it gets the result back (if
            # the reduction fails, the cell's error is reported)
            result = _HOLDS[ops[0]](*values)
            self.rows.append({{"key": key, "source": source, "op": "elementwise",
                               "ok": True}})
            self._maybe_flush()
            return result
        verdict = True
        for a, op, b in zip(values, ops, values[1:]):
            try:
                ok = bool(_HOLDS[op](a, b)) == expect
            except Exception:
                ok = False
            verdict = verdict and ok
            if raises and not ok:
                continue
            row = {{"key": key, "source": source, "op": op, "ok": ok}}
            x, y = _number(a), _number(b)
            if x is not None and y is not None and op in ("<", "<=", ">", ">="):
                margin = y - x if op in ("<", "<=") else x - y
                margin = margin if expect else -margin
                row.update(left=x, right=y, margin=margin)
            self.rows.append(row)
        self._maybe_flush()
        if raises:
            return verdict == expect  # the assert decides, as it would unrewritten
        return expect  # the run goes on: the report says what failed


{RECORDER} = _Margins(_os.environ["ASSERT_MARGINS_OUT"])
"""


class _Rewrite(ast.NodeTransformer):
    """Every comparison that an assert's test claims becomes a recorder call.

    A comparison is a claim where the assert's truth rests on it: the test itself, the
    operands of `and` (of `or` under `not`), the operand of `not`, the items of
    `all(...)` (of `any(...)` under `not`) and the receiver of `.all()` / `.any()`.
    Anywhere else (a list's items, a call's arguments, a value compared with another)
    a comparison computes a value, and is left alone.
    """

    def __init__(self, cell: int, source: str) -> None:
        self.cell, self.source = cell, source
        self.inside, self.negated, self.claim, self.function = 0, False, False, 0

    def generic_visit(self, node: ast.AST) -> ast.AST:
        saved, self.claim = self.claim, False  # below a value: no claims
        try:
            return super().generic_visit(node)
        finally:
            self.claim = saved

    def _visit_function(self, node: ast.AST) -> ast.AST:
        # an assert inside a function keeps its behaviour (the chapter may call the
        # function expecting it to fail, in a `try`): recorded, but it still raises
        self.function += 1
        try:
            return self.generic_visit(node)
        finally:
            self.function -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _visit_function

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        # `not (a < b)` and `not any(a in b for ...)`: each comparison under them is
        # a claim that it is False; recorded so (compare's `expect`)
        if not isinstance(node.op, ast.Not):
            return self.generic_visit(node)
        self.negated = not self.negated
        node.operand = self.visit(node.operand)
        self.negated = not self.negated
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if not self.claim:
            return self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("all", "any"):
            if not node.args and (func.attr == "all") != self.negated:
                func.value = self.visit(func.value)  # `(x < y).all()`: x < y claims
                return node
            return self.generic_visit(node)
        name = func.id if isinstance(func, ast.Name) else None
        # `all(...)` claims every item (and, under `not`, `any(...)` claims every item
        # False); `any(...)` claims only that some item holds, and `not all(...)` that
        # some item fails: no single comparison says either
        if name in ("all", "any") and (name == "all") != self.negated and node.args:
            items = node.args[0]
            if isinstance(items, (ast.GeneratorExp, ast.ListComp, ast.SetComp)):
                items.generators = [self.visit(g) for g in items.generators]
                items.elt = self.visit(items.elt)  # still in claim position
                return node
        return self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        # `a and b` claims both (so does `not (a or b)`, each False); `a or b` claims
        # only that one of them holds, `not (a and b)` that one fails: left alone
        if not self.claim or isinstance(node.op, ast.Or) != self.negated:
            return self.generic_visit(node)
        node.values = [self.visit(v) for v in node.values]
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.inside += 1
        self.claim = True
        node.test = self.visit(node.test)
        self.claim = False
        self.inside -= 1
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        # `x if cond else y` inside an assert: cond picks a value, it is not a claim
        node.body, node.orelse = self.visit(node.body), self.visit(node.orelse)
        return node

    def visit_Try(self, node: ast.Try) -> ast.AST:
        # an assert expected to fail (a handler catches AssertionError) stays as it is
        caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
        if any("AssertionError" in c for c in caught):
            node.handlers = [self.visit(h) for h in node.handlers]
            node.orelse = [self.visit(n) for n in node.orelse]
            node.finalbody = [self.visit(n) for n in node.finalbody]
            return node
        return self.generic_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        # a comprehension's `if` filters which items the assert looks at: not a claim
        saved, self.claim = self.claim, False
        node.iter = self.visit(node.iter)
        self.claim = saved
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        claim = self.claim and self.inside
        self.generic_visit(node)  # the operands are values
        if not claim:
            return node
        ops = [ORDERED.get(type(op)) or EXACT.get(type(op)) for op in node.ops]
        if None in ops or (self.negated and len(ops) > 1):
            return node  # `not (a < b < c)` claims no single link: left as it is
        key = f"cell {self.cell}, line {node.lineno}"
        text = ast.get_source_segment(self.source, node) or key
        call = ast.Call(
            func=ast.Attribute(ast.Name(RECORDER, ast.Load()), "compare", ast.Load()),
            args=[ast.Constant(key), ast.Constant(text),
                  ast.List([node.left, *node.comparators], ast.Load()),
                  ast.List([ast.Constant(o) for o in ops], ast.Load())],
            keywords=[ast.keyword("expect", ast.Constant(not self.negated)),
                      ast.keyword("raises", ast.Constant(bool(self.function)))],
        )  # fmt: skip
        return ast.copy_location(call, node)


def rewrite_cell(source: str, cell: int) -> str | None:
    """The cell with its asserts' comparisons recorded; None if it has no assert or
    is not plain Python (a magic)."""
    if "assert" not in source:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if not any(isinstance(n, ast.Assert) for n in ast.walk(tree)):
        return None
    tree = _Rewrite(cell, source).visit(tree)
    flush = ast.parse(f"{RECORDER}.flush()").body[0]  # what the cell recorded, saved
    last = isinstance(tree.body[-1], ast.Expr)  # the value the cell shows stays last
    tree.body.insert(len(tree.body) - last, flush)
    return ast.unparse(ast.fix_missing_locations(tree))


def rewritten_notebook(path: Path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            new = rewrite_cell(cell.source, i)
            if new is not None:
                cell.source = new
    nb.cells.insert(0, nbformat.v4.new_code_cell(PRELUDE))
    return nb


def toy_checkpoint(path_name: str) -> Path:
    """Where the toy model of numeric path ``path_name`` is kept: chapter 9 trains and
    saves it, chapters 4, 5 and 10 load it, each under that path's kernels (the seed
    offset names the file, transformer_edu.toy.checkpoint). Never the reader's own
    checkpoint, which a run under other kernels would overwrite."""
    from transformer_edu.toy.checkpoint import cache_dir

    return cache_dir() / "assert_margins" / path_name.split("+")[0] / "toy_ja_en.pt"


def run(name: str, path_name: str, timeout: int = 900) -> list[dict]:
    """Execute chapter ``name`` rewritten, under numeric path ``path_name``."""
    from nbclient import NotebookClient

    nb = rewritten_notebook(CHAPTERS / f"{name}.ipynb")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "margins.json"
        env = {**os.environ, **ALL_PATHS[path_name], "ASSERT_MARGINS_OUT": str(out),
               "TRANSFORMER_EDU_CHECKPOINT": str(toy_checkpoint(path_name))}  # fmt: skip
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)  # the kernel inherits this process's environment
        try:
            client = NotebookClient(nb, timeout=timeout, allow_errors=True,
                                    resources={"metadata": {"path": str(CHAPTERS)}})  # fmt: skip
            started = time.monotonic()
            client.execute()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        errors = [
            f"cell {i}: {o.get('ename')}: {o.get('evalue')}"
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code"
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        rows = json.loads(out.read_text()) if out.exists() else []
    for e in errors:
        rows.append({"key": "error", "source": e, "op": "error", "ok": False})
    print(f"  {name} [{path_name}]: {len(rows)} comparisons, "
          f"{sum(not r['ok'] for r in rows)} failing, "
          f"{time.monotonic() - started:.0f} s", flush=True)  # fmt: skip
    return rows


def summarise(results: dict[str, dict[str, list[dict]]]) -> list[dict]:
    """One row per comparison: its margin on each path, the smallest, and a flag."""
    table = []
    for name, by_path in results.items():
        merged: dict[tuple[str, str, str], dict] = {}
        for path_name, rows in by_path.items():
            for r in rows:
                k = (r["key"], r["source"], r["op"])
                entry = merged.setdefault(k, {"chapter": name, "key": r["key"],
                                              "source": r["source"], "op": r["op"],
                                              "paths": {}})  # fmt: skip
                p = entry["paths"].setdefault(path_name, {"ok": True, "margin": None,
                                                          "rel": None, "sides": [],
                                                          "margins": []})  # fmt: skip
                p["ok"] = p["ok"] and r["ok"]
                if r.get("margin") is not None:
                    p["margins"].append(r["margin"])
                    size = max(abs(r["left"]), abs(r["right"]), 1e-12)
                    rel = r["margin"] / size
                    if p["rel"] is None or rel < p["rel"]:
                        p["margin"], p["rel"] = r["margin"], rel
                    p["sides"].append((r["left"], r["right"]))
        for entry in merged.values():
            paths = entry["paths"].values()
            entry["ok"] = all(p["ok"] for p in paths)
            rels = [p["rel"] for p in paths if p["rel"] is not None]
            entry["min_rel"] = min(rels) if rels else None
            margins = [p["margin"] for p in paths if p["margin"] is not None]
            entry["min_margin"] = min(margins) if margins else None
            # how far the paths moved the sides (the first occurrence of each)
            firsts = [p["sides"][0] for p in paths if p["sides"]]
            spread = 0.0
            if len(firsts) > 1:
                for side in (0, 1):
                    values = [f[side] for f in firsts]
                    spread = max(spread, max(values) - min(values))
            entry["spread"] = spread
            # occurrence by occurrence (a comparison in a loop claims once per item),
            # its lowest margin over the runs against how far the runs moved it
            entry["tightest"] = None
            margin_lists = [p["margins"] for p in paths if p["margins"]]
            if len(margin_lists) > 1:
                for ms in zip(*margin_lists, strict=False):
                    low, moved = min(ms), max(ms) - min(ms)
                    if moved > 0 and (
                        entry["tightest"] is None
                        or low / moved < entry["tightest"]["ratio"]
                    ):
                        entry["tightest"] = {"ratio": low / moved, "margin": low,
                                             "moved": moved}  # fmt: skip
            entry["flag"] = (
                "FAILS" if not entry["ok"]
                else "thin" if entry["min_rel"] is not None and (
                    entry["min_rel"] < MIN_RELATIVE
                    or entry["min_margin"] < SPREAD_FACTOR * spread)
                else ""
            )  # fmt: skip
            for p in entry["paths"].values():
                p.pop("margins")
                sides = p.pop("sides")
                p["sides"] = list(sides[0]) if sides else None  # the first occurrence
            table.append(entry)
    return table


def print_table(table: list[dict]) -> None:
    numeric = [t for t in table if t["min_rel"] is not None or not t["ok"]]
    numeric.sort(key=lambda t: (t["flag"] != "FAILS", t["flag"] != "thin",
                                t["min_rel"] if t["min_rel"] is not None else -1))  # fmt: skip
    print(f"{'flag':5} {'min rel':>8} {'min margin':>11} {'spread':>9}  where / assert")
    for t in numeric:
        rel = "" if t["min_rel"] is None else f"{t['min_rel']:8.1%}"
        margin = "" if t["min_margin"] is None else f"{t['min_margin']:11.4g}"
        print(f"{t['flag']:5} {rel:>8} {margin:>11} {t['spread']:9.3g}  "
              f"{t['chapter']} {t['key']}: {t['source'][:70]}")  # fmt: skip
    flagged = [t for t in numeric if t["flag"]]
    print(
        f"\n{len(numeric)} numeric comparisons, {len(flagged)} flagged "
        f"({sum(t['flag'] == 'FAILS' for t in numeric)} failing on some path)"
    )


def code_cells(name: str, text: str | None = None) -> list[str]:
    """Chapter ``name``'s code cells, the only cells its asserts depend on, less the
    Colab install cell (tagged ``colab-install``: it does nothing outside Colab, where
    no record is made). ``text``: the notebook as another revision holds it."""
    import nbformat

    if text is None:
        text = (CHAPTERS / f"{name}.ipynb").read_text(encoding="utf8")
    nb = nbformat.reads(text, as_version=4)
    return [
        c.source
        for c in nb.cells
        if c.cell_type == "code" and "colab-install" not in c.metadata.get("tags", [])
    ]


def source_hash(name: str, code: list[str] | None = None) -> str:
    """SHA-256 of chapter ``name``'s code cells (``code_cells``), or of ``code``."""
    code = code_cells(name) if code is None else code
    return hashlib.sha256(json.dumps(code, ensure_ascii=False).encode()).hexdigest()


def takes_seeds(name: str) -> bool:
    """Whether chapter ``name``'s code takes seeds that ``TEDU_SEED`` shifts: from
    transformer_edu.seeds, or through the toy model (``toy_model()`` and
    ``train_toy_model()`` train and load the one of the shifted seed)."""
    return bool(SEEDED_CODE.search("\n".join(code_cells(name))))


SEEDED_CODE = re.compile(
    r"transformer_edu\.seeds import|\btoy_model\(|\btrain_toy_model\("
)


def same_path_here() -> dict[str, str]:
    """Grid paths that are another path on this CPU, not run again: without AVX-512
    the AVX2 cap changes no kernel, so ``avx2`` is ``threads1``."""
    from transformer_edu.devices import cpu_flags

    return {} if "avx512f" in cpu_flags() else {"avx2": "threads1"}


def moved(entry: dict) -> bool:
    """Whether any run of the grid gave a recorded comparison other numbers than
    another run: if none did, the floor compared every margin with a move of 0."""
    return any(r["spread"] > 0 or r.get("tightest") for r in entry["rows"])


def record_entry(
    name: str, table: list[dict], runs: list[str], seeded: bool, same: dict[str, str]
) -> dict:
    """What the record keeps of one chapter's summary: each ordered comparison's worst
    relative margin over the grid and how far the runs moved its sides."""
    from transformer_edu.devices import cpu_flags, cpu_name

    rows = [
        {"key": t["key"], "source": t["source"][:120], "ok": t["ok"],
         "worst_rel": t["min_rel"], "worst_margin": t["min_margin"],
         "spread": t["spread"], "tightest": t["tightest"]}
        for t in table
        if t["chapter"] == name and (t["min_rel"] is not None or not t["ok"])
    ]  # fmt: skip
    return {
        "source_sha256": source_hash(name),
        "runs": runs,
        # False: no seed from transformer_edu.seeds, so the offset runs are the
        # offset-0 runs of the same path (identical, not executed again)
        "takes_seeds": seeded,
        # paths that are another path on this CPU: their runs are that path's
        "same_paths": same,
        "measured_on": f"{cpu_name()} ({', '.join(cpu_flags()) or 'no flags read'})",
        "date": time.strftime("%Y-%m-%d"),
        "comparisons": sum(t["chapter"] == name for t in table),
        "rows": rows,
    }


def below_floor(row: dict, floor: float) -> bool:
    """A recorded comparison that failed, or whose lowest margin over the grid is less
    than ``floor`` times how far the grid's runs moved that margin."""
    if not row["ok"]:
        return True
    tightest = row.get("tightest")
    return tightest is not None and tightest["ratio"] < floor


def open_key(row: dict) -> str:
    """How the record's "open" list names a comparison: its place and its source."""
    return f"{row['key']}: {row['source']}"


def record_problems(record: dict, names: list[str]) -> list[str]:
    """Why the record does not vouch for chapters ``names`` as they are now.

    A comparison below the floor is a problem unless the record's "open" list names
    it with a reason (known, not yet fixed); a listed one that no longer sits below
    the floor is a problem too, so that the list only shrinks."""
    problems = []
    seeds_ok = set(GRID_SEEDS)
    for name in names:
        entry = record.get("chapters", {}).get(name)
        rerun = f"python scripts/assert_margins.py --record {name}"
        if entry is None:
            problems.append(f"{name}: not in the record; run `{rerun}`")
            continue
        if entry["source_sha256"] != source_hash(name):
            problems.append(f"{name}: its code changed since its record; run `{rerun}`")
        offsets = {int(ALL_PATHS.get(r, {}).get("TEDU_SEED", 0)) for r in entry["runs"]}
        paths = {r.split("+")[0] for r in entry["runs"]}
        if entry["takes_seeds"] != takes_seeds(name):
            problems.append(f"{name}: takes seeds now and did not then; run `{rerun}`")
        if len(offsets & seeds_ok) < 3 or len(paths) < 2:
            problems.append(
                f"{name}: recorded on {entry['runs']}, not ≥ 3 seeds × ≥ 2 paths"
            )
        measured = [entry, *entry.get("other_cpus", [])]
        if any(m["rows"] for m in measured) and not any(moved(m) for m in measured):
            problems.append(
                f"{name}: no run of the grid (its paths, its seeds) moved any of its "
                f"comparisons, so the floor checked nothing: record it on a CPU where "
                f"the paths differ, or make its runs take seeds"
            )
        rows = [r for m in measured for r in m["rows"]]
        open_items = record.get("open", {}).get(name, {})
        for key in open_items:
            listed = [r for r in rows if open_key(r) == key]
            row = next((r for r in listed if below_floor(r, record["floor"])), None)
            if row is None or not row["ok"]:
                problems.append(f"{name} {key}: listed as open, but it is no longer a "
                                f"thin comparison of this chapter: take it off the list")  # fmt: skip
            elif not open_items[key].strip():
                problems.append(f"{name} {key}: listed as open without a reason")
        for row in rows:
            if row["ok"] and open_key(row) in open_items:
                continue  # below the floor, known, and said why in the record
            if below_floor(row, record["floor"]):
                t = row.get("tightest") or {}
                what = ("fails on some run" if not row["ok"] else
                        f"holds by {t['margin']:.3g} on its worst run, where the runs "
                        f"moved its margin by {t['moved']:.3g}")  # fmt: skip
                problems.append(f"{name} {row['key']}: `{row['source']}` {what} "
                                f"(floor: {record['floor']:g} × that move)")  # fmt: skip
    return problems


def with_other_cpus(entry: dict, old: dict | None) -> dict:
    """``entry`` (a chapter just measured) with the measurements of the same code on
    other CPUs that ``old`` (its record until now) holds: each CPU's worst margins
    stay held to the floor. Changed code drops them, as does this CPU's new run."""
    if not old or old["source_sha256"] != entry["source_sha256"]:
        return entry
    others = [{k: v for k, v in old.items() if k != "other_cpus"}]
    others += old.get("other_cpus", [])
    others = [o for o in others if o["measured_on"] != entry["measured_on"]]
    return {**entry, "other_cpus": others} if others else entry


def _run_task(task: tuple[str, str]) -> tuple[str, str, list[dict]]:
    name, path_name = task
    return name, path_name, run(name, path_name)


def write_record(names: list[str], jobs: int = 2) -> dict:
    """Run chapters ``names`` over the grid and write (or update) their record."""
    # a chapter that takes no seed from transformer_edu.seeds runs identically under
    # every offset (one path, one result): its offset runs are its offset-0 runs
    seeded = {name: takes_seeds(name) for name in names}
    same = same_path_here()

    def source_run(name: str, path: str) -> str:
        # the run whose rows stand for grid run ``path`` of chapter ``name``
        base, _, seed = path.partition("+")
        base = same.get(base, base)
        return base + ("+" + seed if seed and seeded[name] else "")

    def in_grid(name: str, path: str) -> bool:
        # "noavx" gives a chapter without seeds a second numeric path where
        # "threads1" and "avx2" are one; a chapter with seeds has its seeds (a
        # larger move than any numeric path's), and its timings stay those of
        # kernels our CPUs run
        return not (seeded[name] and path.startswith(SEEDLESS_ONLY))

    tasks = [
        (name, path)
        for name in sorted(names, key=lambda n: not seeded[n])  # the long ones first
        for path in GRID
        if in_grid(name, path) and source_run(name, path) == path
    ]
    results: dict[str, dict[str, list[dict]]] = {name: {} for name in names}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for name, path, rows in pool.map(_run_task, tasks):
            results[name][path] = rows
    for name in names:
        for path in GRID:
            if in_grid(name, path):
                results[name][path] = results[name][source_run(name, path)]
    table = summarise(results)
    REPORT.parent.mkdir(exist_ok=True)  # every run's sides and margins, for a reader
    REPORT.write_text(json.dumps({"paths": GRID, "table": table}, indent=1))
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    record.update(floor=FLOOR, why=FLOOR_WHY, grid=GRID)
    chapters = record.setdefault("chapters", {})
    for name in names:
        runs = [path for path in GRID if in_grid(name, path)]
        entry = record_entry(name, table, runs, seeded[name], same)
        chapters[name] = with_other_cpus(entry, chapters.get(name))
    record["chapters"] = dict(sorted(chapters.items()))
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print_table(table)
    print(f"record: {RECORD.relative_to(ROOT)}")
    return record


# --- a change of module paths only -------------------------------------------------


def _canonical(cell: str) -> tuple[str, list[str]]:
    """A code cell without where it imports the package from: its syntax tree with
    every import from ``transformer_edu`` taken out and every attribute chain that
    starts at ``transformer_edu`` cut to its last name, and the names those imports
    bound in the cell."""
    import ast

    tree = ast.parse(cell)
    bound: list[str] = []

    class Strip(ast.NodeTransformer):
        def visit_ImportFrom(self, node):
            if (node.module or "").split(".")[0] == "transformer_edu":
                bound.extend(a.asname or a.name for a in node.names)
                return None
            return node

        def visit_Import(self, node):
            ours = [a for a in node.names if a.name.split(".")[0] == "transformer_edu"]
            bound.extend(a.asname or "transformer_edu" for a in ours)
            node.names = [a for a in node.names if a not in ours]
            return node if node.names else None

        def visit_Attribute(self, node):
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "transformer_edu":
                return ast.Attribute(ast.Name("transformer_edu"), node.attr)
            return self.generic_visit(node)

    tree = Strip().visit(tree)
    return ast.dump(tree), sorted(bound)


def moved_imports_only(old: list[str], new: list[str]) -> str | None:
    """Why code cells ``new`` are not ``old`` with only the package's module paths
    changed (the package took folders: ``from transformer_edu.data import Vocab``
    became ``from transformer_edu.toy.data import Vocab``), or None if they are:
    the same cells, the same statements in the same order once those imports are
    taken out, and the same names bound by them (``from transformer_edu import
    tatoeba_train`` may become ``from transformer_edu.tatoeba import train as
    tatoeba_train``). What the names are bound to is not compared: they are the
    package's objects at their new place, and the book's execution holds every
    assert on this machine. Such a change moves no number, so the record carries
    over (``--moved-from``)."""
    if len(old) != len(new):
        return f"{len(old)} code cells became {len(new)}"
    for i, (a, b) in enumerate(zip(old, new, strict=True)):
        (tree_a, names_a), (tree_b, names_b) = _canonical(a), _canonical(b)
        if tree_a != tree_b:
            return f"code cell {i} changed beyond its imports"
        if names_a != names_b:
            return f"code cell {i} binds other names: {names_a} -> {names_b}"
    return None


def carry_over(names: list[str], rev: str) -> list[str]:
    """Carry each chapter's record over a change of module paths since git ``rev``:
    where the record was made for the code at ``rev`` and the code changed only in
    where it imports the package from, the record takes the new hash and notes the
    old one (``moved_from``). Returns what could not be carried."""
    import subprocess

    record = json.loads(RECORD.read_text(encoding="utf8"))
    problems = []
    for name in names:
        entry = record["chapters"].get(name)
        new_hash = source_hash(name)
        if entry is None or entry["source_sha256"] == new_hash:
            continue
        text = subprocess.run(
            ["git", "show", f"{rev}:chapters/{name}.ipynb"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        old = code_cells(name, text)
        old_hash = source_hash(name, old)
        if old_hash != entry["source_sha256"]:
            problems.append(f"{name}: its record is not of the code at {rev}")
            continue
        why = moved_imports_only(old, code_cells(name))
        if why:
            problems.append(f"{name}: {why}")
            continue
        entry["moved_from"] = [*entry.get("moved_from", []), old_hash]
        entry["source_sha256"] = new_hash
    RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapter names (default: all)")
    parser.add_argument(
        "--paths", nargs="+", choices=list(ALL_PATHS), default=list(PATHS)
    )
    parser.add_argument("--report", type=Path, help="print a saved report instead")
    parser.add_argument(
        "--record",
        action="store_true",
        help="run the grid and write book/assert_margins.json",
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="chapters run at once (--record)"
    )
    parser.add_argument(
        "--moved-from",
        metavar="REV",
        help="carry each record over a change of the package's module paths only, "
        "since git REV (no run)",
    )
    args = parser.parse_args(argv)
    if args.report:
        print_table(json.loads(args.report.read_text())["table"])
        return 0
    names = args.chapters or sorted(p.stem for p in CHAPTERS.glob("*.ipynb"))
    if args.moved_from:
        problems = carry_over(names, args.moved_from)
        print("\n".join(problems) or "every record carried over")
        return 1 if problems else 0
    if args.record:
        record = write_record(names, args.jobs)
        problems = record_problems(record, names)
        print("\n".join(problems) or "every chapter clears the floor")
        return 1 if problems else 0
    results: dict[str, dict[str, list[dict]]] = {}
    for name in names:
        results[name] = {p: run(name, p) for p in args.paths}
    table = summarise(results)
    REPORT.parent.mkdir(exist_ok=True)
    REPORT.write_text(json.dumps({"paths": {p: ALL_PATHS[p] for p in args.paths},
                                  "table": table}, indent=1))  # fmt: skip
    print_table(table)
    print(f"report: {REPORT.relative_to(ROOT)}")
    return 1 if any(t["flag"] == "FAILS" for t in table) else 0


if __name__ == "__main__":
    sys.exit(main())
