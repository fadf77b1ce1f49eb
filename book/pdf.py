"""`make pdf`: the printable edition, one PDF per edition, from the built book.

Each page of the book, in the order of ``_toc.yml``, is opened in the system's
Chromium (playwright drives it; nothing is downloaded) and printed with the book's
own print style (``_static/custom.css``, ``@media print``: no sidebars or buttons,
code wrapped, figures kept whole). Before it prints, every plotly figure is drawn
into a picture of its current state (``Plotly.toImage``: the slider where it stands,
the menu's choice), so the paper shows what the reader saw. pypdf then joins the
pages behind a title page and a table of contents, adds a bookmark per page and
stamps the page numbers (a strip of numbers that Chromium prints, laid over the
pages). Chromium embeds the fonts it used: the Japanese edition's IPAexGothic (the
book's own ``_static/vendor/fonts/ipaexg.ttf``) and MathJax's fonts.

    python book/pdf.py                 # _build/pdf/attention-from-the-inside.{en,ja}.pdf
    python book/pdf.py --edition ja    # one edition
    python book/pdf.py --pages intro chapters/04_scaled_dot_product_attention

Beside each PDF, ``<name>.json`` records what went in: per book page its title, its
first page in the PDF, its number of pages, and the figures drawn into it.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import sys
import time
from pathlib import Path

from static_server import serve
from sync_colab import ROOT, toc_files

BUILD = ROOT / "_build" / "html"
OUT = ROOT / "_build" / "pdf"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
STEM = "attention-from-the-inside"
# the built edition's folder; titles are read from the pages themselves
EDITIONS = {"en": BUILD, "ja": BUILD / "ja"}
CONTENTS = {"en": "Contents", "ja": "目次"}
EDITION_NAME = {"en": "English edition", "ja": "日本語版"}
# A4 with the margins of the book's print style; the viewport is about the printed
# column's width, so that plotly lays its figures out for the paper's width
MARGIN = {"top": "14mm", "bottom": "16mm", "left": "13mm", "right": "13mm"}
VIEWPORT = {"width": 760, "height": 1000}

# Waits for fonts, MathJax and the widgets, draws each plotly figure into a PNG of its
# current state, drops links to the local server (they would be dead on paper; links within
# the page stay, as PDF links), and returns what the page holds.
PREPARE_JS = r"""async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const until = async (ok, ms) => {
    for (const end = Date.now() + ms; !ok() && Date.now() < end;) await sleep(200);
  };
  await document.fonts.ready;
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  // the widgets drawn, and done with what they do on opening (the translator loads
  // its model and translates its first sentence): printed as the page opens them
  const views = [...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')];
  await until(() => views.every(v => v.previousElementSibling
    && v.previousElementSibling.querySelector(".lm-Widget")), 30000);
  await sleep(300);
  await until(() => !document.querySelector(
    '[data-state="busy"], [data-state="loading"]'), 60000);
  const figs = [...document.querySelectorAll("div.plotly-graph-div.js-plotly-plot")];
  let drawn = 0;
  for (const gd of figs) {
    const lay = gd._fullLayout;
    const url = await Plotly.toImage(gd, {format: "png", width: lay.width,
                                          height: lay.height, scale: 2});
    const img = document.createElement("img");
    img.src = url;
    img.className = "tedu-print-figure";
    img.alt = gd.getAttribute("aria-label") || "figure";
    img.style.width = "100%";
    img.style.maxWidth = lay.width + "px";
    await img.decode();
    gd.parentNode.insertBefore(img, gd);
    gd.style.display = "none";
    drawn += 1;
  }
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.getAttribute("href");
    if (!href.startsWith("#") && a.href.startsWith(location.origin)) {
      a.removeAttribute("href");
    }
  }
  const main = document.querySelector("main") || document.body;
  const h1 = main.querySelector("h1");
  const title = h1 ? h1.textContent.replace(/[#¶]\s*$/, "").trim() : document.title;
  return {title, figures: figs.length, drawn};
}"""

TITLE_PAGE = """<!doctype html><html lang="{lang}"><head><meta charset="utf-8">
<style>
@font-face {{ font-family: "IPAexGothic"; src: url("{font}") format("truetype"); }}
body {{ font-family: system-ui, "IPAexGothic", sans-serif; color: #222; }}
.cover {{ height: 240mm; display: flex; flex-direction: column; justify-content: center;
          break-after: page; }}
.cover h1 {{ font-size: 30pt; margin: 0 0 6mm; }}
.cover p {{ font-size: 13pt; margin: 1mm 0; color: #444; }}
h2 {{ font-size: 18pt; }}
ol {{ list-style: none; padding: 0; font-size: 11pt; }}
li {{ display: flex; gap: 2mm; margin: 2.2mm 0; }}
li .t {{ flex: none; max-width: 85%; }}
li .dots {{ flex: 1; border-bottom: 1px dotted #888; margin-bottom: 1.2mm; }}
li .n {{ flex: none; }}
</style></head><body>
<div class="cover"><h1>{title}</h1><p>{edition}</p><p>{made}</p></div>
<h2>{contents}</h2><ol>{entries}</ol></body></html>"""

NUMBERS_PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
@page {{ size: A4; margin: 0; }}
html, body {{ margin: 0; }}
div {{ height: 297mm; position: relative; break-after: page; overflow: hidden; }}
span {{ position: absolute; bottom: 7mm; left: 0; right: 0; text-align: center;
        font: 9pt sans-serif; color: #555; }}
</style></head><body>{pages}</body></html>"""


def book_pages(pages: list[str] | None = None) -> list[str]:
    """The book's pages in reading order (``_toc.yml``), or ``pages`` as given."""
    return list(pages) if pages else toc_files(ROOT)


def _read(pdf: bytes):
    from pypdf import PdfReader

    return PdfReader(io.BytesIO(pdf))


def _print(tab, url: str) -> tuple[object, dict]:
    """Page ``url`` printed (a PdfReader of it), and what PREPARE_JS found there."""
    tab.goto(url, wait_until="load")
    info = tab.evaluate(PREPARE_JS)
    if info["drawn"] != info["figures"]:
        raise RuntimeError(f"{url}: drew {info['drawn']} of {info['figures']} figures")
    pdf = tab.pdf(format="A4", print_background=True, margin=MARGIN,
                  outline=False, tagged=True)  # fmt: skip
    return _read(pdf), info


def _title_pdf(tab, base: str, lang: str, title: str, entries: list[tuple[str, int]]):  # fmt: skip
    """The title page and the contents, as a PdfReader."""
    items = "".join(
        f'<li><span class="t">{html.escape(t)}</span><span class="dots"></span>'
        f'<span class="n">{n}</span></li>'
        for t, n in entries
    )
    made = time.strftime("%Y-%m-%d")
    tab.set_content(TITLE_PAGE.format(
        lang=lang, font=f"{base}_static/vendor/fonts/ipaexg.ttf", title=html.escape(title),
        edition=EDITION_NAME[lang], made=made, contents=CONTENTS[lang], entries=items,
    ))  # fmt: skip
    tab.evaluate("document.fonts.ready.then(() => true)")
    return _read(tab.pdf(format="A4", print_background=True, margin=MARGIN))


def _numbers_pdf(tab, n: int):
    """n pages, each with its page number (1 to n) at the bottom, as a PdfReader."""
    pages = "".join(f"<div><span>{i}</span></div>" for i in range(1, n + 1))
    tab.set_content(NUMBERS_PAGE.format(pages=pages))
    return _read(tab.pdf(format="A4", margin={"top": "0", "bottom": "0", "left": "0",
                                               "right": "0"}, prefer_css_page_size=True))  # fmt: skip


def build_edition(
    lang: str, pages: list[str], out_dir: Path = OUT
) -> tuple[Path, dict]:
    """Print every page of edition ``lang``, join them, number them; the PDF's path
    and the record written beside it."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfWriter

    folder = EDITIONS[lang]
    if not (folder / "index.html").is_file():
        raise SystemExit(f"no built book at {folder}: run `make book` first")
    out_dir.mkdir(parents=True, exist_ok=True)
    printed: list[tuple[str, object, dict]] = []  # (page, its PdfReader, its info)
    with serve(folder) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            tab = browser.new_page(viewport=VIEWPORT, locale=lang)
            for page in pages:
                started = time.perf_counter()
                reader, info = _print(tab, f"{base}{page}.html")
                printed.append((page, reader, info))
                print(f"{lang} {page}: {len(reader.pages)} pages, {info['figures']} figures "
                      f"({time.perf_counter() - started:.1f} s)", flush=True)  # fmt: skip
            book_title = printed[0][2]["title"] if printed else ""
            # the title page and contents: laid out once to learn how many pages they
            # take, then again with the page numbers that follow from it
            counts = [len(reader.pages) for _, reader, _ in printed]
            front = 0
            while True:
                starts = [front + 1 + sum(counts[:i]) for i in range(len(counts))]
                entries = [(info["title"], s) for (_, _, info), s in zip(printed, starts, strict=True)]  # fmt: skip
                title_pdf = _title_pdf(tab, base, lang, book_title, entries)
                pages_front = len(title_pdf.pages)
                if pages_front == front:
                    break
                front = pages_front
            total = front + sum(counts)
            numbers = _numbers_pdf(tab, total)
        finally:
            browser.close()
    if len(numbers.pages) != total:
        raise RuntimeError(f"the page-number strip has {len(numbers.pages)} pages, "
                           f"not {total}")  # fmt: skip
    writer = PdfWriter()
    writer.append(title_pdf)
    record = []
    for (page, reader, info), start in zip(printed, starts, strict=True):
        writer.append(reader)
        writer.add_outline_item(title=info["title"], page_number=start - 1)
        record.append({"page": page, "title": info["title"], "first": start,
                       "pages": len(reader.pages), "figures": info["figures"]})  # fmt: skip
    for i, page in enumerate(writer.pages):
        if i >= 1:  # the cover has no number
            page.merge_page(numbers.pages[i])
            page.compress_content_streams(level=9)  # merging left them uncompressed
    writer.add_metadata({"/Title": book_title, "/Lang": lang})
    writer.compress_identical_objects(remove_duplicates=True, remove_unreferenced=True)
    path = out_dir / f"{STEM}.{lang}.pdf"
    with open(path, "wb") as f:
        writer.write(f)
    meta = {"edition": lang, "title": book_title, "pages": total, "front": front,
            "book_pages": record}  # fmt: skip
    path.with_suffix(".json").write_text(json.dumps(meta, ensure_ascii=False, indent=1))
    return path, meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edition", choices=sorted(EDITIONS), action="append",
                    help="en or ja (default: both)")  # fmt: skip
    ap.add_argument("--pages", nargs="+", help="only these pages (as in _toc.yml)")
    ap.add_argument("--out", type=Path, default=OUT, help="folder (default _build/pdf)")
    args = ap.parse_args(argv)
    for lang in args.edition or sorted(EDITIONS):
        started = time.perf_counter()
        path, meta = build_edition(lang, book_pages(args.pages), args.out)
        print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
              f"{meta['pages']} pages ({time.perf_counter() - started:.0f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
