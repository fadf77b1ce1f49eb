"""The built book: a clean build, no remote resources, and the checks that
tests/book/test_pages.py runs on every page in headless Chromium: rendered offline
(plotly figures drawn, math typeset, widgets shown) and every figure's and widget's
control moved with the mouse.

The build runs once per session (``book`` fixture, tests/conftest.py).
"""

from __future__ import annotations

import json
import re
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from lean_path import going_deeper_spans  # book/ is on pythonpath
from playwright.sync_api import expect
from sync_colab import colab_link, repository, toc_files

pytestmark = pytest.mark.book

ROOT = Path(__file__).resolve().parents[2]
HTML_DIR = ROOT / "_build" / "html"

PAGES = toc_files(ROOT)  # root first, then every file of _toc.yml, without suffix
# Sphinx's own format: "path:line: WARNING: message" / "ERROR: ..." (a kernel's
# "[IPKernelApp] WARNING | ..." line is not a Sphinx warning).
SPHINX_PROBLEM = re.compile(r"(WARNING|ERROR|CRITICAL|SEVERE):")
REMOTE = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
CDN_HOSTS = re.compile(
    r"unpkg\.com|jsdelivr\.net|cdnjs\.cloudflare\.com|cdn\.plot\.ly|"
    r"googleapis\.com|mathjax\.org|polyfill\.io",
    re.IGNORECASE,
)
RESOURCE_ATTRS = {
    "script": ("src",),
    "link": ("href",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
}


def test_build_succeeds_without_warnings(book):
    tail = "\n".join(book.log.splitlines()[-60:])
    assert book.returncode == 0, f"jupyter-book build failed:\n{tail}"
    problems = [line for line in book.log.splitlines() if SPHINX_PROBLEM.search(line)]
    assert not problems, "the build log has warnings:\n" + "\n".join(problems)


def test_the_build_executed_no_chapter_that_nbval_ran(book, request):
    """Each chapter executes once in a test run: what nbval ran without an error, the
    build took from its execution cache (tests/helpers/nbval_cache.py). So the build begins
    after nbval ran every chapter the run collected: pytest-xdist's loadscope, left
    to reorder, hands out the modules with the most tests first (the book tests among
    them), and the build then executed every chapter beside nbval, a second time."""
    import nbval_cache

    collected = {
        Path(str(item.fspath)).name
        for item in request.session.items
        if Path(str(item.fspath)).parent == nbval_cache.CHAPTERS
    }
    if not collected or request.config.option.keyword:
        pytest.skip("nbval ran no whole chapter in this test run")
    early = collected - nbval_cache.stored_at_build_start()
    assert not early, f"the book build began before nbval had run {sorted(early)}"
    stored = nbval_cache.stored_chapters()
    log = book.log
    executed = set(re.findall(r"chapters/([\w.]+\.ipynb): Executing notebook", log))
    cached = set(re.findall(r"chapters/([\w.]+\.ipynb): Using cached notebook", log))
    assert not stored & executed, f"executed again by the build: {stored & executed}"
    assert stored <= cached, f"not taken from the cache: {stored - cached}"


def test_chapter_12_states_the_recorded_scores(book):
    """The real model does not retrain in CI: its headline scores on the page are the
    records' (tatoeba/weights/tatoeba_ja_en.scores.json), each with its interval, as glued."""
    from transformer_edu.tatoeba.analysis import read_record

    html = (HTML_DIR / "chapters" / "12_real_japanese.html").read_text(encoding="utf8")
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    record = read_record("tatoeba_ja_en.scores.json")
    rows = {(r["split"], r["decoding"]): r for r in record["scores"]}
    for decoding in dict.fromkeys(["greedy", record["chosen"]["name"]]):
        b, c = rows[("test", decoding)]["bleu"], rows[("test", decoding)]["chrf"]
        for name, s in (("BLEU", b), ("chrF", c)):
            shown = f"{name} {s['score']:.1f} ({s['low']:.1f}–{s['high']:.1f})"
            assert shown in text, f"chapter 12 does not say {shown!r} ({decoding})"


def test_every_toc_page_is_built(book):
    missing = [p for p in PAGES if not (HTML_DIR / f"{p}.html").exists()]
    assert not missing, f"pages in _toc.yml with no HTML: {missing}"


class _Resources(HTMLParser):
    """Collects the addresses a page loads (not its hyperlinks) and inline scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[tuple[str, str]] = []
        self.inline_scripts: list[str] = []
        self.styles: list[str] = []
        self._in = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for name in RESOURCE_ATTRS.get(tag, ()):
            if attrs.get(name):
                self.loads.append((tag, attrs[name]))
        if attrs.get("style"):
            self.styles.append(attrs["style"])
        self._in = tag if tag in ("script", "style") else None

    def handle_data(self, data):
        if self._in == "script":
            self.inline_scripts.append(data)
        elif self._in == "style":
            self.styles.append(data)

    def handle_endtag(self, tag):
        self._in = None


def _remote_references(html: str) -> list[str]:
    parser = _Resources()
    parser.feed(html)
    found = [
        f"<{tag}> {url}"
        for tag, url in parser.loads
        if any(REMOTE.match(u) for u in url.split(","))
    ]
    found += [
        f"inline <script> names {m.group(0)}"
        for body in parser.inline_scripts
        for m in CDN_HOSTS.finditer(body)
    ]
    found += [
        f"style url({m.group(1)})"
        for css in parser.styles
        for m in re.finditer(r"url\(\s*['\"]?((https?:)?//[^)'\"]+)", css)
    ]
    return found


def test_a_stale_execution_cache_is_emptied_and_its_database_made_at_once(tmp_path):
    """When the package changed, the build empties its execution cache and makes the
    cache's database at once, in its own process, before Sphinx's parallel read: two
    readers that each found no database both made its tables, and one failed ("table
    settings already exists"), failing `make book`."""
    import book_extension
    from jupyter_cache import get_cache

    cache = tmp_path / ".jupyter_cache"
    (cache / "executed").mkdir(parents=True)
    (tmp_path / book_extension.CACHE_KEY_FILE).write_text("another package\n")

    class App:
        outdir = str(tmp_path / "html")

    class Config:
        nb_execution_cache_path = str(cache)

    book_extension._reset_stale_cache(App, Config)
    assert not (cache / "executed").exists() and (cache / "global.db").exists()
    key = (tmp_path / book_extension.CACHE_KEY_FILE).read_text().strip()
    assert key == book_extension.package_digest()
    assert get_cache(str(cache)).list_cache_records() == []  # its tables are there


def test_remote_reference_detector_can_fail():
    html = (
        '<script src="https://cdn.jsdelivr.net/x.js"></script>'
        '<link rel="stylesheet" href="//fonts.example/a.css">'
        "<script>var u = 'https://unpkg.com/thebe';</script>"
        '<a href="https://colab.research.google.com/x">Colab</a>'
        '<img src="../_images/local.png">'
    )
    assert len(_remote_references(html)) == 3  # the <a> and the local image pass


def test_no_page_loads_anything_from_another_host(book):
    pages = sorted(HTML_DIR.rglob("*.html"))
    assert pages, "no HTML built"
    found = {
        str(page.relative_to(HTML_DIR)): refs
        for page in pages
        if (refs := _remote_references(page.read_text(encoding="utf8")))
    }
    assert not found, f"pages that load remote resources: {found}"


WIDGET_ERROR = re.compile(r'"output_type":\s*"error"')


@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("chapters/")])
def test_no_widget_hides_an_exception(book, page):
    """An exception inside an ``interact`` callback lands in the widget's saved
    output, where neither nbval nor the build notices it; the saved state shows it."""
    html = (HTML_DIR / f"{page}.html").read_text(encoding="utf8")
    errors = re.findall(r'"ename":\s*"([^"]+)",\s*"evalue":\s*"([^"]*)"', html)
    assert not WIDGET_ERROR.search(html), f"{page}: a widget's output holds {errors}"


# a Markdown table's rule row (|---|---|) as text: a table that was not rendered
# (Sphinx's smart quotes turn the English edition's --- into an em dash)
PIPE_TABLE = re.compile(r"\|\s*:?(?:-{3,}|—|–-?):?\s*\|")


@pytest.mark.parametrize("edition", ["", "ja/"])
@pytest.mark.parametrize("page", PAGES)
def test_no_page_shows_a_markdown_table_as_text(book, page, edition):
    """Every table renders, in prose and in what a cell displays (``Markdown(...)``
    output is read as GitHub-flavoured Markdown: _config.yml): the page's text, code
    listings left out, holds no pipe-table rule row."""
    html = (HTML_DIR / f"{edition}{page}.html").read_text(encoding="utf8")
    html = re.sub(r"<(pre|script|style)\b.*?</\1>", "", html, flags=re.DOTALL)
    text = re.sub(r"<[^>]+>", "", html)
    found = PIPE_TABLE.findall(text)
    assert not found, f"{edition}{page}: a table shown as text ({found[0]!r})"


GOING_DEEPER_SECTION = re.compile(r'<section class="going-deeper" id="([^"]+)"')


@pytest.mark.parametrize("edition", ["", "ja/"])
def test_every_going_deeper_section_is_drawn_as_one(book, edition):
    """Each chapter's going-deeper sections (book/lean_path.py) carry the class that
    draws their bar (book_extension, _static/custom.css), in both editions: the
    Japanese heading must keep its 「さらに深く：」 for the page to mark it."""
    marked = 0
    for page in PAGES:
        source = ROOT / f"{page}.ipynb"
        if not source.exists():
            continue
        cells = json.loads(source.read_text(encoding="utf8"))["cells"]
        want = len(going_deeper_spans(cells))
        html = (HTML_DIR / f"{edition}{page}.html").read_text(encoding="utf8")
        found = GOING_DEEPER_SECTION.findall(html)
        assert len(found) == want, f"{edition}{page}: {found} for {want} sections"
        marked += want
    assert marked >= 5  # the rule is in use


FOLD_STATE_JS = """() => [...document.querySelectorAll('section.going-deeper')]
  .map((section) => {
    const button = section.querySelector(':scope > .going-deeper-toggle');
    const body = section.querySelector(':scope > .going-deeper-body');
    return {
      label: button && button.textContent,
      expanded: button && button.getAttribute('aria-expanded'),
      controls: button && button.getAttribute('aria-controls') === body.id,
      hidden: body.getAttribute('hidden'),
      height: body.getBoundingClientRect().height,
      inside: (body.querySelector('[id]') || {}).id || null,
    };
  })"""


@pytest.mark.parametrize("edition", ["", "ja/"])
def test_going_deeper_sections_fold_and_open(book, browser, edition):
    """A going-deeper section opens folded behind a button under its heading
    (book/going_deeper.js); Enter on the button opens it and again closes it, a link
    to something inside it opens that one only, and print shows it open."""
    page = HTML_DIR / f"{edition}chapters/06_masking.html"
    label = ("この節を開く", "この節を閉じる") if edition else (
        "Open this section", "Close this section")  # fmt: skip
    tab = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        tab.goto(page.as_uri(), wait_until="load")
        state = tab.evaluate(FOLD_STATE_JS)
        assert len(state) >= 2, state
        for s in state:
            assert (s["label"], s["expanded"], s["controls"]) == (
                label[0],
                "false",
                True,
            )
            assert s["hidden"] == "until-found" and s["height"] == 0, s
        button = tab.locator(".going-deeper-toggle").first
        button.focus()
        tab.keyboard.press("Enter")
        first = tab.evaluate(FOLD_STATE_JS)[0]
        assert (first["label"], first["expanded"], first["hidden"]) == (
            label[1], "true", None)  # fmt: skip
        assert first["height"] > 100
        tab.keyboard.press("Enter")
        assert tab.evaluate(FOLD_STATE_JS)[0]["expanded"] == "false"

        with_ids = [k for k, s in enumerate(state) if s["inside"]]
        assert with_ids, "no going-deeper section holds anything with an id"
        k = with_ids[-1]
        tab.close()
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        tab.goto(f"{page.as_uri()}#{state[k]['inside']}", wait_until="load")
        linked = [s["expanded"] for s in tab.evaluate(FOLD_STATE_JS)]
        assert linked == ["true" if j == k else "false" for j in range(len(state))]

        tab.emulate_media(media="print")
        printed = tab.evaluate(FOLD_STATE_JS)
        assert all(s["height"] > 100 for s in printed), printed
    finally:
        tab.close()


EMPTY_OUTPUT = re.compile(
    r'<div class="output stream[^"]*"><div class="highlight"><pre><span></span>\s*</pre>'
)


@pytest.mark.parametrize("edition", ["", "ja/"])
@pytest.mark.parametrize("page", PAGES)
def test_no_page_shows_an_empty_output_box(book, page, edition):
    """A print the kernel sent as two stream messages (its text, then its newline) is
    one box, not a box and an empty one: _config.yml merges a cell's streams."""
    html = (HTML_DIR / f"{edition}{page}.html").read_text(encoding="utf8")
    assert not EMPTY_OUTPUT.search(html), f"{edition}{page}: an empty output box"


@pytest.mark.parametrize("page", [p for p in PAGES if p.startswith("chapters/")])
def test_chapter_page_has_the_colab_launch_button_of_its_badge(book, page):
    url, branch, book_path = repository(ROOT)
    rel = f"en/{page}.ipynb"  # the reading copy Colab opens (book/colab_notebooks.py)
    link = colab_link(url, branch, f"{book_path}/{rel}" if book_path else rel)
    html = (HTML_DIR / f"{page}.html").read_text(encoding="utf8")
    assert f'href="{link}"' in html, f"{page}: no Colab launch button to {link}"


# --- the browser test -------------------------------------------------------------

SETTLE_JS = """async () => {
  await document.fonts.ready;
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
}"""

RENDERED_JS = """() => {
  const figs = document.querySelectorAll("div.plotly-graph-div").length;
  const plots = [...document.querySelectorAll("div.plotly-graph-div.js-plotly-plot")]
    .filter(el => el.querySelector("svg.main-svg")).length;
  const views = [...document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]')];
  const widgets = views.filter(s => {
    const area = s.previousElementSibling;
    return area && area.classList.contains("widget-subarea")
      && area.querySelector(".lm-Widget")
      && !area.querySelector(".jupyter-widgets-error-widget");
  }).length;
  return figs === plots && views.length === widgets;
}"""

MEASURE_JS = r"""() => {
  const article = document.querySelector("main") || document.body;
  const figs = document.querySelectorAll("div.plotly-graph-div").length;
  const plots = [...document.querySelectorAll("div.plotly-graph-div.js-plotly-plot")]
    .filter(el => el.querySelector("svg.main-svg")).length;
  const sliders = document.querySelectorAll(".js-plotly-plot .slider-container").length;
  const menus = document.querySelectorAll(".js-plotly-plot .updatemenu-container").length;
  const maths = [...article.querySelectorAll(".math")];
  const typeset = maths.filter(m => m.querySelector("mjx-container")).length;
  const clone = article.cloneNode(true);
  clone.querySelectorAll("pre, code, script, style, mjx-container, svg, .highlight")
    .forEach(el => el.remove());
  const text = clone.innerText || clone.textContent;
  const raw = text.match(/\$\$|\\\(|\\\[|\$[^\s$][^$\n]*?\$/g) || [];
  const views = document.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]').length;
  const widgets = [...document.querySelectorAll(".widget-subarea")]
    .filter(a => a.querySelector(".lm-Widget")
      && !a.querySelector(".jupyter-widgets-error-widget")).length;
  const cjk = /[\u3040-\u30ff\u4e00-\u9fff]/.test(document.body.innerText);
  const cjkFont = [...document.fonts].some(
    f => f.family.replace(/"/g, "") === "IPAexGothic" && f.status === "loaded");
  // figures whose plot area is a sliver of their box: margins that ate the plot
  // (plotly's axis automargin can run away over many shared panels)
  const squeezed = [...document.querySelectorAll("div.plotly-graph-div.js-plotly-plot")]
    .map((gd, i) => [i, gd._fullLayout])
    .filter(([, l]) => l && l._size
      && (l._size.w < 0.25 * l.width || l._size.h < 0.25 * l.height))
    .map(([i]) => i);
  return {figs, plots, sliders, menus, maths: maths.length, typeset, raw,
          views, widgets, cjk, cjkFont, squeezed};
}"""


CONTROLS_JS = """(i) => {
  const gd = document.querySelectorAll("div.plotly-graph-div.js-plotly-plot")[i];
  const fl = gd._fullLayout;
  const shown = (items) => (items || []).filter(x => x.visible !== false);
  return {
    sliders: shown(fl.sliders).map(s => ({active: s.active, n: shown(s.steps).length})),
    menus: shown(fl.updatemenus).map(m => ({
      active: m.active, n: shown(m.buttons).length, type: m.type})),
  };
}"""

# What a reader sees of figure i: the traces shown and the layout, without the
# controls' own state (a slider's position is not a change of the figure).
PICTURE_JS = """(i) => {
  const gd = document.querySelectorAll("div.plotly-graph-div.js-plotly-plot")[i];
  // which traces show is what counts, not whether `visible` is spelled out
  const shown = gd._fullData.filter(t => t.visible === true).map(t => {
    const {visible, ...trace} = gd.data[t.index];
    return trace;
  });
  const {sliders, updatemenus, template, ...layout} = gd.layout;
  // the same picture, however plotly holds it: a typed array encoded as base64 (as
  // the page ships it) or a plain one (after a frame or a restyle), float32 or not,
  // `autorange: false` spelled out once a frame has set the range
  const TYPES = {f4: Float32Array, f8: Float64Array, i1: Int8Array, u1: Uint8Array,
                 i2: Int16Array, u2: Uint16Array, i4: Int32Array, u4: Uint32Array};
  const decode = (v) => {
    const bytes = Uint8Array.from(atob(v.bdata), c => c.charCodeAt(0));
    const flat = Array.from(new TYPES[v.dtype](bytes.buffer));
    const shape = String(v.shape || flat.length).split(",").map(Number);
    if (shape.length < 2) return flat;
    const rows = [];
    for (let r = 0; r < shape[0]; r++) rows.push(flat.slice(r * shape[1], (r + 1) * shape[1]));
    return rows;
  };
  return JSON.stringify([shown, layout], (k, v) => {
    if (k.startsWith("_") || (k === "autorange" && v === false)) return undefined;
    if (v && typeof v === "object" && typeof v.bdata === "string" && TYPES[v.dtype]) {
      return decode(v);
    }
    if (ArrayBuffer.isView(v)) return Array.from(v);
    return typeof v === "number" ? +v.toPrecision(6) : v;
  });
}"""

# ipywidgets / anywidget controls: every input in a rendered widget area, and the
# output beside it (what interact() prints and draws, or an anywidget's own view).
WIDGETS_JS = """() => {
  const areas = [...document.querySelectorAll(".widget-subarea")]
    .filter(a => a.querySelector(".lm-Widget"));
  return areas.map(area => ({inputs: area.querySelectorAll(WIDGET_INPUTS).length}));
}"""
WIDGET_INPUTS = (
    "input:not([type=hidden]), select, textarea, .noUi-handle, "
    "button.widget-toggle-button, button.jupyter-button"
)
WIDGET_OUTPUT_JS = """(a) => {
  const area = [...document.querySelectorAll(".widget-subarea")]
    .filter(x => x.querySelector(".lm-Widget"))[a];
  const out = [...area.querySelectorAll(".widget-output, .jp-OutputArea")];
  // what the widget drives; not its status line (a time that differs every run)
  const text = (el) => {
    const copy = el.cloneNode(true);
    copy.querySelectorAll("[role=status]").forEach((s) => s.remove());
    return copy.textContent;
  };
  const parts = (out.length ? out : [area]).map(el => text(el)
    + [...el.querySelectorAll("img, canvas, svg")].map(
      g => g.src || g.outerHTML.length).join());
  return parts.join("|");
}"""
# an anywidget at work (fetching its model, computing): wait until it is done
WIDGET_BUSY_JS = """(a) => {
  const area = [...document.querySelectorAll(".widget-subarea")]
    .filter(x => x.querySelector(".lm-Widget"))[a];
  return !area.querySelector('[data-state="busy"], [data-state="loading"]');
}"""


def _click_center(tab, locator) -> None:
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    tab.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def _picture(tab, i):
    """Figure i's picture as values: an update may write the same layout in another
    key order."""
    return json.loads(tab.evaluate(PICTURE_JS, i))


def _settle(tab, i, kind, k, want, picture=None, same: bool = False) -> bool:
    """Wait until control k of figure i reports ``want`` as its active entry; then,
    given ``picture`` (the figure's picture before the step or pick), up to 3 s until
    the figure's picture equals it (``same``) or differs from it: on a loaded machine
    the redraw can take longer than the 50 ms after the event, and a picture read
    mid-redraw is neither. The caller reads the picture again and judges it, so a
    figure that never changes still fails."""
    js = f"(i) => ({CONTROLS_JS})(i).{kind}[{k}].active === {want}"
    try:
        tab.wait_for_function(js, arg=i, timeout=3_000)
    except Exception:
        return False
    tab.wait_for_timeout(50)  # the redraw after the control's event
    deadline = time.monotonic() + 3.0
    while picture is not None and time.monotonic() < deadline:
        if (_picture(tab, i) == picture) == same:
            break
        tab.wait_for_timeout(50)
    return True


def _move_slider(tab, fig, i, k, slider) -> list[str]:
    """Drag slider k of figure i to its end (its start if it opens at the end) and
    back to where it opened, clicking on the rail at the step's tick."""
    n, home = slider["n"], slider["active"]
    far = n - 1 if home != n - 1 else 0
    group = fig.locator(".slider-group").nth(k)
    rail = group.locator(".slider-rail-touch-rect")
    ticks = group.locator(".slider-tick-rect")

    def click(step, picture, same) -> bool:
        # twice at most: on a loaded machine the page can be laid out again (a figure
        # above drawn late) between reading the rail's place and the click, which then
        # misses; the place is read again before each click
        for _ in range(2):
            rail.scroll_into_view_if_needed()
            box = rail.bounding_box()
            if ticks.count() != n:  # no tick per step: the rail's ends
                x = box["x"] + (box["width"] - 2 if step else 2)
            else:
                t = ticks.nth(step).bounding_box()
                x = t["x"] + t["width"] / 2
            tab.mouse.click(x, box["y"] + box["height"] / 2)
            if _settle(tab, i, "sliders", k, step, picture, same=same):
                return True
        return False

    start = _picture(tab, i)
    moved = click(far, start, same=False)
    end = _picture(tab, i)
    back = click(home, start, same=True)
    again = _picture(tab, i)
    if not (moved and back):
        return [f"figure {i}: slider {k + 1} did not move"]
    if end == start:
        return [f"figure {i}: slider {k + 1} does not change the figure"]
    if again != start:
        return [f"figure {i}: slider {k + 1} does not change the figure back"]
    return []


def _menu_entries(tab, fig, k, menu):
    group = fig.locator(".updatemenu-container > g").nth(k)
    if menu["type"] == "dropdown":
        header = group.locator(".updatemenu-header")
        _click_center(tab, header)  # open it
        entries = fig.locator(".updatemenu-dropdown-button")
        try:  # drawn when it opens; _pick says so if it never does
            expect(entries).to_have_count(menu["n"], timeout=3_000)
        except AssertionError:
            pass
        return entries
    return group.locator(".updatemenu-button")


def _pick(tab, fig, i, k, menu, entry, picture=None, same=False) -> bool:
    entries = _menu_entries(tab, fig, k, menu)
    if entries.count() != menu["n"]:
        return False
    _click_center(tab, entries.nth(entry))
    return _settle(tab, i, "menus", k, entry, picture, same)


def _move_menu(tab, fig, i, k, menu) -> list[str]:
    """Pick every entry of menu k of figure i (first and last only beyond 12), then
    the first again: every pick must change the figure, the last one back."""
    n, first = menu["n"], menu["active"]
    order = [e for e in range(n) if e != first]
    if len(order) > 12:
        order = [order[0], order[-1]]
    start = before = _picture(tab, i)
    for entry in [*order, first]:
        back = entry == first  # the last pick: the opening picture again
        if not _pick(tab, fig, i, k, menu, entry, start if back else before, back):
            return [f"figure {i}: menu {k + 1} entry {entry + 1} could not be picked"]
        now = _picture(tab, i)
        if now == before:
            return [f"figure {i}: menu {k + 1} entry {entry + 1} changes nothing"]
        before = now
    if before != start:
        return [f"figure {i}: menu {k + 1} does not change the figure back"]
    return []


def _change_widget_input(tab, control):
    """Change one widget input; returns a function that changes it back."""
    tag = control.evaluate("el => el.tagName.toLowerCase()")
    kind = control.get_attribute("type") or ""
    classes = control.get_attribute("class") or ""
    control.scroll_into_view_if_needed()
    if tag == "select":
        old = control.input_value()
        values = control.evaluate("el => [...el.options].map(o => o.value)")
        control.select_option(next(v for v in values if v != old))
        return lambda: control.select_option(old)
    if kind == "checkbox" or tag == "button":
        control.click()
        return control.click
    if kind == "range":  # one step, and back: the value it had
        at_end = control.input_value() == control.get_attribute("max")
        there, back = (
            ("ArrowLeft", "ArrowRight") if at_end else ("ArrowRight", "ArrowLeft")
        )
        control.focus()
        tab.keyboard.press(there)
        return lambda: (control.focus(), tab.keyboard.press(back))
    if "noUi-handle" in classes:
        at_end = control.get_attribute("aria-valuenow") == control.get_attribute(
            "aria-valuemax"
        )
        there, back = ("Home", "End") if at_end else ("End", "Home")
        control.focus()
        tab.keyboard.press(there)
        return lambda: (control.focus(), tab.keyboard.press(back))
    old = control.input_value()
    control.fill(old + "1")
    control.press("Enter")
    return lambda: (control.fill(old), control.press("Enter"))


WIDGET_INPUT_COUNT_JS = """(sel) => [...document.querySelectorAll(".widget-subarea")]
  .filter(a => a.querySelector(".lm-Widget"))
  .reduce((n, a) => n + a.querySelectorAll(sel).length, 0)"""


def widgets_drawn(tab, timeout_s: float = 20.0) -> int:
    """Wait until the widgets' inputs are drawn (an anywidget draws after the page's
    font has loaded): their count, once it has held for half a second."""
    import time

    deadline = time.monotonic() + timeout_s
    last = -1
    while time.monotonic() < deadline:
        n = tab.evaluate(WIDGET_INPUT_COUNT_JS, WIDGET_INPUTS)
        if n == last:
            return n
        last = n
        tab.wait_for_timeout(500)
    return last


def _widget_settled(tab, a: int) -> None:
    tab.wait_for_timeout(300)
    tab.wait_for_function(WIDGET_BUSY_JS, arg=a, timeout=120_000)
    tab.wait_for_timeout(100)


# A widget that fetches its model on first use shows nothing computed before it
# (data-state "idle"): use it once, as a reader would (Enter in its text box), so
# that changing a control back can restore what it showed.
WARM_JS = """() => [...document.querySelectorAll('[data-state="idle"]')].map(w => {
  const box = w.querySelector("textarea, input[type=text]");
  if (box) box.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true}));
  return !!box;
})"""


def warm_widgets(tab) -> None:
    if any(tab.evaluate(WARM_JS)):
        tab.wait_for_timeout(300)
        tab.wait_for_function(
            "() => !document.querySelector("
            "'[data-state=busy], [data-state=loading], [data-state=idle]')",
            timeout=120_000,
        )


def _exercise_widgets(tab) -> tuple[int, int, list[str]]:
    """Change every ipywidgets/anywidget input; its output must change, with no
    kernel (a widget that runs a model fetches it on first use: waited for)."""
    problems, moved = [], 0
    warm_widgets(tab)
    areas = tab.evaluate(WIDGETS_JS.replace("WIDGET_INPUTS", repr(WIDGET_INPUTS)))
    for a, area in enumerate(areas):
        inputs = tab.locator(".widget-subarea").filter(has=tab.locator(".lm-Widget"))
        for c in range(area["inputs"]):
            control = inputs.nth(a).locator(WIDGET_INPUTS).nth(c)
            before = tab.evaluate(WIDGET_OUTPUT_JS, a)
            try:
                revert = _change_widget_input(tab, control)
                _widget_settled(tab, a)
                after = tab.evaluate(WIDGET_OUTPUT_JS, a)
                revert()
                _widget_settled(tab, a)
                again = tab.evaluate(WIDGET_OUTPUT_JS, a)
            except Exception as err:  # reported like a control that did nothing
                problems.append(f"widget {a + 1} input {c + 1}: {err}")
                continue
            moved += 1
            if after != before and again == before:
                continue
            problems.append(
                f"widget {a + 1} input {c + 1}: "
                + (
                    "changes nothing"
                    if after == before
                    else "does not change its output back"
                )
            )
    return sum(a["inputs"] for a in areas), moved, problems


def _exercise_controls(tab, widgets: bool = True) -> list[str]:
    """Move every control of every figure and widget with the mouse or keyboard:
    each slider to its end and back, each menu entry, each widget input. The
    figure or output it drives must change (no kernel involved), and every control
    the page has must have been moved (``widgets=False``: the figures' only)."""
    problems = []
    found = moved = 0
    figs = tab.locator("div.plotly-graph-div.js-plotly-plot")
    for i in range(figs.count()):
        fig = figs.nth(i)
        controls = tab.evaluate(CONTROLS_JS, i)
        found += len(controls["sliders"]) + len(controls["menus"])
        for k, slider in enumerate(controls["sliders"]):
            if slider["n"] < 2:
                problems.append(f"figure {i}: slider {k + 1} has one step")
                continue
            problems += _move_slider(tab, fig, i, k, slider)
            moved += 1
        for k, menu in enumerate(controls["menus"]):
            if menu["n"] < 2:
                problems.append(f"figure {i}: menu {k + 1} has one entry")
                continue
            problems += _move_menu(tab, fig, i, k, menu)
            moved += 1
    if widgets:
        w_found, w_moved, w_problems = _exercise_widgets(tab)
        found, moved = found + w_found, moved + w_moved
        problems += w_problems
    if moved != found:
        problems.append(f"{found} controls on the page, {moved} moved")
    return problems


# the chapters whose widgets run a model in the page (each must have widget inputs)
MODEL_PAGES = ("10_decoding_and_attention", "12_real_japanese", "13_where_it_led")


def test_the_model_pages_show_widgets(book):
    """The pages whose widgets run a model in the page show widgets in both editions
    (tests/book/test_pages.py works every widget input of every page)."""
    views = "application/vnd.jupyter.widget-view+json"
    for page in (f"{e}chapters/{c}" for e in ("", "ja/") for c in MODEL_PAGES):
        assert views in (HTML_DIR / f"{page}.html").read_text(encoding="utf8"), page


def test_book_serves_its_font_and_saves_widget_states(book):
    """The CJK font is vendored, and every page that still shows ipywidgets keeps
    their saved state (the html manager draws them from it)."""
    assert Path(HTML_DIR, "_static", "vendor", "fonts", "ipaexg.ttf").exists()
    views = "application/vnd.jupyter.widget-view+json"
    state = "application/vnd.jupyter.widget-state+json"
    pages = {p: (HTML_DIR / f"{p}.html").read_text(encoding="utf8") for p in PAGES}
    missing = [p for p, html in pages.items() if views in html and state not in html]
    assert not missing, f"widgets shown without their saved state: {missing}"


def _figures_page(browser, page: Path, body: str):
    """``body`` (figures' HTML) written to ``page`` with plotly.js, and a tab on it
    once every figure is drawn (the checks' can-fail tests)."""
    import plotly

    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    page.write_text(
        f'<html><head><script src="{plotly_js.as_uri()}"></script></head>'
        f"<body>{body}</body></html>",
        encoding="utf8",
    )
    tab = browser.new_page(viewport={"width": 1000, "height": 800})
    try:
        tab.goto(page.as_uri(), wait_until="load")
        tab.wait_for_function(RENDERED_JS, timeout=20_000)
    except BaseException:
        tab.close()
        raise
    return tab


def test_the_squeezed_figure_check_can_fail(browser, tmp_path):
    """MEASURE_JS names a figure whose margins leave its plot a sliver (chapter 12's
    cross-attention figure was drawn 64 pixels square in a 672 × 640 box), and not
    a figure drawn as usual."""
    import plotly.graph_objects as go

    bar = [go.Bar(x=[0, 1], y=[1, 2])]
    figs = [
        go.Figure(bar, layout={"width": 600, "height": 400}),
        go.Figure(bar, layout={"width": 600, "height": 400, "margin": {"l": 500}}),
        go.Figure(bar, layout={"width": 600, "height": 400, "margin": {"t": 340}}),
    ]
    body = "".join(f.to_html(include_plotlyjs=False, full_html=False) for f in figs)
    tab = _figures_page(browser, tmp_path / "squeezed.html", body)
    try:
        m = tab.evaluate(MEASURE_JS)
    finally:
        tab.close()
    assert m["plots"] == 3 and m["squeezed"] == [1, 2], m


def test_control_check_can_fail(browser, tmp_path):
    import numpy as np
    import plotly.graph_objects as go
    from plotly_renderer import BookRenderer

    from transformer_edu import viz

    same = [np.eye(3)] * 3  # a slider whose frames are all alike changes nothing
    moving = [np.eye(3) * k for k in (1, 2, 3)]

    def second_ignored(a, b):  # two sliders; the second one changes nothing
        return [go.Bar(x=[0, 1, 2], y=[a, 2 * a, 1])]

    figs = [
        viz.heatmap_slider(moving, slider_labels=list("abc")),
        viz.heatmap_slider(same, slider_labels=list("abc")),
        viz.explorer(
            go.Figure(),
            second_ignored,
            viz.Control("a = ", [1, 2, 3]),
            viz.Control("b = ", [1, 2]),
        ),
        viz.explorer(  # a dropdown and buttons that both work
            go.Figure(),
            lambda a, b: [go.Bar(x=[0, 1], y=[a, b])],
            viz.Control("a", [1, 2, 3], kind="dropdown"),
            viz.Control("b", [4, 5], kind="buttons"),
        ),
    ]
    render = BookRenderer().to_mimebundle
    body = "".join(render(fig.to_dict())["text/html"] for fig in figs)
    tab = _figures_page(browser, tmp_path / "figs.html", body)
    try:
        assert _exercise_controls(tab) == [
            "figure 1: slider 1 does not change the figure",
            "figure 2: slider 2 does not change the figure",
        ]
    finally:
        tab.close()


def test_widget_check_can_fail(browser, tmp_path):
    """Widget inputs: one changes nothing (a failure), two drive their output, one
    needs a kernel and says so beside it (a failure too: no exemption)."""

    def cell(inputs: str, note: str = "", out: str = "") -> str:
        return (
            f'<div class="cell"><p>{note}</p><div class="widget-subarea">'
            f'<div class="lm-Widget jupyter-widgets">{inputs}</div>'
            f'<div class="widget-output">{out}</div></div></div>'
        )

    show = "this.closest('.widget-subarea').querySelector('.widget-output').innerText"
    body = (
        cell('<input type="checkbox">')
        + cell(
            f'<select onchange="{show} = this.value">'
            "<option>a</option><option>b</option></select>",
            out="a",
        )
        + cell(f'<input type="checkbox" onchange="{show} = this.checked">', out="false")
        + cell('<input type="text" value="私">', "Typing needs a running kernel.")
    )
    page = tmp_path / "widgets.html"
    page.write_text(
        f'<html><meta charset="utf-8"><body>{body}</body></html>', encoding="utf8"
    )
    tab = browser.new_page(viewport={"width": 1000, "height": 800})
    try:
        tab.goto(page.as_uri(), wait_until="load")
        # a note that it needs a kernel excuses nothing: every control must work
        assert _exercise_controls(tab) == [
            "widget 1 input 1: changes nothing",
            "widget 4 input 1: changes nothing",
        ]
    finally:
        tab.close()
