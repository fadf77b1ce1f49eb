"""The package's layout: the README's picture of which module uses which, and the
size of its files (one concept per module, none over ~600 lines)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "transformer_edu"
MAX_LINES = 600


def package_imports() -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (names relative to it)."""
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_init else parts)
        package = parts[:-1]  # the subpackage the module's relative imports start in
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                if node.module:
                    deps.add(".".join([*base, node.module]))
                else:
                    deps.update(".".join([*base, a.name]) for a in node.names)
        graph[module] = deps - {module}
    return graph


def readme_picture() -> dict[str, set[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf8")
    block = re.search(r"Which module uses which.*?```text\n(.*?)```", text, re.S)
    assert block, "README.md lost its picture of the package"
    picture = {}
    for line in block.group(1).splitlines():
        if "←" in line:
            module, deps = (s.strip() for s in line.split("←"))
            picture[module] = {d.strip() for d in deps.split(",")}
        elif "(import nothing of ours)" in line:
            for module in line.split("(")[0].split():
                picture[module] = set()
    return picture


def test_readme_picture_matches_the_imports():
    graph, picture = package_imports(), readme_picture()
    wrong = {
        m: (sorted(deps), sorted(graph.get(m, {"<no such module>"})))
        for m, deps in picture.items()
        if not m.startswith("exercises.") and graph.get(m) != deps
    }
    assert not wrong, f"README says (left) but the code imports (right): {wrong}"
    # every module is drawn but the package's own __init__, the exercises (one line
    # for all of them) and the corpus's word lists (drawn beside its grammar)
    undrawn = {"", "corpus", "corpus.lexicon"}
    missing = sorted(
        m
        for m in graph
        if m not in picture and m not in undrawn and not m.startswith("exercises")
    )
    assert not missing, f"modules missing from README's picture: {missing}"


def test_each_exercise_module_uses_only_the_harness_zoo_and_the_package():
    graph = package_imports()
    for module, deps in graph.items():
        # the harness, its watch and the grader are what the chapters' modules share
        shared = ("exercises.harness", "exercises.watch", "exercises.grading")
        if module.startswith("exercises.") and not module.startswith(shared):
            assert "exercises.harness" in deps, module


def test_no_package_file_is_over_the_limit():
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf8").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines (split by concept): {long}"
