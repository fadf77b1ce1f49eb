// "Going deeper" sections, off the core path (book/lean_path.py), folded behind a
// button under their heading. book_extension.py wraps each one's body in
// <div class="going-deeper-body">; without this script every body stays open.
// A closed body is hidden="until-found" where the browser knows it: find-in-page
// still finds its words and opens it ("beforematch"); a link to anything inside it
// opens it too.
// Print shows every section open (_static/custom.css).
(function () {
  "use strict";
  var ja = (document.documentElement.lang || "").indexOf("ja") === 0;
  // where the browser knows hidden="until-found", find-in-page opens a folded body
  var untilFound = "onbeforematch" in document.documentElement;
  var WORDS = ja
    ? { open: "この節を開く", close: "この節を閉じる" }
    : { open: "Open this section", close: "Close this section" };

  function setOpen(button, body, open) {
    button.setAttribute("aria-expanded", open ? "true" : "false");
    button.textContent = open ? WORDS.close : WORDS.open;
    if (open) {
      body.removeAttribute("hidden");
      // figures drawn while folded take their width again
      window.dispatchEvent(new Event("resize"));
    } else {
      body.setAttribute("hidden", untilFound ? "until-found" : "");
    }
  }

  function openAt(hash) {
    if (!hash || hash.length < 2) return;
    var target = document.getElementById(decodeURIComponent(hash.slice(1)));
    var opened = false;
    for (var node = target; node; node = node.parentElement) {
      if (node.classList && node.classList.contains("going-deeper-body")) {
        var button = document.querySelector(
          '.going-deeper-toggle[aria-controls="' + node.id + '"]'
        );
        if (button && button.getAttribute("aria-expanded") !== "true") {
          setOpen(button, node, true);
          opened = true;
        }
      }
    }
    if (opened) target.scrollIntoView();
  }

  function fold() {
    var bodies = document.querySelectorAll("section.going-deeper > .going-deeper-body");
    bodies.forEach(function (body, k) {
      var section = body.parentElement;
      var heading = section.querySelector(":scope > h2, :scope > h3");
      if (!heading) return;
      if (!body.id) body.id = "going-deeper-body-" + k;
      var button = document.createElement("button");
      button.type = "button";
      button.className = "going-deeper-toggle";
      button.setAttribute("aria-controls", body.id);
      button.addEventListener("click", function () {
        setOpen(button, body, button.getAttribute("aria-expanded") !== "true");
      });
      body.addEventListener("beforematch", function () {
        setOpen(button, body, true);
      });
      body.parentElement.insertBefore(button, body);
      setOpen(button, body, false);
    });
    openAt(window.location.hash);
  }

  window.addEventListener("hashchange", function () {
    openAt(window.location.hash);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", fold);
  } else {
    fold();
  }
})();
