import re
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import plotly.io as pio
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from transformer_edu import viz  # noqa: E402

TOKENS = ["私", "は", "太郎", "です"]


def test_heatmap_puts_token_labels_on_positions_and_row_zero_on_top():
    z = np.arange(12.0).reshape(3, 4)
    fig = viz.heatmap(z, x=TOKENS, y=["I", "am", "I"], title="t")
    assert list(fig.layout.xaxis.ticktext) == TOKENS
    # a repeated token keeps its own row (a categorical axis would merge them)
    assert list(fig.layout.yaxis.ticktext) == ["I", "am", "I"]
    assert list(fig.data[0].y) == [0, 1, 2]
    assert fig.layout.yaxis.autorange == "reversed"
    np.testing.assert_array_equal(fig.data[0].z, z)
    assert fig.data[0].texttemplate is None
    assert viz.heatmap(z, annotate=True).data[0].texttemplate == "%{z:.2f}"


def test_heatmap_rejects_labels_of_the_wrong_length():
    with pytest.raises(ValueError, match="x has 3 labels for 4"):
        viz.heatmap(np.zeros((2, 4)), x=["a", "b", "c"])


def test_heatmap_slider_has_one_frame_and_step_per_matrix_on_one_scale():
    mats = [np.full((4, 4), k, dtype=float) for k in range(5)]
    fig = viz.heatmap_slider(mats, TOKENS, TOKENS, [f"k={k}" for k in range(5)])
    assert [f.name for f in fig.frames] == [f"k={k}" for k in range(5)]
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == [f"k={k}" for k in range(5)]
    assert all(s.method == "animate" and list(s.args[0]) == [s.label] for s in steps)
    assert {(f.data[0].zmin, f.data[0].zmax) for f in fig.frames} == {(0.0, 4.0)}


def test_heatmap_slider_needs_frames_of_one_shape():
    with pytest.raises(ValueError, match="one shape"):
        viz.heatmap_slider([np.zeros((2, 2)), np.zeros((3, 2))])


def test_lines_slider_fixes_the_y_range_over_all_frames():
    x = np.linspace(0, 1, 5)
    frames = [np.stack([x * k, -x * k]) for k in (1, 2, 3)]
    fig = viz.lines_slider(x, frames, ["a", "b", "c"], names=["up", "down"])
    assert len(fig.frames) == 3 and len(fig.layout.sliders[0].steps) == 3
    assert [t.name for t in fig.data] == ["up", "down"]
    lo, hi = fig.layout.yaxis.range
    assert lo < -3 and hi > 3


def test_attention_heatmaps_one_panel_per_head_and_a_dropdown_entry_per_layer():
    rng = np.random.default_rng(0)
    weights = {
        "encoder self": rng.random((2, 3, 4, 4)),  # (L, H, S, S)
        "cross": [rng.random((3, 2, 4))],  # one layer (H, T, S)
    }
    fig = viz.attention_heatmaps(
        weights, TOKENS, {"encoder self": TOKENS, "cross": ["I", "am"]}
    )
    assert len(fig.data) == 2 * 3 + 1 * 3
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == [
        "encoder self · layer 1",
        "encoder self · layer 2",
        "cross",
    ]
    assert sum(buttons[2].args[0]["visible"]) == 3
    assert buttons[2].args[1]["yaxis2.ticktext"] == ["I", "am"]
    assert sum(t.visible for t in fig.data) == 3  # only the first entry shows


def test_to_numpy_takes_tensors():
    torch = pytest.importorskip("torch")
    t = torch.ones(2, 3, requires_grad=True)
    assert viz.to_numpy(t * 2).tolist() == [[2.0] * 3] * 2


def test_importing_viz_changes_no_default():
    import subprocess
    import sys

    code = (
        "import plotly.io as pio, matplotlib as mpl; "
        "t, r, f = pio.templates.default, pio.renderers.default, "
        "mpl.rcParams['font.family']; "
        "from transformer_edu import viz; "
        "assert (t, r, f) == (pio.templates.default, pio.renderers.default, "
        "mpl.rcParams['font.family']); "
        "viz.setup(); assert pio.templates.default.endswith(viz.TEMPLATE); "
        "assert pio.renderers.default == r"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_template_puts_the_cjk_font_in_plotly_figures():
    viz.setup()
    assert pio.templates.default.endswith(viz.TEMPLATE)
    fig = viz.heatmap(np.eye(2))
    assert "IPAexGothic" in fig.layout.template.layout.font.family


def test_matplotlib_draws_japanese_with_ipaexgothic_and_no_missing_glyphs():
    from matplotlib import font_manager

    viz.setup()
    path = font_manager.findfont(font_manager.FontProperties(family="IPAexGothic"))
    assert path.endswith("ipaexg.ttf")
    fig, ax = plt.subplots()
    viz.mpl_heatmap(ax, np.eye(4), TOKENS, TOKENS, title="注意の重み −1", annotate=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" would raise
        fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    plt.close(fig)


def test_attention_heatmaps_is_tall_enough_for_its_open_dropdown():
    weights = {f"bug {i}": np.full((1, 2, 4, 4), 0.25) for i in range(12)}
    fig = viz.attention_heatmaps(weights, x_tokens=list("abcd"), y_tokens=list("abcd"))
    entries = len(fig.layout.updatemenus[0].buttons)
    assert entries == 12
    assert fig.layout.height >= fig.layout.margin.t + 34 * entries


# --- the architecture figure --------------------------------------------------------

CHAPTER_FILES = {
    p.stem for p in (Path(__file__).resolve().parents[2] / "chapters").glob("*")
}
HREF = re.compile(r'<a href="([^"]+)"')


def _hover_targets(fig):
    return [t for t in fig.data if t.hoverinfo == "text"]


def test_architecture_figure_has_one_hover_target_per_block_with_its_shapes():
    fig = viz.architecture_figure(d_model=512, n_heads=8, d_ff=2048, n_layers=6)
    targets = _hover_targets(fig)
    names = [t.name for t in targets]
    assert len(names) == len(set(names)) == 22
    for part in (
        "Source tokens",
        "Input embedding",
        "Positional encoding (source)",
        "Encoder stack: 6 layers",
        "Multi-head self-attention",
        "Add & Norm (encoder, after self-attention)",
        "Feed-forward (encoder)",
        "Add & Norm (encoder, after the FFN)",
        "Memory (the encoder's output)",
        "Target tokens",
        "Output embedding",
        "Positional encoding (target)",
        "Decoder stack: 6 layers",
        "Masked multi-head self-attention",
        "Add & Norm (decoder, after masked self-attention)",
        "Multi-head cross-attention",
        "Add & Norm (decoder, after cross-attention)",
        "Feed-forward (decoder)",
        "Add & Norm (decoder, after the FFN)",
        "Linear (generator)",
        "Softmax",
        "Predicted next tokens",
    ):
        assert part in names, f"no hover target for {part}"
    for t in targets:  # every label names a tensor shape (B = 1 first)
        assert "(1, " in t.text, f"{t.name}: no shape in {t.text!r}"
    text = {t.name: t.text for t in targets}
    assert "(1, 4, 512) → (1, 4, 512)" in text["Multi-head self-attention"]
    assert "weights (1, 8, 4, 4)" in text["Multi-head self-attention"]
    assert "weights (1, 8, 3, 3)" in text["Masked multi-head self-attention"]
    assert "weights (1, 8, 3, 4)" in text["Multi-head cross-attention"]
    assert "(1, 4, 512) → (1, 4, 2048)" in text["Feed-forward (encoder)"]
    assert "(1, 3, 512) → (1, 3, 2048)" in text["Feed-forward (decoder)"]
    assert "memory (1, 4, 512)" in text["Multi-head cross-attention"]
    # a block's hover target covers it: a filled, invisible rectangle
    assert all(t.fill == "toself" and t.hoveron == "fills" for t in targets)


def test_architecture_figure_marks_the_masked_self_attention_as_causal():
    fig = viz.architecture_figure()
    masked = [
        a for a in fig.layout.annotations if a.text and "Masked multi-head" in a.text
    ]
    assert len(masked) == 1 and "causal" in masked[0].text
    dashed = [s for s in fig.layout.shapes if s.line.dash == "dash"]
    assert len(dashed) == 1  # only the masked block has the dashed red border
    # the mask beside it: T x T cells, the lower triangle (j <= i) filled
    red = [s for s in fig.layout.shapes if s.fillcolor == dashed[0].line.color]
    assert len(red) == 3 * 4 // 2


@pytest.mark.parametrize("prefix", ["", "chapters/"])
def test_architecture_figure_links_point_at_existing_chapters(prefix):
    fig = viz.architecture_figure(link_prefix=prefix)
    hrefs = [h for a in fig.layout.annotations for h in HREF.findall(a.text or "")]
    assert len(hrefs) >= 15  # every block's name, the titles and the N× brackets
    for href in hrefs:
        assert href.startswith(prefix) and href.endswith(".html"), href
        stem = href.removeprefix(prefix).removesuffix(".html")
        assert "/" not in stem and stem in CHAPTER_FILES, f"{href}: no such chapter"
    linked = {h.removeprefix(prefix)[:2] for h in hrefs}
    assert linked == {"02", "03", "04", "05", "06", "07", "08", "10"}
    assert set(viz.CHAPTER_PAGES.values()) <= CHAPTER_FILES


def test_architecture_figure_shapes_follow_its_arguments():
    def text(fig, name):
        return next(t.text for t in _hover_targets(fig) if t.name == name)

    small = viz.architecture_figure(d_model=32, n_heads=4, d_ff=64, n_layers=2)
    assert "(1, 4, 32) → (1, 4, 32)" in text(small, "Multi-head self-attention")
    assert "weights (1, 4, 4, 4)" in text(small, "Multi-head self-attention")
    assert "(1, 3, 64)" in text(small, "Feed-forward (decoder)")
    assert "2 identical layers" in text(small, "Encoder stack: 2 layers")
    longer = viz.architecture_figure(
        d_model=32,
        n_heads=2,
        d_ff=64,
        n_layers=2,
        src_tokens=["花子", "は", "学生", "です", "。"],
        tgt_tokens=["⟨bos⟩", "Hanako", "is", "a"],
        out_tokens=["Hanako", "is", "a", "student"],
        vocab_size=196,
    )
    assert "weights (1, 2, 5, 5)" in text(longer, "Multi-head self-attention")
    assert "weights (1, 2, 4, 5)" in text(longer, "Multi-head cross-attention")
    assert "(1, 4, 196)" in text(longer, "Linear (generator)")
    assert "S = 5" in longer.layout.annotations[-1].text
    with pytest.raises(ValueError, match="not divisible"):
        viz.architecture_figure(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="one token per position"):
        viz.architecture_figure(out_tokens=["I"])


def test_architecture_figure_draws_japanese_in_the_book_font():
    viz.setup()
    fig = viz.architecture_figure()
    assert "IPAexGothic" in fig.layout.template.layout.font.family
    texts = " ".join(a.text or "" for a in fig.layout.annotations)
    assert all(tok in texts for tok in ("私", "太郎", "です", "⟨bos⟩", "Taro"))


def _two_controls():
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    base = make_subplots(rows=1, cols=2)

    def make(a, b):
        return [
            (go.Bar(x=[0, 1], y=[a, b]), 1, 1),
            (go.Scatter(x=[0], y=[0], mode="text", text=[f"{a}/{b}"]), 1, 2),
        ]

    first = viz.Control("a = ", [1, 2, 3], start=1)
    second = viz.Control("b", [10, 20], ["ten", "twenty"], kind="dropdown")
    return viz.explorer(
        base,
        make,
        first,
        second,
        frame_layout=lambda a: {"title": {"text": f"a is {a}"}},
    )


def test_explorer_frames_hold_every_state_and_the_menu_picks_visible_groups():
    fig = _two_controls()
    assert [f.name for f in fig.frames] == ["1", "2", "3"]
    # each frame holds both groups of the second control, and never sets `visible`
    assert all(len(f.data) == 4 for f in fig.frames)
    assert all(t.visible is None for f in fig.frames for t in f.data)
    assert [t.visible for t in fig.data] == [True, True, False, False]
    assert fig.data[1].xaxis == "x2"  # (trace, row, col) lands on its subplot
    # it opens at the start states: a = 2 (the slider's start), b = 10
    assert list(fig.data[0].y) == [2, 10] and fig.layout.title.text == "a is 2"
    assert fig.layout.sliders[0].active == 1
    menu = fig.layout.updatemenus[0]
    assert [b.label for b in menu.buttons] == ["ten", "twenty"]
    assert [b.method for b in menu.buttons] == ["restyle", "restyle"]
    assert menu.buttons[1].args[0]["visible"] == [False, False, True, True]
    state = viz.state_traces(fig, "3", 1)
    assert list(state[0].y) == [3, 20] and state[1].text == ("3/20",)
    assert fig.frames[2].layout.title.text == "a is 3"


def test_explorer_rejects_states_that_draw_different_traces():
    import plotly.graph_objects as go

    def make(a, b):
        return [go.Bar(y=[a])] if b else [go.Scatter(y=[a])]

    with pytest.raises(ValueError, match="gives traces"):
        viz.explorer(
            go.Figure(), make, viz.Control("a", [1, 2]), viz.Control("b", [0, 1])
        )
    with pytest.raises(ValueError, match="labels must be unique"):
        viz.Control("a", [1, 2], ["x", "x"])


# --- explorer: several controls, one frame per combination -----------------------


def _explorer_figure():
    import plotly.graph_objects as go

    fig = go.Figure([go.Scatter(x=[0, 1]), go.Scatter(x=[0, 1]), go.Scatter(x=[0, 1])])

    def draw(a, b):
        return {
            "data": [go.Scatter(y=[a, b]), go.Scatter(y=[-a, -b])],
            "traces": [0, 1],
            "layout": {"title": {"text": f"a={a} b={b}"}},
        }

    return viz.control_grid(
        fig,
        [
            viz.GridControl("a", ["0", "1", "2"], default=1),
            viz.GridControl("b", ["x", "y"]),
        ],
        draw,
        views=[
            viz.GridControl("first", ["on", "off"], kind="buttons"),
            viz.GridControl("second", ["p", "q"], kind="dropdown"),
        ],
        visible=lambda i, j: [i == 0, True, j == 1],
    )


def test_explorer_has_a_frame_per_combination_and_opens_at_the_defaults():
    fig = _explorer_figure()
    assert [f.name for f in fig.frames] == ["0-0", "0-1", "1-0", "1-1", "2-0", "2-1"]
    assert list(fig.data[0].y) == [1, 0] and fig.layout.title.text == "a=1 b=0"
    assert [s.active for s in fig.layout.sliders] == [1, 0]
    assert [t.visible for t in fig.data] == [True, True, False]


def test_explorer_frames_point_each_control_at_its_neighbours():
    fig = _explorer_figure()
    frame = next(f for f in fig.frames if f.name == "2-1")
    a, b = frame.layout.sliders  # the slider for a keeps b = 1, and b keeps a = 2
    assert [s.args[0][0] for s in a.steps] == ["0-1", "1-1", "2-1"]
    assert [s.args[0][0] for s in b.steps] == ["2-0", "2-1"]
    assert (a.active, b.active) == (2, 1)
    assert all(s.method == "animate" for s in a.steps + b.steps)


def test_explorer_views_keep_each_others_buttons_up_to_date():
    fig = _explorer_figure()
    first, second = fig.layout.updatemenus
    assert first.type == "buttons" and second.type == "dropdown"
    off = first.buttons[1].args  # "off" shows (1, j) for the j the dropdown shows
    assert list(off[0]["visible"]) == [False, True, False]
    assert list(off[1]["updatemenus[1].buttons[1].args[0].visible"]) == [
        False,
        True,
        True,
    ]
    q = second.buttons[1].args
    assert list(q[1]["updatemenus[0].buttons[0].args[0].visible"]) == [True, True, True]


def test_explorer_rejects_bad_controls():
    import plotly.graph_objects as go

    with pytest.raises(ValueError, match="default=3"):
        viz.GridControl("a", ["x", "y"], default=3)
    with pytest.raises(ValueError, match="kind='knob'"):
        viz.GridControl("a", ["x"], kind="knob")
    with pytest.raises(ValueError, match="at least one control"):
        viz.control_grid(go.Figure(), [], lambda: {})
    with pytest.raises(ValueError, match="visible"):
        viz.control_grid(
            go.Figure(go.Scatter()),
            [viz.GridControl("a", ["x"])],
            lambda i: {"data": []},
            views=[viz.GridControl("v", ["p"], kind="buttons")],
        )
