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
