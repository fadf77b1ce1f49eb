"""Plotly figures with any number of controls that work without a kernel.

``controls.explorer`` combines two controls (frames × visibility); ``control_grid``
takes any number: it precomputes one frame per combination of its ``controls`` (sliders,
buttons or a dropdown) and lets each frame re-point every control at its neighbours,
so that moving one control keeps the others where they are. ``views`` are buttons or
dropdowns that only switch which traces are visible; they combine with the frames
without multiplying them. Everything runs in plotly.js: the same figure works in
Jupyter, Colab and the static book.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

KINDS = ("slider", "buttons", "dropdown")
SLIDER_PX = 75  # height of one slider with its current value
MENU_PX = 40  # height of one row of buttons
# what a control step does: show that frame now, with no transition
ANIMATE = {
    "mode": "immediate",
    "frame": {"duration": 0},  # redraw: true, the default
    "transition": {"duration": 0},
}


@dataclass(frozen=True)
class GridControl:
    """One control: its name, the label of each choice, and the choice shown first."""

    name: str  # "warm-up" (a slider shows "warm-up: 100")
    labels: Sequence[str]  # one per choice
    default: int = 0  # index of the choice the figure opens with
    kind: str = "slider"  # "slider", "buttons" or "dropdown"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} is not one of {KINDS}")
        if not self.labels:
            raise ValueError(f"control {self.name!r} has no choices")
        if not 0 <= self.default < len(self.labels):
            raise ValueError(
                f"control {self.name!r}: default={self.default} is not in "
                f"0..{len(self.labels) - 1}"
            )


def frame_name(index: Sequence[int]) -> str:
    """The name of the frame for one choice per control, e.g. ``"3-0-1"``."""
    return "-".join(str(i) for i in index)


def control_grid(
    fig: go.Figure,
    controls: Sequence[GridControl],
    draw: Callable[..., dict[str, Any]],
    *,
    views: Sequence[GridControl] = (),
    visible: Callable[..., Sequence[bool]] | None = None,
) -> go.Figure:
    """Make ``fig`` explorable: one frame per combination of the ``controls``.

    ``draw(i, j, ...)`` (one choice index per control) returns ``{"data": [...],
    "layout": {...}}`` and optionally ``"traces"`` (which traces ``data`` updates;
    all of them by default). ``visible(a, b, ...)`` (one index per view) says which
    traces show. Returns ``fig``, drawn at the defaults, with its frames and controls.
    """
    if not controls:
        raise ValueError("control_grid needs at least one control")
    if views and visible is None:
        raise ValueError("views need visible(...) to say which traces they show")
    if any(v.kind == "slider" for v in views):
        raise ValueError("a view is buttons or a dropdown, not a slider")
    n_traces = len(fig.data)
    sizes = [len(c.labels) for c in controls]
    sliders = [c for c in controls if c.kind == "slider"]
    menus = [c for c in controls if c.kind != "slider"]

    def bindings(index: tuple[int, ...]) -> dict[str, list[dict[str, Any]]]:
        # every control's steps point at the frames that change only that control
        def steps(k: int) -> list[dict[str, Any]]:
            return [
                {
                    "label": label,
                    "method": "animate",
                    "args": [[frame_name((*index[:k], j, *index[k + 1 :]))], ANIMATE],
                }
                for j, label in enumerate(controls[k].labels)
            ]

        bound: dict[str, list[dict[str, Any]]] = {"sliders": [], "updatemenus": []}
        for k, c in enumerate(controls):
            if c.kind == "slider":
                bound["sliders"].append({"active": index[k], "steps": steps(k)})
            else:
                bound["updatemenus"].append({"active": index[k], "buttons": steps(k)})
        return bound

    frames = []
    for index in itertools.product(*(range(n) for n in sizes)):
        content = draw(*index)
        data = list(content["data"])
        traces = list(content.get("traces", range(len(data))))
        if len(traces) != len(data) or any(not 0 <= t < n_traces for t in traces):
            raise ValueError(f"draw{index}: traces {traces} do not fit {len(data)}")
        layout = dict(content.get("layout", {}))
        if len(controls) > 1:  # one control's steps never change
            layout.update({k: v for k, v in bindings(index).items() if v})
        frames.append(
            go.Frame(name=frame_name(index), data=data, traces=traces, layout=layout)
        )
    fig.frames = frames

    # open at the defaults: the default frame's data and layout
    default = tuple(c.default for c in controls)
    start = fig.frames[_flat(default, sizes)]
    for t, trace in zip(start.traces, start.data, strict=True):
        fig.data[t].update(trace.to_plotly_json())
    fig.update_layout(
        {k: v for k, v in start.layout.to_plotly_json().items() if k not in _BOUND}
    )

    rows = len(menus) + len(views)
    menus_px = MENU_PX * rows + (18 if rows else 0)  # rows, and room for subplot titles
    margin = fig.layout.margin
    top = (margin.t if margin.t is not None else 60) + menus_px
    bottom = (margin.b if margin.b is not None else 50) + SLIDER_PX * len(sliders)
    height = (fig.layout.height or 450) + menus_px + SLIDER_PX * len(sliders)
    plot_px = height - top - bottom
    bound = bindings(default)
    fig.update_layout(
        title={"yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 12}},
        height=height,
        margin={"t": top, "b": bottom},
        sliders=[
            {
                **b,
                "name": c.name,  # the keyboard control's name (figure_text)
                "currentvalue": {"prefix": f"{c.name}: "},
                "x": 0,
                "len": 1,
                "y": -((bottom - SLIDER_PX * (len(sliders) - k)) / plot_px),
                "yanchor": "top",
                "pad": {"t": 10, "b": 10},
            }
            for k, (c, b) in enumerate(zip(sliders, bound["sliders"], strict=True))
        ],
        updatemenus=[
            _menu(c, b, row, rows, plot_px)
            for row, (c, b) in enumerate(zip(menus, bound["updatemenus"], strict=True))
        ]
        + _views(views, visible, n_traces, len(menus), plot_px),
    )
    if views:
        shown = list(visible(*(v.default for v in views)))
        for trace, on in zip(fig.data, shown, strict=True):
            trace.visible = bool(on)
    return fig


_BOUND = ("sliders", "updatemenus")


def _flat(index: tuple[int, ...], sizes: list[int]) -> int:
    flat = 0
    for i, n in zip(index, sizes, strict=True):
        flat = flat * n + i
    return flat


def _menu(
    c: GridControl, bound: dict[str, Any], row: int, rows: int, plot_px: int
) -> dict[str, Any]:
    # row 0 is the top row, right under the title
    return {
        **bound,
        "name": c.name,  # the keyboard control's name (figure_text)
        "type": c.kind,
        "direction": "right" if c.kind == "buttons" else "down",
        "showactive": True,
        "x": 0,
        "xanchor": "left",
        "y": 1 + (28 + MENU_PX * (rows - 1 - row)) / plot_px,  # above subplot titles
        "yanchor": "bottom",
        "pad": {"r": 4, "t": 0, "b": 0},
    }


def _views(
    views: Sequence[GridControl],
    visible: Callable[..., Sequence[bool]] | None,
    n_traces: int,
    first: int,
    plot_px: int,
) -> list[dict[str, Any]]:
    """Menus that switch visible traces; with two, each re-points the other's buttons.

    Button i of view A shows (i, b) for the b of view B's current choice: B's buttons
    keep A's buttons' ``visible`` up to date (and A's keep B's), one level deep.
    """
    if not views:
        return []
    if len(views) > 2:
        raise ValueError(f"at most two views, got {len(views)}")
    assert visible is not None

    def shown(index: tuple[int, ...]) -> list[bool]:
        flags = [bool(v) for v in visible(*index)]
        if len(flags) != n_traces:
            raise ValueError(f"visible{index} gives {len(flags)} flags, not {n_traces}")
        return flags

    default = tuple(v.default for v in views)
    menus = []
    for k, view in enumerate(views):
        buttons = []
        for j, label in enumerate(view.labels):
            now = (*default[:k], j, *default[k + 1 :])
            rebind = {}
            for m, other in enumerate(views):
                if m == k:
                    continue
                for i in range(len(other.labels)):
                    then = (*now[:m], i, *now[m + 1 :])
                    path = f"updatemenus[{first + m}].buttons[{i}].args[0].visible"
                    rebind[path] = shown(then)
            buttons.append(
                {
                    "label": label,
                    "method": "update",
                    "args": [{"visible": shown(now)}, rebind],
                }
            )
        bound = {"active": view.default, "buttons": buttons}
        menus.append(_menu(view, bound, first + k, first + len(views), plot_px))
    return menus
