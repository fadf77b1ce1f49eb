"""The printable edition (`make pdf`, book/pdf.py), opened and read back.

`make pdf` prints every page of both editions (about 450 pages each, three minutes
on two cores); this test prints the same way a sample that holds each kind of thing
the book has (the intro: the cover and contents, a figure; chapter 4: plotly figures
with sliders and menus, display maths, code and its outputs; chapter 10: the
translator widget, which runs the model in the page; the glossary: a table),
in both editions, through the command, and reads the PDFs with pypdf:

- the pages: the title page and contents first, then each book page from the first
  page the contents give it, under its own bookmark, each page numbered;
- the text, Japanese included (the Japanese edition's IPAexGothic embedded), the code
  and the maths as text, not as pictures;
- the figures: each plotly figure drawn into a picture of its state, and no picture
  in the PDF blank (one colour throughout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from book_extension import RADICALS  # book/ is on pythonpath
from PIL import Image, ImageStat
from sync_colab import toc_files

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ["intro", "chapters/04_scaled_dot_product_attention",
          "chapters/10_decoding_and_attention", "glossary"]  # fmt: skip


def text_of(page) -> str:
    """A page's text, NFKC-normalised (full-width forms) and with runs of spaces
    made one."""
    return " ".join(unicodedata.normalize("NFKC", page.extract_text()).split())


def flat(text: str) -> str:
    """Text without any spaces: a line break inside a Japanese title comes out as one."""
    return "".join(unicodedata.normalize("NFKC", text).split())


def is_blank(image: Image.Image) -> bool:
    """One colour throughout (or so nearly that nothing is drawn on it)."""
    return max(ImageStat.Stat(image.convert("L")).stddev) < 1.0


@pytest.fixture(scope="module")
def printed(book, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    assert book.returncode == 0, "the book build failed: no PDF to print"
    out = tmp_path_factory.mktemp("pdf")
    done = subprocess.run(
        [sys.executable, "book/pdf.py", "--out", str(out), "--pages", *SAMPLE],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT / "book")},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = {}
    for lang in ("en", "ja"):
        path = out / f"attention-from-the-inside.{lang}.pdf"
        found[lang] = (path, json.loads(path.with_suffix(".json").read_text()))
    return found


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_pages_contents_bookmarks_and_numbers(printed, lang):
    from pypdf import PdfReader

    path, meta = printed[lang]
    reader = PdfReader(path)
    pages = reader.pages
    assert (
        len(pages)
        == meta["pages"]
        == meta["front"] + sum(p["pages"] for p in meta["book_pages"])
    )
    assert [p["page"] for p in meta["book_pages"]] == SAMPLE
    contents = " ".join(text_of(pages[i]) for i in range(meta["front"]))
    assert flat(text_of(pages[0])).startswith(flat(meta["title"]))  # the title page
    assert {"en": "Contents", "ja": "目次"}[lang] in contents
    for entry, mark in zip(meta["book_pages"], reader.outline, strict=True):
        # the contents give the page each starts on, the bookmark goes there,
        # and that page begins with its title
        assert flat(f"{entry['title']} {entry['first']}") in flat(contents), entry
        assert mark.title == entry["title"]
        assert reader.get_destination_page_number(mark) == entry["first"] - 1
        assert flat(text_of(pages[entry["first"] - 1])).startswith(flat(entry["title"]))
    for i in range(1, len(pages)):  # every page but the cover ends with its number
        assert text_of(pages[i]).split()[-1] == str(i + 1), i


def body_text_ja(page: str = "chapters/04_scaled_dot_product_attention") -> str:
    """A run of the Japanese edition's body text as its catalogue holds it now (so that
    rewording the prose moves the probe with it): the longest stretch without markup of
    the page's first paragraph after its title."""
    import re

    from babel.messages.pofile import read_po

    with (ROOT / "locale" / "ja" / "LC_MESSAGES" / f"{page}.po").open("rb") as f:
        messages = [m for m in read_po(f, locale="ja") if m.id and m.string]
    first = next(m.string for m in messages[1:] if "$" not in m.string)
    runs = re.split(r"\{[a-z:]+\}`[^`]*`|`[^`]*`|[*_]", first)
    return max(runs, key=len).strip(" ：:。")


def test_japanese_is_text_in_an_embedded_japanese_font(printed):
    from pypdf import PdfReader

    path, meta = printed["ja"]
    reader = PdfReader(path)
    text = " ".join(text_of(p) for p in reader.pages)
    probe = body_text_ja()
    assert len(probe) >= 8, probe  # a sentence's worth, not a word
    for words in ("私は太郎です", "スケール化ドット積アテンション", "用語集", probe):
        assert words in text.replace(" ", ""), words
    # and as written, not only after NFKC: no kanji came out as its radical (⽬ for
    # 目), which the book's copy of the font prevents (book_extension.write_cjk_font)
    raw = "".join(p.extract_text() for p in reader.pages)
    low, high = RADICALS
    assert not [c for c in raw if low <= ord(c) <= high]
    fonts = set()
    for page in reader.pages:
        for font in (page.get("/Resources", {}).get("/Font") or {}).values():
            font = font.get_object()
            for f in [
                font,
                *[d.get_object() for d in font.get("/DescendantFonts", [])],
            ]:
                desc = f.get("/FontDescriptor")
                if desc is not None and "/FontFile2" in desc.get_object():
                    fonts.add(str(f["/BaseFont"]).split("+")[-1])
    assert "IPAexGothic" in fonts, fonts


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_translator_is_printed_done_not_loading(printed, lang):
    """The widget that runs the model in the page is printed once it has translated
    its first sentence, not while it loads."""
    from pypdf import PdfReader

    path, meta = printed[lang]
    chapter = meta["book_pages"][2]
    reader = PdfReader(path)
    first = chapter["first"] - 1
    text = " ".join(text_of(p) for p in reader.pages[first : first + chapter["pages"]])
    assert "I am Taro" in text
    for busy in ("loading the model", "translating…", "読み込み中", "翻訳中"):
        assert busy not in text, busy


def test_code_and_maths_are_there_as_text(printed):
    from pypdf import PdfReader

    path, meta = printed["en"]
    chapter = meta["book_pages"][1]
    reader = PdfReader(path)
    first = chapter["first"] - 1
    text = " ".join(text_of(p) for p in reader.pages[first : first + chapter["pages"]])
    assert "def softmax_np(z):" in text  # a code cell
    assert "softmax(QK ⊤" in text and "Attention(Q,K,V" in text  # display maths
    assert "x softmax(x, x, 2x) (x, x, 2x) / sum" in text  # its printed output


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_every_figure_is_drawn_and_no_picture_is_blank(printed, lang):
    from pypdf import PdfReader

    path, meta = printed[lang]
    reader = PdfReader(path)
    for entry in meta["book_pages"]:
        first = entry["first"] - 1
        images = [
            image.image
            for page in reader.pages[first : first + entry["pages"]]
            for image in page.images
        ]
        # each plotly figure became a picture; the page's own pictures came along
        assert len(images) >= entry["figures"], entry
        blank = [i for i, image in enumerate(images) if is_blank(image)]
        assert not blank, f"{entry['page']}: pictures {blank} are blank"
    assert sum(e["figures"] for e in meta["book_pages"]) >= 6  # the sample has figures


def test_no_page_of_the_book_writes_a_radical():
    """The book's copy of IPAexGothic has no radicals (write_cjk_font): the sources of
    its pages must write none either (a kanji looks the same and is what is meant)."""
    low, high = RADICALS
    pages = [ROOT / f"{page}{suffix}" for page in toc_files(ROOT)
             for suffix in (".md", ".ipynb")]  # fmt: skip
    sources = [p for p in pages if p.exists()] + [*ROOT.glob("locale/ja/**/*.po")]
    found = {
        str(p.relative_to(ROOT)): c
        for p in sources
        for c in p.read_text(encoding="utf8")
        if low <= ord(c) <= high
    }
    assert len(sources) > 20 and not found, found


def test_the_blank_check_can_fail():
    assert is_blank(Image.new("RGB", (300, 200), "white"))
    drawn = Image.new("RGB", (300, 200), "white")
    for x in range(40, 260):
        drawn.putpixel((x, 100), (31, 119, 180))
    assert not is_blank(drawn)
