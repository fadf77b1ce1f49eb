"""Read and write a catalogue's translations as JSON, for translating in bulk.

    python book/po_tool.py dump chapters/06_masking [--all] > todo.json
    python book/po_tool.py load chapters/06_masking done.json
    python book/po_tool.py check chapters/06_masking
    python book/po_tool.py apply chapters/06_masking done.json

``apply`` takes ``{msgid: msgstr}`` (a translator's file, which survives changes to
the catalogue's order): each message whose msgid is there gets that translation and
loses its fuzzy flag; msgids the catalogue no longer holds are listed.

``dump`` writes ``[{"n": index, "msgid": ..., "msgstr": ...}]`` for the untranslated
and fuzzy messages (every message with ``--all``); ``load`` takes the same list back
(``n`` and ``msgstr``; ``msgid`` must match, as a guard) and clears the fuzzy flag of
each message it fills; ``check`` runs the catalogue's checks of tests/book/test_i18n.py
(roles, math and code kept; glossary terms used; the house style of
locale/ja/STYLE.md as far as book/ja_style.py can see it, glosses across the book
included) and prints what fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
PO_DIR = ROOT / "locale" / "ja" / "LC_MESSAGES"


def _read(name: str):
    path = PO_DIR / f"{name}.po"
    with path.open("rb") as f:
        return path, read_po(f, locale="ja")


def dump(name: str, everything: bool = False) -> list[dict]:
    _, catalog = _read(name)
    return [
        {"n": n, "msgid": m.id, "msgstr": m.string}
        for n, m in enumerate(m for m in catalog if m.id)
        if everything or not m.string or m.fuzzy
    ]


def load(name: str, items: list[dict]) -> int:
    path, catalog = _read(name)
    msgs = [m for m in catalog if m.id]
    filled = 0
    for item in items:
        m = msgs[item["n"]]
        if item.get("msgid") is not None and item["msgid"] != m.id:
            raise SystemExit(f"message {item['n']} is not {item['msgid'][:40]!r}")
        if item.get("msgstr"):
            m.string = item["msgstr"]
            m.flags.discard("fuzzy")
            m.previous_id = []
            filled += 1
    with path.open("wb") as f:
        write_po(f, catalog, width=88)
    return filled


def apply(name: str, table: dict[str, str]) -> tuple[int, list[str]]:
    """Fill the messages whose msgid ``table`` holds; (filled, msgids not found)."""
    path, catalog = _read(name)
    ids = set()
    filled = 0
    for m in catalog:
        if m.id and isinstance(m.id, str):
            ids.add(m.id)
            if table.get(m.id):
                m.string = table[m.id]
                m.flags.discard("fuzzy")
                m.previous_id = []
                filled += 1
    with path.open("wb") as f:
        write_po(f, catalog, width=88)
    return filled, [k for k in table if k not in ids]


def check(name: str) -> list[str]:
    sys.path.insert(0, str(ROOT / "tests" / "book"))
    sys.path.insert(0, str(ROOT / "book"))
    from test_i18n import book_gloss_problems, glossary_misses, kept, style_problems

    _, catalog = _read(name)
    problems = []
    for m in catalog:
        if not m.id or not m.string:
            continue
        if kept(m.id) != kept(m.string):
            missing = dict(kept(m.id) - kept(m.string))
            extra = dict(kept(m.string) - kept(m.id))
            problems.append(
                f"roles/math/code: {m.id[:60]!r}: missing {missing}, extra {extra}"
            )
    if name != "figures":
        problems += glossary_misses(
            [(name, m.id, m.string) for m in catalog if m.id and m.string]
        )
        problems += [f"{n}: {p}" for n, p in book_gloss_problems() if n == name]
    problems += style_problems(name, catalog)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["dump", "load", "apply", "check"])
    parser.add_argument("name", help="catalogue, e.g. chapters/06_masking")
    parser.add_argument("file", nargs="?")
    parser.add_argument("--all", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "dump":
        json.dump(dump(args.name, args.all), sys.stdout, ensure_ascii=False, indent=1)
        print()
    elif args.command == "load":
        items = json.loads(Path(args.file).read_text(encoding="utf8"))
        print(f"filled {load(args.name, items)} messages")
    elif args.command == "apply":
        table = json.loads(Path(args.file).read_text(encoding="utf8"))
        filled, unknown = apply(args.name, table)
        print(f"filled {filled} messages; {len(unknown)} not in the catalogue")
        for msgid in unknown:
            print(f"  not found: {msgid[:70]!r}")
    else:
        problems = check(args.name)
        print("\n".join(problems) or "ok")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
