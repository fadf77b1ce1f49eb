"""The Japanese edition: one source, two languages (Sphinx gettext + sphinx-intl).

The chapters are written in English. Their Japanese text lives in gettext catalogues,
``locale/ja/LC_MESSAGES/<page>.po`` (committed), one per page of the toc, plus
``figures.po`` for the strings inside the built figures and widgets (titles, axis
titles, legends, slider and menu labels). Commands::

    python book/i18n.py templates   # the English book's message templates -> _build/gettext/
    python book/i18n.py update      # templates, then sphinx-intl update; obsolete dropped
    python book/i18n.py update-pages  # the same without figures.po (no English build)
    python book/i18n.py build       # the Japanese edition -> _build/html/ja/ (no execution)
    python book/i18n.py stats       # translated / fuzzy / untranslated per catalogue

``make translations`` runs ``update``; ``make book`` runs ``build`` after the English
build. The Japanese build executes nothing: it reads the English build's jupyter-cache
(``_build/.jupyter_cache``), and its log says so (tests/book/test_i18n.py checks).

Glue in translated paragraphs: Sphinx parses a msgstr apart from its notebook, where a
bare ``{glue:text}`key``` finds no glue data and comes out empty; the notebook-qualified
form ``{glue:text}`page.ipynb::key``` resolves from myst-nb's glue cache. The catalogues
keep the msgid's own roles; :func:`compile_catalogues` qualifies the keys when it writes
the ``.mo`` files the build reads (``_build/locale``, never committed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "locale"
LANG = "ja"
BUILD = ROOT / "_build"
POT_DIR = BUILD / "gettext" / "pot"  # its parent holds what myst-nb writes
MO_DIR = BUILD / "locale"  # compiled catalogues the Japanese build reads
JA_WORK = BUILD / "ja"  # the Japanese build's own tree (doctrees, glue cache)
JA_HTML = BUILD / "html" / LANG  # where the Japanese edition is served from
EXEC_CACHE = BUILD / ".jupyter_cache"  # the English build's: shared, never re-run
FIGURES_DOMAIN = "figures"  # the catalogue of strings inside built figures/widgets
GLUE_ROLE = re.compile(r"\{glue(:\w+)?\}`([^`]*)`")

# Sphinx configuration of the Japanese edition (on top of _config.yml's)
JA_CONFIG = {
    "language": LANG,
    "locale_dirs": [str(MO_DIR)],
    "gettext_compact": False,  # one catalogue per page
    "gettext_auto_build": False,  # compile_catalogues() writes the .mo files
    "html_search_language": LANG,
    "nb_execution_cache_path": str(EXEC_CACHE),
    # the page furniture that _config.yml writes in English
    "html_title": "内側から見るアテンション",
    "author": "transformer_edu プロジェクト",
    "nb_code_prompt_show": "コードを表示",
    "nb_code_prompt_hide": "コードを隠す",
    "togglebutton_hint": "クリックして表示",
    "togglebutton_hint_hide": "クリックして隠す",
    "html_theme_options": {"search_bar_text": "この本を検索…"},
}
TEMPLATE_CONFIG = {
    "gettext_compact": False,
    "gettext_uuid": False,
    "gettext_location": False,  # no line numbers: a moved paragraph is not a change
    "gettext_additional_targets": [],
    "nb_execution_mode": "off",  # templates need the text, not the outputs
    "project": "Attention, from the inside",
}


def _build_sphinx(outdir: Path, doctrees: Path, builder: str, overrides: dict,
                  jobs: int = 1) -> int:  # fmt: skip
    from jupyter_book.sphinx import build_sphinx

    result = build_sphinx(
        str(ROOT),
        str(outdir),
        noconfig=True,
        path_config=str(ROOT / "_config.yml"),
        confoverrides={"latex_individualpages": False, **overrides},
        doctreedir=str(doctrees),
        builder=builder,
        warningiserror=builder == "html",
        keep_going=True,
        freshenv=True,
        force_all=True,
        jobs=jobs,
    )
    if isinstance(result, Exception):
        raise result
    return int(result)


def templates() -> Path:
    """Write the message templates (.pot) of every page of the toc."""
    if POT_DIR.exists():
        shutil.rmtree(POT_DIR)
    code = _build_sphinx(
        POT_DIR, BUILD / ".doctrees-gettext", "gettext", TEMPLATE_CONFIG
    )
    if code:
        raise SystemExit(f"the gettext build failed ({code})")
    return POT_DIR


def qualify_glue(text: str, docname: str) -> str:
    """Bare glue keys -> ``<page>.ipynb::key`` (keys already qualified stay)."""
    page = Path(docname).name + ".ipynb"

    def qualify(m: re.Match) -> str:
        body = m.group(2)
        if "::" in body:
            return m.group(0)
        if m.group(1) == ":text" and ":" not in body:
            # the text role splits its content at the last colon (key:format): a
            # qualified key needs the format spelled out, or "page::key" splits there
            body += ":s"
        return f"{{glue{m.group(1) or ''}}}`{page}::{body}`"

    return GLUE_ROLE.sub(qualify, text)


NUMBERED = re.compile(r"^(\d+)\. ")


def escape_numbered(text: str) -> str:
    """``6. マスク`` -> ``6\\. マスク``: Sphinx parses a translated title as Markdown,
    where a leading ``6.`` starts a list and the title would stay English
    (executablebooks/MyST-Parser#852)."""
    return NUMBERED.sub(r"\1\\. ", text)


def compile_catalogues(dest: Path = MO_DIR) -> list[Path]:
    """Compile every committed ``.po`` to ``dest/ja/LC_MESSAGES/*.mo``, glue qualified."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    src_dir = LOCALE / LANG / "LC_MESSAGES"
    out_dir = dest / LANG / "LC_MESSAGES"
    if out_dir.exists():
        shutil.rmtree(out_dir)
    written = []
    for po in sorted(src_dir.rglob("*.po")):
        rel = po.relative_to(src_dir).with_suffix("")
        with po.open("rb") as f:
            catalog = read_po(f, locale=LANG)
        notebook = (ROOT / rel).with_suffix(".ipynb").exists()
        for message in catalog:
            if message.id and message.string and notebook:
                message.string = qualify_glue(message.string, rel.as_posix())
            if message.id and message.string:
                message.string = escape_numbered(message.string)
        mo = out_dir / rel.with_suffix(".mo")
        mo.parent.mkdir(parents=True, exist_ok=True)
        with mo.open("wb") as f:
            write_mo(f, catalog, use_fuzzy=False)
        written.append(mo)
    return written


NOT_WORDS = re.compile(
    r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`"  # math and code
    r"|\\[A-Za-z]+(?:\{[^{}]*\})?",  # a TeX command and its argument
    re.DOTALL,
)


def is_math_only(msgid: str) -> bool:
    """Math or code and nothing to translate (Sphinx offers a display-math block's
    TeX, and a table cell holding only code): no word of three letters outside
    math, code and TeX commands. A display-math block's msgid starts with a line
    break (``$$`` on a line of its own)."""
    if msgid.startswith("\n"):
        return True
    return not re.search(r"[A-Za-z]{3,}", NOT_WORDS.sub(" ", msgid))


def fill_math(po_dir: Path = LOCALE / LANG / "LC_MESSAGES") -> int:
    """Math is not translated: a math-only message's translation is its TeX."""
    from babel.messages.pofile import read_po, write_po

    filled = 0
    for po in sorted(po_dir.rglob("*.po")):
        with po.open("rb") as f:
            catalog = read_po(f, locale=LANG)
        todo = [m for m in catalog if m.id and is_math_only(m.id) and m.string != m.id]
        for m in todo:
            m.string = m.id
            m.flags.discard("fuzzy")
            m.previous_id = []
        if todo:
            filled += len(todo)
            with po.open("wb") as f:
                write_po(f, catalog, width=88)
    return filled


def drop_obsolete(po_dir: Path = LOCALE / LANG / "LC_MESSAGES") -> int:
    """Remove the obsolete (#~) entries sphinx-intl keeps; returns how many."""
    from babel.messages.pofile import read_po, write_po

    dropped = 0
    for po in sorted(po_dir.rglob("*.po")):
        with po.open("rb") as f:
            catalog = read_po(f, locale=LANG)
        if catalog.obsolete:
            dropped += len(catalog.obsolete)
            catalog.obsolete.clear()
            with po.open("wb") as f:
                write_po(f, catalog, width=88, omit_header=False)
    return dropped


def update(figures: bool = True) -> None:
    """Templates from the English pages, then the catalogues brought up to date:
    new messages untranslated, changed ones fuzzy, vanished ones dropped; with
    ``figures``, figures.po from the English build's figures too."""
    templates()
    subprocess.run(
        [
            sys.executable, "-m", "sphinx_intl", "update",
            "-p", str(POT_DIR), "-l", LANG, "-d", str(LOCALE), "-w", "88",
        ],
        check=True,
    )  # fmt: skip
    # catalogues of pages that left the toc
    pots = {p.relative_to(POT_DIR).with_suffix("") for p in POT_DIR.rglob("*.pot")}
    for po in (LOCALE / LANG / "LC_MESSAGES").rglob("*.po"):
        rel = po.relative_to(LOCALE / LANG / "LC_MESSAGES").with_suffix("")
        if rel not in pots and rel.as_posix() != FIGURES_DOMAIN:
            po.unlink()
    print(f"dropped {drop_obsolete()} obsolete entries")
    print(f"{fill_math()} math-only messages given their TeX")
    if not figures:
        return
    n = update_figures()
    print(f"{FIGURES_DOMAIN}.po: {n} strings of the built figures and widgets")


def figure_template(html_dir: Path = BUILD / "html") -> list[tuple[str, str]]:
    """(string, page) of every readable string in the English build's figures and
    widgets, in the toc's order, each once."""
    sys.path.insert(0, str(ROOT / "book"))
    from editions import _worth_translating, figure_strings, to_pattern
    from sync_colab import toc_files

    from transformer_edu.viz.figure_text import TEXT

    seen: dict[str, str] = {}
    for words in TEXT.values():  # the figures' generated names and descriptions
        if _worth_translating(words):
            seen.setdefault(to_pattern(words)[0], "transformer_edu/viz/figure_text.py")
    for page in toc_files(ROOT):
        html = html_dir / f"{page}.html"
        if not html.exists():
            raise SystemExit(f"{html} is missing: build the English book first")
        for s in figure_strings(html.read_text(encoding="utf8")):
            seen.setdefault(s, page)
    return list(seen.items())


def update_figures() -> int:
    """Bring figures.po up to date with the English build's figures (babel's merge:
    new strings untranslated, changed ones fuzzy, vanished ones dropped)."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import read_po, write_po

    template = Catalog(locale=None, project="Attention, from the inside")
    for text, page in figure_template():
        template.add(text, locations=[(page, 0)])
    path = LOCALE / LANG / "LC_MESSAGES" / f"{FIGURES_DOMAIN}.po"
    if path.exists():
        with path.open("rb") as f:
            catalog = read_po(f, locale=LANG)
    else:
        catalog = Catalog(locale=LANG, project="Attention, from the inside")
    catalog.update(template)
    catalog.obsolete.clear()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        write_po(f, catalog, width=88, include_lineno=False)
    return len(template)


def build() -> float:
    """Build the Japanese edition into _build/html/ja (no notebook executed)."""
    started = time.monotonic()
    compile_catalogues()
    out = JA_WORK / "html"
    if out.exists():
        shutil.rmtree(out)
    os.environ["TRANSFORMER_EDU_EDITION"] = LANG  # book_extension reads it
    sys.path.insert(0, str(ROOT / "book"))
    from build import jobs  # as the English build reads: a page per core, at most 4

    code = _build_sphinx(out, JA_WORK / ".doctrees", "html", JA_CONFIG, jobs())
    if code:
        raise SystemExit(f"the Japanese build failed ({code})")
    if JA_HTML.exists():
        shutil.rmtree(JA_HTML)
    JA_HTML.parent.mkdir(parents=True, exist_ok=True)
    out.rename(JA_HTML)
    return time.monotonic() - started


def stats() -> dict[str, tuple[int, int, int]]:
    """(translated, fuzzy, untranslated) per catalogue."""
    from babel.messages.pofile import read_po

    out = {}
    for po in sorted((LOCALE / LANG / "LC_MESSAGES").rglob("*.po")):
        with po.open("rb") as f:
            catalog = read_po(f, locale=LANG)
        msgs = [m for m in catalog if m.id]
        fuzzy = sum(1 for m in msgs if m.fuzzy)
        empty = sum(1 for m in msgs if not m.string)
        out[po.relative_to(LOCALE).as_posix()] = (
            len(msgs) - fuzzy - empty,
            fuzzy,
            empty,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "command", choices=["templates", "update", "update-pages", "build", "stats"]
    )
    args = parser.parse_args(argv)
    if args.command == "templates":
        print(templates())
    elif args.command == "update":
        update()
    elif args.command == "update-pages":  # the pages' catalogues only (no build needed)
        update(figures=False)
    elif args.command == "build":
        print(f"Japanese edition built in {build():.0f} s -> {JA_HTML}")
    else:
        for name, (done, fuzzy, empty) in stats().items():
            print(
                f"{name:60} {done:5} translated {fuzzy:4} fuzzy {empty:5} untranslated"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
