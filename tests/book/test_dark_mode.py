"""The dark mode, in Chromium: every plotly figure takes the theme's background and
text colours (book/figure_theme.js), its words read at WCAG AA there, axe finds no
serious violation in the dark, and the theme's own switch brings each figure back
to exactly its light colours.

A sample of pages that holds every kind of figure and widget the book has: sliders
and menus (chapters 4 and 7), heatmaps with colour bars (chapter 5), the translator
widget and its cross-attention map (chapter 10), and a Japanese page. tests/book/test_pages.py
runs its checks on every page in the light mode.
"""

from __future__ import annotations

import re

import pytest
from static_server import serve  # book/ is on pythonpath
from test_accessibility import axe_violations, wait_until_drawn
from test_book import HTML_DIR

pytestmark = pytest.mark.book

SAMPLE = [
    "chapters/04_scaled_dot_product_attention",
    "chapters/05_multi_head_attention",
    "chapters/07_residual_norm_ffn",
    "chapters/10_decoding_and_attention",
    "ja/chapters/04_scaled_dot_product_attention",
]
DARK = "localStorage.setItem('mode', 'dark'); localStorage.setItem('theme', 'dark');"
AA = 4.5  # WCAG 2.1 AA, normal text

# Per figure: the colours that carry words, each with the ground it is read on, and
# the colours the light mode must get back (what the dark mode changes).
COLOURS_JS = r"""() => {
  const probe = document.createElement("canvas").getContext("2d");
  const lum = c => {
    probe.fillStyle = "#000"; probe.fillStyle = c; c = probe.fillStyle;
    const rgb = c[0] === "#" ? [1, 3, 5].map(i => parseInt(c.substr(i, 2), 16))
      : (c.match(/[\d.]+/g) || [0, 0, 0]).slice(0, 3).map(Number);
    const l = rgb.map(v => (v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  };
  const contrast = (a, b) => {
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const css = getComputedStyle(document.documentElement);
  const theme = {background: css.getPropertyValue("--pst-color-background").trim(),
                 text: css.getPropertyValue("--pst-color-text-base").trim()};
  const norm = c => { probe.fillStyle = "#000"; probe.fillStyle = c; return probe.fillStyle; };
  return [...document.querySelectorAll("div.js-plotly-plot")].map((gd, i) => {
    const f = gd._fullLayout, paper = f.paper_bgcolor, words = [];
    words.push(["font", f.font.color, paper]);
    Object.keys(f).filter(k => /^[xy]axis\d*$/.test(k) && f[k].visible !== false)
      .filter(k => f[k].tickfont && f[k].showticklabels !== false)
      .forEach(k => words.push([k + " ticks", f[k].tickfont.color, paper]));
    (f.annotations || []).filter(a => a.visible !== false && !a.bgcolor
      || a.bgcolor === "rgba(0,0,0,0)")
      .forEach((a, j) => words.push([`annotation ${j}`, a.font.color, paper]));
    (f.sliders || []).filter(s => s.visible !== false)
      .forEach((s, j) => words.push([`slider ${j}`, s.font.color, paper]));
    (f.updatemenus || []).filter(m => m.visible !== false).forEach((m, j) => {
      words.push([`menu ${j}`, m.font.color, m.bgcolor]);
      words.push([`menu ${j} (chosen)`, m.font.color, "#F4FAFF"]);  // plotly's own
    });
    const kept = JSON.stringify({
      paper, plot: f.plot_bgcolor, font: f.font.color,
      axes: Object.keys(f).filter(k => /^[xy]axis\d*$/.test(k)).sort().map(k =>
        [k, f[k].gridcolor, f[k].linecolor, f[k].zerolinecolor,
         (f[k].tickfont || {}).color]),
      annotations: (f.annotations || []).map(a => [a.font.color, a.arrowcolor]),
      sliders: (f.sliders || []).map(s => [s.bgcolor, s.font.color, s.bordercolor]),
      menus: (f.updatemenus || []).map(m => [m.bgcolor, m.font.color, m.bordercolor]),
      traces: (gd._fullData || []).map(t => [t.line && t.line.color,
        t.marker && typeof t.marker.color === "string" ? t.marker.color : null,
        t.textfont && t.textfont.color]),
    });
    return {i, paper: norm(paper), font: norm(f.font.color), theme_background:
            norm(theme.background), theme_text: norm(theme.text), kept,
            low: words.filter(([, fg, bg]) => fg && bg)
                      .map(([what, fg, bg]) => [what, contrast(fg, bg)])
                      .filter(([, c]) => c < 4.5)};
  });
}"""

SWITCH_TO_JS = """async (mode) => {
  // the theme's own switch, pressed until the page is in ``mode``
  const button = document.querySelector(".theme-switch-button");
  for (let i = 0; i < 3 && document.documentElement.dataset.theme !== mode; i++) {
    button.click();
  }
  await window.teduFiguresFollowTheme();
  await new Promise(r => setTimeout(r, 300));
  await window.teduFiguresFollowTheme();
  return document.documentElement.dataset.theme;
}"""


@pytest.fixture(scope="module")
def base(book):
    assert book.returncode == 0, "the book build failed"
    with serve(HTML_DIR) as url:
        yield url


def open_in(browser, base: str, page: str, dark: bool):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    if dark:
        context.add_init_script(DARK)
    tab = context.new_page()
    tab.goto(f"{base}{page}.html", wait_until="load")
    wait_until_drawn(tab)
    tab.evaluate(
        "() => window.teduFiguresFollowTheme && window.teduFiguresFollowTheme()"
    )
    return tab


def theme_problems(figures: list[dict], dark: bool) -> list[str]:
    """What is wrong with the figures' colours in the mode the page is in."""
    problems = []
    for f in figures:
        if dark and (f["paper"], f["font"]) != (f["theme_background"], f["theme_text"]):
            problems.append(f"figure {f['i']}: ground {f['paper']} and text {f['font']}, "
                            f"not the theme's {f['theme_background']} and "
                            f"{f['theme_text']}")  # fmt: skip
        for what, ratio in f["low"]:
            problems.append(f"figure {f['i']} {what}: contrast {ratio:.2f} < {AA}")
    return problems


@pytest.mark.parametrize("page", SAMPLE)
def test_the_figures_follow_the_dark_mode_and_come_back(base, browser, page):
    tab = open_in(browser, base, page, dark=False)
    try:
        light = tab.evaluate(COLOURS_JS)
        assert light, f"{page}: no plotly figure"
        assert not theme_problems(light, dark=False)
        assert tab.evaluate(SWITCH_TO_JS, "dark") == "dark"
        dark = tab.evaluate(COLOURS_JS)
        assert not theme_problems(dark, dark=True), theme_problems(dark, dark=True)
        assert tab.evaluate(SWITCH_TO_JS, "light") == "light"
        back = tab.evaluate(COLOURS_JS)
        changed = [
            a["i"] for a, b in zip(light, back, strict=True) if a["kept"] != b["kept"]
        ]
        assert not changed, f"{page}: figures {changed} did not get their colours back"
    finally:
        tab.context.close()


@pytest.mark.parametrize("page", SAMPLE)
def test_axe_finds_nothing_serious_in_the_dark(base, browser, page):
    tab = open_in(browser, base, page, dark=True)
    try:
        assert tab.evaluate("document.documentElement.dataset.theme") == "dark"
        assert not theme_problems(tab.evaluate(COLOURS_JS), dark=True)
        violations = axe_violations(tab)
        assert not violations, f"{page} (dark): {violations}"
    finally:
        tab.context.close()


def test_the_theme_check_can_fail(base, browser):
    """Without book/figure_theme.js the figures stay white in the dark mode: found."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(DARK)
    context.route(re.compile(r"figure_theme\.js"), lambda route: route.abort())
    tab = context.new_page()
    try:
        tab.goto(f"{base}{SAMPLE[0]}.html", wait_until="load")
        wait_until_drawn(tab)
        problems = theme_problems(tab.evaluate(COLOURS_JS), dark=True)
        assert any("not the theme's" in p for p in problems), problems
    finally:
        context.close()
