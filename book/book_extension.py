"""The book's own Sphinx extension (``_config.yml`` loads it from ``book/``).

1. Offline assets. Every script and font the built book uses is served from its own
   ``_static/vendor/`` (a build output), copied there at the start of each build:

   - ``plotly/plotly.min.js``  from the plotly Python package (the version that wrote
     the figures); added to the pages that hold a plotly figure, before require.js;
   - ``mathjax/``              MathJax 3 (``es5/``: tex-chtml and its fonts), npm;
   - ``requirejs/require.js``  RequireJS, npm, which the ipywidgets manager needs;
   - ``html-manager/``         ``@jupyter-widgets/html-manager`` ``dist/`` (embed-amd.js
     and its Font Awesome files), npm;
   - ``fonts/ipaexg.ttf``      IPAexGothic from matplotlib-fontja (less the radicals'
                               code points: ``write_cjk_font``), used by
     ``_static/custom.css`` so Japanese renders on machines with no CJK font;
   - ``anywidget/index.js``    anywidget's front end, npm (an AMD module: the widget
     manager loads the module ``anywidget`` through RequireJS, configured below);
   - ``onnxruntime-web/``      its WASM build (the ES module, renamed ``.js`` so any
     server sends a JavaScript type, and the ``.wasm``), for the translator of ch. 10.

   The npm packages are pinned by ``book_assets/package.json`` and
   ``package-lock.json`` and installed with ``npm ci --prefix book_assets`` (``make
   book`` and ``make test`` do it). They are copied into the output rather than put on
   ``html_static_path``, because jupyter-book adds every ``.js`` file under a static
   path to every page.
2. Plotly output. The kernels the build starts get their own IPython profile (under
   ``_build/ipython``, via ``IPYTHONDIR``) whose startup file makes
   ``book/plotly_renderer.py`` plotly's renderer: HTML drawn with the plotly.js above.
   Nothing in ``transformer_edu`` knows about the book.
3. The translators' models. ``python -m transformer_edu export-onnx`` runs once the
   notebooks have run into ``_static/translator/`` (the toy model that chapter 9
   trained and chapter 10 shows) and, at the start of the build,
   ``export-onnx --corpus tatoeba`` into ``_static/tatoeba/`` (the shipped model, int8,
   with ``spm.js``; chapter 12), each skipped when its model and exporter are
   unchanged; only the page with that translator fetches it (chapter 12's on first
   use).
4. Cache key. jupyter-cache re-runs a notebook only when its code cells change. This
   empties the cache when ``transformer_edu/``, ``requirements.txt`` or the plotly
   renderer change, so a
   chapter never shows results from an older package.
5. Test runs only (``$TRANSFORMER_EDU_KERNEL_LOCK``, set by tests/conftest.py): each
   kernel start holds a file lock shared with the test run's own kernels.
6. Accessibility (tests/book/test_accessibility.py): ``book/figure_controls.js`` on every
   page with a plotly figure (a keyboard control over each slider and menu, see
   ``plotly_renderer``); a name for each ipywidgets slider (its label); myst-nb's
   "Show code cell source" toggles named by their visible text, and the bibliography
   a list of list items (both written here in place of myst-nb's and docutils' HTML).
7. The dark mode: ``book/figure_theme.js`` on every page with a plotly figure gives
   the figures the theme's colours in the dark mode and their own back in the light.

``python book/book_extension.py DEST`` copies the assets to DEST (for a look).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path

import editions  # book/ (this folder) is on sys.path: _config.yml's local_extensions
from lean_path import GOING_DEEPER

ROOT = Path(__file__).resolve().parent.parent
NODE_MODULES = ROOT / "book_assets" / "node_modules"
VENDOR = "vendor"  # under _static
PLOTLY_JS = f"{VENDOR}/plotly/plotly.min.js"
MATHJAX_JS = f"{VENDOR}/mathjax/tex-chtml.js"
REQUIRE_JS = f"{VENDOR}/requirejs/require.js"
EMBED_AMD_JS = f"{VENDOR}/html-manager/embed-amd.js"
CJK_FONT = f"{VENDOR}/fonts/ipaexg.ttf"
ANYWIDGET_JS = f"{VENDOR}/anywidget/index.js"
ORT_DIR = f"{VENDOR}/onnxruntime-web"
ORT_FILES = ("ort.wasm.bundle.min.js", "ort-wasm-simd-threaded.wasm")  # the runtime
TRANSLATOR_DIR = "translator"  # under _static: the exported ONNX graphs and JSON
TATOEBA_DIR = "tatoeba"  # under _static: the Tatoeba model's int8 graphs, spm, JSON
FIGURE_CONTROLS_JS = "figure_controls.js"  # under _static, from book/
FIGURE_THEME_JS = "figure_theme.js"  # the figures follow the light / dark mode
GOING_DEEPER_JS = "going_deeper.js"  # folds the going-deeper sections
# Before require.js (500): plotly.js bundles built as UMD (2.x) register themselves
# as an anonymous AMD module, not window.Plotly, when require.js is already there.
# plotly.js 4 always sets window.Plotly; loading it first is right for both.
PLOTLY_PRIORITY = 300
CACHE_KEY_FILE = "transformer_edu.sha256"
SAFE_FOR_PARALLEL_READ = ("sphinx_multitoc_numbering", "sphinx_jupyterbook_latex")
EDITION_ENV = "TRANSFORMER_EDU_EDITION"  # set by book/i18n.py for the Japanese build

# The ipywidgets HTML manager typesets widget labels through the MathJax 2 API
# (MathJax.Hub.Queue); the book loads MathJax 3. Map that one call. It is installed
# on DOMContentLoaded: after MathJax (deferred), before the widgets render (on load).
MATHJAX2_SHIM = """document.addEventListener("DOMContentLoaded", function () {
  var mj = window.MathJax;
  if (!mj || mj.Hub || !mj.startup) return;
  mj.Hub = {Queue: function (job) {
    var el = job && job[2];
    if (el) mj.startup.promise.then(function () { return mj.typesetPromise([el]); });
  }};
});"""


class MissingAssetError(RuntimeError):
    """A file the offline book needs is not installed."""


def sources() -> dict[str, Path]:
    """Where each vendored file or folder comes from, keyed by its place in _static."""
    import matplotlib_fontja
    import plotly

    plotly_dir = Path(plotly.__file__).parent
    widgets_dist = NODE_MODULES / "@jupyter-widgets" / "html-manager" / "dist"
    ort_dist = NODE_MODULES / "onnxruntime-web" / "dist"
    return {
        PLOTLY_JS: plotly_dir / "package_data" / "plotly.min.js",
        f"{VENDOR}/mathjax": NODE_MODULES / "mathjax" / "es5",
        REQUIRE_JS: NODE_MODULES / "requirejs" / "require.js",
        f"{VENDOR}/html-manager": widgets_dist,
        CJK_FONT: Path(matplotlib_fontja.get_font_ttf_path()),
        ANYWIDGET_JS: NODE_MODULES / "anywidget" / "dist" / "index.js",
        # the ES module with its WASM glue bundled in; nothing else of the 140 MB
        f"{ORT_DIR}/ort.wasm.bundle.min.js": ort_dist / "ort.wasm.bundle.min.mjs",
        f"{ORT_DIR}/ort-wasm-simd-threaded.wasm": ort_dist
        / "ort-wasm-simd-threaded.wasm",
    }


# CJK Radicals Supplement and Kangxi Radicals: IPAexGothic draws ⽬ (U+2F6C) and 目
# (U+76EE) with one glyph, and Chromium's PDF writer maps a glyph back to the lowest
# code point that has it, so a printed 目 copied or searched as ⽬ (make pdf)
RADICALS = (0x2E80, 0x2FDF)


def write_cjk_font(src: Path, dest: Path) -> None:
    """IPAexGothic without the radicals' entries in its character map (RADICALS): each
    of its glyphs then stands for the ideograph alone, in the page and in the printed
    PDF's text. No page of the book writes a radical (tests/book/test_pdf.py)."""
    from fontTools.ttLib import TTFont  # matplotlib's dependency

    font = TTFont(src)
    low, high = RADICALS
    for table in font["cmap"].tables:
        for code in [c for c in table.cmap if low <= c <= high]:
            del table.cmap[code]
    font.save(dest)


def copy_assets(static_dir: Path) -> list[Path]:
    """Copy every vendored asset under ``static_dir``; returns what was written."""
    missing = [str(src) for src in sources().values() if not src.exists()]
    if missing:
        raise MissingAssetError(
            "offline book assets missing: "
            + ", ".join(missing)
            + " (run `make book`, or `npm ci --prefix book_assets`)"
        )
    written = []
    for rel, src in sources().items():
        dest = static_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            ignore = shutil.ignore_patterns("*.map")
            shutil.copytree(src, dest, dirs_exist_ok=True, ignore=ignore)
        elif rel == CJK_FONT:
            if not dest.exists() or dest.stat().st_size == src.stat().st_size:
                write_cjk_font(src, dest)  # missing, or a plain copy of an older build
        elif not dest.exists() or dest.stat().st_size != src.stat().st_size:
            shutil.copy2(src, dest)
        written.append(dest)
    return written


def package_digest(root: Path = ROOT) -> str:
    """A hash of what the notebooks' results depend on besides their code cells."""
    files = sorted(
        p
        for p in (root / "transformer_edu").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    files.append(root / "requirements.txt")
    files.append(root / "book" / "plotly_renderer.py")  # how figures are written
    digest = hashlib.sha256()
    for path in files:
        if path.exists():
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def reset_stale_cache(cache: Path) -> None:
    """Empty the execution cache ``cache`` if the package changed since it was filled
    (the key file beside it holds ``package_digest`` of then), and make its database.
    The book build calls it at its start, and so does a test run before nbval fills
    the cache (tests/helpers/nbval_cache.py)."""
    key_file = cache.parent / CACHE_KEY_FILE
    digest = package_digest()
    if not (key_file.exists() and key_file.read_text().strip() == digest):
        if cache.exists():
            print(f"[book_extension] transformer_edu changed: emptying {cache}")
            shutil.rmtree(cache)
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(digest + "\n")
    # the cache's database made here, before Sphinx's parallel read: two readers that
    # both found none both created its tables, and the second failed ("table settings
    # already exists"), which failed `make book` after any change to the package
    from jupyter_cache.cache.db import create_db

    cache.mkdir(parents=True, exist_ok=True)
    create_db(cache).dispose()


def _reset_stale_cache(app, config) -> None:
    reset_stale_cache(Path(
        config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache"
    ))  # fmt: skip


def export_translator(static_dir: Path) -> Path:
    """Export the trained toy model for the page's translator; returns its folder.

    Skipped when a stamp says the same checkpoint and exporter made the files there.
    """
    import torch

    from transformer_edu.browser import onnx_export
    from transformer_edu.toy.checkpoint import default_checkpoint_path, toy_model

    out = static_dir / TRANSLATOR_DIR
    model, sv, tv = toy_model(progress=False)  # trains it first if missing
    digest = hashlib.sha256(torch.__version__.encode())
    for path in (default_checkpoint_path(), Path(onnx_export.__file__)):
        digest.update(path.read_bytes())
    stamp = out / ".stamp"
    names = (onnx_export.ENCODER_FILE, onnx_export.DECODER_FILE, onnx_export.META_FILE)
    fresh = stamp.exists() and stamp.read_text() == digest.hexdigest()
    if fresh and all((out / n).exists() for n in names):
        return out
    onnx_export.export_onnx(model.cpu(), sv, tv, out)
    stamp.write_text(digest.hexdigest())
    return out


def export_tatoeba_translator(static_dir: Path) -> Path:
    """Export the shipped Tatoeba model (int8) for chapter 12's translator, with
    spm.js beside it; the JSON gets the bytes the page fetches on first use (runtime
    included), raw and gzip-compressed, so the page can say so. Skipped when a stamp
    says the same model, tokenizer and exporter made the files there."""
    import gzip

    import torch

    import transformer_edu.browser as browser
    from transformer_edu.browser import onnx_export, spm_vocab
    from transformer_edu.tatoeba.checkpoint import shipped_model_path
    from transformer_edu.tatoeba.data import SPM_FILE, _corpus_bytes

    out = static_dir / TATOEBA_DIR
    spm_js = Path(browser.__file__).parent / "static" / "spm.js"
    digest = hashlib.sha256(torch.__version__.encode())
    for data in (shipped_model_path().read_bytes(), _corpus_bytes(SPM_FILE),
                 Path(onnx_export.__file__).read_bytes(),
                 Path(spm_vocab.__file__).read_bytes(), spm_js.read_bytes()):  # fmt: skip
        digest.update(data)
    stamp = out / ".stamp"
    if stamp.exists() and stamp.read_text() == digest.hexdigest():
        return out
    paths = onnx_export.export_tatoeba(out)
    shutil.copy2(spm_js, out / "spm.js")
    runtime = [static_dir / ORT_DIR / f for f in ORT_FILES]
    meta = json.loads(paths["meta"].read_text(encoding="utf8"))
    meta["bytes"]["spm.js"] = (out / "spm.js").stat().st_size
    meta["runtime_bytes"] = sum(f.stat().st_size for f in runtime)
    fetched = [out / name for name in meta["bytes"]] + runtime
    meta["gzip_bytes"] = {
        f.name: len(gzip.compress(f.read_bytes(), compresslevel=6)) for f in fetched
    }
    paths["meta"].write_text(
        json.dumps(meta, ensure_ascii=False, separators=(",", ":")), encoding="utf8"
    )
    stamp.write_text(digest.hexdigest())
    return out


def _builder_inited(app) -> None:
    if app.builder.format == "html":
        static = Path(app.outdir) / "_static"
        copy_assets(static)
        for script in (FIGURE_CONTROLS_JS, FIGURE_THEME_JS, GOING_DEEPER_JS):
            shutil.copy2(Path(__file__).with_name(script), static)
        english = ROOT / "_build" / "html" / "_static"
        if os.environ.get(EDITION_ENV) and (english / TRANSLATOR_DIR).is_dir():
            # the Japanese edition serves the graphs the English build exported
            for folder in (TRANSLATOR_DIR, TATOEBA_DIR):
                shutil.copytree(english / folder, static / folder, dirs_exist_ok=True)
        else:
            export_tatoeba_translator(static)


def _env_updated(app, env) -> None:
    """The toy translator's graphs, once every notebook has run: chapter 9 trains the
    toy model and saves it where chapter 10 loads it, so the page's translator is the
    model whose numbers chapter 10 shows."""
    if app.builder.format == "html" and not os.environ.get(EDITION_ENV):
        export_translator(Path(app.outdir) / "_static")


# Plotly draws as soon as the page parses, maybe before the browser has fetched the
# Japanese font (it loads when first needed), and an SVG label drawn then keeps its
# empty boxes. On pages with Japanese text, figures wait for the font to load.
PLOTLY_WAITS_FOR_FONT = """(function () {
  if (!window.Plotly || !document.fonts) return;
  var ready = document.fonts.load('16px "IPAexGothic"', "私").catch(function () {});
  var newPlot = window.Plotly.newPlot;
  window.Plotly.newPlot = function () {
    var args = arguments;
    return ready.then(function () { return newPlot.apply(window.Plotly, args); });
  };
})();"""
# Opened from file://, plotly drops a relative <a href> in annotation text (its link
# check allows http:, https: and mailto: only); the architecture figure's block names
# link to chapters that way. Put the links back from the figure's own annotations.
PLOTLY_FILE_LINKS = """(function () {
  // plotly drops a relative <a href> in annotation text when the page is a file:
  // (its link check allows http:, https:, mailto: only); put the links back
  if (!window.Plotly || location.protocol !== "file:") return;
  var XLINK = "http://www.w3.org/1999/xlink";
  function relink(gd) {
    (gd.layout.annotations || []).forEach(function (ann, i) {
      var hrefs = [], re = /<a href="([^"]+)"/g, m;
      while ((m = re.exec(ann.text || ""))) hrefs.push(m[1]);
      if (!hrefs.length) return;
      var box = gd.querySelector('.annotation[data-index="' + i + '"]');
      if (!box) return;
      var set = function (a, href) {
        if (a && href && !a.getAttributeNS(XLINK, "href")) {
          a.setAttributeNS(XLINK, "xlink:href", href);
          a.setAttribute("target", "_self");
        }
      };
      // the text's links, and the box itself when the whole text is one link
      box.querySelectorAll(".annotation-text a").forEach(function (a, k) {
        set(a, hrefs[k]);
      });
      var rect = box.querySelector("a > rect.bg");
      if (rect && hrefs.length === 1) set(rect.parentNode, hrefs[0]);
    });
  }
  var newPlot = window.Plotly.newPlot;
  window.Plotly.newPlot = function () {
    return Promise.resolve(newPlot.apply(window.Plotly, arguments)).then(function (gd) {
      relink(gd);
      gd.on("plotly_afterplot", function () { relink(gd); });
      return gd;
    });
  };
})();"""
# ipywidgets' sliders (noUiSlider) give their handle role="slider" and no name; the
# widget's label names it. Widgets render after the page loads, so watch for them.
WIDGET_SLIDER_NAMES = """(function () {
  var pending = false;
  function name() {
    pending = false;
    document.querySelectorAll(
      ".noUi-handle[role=slider]:not([aria-label]):not([aria-labelledby])"
    ).forEach(function (handle, k) {
      var box = handle.closest(".widget-inline-hbox");
      var label = box && box.querySelector(".widget-label");
      if (!label || !label.textContent.trim()) return;
      if (!label.id) label.id = "tedu-widget-label-" + k;
      handle.setAttribute("aria-labelledby", label.id);
    });
  }
  new MutationObserver(function () {
    if (!pending) { pending = true; window.requestAnimationFrame(name); }
  }).observe(document.documentElement, {childList: true, subtree: true});
})();"""
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def _html_page_context(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body", "")
    if "plotly-graph-div" in body:
        app.add_js_file(PLOTLY_JS, priority=PLOTLY_PRIORITY)
        app.add_js_file(None, body=PLOTLY_FILE_LINKS, priority=PLOTLY_PRIORITY + 2)
        app.add_js_file(FIGURE_CONTROLS_JS, priority=PLOTLY_PRIORITY + 3)
        app.add_js_file(FIGURE_THEME_JS, priority=PLOTLY_PRIORITY + 3)
        if CJK.search(body):
            app.add_js_file(
                None, body=PLOTLY_WAITS_FOR_FONT, priority=PLOTLY_PRIORITY + 1
            )
    if "going-deeper-body" in body:
        app.add_js_file(GOING_DEEPER_JS)
    if "application/vnd.jupyter.widget-view+json" in body:
        # RequireJS reads this global as its config when it loads. The widget manager
        # finds its Font Awesome files next to its module's address, which otherwise
        # is a folder under the page's, where they are not.
        assets = context["pathto"](f"_static/{VENDOR}/html-manager", 1)
        # anywidget's front end from _static, not from a CDN (the manager's fallback)
        anywidget = context["pathto"](f"_static/{ANYWIDGET_JS}", 1).removesuffix(".js")
        config = {
            "paths": {
                "@jupyter-widgets/html-manager/dist": assets,
                "anywidget": anywidget,
            }
        }
        app.add_js_file(None, body=f"var require = {json.dumps(config)};", priority=400)
        app.add_js_file(None, body=MATHJAX2_SHIM, priority=400)
        app.add_js_file(None, body=WIDGET_SLIDER_NAMES, priority=400)
    _drop_thebe_and_duplicates(context)


def _drop_thebe_and_duplicates(context) -> None:
    """Drop sphinx-thebe's scripts and repeated inline scripts.

    Thebe is off (launch_buttons.thebe: false), yet sphinx-thebe emits its inline
    config, which names a CDN, twice: a ``const`` redeclaration error in the console.
    """
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, keep = set(), []
    for js in scripts:
        attrs = getattr(js, "attributes", {}) or {}
        key = (str(getattr(js, "filename", js)), attrs.get("body", ""))
        thebe = "THEBE_JS_URL" in key[1] or key[0].endswith("sphinx-thebe.js")
        if thebe or key in seen:
            continue
        seen.add(key)
        keep.append(js)
    scripts[:] = keep


STARTUP = """# Written by book/book_extension.py for the kernels of the book build.
import sys as _sys

_sys.path.insert(0, {book_dir!r})
import plotly_renderer as _plotly_renderer  # noqa: E402

_plotly_renderer.use()
_sys.path.remove({book_dir!r})
del _sys, _plotly_renderer
"""


def kernel_profile(build_dir: Path) -> Path:
    """Write the IPython profile of the build's kernels; returns its IPYTHONDIR."""
    ipython_dir = build_dir / "ipython"
    startup = ipython_dir / "profile_default" / "startup" / "00-plotly-renderer.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text(STARTUP.format(book_dir=str(Path(__file__).resolve().parent)))
    return ipython_dir


def _config_inited(app, config) -> None:
    if not os.environ.get(EDITION_ENV):  # the Japanese build reuses the English cache
        _reset_stale_cache(app, config)
    # book/build.py reads the notebooks two at a time (Sphinx's parallel read: two
    # kernels on two cores). Two of jupyter-book's extensions do not say whether they
    # allow that, and Sphinx then reads serially, with a warning. Both do:
    # sphinx-multitoc-numbering renumbers the sections once every page is read, on
    # the merged environment; sphinx-jupyterbook-latex's transforms act on one page
    # at a time, for the LaTeX builder.
    for name in SAFE_FOR_PARALLEL_READ:
        ext = app.extensions.get(name)
        if ext is not None and ext.parallel_read_safe is None:
            ext.parallel_read_safe = True
    # Kernels inherit this process's environment: they start with the book's profile.
    os.environ["IPYTHONDIR"] = str(kernel_profile(Path(app.outdir).parent))


def serialise_kernel_starts(lock_path: str) -> None:
    """Hold the file lock at ``lock_path`` from a kernel's start (when its ports are
    chosen) until it is ready: the test run (tests/conftest.py) starts kernels in
    other processes at the same time, and two clients choosing ports at one moment
    can be handed the same ones (jupyter/jupyter_client#487)."""
    from contextlib import asynccontextmanager

    from filelock import FileLock  # a dependency of torch
    from nbclient.client import NotebookClient

    setup_kernel = NotebookClient.async_setup_kernel

    @asynccontextmanager
    async def locked_setup_kernel(self, **kwargs):
        lock = FileLock(lock_path)
        lock.acquire()
        try:
            async with setup_kernel(self, **kwargs):  # started and answering
                lock.release()
                yield
        finally:
            lock.release()  # a no-op if released above

    NotebookClient.async_setup_kernel = locked_setup_kernel


def _visit_hidden_cell(self, node) -> None:
    """myst-nb's toggle of a folded cell, without its aria-label: the name is then
    the visible "Show code cell source" (axe: label-content-name-mismatch)."""
    from html import escape

    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n<summary>\n')
    for state, prompt in (("collapsed", "prompt_show"), ("expanded", "prompt_hide")):
        self.body.append(
            f'<p class="{state} admonition-title">{escape(node[prompt])}</p>\n'
        )
    self.body.append("</summary>\n")


def _visit_citation(self, node) -> None:
    """docutils' citation as a list item (it writes role="doc-biblioentry", which
    ARIA 1.2 deprecates, inside a role="list" that then has no list items)."""
    if not isinstance(node.previous_sibling(), type(node)):
        self.body.append('<div role="list" class="citation-list">\n')
    self.body.append(
        self.starttag(node, "div", classes=[node.tagname], role="listitem")
    )


def _accessible_html(app) -> None:
    from docutils import nodes
    from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput

    app.add_node(
        HideCodeCellNode,
        override=True,
        html=(_visit_hidden_cell, depart_HideCellInput),
    )
    from sphinx.writers.html5 import HTML5Translator

    app.add_node(
        nodes.citation,
        override=True,
        html=(_visit_citation, HTML5Translator.depart_citation),
    )


def _going_deeper_transform():
    from docutils import nodes
    from sphinx.transforms import SphinxTransform

    class GoingDeeper(SphinxTransform):
        """A section whose title starts "Going deeper:" (the Japanese edition's
        「さらに深く：」) is off the core path (book/lean_path.py): it gets the class
        ``going-deeper``, which _static/custom.css draws as a bar down its left edge,
        and what follows its title and its "off the core path" line (an emphasised
        paragraph) goes into ``<div class="going-deeper-body">``, which
        going_deeper.js folds behind a button. After the Locale transform (20) has
        put the translation in."""

        default_priority = 872

        def apply(self, **kwargs) -> None:
            for section in list(self.document.findall(nodes.section)):
                title = section.next_node(nodes.title)
                if title is None or not title.astext().startswith(GOING_DEEPER):
                    continue
                section["classes"].append("going-deeper")
                start = section.index(title) + 1
                rest = section.children[start:]
                if (
                    rest
                    and isinstance(rest[0], nodes.paragraph)
                    and len(rest[0].children) == 1
                    and isinstance(rest[0][0], nodes.emphasis)
                ):
                    start, rest = start + 1, rest[1:]
                body = nodes.container(classes=["going-deeper-body"])
                for child in rest:
                    section.remove(child)
                    body += child
                section.insert(start, body)

    return GoingDeeper


def setup(app):
    if os.environ.get("TRANSFORMER_EDU_KERNEL_LOCK"):  # set by the test run only
        serialise_kernel_starts(os.environ["TRANSFORMER_EDU_KERNEL_LOCK"])
    _accessible_html(app)
    app.connect("config-inited", _config_inited)
    app.connect("builder-inited", _builder_inited)
    app.connect("env-updated", _env_updated)
    app.connect("html-page-context", _html_page_context)
    app.add_transform(_going_deeper_transform())
    editions.setup(app)  # the language switcher; the Japanese pages' figures, Colab
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python book/book_extension.py DEST_STATIC_DIR")
    for path in copy_assets(Path(sys.argv[1])):
        print(path)
