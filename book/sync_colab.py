"""Write the repository URL of ``_config.yml`` into every chapter's Colab cells.

Each chapter notebook starts with two cells this script owns:

- the first cell, markdown, tagged ``colab-badge`` and ``remove-cell``: an "Open in
  Colab" badge (the book drops it: the page has a Colab launch button, and the badge
  image lives on a remote host). It opens the chapter's reading copy,
  ``en/chapters/<name>.ipynb`` (book/colab_notebooks.py), where the book's numbers,
  citations and boxes read as plain Markdown;
- the first code cell, tagged ``colab-install`` and ``hide-input``: in Colab it
  pip-installs ``transformer_edu[book]`` from the repository; elsewhere it does
  nothing. Its comment points to ``python -m transformer_edu doctor``.

``repository.url`` and ``repository.branch`` in ``_config.yml`` are the only copy of
the address. Usage::

    python book/sync_colab.py           # rewrite the notebooks that disagree
    python book/sync_colab.py --check   # list them and exit 1; change nothing
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parent.parent
COLAB = "https://colab.research.google.com"
BADGE_TAGS = ["colab-badge", "remove-cell"]
INSTALL_TAGS = ["colab-install", "hide-input"]


def repository(root: Path = ROOT) -> tuple[str, str, str]:
    """(url, branch, path_to_book) from ``_config.yml``."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf8"))
    repo = config.get("repository") or {}
    url = str(repo.get("url", "")).rstrip("/").removesuffix(".git")
    if not url.startswith("https://github.com/") or url.count("/") != 4:
        raise ValueError(
            f"repository.url={url!r} in _config.yml is not https://github.com/OWNER/REPO"
        )
    branch = str(repo.get("branch", "main"))
    path_to_book = str(repo.get("path_to_book", "") or "").strip("/")
    return url, branch, path_to_book


def toc_files(root: Path = ROOT) -> list[str]:
    """``root`` and every ``file:`` entry of ``_toc.yml``, in order, as written."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf8"))
    found: list[str] = [str(toc["root"])]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                found.append(str(node["file"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(toc)
    return found


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The chapter notebooks in the toc (entries under ``chapters/``), existing or not."""
    return [
        root
        / (Path(entry).with_suffix(".ipynb") if not entry.endswith(".ipynb") else entry)
        for entry in toc_files(root)
        if entry.startswith("chapters/")
    ]


def badge_target(rel: str) -> str:
    """The notebook a badge opens: a chapter's opens its reading copy in ``en/``,
    written as the book reads (book/colab_notebooks.py); any other notebook itself."""
    return f"en/{rel}" if rel.startswith("chapters/") else rel


def colab_link(url: str, branch: str, rel: str, book: str = "") -> str:
    """The address Jupyter Book's Colab launch button uses for the same notebook:
    ``rel`` is its path in the book, ``book`` the book's folder in the repository
    (``repository.path_to_book``, "" at its top)."""
    owner_repo = url.removeprefix("https://github.com/")
    path_in_repo = f"{book}/{rel}" if book else rel
    return f"{COLAB}/github/{owner_repo}/blob/{branch}/{path_in_repo}"


def badge_source(link: str) -> str:
    return f"[![Open In Colab]({COLAB}/assets/colab-badge.svg)]({link})"


def install_source(url: str, branch: str) -> str:
    return (
        "# In Colab: install this book's package, transformer_edu, from its\n"
        "# repository. Anywhere else this cell does nothing (make book / make test\n"
        "# install it from requirements.txt).\n"
        "# Something not working, here or on your machine? Run in a cell\n"
        "#   !python -m transformer_edu doctor\n"
        "# for [OK] / [WARN] / [FAIL] on each requirement, with the fix.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        f'    %pip install --quiet "transformer_edu[book] @ git+{url}@{branch}"'
    )


def _tagged(nb: nbformat.NotebookNode, tag: str) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if tag in c.metadata.get("tags", [])]


def _set_cell(cell: nbformat.NotebookNode, source: str, tags: list[str]) -> None:
    cell.source = source
    extra = [t for t in cell.metadata.get("tags", []) if t not in tags]
    cell.metadata["tags"] = tags + extra


def sync_notebook(nb: nbformat.NotebookNode, link: str, url: str, branch: str) -> None:
    """Make cell 0 the badge and the first code cell the install cell, in place."""
    badges = _tagged(nb, "colab-badge")
    for i in reversed(badges[1:]):
        del nb.cells[i]
    if badges and badges[0] != 0:
        nb.cells.insert(0, nb.cells.pop(badges[0]))
    if not badges:
        cell = nbformat.v4.new_markdown_cell("")
        cell.id = "colab-badge"
        nb.cells.insert(0, cell)
    _set_cell(nb.cells[0], badge_source(link), BADGE_TAGS)

    installs = _tagged(nb, "colab-install")
    for i in reversed(installs[1:]):
        del nb.cells[i]
    if installs:
        cell = nb.cells.pop(installs[0])
    else:
        cell = nbformat.v4.new_code_cell("")
        cell.id = "colab-install"
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    # first code cell, after the title cell(s) that precede the code
    nb.cells.insert(code[0] if code else len(nb.cells), cell)
    _set_cell(cell, install_source(url, branch), INSTALL_TAGS)
    cell.outputs = []
    cell.execution_count = None


def problems(path: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with one notebook's Colab cells (empty when all agree)."""
    if not path.exists():
        return [f"{path.relative_to(root)}: missing"]
    url, branch, book = repository(root)
    rel = path.relative_to(root).as_posix()
    target = badge_target(rel)
    link = colab_link(url, branch, target, book)
    nb = nbformat.read(path, as_version=4)
    out = []
    first = nb.cells[0] if nb.cells else None
    if not (first and "colab-badge" in first.metadata.get("tags", [])):
        out.append(f"{rel}: cell 0 is not the Colab badge (tag colab-badge)")
    elif first.source != badge_source(link):
        out.append(f"{rel}: the Colab badge does not point at {link}")
    elif "remove-cell" not in first.metadata.get("tags", []):
        out.append(f"{rel}: the Colab badge lacks the remove-cell tag")
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not (code and "colab-install" in code[0].metadata.get("tags", [])):
        out.append(
            f"{rel}: the first code cell is not the install cell (colab-install)"
        )
    elif code[0].source != install_source(url, branch):
        out.append(f"{rel}: the install cell does not install from {url}@{branch}")
    return out


def sync(paths: list[Path], root: Path = ROOT) -> list[Path]:
    """Rewrite the notebooks whose Colab cells disagree; returns those changed."""
    url, branch, book = repository(root)
    changed = []
    for path in paths:
        if not path.exists() or not problems(path, root):
            continue
        rel = badge_target(path.relative_to(root).as_posix())
        nb = nbformat.read(path, as_version=4)
        sync_notebook(nb, colab_link(url, branch, rel, book), url, branch)
        nbformat.write(nb, path)
        changed.append(path)
    return changed


def chapter_paths(root: Path = ROOT) -> list[Path]:
    """Notebooks in the toc, then any other ``chapters/*.ipynb``."""
    paths = toc_notebooks(root)
    return paths + [
        p for p in sorted((root / "chapters").glob("*.ipynb")) if p not in paths
    ]


# --- the generated notebooks' scripts share these ------------------------------------


def stale_files(found: dict[Path, str], root: Path = ROOT) -> list[str]:
    """Which of ``found`` ({path: the text it must have}) are missing or differ."""
    return [
        f"{p.relative_to(root)} is out of date"
        for p, text in found.items()
        if not p.exists() or p.read_text(encoding="utf8") != text
    ]


def write_files(found: dict[Path, str]) -> list[Path]:
    """Write those of ``found`` that are missing or differ; returns what changed."""
    changed = []
    for path, text in found.items():
        if not path.exists() or path.read_text(encoding="utf8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf8")
            changed.append(path)
    return changed


def generator_main(doc: str, stale, write, fresh: str,
                   argv: list[str] | None = None) -> int:  # fmt: skip
    """The command line of a script that writes generated files: ``--check`` lists
    the stale ones (status 1), else it writes them."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report, change nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        print("\n".join(found) or fresh)
        return 1 if found else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report, change nothing")
    args = parser.parse_args(argv)
    paths = chapter_paths()
    if args.check:
        found = [p for path in paths for p in problems(path)]
        print("\n".join(found) or "Colab cells agree with _config.yml")
        return 1 if found else 0
    for path in sync(paths):
        print(f"updated {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
