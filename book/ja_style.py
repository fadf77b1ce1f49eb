"""The Japanese edition's house style, as far as a script can check it.

``locale/ja/STYLE.md`` states the rules; this module finds the breaches that a pattern
can see in a catalogue's messages (``book/po_tool.py check`` prints them, and
``tests/book/test_i18n.py`` fails on them):

- counters: 漢数字 with つ (「二つ」), Arabic numerals with every other counter (「2 回」);
- a sentence that ends in a colon before a display, list or table ends in 「：」;
- exercise labels: the difficulty as 基本・標準・発展, in full-width brackets inside
  the bold label (「**（基本）**」, 「**題名（発展）。**」); run-in titles end in 「。」;
- headings that invite the reader to try a widget say 「試してみよう」;
- Japanese example sentences and tokens quoted in the prose stand in 「」;
- one 長音 rule: no 長音符 at the end of -er / -or / -ar loanwords (「エンコーダ」);
- glosses (English in brackets after a Japanese term): at most two in a sentence,
  never inside a compound or before a number, never after a katakana word (it is the
  English already), never for the common words of ``NO_GLOSS``, and only at the term's
  first appearance in the book or in the chapter that defines it (``book_glosses``);
- the glossary's rejected renderings (``not:`` in ``locale/ja/glossary.yml``) and the
  literal collocations of ``TRANSLATIONESE`` do not occur;
- an English word is not rendered by the Japanese that ``RENDERINGS`` rejects for it
  (attend is not 注目);
- one spelling each (``SPELLING``): ほうが for the comparative, 活性値 for activation
  values (活性化 only in 活性化関数), FLOP 数 for the count (FLOPs only after a number).
"""

from __future__ import annotations

import re
from collections import defaultdict

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef々〆"
KATAKANA = "\u30a0-\u30ffー・"
# not prose: roles, math, code, link targets, HTML tags, placeholders
NOT_PROSE = re.compile(
    r"\{[\w:.-]+\}`[^`]*`|`[^`]*`|\$\$.*?\$\$|(?<![\\$])\$[^$\n]+\$|\]\([^)]*\)"
    r"|https?://\S+|<[^>]+>|\{\d+\}",
    re.DOTALL,
)


def prose(text: str) -> str:
    """``text`` with roles, math, code and link targets blanked (same length)."""
    return NOT_PROSE.sub(lambda m: "\x00" * len(m.group(0)), text)


# --- counters ---------------------------------------------------------------------
ARABIC_TSU = re.compile(r"(?<![\d.,])\d+\s?つ")
KANJI_COUNT = re.compile(
    r"(?<![数何第])[一二三四五六七八九十]+"
    r"(?:回|個|層|行|列|次元|倍|ステップ|エポック|トークン|番目|種類|通り|本|語|文字|件|組)"
)
KANJI_IDIOMS = ("一語一語",)

# --- exercise labels ----------------------------------------------------------------
DIFFICULTY = {"warm-up": "基本", "medium": "標準", "hard": "発展", "harder": "発展"}
LEAD_BOLD = re.compile(r"^\s*(?:\(\s*)?\*\*(.+?)\*\*")
EN_DIFFICULTY = re.compile(
    r"^\(?(warm-up|medium|hard|harder)(?:,[^)]*)?\)?\.?$"  # **Warm-up.**, **(harder, cost)**
    r"|\((warm-up|hard|harder)\)[.?]?$"  # **Seeds (hard).**
    r"|^(harder):",  # **Harder: rotary embeddings.**
    re.IGNORECASE,
)


def english_difficulty(msgid: str) -> str | None:
    m = LEAD_BOLD.match(msgid)
    if not m:
        return None
    d = EN_DIFFICULTY.search(m.group(1).strip())
    if not d:
        return None
    return DIFFICULTY[next(g for g in d.groups() if g).lower()]


# a level named after its stars in running text: "graded from ★ (warm-up) to ★★★ (hard)"
STAR_DIFFICULTY = re.compile(
    r"(★+)\s*\((?:warm-up|medium|hard|harder)\)", re.IGNORECASE
)


def without_difficulty(msgid: str) -> str:
    """``msgid`` without the difficulty word of its exercise label (``**Warm-up.**``
    is a label, not the learning-rate warm-up of the glossary), or of a level named
    after its stars (``★ (warm-up)``)."""
    msgid = STAR_DIFFICULTY.sub(r"\1", msgid)
    m = LEAD_BOLD.match(msgid)
    if not m or not english_difficulty(msgid):
        return msgid
    label = EN_DIFFICULTY.sub("", m.group(1).strip())
    return msgid[: m.start(1)] + label + msgid[m.end(1) :]


def exercise_label_problems(msgid: str, msgstr: str) -> list[str]:
    want = english_difficulty(msgid)
    en = LEAD_BOLD.match(msgid)
    if not en:
        return []
    ja = re.match(r"^\*\*(.+?)\*\*(?=\s|$)", msgstr)
    out = []
    if want:
        if not ja or f"（{want}" not in ja.group(1):
            out.append(
                f"exercise label: the difficulty is 「（{want}）」 inside the bold "
                "label: 「**（基本）**」 or 「**題名（発展）。**」"
            )
    elif en.group(1).rstrip().endswith((".", "?")) and en.end() < len(msgid.rstrip()):
        # a run-in title: **The floor.** What is ...
        if not ja or not ja.group(1).endswith(("。", "）")):
            out.append(
                "run-in title: 「**題名。**」, the 「。」 inside the bold, a space after"
            )
    return out


# --- 長音 -----------------------------------------------------------------------------
# -er / -or / -ar loanwords: no 長音符 at the end (JIS Z 8301's rule, the one the
# glossary's エンコーダ, デコーダ, トークナイザ, パラメータ follow). Words seen in the book.
CHOON = {
    "エンコーダー": "エンコーダ", "デコーダー": "デコーダ", "トークナイザー": "トークナイザ",
    "パラメーター": "パラメータ", "ジェネレーター": "ジェネレータ", "スライダー": "スライダ",
    "レイヤー": "レイヤ", "チェッカー": "チェッカ", "オプティマイザー": "オプティマイザ",
    "スケジューラー": "スケジューラ", "ユーザー": "ユーザ", "ブラウザー": "ブラウザ",
    "コンピューター": "コンピュータ", "フィルター": "フィルタ", "ヘッダー": "ヘッダ",
    "マーカー": "マーカ", "バッファー": "バッファ", "カウンター": "カウンタ",
    "ポインター": "ポインタ", "サーバー": "サーバ", "フォルダー": "フォルダ",
    "プレースホルダー": "プレースホルダ", "ローダー": "ローダ", "エクスポーター": "エクスポータ",
    "ベクター": "ベクトル", "スカラー": "スカラ", "ファクター": "ファクタ",
    "インタープリター": "インタープリタ", "コンテナー": "コンテナ", "プロセッサー": "プロセッサ",
    "アクセラレーター": "アクセラレータ", "トランスフォーマー": "トランスフォーマ",
    "エディター": "エディタ", "ビューアー": "ビューア", "モニター": "モニタ",
    "ラッパー": "ラッパ", "アダプター": "アダプタ", "サンプラー": "サンプラ",
    "ランナー": "ランナ", "ハンドラー": "ハンドラ", "コントローラー": "コントローラ",
    "インデクサー": "インデクサ", "ドライバー": "ドライバ", "ワーカー": "ワーカ",
    "スコアラー": "スコアラ", "リーダー": "リーダ", "ライター": "ライタ",
    "ルーター": "ルータ",
}  # fmt: skip

# --- translationese ---------------------------------------------------------------------
# literal collocations an editor rewrites (what a sweep of the catalogues found)
TRANSLATIONESE = {
    "の上を通": "データを一巡する／データに通す",
    "本物の": "実際の／実在の（「本物」は偽物に対する語）",
    "算術": "計算・演算・計算量",
    "と戦": "抑える・防ぐ・対処する",
    "いくつかの単位": "数単位",
    "assert で確認": "assert で確かめる／assert で検査する／assert が保証する／"
    "「…であることを assert で検査する」",
    "assert により確認": "assert で確かめる／assert で検査する",
    "治療": "対策・解消（a cure for a bug or a bias）",
}

# --- renderings tied to an English word -------------------------------------------------
# (English word in the msgid, Japanese that must not render it, what to write instead):
# the mechanism's verb is not 注目 (注目 stays for "note", "look for")
RENDERINGS = [
    (
        re.compile(r"\battend(?:s|ed|ing)?\b", re.IGNORECASE),
        "注目",
        "attend: 「X にアテンションを向ける」「アテンションを向けてよい」、"
        "自動詞なら「アテンションをとる」",
    ),
]

# --- one spelling each ------------------------------------------------------------------
SPELLING = [
    # the comparative is ほうが (方 stays in 一方, 両方, 選び方)
    (re.compile(r"(?<=[のたる])方が"), "comparative: 「方が」 -> 「ほうが」"),
    # activation values are 活性値; 活性化 only in 活性化関数
    (
        re.compile(r"活性化(?!関数)"),
        "「活性化」 -> 「活性値」 (values) or 「活性化関数」",
    ),
    # numbers read as Japanese numbers: not 「4.10 百万」 (a glued decimal: name the unit
    # first, 「百万 FLOP 単位で 4.10」), not 「1.14×」 in prose (「1.14 倍」)
    (
        re.compile(r"[\d\x00] ?百万"),
        "「… 百万」 after a number -> 「410 万」 or 「百万 … 単位で 4.10」",
    ),
    (re.compile(r"[\d\x00] ?×(?! ?[\d\x00A-Za-z])"), "「1.14×」 -> 「1.14 倍」"),
]
# FLOPs is a unit after a number (「2 FLOPs」, 「{glue} FLOPs」, 「$3D$ FLOPs」); the count
# as a noun is FLOP 数 (「FLOP 数は同じ」); 「FLOP あたり」 is the unit alone
FLOPS = re.compile(r"M?FLOPs")


def flops_problems(p: str) -> list[str]:
    out = []
    for m in FLOPS.finditer(p):
        before = p[: m.start()].rstrip(" ")[-1:]
        if not before or not (before.isdigit() or before in "\x00（("):
            out.append(
                f"「{m.group(0)}」 as a noun -> 「FLOP 数」 (FLOPs after a number)"
            )
    return out


# --- glosses ---------------------------------------------------------------------------
GLOSS = re.compile(
    rf"(?<=[{CJK}）*])（(?P<en>[A-Za-z][A-Za-z0-9 ,'/&.+\-]*?)(?:[。、；：][^）]*)?）"
)
NO_GLOSS = {
    "translation", "exercise", "exercises", "token", "tokens", "mask", "masks", "model",
    "word", "sentence", "training", "test", "loss", "layer", "vector", "matrix", "step",
}  # fmt: skip


def glosses(text: str) -> list[re.Match]:
    """English glosses in brackets after Japanese: 「残差接続（residual connection）」."""
    p = prose(text)
    return [
        m
        for m in GLOSS.finditer(p)
        if m.group("en").lower() in NO_GLOSS
        or (re.search(r"[A-Za-z]{3,}", m.group("en")) and not _name(m.group("en")))
    ]


def _name(text: str) -> bool:
    """A name in brackets, not a gloss: Bahdanau, Colab / Jupyter, tensor2tensor,
    pre-LN (every word has a capital or a digit)."""
    return all(re.search(r"[A-Z\d]", w) for w in re.split(r"[ /,&]+", text) if w)


def gloss_word(m: re.Match) -> str:
    return m.group("en").strip().lower()


KANJI = r"[\u3400-\u4dbf\u4e00-\u9fff々]"
# the kana that end 読み, 付き, 切り (not particles such as の, は, を)
OKURIGANA = "みきりしえけめれちいく"


def _katakana_before(text: str, start: int) -> bool:
    """The gloss follows a word all in katakana (ソフトマックス（softmax））."""
    i = start
    while i > 0 and text[i - 1] == "*":  # *メモリ*（memory）
        i -= 1
    end = i
    while i > 0 and re.match(f"[{KATAKANA}]", text[i - 1]):
        i -= 1
    if i == end:
        return False
    while i > 0 and text[i - 1] == "*":  # *系列変換*モデル（...）: a compound
        i -= 1
    if i >= 2 and text[i - 1] in OKURIGANA and re.match(KANJI, text[i - 2]):
        return False  # 先読みマスク（causal mask）: kanji, okurigana, katakana
    return i == 0 or not re.match(KANJI, text[i - 1])


def gloss_problems(msgstr: str) -> list[str]:
    # a citation after a gloss is not a compound: 「…モデル（unigram LM）{cite}`x`」
    msgstr = re.sub(r"\s*\{cite(?::\w+)?\}`[^`]*`", "", msgstr)
    p = prose(msgstr)
    out = []
    found = glosses(msgstr)
    for m in found:
        en = m.group("en")
        after = p[m.end() : m.end() + 2].lstrip(" ")
        if after[:1] and (
            re.match(rf"[A-Za-z0-9\x00{KATAKANA}\u3400-\u9fff]", after[0])
        ):
            out.append(
                f"gloss inside a compound or before a number: （{en}）{after[:1]}"
            )
        if _katakana_before(p, m.start()):
            out.append(
                f"gloss after a katakana word (it is the English already): （{en}）"
            )
        if en.lower() in NO_GLOSS:
            out.append(f"gloss of a common word: （{en}）")
    for sentence in re.split(r"(?<=。)", p):
        n = len(glosses(sentence))
        if n > 2:
            out.append(f"{n} glosses in one sentence (at most two): {sentence[:40]!r}")
    return out


# --- example sentences -------------------------------------------------------------
JA_RUN = re.compile(rf"[{CJK}](?:[{CJK} /／]*[{CJK}])?")


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    spans, stack = [], []
    for i, ch in enumerate(text):
        if ch in "「『":
            stack.append(i)
        elif ch in "」』" and stack:
            spans.append((stack.pop(), i))
    return spans


def example_problems(msgid: str, msgstr: str) -> list[str]:
    """A Japanese run in the English (an example, a token) stands in 「」 in the
    Japanese, unless the message is that run alone (a table cell, a heading's data)."""
    en = prose(msgid)
    runs = {m.group(0) for m in JA_RUN.finditer(en)}
    if not runs or en.strip() in runs:
        return []
    ja = prose(msgstr)
    quoted = [ja[a + 1 : b] for a, b in _quoted_spans(ja)]
    out = []
    for run in sorted(runs, key=len, reverse=True):
        if "「" + run in msgid or "『" + run in msgid:
            continue  # already quoted in the English (a title)
        if run in ja and not any(run in q for q in quoted):
            out.append(f"example not in 「」: {run}")
    return out


# --- one message -------------------------------------------------------------------------


def message_problems(
    msgid: str, msgstr: str, rejected: dict[str, str] | None = None
) -> list[str]:
    """The house-style breaches of one translated message."""
    if not msgstr or msgid.startswith("\n"):
        return []
    p = prose(msgstr)
    out = []
    for m in ARABIC_TSU.finditer(p):
        out.append(f"counter: 「{m.group(0)}」 -> 漢数字 (一つ、二つ)")
    for m in KANJI_COUNT.finditer(p):
        if not any(i in p[max(0, m.start() - 2) : m.end() + 2] for i in KANJI_IDIOMS):
            out.append(f"counter: 「{m.group(0)}」 -> Arabic numerals (2 回、3 層)")
    if msgid.rstrip().endswith(":") and not msgstr.rstrip().endswith("："):
        out.append("ends with ':' in English: end with 「：」")
    if re.search(rf"[{CJK}]:", p):
        out.append("ASCII ':' after Japanese: use 「：」")
    if re.match(r"\s*Try it\b", msgid) and "試してみよう" not in msgstr:
        out.append("'Try it' heading: 「試してみよう」")
    out += exercise_label_problems(msgid, msgstr)
    out += example_problems(msgid, msgstr)
    for long, short in CHOON.items():
        if long in p:
            out.append(f"長音: 「{long}」 -> 「{short}」")
    for phrase, better in TRANSLATIONESE.items():
        if phrase in p:
            out.append(f"translationese: 「{phrase}」 -> {better}")
    for pattern, message in SPELLING:
        if pattern.search(p):
            out.append(f"spelling: {message}")
    out += flops_problems(p)
    en = prose(msgid)
    for word, ja, better in RENDERINGS:
        if word.search(en) and ja in p:
            out.append(f"rendering: 「{ja}」 -> {better}")
    for variant, term in (rejected or {}).items():
        if variant in p:
            out.append(f"glossary: 「{variant}」 -> 「{term}」")
    out += gloss_problems(msgstr)
    return out


# --- the whole book -----------------------------------------------------------------


def defines(page: str, term: dict) -> bool:
    """``page`` is the chapter that defines ``term`` (its ``chapter`` number)."""
    n = term.get("chapter")
    return n is not None and page.startswith(f"chapters/{int(n):02d}_")


def book_glosses(
    catalogues: list[tuple[str, list[tuple[str, str]]]], terms: list[dict]
) -> list[tuple[str, str]]:
    """(catalogue, problem) for glosses that repeat. ``catalogues`` in the toc's
    order, each a list of (msgid, msgstr). A gloss stands once at the term's first
    appearance in the book and once in the chapter that defines it (a glossary term's
    ``chapter``); a term not in the glossary is glossed once in the book, plus once
    in one more catalogue at most (where it is explained)."""
    by_en = {}
    for t in terms:
        for en in [t["en"], *t.get("also", [])]:
            by_en[en.lower()] = t
    first_ja: dict[str, str] = {}  # glossary term's Japanese -> first catalogue
    seen: dict[str, list[str]] = defaultdict(list)  # gloss -> catalogues holding it
    out = []
    for name, pairs in catalogues:
        for _, msgstr in pairs:
            p = prose(msgstr)
            for t in terms:
                if t["ja"] in p:
                    first_ja.setdefault(t["ja"], name)
            for m in glosses(msgstr):
                en = re.sub(r"(?:s|es)$", "", gloss_word(m))
                term = by_en.get(en) or by_en.get(gloss_word(m))
                places = seen[gloss_word(m)]
                if name in places:
                    out.append((name, f"gloss twice in one page: （{m.group('en')}）"))
                    continue
                places.append(name)
                if term:
                    first = first_ja.get(term["ja"], name)
                    if name != first and not defines(name, term):
                        out.append(
                            (
                                name,
                                f"gloss of （{m.group('en')}）: only at its first "
                                f"appearance ({first}) or in its chapter "
                                f"({term.get('chapter', 'none given')})",
                            )
                        )
                elif len(places) > 2:
                    out.append(
                        (
                            name,
                            f"gloss of （{m.group('en')}） in a third page "
                            f"({', '.join(places[:2])} have it)",
                        )
                    )
    return out
