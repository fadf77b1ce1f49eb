"""Plotting helpers every chapter uses: plotly figures that stay interactive in the
static book, and matplotlib with a font that has Japanese glyphs.

A notebook calls ``viz.setup()`` once, after its imports (d2l's ``use_svg_display()``
works the same way): it sets plotly's default template and matplotlib's font. Importing
this module changes nothing.

- Plotly: build a figure with a helper below (or ``go.Figure``) and make it the
  cell's last expression, or call ``viz.show(fig)`` / ``fig.show()``. Plotly keeps the
  renderer it picks for the front end (JupyterLab, Notebook 7, VS Code, Colab); the
  book build sets its own (``book/plotly_renderer.py``), outside this package.
- Sliders and dropdowns are plotly frames and ``updatemenus``: they run in the
  browser, so they work in the static HTML without a kernel. Two controls whose
  choices combine: ``explorer`` (``controls.py``) precomputes every state.
- Japanese text: the plotly template ``"transformer_edu"`` puts IPAexGothic in the
  font stack (the book ships that font with an ``@font-face``); matplotlib uses
  IPAexGothic from the ``matplotlib-fontja`` package.
- Text alternatives (``figure_text``): in IPython, ``setup()`` also has each
  matplotlib figure shown as an ``<img>`` whose alt text is generated from the figure
  (its panels' titles, axes, lines and images); the book writes a plotly figure's
  name and description from its data (``book/plotly_renderer.py``).
- Live recomputation: matplotlib inside ``ipywidgets.interact`` (``mpl_heatmap``
  helps) moves only with a kernel, so the book shows its first picture: say so beside
  it, and prefer precomputed states where the choices are finite.
- Not in the book: a plotly figure inside a widget's output or ``go.FigureWidget``
  (the static page cannot draw them), ``plotly.express`` (needs pandas, which is not
  installed), or setting ``plotly.io.renderers.default`` in a chapter.
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from .control_grid import GridControl, control_grid
from .controls import Control, explorer, state_traces
from .diagram import CHAPTER_PAGES, architecture_figure
from .figure_text import TEXT, describe_mpl

TEMPLATE = "transformer_edu"
CJK_FONT = "IPAexGothic"
# IPAexGothic (the book ships it) first: its @font-face covers only Japanese, so it
# draws the Japanese and leaves Latin to the next fonts; further back, Chromium drew
# Japanese with a Latin font's empty boxes in bold text.
FONT_FAMILY = (
    'IPAexGothic, "Open Sans", verdana, arial, "Hiragino Sans", "Yu Gothic", '
    '"Noto Sans CJK JP", sans-serif'
)

__all__ = [
    "CHAPTER_PAGES",
    "Control",
    "FONT_FAMILY",
    "TEMPLATE",
    "architecture_figure",
    "attention_heatmaps",
    "GridControl",
    "control_grid",
    "explorer",
    "heatmap",
    "heatmap_slider",
    "lines_slider",
    "mpl_heatmap",
    "mpl_html",
    "setup",
    "show",
    "state_traces",
    "to_numpy",
]


def setup() -> None:
    """Make the book's plotly template the default; give matplotlib a CJK font.

    Call it once at the top of a notebook; calling it again is harmless.
    """
    pio.templates[TEMPLATE] = go.layout.Template(
        layout={
            "font": {"family": FONT_FAMILY},
            "hoverlabel": {"font": {"family": FONT_FAMILY}},
            "margin": {"l": 60, "r": 20, "t": 60, "b": 50},
        }
    )
    pio.templates.default = f"plotly_white+{TEMPLATE}"
    _setup_matplotlib()
    _show_matplotlib_with_alt_text()


def _setup_matplotlib() -> None:
    import matplotlib as mpl

    try:
        import matplotlib_fontja  # noqa: F401  (registers IPAexGothic on import)
    except ImportError:
        warnings.warn(
            "matplotlib-fontja is not installed, so Japanese text in matplotlib "
            "figures shows as boxes: pip install matplotlib-fontja",
            stacklevel=3,
        )
        return
    # DejaVu Sans after IPAexGothic fills the few glyphs IPAexGothic lacks.
    mpl.rcParams["font.family"] = [CJK_FONT, "DejaVu Sans"]


def _show_matplotlib_with_alt_text() -> None:
    """In IPython, show matplotlib figures as HTML ``<img>`` with generated alt text.

    Front ends (Jupyter, Colab, myst-nb, a widget's output) prefer text/html to the
    image/png that matplotlib's inline backend also sends, and keep the alt text.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    # the mime-bundle formatter: matplotlib's inline backend, when it starts, clears
    # every per-type formatter registered for Figure (IPython's select_figure_formats)
    bundle = shell.display_formatter.mimebundle_formatter
    bundle.for_type_by_name(
        "matplotlib.figure", "Figure", lambda fig: {"text/html": mpl_html(fig)}
    )


def mpl_html(fig: Any) -> str:
    """A matplotlib figure as an ``<img>`` (PNG inline) with its generated alt text."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    alt = escape(describe_mpl(fig), quote=True)
    return f'<img src="data:image/png;base64,{data}" alt="{alt}">'


def show(fig: go.Figure) -> None:
    """Display ``fig`` with plotly's current renderer (same as ``fig.show()``)."""
    fig.show()


def to_numpy(values: Any) -> np.ndarray:
    """A float array from a tensor (any device, with grad or not), array or list."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().float().numpy()
    return np.asarray(values, dtype=float)


def _labels(labels: Sequence[Any] | None, n: int, axis: str) -> list[str]:
    if labels is None:
        return [str(i) for i in range(n)]
    labels = [str(label) for label in labels]
    if len(labels) != n:
        raise ValueError(f"{axis} has {len(labels)} labels for {n} columns/rows")
    return labels


def _token_axis(labels: list[str], title: str | None) -> dict[str, Any]:
    # Positions, not categories: a sentence may repeat a token ("the ... the"), and a
    # categorical axis would merge the two columns into one.
    return {
        "tickmode": "array",
        "tickvals": list(range(len(labels))),
        "ticktext": labels,
        "title": {"text": title} if title else None,
        "showgrid": False,
    }


def _heatmap_trace(
    z: np.ndarray,
    x: list[str],
    y: list[str],
    colorscale: str,
    zmin: float | None,
    zmax: float | None,
    **kwargs: Any,
) -> go.Heatmap:
    hover = np.array([[f"{yi} → {xj}" for xj in x] for yi in y])
    return go.Heatmap(
        z=z,
        x=list(range(len(x))),
        y=list(range(len(y))),
        customdata=hover,
        hovertemplate="%{customdata}<br>%{z:.3f}<extra></extra>",
        colorscale=colorscale,
        zmin=zmin,
        zmax=zmax,
        **kwargs,
    )


def heatmap(
    z: Any,
    x: Sequence[Any] | None = None,
    y: Sequence[Any] | None = None,
    *,
    title: str | None = None,
    colorscale: str = "Blues",
    zmin: float | None = None,
    zmax: float | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    height: int | None = None,
    annotate: bool = False,
) -> go.Figure:
    """A heatmap of a 2-D matrix, row 0 at the top (attention: rows = queries, y).

    Shape: z (len(y), len(x)); x and y label the columns and rows (tokens welcome).
    ``annotate`` writes each value in its cell.
    """
    z = to_numpy(z)
    if z.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {tuple(z.shape)}")
    xs, ys = _labels(x, z.shape[1], "x"), _labels(y, z.shape[0], "y")
    text = {"texttemplate": "%{z:.2f}"} if annotate else {}
    fig = go.Figure(_heatmap_trace(z, xs, ys, colorscale, zmin, zmax, **text))
    fig.update_layout(
        title=title,
        xaxis=_token_axis(xs, xlabel),
        yaxis={**_token_axis(ys, ylabel), "autorange": "reversed"},
        height=height or _square_height(len(ys)),
    )
    return fig


def _square_height(rows: int) -> int:
    return int(min(700, max(320, 140 + 40 * rows)))


def _slider(labels: list[str], prefix: str) -> dict[str, Any]:
    steps = [
        {
            "label": label,
            "method": "animate",
            "args": [
                [label],
                {
                    "mode": "immediate",
                    "frame": {"duration": 0, "redraw": True},
                    "transition": {"duration": 0},
                },
            ],
        }
        for label in labels
    ]
    return {
        "active": 0,
        "steps": steps,
        "currentvalue": {"prefix": prefix},
        "pad": {"t": 40},
    }


def heatmap_slider(
    frames: Sequence[Any],
    x: Sequence[Any] | None = None,
    y: Sequence[Any] | None = None,
    slider_labels: Sequence[Any] | None = None,
    *,
    title: str | None = None,
    colorscale: str = "Blues",
    zmin: float | None = None,
    zmax: float | None = None,
    slider_prefix: str = "",
    xlabel: str | None = None,
    ylabel: str | None = None,
    height: int | None = None,
    annotate: bool = False,
) -> go.Figure:
    """Heatmaps of several matrices of one shape, a slider picking which is shown.

    The colour scale is shared (the min and max over all frames unless given), so
    colours compare across slider positions. Shape: each frame (len(y), len(x)).
    """
    mats = [to_numpy(f) for f in frames]
    if not mats:
        raise ValueError("heatmap_slider needs at least one frame")
    shape = mats[0].shape
    if len(shape) != 2 or any(m.shape != shape for m in mats):
        shapes = sorted({tuple(m.shape) for m in mats})
        raise ValueError(f"heatmap_slider needs 2-D frames of one shape, got {shapes}")
    labels = _labels(slider_labels, len(mats), "slider_labels")
    if len(set(labels)) != len(labels):
        raise ValueError(f"slider_labels must be unique (frame names): {labels}")
    xs, ys = _labels(x, shape[1], "x"), _labels(y, shape[0], "y")
    zmin = float(min(m.min() for m in mats)) if zmin is None else zmin
    zmax = float(max(m.max() for m in mats)) if zmax is None else zmax
    text = {"texttemplate": "%{z:.2f}"} if annotate else {}
    traces = [_heatmap_trace(m, xs, ys, colorscale, zmin, zmax, **text) for m in mats]
    fig = go.Figure(
        data=[traces[0]],
        frames=[
            go.Frame(data=[t], name=n) for t, n in zip(traces, labels, strict=True)
        ],
    )
    fig.update_layout(
        title=title,
        xaxis=_token_axis(xs, xlabel),
        yaxis={**_token_axis(ys, ylabel), "autorange": "reversed"},
        sliders=[_slider(labels, slider_prefix)],
        height=height or _square_height(len(ys)) + 80,
    )
    return fig


def lines_slider(
    x: Sequence[float],
    frames: Sequence[Any],
    slider_labels: Sequence[Any] | None = None,
    *,
    names: Sequence[str] | None = None,
    title: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    slider_prefix: str = "",
    height: int = 450,
) -> go.Figure:
    """Line plots that change with a slider: frame k draws its rows against ``x``.

    Shape: each frame (n_lines, len(x)) (a 1-D frame is one line). The y range is
    fixed over all frames so that moving the slider shows the change.
    """
    mats = [np.atleast_2d(to_numpy(f)) for f in frames]
    if not mats:
        raise ValueError("lines_slider needs at least one frame")
    xs = to_numpy(x)
    n_lines = mats[0].shape[0]
    for k, m in enumerate(mats):
        if m.shape != (n_lines, len(xs)):
            raise ValueError(
                f"frame {k} has shape {m.shape}, expected ({n_lines}, {len(xs)})"
            )
    labels = _labels(slider_labels, len(mats), "slider_labels")
    line_names = _labels(names, n_lines, "names")
    lo = float(min(np.nanmin(m) for m in mats))
    hi = float(max(np.nanmax(m) for m in mats))
    pad = 0.05 * (hi - lo or 1.0)

    def traces(m: np.ndarray) -> list[go.Scatter]:
        return [
            go.Scatter(x=xs, y=row, mode="lines", name=name)
            for row, name in zip(m, line_names, strict=True)
        ]

    fig = go.Figure(
        data=traces(mats[0]),
        frames=[
            go.Frame(data=traces(m), name=n) for m, n in zip(mats, labels, strict=True)
        ],
    )
    fig.update_layout(
        title=title,
        xaxis_title=xlabel,
        yaxis_title=ylabel,
        yaxis_range=[lo - pad, hi + pad],
        sliders=[_slider(labels, slider_prefix)],
        height=height,
    )
    return fig


def _as_layers(w: Any) -> np.ndarray:
    """(L, H, T, S) from (L, H, T, S), (H, T, S), (T, S) or a list of layers."""
    if isinstance(w, (list, tuple)):
        arr = np.stack([_as_heads(to_numpy(layer)) for layer in w])
    else:
        arr = to_numpy(w)
        while arr.ndim < 4:
            arr = arr[None]
    if arr.ndim != 4:
        raise ValueError(f"attention weights must be (L, H, T, S), got {arr.shape}")
    return arr


def _as_heads(a: np.ndarray) -> np.ndarray:
    if a.ndim == 4 and a.shape[0] == 1:  # a batch of one: (1, H, T, S)
        a = a[0]
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3:
        raise ValueError(f"one layer's weights must be (H, T, S), got {a.shape}")
    return a


def _pick(tokens: Any, name: str) -> Sequence[Any] | None:
    return tokens.get(name) if isinstance(tokens, Mapping) else tokens


def attention_heatmaps(
    weights: Mapping[str, Any],
    x_tokens: Sequence[Any] | Mapping[str, Sequence[Any]] | None = None,
    y_tokens: Sequence[Any] | Mapping[str, Sequence[Any]] | None = None,
    *,
    title: str | None = None,
    colorscale: str = "Blues",
    zmax: float | None = 1.0,
    height: int | None = None,
) -> go.Figure:
    """Attention maps, one panel per head, a dropdown picking the attention and layer.

    ``weights`` maps a name ("encoder self", "cross", ...) to weights of shape
    (L, H, T, S), (H, T, S) or (T, S), or a list of L arrays (H, T, S). Tokens label
    keys (x, S) and queries (y, T); pass a dict name -> tokens when they differ.
    """
    if not weights:
        raise ValueError("attention_heatmaps needs at least one entry in weights")
    blocks = {name: _as_layers(w) for name, w in weights.items()}
    n_heads = max(b.shape[1] for b in blocks.values())
    fig = _head_grid(n_heads)
    options = []  # (label, trace indices, axis labels)
    for name, block in blocks.items():
        n_layers, heads, t, s = block.shape
        xs = _labels(_pick(x_tokens, name), s, f"x_tokens[{name!r}]")
        ys = _labels(_pick(y_tokens, name), t, f"y_tokens[{name!r}]")
        for layer in range(n_layers):
            first = len(fig.data)
            for h in range(heads):
                trace = _heatmap_trace(block[layer, h], xs, ys, colorscale, 0.0, zmax)
                trace.update(showscale=(h == 0), visible=not options)
                fig.add_trace(trace, row=1, col=h + 1)
            label = name if n_layers == 1 else f"{name} · layer {layer + 1}"
            options.append((label, range(first, len(fig.data)), xs, ys))
    buttons = []
    for label, idx, xs, ys in options:
        visible = [i in idx for i in range(len(fig.data))]
        axes: dict[str, Any] = {}
        for h in range(n_heads):
            suffix = "" if h == 0 else str(h + 1)
            axes[f"xaxis{suffix}.ticktext"] = xs
            axes[f"xaxis{suffix}.tickvals"] = list(range(len(xs)))
            axes[f"yaxis{suffix}.ticktext"] = ys
            axes[f"yaxis{suffix}.tickvals"] = list(range(len(ys)))
        buttons.append(
            {"label": label, "method": "update", "args": [{"visible": visible}, axes]}
        )
    _, _, xs, ys = options[0]
    fig.update_xaxes(_token_axis(xs, None))
    fig.update_yaxes({**_token_axis(ys, None), "autorange": "reversed"})
    for h in range(1, n_heads):  # query labels once, on the left
        fig.update_yaxes(showticklabels=False, row=1, col=h + 1)
    fig.update_layout(
        title=title,
        # the dropdown sits between the title and the "head h" titles
        updatemenus=[
            {
                "name": TEXT["attention_menu"],  # the keyboard control's name
                "buttons": buttons,
                "active": 0,
                "x": 0,
                "xanchor": "left",
                "y": 1,
                "yanchor": "bottom",
                "pad": {"b": 30},
            }
        ],
        # tall enough for the heads and for the open dropdown (~34 px an entry),
        # whose lower entries would otherwise be cut off and unclickable
        height=height or max(230 + 40 * len(ys), 160 + 34 * len(buttons)),
        margin={"t": 140},
    )
    return fig


def _head_grid(n_heads: int) -> go.Figure:
    from plotly.subplots import make_subplots

    return make_subplots(
        rows=1,
        cols=n_heads,
        subplot_titles=[f"head {h + 1}" for h in range(n_heads)],
        horizontal_spacing=0.04,
    )


def mpl_heatmap(
    ax: Any,
    z: Any,
    x: Sequence[Any] | None = None,
    y: Sequence[Any] | None = None,
    *,
    title: str | None = None,
    cmap: str = "Blues",
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool = False,
) -> Any:
    """Draw a matrix on a matplotlib ``ax`` with token tick labels; returns the image.

    For figures redrawn inside ``ipywidgets.interact``. Shape: z (len(y), len(x)).
    """
    z = to_numpy(z)
    if z.ndim != 2:
        raise ValueError(f"mpl_heatmap needs a 2-D matrix, got shape {tuple(z.shape)}")
    xs, ys = _labels(x, z.shape[1], "x"), _labels(y, z.shape[0], "y")
    image = ax.imshow(z, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(xs)), xs)
    ax.set_yticks(range(len(ys)), ys)
    if title:
        ax.set_title(title)
    if annotate:
        mid = (np.nanmax(z) + np.nanmin(z)) / 2
        for i in range(z.shape[0]):
            for j in range(z.shape[1]):
                color = "white" if z[i, j] > mid else "black"
                ax.text(j, i, f"{z[i, j]:.2f}", ha="center", va="center", color=color)
    return image
