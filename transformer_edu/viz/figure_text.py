"""Text alternatives of figures, generated from the figures' own data.

A reader who cannot see a figure gets, from the same data that draws it:

- a *name*: the title, or the kinds of marks when there is none;
- a *description*: what is drawn (a heatmap's shape, axes and value range, how many
  lines and over which ranges, bars, text in the figure) and what its controls pick;
- for each slider and menu of a plotly figure, a name and its choices (the book puts
  an HTML control with that name over plotly's own, ``book/figure_controls.js``).

``describe(fig)`` takes a plotly figure (or its dict); ``describe_mpl(fig)`` a
matplotlib figure. Every word the reader gets is in ``TEXT``, one place to translate.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Every user-visible string: the Japanese edition translates these.
TEXT = {
    "figure": "Figure",  # the name of a plotly figure with no title and no trace
    "kind_lines": "line chart",  # a figure with no title: named by its first kind
    "kind_points": "scatter plot",
    "kind_bar": "bar chart",
    "kind_heatmap": "heatmap",
    "table": "table, {rows} rows × {cols} columns: {columns}",
    "chart": "Chart",  # the name of a matplotlib figure with no title
    "heatmap": "heatmap, {rows} × {cols}",
    "rows": "rows: {rows}",
    "cols": "columns: {cols}",
    "values": "values {lo} to {hi}",
    "lines": "{n} lines",
    "line": "1 line",
    "points": "{n} sets of points",
    "point_set": "1 set of points",
    "bars": "{n} bar series",
    "bar": "bars",
    "other": "{kind}",
    "named": "{what} ({names})",
    "x_range": "x: {title}{lo} to {hi}",
    "y_range": "y: {title}{lo} to {hi}",
    "axis_title": "{title}, ",
    "panels": "{n} panels",
    "text": "text in the figure: {texts}",
    "slider": "{name}: {n} steps, {first} … {last}, now {now}",
    "menu": "{name}: {options}, now {now}",
    "slider_named": "slider {name}",  # a slider's name in the description
    "menu_named": "menu {name}",  # a menu's name in the description
    "slider_name": "slider {k}",  # a slider that has no name of its own
    "menu_name": "menu {k}",  # a menu that has no name of its own
    "attention_menu": "attention",  # viz.attention_heatmaps' menu
    "image": "image, {rows} × {cols}",
    "more": "…",
    "sep": "; ",  # between the parts of a description
    "list_sep": ", ",  # between the items of a list
    "end": ".",
}


@contextmanager
def texts(table: Mapping[str, str]) -> Iterator[None]:
    """Describe in another language while inside: ``table`` maps keys of ``TEXT`` to
    their translations (the Japanese edition's, from its figures catalogue)."""
    saved = dict(TEXT)
    TEXT.update({k: v for k, v in table.items() if k in TEXT and v})
    try:
        yield
    finally:
        TEXT.clear()
        TEXT.update(saved)


MAX_LISTED = 6  # items listed by name before "…" (trace names, menu entries, texts)
_TAG = re.compile(r"<[^>]+>")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_DTYPES = {"f4": "<f4", "f8": "<f8", "i1": "i1", "u1": "u1", "i2": "<i2"}
_DTYPES |= {"u2": "<u2", "i4": "<i4", "u4": "<u4"}


@dataclass
class ControlText:
    """One slider or menu of a plotly figure, as a reader hears it."""

    kind: str  # "slider" or "menu"
    index: int  # its place in layout.sliders or layout.updatemenus
    name: str  # its accessible name
    options: list[str]  # the label of each step or entry
    active: int  # the step or entry the figure opens with
    prefix: str = ""  # a slider's "currentvalue" prefix ("d_k = ")
    named: bool = True  # False: the figure gave none, ``name`` is "slider 2"


@dataclass
class FigureText:
    """A figure's name, its description and its controls."""

    name: str
    description: str
    controls: list[ControlText] = field(default_factory=list)


def plain(text: Any) -> str:
    """Plotly's HTML-ish label text as plain text: tags dropped, entities decoded."""
    if text is None:
        return ""
    text = _BREAK.sub("; ", str(text))
    return " ".join(html.unescape(_TAG.sub("", text)).split())


def _number(v: float) -> str:
    if not np.isfinite(v):
        return str(v)
    return f"{0.0 if abs(v) < 1e-12 else v:.3g}"  # no "-1.7e-18" for a zero


def _array(values: Any) -> np.ndarray | None:
    """Plotly data (a list, a numpy array, or plotly's base64 typed array) as floats;
    None when it is not numbers (category labels, say)."""
    if values is None:
        return None
    if isinstance(values, Mapping) and "bdata" in values:
        flat = np.frombuffer(
            base64.b64decode(values["bdata"]), _DTYPES[values["dtype"]]
        )
        shape = values.get("shape")
        if shape:
            flat = flat.reshape([int(s) for s in str(shape).split(",")])
        return flat.astype(float)
    try:
        arr = np.array(values, dtype=float)
    except (TypeError, ValueError):
        return None
    return arr if arr.size else None


def _range(arr: np.ndarray | None) -> tuple[str, str] | None:
    if arr is None or not np.isfinite(arr).any():
        return None
    return _number(float(np.nanmin(arr))), _number(float(np.nanmax(arr)))


def _listed(items: Sequence[str]) -> str:
    items = [i for i in items if i]
    shown = list(items[:MAX_LISTED]) + (
        [TEXT["more"]] if len(items) > MAX_LISTED else []
    )
    return TEXT["list_sep"].join(shown)


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _title(spec: Any) -> str:
    """A layout's or an axis's title, whether a string or ``{"text": ...}``."""
    if isinstance(spec, Mapping):
        return plain(spec.get("text"))
    return plain(spec)


def _shown(items: Sequence[Any] | None) -> list[tuple[int, Mapping[str, Any]]]:
    return [(i, x) for i, x in enumerate(items or ()) if x.get("visible") is not False]


def _kind(trace: Mapping[str, Any]) -> str:
    kind = trace.get("type") or "scatter"
    if kind in ("scatter", "scattergl"):
        mode = trace.get("mode") or "lines+markers"
        if "lines" in mode:
            return "lines"
        return "points" if "markers" in mode else "text"
    return kind


def _axis_name(trace: Mapping[str, Any], axis: str) -> str:
    """The layout key of a trace's x or y axis: "xaxis", "yaxis2", ..."""
    return f"{axis}axis" + (trace.get(f"{axis}axis") or axis)[1:]


def _axis_parts(
    layout: Mapping[str, Any], traces: list[Mapping[str, Any]]
) -> list[str]:
    """x and y ranges of the line, point and bar traces, axis by axis, with the
    axes' titles (not for hidden axes: a diagram's)."""
    parts = []
    for axis, key in (("x", "x_range"), ("y", "y_range")):
        by_axis: dict[str, list[np.ndarray]] = {}
        for t in traces:
            values = _array(t.get(axis))
            if values is not None:
                by_axis.setdefault(_axis_name(t, axis), []).append(values.ravel())
        for name, values in sorted(by_axis.items()):
            span = _range(np.concatenate(values))
            if not span or _get(layout, name, "visible") is False:
                continue
            title = _title(_get(layout, name, "title"))
            title = TEXT["axis_title"].format(title=title) if title else ""
            parts.append(TEXT[key].format(title=title, lo=span[0], hi=span[1]))
    return parts


def _axis_labels(layout: Mapping[str, Any], name: str) -> str:
    """An axis's title, else its tick labels (a heatmap's tokens)."""
    title = _title(_get(layout, name, "title"))
    ticks = _get(layout, name, "ticktext")
    if title or not isinstance(ticks, Sequence) or isinstance(ticks, str):
        return title
    return _listed([plain(t) for t in ticks])


def _heatmap_parts(
    layout: Mapping[str, Any], traces: list[Mapping[str, Any]]
) -> list[str]:
    parts = []
    for t in traces[:MAX_LISTED]:
        z = _array(t.get("z"))
        if z is None or z.ndim != 2:
            continue
        part = [TEXT["heatmap"].format(rows=z.shape[0], cols=z.shape[1])]
        if rows := _axis_labels(layout, _axis_name(t, "y")):
            part.append(TEXT["rows"].format(rows=rows))
        if cols := _axis_labels(layout, _axis_name(t, "x")):
            part.append(TEXT["cols"].format(cols=cols))
        if span := _range(z):
            part.append(TEXT["values"].format(lo=span[0], hi=span[1]))
        parts.append(TEXT["list_sep"].join(part))
    if len(traces) > MAX_LISTED:
        parts.append(TEXT["more"])
    return parts


def _table_parts(traces: list[Mapping[str, Any]]) -> list[str]:
    parts = []
    for t in traces:
        columns = [plain(c) for c in _get(t, "header", "values") or ()]
        cells = _get(t, "cells", "values") or [[]]
        rows = len(cells[0]) if cells and isinstance(cells[0], Sequence) else 0
        parts.append(
            TEXT["table"].format(rows=rows, cols=len(columns), columns=_listed(columns))
        )
    return parts


def _marks(kind: str, traces: list[Mapping[str, Any]]) -> str:
    n = len(traces)
    if kind == "lines":
        what = TEXT["line"] if n == 1 else TEXT["lines"].format(n=n)
    elif kind == "points":
        what = TEXT["point_set"] if n == 1 else TEXT["points"].format(n=n)
    elif kind == "bar":
        what = TEXT["bar"] if n == 1 else TEXT["bars"].format(n=n)
    else:
        what = TEXT["other"].format(kind=kind)
    names = _listed([plain(t.get("name")) for t in traces])
    return TEXT["named"].format(what=what, names=names) if names else what


def _controls(layout: Mapping[str, Any]) -> list[ControlText]:
    controls = []
    for k, (i, slider) in enumerate(_shown(layout.get("sliders"))):
        steps = [s for _, s in _shown(slider.get("steps"))]
        prefix = html.unescape(
            _TAG.sub("", _get(slider, "currentvalue", "prefix") or "")
        )
        name = (plain(slider.get("name")) or plain(prefix)).rstrip(" =:")
        controls.append(
            ControlText(
                "slider",
                i,
                name or TEXT["slider_name"].format(k=k + 1),
                [plain(s.get("label")) for s in steps],
                int(slider.get("active") or 0),
                prefix,
                bool(name),
            )
        )
    for k, (i, menu) in enumerate(_shown(layout.get("updatemenus"))):
        buttons = [b for _, b in _shown(menu.get("buttons"))]
        name = plain(menu.get("name")).rstrip(" =:")
        controls.append(
            ControlText(
                "menu",
                i,
                name or TEXT["menu_name"].format(k=k + 1),
                [plain(b.get("label")) for b in buttons],
                int(menu.get("active") or 0),
                named=bool(name),
            )
        )
    return controls


def _control_part(c: ControlText) -> str:
    now = c.options[c.active] if 0 <= c.active < len(c.options) else ""
    name = TEXT[f"{c.kind}_named"].format(name=c.name) if c.named else c.name
    if c.kind == "slider":
        return TEXT["slider"].format(
            name=name, n=len(c.options), first=c.options[0], last=c.options[-1], now=now
        )
    return TEXT["menu"].format(name=name, options=_listed(c.options), now=now)


def describe(fig: Any) -> FigureText:
    """The name, description and controls of a plotly figure (or its dict)."""
    spec = fig.to_plotly_json() if hasattr(fig, "to_plotly_json") else fig
    layout = spec.get("layout") or {}
    traces = [t for t in spec.get("data") or () if t.get("visible", True) is True]
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for t in traces:
        if _kind(t) != "text" and t.get("hoverinfo") != "skip":
            by_kind.setdefault(_kind(t), []).append(t)
    heatmaps = by_kind.pop("heatmap", [])
    parts = _heatmap_parts(layout, heatmaps) + _table_parts(by_kind.pop("table", []))
    xy = [t for kind in ("lines", "points", "bar") for t in by_kind.get(kind, [])]
    parts += [_marks(kind, ts) for kind, ts in by_kind.items()]
    parts += _axis_parts(layout, xy)
    axes = {k for k in layout if re.fullmatch(r"xaxis\d*", k)}
    axes |= {"xaxis" + (t.get("xaxis") or "x")[1:] for t in traces}
    if len(axes) > 1:
        parts.insert(0, TEXT["panels"].format(n=len(axes)))
    texts = [plain(a.get("text")) for a in layout.get("annotations") or ()]
    if texts := [t for t in dict.fromkeys(texts) if t]:
        parts.append(TEXT["text"].format(texts=_listed(texts)))
    controls = _controls(layout)
    parts += [_control_part(c) for c in controls]
    kinds = (["heatmap"] if heatmaps else []) + list(by_kind)
    name = _title(layout.get("title")) or _fallback_name(kinds)
    return FigureText(name, TEXT["sep"].join(parts) + TEXT["end"], controls)


def _fallback_name(kinds: list[str]) -> str:
    if not kinds:
        return TEXT["figure"]
    kind = TEXT.get(f"kind_{kinds[0]}") or TEXT["other"].format(kind=kinds[0])
    return f"{TEXT['figure']}: {kind}"


def _mpl_panel(ax: Any) -> list[str]:
    """Title, images, lines and bars of one matplotlib Axes, and their ranges."""
    parts = [ax.get_title()] if ax.get_title() else []
    for image in ax.get_images():
        data = np.asarray(image.get_array(), dtype=float)
        part = TEXT["heatmap"].format(rows=data.shape[0], cols=data.shape[1])
        rows = _listed([t.get_text() for t in ax.get_yticklabels()])
        cols = _listed([t.get_text() for t in ax.get_xticklabels()])
        if rows:
            part += TEXT["list_sep"] + TEXT["rows"].format(rows=rows)
        if cols:
            part += TEXT["list_sep"] + TEXT["cols"].format(cols=cols)
        if span := _range(data):
            part += TEXT["list_sep"] + TEXT["values"].format(lo=span[0], hi=span[1])
        parts.append(part)
    lines = ax.get_lines()
    if lines:
        parts.append(_marks("lines", [{"name": _mpl_label(ln)} for ln in lines]))
    if ax.containers:
        parts.append(_marks("bar", [{"name": _mpl_label(c)} for c in ax.containers]))
    # x and y of what is drawn in data units (an axvline's y is not)
    xs = [np.asarray(ln.get_xdata(), float) for ln in lines]
    ys = [np.asarray(ln.get_ydata(), float) for ln in lines]
    data_lines = [ln.get_transform() == ax.transData for ln in lines]
    xs = [x for x, keep in zip(xs, data_lines, strict=True) if keep]
    ys = [y for y, keep in zip(ys, data_lines, strict=True) if keep]
    for bar in (b for c in ax.containers for b in c):
        xs.append(np.array([bar.get_x(), bar.get_x() + bar.get_width()]))
        ys.append(np.array([bar.get_y(), bar.get_y() + bar.get_height()]))
    for axis, key, values in (("x", "x_range", xs), ("y", "y_range", ys)):
        label = getattr(ax, f"get_{axis}label")()
        title = TEXT["axis_title"].format(title=label) if label else ""
        if values and (span := _range(np.concatenate(values))):
            parts.append(TEXT[key].format(title=title, lo=span[0], hi=span[1]))
    return parts


def _mpl_label(artist: Any) -> str:
    label = artist.get_label() or ""
    if label.startswith("_") and getattr(artist, "patches", None):  # a histogram
        label = artist.patches[0].get_label() or ""
    return "" if label.startswith("_") else label  # "_child0": matplotlib's own


def describe_mpl(fig: Any) -> str:
    """The alt text of a matplotlib figure: each panel's title, marks and axes."""
    axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    panels = [TEXT["list_sep"].join(_mpl_panel(ax)) for ax in axes]
    if len(axes) > 1:
        panels.insert(0, TEXT["panels"].format(n=len(axes)))
    suptitle = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    name = suptitle or (axes[0].get_title() if len(axes) == 1 else "") or TEXT["chart"]
    if len(axes) == 1 and name == axes[0].get_title():
        panels = [TEXT["list_sep"].join(_mpl_panel(axes[0])[1:])]
    return f"{name}: {TEXT['sep'].join(p for p in panels if p)}{TEXT['end']}"
