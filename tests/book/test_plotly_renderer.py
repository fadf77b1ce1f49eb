"""book/plotly_renderer.py: the renderer of the book build's kernels."""

import numpy as np
import plotly.io as pio
import plotly_renderer  # book/ is on pytest's pythonpath

from transformer_edu import viz


def test_book_renderer_gives_html_that_needs_no_plotly_download():
    bundle = plotly_renderer.BookRenderer().to_mimebundle(
        viz.heatmap(np.eye(2)).to_dict()
    )
    html = bundle["text/html"]
    assert "Plotly.newPlot" in html and 'class="plotly-graph-div"' in html
    assert "<script src=" not in html and "cdn" not in html.lower()
    assert "require(" not in html


def test_the_build_kernels_profile_makes_it_the_default(tmp_path):
    import os
    import subprocess
    import sys

    import book_extension

    ipython_dir = book_extension.kernel_profile(tmp_path)
    startup = next((ipython_dir / "profile_default" / "startup").glob("*.py"))
    code = (
        "import runpy, plotly.io as pio; "
        f"runpy.run_path({str(startup)!r}); "
        "print(pio.renderers.default)"
    )
    env = {**os.environ, "IPYTHONDIR": str(ipython_dir)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == plotly_renderer.NAME
    assert pio.renderers.default != plotly_renderer.NAME  # this process untouched


def test_each_figure_comes_named_described_with_a_native_control_per_slider_and_menu():
    import plotly.graph_objects as go

    fig = viz.explorer(
        go.Figure(layout={"title": "Bars & more"}),
        lambda a, b: [go.Bar(x=[0, 1], y=[a, b])],
        viz.Control("a = ", [1, 2, 3], start=1),
        viz.Control("b", [4, 5], kind="dropdown"),
    )
    html = plotly_renderer.BookRenderer().to_mimebundle(fig.to_dict())["text/html"]
    div_id = html.split('class="plotly-graph-div"')[0].rsplit('id="', 1)[1][:-2]
    assert html.startswith(
        f'<figure class="tedu-figure" aria-label="Bars &amp; more" '
        f'aria-describedby="{div_id}-text"><p id="{div_id}-text" class="tedu-sr-only">'
    )
    assert "slider a: 3 steps, 1 … 3, now 2" in html  # the description
    menu = html.index('<select class="tedu-control" data-kind="menu" data-index="0" ')
    slider = html.index(
        '<input type="range" class="tedu-control" data-kind="slider" '
        'data-index="0" aria-label="a" min="0" max="2" step="1" value="1" '
        'aria-valuetext="a = 2">'
    )
    assert menu < slider  # in the order plotly draws them: menus on top
    assert '<option value="0" selected>4</option><option value="1">5</option>' in html
    assert html.endswith("</figure>")
    assert '"displayModeBar":false' in html.replace(" ", "")
