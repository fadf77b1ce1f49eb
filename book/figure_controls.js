/* Keyboard and screen-reader controls for every plotly figure of the book.

   Plotly draws its sliders and menus in SVG: no element takes the focus, so no key
   moves them. book/plotly_renderer.py writes, inside each figure's <figure>, one
   native control per slider (<input type="range">) and per menu (<select>), named
   and labelled from the figure's own data (transformer_edu/viz/figure_text.py). This
   script, added to every page with a plotly figure (book/book_extension.py):

   1. lays each native control over the plotly control it stands for, transparent
      and without pointer events: the mouse keeps using plotly's control, the
      keyboard uses the native one, and its focus ring is drawn around plotly's;
   2. when the native control changes (arrow keys, Home/End, Page Up/Down, or a pick
      from the <select>'s list), runs that step or entry just as plotly's own control
      would (the step's method and args, read at that moment: a control_grid frame
      re-points them) and moves plotly's control there;
   3. when plotly's control moves (the mouse, or a frame), moves the native one.

   It holds no text of its own: every name and label comes from the page. */
(function () {
  "use strict";
  if (!window.Plotly) return;

  var LISTS = { slider: "sliders", menu: "updatemenus" };
  var ENTRIES = { slider: "steps", menu: "buttons" };

  function shown(items) {
    return (items || []).filter(function (x) { return x.visible !== false; });
  }

  function spec(gd, control) {
    var list = gd.layout[LISTS[control.dataset.kind]] || [];
    return list[+control.dataset.index];
  }

  function entries(gd, control) {
    var item = spec(gd, control);
    return item ? shown(item[ENTRIES[control.dataset.kind]]) : [];
  }

  function active(gd, control) {
    var item = spec(gd, control);
    return item ? +(item.active || 0) : 0;
  }

  // Run entry j of the control as plotly's own control does: the entry's command,
  // then the control's "active" (which redraws plotly's slider or menu there).
  function run(gd, control, j) {
    var entry = entries(gd, control)[j];
    if (!entry) return Promise.resolve();
    var done = Promise.resolve();
    if (entry.execute !== false && entry.method && entry.method !== "skip") {
      var args = [gd].concat(entry.args || []);
      done = Promise.resolve(Plotly[entry.method].apply(Plotly, args));
    }
    return done.then(function () {
      if (active(gd, control) === j) return null;
      var update = {};
      update[LISTS[control.dataset.kind] + "[" + control.dataset.index + "].active"] = j;
      return Plotly.relayout(gd, update);
    });
  }

  // One command at a time per figure; a key held down skips to its latest value.
  function request(gd, control, j) {
    var queue = gd._teduQueue || (gd._teduQueue = { busy: false, next: null });
    queue.next = [control, j];
    if (queue.busy) return;
    queue.busy = true;
    (function loop() {
      var job = queue.next;
      queue.next = null;
      if (!job) {
        queue.busy = false;
        sync(gd);
        return;
      }
      run(gd, job[0], job[1]).catch(function () {}).then(loop);
    })();
  }

  function valueText(gd, control, j) {
    var item = spec(gd, control);
    var entry = entries(gd, control)[j];
    var prefix = (item && item.currentvalue && item.currentvalue.prefix) || "";
    return entry ? prefix + (entry.label || "") : "";
  }

  // The native controls follow plotly's (moved by the mouse or by a frame).
  function sync(gd) {
    if (gd._teduQueue && gd._teduQueue.busy) return;
    controlsOf(gd).forEach(function (control) {
      var j = active(gd, control);
      if (+control.value !== j) control.value = String(j);
      if (control.dataset.kind === "slider") {
        control.setAttribute("aria-valuetext", valueText(gd, control, j));
      }
    });
  }

  function controlsOf(gd) {
    var figure = gd.closest(".tedu-figure");
    return figure ? Array.prototype.slice.call(
      figure.querySelectorAll(".tedu-control[data-kind]")) : [];
  }

  // The SVG group plotly draws for a control (d3 keeps the item on __data__).
  function drawn(gd, control) {
    var selector = control.dataset.kind === "slider"
      ? ".slider-container > .slider-group"
      : ".updatemenu-container > g";
    var index = +control.dataset.index;
    var groups = gd.querySelectorAll(selector);
    for (var g = 0; g < groups.length; g++) {
      var data = groups[g].__data__;
      if (data && data._index === index) return groups[g];
    }
    return null;
  }

  function place(gd) {
    var figure = gd.closest(".tedu-figure");
    if (!figure) return;
    var origin = figure.getBoundingClientRect();
    controlsOf(gd).forEach(function (control) {
      var group = drawn(gd, control);
      var box = group && group.getBoundingClientRect();
      if (!box || !box.width) {
        control.classList.add("tedu-unplaced");  // shown below the figure instead
        return;
      }
      control.classList.remove("tedu-unplaced");
      control.style.left = (box.left - origin.left) + "px";
      control.style.top = (box.top - origin.top) + "px";
      control.style.width = box.width + "px";
      control.style.height = box.height + "px";
    });
  }

  // Plotly's SVG (tick labels, cells, legends) read aloud is noise: the figure's
  // name and description say what it shows. An SVG holding a link stays.
  function quiet(gd) {
    gd.querySelectorAll("svg.main-svg").forEach(function (svg) {
      if (!svg.querySelector("a")) svg.setAttribute("aria-hidden", "true");
    });
  }

  function wire(gd) {
    if (gd._teduWired) return;
    gd._teduWired = true;
    quiet(gd);
    var controls = controlsOf(gd);
    var figure = gd.closest(".tedu-figure");
    if (figure) figure.dataset.teduControls = "ready";  // for the tests
    if (!controls.length) return;
    controls.forEach(function (control) {
      var event = control.dataset.kind === "slider" ? "input" : "change";
      control.addEventListener(event, function () {
        request(gd, control, +control.value);
        if (control.dataset.kind === "slider") {
          control.setAttribute("aria-valuetext", valueText(gd, control, +control.value));
        }
      });
    });
    var later = null;
    function update() {
      if (later) return;
      later = window.requestAnimationFrame(function () {
        later = null;
        sync(gd);
        place(gd);
      });
    }
    ["plotly_afterplot", "plotly_animated", "plotly_relayout", "plotly_restyle",
     "plotly_update", "plotly_sliderchange", "plotly_buttonclicked"].forEach(
      function (name) { gd.on(name, update); });
    window.addEventListener("resize", update);
    if (document.fonts && document.fonts.ready) document.fonts.ready.then(update);
    sync(gd);
    place(gd);
  }

  // A figure's script runs before the page has parsed the controls after it.
  function whenParsed(then) {
    if (document.readyState === "loading") {
      document.addEventListener("DOMContentLoaded", then);
    } else {
      then();
    }
  }

  var newPlot = window.Plotly.newPlot;
  window.Plotly.newPlot = function () {
    return Promise.resolve(newPlot.apply(window.Plotly, arguments)).then(function (gd) {
      if (gd && gd.closest) whenParsed(function () { wire(gd); });
      return gd;
    });
  };
})();
