"""Figures with two controls whose choices combine, all states precomputed.

Plotly runs sliders and menus in the browser, so a figure built here works the same
in Jupyter, Colab and the static book, with no kernel. One control alone can pick a
frame (``viz.heatmap_slider``); two controls cannot both pick frames, since a step
names one frame and does not know where the other control stands. So the two
controls act on different things:

- the *first* control animates frames: frame ``a`` holds the traces of every state
  ``(a, b)``;
- the *second* control restyles ``visible``: it shows the traces of its state ``b``
  and hides the others (a frame never sets ``visible``, so it keeps that choice).

``make(a, b)`` draws one state. What changes with the second control must be a trace
(a text trace for a caption): the layout can change only with the first control
(``frame_layout``), since a menu's layout update would not know the frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

__all__ = ["Control", "explorer", "state_traces"]


@dataclass
class Control:
    """One control of an :func:`explorer` figure."""

    name: str  # shown before the current value ("d_k = ") or as the menu's title
    values: Sequence[Any]  # the choices, passed to make()
    labels: Sequence[str] | None = None  # shown for each choice; str(value) if None
    kind: str = "slider"  # "slider", "dropdown" or "buttons"
    start: int = 0  # the index of the choice the figure opens with

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"control {self.name!r} has no values")
        if self.kind not in ("slider", "dropdown", "buttons"):
            raise ValueError(f"control {self.name!r}: unknown kind {self.kind!r}")
        labels = [str(v) for v in self.values] if self.labels is None else self.labels
        self.labels = [str(label) for label in labels]
        if len(self.labels) != len(self.values):
            raise ValueError(
                f"control {self.name!r} has {len(self.labels)} labels for "
                f"{len(self.values)} values"
            )
        if not 0 <= self.start < len(self.values):
            raise ValueError(f"control {self.name!r}: start={self.start} out of range")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"control {self.name!r}: labels must be unique")


def _placed(base: go.Figure, items: Sequence[Any]) -> list[Any]:
    """The traces of one state, each bound to its subplot's axes."""
    out = []
    for item in items:
        trace, row, col = item if isinstance(item, tuple) else (item, None, None)
        if row is not None:
            sub = base.get_subplot(row, col)
            trace.update(
                xaxis=sub.xaxis.plotly_name.replace("axis", ""),
                yaxis=sub.yaxis.plotly_name.replace("axis", ""),
            )
        out.append(trace)
    return out


def _step(label: str, method: str, args: list[Any]) -> dict[str, Any]:
    return {"label": label, "method": method, "args": args}


def _animate(label: str) -> dict[str, Any]:
    opts = {
        "mode": "immediate",
        "frame": {"duration": 0, "redraw": True},
        "transition": {"duration": 0},
    }
    return _step(label, "animate", [[label], opts])


def _widget(control: Control, steps: list[dict[str, Any]], index: int, n_sliders: int):
    """A slider or an updatemenu for ``steps``; returns (kind, spec)."""
    if control.kind == "slider":
        return "slider", {
            "name": control.name,  # the keyboard control's name (figure_text)
            "active": control.start,
            "steps": steps,
            "currentvalue": {"prefix": control.name},
            "pad": {"t": 40 + 85 * n_sliders},
        }
    menu = {
        "name": control.name,  # the keyboard control's name (figure_text)
        "buttons": steps,
        "active": control.start,
        "type": "dropdown" if control.kind == "dropdown" else "buttons",
        "direction": "down" if control.kind == "dropdown" else "right",
        "x": 0.0 if index == 0 else 0.5,
        "xanchor": "left",
        "y": 1.0,
        "yanchor": "bottom",
        "pad": {"b": 30},
        "showactive": True,
    }
    return "menu", menu


def explorer(
    base: go.Figure,
    make: Callable[[Any, Any], Sequence[Any]],
    first: Control,
    second: Control | None = None,
    *,
    frame_layout: Callable[[Any], dict[str, Any]] | None = None,
) -> go.Figure:
    """``base`` (layout, subplots) with the traces of every state and two controls.

    ``make(a, b)`` returns the traces of state (a, b), each a trace or
    ``(trace, row, col)``; every state must give the same number and kinds of
    traces. ``frame_layout(a)`` is the layout that goes with the first control.
    """
    seconds = list(second.values) if second else [None]
    states = {
        (i, j): _placed(base, make(a, b))
        for i, a in enumerate(first.values)
        for j, b in enumerate(seconds)
    }
    shape = [type(t).__name__ for t in states[0, 0]]
    for (i, j), traces in states.items():
        if [type(t).__name__ for t in traces] != shape:
            raise ValueError(
                f"state ({first.labels[i]}, {j}) gives traces "
                f"{[type(t).__name__ for t in traces]}, state 0 gives {shape}"
            )
    fig = go.Figure(base)
    per = len(shape)
    a0, b0 = first.start, second.start if second else 0
    for j in range(len(seconds)):
        for trace in states[a0, j]:
            fig.add_trace(trace)
            fig.data[-1].visible = j == b0
    fig.frames = [
        go.Frame(
            name=label,
            data=[t for j in range(len(seconds)) for t in states[i, j]],
            layout=frame_layout(first.values[i]) if frame_layout else None,
        )
        for i, label in enumerate(first.labels)
    ]
    if frame_layout:
        fig.update_layout(frame_layout(first.values[a0]))
    sliders = list(fig.layout.sliders or [])
    menus = list(fig.layout.updatemenus or [])
    controls = [(first, [_animate(label) for label in first.labels])]
    if second:
        n = len(fig.data)
        visible = [
            [k // per == j for k in range(n)] for j in range(len(seconds))
        ]  # state j shows its own traces
        controls.append(
            (
                second,
                [
                    _step(label, "restyle", [{"visible": vis}])
                    for label, vis in zip(second.labels, visible, strict=True)
                ],
            )
        )
    for index, (control, steps) in enumerate(controls):
        kind, spec = _widget(control, steps, index, len(sliders))
        (sliders if kind == "slider" else menus).append(spec)
        if kind == "menu" and control.name:
            fig.add_annotation(
                text=control.name,
                x=spec["x"],
                xref="paper",
                xanchor="right" if spec["x"] == 0 else "left",
                y=1.0,
                yref="paper",
                yanchor="bottom",
                yshift=36,
                showarrow=False,
            )
    fig.update_layout(sliders=sliders, updatemenus=menus)
    if sliders and fig.layout.margin.b is None:  # room below the plot for them
        fig.update_layout(margin_b=40 + 85 * len(sliders))
    return fig


def state_traces(fig: go.Figure, a_label: str, b_index: int = 0) -> list[Any]:
    """The traces that state (a, b) shows: for asserts on what a figure encodes."""
    frame = next(f for f in fig.frames if f.name == a_label)
    per = len(frame.data) // sum(1 for _ in _groups(fig))
    return list(frame.data[b_index * per : (b_index + 1) * per])


def _groups(fig: go.Figure):
    """One entry per state of the second control (the visibility groups)."""
    for menu in fig.layout.updatemenus or ():
        if menu.buttons and menu.buttons[0].method == "restyle":
            return range(len(menu.buttons))
    for slider in fig.layout.sliders or ():
        if slider.steps and slider.steps[0].method == "restyle":
            return range(len(slider.steps))
    return range(1)
