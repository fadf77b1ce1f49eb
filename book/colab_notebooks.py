"""Write the notebooks a reader opens outside the book, so that they read as the book.

The chapters are written in MyST: numbers glued from the cell that measured them
(``{glue:text}`key:.2f```), citations (``{cite}`key```), answers in admonitions, the
``[ours, not the paper's]{.departure}`` badge. None of it renders outside the book's
build: in Colab, Jupyter, VS Code or GitHub's viewer a reader would see the markup.
:func:`render_notebook` writes each markdown cell as plain Markdown instead:

- a glued number as the value the book's build measured, formatted as the role says
  (the Japanese notebooks take a glued word's Japanese twin, ``<key>__ja``), with a
  note at the top: these are the numbers measured when the book was built, and
  running the cells measures them again;
- a citation as author–year text linked to the book's references page;
- an admonition as a quote block (a dropdown one, an answer, as ``<details>``), a
  figure as an image, display math as ``$$``; any other role as its text.

The notebooks the Colab badges open are all written through it: ``en/chapters/``
(here; the chapters' own badges and the English pages' Colab button open these),
``ja/chapters/`` (``ja_notebooks``), ``student/`` and ``student/ja/``
(``student_edition``, ``ja_notebooks``). The measured values come from a build, and a
build on another machine measures others: ``--record`` copies them from the build's
execution cache into ``book/glue_values.json`` (committed), and the notebooks are
written from the sources and that file alone, the same bytes on any machine. Usage::

    make book && python book/colab_notebooks.py --record   # the values of this build
    python book/colab_notebooks.py            # (re)write en/chapters/ (make student)
    python book/colab_notebooks.py --check    # list the stale ones and exit 1
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from functools import cache
from pathlib import Path

import nbformat
from sync_colab import (
    ROOT,
    chapter_paths,
    colab_link,
    repository,
    stale_files,
    sync_notebook,
    write_files,
)

EN_CHAPTERS = Path("en") / "chapters"
VALUES = Path("book") / "glue_values.json"
JA_SUFFIX = "__ja"  # a glued word's Japanese twin (book/editions.py)
NOTE_ID = "book-numbers"
NOTE = {
    "en": (
        "**The numbers in the text** (times, losses, scores, …) are those measured when "
        "the book was built{where}. Running the cells measures them again; on another "
        "machine they come out a little different."
    ),
    "ja": (
        "**本文中の数値**（時間、損失、スコアなど）は、本書をビルドしたときに測った値で"
        "ある{where}。セルを実行するとあらためて測られ、別のマシンでは少し違う値になる。"
    ),
}
TITLES = {  # a directive's default title
    "en": {"note": "Note", "tip": "Tip", "hint": "Hint", "important": "Important",
           "warning": "Warning", "caution": "Caution", "attention": "Attention",
           "danger": "Danger", "error": "Error", "seealso": "See also"},
    "ja": {"note": "注", "tip": "ヒント", "hint": "ヒント", "important": "重要",
           "warning": "警告", "caution": "注意", "attention": "注意", "danger": "危険",
           "error": "エラー", "seealso": "参照"},
}  # fmt: skip

# a role and its content, or an inline code span (left as it is)
ROLE_OR_CODE = re.compile(
    r"(\{(?P<role>[a-z][\w:-]*)\})?(?P<ticks>`+)(?P<body>.+?)(?P=ticks)"
)
SPAN = re.compile(r"\[(?P<text>[^\[\]]+)\]\{(?P<attrs>[.#][^{}]*)\}")  # [text]{.class}
OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*)$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
DIRECTIVE = re.compile(r"^\{(?P<name>[\w:-]+)\}\s*(?P<arg>.*)$")


# --- the values a build measured ----------------------------------------------------------


def load_values(root: Path = ROOT) -> dict:
    """``{"chapters": {page: {key: text}}, "built": {...}}`` (empty before a record)."""
    path = root / VALUES
    if not path.exists():
        return {"chapters": {}, "built": {}}
    return json.loads(path.read_text(encoding="utf8"))


def record(root: Path = ROOT, cache_dir: Path | None = None) -> tuple[dict, list[str]]:
    """The glued values of every chapter the build executed, from its jupyter-cache
    (only for notebooks whose code is the one executed); and the chapters it lacks."""
    import platform
    import subprocess

    from jupyter_cache import get_cache
    from myst_nb.ext.glue import extract_glue_data_cell

    store = get_cache(str(cache_dir or root / "_build" / ".jupyter_cache"))
    chapters, missing = {}, []
    for path in chapter_paths(root):
        if not path.exists():
            continue
        page = path.relative_to(root).with_suffix("").as_posix()
        try:
            record = store.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            missing.append(page)
            continue
        executed = store.get_cache_bundle(record.pk).nb
        values = {}
        for cell in executed.cells:
            if cell.cell_type != "code":
                continue
            for key, output in extract_glue_data_cell(cell):
                data = output.get("data", {})
                if "text/plain" in data:
                    values[key] = data["text/plain"]
        chapters[page] = dict(sorted(values.items()))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.strip()
    import os

    built = {
        "commit": commit,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores",
    }
    return {"built": built, "chapters": chapters}, missing


def glue_keys(nb: nbformat.NotebookNode) -> set[str]:
    """The keys a notebook's markdown pastes with {glue:text}."""
    keys = set()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for m in ROLE_OR_CODE.finditer(cell.source):
                if m.group("role") in ("glue", "glue:text", "glue:md"):
                    keys.add(_glue_key(m.group("body"))[0])
    return keys


def _glue_key(body: str) -> tuple[str, str]:
    """``key:fmt`` (or ``page.ipynb::key:fmt``) -> (key, fmt), as myst-nb splits it."""
    parts = body.rsplit(":", 1)
    key, fmt = (parts[0], parts[1]) if len(parts) == 2 else (parts[0], "s")
    return key.split("::", 1)[-1], fmt


def format_value(text: str, fmt: str) -> str:
    """A glued text/plain value as ``{glue:text}`key:fmt``` shows it (myst-nb's rule)."""
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(text, fmt)


# --- citations ----------------------------------------------------------------------------


@cache
def _bibliography(root: Path) -> dict[str, tuple[list[str], str]]:
    """{key: (authors' last names, year)} from references.bib."""
    from pybtex.database import parse_file

    out = {}
    for key, entry in parse_file(str(root / "references.bib")).entries.items():
        names = [
            "".join(part.render_as("text") for part in person.rich_last_names)
            for person in entry.persons.get("author", [])
        ]
        out[key] = (names, str(entry.fields.get("year", "")))
    return out


def references_page(root: Path, lang: str) -> str:
    """The book's references page, where the book is published (GitHub Pages of
    ``repository.url`` in _config.yml)."""
    url, _, _ = repository(root)
    owner, repo = url.removeprefix("https://github.com/").split("/")
    edition = "ja/" if lang == "ja" else ""
    return f"https://{owner.lower()}.github.io/{repo}/{edition}bibliography.html"


def cite(keys: str, root: Path, lang: str) -> str:
    """``{cite}`a,b``` as linked author–year text: ``[Vaswani et al., 2017](…)``."""
    bib, page = _bibliography(root), references_page(root, lang)
    out = []
    for key in (k.strip() for k in keys.split(",")):
        names, year = bib.get(key, ([key], ""))
        if len(names) >= 3 or (names and names[-1] == "others"):
            who = f"{names[0]} ほか" if lang == "ja" else f"{names[0]} et al."
        elif len(names) == 2:
            who = f"{names[0]} と {names[1]}" if lang == "ja" else " and ".join(names)
        else:
            who = names[0] if names else key
        text = f"{who}, {year}" if year else who
        out.append(f"[{text}]({page}#cite-{key.lower()})")
    return "; ".join(out)


# --- Markdown ------------------------------------------------------------------------------


def render_inline(text: str, values: dict[str, str], lang: str, root: Path) -> str:
    """Roles and attribute spans of one stretch of text outside fenced code."""

    def role(m: re.Match) -> str:
        name, body = m.group("role"), m.group("body")
        if name is None:
            return m.group(0)  # inline code stays code
        if name in ("glue", "glue:text", "glue:md"):
            key, fmt = _glue_key(body)
            if lang == "ja" and key + JA_SUFFIX in values:
                key += JA_SUFFIX
            if key not in values:
                raise KeyError(f"no recorded value for glue key {key!r}")
            return format_value(values[key], fmt)
        if name.startswith("cite"):
            return cite(body, root, lang)
        if name == "math":
            return f"${body}$"
        if name in ("sub", "sup"):
            return f"<{name}>{body}</{name}>"
        shown = re.match(r"^(.*?)\s*<[^<>]*>$", body)  # {ref}`text <target>`
        return shown.group(1) if shown else body

    text = ROLE_OR_CODE.sub(role, text)
    return SPAN.sub(lambda m: f"**[{m.group('text')}]**", text)


def render_markdown(
    text: str, values: dict[str, str], lang: str, root: Path = ROOT
) -> str:
    """A markdown cell's MyST as plain Markdown (see the module's doc)."""
    lines, out, i = text.split("\n"), [], 0
    plain: list[str] = []  # text lines waiting for their roles to be rendered

    def flush() -> None:
        if plain:
            out.append(render_inline("\n".join(plain), values, lang, root))
            plain.clear()

    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            plain.append(lines[i])
            i += 1
            continue
        flush()
        indent, fence, info = (
            m.group("indent"),
            m.group("fence"),
            m.group("info").strip(),
        )
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence)
            and lines[end].strip().strip(fence[0]) == ""
            and len(lines[end].strip()) >= len(fence)
        ):
            end += 1
        body = [line[len(indent) :] if line.startswith(indent) else line
                for line in lines[i + 1 : end]]  # fmt: skip
        d = DIRECTIVE.match(info)
        if d:
            block = _directive(
                d.group("name"), d.group("arg"), body, values, lang, root
            )
            out.append("\n".join(indent + x if x else x for x in block.split("\n")))
        else:  # fenced code: as it is
            out.append("\n".join(lines[i : end + 1]))
        i = end + 1
    flush()
    return "\n".join(out)


def _directive(name: str, arg: str, body: list[str], values: dict, lang: str,
               root: Path) -> str:  # fmt: skip
    """One directive as plain Markdown."""
    options: dict[str, str] = {}
    if body and body[0].strip() == "---":  # options as a YAML block
        close = next((j for j in range(1, len(body)) if body[j].strip() == "---"), 0)
        for line in body[1:close]:
            key, _, value = line.partition(":")
            options[key.strip()] = value.strip()
        body = body[close + 1 :]
    while body and (m := OPTION.match(body[0])):
        options[m.group("key")] = m.group("value")
        body = body[1:]
    inner = render_markdown("\n".join(body).strip("\n"), values, lang, root)
    if name in ("figure", "image"):
        alt = options.get("alt") or inner.strip() or arg
        image = f"![{render_inline(alt, values, lang, root)}]({arg})"
        return image + (f"\n\n*{inner.strip()}*" if name == "figure" and inner else "")
    if name == "math":
        return f"$$\n{inner}\n$$"
    if name in ("code-block", "code", "code-cell", "sourcecode"):
        return f"```{arg}\n{chr(10).join(body)}\n```"
    title = arg or TITLES[lang].get(name, name.replace("-", " ").capitalize())
    title = render_inline(title, values, lang, root)
    if "dropdown" in options.get("class", "") or name == "dropdown":
        return f"<details>\n<summary>{title}</summary>\n\n{inner}\n\n</details>"
    quoted = [f"> **{title}**", ">"] + [
        f"> {x}" if x else ">" for x in inner.split("\n")
    ]
    return "\n".join(quoted)


# --- notebooks ------------------------------------------------------------------------------


def numbers_note(lang: str, built: dict) -> str:
    where = ""
    if built.get("machine"):
        where = (
            f"（{built['machine']}、コミット {built['commit']}）"
            if lang == "ja"
            else f" ({built['machine']}, commit {built['commit']})"
        )
    return NOTE[lang].format(where=where)


def render_notebook(nb: nbformat.NotebookNode, page: str, lang: str,
                    root: Path = ROOT) -> nbformat.NotebookNode:  # fmt: skip
    """A copy of ``nb`` (the chapter ``page``, e.g. "chapters/06_masking") whose
    markdown reads as the book, with the note on its numbers after the title."""
    nb = copy.deepcopy(nb)
    recorded = load_values(root)
    values = recorded["chapters"].get(page, {})
    glued = bool(glue_keys(nb))
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = render_markdown(cell.source, values, lang, root)
    if glued:
        note = nbformat.v4.new_markdown_cell(numbers_note(lang, recorded["built"]))
        note.id = NOTE_ID
        title = next(
            i for i, c in enumerate(nb.cells) if c.source.lstrip().startswith("#")
        )
        nb.cells.insert(title + 1, note)
    return nb


def en_chapter(path: Path, root: Path = ROOT) -> nbformat.NotebookNode:
    """The English chapter as the Colab badge opens it."""
    url, branch, book = repository(root)
    rel = (EN_CHAPTERS / path.name).as_posix()
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    sync_notebook(nb, colab_link(url, branch, rel, book), url, branch)
    page = path.relative_to(root).with_suffix("").as_posix()
    return render_notebook(nb, page, "en", root)


def notebooks(root: Path = ROOT) -> dict[Path, str]:
    """Every English Colab notebook's path and the text it must have."""
    return {
        root / EN_CHAPTERS / path.name: nbformat.writes(en_chapter(path, root)) + "\n"
        for path in chapter_paths(root)
        if path.exists()
    }


def stale(root: Path = ROOT) -> list[str]:
    return stale_files(notebooks(root), root)


def write(root: Path = ROOT) -> list[Path]:
    return write_files(notebooks(root))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report, change nothing")
    parser.add_argument(
        "--record",
        action="store_true",
        help="copy the glued values from _build/.jupyter_cache",
    )
    parser.add_argument("--cache", type=Path, default=None,
                        help="another build's jupyter-cache to record from")  # fmt: skip
    args = parser.parse_args(argv)
    if args.record:
        values, missing = record(ROOT, args.cache)
        (ROOT / VALUES).write_text(json.dumps(values, indent=1, ensure_ascii=False)
                                   + "\n", encoding="utf8")  # fmt: skip
        n = sum(len(v) for v in values["chapters"].values())
        print(f"recorded {n} values of {len(values['chapters'])} chapters in {VALUES}")
        if missing:
            print("not executed by the last build (run make book):", ", ".join(missing))
            return 1
        return 0
    if args.check:
        found = stale()
        print("\n".join(found) or "the Colab notebooks are up to date")
        return 1 if found else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
