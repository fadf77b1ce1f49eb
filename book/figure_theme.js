/* Every plotly figure follows the book's light or dark mode.

   The theme (pydata-sphinx-theme) marks the mode on <html data-theme="light|dark">,
   from the reader's switch or, in "auto", from the system. The figures are written
   for a white page (transformer_edu/viz/figures.py's template). In the dark mode this script,
   added to every page with a plotly figure (book/book_extension.py), gives each
   figure the theme's own colours: its background (--pst-color-background), its text
   (--pst-color-text-base) for titles, ticks, legends, annotations, colour bars and
   the sliders' labels, its borders (--pst-color-border) for the grid and
   axis lines, its surface for the sliders (the menus: light buttons with dark labels,
   see layoutWanted); and a trace drawn in black or
   near-black (a reference line, a label) takes the text colour, as it would vanish
   on the dark page. Colours chosen for meaning (the series, the colour scales) stay.
   Back in the light mode each figure gets exactly what it had. A redraw that puts a
   figure's own colours back (a slider's step, a menu's choice) is followed again.

   tests/book/test_accessibility.py checks it in Chromium in both modes: each figure's
   background and text are the theme's, and its text contrasts with its background
   at WCAG AA. */
(function () {
  "use strict";
  if (!window.Plotly) return;

  var AXIS = /^[xy]axis\d*$/;
  var light = new WeakMap(); // figure -> {layout: {key: value}, traces: [{key: value}]}
  var busy = new WeakSet(); // figures this script is recolouring right now
  var probe = document.createElement("canvas").getContext("2d");

  function isDark() {
    return document.documentElement.dataset.theme === "dark";
  }

  function themeColour(name, fallback) {
    var value = getComputedStyle(document.documentElement).getPropertyValue(name);
    return (value || "").trim() || fallback;
  }

  function palette() {
    return {
      background: themeColour("--pst-color-background", "#14181e"),
      surface: themeColour("--pst-color-surface", "#29313d"),
      text: themeColour("--pst-color-text-base", "#ced6dd"),
      muted: themeColour("--pst-color-text-muted", "#9ca4af"),
      border: themeColour("--pst-color-border", "#48566b"),
    };
  }

  // WCAG relative luminance of any CSS colour (the canvas normalises its syntax)
  function luminance(colour) {
    probe.fillStyle = "#000";
    probe.fillStyle = colour;
    var c = probe.fillStyle, rgb;
    if (c.charAt(0) === "#") {
      rgb = [1, 3, 5].map(function (i) { return parseInt(c.substr(i, 2), 16); });
    } else {
      rgb = (c.match(/[\d.]+/g) || [0, 0, 0]).slice(0, 3).map(Number);
    }
    var lin = rgb.map(function (v) {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
  }

  function dim(colour) {
    return typeof colour === "string" && luminance(colour) < 0.05;
  }

  function get(obj, path) {
    return path.split(".").reduce(function (o, k) {
      return o == null ? undefined : o[k];
    }, obj);
  }

  // For each part of a figure: the attributes under it the dark mode sets, and the
  // palette colour each takes. The menus stay light buttons with dark labels: plotly
  // paints the chosen and the hovered entry a fixed near-white (#F4FAFF) that no
  // layout key changes, so a light label would not read there; the other entries
  // take the theme's text colour as their ground, darker than the chosen one.
  var PARTS = {
    axis: {gridcolor: "border", zerolinecolor: "muted", linecolor: "muted",
           tickcolor: "muted", "tickfont.color": "text", "title.font.color": "text"},
    slider: {bgcolor: "surface", activebgcolor: "muted", bordercolor: "border",
             tickcolor: "muted", "font.color": "text", "currentvalue.font.color": "text"},
    menu: {bgcolor: "text", bordercolor: "muted", "font.color": "background"},
    colorbar: {"tickfont.color": "text", "title.font.color": "text",
               outlinecolor: "border"},
  };

  function setPart(want, prefix, part, p) {
    Object.keys(PARTS[part]).forEach(function (key) {
      want[prefix + key] = p[PARTS[part][key]];
    });
  }

  // The layout attributes the dark mode sets, and the value each takes there.
  function layoutWanted(gd, p) {
    var full = gd._fullLayout, layout = gd.layout, want = {};
    want.paper_bgcolor = p.background;
    want.plot_bgcolor = p.background;
    want["font.color"] = p.text;
    want["title.font.color"] = p.text;
    want["legend.font.color"] = p.text;
    want["legend.bgcolor"] = "rgba(0,0,0,0)";
    want["legend.title.font.color"] = p.text;
    Object.keys(full).forEach(function (k) {
      if (AXIS.test(k)) setPart(want, k + ".", "axis", p);
      if (/^coloraxis\d*$/.test(k)) setPart(want, k + ".colorbar.", "colorbar", p);
    });
    (layout.sliders || []).forEach(function (s, i) {
      setPart(want, "sliders[" + i + "].", "slider", p);
    });
    (layout.updatemenus || []).forEach(function (m, i) {
      setPart(want, "updatemenus[" + i + "].", "menu", p);
    });
    (layout.annotations || []).forEach(function (a, i) {
      var c = get(a, "font.color");
      if (c == null || dim(c)) want["annotations[" + i + "].font.color"] = p.text;
      if (a.arrowcolor == null || dim(a.arrowcolor)) {
        want["annotations[" + i + "].arrowcolor"] = p.muted;
      }
    });
    (layout.shapes || []).forEach(function (s, i) {
      var c = get(s, "line.color");
      if (c != null && dim(c)) want["shapes[" + i + "].line.color"] = p.text;
    });
    return want;
  }

  // Per trace: its near-black colours, and its colour bar's text.
  function traceWanted(trace, p) {
    var want = {};
    ["line.color", "marker.color", "marker.line.color", "textfont.color",
     "error_y.color", "error_x.color"].forEach(function (key) {
      if (dim(get(trace, key))) want[key] = p.text;
    });
    if (trace.showscale !== false && /heatmap|contour|surface/.test(trace.type || "")) {
      setPart(want, "colorbar.", "colorbar", p);
    }
    return want;
  }

  function remember(store, obj, keys) {
    keys.forEach(function (k) {
      if (!(k in store)) {
        var v = get(obj, k.replace(/\[(\d+)\]/g, ".$1"));
        store[k] = v === undefined ? null : v; // null: plotly's default again
      }
    });
  }

  function differs(obj, want) {
    return Object.keys(want).some(function (k) {
      var v = get(obj, k.replace(/\[(\d+)\]/g, ".$1"));
      return (v === undefined ? null : v) !== want[k];
    });
  }

  function recolour(gd) {
    if (!gd._fullLayout || busy.has(gd)) return Promise.resolve();
    var saved = light.get(gd);
    var work = [];
    if (isDark()) {
      var p = palette();
      if (!saved) light.set(gd, (saved = {layout: {}, traces: []}));
      var lw = layoutWanted(gd, p);
      remember(saved.layout, gd.layout, Object.keys(lw));
      if (differs(gd.layout, lw)) work.push(function () { return Plotly.relayout(gd, lw); });
      (gd.data || []).forEach(function (trace, i) {
        var tw = traceWanted(trace, p);
        if (!Object.keys(tw).length) return;
        saved.traces[i] = saved.traces[i] || {};
        remember(saved.traces[i], trace, Object.keys(tw));
        if (differs(trace, tw)) {
          work.push(function () { return Plotly.restyle(gd, tw, [i]); });
        }
      });
    } else if (saved) {
      light.delete(gd);
      work.push(function () { return Plotly.relayout(gd, saved.layout); });
      saved.traces.forEach(function (values, i) {
        if (values && i < gd.data.length) {
          work.push(function () { return Plotly.restyle(gd, values, [i]); });
        }
      });
    }
    if (!work.length) return Promise.resolve();
    busy.add(gd);
    var done = work.reduce(function (chain, step) { return chain.then(step); },
                           Promise.resolve());
    return done.then(function () { busy.delete(gd); },
                     function () { busy.delete(gd); });
  }

  function figures() {
    return Array.prototype.slice.call(document.querySelectorAll("div.js-plotly-plot"));
  }

  // A figure seen for the first time is recoloured for the mode, and again after
  // each redraw of its own in the dark (a step or a choice may put its colours back).
  // The page's other changes (a figure's own redraws included) need nothing more:
  // the subtree observer below only looks for figures not seen yet.
  var hooked = new WeakSet();
  function hookNew() {
    figures().forEach(function (gd) {
      if (!gd._fullLayout || !gd.on || hooked.has(gd)) return;
      hooked.add(gd);
      ["plotly_afterplot", "plotly_animated"].forEach(function (ev) {
        gd.on(ev, function () { if (isDark()) recolour(gd); });
      });
      recolour(gd);
    });
  }

  // for the tests: every figure recoloured for the mode now
  window.teduFiguresFollowTheme = function () {
    hookNew();
    return Promise.all(figures().map(recolour));
  };

  new MutationObserver(window.teduFiguresFollowTheme).observe(
    document.documentElement, {attributes: true, attributeFilter: ["data-theme"]});
  var pending = false;
  new MutationObserver(function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; hookNew(); });
  }).observe(document.documentElement, {childList: true, subtree: true});
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", hookNew);
  } else {
    hookNew();
  }
})();
