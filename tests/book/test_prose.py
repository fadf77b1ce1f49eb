"""Numbers in the prose come from the code that measured them.

A markdown cell (or a page of the book) may not type a measured figure by hand: it
glues it (myst-nb's ``{glue:text}`name:fmt```, set by ``glue("name", value)`` in a
code cell) or lets a cell print the sentence. What counts as a measured figure:

- a percentage (``99.7 %``), a duration (``43 s``, ``1.5 ms``, ``2 minutes``), a
  ratio written with ``×`` (``2.98×``), a run length (``900 steps``, ``30 epochs``);
- any other decimal number (``0.26``), which in this book is almost always measured.

Not counted: code spans and fenced code blocks (an answer's code), glue roles, section and exercise numbers (``§3.4``,
``Exercise 1.1``), exponents inside formulas (``^{-0.5}``), and the short list of true
constants below (the paper's hyper-parameters, exact mathematical values).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from sync_colab import toc_files  # book/ is on pythonpath

ROOT = Path(__file__).resolve().parents[2]

MEASURED = re.compile(
    r"""
      (?<![\w.^{-])\d+(?:[.,]\d+)*\s*(?:%|％)                    # a percentage
    | (?<![\w.^{-])\d+(?:\.\d+)?\s(?:s|ms)\b                     # 43 s, 1.5 ms
    | (?<![\w.^{-])\d+\.\d+(?:s|ms)\b                           # 1.5s (not "1s")
    | (?<![\w.^{-])\d+(?:\.\d+)?\s*(?:seconds?|minutes?|hours?)\b
    | (?<![\w.^{-])\d+(?:\.\d+)?\s*×                             # 2.98×
    | (?<![\w.^{-])\d[\d,\u202f\u2009 ]*\s(?:steps|epochs|updates)\b
    | (?<![\w.^{-])\d+\.\d+                                      # any decimal
    """,
    re.VERBOSE,
)
# True constants a page may type: the paper's hyper-parameters and exact values.
ALLOWED = {
    "0.1",  # P_drop and label smoothing epsilon (Vaswani et al. 2017, §5.4)
    "0.9",  # Adam beta_1 (§5.3)
    "0.98",  # Adam beta_2 (§5.3)
    "0.6",  # the length penalty alpha (§6.1)
    "0.5",  # exact halves: 1/2, the exponent -0.5 of the schedule
    "1.5",  # the schedule's warmup^-1.5 (§5.3)
    "95 %",  # the confidence level of an interval: a convention, not a measurement
    "100,000 steps",  # the paper's base-model training run (§5.2)
    "100 000 steps",
}
SKIP = [
    re.compile(r"\{glue(?::\w+)?\}`[^`]*`"),  # a glued value
    re.compile(r"`[^`]*`"),  # code
    re.compile(r"§\s?\d+(?:\.\d+)*"),  # a section of the paper
    re.compile(
        r"\b(?:[Ss]ection|[Ee]xercise|[Cc]hapter|[Tt]able)s?\s+\d+(?:\.\d+)*"
        r"(?:[–-]\d+(?:\.\d+)*)?"
    ),  # Exercise 10.1, exercises 10.2–10.6
    re.compile(r"\bLinux\s+\d+(?:\.\d+)+"),  # a kernel version
    re.compile(r"^\|\s*\d+\.\d+\s*\|", re.MULTILINE),  # an exercise number in a table
    re.compile(r"\]\([^)]*\)"),  # a link target
]


def pages() -> list[Path]:
    found = []
    for entry in toc_files(ROOT):
        for suffix in (".ipynb", ".md"):
            path = ROOT / (entry + suffix)
            if path.exists():
                found.append(path)
    return found


# a fenced code block (```python, ```text, ```): code, not prose; a directive's fence
# (````{admonition} …) is prose and stays
FENCED_CODE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})[ \t]*(?:[\w+-]+)?[ \t]*\n.*?^(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


def markdown_of(path: Path) -> list[str]:
    if path.suffix == ".md":
        sources = [path.read_text(encoding="utf8")]
    else:
        nb = nbformat.read(path, as_version=4)
        sources = [c.source for c in nb.cells if c.cell_type == "markdown"]
    return [FENCED_CODE.sub("", source) for source in sources]


def typed_figures(text: str) -> list[str]:
    """The measured-looking numbers that ``text`` types by hand."""
    for pattern in SKIP:
        text = pattern.sub(" ", text)
    return [
        m.group().strip()
        for m in MEASURED.finditer(text)
        if m.group().strip() not in ALLOWED
    ]


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.stem)
def test_prose_types_no_measured_figure(path):
    found = []
    for source in markdown_of(path):
        for line in source.splitlines():
            found += [f"{fig!r} in: {line.strip()[:90]}" for fig in typed_figures(line)]
    assert not found, (
        f"{len(found)} hand-typed figures in {path.relative_to(ROOT)} (glue them, "
        "or let the cell print the sentence):\n" + "\n".join(found)
    )


def test_fenced_code_is_not_prose_but_an_admonition_is():
    text = "````{admonition} Answer\nabout 0.26 here\n```python\nx = 0.3\n```\n````"
    assert [typed_figures(line) for line in FENCED_CODE.sub("", text).splitlines()] == [
        [], ["0.26"], [], [],
    ]  # fmt: skip


def test_the_figure_check_can_fail():
    assert typed_figures("reaches 99.7 % in 43 s, 2.98× faster after 900 steps") == [
        "99.7 %", "43 s", "2.98×", "900 steps",
    ]  # fmt: skip
    assert typed_figures("heads differ by 0.26 to 0.63") == ["0.26", "0.63"]
    ok = (
        "{glue:text}`acc:.1%` of §3.4, Exercise 1.1, `x = 0.25`, $d^{-0.5}$, "
        "P_drop = 0.1, the 1s of a mask"
    )
    assert typed_figures(ok) == []


GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`]*)`")
GLUE_CONTENT = re.compile(r"[A-Za-z0-9_]+(?::[^`{}\n]*)?")


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.stem)
def test_every_glue_role_is_closed(path):
    """`name:.1f}` (a brace for a backtick) swallows the prose up to the next backtick;
    the build fails only at the end of a long run, this fails at once."""
    bad = [
        m.group(1)[:60]
        for source in markdown_of(path)
        for m in GLUE_ROLE.finditer(source)
        if not GLUE_CONTENT.fullmatch(m.group(1))
    ]
    assert not bad, f"malformed glue roles in {path.relative_to(ROOT)}: {bad}"


def test_the_glue_role_check_can_fail():
    text = "BLEU {glue:text}`ch12_b:.1f} and chrF {glue:text}`ch12_c:.1f`"
    assert not GLUE_CONTENT.fullmatch(GLUE_ROLE.search(text).group(1))
    assert GLUE_CONTENT.fullmatch(GLUE_ROLE.search("{glue:text}`ch12_c:.1f`").group(1))


# --- where the book departs from the paper -----------------------------------------
# The marker, one spelling everywhere (MyST attrs_inline: a span the page styles):
DEPARTURE = "[ours, not the paper's]{.departure}"
MARKER = re.compile(r"\[([^\]]*)\]\{\.departure\}")
# Where a chapter departs from the paper, the paragraph that says so carries the
# marker: per page, phrases that must each share a paragraph with it.
DEPARTURES: dict[str, list[str]] = {
    "02_tokens_and_embeddings": [
        "keeps a Japanese and an English",
        "the paper shares all three matrices",
    ],
    "04_scaled_dot_product_attention": ["$-\\infty$", "most negative finite float"],
    "05_multi_head_attention": ["bias=False"],
    "06_masking": ["setting to $-\\infty$"],
    "07_residual_norm_ffn": ["norm_first=True", "Our package does all four"],
    "09_training": [
        "The factor in front is",
        "adds a **cool-down**",
        "Gradient clipping is",
        "sentence pairs is",
    ],
    "10_decoding_and_attention": ["this chapter keeps $\\alpha = 0$"],
    "12_real_japanese": [
        "The tokenizer is",
        "The budget is",
        "Five of its settings are",  # bf16 autocast among them
        "gradient clipping to norm",
        "a cool-down",
        "averages the last",
        "Its layers are pre-LN",
    ],
    "13_where_it_led": [
        "layers are pre-LN",
        "gradient clipping to norm 1",
        "Hugging Face's data collator",  # BERT's reference code draws a fixed number
        "for the book's bidirectional encoder",  # ALiBi's |i - j|
        "does not train with",  # the experts' balancing loss
        "a matrix of its own",  # the miniature GPT and BERT keep an untied head
    ],
}


def paragraphs(path: Path) -> list[str]:
    return [p for source in markdown_of(path) for p in re.split(r"\n\s*\n", source)]


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.stem)
def test_departures_from_the_paper_are_marked_one_way(path):
    found = [m.group(0) for p in paragraphs(path) for m in MARKER.finditer(p)]
    odd = [f for f in found if f != DEPARTURE]
    assert not odd, f"{path.name}: departure markers spelled otherwise: {odd}"
    unmarked = [
        phrase
        for phrase in DEPARTURES.get(path.stem, [])
        if not any(phrase in p and DEPARTURE in p for p in paragraphs(path))
    ]
    assert not unmarked, (
        f"{path.name}: no paragraph both says {unmarked} and carries {DEPARTURE}"
    )


def test_the_departure_check_can_fail(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        f"Pre-LN here {DEPARTURE}.\n\nClipping, unmarked.\n\n[Ours]{{.departure}}\n"
    )
    paras = paragraphs(page)
    assert any("Pre-LN" in p and DEPARTURE in p for p in paras)
    assert not any("Clipping" in p and DEPARTURE in p for p in paras)
    assert [m.group(0) for p in paras for m in MARKER.finditer(p)][1] != DEPARTURE
