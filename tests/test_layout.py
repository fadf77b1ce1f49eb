"""The package's layout: docs/ARCHITECTURE.md's picture of which module uses which,
and the size of its files (one concept per module, none over ~600 lines)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "transformer_edu"
MAX_LINES = 600


def package_imports() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (names relative to it).

    ``from .pkg import name`` counts as importing ``pkg.name`` when that is a module
    of the package (``from ..model import attention``), else as importing ``pkg``.
    """
    files = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        files[".".join(parts[:-1] if is_init else parts)] = (path, parts[:-1])
    graph = {}
    for module, (path, package) in files.items():
        # package: the subpackage the module's relative imports start in
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
                for alias in node.names:
                    name = ".".join(filter(None, [source, alias.name]))
                    deps.add(name if name in files else source)
        graph[module] = deps - {module}
    return graph


# Not drawn: the __init__s of the folders that hold only a docstring. They import
# nothing, so a line for each would say nothing (test_undrawn_inits_import_nothing
# holds them to it). The folders whose __init__ does something are drawn: ``viz``
# re-exports ``viz.figures`` (the chapters import ``viz``), ``grading``'s is the grader.
DOCSTRING_ONLY = {
    "bench", "browser", "model", "modern", "tatoeba", "tatoeba.weights", "toy",
    "toy.corpus",
}  # fmt: skip
# Not drawn either: the package's own __init__ (it only re-exports the public names),
# and the exercises one by one (one line for all of them; test_each_exercise_module_…).
UNDRAWN = {"", *DOCSTRING_ONLY}


def architecture_picture() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf8")
    block = re.search(r"Which module uses which.*?```text\n(.*?)```", text, re.S)
    assert block, "docs/ARCHITECTURE.md lost its picture of the package"
    picture = {}
    for line in block.group(1).splitlines():
        if "←" in line:
            module, deps = (s.strip() for s in line.split("←"))
            assert module not in picture, f"{module} is drawn twice"
            picture[module] = {d.strip() for d in deps.split(",")}
        elif "(import nothing of ours)" in line:
            for module in line.split("(")[0].split():
                assert module not in picture, f"{module} is drawn twice"
                picture[module] = set()
    return picture


def test_architecture_picture_matches_the_imports():
    graph, picture = package_imports(), architecture_picture()
    wrong = {
        m: (sorted(deps), sorted(graph.get(m, {"<no such module>"})))
        for m, deps in picture.items()
        if not m.startswith("exercises.") and graph.get(m) != deps
    }
    assert not wrong, (
        f"docs/ARCHITECTURE.md says (left) but the code imports (right): {wrong}"
    )
    missing = sorted(
        m
        for m in graph
        if m not in picture and m not in UNDRAWN and not m.startswith("exercises")
    )
    assert not missing, (
        f"modules missing from docs/ARCHITECTURE.md's picture: {missing}"
    )
    drawn = sorted(UNDRAWN & picture.keys())
    assert not drawn, f"drawn, though the test says they are not: {drawn}"


def test_undrawn_inits_import_nothing():
    graph = package_imports()
    importing = {m: sorted(graph[m]) for m in DOCSTRING_ONLY if graph.get(m) != set()}
    assert not importing, f"no longer only a docstring, draw them: {importing}"


def test_each_exercise_module_uses_only_the_harness_zoo_and_the_package():
    graph = package_imports()
    for module, deps in graph.items():
        # the harness and its watch are what the chapters' modules share
        shared = ("exercises.harness", "exercises.watch")
        if module.startswith("exercises.") and not module.startswith(shared):
            assert "exercises.harness" in deps, module


def test_no_package_file_is_over_the_limit():
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf8").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines (split by concept): {long}"
