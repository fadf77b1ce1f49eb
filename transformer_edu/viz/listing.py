"""The package's own code on the page: a chapter shows the source of what it teaches.

``show_source(MultiHeadAttention.forward)`` reads the code from the installed package
when the cell runs (never a copy in the notebook), and displays it with its file and
line numbers: highlighted HTML in the book, Jupyter and Colab, plain text elsewhere.
Every listing carries ``data-source="transformer_edu/<file>.py:<first>-<last>"``, so a
test can compare each block of a built page with the package (tests/viz/test_listing.py).
"""

from __future__ import annotations

import html
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
SOURCE_CLASS = "tedu-source"  # the CSS class of every listing, for the page's tests


@dataclass(frozen=True)
class Listing:
    """Lines ``first``..``last`` (1-based, inclusive) of a file of the package."""

    path: str  # relative to the repository root, e.g. "transformer_edu/model/attention.py"
    first: int
    last: int
    text: str  # those lines, dedented (a method's body reads from column 0)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.first}-{self.last}"

    def __str__(self) -> str:
        return f"# {self.where}\n{self.text}"

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        # inline styles: the same colours in the book, Jupyter and Colab; the theme's
        # own code style, whose colours all keep a 4.5:1 contrast (WCAG AA)
        code = highlight(
            self.text, PythonLexer(), HtmlFormatter(noclasses=True, style=_style())
        )
        return (
            f'<div class="{SOURCE_CLASS}" data-source="{html.escape(self.where)}">'
            f'<div class="{SOURCE_CLASS}-where"><code>{html.escape(self.where)}'
            f"</code></div>{code}</div>"
        )

    def _repr_markdown_(self) -> str:
        return f"`{self.where}`\n\n```python\n{self.text}```\n"


CODE_STYLE = "a11y-high-contrast-light"  # Pygments >= 2.18, as the book's theme uses


def _style() -> str:
    """The listings' Pygments style (an older Pygments: its default)."""
    from pygments.styles import get_all_styles

    return CODE_STYLE if CODE_STYLE in set(get_all_styles()) else "default"


def _unwrap(obj: object) -> object:
    obj = inspect.unwrap(obj) if callable(obj) else obj
    return getattr(obj, "__func__", obj)  # a classmethod's function


def source(obj: object, start: str | None = None, end: str | None = None) -> Listing:
    """The package source of ``obj`` (a module, class, function or method).

    ``start``/``end`` narrow it to the lines from the first line containing ``start``
    up to and including the first later line containing ``end`` (markers are plain
    text already in the code, e.g. ``"# 1)"``), so a chapter can show one step.
    """
    obj = _unwrap(obj)
    file = inspect.getsourcefile(obj)
    if file is None or PACKAGE_ROOT not in Path(file).resolve().parents:
        raise ValueError(f"{obj!r} is not defined in transformer_edu ({file})")
    lines, first = inspect.getsourcelines(obj)
    first = max(first, 1)  # a module starts at 0
    if start is not None:
        at = [i for i, line in enumerate(lines) if start in line]
        if not at:
            name = getattr(obj, "__qualname__", getattr(obj, "__name__", obj))
            raise ValueError(f"no line of {name} contains {start!r}")
        lines, first = lines[at[0] :], first + at[0]
    if end is not None:
        at = [i for i, line in enumerate(lines) if end in line]
        if not at:
            raise ValueError(f"no line after {start!r} contains {end!r}")
        lines = lines[: at[0] + 1]
    rel = Path(file).resolve().relative_to(PACKAGE_ROOT.parent).as_posix()
    return Listing(rel, first, first + len(lines) - 1, textwrap.dedent("".join(lines)))


def show_source(obj: object, start: str | None = None, end: str | None = None) -> None:
    """Display :func:`source` of ``obj`` in a notebook."""
    from IPython.display import display

    display(source(obj, start, end))
