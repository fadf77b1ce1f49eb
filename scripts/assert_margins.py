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
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import time
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
}
SEED_PATHS = {
    f"seed{k}": {"OMP_NUM_THREADS": "2", "TEDU_SEED": str(k)} for k in (100, 200)
}
ALL_PATHS = {**PATHS, **SEED_PATHS}
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

    def compare(self, key, source, values, ops, expect=True):
        # expect=False: the assert claims the comparison is False (under `not`)
        if len(ops) == 1 and any(_elementwise(v) for v in values):
            # a tensor or array compared element by element: the assert reduces the
            # result (.all(), .any()) and judges it, so it gets the result back (if
            # the reduction fails, the cell's error is reported)
            result = _HOLDS[ops[0]](*values)
            self.rows.append({{"key": key, "source": source, "op": "elementwise",
                               "ok": True}})
            self._maybe_flush()
            return result
        for a, op, b in zip(values, ops, values[1:]):
            try:
                ok = bool(_HOLDS[op](a, b)) == expect
            except Exception:
                ok = False
            row = {{"key": key, "source": source, "op": op, "ok": ok}}
            x, y = _number(a), _number(b)
            if x is not None and y is not None and op in ("<", "<=", ">", ">="):
                margin = y - x if op in ("<", "<=") else x - y
                margin = margin if expect else -margin
                row.update(left=x, right=y, margin=margin)
            self.rows.append(row)
        self._maybe_flush()
        return expect  # the run goes on: the report says what failed


{RECORDER} = _Margins(_os.environ["ASSERT_MARGINS_OUT"])
"""


class _Rewrite(ast.NodeTransformer):
    """Every comparison inside an assert's test becomes a recorder call."""

    def __init__(self, cell: int, source: str) -> None:
        self.cell, self.source, self.inside, self.negated = cell, source, 0, False

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
        # under `not`, `any(...)` claims every item False; `all(...)` claims only that
        # some item is, which no single comparison says: left as it is
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if self.negated and name != "any":
            return node
        return self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> ast.AST:
        self.inside += 1
        node.test = self.visit(node.test)
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
        node.iter = self.visit(node.iter)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if not self.inside:
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
            keywords=[ast.keyword("expect", ast.Constant(not self.negated))],
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


def run(name: str, path_name: str, timeout: int = 900) -> list[dict]:
    """Execute chapter ``name`` rewritten, under numeric path ``path_name``."""
    from nbclient import NotebookClient

    nb = rewritten_notebook(CHAPTERS / f"{name}.ipynb")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "margins.json"
        env = {**os.environ, **ALL_PATHS[path_name], "ASSERT_MARGINS_OUT": str(out)}
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
                                                          "rel": None, "sides": []})  # fmt: skip
                p["ok"] = p["ok"] and r["ok"]
                if r.get("margin") is not None:
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
            entry["flag"] = (
                "FAILS" if not entry["ok"]
                else "thin" if entry["min_rel"] is not None and (
                    entry["min_rel"] < MIN_RELATIVE
                    or entry["min_margin"] < SPREAD_FACTOR * spread)
                else ""
            )  # fmt: skip
            for p in entry["paths"].values():
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapter names (default: all)")
    parser.add_argument(
        "--paths", nargs="+", choices=list(ALL_PATHS), default=list(PATHS)
    )
    parser.add_argument("--report", type=Path, help="print a saved report instead")
    args = parser.parse_args(argv)
    if args.report:
        print_table(json.loads(args.report.read_text())["table"])
        return 0
    names = args.chapters or sorted(p.stem for p in CHAPTERS.glob("*.ipynb"))
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
