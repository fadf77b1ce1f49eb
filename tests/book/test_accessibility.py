"""The built book is accessible (WCAG 2.1 AA, as far as a machine can tell):

- axe-core finds no violation of impact serious or critical on any page;
- Tab reaches every control of every figure and widget, and the keyboard works it:
  arrow keys move a figure's slider or menu (the native control that
  book/figure_controls.js lays over plotly's) and change the figure, and plotly's own
  control follows; a widget's input changes its output (or the page says beside it
  that it needs a running kernel), as tests/book/test_book.py checks with the mouse;
- every plotly figure has a name and a description, every image an alt text;
- every heatmap's colour scale reads in lightness, not only in hue (for readers who
  do not tell hues apart): sequential scales grow lighter or darker throughout, a
  diverging one turns at zero (where the sign matters), and a scale of categories
  gives neighbouring categories lightnesses apart.

tests/book/test_pages.py runs these checks on every page of both editions, in the tab it
has open for the page's other checks (one page load for all); this module holds the
checks and shows that each can fail. axe-core comes from ``book_assets/node_modules``
(npm, pinned by the lock file, a devDependency): the tests inject it into the page,
the book never ships it.
"""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import plotly.graph_objects as go
import pytest
from test_book import (  # its folder (pytest puts it on sys.path)
    HTML_DIR,
    PICTURE_JS,
    RENDERED_JS,
    ROOT,
    SETTLE_JS,
    WIDGET_INPUTS,
    WIDGET_OUTPUT_JS,
    _widget_settled,
    widgets_drawn,
)

pytestmark = pytest.mark.book

AXE_JS = ROOT / "book_assets" / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")  # axe's impacts that fail a page

# axe's rules that read only colours: the same on a Japanese page as on its English
# twin (one stylesheet, the same figures), so checked on the English page only
COLOUR_RULES = ("color-contrast", "link-in-text-block")
AXE_RUN_JS = """async ([blocking, preload, off]) => {
  const rules = Object.fromEntries(off.map(id => [id, {enabled: false}]));
  const result = await axe.run(document, {resultTypes: ["violations"], preload, rules});
  return result.violations.filter(v => blocking.includes(v.impact)).map(v => ({
    id: v.id, impact: v.impact, count: v.nodes.length,
    where: v.nodes.slice(0, 3).map(n => n.target.join(" ")),
  }));
}"""

# Every control a reader may use: a figure's keyboard control, a widget's input.
CONTROLS_SELECTOR = ".tedu-figure .tedu-control, " + ", ".join(
    f".widget-subarea .lm-Widget {s}" for s in WIDGET_INPUTS.split(", ")
)
CONTROLS_READY_JS = """() => [...document.querySelectorAll(".tedu-figure")]
  .every(f => f.dataset.teduControls === "ready")"""

# Tab from the top of the page's main part; returns when every control has had the
# focus, or the focus has passed the last one, or left the page.
TAB_START_JS = """(selector) => {
  window.teduControls = [...document.querySelectorAll(selector)];
  window.teduFocused = new Set();
  document.addEventListener("focusin", e => window.teduFocused.add(e.target), true);
  const main = document.querySelector("main") || document.body;
  main.setAttribute("tabindex", "-1");
  main.focus();
  return window.teduControls.length;
}"""
TAB_DONE_JS = """() => {
  const all = window.teduControls, now = document.activeElement;
  const missed = all.filter(c => !window.teduFocused.has(c));
  const last = all[all.length - 1];
  const past = !now || now === document.body
    || (last && (last.compareDocumentPosition(now) & Node.DOCUMENT_POSITION_FOLLOWING)
        && !last.contains(now));
  return {done: !missed.length || past, missed: missed.map(c => all.indexOf(c))};
}"""
TAB_PRESSES = 600  # at most; a chapter has ~100-300 tabbable elements before its last

# The figure a keyboard control drives, and where plotly's own control stands.
FIGURE_CONTROL_JS = """(c) => {
  const control = window.teduControls[c];
  const gd = control.closest(".tedu-figure").querySelector(".js-plotly-plot");
  const figs = [...document.querySelectorAll("div.plotly-graph-div.js-plotly-plot")];
  const list = gd.layout[control.dataset.kind === "slider" ? "sliders" : "updatemenus"];
  const item = list[+control.dataset.index];
  const n = (control.dataset.kind === "slider" ? item.steps : item.buttons)
    .filter(x => x.visible !== false).length;
  return {figure: figs.indexOf(gd), kind: control.dataset.kind,
          index: +control.dataset.index, active: +(item.active || 0), n};
}"""
PLOTLY_ACTIVE_JS = """([i, kind, index]) => {
  const gd = document.querySelectorAll("div.plotly-graph-div.js-plotly-plot")[i];
  const item = gd.layout[kind === "slider" ? "sliders" : "updatemenus"][index];
  return +(item.active || 0);
}"""

# Text alternatives: each plotly figure's name and description, each image's alt.
TEXT_ALTERNATIVES_JS = """() => {
  const problems = [];
  document.querySelectorAll("div.plotly-graph-div").forEach((gd, i) => {
    const fig = gd.closest("figure.tedu-figure");
    const name = fig && (fig.getAttribute("aria-label") || "").trim();
    const id = fig && fig.getAttribute("aria-describedby");
    const text = id && document.getElementById(id);
    if (!name) problems.push(`plotly figure ${i}: no name`);
    if (!text || !text.textContent.trim()) problems.push(`plotly figure ${i}: no description`);
  });
  document.querySelectorAll("main img").forEach((img, i) => {
    const alt = (img.getAttribute("alt") || "").trim();
    const file = (img.getAttribute("src") || "").split("/").pop();
    if (img.getAttribute("role") === "presentation" || img.getAttribute("aria-hidden") === "true") return;
    if (!alt || (file && alt.endsWith(file))) {
      problems.push(`image ${i} (${file.slice(0, 40)}): alt text ${JSON.stringify(alt)}`);
    }
  });
  return problems;
}"""


# The colour scale of every heatmap a figure shows, as plotly resolved it.
HEATMAP_SCALES_JS = """() => [...document.querySelectorAll(
    "div.plotly-graph-div.js-plotly-plot")].flatMap((gd, i) => gd._fullData
  .filter(t => t.type === "heatmap" && t.visible === true)
  .map(t => ({figure: i, trace: t.index, colorscale: t.colorscale,
              zmin: t.zmin, zmax: t.zmax})))"""
MIN_CATEGORY_STEP = 8.0  # L* between neighbouring categories of a categorical scale


def lightness(colour: str) -> float:
    """CIE L* (0 black .. 100 white) of a CSS colour "#rrggbb" or "rgb(r, g, b)"."""
    from plotly.colors import hex_to_rgb, unlabel_rgb

    if colour.startswith("#"):
        rgb = hex_to_rgb(colour)
    else:
        rgb = unlabel_rgb(colour)
    linear = [
        c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4
        for c in rgb[:3]
    ]
    y = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return 116 * y ** (1 / 3) - 16 if y > 216 / 24389 else 24389 / 27 * y


def colour_scale_problem(scale, zmin: float, zmax: float) -> str | None:
    """Why a heatmap's colour scale does not read in lightness, or None.

    Categorical (each colour held over an interval): neighbours differ by at least
    MIN_CATEGORY_STEP in L*. Otherwise L* is monotone, or turns once, at z = 0.
    """
    stops = [(float(at), lightness(c)) for at, c in scale]
    held = [a[1] == b[1] for a, b in pairwise(stops)]
    if len(stops) > 2 and all(held[::2]):  # pairs: [lo, c], [hi, c] per category
        levels = [level for _, level in stops[::2]]
        close = min(abs(a - b) for a, b in pairwise(levels))
        if close < MIN_CATEGORY_STEP:
            return f"neighbouring categories differ by {close:.1f} in L*"
        return None
    moves = [(a[0], b[1] > a[1]) for a, b in pairwise(stops) if b[1] != a[1]]
    turns = [b[0] for a, b in pairwise(moves) if a[1] != b[1]]  # where, in 0..1
    if len(turns) > 1:
        return f"lightness turns {len(turns)} times"
    if turns:
        z = zmin + turns[0] * (zmax - zmin)
        if abs(z) > 0.02 * (zmax - zmin):
            return f"a diverging scale that turns at z = {z:.3g}, not 0"
    return None


# every going-deeper section open (book/going_deeper.js folds them): the checks see
# the whole page; tests/book/test_book.py checks the folding itself
OPEN_GOING_DEEPER_JS = """() => document
  .querySelectorAll('.going-deeper-toggle[aria-expanded="false"]')
  .forEach((button) => button.click())"""


def wait_until_drawn(tab) -> None:
    """Open the page's going-deeper sections, then wait until its figures, widgets
    and keyboard controls are drawn (or 20 s per kind has passed: what is missing is
    reported by the checks)."""
    tab.evaluate(OPEN_GOING_DEEPER_JS)
    tab.evaluate(SETTLE_JS)
    for ready in (RENDERED_JS, CONTROLS_READY_JS):
        try:
            tab.wait_for_function(ready, timeout=20_000)
        except Exception:  # what is missing is reported by the checks
            pass
    tab.evaluate(SETTLE_JS)  # fonts first used by the figures
    widgets_drawn(tab, 20.0)  # at least half a second: the last redraws land


def open_page(browser, path: Path):
    """A tab on the file ``path`` once its figures, widgets and keyboard controls are
    drawn."""
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    tab.goto(path.as_uri(), wait_until="load")
    wait_until_drawn(tab)
    return tab


def axe_violations(tab, colours: bool = True) -> list[str]:
    """axe-core's serious and critical violations on the page, one line each
    (``colours=False``: all but the rules that read only colours, COLOUR_RULES)."""
    if not AXE_JS.exists():
        pytest.fail(f"{AXE_JS} missing: run `npm ci --prefix book_assets` (make does)")
    tab.add_script_tag(path=str(AXE_JS))
    # axe fetches the page's stylesheets (its CSSOM, for css-orientation-lock): a page
    # opened from a file may not fetch (the browser refuses it and logs an error), so
    # there axe reads none; the served pages (tests/book/test_pages.py) have the same CSS
    preload = not tab.url.startswith("file:")
    off = [] if colours else list(COLOUR_RULES)
    found = tab.evaluate(AXE_RUN_JS, [list(BLOCKING), preload, off])
    return [
        f"axe {v['id']} ({v['impact']}, {v['count']}×): {', '.join(v['where'])}"
        for v in found
    ]


def tab_through(tab) -> tuple[int, list[int]]:
    """Press Tab from the top of the page's main part; (controls, those never
    focused by Tab)."""
    n = tab.evaluate(TAB_START_JS, CONTROLS_SELECTOR)
    state = tab.evaluate(TAB_DONE_JS)
    presses = 0
    while n and not state["done"] and presses < TAB_PRESSES:
        for _ in range(10):
            tab.keyboard.press("Tab")
        presses += 10
        state = tab.evaluate(TAB_DONE_JS)
    return n, state["missed"]


def _press(tab, c: int, key: str) -> None:
    tab.evaluate("(c) => window.teduControls[c].focus()", c)
    tab.keyboard.press(key)


def _figure_by_keyboard(tab, c: int) -> list[str]:
    """One step of a figure's slider or menu with an arrow key, and back: the figure
    changes, then is as it was, and plotly's own control follows each step."""
    info = tab.evaluate(FIGURE_CONTROL_JS, c)
    i, kind, n, home = info["figure"], info["kind"], info["n"], info["active"]
    name = f"figure {i}: {kind} {info['index'] + 1}"
    if n < 2:
        return [f"{name} has one entry"]
    forward, back = (
        ("ArrowRight", "ArrowLeft") if kind == "slider" else ("ArrowDown", "ArrowUp")
    )
    step = 1 if home < n - 1 else -1
    if step < 0:
        forward, back = back, forward
    where = [i, kind, info["index"]]

    def settled(want: int) -> bool:
        js = f"(w) => ({PLOTLY_ACTIVE_JS})(w) === {want}"
        try:
            tab.wait_for_function(js, arg=where, timeout=3_000)
        except Exception:
            return False
        tab.wait_for_timeout(50)  # the redraw after the command
        return True

    start = tab.evaluate(PICTURE_JS, i)
    _press(tab, c, forward)
    moved = settled(home + step)
    end = tab.evaluate(PICTURE_JS, i)
    _press(tab, c, back)
    returned = settled(home)
    again = tab.evaluate(PICTURE_JS, i)
    if not moved:
        return [f"{name}: {forward} did not move plotly's control"]
    # the pictures as values: an update may write the same layout in another key order
    start, end, again = (json.loads(x) for x in (start, end, again))
    if end == start:
        return [f"{name}: {forward} does not change the figure"]
    if not returned or again != start:
        return [f"{name}: {back} does not change the figure back"]
    return []


WIDGET_OF_JS = """(c) => {
  const areas = [...document.querySelectorAll(".widget-subarea")]
    .filter(a => a.querySelector(".lm-Widget"));
  const control = window.teduControls[c];
  const el = control;
  return {area: areas.findIndex(a => a.contains(control)),
          tag: el.tagName.toLowerCase(), type: el.getAttribute("type") || "",
          handle: el.classList.contains("noUi-handle"),
          atEnd: el.getAttribute("aria-valuenow") === el.getAttribute("aria-valuemax"),
          last: el.tagName === "SELECT" && el.selectedIndex === el.options.length - 1,
          index: el.tagName === "SELECT" ? el.selectedIndex : -1,
          atMax: el.type === "range" && el.value === el.max,
          value: "value" in el ? el.value : ""};
}"""


def _widget_keys(tab, c: int, info: dict) -> tuple[list[str], list[str]]:
    """The keys that change widget input c, and those that change it back."""
    if info["handle"]:
        return (
            (["ArrowLeft"], ["ArrowRight"])
            if info["atEnd"]
            else (["ArrowRight"], ["ArrowLeft"])
        )
    if info["tag"] == "select":  # the farthest option: neighbours may draw the same
        # (a beam of 7 often translates as 8 does); then back, one option at a time
        if info["index"] == 0:
            return ["End"], ["Home"]
        return ["Home"], ["ArrowDown"] * info["index"]
    if info["type"] == "range":  # a native slider: the arrow keys
        return (
            (["ArrowLeft"], ["ArrowRight"])
            if info["atMax"]
            else (["ArrowRight"], ["ArrowLeft"])
        )
    if info["tag"] == "button" or info["type"] in ("checkbox", "button"):
        key = "Space" if info["type"] == "checkbox" else "Enter"
        return [key], [key]
    # a text field: type a character and Enter, then delete it and Enter
    return ["End", "1", "Enter"], ["End", "Backspace", "Enter"]


def _widget_by_keyboard(tab, c: int) -> list[str]:
    info = tab.evaluate(WIDGET_OF_JS, c)
    a = info["area"]
    there, back = _widget_keys(tab, c, info)
    before = tab.evaluate(WIDGET_OUTPUT_JS, a)
    tab.evaluate("(c) => window.teduControls[c].focus()", c)
    for key in there:
        tab.keyboard.press(key)
    _widget_settled(tab, a)
    after = tab.evaluate(WIDGET_OUTPUT_JS, a)
    tab.evaluate("(c) => window.teduControls[c].focus()", c)
    for key in back:
        tab.keyboard.press(key)
    _widget_settled(tab, a)
    again = tab.evaluate(WIDGET_OUTPUT_JS, a)
    if after != before and again == before:
        return []
    what = "changes nothing" if after == before else "does not change its output back"
    return [f"widget {a + 1} ({info['tag']}): by keyboard, {what}"]


def keyboard_problems(tab) -> list[str]:
    """Tab reaches every control; the keyboard works each one."""
    n, missed = tab_through(tab)
    problems = [f"control {c} is never reached by Tab" for c in missed]
    for c in range(n):
        if c in missed:
            continue
        figure = tab.evaluate(
            "(c) => !!window.teduControls[c].closest('.tedu-figure')", c
        )
        if figure:
            problems += _figure_by_keyboard(tab, c)
        else:
            problems += _widget_by_keyboard(tab, c)
    return problems


def colour_problems(tab) -> list[str]:
    problems = []
    for h in tab.evaluate(HEATMAP_SCALES_JS):
        why = colour_scale_problem(h["colorscale"], h["zmin"], h["zmax"])
        if why:
            problems.append(f"figure {h['figure']} heatmap {h['trace']}: {why}")
    return problems


def page_problems(tab, twin: bool = False) -> list[str]:
    """Everything this module checks on one open page. ``twin``: a Japanese page
    whose English twin has had every check: its words are checked (the text
    alternatives, axe's rules on names, labels, language and structure), not what it
    shares with its twin word for word, the same elements in the same order
    (tests/book/test_i18n.py compares their figures, controls and widgets): the
    colours (the heatmaps' scales, axe's COLOUR_RULES) and the keyboard's work
    through book/figure_controls.js."""
    problems = tab.evaluate(TEXT_ALTERNATIVES_JS)
    if not twin:
        problems += colour_problems(tab)
        problems += keyboard_problems(tab)
    problems += axe_violations(tab, colours=not twin)
    return problems


def test_a_known_violation_fails_the_page(book, browser):
    """The checks can fail: on a built page, an image with no alt text and an input
    with no name are reported by axe-core and by the text-alternative check."""
    tab = open_page(browser, HTML_DIR / "intro.html")
    try:
        tab.evaluate("""() => document.querySelector("main").insertAdjacentHTML(
          "beforeend", '<img src="x.png"><input type="text">')""")
        problems = page_problems(tab)
        as_twin = page_problems(tab, twin=True)  # as a Japanese page is checked
    finally:
        tab.close()
    for found in (problems, as_twin):
        assert [p.split(" (")[0] for p in found if p.startswith("axe")] == [
            "axe image-alt",
            "axe label",
        ]
        images = [p for p in found if p.startswith("image ")]
        assert len(images) == 1 and images[0].endswith('(x.png): alt text ""'), images


def test_the_keyboard_check_can_fail(browser, tmp_path):
    """Figures as the book writes them, some broken on purpose: a slider whose frames
    are all alike, a control Tab cannot reach, a figure with no name."""
    import numpy as np
    import plotly
    import plotly.io as pio
    from plotly_renderer import BookRenderer

    from transformer_edu import viz

    moving = [np.eye(3) * k for k in (1, 2, 3)]
    figs = [
        viz.heatmap_slider(moving, slider_labels=list("abc")),  # works
        viz.heatmap_slider([np.eye(3)] * 3, slider_labels=list("abc")),  # no change
        viz.explorer(  # a dropdown and buttons that both work; the second unreachable
            go.Figure(),
            lambda a, b: [go.Bar(x=[0, 1], y=[a, b])],
            viz.Control("a", [1, 2, 3], kind="dropdown"),
            viz.Control("b", [4, 5], kind="buttons"),
        ),
    ]
    render = BookRenderer().to_mimebundle
    body = "".join(render(fig.to_dict())["text/html"] for fig in figs)
    body += pio.to_html(viz.heatmap(np.eye(2)), include_plotlyjs=False, full_html=False)
    unreachable = "document.querySelectorAll('select.tedu-control')[1].tabIndex = -1"
    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    scripts = [plotly_js, ROOT / "book" / "figure_controls.js"]
    page = tmp_path / "figs.html"
    page.write_text(
        '<html lang="en"><head><meta charset="utf-8"><title>figures</title>'
        + "".join(f'<script src="{s.as_uri()}"></script>' for s in scripts)
        + f'<link rel="stylesheet" href="{(ROOT / "_static" / "custom.css").as_uri()}">'
        + f"</head><body><main>{body}</main><script>{unreachable}</script></body></html>",
        encoding="utf8",
    )
    tab = open_page(browser, page)
    try:
        assert tab.evaluate(TEXT_ALTERNATIVES_JS) == [
            "plotly figure 3: no name",
            "plotly figure 3: no description",
        ]
        assert keyboard_problems(tab) == [
            "control 3 is never reached by Tab",
            "figure 1: slider 1: ArrowRight does not change the figure",
        ]
    finally:
        tab.close()


def test_the_colour_scale_check_can_fail():
    from plotly.colors import get_colorscale

    blues, viridis = get_colorscale("Blues"), get_colorscale("Viridis")
    rdbu, jet = get_colorscale("RdBu"), get_colorscale("Jet")
    assert colour_scale_problem(blues, 0, 1) is None
    assert colour_scale_problem(viridis, -5, 3) is None
    assert colour_scale_problem(rdbu, -2, 2) is None  # diverging at 0
    assert "not 0" in colour_scale_problem(rdbu, 0, 1)  # diverging, sign unknown
    assert "turns" in colour_scale_problem(jet, 0, 1)
    heads = [[0, "#1f77b4"], [0.5, "#1f77b4"], [0.5, "#d62728"], [1, "#d62728"]]
    assert "categories" in colour_scale_problem(heads, 0, 1)  # blue, red: one L*
    okabe_ito = [[0, "#0072b2"], [0.5, "#0072b2"], [0.5, "#e69f00"], [1, "#e69f00"]]
    assert colour_scale_problem(okabe_ito, 0, 1) is None
