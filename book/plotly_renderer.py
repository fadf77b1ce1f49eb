"""The book build's plotly renderer: HTML that draws with the plotly.js the book serves.

myst-nb drops plotly's default output (a bare ``application/vnd.plotly.v1+json``) with
a warning, and plotly's own HTML renderers either inline 3.5 MB of plotly.js per figure
or load it from a CDN. This renderer writes a ``<div>`` and a ``Plotly.newPlot`` call
against the ``window.Plotly`` that ``book_extension`` adds to every page with a figure
(``_static/vendor/plotly/plotly.min.js``), so the built book works offline.

Each figure comes inside a ``<figure>`` that a screen reader can read: its name and
a description generated from its data (``transformer_edu.viz.figure_text``), and one
native control per plotly slider (``<input type="range">``) and menu (``<select>``),
named from the figure, which ``book/figure_controls.js`` lays over plotly's own
control and wires to it: every slider and menu of the book works from the keyboard.

No mode bar. Its eight buttons per figure were Tab stops before each figure's own
controls (a page with twelve figures: ~100 presses of Tab to pass them), what they do
is for a mouse (zoom, pan and select modes act on a drag; dragging zooms without the
mode bar, a double click resets), and one ("Share chart") sends the figure to a web
service, where the book promises to work offline.

Only the kernels that the book build starts use it: ``book_extension`` points their
``IPYTHONDIR`` at a profile whose startup file calls :func:`use`. Jupyter, Colab and
nbval keep the renderer plotly picks for their front end; the chapters never set one.
"""

from __future__ import annotations

import uuid
from html import escape

import plotly.io as pio
from plotly.io import base_renderers

from transformer_edu.viz.figure_text import ControlText, describe

NAME = "transformer_edu_book"
DEFAULT_HEIGHT = 450  # px, when a figure sets none
CONFIG = {"responsive": True, "displayModeBar": False}  # plotly.js's config


class BookRenderer(base_renderers.MimetypeRenderer):
    """HTML for the static book: draws with a ``window.Plotly`` the page already has."""

    def to_mimebundle(self, fig_dict: dict) -> dict[str, str]:
        return {"text/html": render(fig_dict, str(uuid.uuid4()))}


def render(fig_dict: dict, div_id: str) -> str:
    """The ``<figure>`` of one plotly figure (the Japanese edition renders each figure
    again from its translated dict, book/editions.py)."""
    height = fig_dict.get("layout", {}).get("height") or DEFAULT_HEIGHT
    plot = pio.to_html(
        fig_dict,
        include_plotlyjs=False,  # the page loads _static/vendor/plotly/plotly.min.js
        include_mathjax=False,
        full_html=False,
        auto_play=False,  # a figure with frames waits for its slider
        default_width="100%",
        default_height=f"{height}px",
        config=CONFIG,
        validate=False,
        div_id=div_id,
    )
    return figure_html(fig_dict, plot, div_id)


def _control_html(c: ControlText) -> str:
    """The native control for one plotly slider or menu (figure_controls.js wires it)."""
    common = (
        f'class="tedu-control" data-kind="{c.kind}" data-index="{c.index}" '
        f'aria-label="{escape(c.name)}"'
    )
    if c.kind == "slider":
        now = c.options[c.active] if c.active < len(c.options) else ""
        return (
            f'<input type="range" {common} min="0" max="{len(c.options) - 1}" '
            f'step="1" value="{c.active}" '
            f'aria-valuetext="{escape(c.prefix + now)}">'
        )
    options = "".join(
        f'<option value="{j}"{" selected" if j == c.active else ""}>'
        f"{escape(label)}</option>"
        for j, label in enumerate(c.options)
    )
    return f"<select {common}>{options}</select>"


def figure_html(fig_dict: dict, plot: str, div_id: str) -> str:
    """``plot`` (plotly's div and script) in a named, described ``<figure>`` with a
    native control for each slider and menu (menus first: plotly draws them on top)."""
    text = describe(fig_dict)
    controls = sorted(text.controls, key=lambda c: c.kind != "menu")
    return (
        f'<figure class="tedu-figure" aria-label="{escape(text.name)}" '
        f'aria-describedby="{div_id}-text">'
        f'<p id="{div_id}-text" class="tedu-sr-only">{escape(text.description)}</p>'
        f"{plot}{''.join(_control_html(c) for c in controls)}</figure>"
    )


def use() -> None:
    """Register the renderer and make it plotly's default in this process."""
    pio.renderers[NAME] = BookRenderer()
    pio.renderers.default = NAME
