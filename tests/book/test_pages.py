"""Every page of both editions, opened once in headless Chromium, with every check on
the one tab: it renders offline (plotly figures drawn, none squeezed into a sliver of
its box by its margins, math typeset, widgets shown, Japanese drawn with a Japanese
font, no request to another host, no console error);
it is accessible (tests/book/test_accessibility.py: axe-core, Tab and the keyboard,
text alternatives, colour scales); and every control works with the mouse (each
figure's sliders and menus, tests/book/test_book.py's `_exercise_controls`, and each
widget's inputs, `_exercise_widgets`). A Japanese page is its English twin with its
words translated (tests/book/test_i18n.py holds it to the same figures, controls and
widgets): there its words are checked (fonts, text alternatives, axe's rules on
names, labels and language) and its widgets worked, not again what it shares word
for word with its twin, checked on the English page: the figures' controls by mouse
and keyboard, the colours.

A page is opened as a reader who opens it will: README says that opened from
``file://`` every figure and control that needs no model works, so a page with no
model widget is opened from its file; a page whose widgets run a model
(tests/book/test_book.py's ``MODEL_PAGES``) is served on 127.0.0.1, as the README says to
serve the book, every other host blocked (tests/book/test_browser_widgets.py opens those
pages from their files too: their figures drawn, each model widget saying how to
serve the book). Opening each page once, not once per check, keeps a minute of
`make test`.

The two editions are two classes: pytest-xdist's ``--dist loadscope`` gives each
class its own scope, so the two can run on the two workers at once. The first
screen of each page lands in ``_build/screenshots/`` as a JPEG;
``TEDU_FULL_SCREENSHOTS=1`` takes the whole page instead (a second or two a page).
"""

from __future__ import annotations

import os
import re

import pytest
from conftest import SCREENSHOTS
from test_accessibility import (  # its folder
    page_problems,
    wait_until_drawn,
)
from test_book import (
    HTML_DIR,
    MEASURE_JS,
    MODEL_PAGES,
    PAGES,
    _exercise_controls,
    _exercise_widgets,
    warm_widgets,
)
from test_book_fonts import undrawn_japanese

pytestmark = pytest.mark.book

FULL_SCREENSHOTS = os.environ.get("TEDU_FULL_SCREENSHOTS") == "1"


@pytest.fixture(scope="module")
def served(book):
    """``_build/html`` over HTTP on 127.0.0.1, as a reader serves it: the widgets that
    run a model in the page fetch it (a browser refuses them from file://)."""
    from static_server import serve  # book/ is on pythonpath

    with serve(HTML_DIR) as base:
        yield base


# plotly.js, moving a figure from one frame to the next (chapter 11's mask builder,
# whose y-axis range changes with the length T), can write a text point's transform
# with a y-scale of NaN for an instant: "…scale(1,NaN)…", which Chromium reports and
# ignores; the frame's own redraw then sets it. Seen in about one CI run in three,
# never in a figure's final state (the checks below look at that). Only this message
# is let through; any other console error fails the page.
PLOTLY_NAN_SCALE = re.compile(
    r'^Error: <g> attribute transform: Trailing garbage, "[^"]*scale\(1,NaN\)'
)


def console_errors(errors: list[str]) -> list[str]:
    """The console errors a page must not have: all but plotly's NaN-scale instant."""
    return [e for e in errors if not PLOTLY_NAN_SCALE.match(e)]


def test_only_plotlys_nan_scale_instant_is_let_through():
    seen = 'Error: <g> attribute transform: Trailing garbage, "…(0,29.1)scale(1,NaN)translate(0,…".'
    other = 'Error: <path> attribute d: Expected number, "MNaN,0".'
    assert console_errors([seen, other, "uncaught: TypeError: x"]) == [
        other, "uncaught: TypeError: x",
    ]  # fmt: skip


def check_page(browser, page: str, base: str) -> list[str]:
    """Open ``page`` (a path under _build/html, no suffix) once and run every check
    on it; what is wrong, one line each."""
    html_file = HTML_DIR / f"{page}.html"
    assert html_file.exists(), f"{html_file} was not built"
    model = html_file.stem in MODEL_PAGES
    url = base + f"{page}.html" if model else html_file.as_uri()
    own = base if model else "file:"
    english = not page.startswith("ja/")
    errors: list[str] = []
    blocked: list[str] = []
    failed: list[str] = []
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
    tab.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    tab.on("requestfailed", lambda r: failed.append(f"{r.url} ({r.failure})"))

    def only_own(route):
        if route.request.url.startswith((own, "data:", "blob:")):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    tab.route("**/*", only_own)
    try:
        tab.goto(url, wait_until="load")
        wait_until_drawn(tab)  # what is missing is measured and reported below
        m = tab.evaluate(MEASURE_JS)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SCREENSHOTS / f"{page.replace('/', '_')}.jpg"),
                       full_page=FULL_SCREENSHOTS, type="jpeg", quality=80)  # fmt: skip
        problems = []
        # the figures' controls with the mouse and the keyboard on the English pages:
        # the Japanese pages' figures are the same figures, their words translated
        if english and m["figs"] == m["plots"]:
            problems += _exercise_controls(tab, False)
        if english:  # the Japanese in an English page: examples, figures, formulas
            undrawn = undrawn_japanese(tab)
            if undrawn:
                problems.append(f"{len(undrawn)} Japanese text nodes drawn without a "
                                f"Japanese font: {undrawn[:8]}")  # fmt: skip
        if model:
            warm_widgets(tab)  # a model fetched on first use: used once first
        problems += page_problems(tab, twin=not english)
        found, moved, widget_problems = _exercise_widgets(tab)
    finally:
        tab.close()

    if moved != found or (model and not found):
        widget_problems.append(f"{found} widget inputs, {moved} moved")
    problems += widget_problems
    if m["figs"] != m["plots"]:
        problems.append(f"plotly: {m['plots']} of {m['figs']} figures rendered")
    if page.removeprefix("ja/").startswith("chapters/") and m["figs"] == 0:
        problems.append("plotly: a chapter page with no plotly figure")
    if m["squeezed"]:
        problems.append(f"plotly: figures {m['squeezed']} drawn in under a quarter of "
                        "their width or height (the margins took the rest)")  # fmt: skip
    if m["typeset"] != m["maths"]:
        problems.append(f"math: {m['typeset']} of {m['maths']} formulas typeset")
    if m["raw"]:
        problems.append(f"math: raw TeX left in the text: {m['raw'][:5]}")
    if m["widgets"] != m["views"]:
        problems.append(f"widgets: {m['widgets']} of {m['views']} rendered")
    if m["cjk"] and not m["cjkFont"]:
        problems.append("Japanese text on the page but IPAexGothic did not load")
    if console_errors(errors):
        problems.append(f"console errors: {console_errors(errors)}")
    own_failures = [f for f in failed if f.startswith(own)]
    if own_failures:
        problems.append(f"the book's own files that failed to load: {own_failures}")
    if blocked:
        problems.append(f"{len(blocked)} requests to other hosts (blocked): {blocked}")
    return problems


class TestEnglishEdition:
    @pytest.mark.parametrize("page", PAGES)
    def test_page_works(self, book, browser, served, page):
        problems = check_page(browser, page, served)
        assert not problems, f"{page}: " + "; ".join(problems)


class TestJapaneseEdition:
    @pytest.mark.parametrize("page", [f"ja/{p}" for p in PAGES])
    def test_page_works(self, book, browser, served, page):
        problems = check_page(browser, page, served)
        assert not problems, f"{page}: " + "; ".join(problems)
