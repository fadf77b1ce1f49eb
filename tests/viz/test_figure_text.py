"""figure_text: a figure's name, description and control names, from its data."""

from __future__ import annotations

import json

import matplotlib
import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from transformer_edu import viz
from transformer_edu.viz.figure_text import TEXT, describe, describe_mpl, plain

matplotlib.use("Agg")


def test_a_heatmap_slider_is_described_by_its_shape_axes_values_and_steps():
    frames = [np.full((2, 3), k, dtype=float) for k in (0.0, 0.5, 1.0)]
    fig = viz.heatmap_slider(
        frames,
        slider_labels=["3", "4", "5"],
        slider_prefix="T = ",
        title="Weights <b>per</b> step",
        xlabel="keys",
        ylabel="queries",
    )
    text = describe(fig)
    assert text.name == "Weights per step"
    assert text.description == (
        "heatmap, 2 × 3, rows: queries, columns: keys, values 0 to 0; "
        "slider T: 3 steps, 3 … 5, now 3."
    )
    (slider,) = text.controls
    assert (slider.kind, slider.name, slider.options, slider.prefix) == (
        "slider",
        "T",
        ["3", "4", "5"],
        "T = ",
    )


def test_the_description_reads_plotlys_base64_arrays_as_the_page_gets_them():
    fig = viz.heatmap(np.arange(6, dtype=float).reshape(2, 3))
    as_json = json.loads(pio.to_json(fig))
    assert set(as_json["data"][0]["z"]) >= {"bdata", "dtype"}  # numpy, as base64
    assert "heatmap, 2 × 3" in describe(as_json).description
    assert "values 0 to 5" in describe(as_json).description


def test_lines_bars_and_menus_are_counted_and_named():
    fig = viz.explorer(
        go.Figure(layout={"xaxis_title": "step", "yaxis_title": "loss"}),
        lambda a, b: [
            go.Scatter(x=[0, 1, 2], y=[a, b, 3], name="train"),
            go.Scatter(x=[0, 1, 2], y=[1, 1, 1], name="dev"),
        ],
        viz.Control("a", [1, 2, 3], kind="dropdown"),
        viz.Control("", [4, 5], kind="buttons"),
    )
    text = describe(fig)
    assert text.name == f"{TEXT['figure']}: line chart"
    assert "2 lines (train, dev)" in text.description
    assert "x: step, 0 to 2; y: loss, 1 to 4" in text.description
    assert "menu a: 1, 2, 3, now 1" in text.description
    assert "menu 2: 4, 5, now 4" in text.description  # unnamed: "menu 2"
    assert [c.name for c in text.controls] == ["a", "menu 2"]
    assert [c.named for c in text.controls] == [True, False]


def test_every_figure_of_viz_names_its_controls():
    w = np.random.default_rng(0).random((2, 2, 3, 3))
    fig = viz.attention_heatmaps(
        {"self": w, "cross": w[:1]}, ["私", "は", "猫"], ["I", "am", "cat"]
    )
    text = describe(fig)
    assert [c.name for c in text.controls] == [TEXT["attention_menu"]]
    assert "heatmap, 3 × 3, rows: I, am, cat, columns: 私, は, 猫" in text.description
    grid = viz.control_grid(
        go.Figure(go.Bar(x=[0], y=[0])),
        [viz.GridControl("warm-up", ["1", "2"]), viz.GridControl("ε", ["a", "b"])],
        lambda i, j: {"data": [go.Bar(x=[0], y=[i + j])]},
    )
    assert [c.name for c in describe(grid).controls] == ["warm-up", "ε"]


def test_long_lists_end_in_an_ellipsis_and_labels_lose_their_html():
    fig = go.Figure([go.Bar(x=[0], y=[k], name=f"s{k}") for k in range(9)])
    assert "9 bar series (s0, s1, s2, s3, s4, s5, …)" in describe(fig).description
    assert plain("a<br>b &amp; <i>c</i>") == "a; b & c"


@pytest.fixture
def plt():
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_a_matplotlib_figure_is_described_by_its_panels(plt):
    fig, (left, right) = plt.subplots(1, 2)
    left.plot([1, 10, 100], [30, 12, 8], label="BPE")
    left.set(title="tokens", xlabel="V", ylabel="tokens per sentence")
    viz.mpl_heatmap(right, np.eye(2), ["a", "b"], ["x", "y"], title="attention")
    assert describe_mpl(fig) == (
        "Chart: 2 panels; tokens, 1 line (BPE), x: V, 1 to 100, "
        "y: tokens per sentence, 8 to 30; attention, heatmap, 2 × 2, rows: x, y, "
        "columns: a, b, values 0 to 1."
    )


def test_mpl_html_is_an_image_with_the_generated_alt_text(plt):
    fig, ax = plt.subplots()
    ax.hist([0.1, 0.2, 0.2], bins=3, label="p")
    ax.set(title='a "quoted" title')
    html = viz.mpl_html(fig)
    assert html.startswith('<img src="data:image/png;base64,')
    assert html.endswith(
        'alt="a &quot;quoted&quot; title: bars (p), x: 0.1 to 0.2, y: 0 to 2.">'
    )


def test_tables_are_counted_and_hidden_axes_give_no_range():
    fig = go.Figure(
        go.Table(
            header={"values": ["a", "b"]}, cells={"values": [[1, 2, 3], [4, 5, 6]]}
        )
    )
    assert describe(fig).description == "table, 3 rows × 2 columns: a, b."
    lines = go.Figure(go.Scatter(x=[0, 9], y=[1, 2]), layout={"xaxis_visible": False})
    assert describe(lines).description == "1 line; y: 1 to 2."
    assert describe(lines).name == f"{TEXT['figure']}: {TEXT['kind_lines']}"
