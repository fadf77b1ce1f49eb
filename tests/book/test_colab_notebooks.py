"""The notebooks a reader opens outside the book (Colab, Jupyter, VS Code, GitHub):
written from the sources and the recorded values, up to date, with no MyST markup
left, every glued number the one the book's build measured."""

from __future__ import annotations

import json
import re
from pathlib import Path

import colab_notebooks as colab  # book/ is on pythonpath
import ja_notebooks
import nbformat
import pytest
import solutions_edition
import student_edition
import sync_colab

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sync_colab.chapter_paths(ROOT)
# what the Colab badges open: the chapters' reading copies, the Japanese chapters and
# both student and solutions editions
OPENED = sorted(
    p
    for folder in (
        "en/chapters",
        "ja/chapters",
        "student",
        "student/ja",
        "solutions",
        "solutions/ja",
    )
    for p in (ROOT / folder).glob("*.ipynb")
)
# MyST a plain Markdown viewer shows as it is: a role, a directive's fence or option,
# an attribute span, a target
MYST = {
    "role": re.compile(r"\{[a-z][\w:-]*\}`"),
    "directive": re.compile(r"^\s*(`{3,}|~{3,}|:{3,})\s*\{[\w:-]+\}", re.M),
    "option": re.compile(r"^:(class|name|alt|width|align|label|open):", re.M),
    "span": re.compile(r"\]\{[.#][\w-]"),
    "target": re.compile(r"^\([\w-]+\)=\s*$", re.M),
}


def _markdown(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells
            if c.cell_type == "markdown"]  # fmt: skip


def myst_left(text: str) -> dict[str, int]:
    """How many of each kind of MyST markup ``text`` holds."""
    return {k: n for k, pattern in MYST.items() if (n := len(pattern.findall(text)))}


def test_the_colab_notebooks_are_up_to_date():
    assert colab.stale(ROOT) == [], "run: make student"
    assert student_edition.stale(ROOT) == [], "run: make student"
    assert solutions_edition.stale(ROOT) == [], "run: make student"
    assert ja_notebooks.stale(ROOT) == [], "run: make student"


def test_every_notebook_a_badge_opens_is_one_of_these():
    assert len(OPENED) >= 3 * len(CHAPTERS)
    for path in CHAPTERS:
        rel = path.relative_to(ROOT).as_posix()
        badge = nbformat.read(path, as_version=4).cells[0].source
        assert badge.endswith(f"/blob/main/en/{rel})"), badge
        assert (ROOT / "en" / rel).exists()


def test_no_myst_markup_is_left_in_them():
    left = {}
    for path in OPENED:
        found = myst_left("\n".join(_markdown(path)))
        if found:
            left[str(path.relative_to(ROOT))] = found
    assert left == {}


def test_the_markup_check_can_fail():
    assert myst_left("x {glue:text}`a:.1f` y {cite}`b`") == {"role": 2}
    assert myst_left("````{admonition} Answer\n:class: dropdown\n\nx\n````") == {
        "directive": 1, "option": 1,
    }  # fmt: skip
    assert myst_left("[ours]{.departure} (sec)=\n") == {"span": 1}
    assert myst_left("`{glue:text}` in code is fine? no: a role in code") == {"role": 1}


def test_every_glued_key_has_a_recorded_value():
    values = colab.load_values(ROOT)
    assert values["built"].get("commit"), (
        "record the values: python book/colab_notebooks.py --record"
    )
    for path in CHAPTERS:
        page = path.relative_to(ROOT).with_suffix("").as_posix()
        keys = colab.glue_keys(nbformat.read(path, as_version=4))
        recorded = values["chapters"].get(page, {})
        assert keys <= set(recorded), (page, sorted(keys - set(recorded)))


def test_each_glued_number_is_the_recorded_value_formatted_as_the_role_says():
    values = colab.load_values(ROOT)["chapters"]
    checked = 0
    for path in CHAPTERS:
        page = path.relative_to(ROOT).with_suffix("").as_posix()
        source = nbformat.read(path, as_version=4)
        rendered = nbformat.read(ROOT / "en" / f"{page}.ipynb", as_version=4)
        texts = [c.source for c in rendered.cells if c.cell_type == "markdown"]
        for cell in source.cells:
            if cell.cell_type != "markdown":
                continue
            for m in re.finditer(r"\{glue:text\}`([^`]+)`", cell.source):
                key, fmt = colab._glue_key(m.group(1))
                shown = colab.format_value(values[page][key], fmt)
                assert any(shown in t for t in texts), (page, key, shown)
                checked += 1
    assert checked > 500


def test_rendering_myst_as_plain_markdown():
    values = {"n": "3.14159", "word": "'faster'", "word__ja": "'速い'"}
    text = (
        "pi is {glue:text}`n:.2f` and {glue:text}`word`; see {cite}`vaswani2017attention`"
        " and `{glue:text}` in code.\n\n[ours, not the paper's]{.departure}\n\n"
        "````{admonition} Answer\n:class: dropdown\n\n$x$ is {glue:text}`n:.0f`.\n\n"
        "```python\nprint(1)\n```\n````\n\n```{note}\nA note.\n```\n\n"
        "```{figure} img.png\n:alt: a cat\n\nThe cat.\n```"
    )
    en = colab.render_markdown(text, values, "en", ROOT)
    assert "pi is 3.14 and faster; see [Vaswani et al., 2017](https://" in en
    assert "/bibliography.html#cite-vaswani2017attention)" in en
    assert "`{glue:text}` in code" in en  # code stays code
    assert "**[ours, not the paper's]**" in en
    assert "<details>\n<summary>Answer</summary>\n\n$x$ is 3.\n\n```python" in en
    assert "> **Note**\n>\n> A note." in en
    assert "![a cat](img.png)\n\n*The cat.*" in en
    ja = colab.render_markdown(text, values, "ja", ROOT)
    assert "pi is 3.14 and 速い; see [Vaswani ほか, 2017](" in ja
    assert "/ja/bibliography.html#cite-" in ja
    assert "> **注**" in ja
    with pytest.raises(KeyError, match="no recorded value for glue key 'missing'"):
        colab.render_markdown("{glue:text}`missing`", values, "en", ROOT)


def test_the_note_on_the_numbers_comes_after_the_title():
    for folder, lang in (
        ("en/chapters", "en"),
        ("ja/chapters", "ja"),
        ("student", "en"),
    ):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            cells = nbformat.read(path, as_version=4).cells
            notes = [c for c in cells if c.get("id") == colab.NOTE_ID]
            glued = any("{glue" in c.source for c in nbformat.read(
                ROOT / "chapters" / path.name, as_version=4).cells)  # fmt: skip
            assert len(notes) == int(glued), path
            if notes:
                built = colab.load_values(ROOT)["built"]
                assert notes[0].source == colab.numbers_note(lang, built)


def test_a_paragraph_that_held_glue_reads_as_the_book():
    """What a learner reads in Colab: chapter 12's training time, a number."""
    page = "chapters/12_real_japanese"
    source = nbformat.read(ROOT / f"{page}.ipynb", as_version=4)
    before = next(c.source for c in source.cells
                  if c.cell_type == "markdown" and "{glue:text}`ch12_" in c.source)  # fmt: skip
    after = colab.render_markdown(
        before, colab.load_values(ROOT)["chapters"][page], "en", ROOT
    )
    assert "{glue" not in after and "{cite}" not in after
    assert re.search(r"\d", after)
    print("\nBEFORE:\n" + before + "\n\nAFTER:\n" + after)


def test_the_values_file_is_plain_and_sorted():
    path = ROOT / colab.VALUES
    data = json.loads(path.read_text(encoding="utf8"))
    assert set(data) == {"built", "chapters"}
    for page, values in data["chapters"].items():
        assert list(values) == sorted(values), page
        assert all(isinstance(v, str) for v in values.values())


def test_the_colab_button_opens_the_reading_copy():
    """book/editions.py points the pages' Colab button at en/ or ja/chapters/."""
    import editions

    class App:
        class config:  # noqa: N801  Sphinx's app.config
            language = "en"

    link = "https://colab.research.google.com/github/o/r/blob/main/chapters/06_masking.ipynb"
    for lang, folder in (("en", "en/chapters"), ("ja", "ja/chapters")):
        App.config.language = lang
        context = {"header_buttons": [{"buttons": [{"url": link}, {"url": "x"}]}]}
        editions.colab_button(App, "chapters/06_masking", "page.html", context, None)
        buttons = context["header_buttons"][0]["buttons"]
        assert buttons[0]["url"] == link.replace("/chapters/", f"/{folder}/")
        assert buttons[1]["url"] == "x"


book = pytest.mark.book


@book
@pytest.mark.parametrize(
    "page", [p for p in sync_colab.toc_files(ROOT) if p.startswith("chapters/")]
)
def test_an_english_chapter_opens_its_reading_copy_in_colab(book, page):
    url, branch, book_path = sync_colab.repository(ROOT)
    rel = f"en/{page}.ipynb"
    link = sync_colab.colab_link(
        url, branch, f"{book_path}/{rel}" if book_path else rel
    )
    html = (ROOT / "_build" / "html" / f"{page}.html").read_text(encoding="utf8")
    assert f'href="{link}"' in html, f"{page}: no Colab button to {link}"
    assert (ROOT / rel).exists()


@book
def test_the_references_page_has_the_anchors_the_notebooks_link_to(book):
    html = (ROOT / "_build" / "html" / "bibliography.html").read_text(encoding="utf8")
    keys = re.findall(r"#cite-([\w-]+)\)", "\n".join(
        s for p in OPENED for s in _markdown(p)))  # fmt: skip
    assert keys
    for key in set(keys):
        assert f'id="cite-{key}"' in html, key
