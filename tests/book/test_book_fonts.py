"""Japanese is visible everywhere in the built book: asked of the browser itself.
A check that the font file loaded passed while Japanese inside formulas was invisible
and the sidebar showed empty boxes. So for every Japanese text node on a page
(prose, sidebar, formulas, plotly's SVG labels, widgets) `undrawn_japanese` asks
Chromium, through the DevTools protocol, which fonts it drew the node's glyphs with,
and reports the nodes none of whose fonts has Japanese glyphs.
tests/book/test_pages.py asks it of every English page, in the tab it has open for the
page's other checks (one page load for all); this module shows it can fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
HTML_DIR = ROOT / "_build" / "html"
# kana, CJK ideographs (Ext. A, the main block, and Ext. B and beyond, where rare
# characters such as 𩸽 live): each must be drawn by a font with Japanese glyphs
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\U00020000-\U0002ffff]")
# fonts with Japanese glyphs: the one the book ships, and common system ones
JAPANESE_FONTS = ("IPAexGothic", "Hiragino", "Yu Gothic", "Noto Sans CJK", "Noto Serif")

SETTLE_JS = """async () => {
  await document.fonts.ready;
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await new Promise(r => setTimeout(r, 300));
  await document.fonts.ready;
}"""


def undrawn_japanese(tab) -> list[str]:
    """Elements whose Japanese characters were not all drawn with a Japanese font.

    Chromium reports, per element, how many glyphs of its text each font drew; the
    Japanese fonts must have drawn at least one per Japanese character (a character
    no font has is drawn as a box by some other font: one missing glyph fails).
    """
    cdp = tab.context.new_cdp_session(tab)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]
    found: list[str] = []
    todo = [root]
    while todo:
        node = todo.pop()
        children = node.get("children", [])
        text = "".join(
            c.get("nodeValue", "") for c in children if c.get("nodeType") == 3
        )
        wanted = len(CJK.findall(text))
        if wanted:
            try:
                fonts = cdp.send(
                    "CSS.getPlatformFontsForNode", {"nodeId": node["nodeId"]}
                )
            except Exception:  # not laid out (e.g. <title>, a closed menu)
                fonts = {"fonts": []}
            fonts = fonts["fonts"]
            drawn = sum(f["glyphCount"] for f in fonts
                        if f["familyName"].startswith(JAPANESE_FONTS))  # fmt: skip
            # no fonts: the element is not drawn (display: none), nothing to see
            if fonts and drawn < wanted:
                names = [f"{f['familyName']} ({f['glyphCount']})" for f in fonts]
                found.append(f"{text.strip()[:40]!r}: {wanted} Japanese characters, "
                             f"drawn with {names}")  # fmt: skip
        todo += children + node.get("shadowRoots", [])
        if "contentDocument" in node:
            todo.append(node["contentDocument"])
    cdp.detach()
    return found


def _open(browser, url: str):
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    tab.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith(("file:", "data:", "blob:"))
            else route.abort()
        ),
    )
    tab.goto(url, wait_until="load")
    tab.evaluate(SETTLE_JS)
    return tab


def test_font_check_can_fail(browser, tmp_path):
    css = (HTML_DIR / "_static" / "custom.css").as_uri()
    page = tmp_path / "tofu.html"
    page.write_text(
        f'<html><head><link rel="stylesheet" href="{css}"></head><body>'
        '<p style="font-family: IPAexGothic">私は太郎です</p>'
        "<p style=\"font-family: 'Liberation Serif'\">太郎</p>"
        # IPAexGothic has 𩸽, but a unicode-range without Ext. B keeps it from
        # drawing it: a box beside four drawn characters
        "<style>@font-face { font-family: 'NoExtB'; src: url('"
        + (HTML_DIR / "_static" / "vendor" / "fonts" / "ipaexg.ttf").as_uri()
        + "'); unicode-range: U+3000-9FFF; }</style>"
        "<p style=\"font-family: 'NoExtB', monospace\">𩸽を食べた</p></body></html>",
        encoding="utf8",
    )
    tab = _open(browser, page.as_uri())
    try:
        found = undrawn_japanese(tab)
    finally:
        tab.close()
    assert len(found) == 2, found
    assert "'太郎'" in found[0] + found[1] and "'𩸽を食べた'" in found[0] + found[1]
