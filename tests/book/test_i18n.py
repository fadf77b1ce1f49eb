"""The Japanese edition: complete catalogues, the same roles and math as the English,
the glossary's terms, Japanese notebooks generated from the catalogues, and the built
Japanese pages against the English ones (book/i18n.py, book/editions.py,
book/ja_notebooks.py)."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import editions
import i18n
import ja_notebooks
import ja_style
import pytest
from babel.messages.pofile import read_po
from sync_colab import colab_link, repository, toc_files  # book/ is on pythonpath

ROOT = Path(__file__).resolve().parents[2]
PO_DIR = ROOT / "locale" / "ja" / "LC_MESSAGES"
HTML_DIR = ROOT / "_build" / "html"
JA_DIR = HTML_DIR / "ja"
PAGES = toc_files(ROOT)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def catalogues() -> dict[str, list]:
    out = {}
    for po in sorted(PO_DIR.rglob("*.po")):
        with po.open("rb") as f:
            out[po.relative_to(PO_DIR).with_suffix("").as_posix()] = read_po(
                f, locale="ja"
            )
    return out


def messages():
    for name, catalog in catalogues().items():
        for m in catalog:
            if m.id:
                yield name, m


# --- the catalogues -----------------------------------------------------------------


def test_every_page_of_the_toc_has_a_catalogue():
    missing = [p for p in PAGES if not (PO_DIR / f"{p}.po").exists()]
    assert not missing, f"pages with no catalogue (run make translations): {missing}"


@pytest.mark.parametrize("name", sorted(catalogues()), ids=str)
def test_catalogue_is_complete(name):
    catalog = catalogues()[name]
    msgs = [m for m in catalog if m.id]
    fuzzy = [m.id[:60] for m in msgs if m.fuzzy]
    empty = [m.id[:60] for m in msgs if not m.string]
    obsolete = list(catalog.obsolete)
    assert not (fuzzy or empty or obsolete), (
        f"{name}.po: {len(empty)} untranslated, {len(fuzzy)} fuzzy, "
        f"{len(obsolete)} obsolete (translate them; make translations drops the "
        f"obsolete): untranslated {empty[:5]}, fuzzy {fuzzy[:5]}"
    )


def test_the_templates_hold_exactly_the_catalogues_messages(tmp_path, monkeypatch):
    """Regenerating the templates from the English pages gives the msgids the
    catalogues hold: an English change not yet carried into the catalogues fails."""
    monkeypatch.setattr(i18n, "POT_DIR", tmp_path / "gettext" / "pot")
    pot_dir = i18n.templates()
    pots = {}
    for pot in sorted(pot_dir.rglob("*.pot")):
        with pot.open("rb") as f:
            name = pot.relative_to(pot_dir).with_suffix("").as_posix()
            pots[name] = {m.id for m in read_po(f) if m.id}
    held = {
        name: {m.id for m in cat if m.id}
        for name, cat in catalogues().items()
        if name != i18n.FIGURES_DOMAIN
    }
    assert set(pots) == set(held), (sorted(pots), sorted(held))
    differ = {
        name: (len(pots[name] - held[name]), len(held[name] - pots[name]))
        for name in pots
        if pots[name] != held[name]
    }
    assert not differ, (
        "catalogues out of date with the English text (new, gone); run "
        f"make translations: {differ}"
    )


# roles, math, code spans, link targets and the departure marker pass through unchanged
KEPT = re.compile(
    r"\{(?:glue(?::\w+)?|cite(?::\w+)?|numref|ref|eq|doc|term|download)\}`[^`]*`"
    r"|\$\$.*?\$\$|(?<![\\$])\$[^$\n]+\$"
    r"|`[^`]+`"
    r"|\]\([^)\s]+\)"
    r"|\{\.departure\}"
    r"|\{(?:\d+|[a-z_]+)\}(?!`)|<[^>]+>",  # figures.po: placeholders, HTML tags
    re.DOTALL,
)


def kept(text: str) -> Counter:
    return Counter(m.group(0) for m in KEPT.finditer(text))


def test_each_translation_keeps_its_roles_math_and_code():
    wrong = [
        f"{name}: {m.id[:70]!r}: missing {dict(kept(m.id) - kept(m.string))}, "
        f"extra {dict(kept(m.string) - kept(m.id))}"
        for name, m in messages()
        if m.string and kept(m.id) != kept(m.string)
    ]
    assert not wrong, (
        f"{len(wrong)} translations change roles/math/code:\n" + "\n".join(wrong[:30])
    )


def test_the_roles_check_can_fail():
    msgid = "BLEU {glue:text}`ch12_bleu:.1f` with $\\alpha$ and `beam_search` {cite}`x`"
    assert kept(msgid) == kept(
        "BLEU は {glue:text}`ch12_bleu:.1f`、$\\alpha$、`beam_search` {cite}`x`"
    )
    assert kept(msgid) != kept(
        "BLEU は {glue:text}`ch12_bleu:.2f`、$\\alpha$ と `beam_search`"
    )


# --- the glossary ---------------------------------------------------------------------

NOT_PROSE = re.compile(
    r"\{[\w:]+\}`[^`]*`|`[^`]*`|\$\$.*?\$\$|\$[^$\n]+\$|\]\([^)]*\)|https?://\S+"
    r"|Attention Is All You Need|\*[^*]+\*(?=\s*\{cite)",
    re.DOTALL,
)


def _term_pattern(term: dict) -> re.Pattern:
    spellings = [term["en"], *term.get("also", [])]
    alts = "|".join(re.escape(s).replace(r"\-", "[-‐ ]?") for s in spellings)
    return re.compile(rf"(?<![\w-])(?:{alts})(?:s|es)?(?![\w-])", re.IGNORECASE)


def glossary_misses(pairs) -> list[str]:
    """(catalogue, msgid, msgstr) whose English holds a term and Japanese lacks its
    Japanese term. A term inside a longer glossary term (attention in multi-head
    attention) is checked through the longer one."""
    terms = editions.glossary_terms()
    patterns = [(t, _term_pattern(t)) for t in terms]
    misses = []
    for name, msgid, msgstr in pairs:
        if i18n.is_math_only(msgid):
            continue  # display math: its TeX is not prose
        text = NOT_PROSE.sub(" ", ja_style.without_difficulty(msgid))
        for term, pattern in patterns:
            if pattern.search(text) and term["ja"] not in msgstr:
                misses.append(f"{name}: {term['en']} -> {term['ja']}: {msgid[:60]!r}")
    return misses


def test_each_glossary_term_is_used_for_its_english_term():
    pairs = [
        (name, m.id, m.string)
        for name, m in messages()
        if m.string and name != i18n.FIGURES_DOMAIN
    ]
    decided = {t["en"] for t in editions.glossary_terms() if "not" in t}
    misses = [
        miss
        for miss in glossary_misses(pairs)
        if not (
            not_yet_edited(miss.split(": ", 1)[0])
            and miss.split(": ")[1].split(" -> ")[0] in decided
        )
    ]
    assert not misses, f"{len(misses)} messages without their glossary term:\n" + (
        "\n".join(misses[:40])
    )


def test_the_glossary_check_can_fail():
    good = (
        "p",
        "Multi-head attention uses a mask.",
        "マルチヘッドアテンションはマスクを使う。",
    )
    bad = ("p", "The decoder's beam search.", "デコーダの束探索。")
    code = ("p", "Call `beam_search` here.", "ここで `beam_search` を呼ぶ。")
    assert glossary_misses([good, code]) == []
    assert [m.split(": ", 1)[1].split(":")[0] for m in glossary_misses([bad])] == [
        "beam search -> ビームサーチ"
    ]


def test_math_only_messages_are_told_from_prose():
    assert i18n.is_math_only(
        "\nh_0 = s_S, \\qquad p(y_i) = \\mathrm{softmax}(W_o h_i) .\n"
    )
    assert i18n.is_math_only("\\alpha_{ij} = \\frac{e^{s_{ij}}}{\\sum_k e^{s_{ik}}}")
    assert not i18n.is_math_only("The softmax of $x_i$ over the keys sums to one.")
    assert not i18n.is_math_only("Multi-head attention")


def test_the_glossary_is_one_term_each():
    terms = editions.glossary_terms()
    ens = [t["en"].lower() for t in terms]
    assert len(ens) == len(set(ens)), "an English term twice in the glossary"


# --- the house style (book/ja_style.py; locale/ja/STYLE.md) ----------------------------

# A page being rewritten in English while its Japanese waits for the edit (its prefix
# here): the house-style, gloss, glue-twin and English-run checks skip it, and so does
# the glossary check for the terms the edit of issue 33 decided (those with a `not`
# list). Empty: every page of both editions has been edited and checked.
NOT_YET_EDITED: list[str] = []


def not_yet_edited(page: str) -> bool:
    return page.startswith(tuple(NOT_YET_EDITED))


def rejected_renderings() -> dict[str, str]:
    """The glossary's ``not`` renderings -> the term to use instead."""
    return {
        variant: term["ja"]
        for term in editions.glossary_terms()
        for variant in term.get("not", [])
    }


def style_problems(name: str, catalog) -> list[str]:
    """The house-style breaches of one catalogue (figures.po: of the strings whose
    first page has been edited)."""
    rejected = rejected_renderings()
    out = []
    for m in catalog:
        if not m.id or not m.string or i18n.is_math_only(m.id):
            continue
        if name == i18n.FIGURES_DOMAIN:
            pages = [loc for loc, _ in m.locations]
            if pages and not_yet_edited(pages[0]):
                continue
            # a figure's words: counters, colons, 長音, variants (no glosses to check;
            # "gloss " with its space: the variants' findings begin "glossary:")
            found = [
                p
                for p in ja_style.message_problems(m.id, m.string, rejected)
                if not p.startswith(("gloss ", "example", "ends with"))
            ]
        else:
            found = ja_style.message_problems(m.id, m.string, rejected)
        out += [f"{name}: {p}: {m.string[:50]!r}" for p in found]
    return out


@pytest.mark.parametrize(
    "name", [n for n in sorted(catalogues()) if not not_yet_edited(n)], ids=str
)
def test_catalogue_keeps_the_house_style(name):
    problems = style_problems(name, catalogues()[name])
    assert not problems, (
        f"{len(problems)} breaches of locale/ja/STYLE.md (python book/po_tool.py "
        f"check {name}):\n" + "\n".join(problems[:40])
    )


def book_gloss_problems() -> list[tuple[str, str]]:
    cats = catalogues()
    order = ["intro", *[p for p in PAGES if p != "intro"]]
    return ja_style.book_glosses(
        [
            (name, [(m.id, m.string) for m in cats[name] if m.id and m.string])
            for name in order
            if name in cats
        ],
        editions.glossary_terms(),
    )


def test_glosses_stand_at_first_appearance_or_in_the_defining_chapter():
    problems = [
        f"{name}: {p}" for name, p in book_gloss_problems() if not not_yet_edited(name)
    ]
    assert not problems, f"{len(problems)} glosses too many:\n" + "\n".join(problems)


def test_the_style_checks_can_fail():
    check = ja_style.message_problems
    assert check("Two heads.", "二つのヘッド。") == []
    assert check("Two heads.", "2 つのヘッド。") == [
        "counter: 「2 つ」 -> 漢数字 (一つ、二つ)"
    ]
    assert check("Run it twice.", "二回実行する。")[0].startswith("counter: 「二回」")
    assert check("The scores:", "スコアは次のとおり。") == [
        "ends with ':' in English: end with 「：」"
    ]
    assert check("Try it: a mask", "試してみる：マスク") == [
        "'Try it' heading: 「試してみよう」"
    ]
    assert check("**Warm-up.** Do it.", "**（基本）** やってみよ。") == []
    assert check("**(harder)** Do it.", "（**やや難**）やってみよ。")[0].startswith(
        "exercise label"
    )
    assert check("**Seeds (hard).** Do.", "**シード（発展）。** せよ。") == []
    assert ja_style.without_difficulty("**BatchNorm (warm-up).** x") == (
        "**BatchNorm ** x"
    )
    assert ja_style.without_difficulty("**Without warm-up.** x") == (
        "**Without warm-up.** x"
    )
    assert ja_style.without_difficulty("from ★ (warm-up) to ★★★ (hard).") == (
        "from ★ to ★★★."
    )
    assert check("**The floor.** Do.", "**下限** せよ。")[0].startswith("run-in title")
    assert check("It reads 私 first.", "最初に 私 を読む。") == [
        "example not in 「」: 私"
    ]
    assert check("It reads 私 first.", "最初に「私」を読む。") == []
    assert check("A slider.", "スライダー。") == [
        "長音: 「スライダー」 -> 「スライダ」"
    ]
    assert check("Real data.", "本物のデータ。")[0].startswith("translationese")
    assert check("x", "小さいモデルの方が速い。") == [
        "spelling: comparative: 「方が」 -> 「ほうが」"
    ]
    assert check("x", "小さいモデルのほうが速く、一方が他方をゲートする。") == []
    assert check("x", "残った活性化の平均。")[0].startswith("spelling: 「活性化」")
    assert check("x", "活性化関数が SiLU なら、残った活性値の平均。") == []
    assert check("x", "FLOPs は同じである。")[0].startswith("「FLOPs」 as a noun")
    assert check("x", "倍の FLOPs を使う。")[0].startswith("「FLOPs」 as a noun")
    assert check("x", "積和 1 回を 2 FLOPs と数え、$3D$ FLOPs、FLOP 数は同じ。") == []
    assert check("x", "{glue:text}`a:.2f` 百万に対して")[0].startswith(
        "spelling: 「… 百万」"
    )
    assert check("x", "{glue:text}`a:.1f`× であった。") == [
        "spelling: 「1.14×」 -> 「1.14 倍」"
    ]
    assert check("x", "百万 FLOP 単位で {glue:text}`a:.2f`、37k × 512、410 万。") == []
    assert check("x", "ルーター。") == ["長音: 「ルーター」 -> 「ルータ」"]
    assert check("The cure.", "その治療法。")[0].startswith("translationese: 「治療」")
    assert check("Equal (asserted).", "等しい（assert で確認）。")[0].startswith(
        "translationese: 「assert で確認」"
    )
    assert check("Equal (asserted).", "等しい（assert で確かめてある）。") == []
    assert check("It attends to pads.", "パッドに注目する。")[0].startswith(
        "rendering: 「注目」"
    )
    assert check("It attends to pads.", "パッドにアテンションを向ける。") == []
    assert check("Note the pads.", "パッドに注目してほしい。") == []
    assert check("Held out.", "取り置いた文。", {"取り置": "評価用"}) == [
        "glossary: 「取り置」 -> 「評価用」"
    ]
    glossed = "残差接続（residual connection）と層正規化（layer normalization）"
    assert check("x", glossed + "。") == []
    assert len(check("x", glossed + "と教師強制（teacher forcing）。")) == 1
    assert check("x", "トークン（token）ID。") == [
        "gloss inside a compound or before a number: （token）I",
        "gloss after a katakana word (it is the English already): （token）",
        "gloss of a common word: （token）",
    ]
    assert check("x", "演習（exercise）4 で問う。")[0].startswith("gloss inside")
    assert check("code", "`f(x)`（`x` は code）と $a$（size）。") == []
    terms = [{"en": "residual connection", "ja": "残差接続", "chapter": 7}]
    pages = [
        ("intro", [("a", "残差接続（residual connection）。")]),
        ("chapters/05_x", [("a", "残差接続（residual connection）。")]),
        ("chapters/07_y", [("a", "残差接続（residual connection）。")]),
    ]
    assert [name for name, _ in ja_style.book_glosses(pages, terms)] == [
        "chapters/05_x"
    ]


# --- emphasis: sesame marks, not slanted Japanese --------------------------------------


def test_japanese_emphasis_is_marked_not_slanted():
    from docutils import nodes

    para = nodes.paragraph()
    para += nodes.emphasis(text="すべて")
    para += nodes.emphasis(text="general")
    mixed = nodes.emphasis()
    mixed += [nodes.Text("x "), nodes.literal(text="y"), nodes.Text(" 日本")]
    para += mixed
    assert editions.mark_japanese_emphasis(para) == 2
    assert [e["classes"] for e in para.findall(nodes.emphasis)] == [
        ["tedu-ja-em"],
        [],
        ["tedu-ja-em"],
    ]
    css = (ROOT / "_static" / "custom.css").read_text(encoding="utf8")
    rule = css.split("em.tedu-ja-em", 1)[1].split("}", 1)[0]
    assert "font-style: normal" in rule and "text-emphasis: filled sesame" in rule
    assert "font-synthesis: none" in css.split('html[lang="ja"] em {', 1)[1]


@pytest.mark.book
@pytest.mark.parametrize("page", PAGES)
def test_japanese_pages_slant_no_japanese(book, page):
    html = (JA_DIR / f"{page}.html").read_text(encoding="utf8")
    slanted = [
        m.group(0)[:60]
        for m in re.finditer(
            r"<em\b(?![^>]*tedu-ja-em)[^>]*>((?:(?!</em>).)*)</em>", html
        )
        if CJK.search(re.sub(r"<[^>]+>", "", m.group(1)))
    ]
    assert not slanted, f"ja/{page}: Japanese in italics: {slanted[:5]}"


# --- glued words need their Japanese twin ---------------------------------------------

GLUE_KEY = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)(?::[^`]*)?`")


def glued_word(data: dict) -> str | None:
    """The glued value if it is words (a string with letters), else None."""
    text = data.get("data", {}).get("text/plain", "")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) and re.search("[A-Za-z]", value) else None


QUOTED_GLUE = re.compile(r'(?<=["“「])\{glue(?::\w+)?\}`[^`]*`(?=["”」])')


def missing_twins(name: str, catalog, cache: dict) -> list[str]:
    """Glue keys used in the catalogue's translations whose glued value is words and
    that have no ``key__ja`` twin: the Japanese page would paste the English. A glue
    the translation quotes ("{glue:text}`x`", an example sentence) is data."""
    out = []
    for m in catalog:
        for key in GLUE_KEY.findall(QUOTED_GLUE.sub(" ", m.string or "")):
            key = key.split("::")[-1]
            if key in cache and glued_word(cache[key]) is not None:
                if key + editions.JA_SUFFIX not in cache:
                    out.append(f"{name}: {key} = {glued_word(cache[key])!r}")
    return sorted(set(out))


def test_the_glue_twin_check_can_fail():
    word = {"data": {"text/plain": "'higher'"}}
    number = {"data": {"text/plain": "0.25"}}
    cat = [type("M", (), {"string": "{glue:text}`a` と {glue:text}`b:.2f`"})()]
    assert missing_twins("p", cat, {"a": word, "b": number}) == ["p: a = 'higher'"]
    assert missing_twins("p", cat, {"a": word, "a__ja": word, "b": number}) == []
    quoted = [type("M", (), {"string": '出力は "{glue:text}`a`" である'})()]
    assert missing_twins("p", quoted, {"a": word}) == []


@pytest.mark.book
@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if p.startswith("chapters/") and not not_yet_edited(p)],
)
def test_each_glued_word_has_its_japanese_twin(book, page):
    cache_file = HTML_DIR.parent / "jupyter_execute" / f"{page}.glue.json"
    if not cache_file.exists():  # a chapter that glues nothing (11: exercises)
        assert "{glue" not in "".join(m.id for m in catalogues()[page]), page
        return
    cache = json.loads(cache_file.read_text(encoding="utf8"))
    missing = missing_twins(page, catalogues()[page], cache)
    assert not missing, (
        "glued words with no Japanese twin (glue(name + '__ja', ...) beside the "
        f"English, book/editions.py): {missing}"
    )


# --- English pasted into Japanese sentences -------------------------------------------

# a word may hold digits (bf16, int8: names, skipped below as names are)
ENGLISH_RUN = re.compile(
    r"[A-Za-z][A-Za-z0-9'’-]*(?:[ \u00a0]+[A-Za-z][A-Za-z0-9'’-]*)+"
)
QUOTED = re.compile(r'"[^"]*"|“[^”]*”|「[^」]*」|『[^』]*』')
# an English gloss in brackets: after a term, or spelling out an abbreviation
# (⟨bos⟩（beginning of sentence、文頭）); book/ja_style.py checks where glosses stand
BRACKETED_GLOSS = re.compile(r"（[A-Za-z][A-Za-z0-9 ,'/&.+\-]*?(?:[。、；：][^）]*)?）")


def english_runs(html: str) -> list[str]:
    """Runs of two or more English words inside Japanese text blocks of a built page
    (code, math, outputs, the bibliography and text marked lang=en are skipped by the
    parser; glosses, quoted examples and names in Title Case are not runs)."""
    parser = _Text()
    parser.feed(html)
    found = []
    for _, text in parser.blocks:
        if not CJK.search(text):
            continue
        text = BRACKETED_GLOSS.sub(" ", QUOTED.sub(" ", text))
        text = re.sub(r"\([^()]*\)|\[[^\]]*\]", " ", text)  # (B, T, D), [RSR+20]
        for m in ENGLISH_RUN.finditer(text):
            words = m.group(0).split()
            if all(re.search(r"[A-Z0-9]", w) for w in words):
                continue  # a name: Attention Is All You Need, Google Colab, pre-LN
            found.append(m.group(0))
    return found


def test_the_english_run_check_can_fail():
    html = (
        "<main><p>同梱した重みは the checkpoint with the best dev BLEU である。</p>"
        '<p>残差接続（residual connection）と Google Colab と "I am Taro"。</p>'
        "<p>Only English here</p><p><code>x = f(a, b)</code> は dot スコア。</p>"
        "<p>⟨bos⟩（beginning of sentence、文頭）と pre-LN Transformer と N and M。</p>"
        "<p>oneDNN bf16 あり、int8 graphs は小さい。</p>"
        "</main>"
    )
    assert english_runs(html) == [
        "the checkpoint with the best dev BLEU",
        "N and M",
        "int8 graphs",
    ]


@pytest.mark.book
@pytest.mark.parametrize(
    "page", [p for p in PAGES if p != "bibliography" and not not_yet_edited(p)]
)
def test_japanese_page_has_no_english_run_in_its_sentences(book, page):
    runs = english_runs((JA_DIR / f"{page}.html").read_text(encoding="utf8"))
    assert not runs, f"ja/{page}: English inside Japanese sentences: {runs[:10]}"


# --- the Japanese notebooks -----------------------------------------------------------


def test_the_japanese_notebooks_are_generated_and_fresh():
    stale = ja_notebooks.stale()
    assert not stale, f"{stale} (run make student, or python book/ja_notebooks.py)"


def test_translating_markdown_keeps_its_structure():
    table = {
        "A long item that runs over two lines.": "二行にわたる長い項目。",
        "Answer": "解答",
        "The body of the answer.": "解答の本文。",
        "cell": "セル",
        "Title": "題",
    }
    text = (
        "# Title\n\n- A long item that runs\n  over two lines.\n\n"
        "```{admonition} Answer\n:class: dropdown\nThe body of\nthe answer.\n```\n\n"
        "| cell | x |\n|---|---|\n| 1 | 2 |\n"
    )
    out = ja_notebooks.translate_markdown(text, table)
    assert out == (
        "# 題\n\n- 二行にわたる長い項目。\n\n"
        "```{admonition} 解答\n:class: dropdown\n解答の本文。\n```\n\n"
        "| セル | x |\n|---|---|\n| 1 | 2 |\n"
    )


def test_glue_keys_are_qualified_for_the_japanese_build():
    text = (
        "BLEU {glue:text}`ch12_bleu:.1f` and {glue:text}`other.ipynb::k` "
        "of {glue:text}`ch12_word`"
    )
    assert i18n.qualify_glue(text, "chapters/12_real_japanese") == (
        "BLEU {glue:text}`12_real_japanese.ipynb::ch12_bleu:.1f` and "
        "{glue:text}`other.ipynb::k` of {glue:text}`12_real_japanese.ipynb::ch12_word:s`"
    )


# --- figures and widgets -------------------------------------------------------------


def _figure_html() -> str:
    import plotly.graph_objects as go
    from plotly_renderer import BookRenderer

    fig = go.Figure(
        [go.Scatter(x=[1, 2], y=[3, 4], name="train loss")],
        layout={
            "title": {"text": "Loss per step"},
            "xaxis": {"title": {"text": "step"}},
        },
        frames=[go.Frame(data=[go.Scatter(y=[1, 2])], name="f1")],
    )
    fig.update_layout(
        sliders=[
            {
                "steps": [
                    {"label": "epoch one", "method": "animate", "args": [["f1"]]}
                ],
                "currentvalue": {"prefix": "Epoch: "},
            }
        ]  # fmt: skip
    )
    return BookRenderer().to_mimebundle(fig.to_dict())["text/html"]


def test_figure_strings_are_found_and_translated():
    html = _figure_html()
    found = editions.figure_strings(html)
    assert set(found) == {"train loss", "Loss per step", "step", "epoch one", "Epoch: "}
    table = {
        "train loss": "訓練損失",
        "Loss per step": "ステップごとの損失",
        "step": "ステップ",
    }
    out = editions.translate_figures(html, table)
    # what is left in English is what the table did not translate
    assert set(editions.figure_strings(out)) == {"epoch one", "Epoch: "}
    assert all(f'"{ja}"' in out for ja in table.values())
    assert "[1, 2]" in out.replace("\n", "")  # the data stay
    # the page's script still parses: same calls, same ids
    assert out.count("Plotly.newPlot(") == html.count("Plotly.newPlot(") == 1


# --- the built Japanese edition -------------------------------------------------------

book = pytest.mark.book


class _Text(HTMLParser):
    """The article's text blocks (tag, text), skipping code, outputs and math."""

    SKIP_CLASSES = {
        "highlight", "cell_output", "output", "math", "MathJax", "citation",
        "tedu-source", "docutils container", "mjx-container", "bibliography",
        "toggle-details", "headerlink", "guilabel",
    }  # fmt: skip
    BLOCKS = {"p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "caption", "th", "td",
              "figcaption", "dt", "summary"}  # fmt: skip

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.blocks: list[tuple[str, str]] = []
        self._buf: list[list[str]] = []
        self.in_main = False

    def _skipping(self):
        return any(skip for _, skip in self.stack)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "main":
            self.in_main = True
        classes = set((attrs.get("class") or "").split())
        skip = (
            tag in ("pre", "code", "script", "style", "svg", "math", "mjx-container")
            or bool(classes & self.SKIP_CLASSES)
            or any(c.startswith("cell_output") for c in classes)
            # text the page itself marks as English (the glossary's English terms)
            or (tag != "html" and (attrs.get("lang") or "").startswith("en"))
        )
        if tag in ("br", "img", "meta", "link", "input", "hr", "col"):
            return
        self.stack.append((tag, skip))
        if tag in self.BLOCKS and self.in_main:
            self._buf.append([])

    def handle_endtag(self, tag):
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break
        if tag in self.BLOCKS and self._buf and self.in_main:
            text = " ".join("".join(self._buf.pop()).split())
            if text:
                self.blocks.append((tag, text))
        if tag == "main":
            self.in_main = False

    def handle_data(self, data):
        if self._buf and not self._skipping():
            self._buf[-1].append(data)


# Names, not words: Japanese texts write them as they are. The theme's launch menu
# (a service and file types); a table cell naming a model or an activation.
NAMES = {
    "Colab", ".ipynb", ".pdf", ".md", "post-LN", "pre-LN", "ReLU", "GELU", "T5",
    "BART", "mBART", "NLLB-200", "Whisper",
}  # fmt: skip
CITATION = re.compile(r"\[[^\]]*\]")


def english_only_blocks(html: str) -> list[str]:
    parser = _Text()
    parser.feed(html)
    return [
        f"<{tag}> {text[:80]}"
        for tag, text in parser.blocks
        if re.search(r"[A-Za-z]{3,}", text)
        and not CJK.search(text)
        and not set(CITATION.sub(" ", text).split()) <= NAMES
    ]


def test_the_english_only_check_can_fail():
    html = (
        "<main><p>これは日本語 with English</p><p>Only English here</p>"
        "<div class='highlight'><pre>code only</pre></div>"
        "<p><code>print()</code></p><li>x = 1</li>"
        '<table><tr><td><p lang="en">self-attention</p></td></tr></table>'
        "<li>Colab</li><li>Colab notebooks</li><p>T5 [RSR+20]</p><p>T5 models</p>"
        "</main>"
    )
    assert english_only_blocks(html) == [
        "<p> Only English here",
        "<li> Colab notebooks",
        "<p> T5 models",
    ]


@book
def test_the_japanese_build_executed_no_notebook(book):
    log = book.log
    assert "[book/build.py] ja:" in log, "the Japanese edition was not built"
    ja_log = log.split("[book/build.py] ja:", 1)[1]
    assert "Executing notebook" not in ja_log, "the Japanese build executed notebooks"
    times = json.loads((ROOT / "_build" / "book-build-times.json").read_text())
    assert set(times) == {"en", "ja"}


@book
@pytest.mark.parametrize("page", PAGES)
def test_each_page_links_to_its_other_edition(book, page):
    en = (HTML_DIR / f"{page}.html").read_text(encoding="utf8")
    ja = (JA_DIR / f"{page}.html").read_text(encoding="utf8")
    assert re.search(r'<html[^>]*\blang="ja"', ja), f"ja/{page}: not <html lang=ja>"
    assert re.search(r'<html[^>]*\blang="en"', en), f"{page}: not <html lang=en>"
    to_ja = editions.other_edition_href(page, "en")
    to_en = editions.other_edition_href(page, "ja")
    assert f'href="{to_ja}"' in en and 'hreflang="ja"' in en, page
    assert f'href="{to_en}"' in ja and 'hreflang="en"' in ja, page
    # the addresses resolve to the page itself in the other edition
    here = (HTML_DIR / page).parent
    assert (here / to_ja).resolve() == (JA_DIR / f"{page}.html").resolve()
    assert ((JA_DIR / page).parent / to_en).resolve() == (
        HTML_DIR / f"{page}.html"
    ).resolve()


def _counts(html: str) -> dict:
    glued = re.findall(r'class="pasted-text">([^<]*)<', html)
    return {
        # the same numbers; glued words ("higher", "beam 4, α 1.25") have their
        # Japanese twins (a key's __ja glue), so of a glued text only its numbers and
        # how many glued texts there are are compared
        "glued": sorted(n for g in glued for n in re.findall(r"\d+(?:[.,]\d+)*", g)),
        "glued texts": len(glued),
        "plotly": html.count('class="plotly-graph-div'),
        "images": len(re.findall(r"<img\b", re.split(r"<main", html, maxsplit=1)[-1])),
        "math": len(re.findall(r'class="math[ "]', html)),
        "citations": len(re.findall(r'<span class="[^"]*\bcitation\b|role="doc-biblioref"'
                                    r'|class="reference internal" href="[^"]*bibliography', html)),
        "listings": html.count('class="tedu-source"'),
        # the controls a reader moves: each figure's sliders and menus (plotly's
        # layout, which book/figure_controls.js lays its keyboard controls over) and
        # the widgets (tests/book/test_pages.py works them by keyboard on the English
        # page only)
        "sliders": len(re.findall(r'"steps": ?\[', html)),  # one array a slider
        "menus": len(re.findall(r'"buttons": ?\[', html)),  # one array a menu
        "widgets": html.count("application/vnd.jupyter.widget-view+json"),
    }  # fmt: skip


@book
@pytest.mark.parametrize("page", PAGES)
def test_japanese_page_shows_what_the_english_page_shows(book, page):
    en = _counts((HTML_DIR / f"{page}.html").read_text(encoding="utf8"))
    ja = _counts((JA_DIR / f"{page}.html").read_text(encoding="utf8"))
    assert ja == en, {k: (en[k], ja[k]) for k in en if en[k] != ja[k]}


@book
@pytest.mark.parametrize("page", [p for p in PAGES if p != "bibliography"])
def test_japanese_page_has_no_english_only_text(book, page):
    found = english_only_blocks((JA_DIR / f"{page}.html").read_text(encoding="utf8"))
    assert not found, f"ja/{page}: {len(found)} English-only blocks: {found[:10]}"


@book
def test_figures_catalogue_holds_exactly_the_built_figures_strings(book):
    """figures.po's msgids are the strings of the English build's figures and widgets
    (and of the figures' generated descriptions): a figure whose words changed fails
    until `make translations` has carried them and they are translated."""
    built = {text for text, _ in i18n.figure_template(HTML_DIR)}
    held = {m.id for m in catalogues()[i18n.FIGURES_DOMAIN] if m.id}
    assert built == held, {
        "new (run make translations)": sorted(built - held)[:10],
        "gone": sorted(held - built)[:10],
    }


@book
@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("chapters/")])
def test_japanese_figures_hold_no_english_label(book, page):
    """Every figure and widget string of a Japanese page is the translation (data
    such as tokens and model outputs translate to themselves)."""

    def shape(text: str) -> str:  # numbers and placeholders alike, in any order
        holes = re.sub(r"\{\d+\}", "\x00", text)  # a placeholder is a number too
        return re.sub(r"\{\d+\}", "\x00", editions.to_pattern(holes)[0])

    translations = {shape(v) for v in editions.figures_table().values()}
    html = (JA_DIR / f"{page}.html").read_text(encoding="utf8")
    left = [s for s in editions.figure_strings(html) if shape(s) not in translations]
    assert not left, f"ja/{page}: {len(left)} figure strings not translated: {left[:8]}"


@book
@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("chapters/")])
def test_japanese_chapter_opens_the_japanese_notebook_in_colab(book, page):
    url, branch, book_path = repository(ROOT)
    rel = f"{ja_notebooks.JA_CHAPTERS.as_posix()}/{Path(page).name}.ipynb"
    link = colab_link(url, branch, f"{book_path}/{rel}" if book_path else rel)
    html = (JA_DIR / f"{page}.html").read_text(encoding="utf8")
    assert f'href="{link}"' in html, f"ja/{page}: no Colab button to {link}"
    assert (ROOT / rel).exists()


@book
def test_japanese_search_finds_positional_encoding_offline(book, browser):
    tab = browser.new_page()
    try:
        query = "位置エンコーディング"
        tab.goto((JA_DIR / "search.html").as_uri() + f"?q={query}", wait_until="load")
        tab.wait_for_function(
            "() => document.querySelectorAll('#search-results li').length > 0"
            " || /検索が完了|no results|did not match/i.test("
            "document.querySelector('#search-results')?.innerText || '')",
            timeout=30_000,
        )
        links = tab.eval_on_selector_all(
            "#search-results li a", "els => els.map(a => a.getAttribute('href'))"
        )
    finally:
        tab.close()
    assert any("chapters/03_positional_encoding" in h for h in links), links
