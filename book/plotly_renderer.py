"""The book build's plotly renderer: HTML that draws with the plotly.js the book serves.

myst-nb drops plotly's default output (a bare ``application/vnd.plotly.v1+json``) with
a warning, and plotly's own HTML renderers either inline 3.5 MB of plotly.js per figure
or load it from a CDN. This renderer writes a ``<div>`` and a ``Plotly.newPlot`` call
against the ``window.Plotly`` that ``book_extension`` adds to every page with a figure
(``_static/vendor/plotly/plotly.min.js``), so the built book works offline.

Only the kernels that the book build starts use it: ``book_extension`` points their
``IPYTHONDIR`` at a profile whose startup file calls :func:`use`. Jupyter, Colab and
nbval keep the renderer plotly picks for their front end; the chapters never set one.
"""

from __future__ import annotations

import plotly.io as pio
from plotly.io import base_renderers

NAME = "transformer_edu_book"
DEFAULT_HEIGHT = 450  # px, when a figure sets none


class BookRenderer(base_renderers.MimetypeRenderer):
    """HTML for the static book: draws with a ``window.Plotly`` the page already has."""

    def to_mimebundle(self, fig_dict: dict) -> dict[str, str]:
        height = fig_dict.get("layout", {}).get("height") or DEFAULT_HEIGHT
        html = pio.to_html(
            fig_dict,
            include_plotlyjs=False,  # the page loads _static/vendor/plotly/plotly.min.js
            include_mathjax=False,
            full_html=False,
            auto_play=False,  # a figure with frames waits for its slider
            default_width="100%",
            default_height=f"{height}px",
            config={"responsive": True, "displaylogo": False},
            validate=False,
        )
        return {"text/html": html}


def use() -> None:
    """Register the renderer and make it plotly's default in this process."""
    pio.renderers[NAME] = BookRenderer()
    pio.renderers.default = NAME
