"""Tests for transformer_edu/viz/listing.py, and for the package code shown on the pages.

- ``source`` reads the package, narrows by markers and refuses what is not ours.
- Every listing of every built page (``data-source="path:first-last"``) equals those
  lines of the package as it is now.
- By the end of chapter 8 a reader has seen every line of ``attention``,
  ``embeddings``, ``norm``, ``feed_forward``, ``layers`` and ``model`` that a forward
  pass runs (traced: the paper's post-LN model and the pre-LN one, the fast and the
  reference attention path, with padding and look-ahead masks).
"""

from __future__ import annotations

import re
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch
from sync_colab import toc_files  # book/ is on pythonpath

import transformer_edu
from transformer_edu import MultiHeadAttention, make_model
from transformer_edu.viz.listing import SOURCE_CLASS, Listing, source

ROOT = Path(__file__).resolve().parents[2]
HTML_DIR = ROOT / "_build" / "html"
PACKAGE = ROOT / "transformer_edu"
# the modules whose forward-pass lines the reader sees by the end of chapter 8
TAUGHT = tuple(
    f"model.{m}"
    for m in (
        "attention",
        "embeddings",
        "norm",
        "feed_forward",
        "layers",
        "transformer",
    )
)
LAST_BUILD_CHAPTER = "chapters/08_encoder_decoder"


def test_source_reads_the_package_and_narrows_by_markers():
    whole = source(MultiHeadAttention.forward)
    path = ROOT / whole.path
    lines = path.read_text(encoding="utf8").splitlines(keepends=True)
    assert whole.path == "transformer_edu/model/attention.py"
    assert whole.text == textwrap.dedent("".join(lines[whole.first - 1 : whole.last]))
    assert whole.text.startswith("def forward(")
    step = source(MultiHeadAttention.forward, "# 1)", "# 2)")
    assert whole.first < step.first < step.last < whole.last
    assert (
        step.text.lstrip().startswith("# 1)") and "# 2)" in step.text.splitlines()[-1]
    )
    assert source(MultiHeadAttention.from_torch).text.startswith("@classmethod")


def test_source_refuses_what_is_not_ours_and_missing_markers():
    with pytest.raises(ValueError, match="not defined in transformer_edu"):
        source(torch.nn.Linear)
    with pytest.raises(ValueError, match="no line of"):
        source(MultiHeadAttention.forward, "no such marker")
    with pytest.raises(ValueError, match="no line after"):
        source(MultiHeadAttention.forward, "# 1)", "no such marker")


def test_a_listing_shows_where_it_comes_from():
    listing = source(MultiHeadAttention.split_heads)
    html = listing._repr_html_()
    assert f'class="{SOURCE_CLASS}"' in html
    assert f'data-source="{listing.where}"' in html
    assert re.fullmatch(r"transformer_edu/model/attention\.py:\d+-\d+", listing.where)
    assert "```python\n" + listing.text in listing._repr_markdown_()


# --- the built pages ------------------------------------------------------------


class _Listings(HTMLParser):
    """(where, text) of every listing of a page: the text of its <pre>."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []
        self._where: str | None = None
        self._in_pre = 0
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if (
            SOURCE_CLASS in (attrs.get("class") or "").split()
            and "data-source" in attrs
        ):
            self._where = attrs["data-source"]
        if tag == "pre" and self._where is not None:
            self._in_pre += 1

    def handle_endtag(self, tag):
        if tag == "pre" and self._in_pre:
            self._in_pre -= 1
            if not self._in_pre:
                self.found.append((self._where, "".join(self._text)))
                self._where, self._text = None, []

    def handle_data(self, data):
        if self._in_pre:
            self._text.append(data)


def page_listings(html: str) -> list[tuple[str, str]]:
    parser = _Listings()
    parser.feed(html)
    return parser.found


def package_lines(where: str) -> tuple[Path, int, int, str]:
    path, span = where.rsplit(":", 1)
    first, last = (int(n) for n in span.split("-"))
    lines = (ROOT / path).read_text(encoding="utf8").splitlines(keepends=True)
    return ROOT / path, first, last, textwrap.dedent("".join(lines[first - 1 : last]))


def built_pages() -> list[Path]:
    return sorted(HTML_DIR.rglob("*.html"))


def test_the_listing_check_can_fail():
    listing = source(MultiHeadAttention.combine_heads)
    html = listing._repr_html_()
    ((where, shown),) = page_listings(html)
    assert shown == package_lines(where)[3]
    stale = html.replace("inverse of", "opposite of")
    ((where, shown),) = page_listings(stale)
    assert shown != package_lines(where)[3]


@pytest.mark.book
def test_every_listing_on_every_page_equals_the_package(book):
    found, stale = 0, []
    for page in built_pages():
        for where, shown in page_listings(page.read_text(encoding="utf8")):
            found += 1
            if shown != package_lines(where)[3]:
                stale.append(f"{page.relative_to(HTML_DIR)}: {where}")
    assert found, "no page shows the package's code"
    assert not stale, f"listings that differ from the package: {stale}"


def forward_lines() -> dict[str, set[int]]:
    """Line numbers of the TAUGHT modules that a forward pass executes."""
    files = {
        str(Path(sys.modules[f"transformer_edu.{m}"].__file__).resolve()): m
        for m in TAUGHT
    }
    hit: dict[str, set[int]] = {m: set() for m in TAUGHT}

    def tracer(frame, event, arg):
        module = files.get(frame.f_code.co_filename)
        if module is None:
            return None  # no line events for frames outside the taught modules
        if event == "line":
            hit[module].add(frame.f_lineno)
        return tracer

    torch.manual_seed(0)
    src = torch.tensor([[5, 6, 7, 8], [5, 6, 0, 0]])  # (B, S): one padded sentence
    tgt = torch.tensor([[1, 9, 10], [1, 9, 0]])  # (B, T)
    for norm_first in (False, True):
        model = make_model(
            12, 12, n_layers=1, d_model=16, n_heads=2, d_ff=32, norm_first=norm_first
        )
        for fast in (True, False):
            for m in model.modules():
                if isinstance(m, MultiHeadAttention):
                    m.fast = fast
            for training in (True, False):
                model.train(training)
                sys.settrace(tracer)
                try:
                    model(src, tgt)
                finally:
                    sys.settrace(None)
    return hit


def test_the_forward_trace_sees_the_taught_modules():
    hit = forward_lines()
    assert all(hit[m] for m in TAUGHT), {m: len(v) for m, v in hit.items()}


@pytest.mark.book
def test_by_chapter_8_the_reader_has_seen_every_line_a_forward_pass_runs(book):
    pages = toc_files(ROOT)
    upto = pages[: pages.index(LAST_BUILD_CHAPTER) + 1]
    shown: dict[str, set[int]] = {m: set() for m in TAUGHT}
    for page in upto:
        html_file = HTML_DIR / f"{page}.html"
        for where, _ in page_listings(html_file.read_text(encoding="utf8")):
            path, first, last, _ = package_lines(where)
            module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
            if module in shown:
                shown[module].update(range(first, last + 1))
    unseen = {}
    for module, lines in forward_lines().items():
        missing = sorted(lines - shown[module])
        if missing:
            text = (
                (PACKAGE / (module.replace(".", "/") + ".py")).read_text().splitlines()
            )
            unseen[module] = [f"{n}: {text[n - 1].strip()[:60]}" for n in missing]
    assert not unseen, (
        "lines a forward pass runs that no listing of chapters 1-8 shows: "
        + "; ".join(f"{m} {v}" for m, v in unseen.items())
    )


def test_module_listings_cover_a_whole_module():
    listing = source(transformer_edu.model.norm)
    text = (PACKAGE / "model" / "norm.py").read_text(encoding="utf8")
    assert isinstance(listing, Listing) and listing.text == text
