/* posbias: a table wider than the column scrolls inside its own box (the theme's
   .pst-scrollable-table-container, or the table itself where a cell output made it a block);
   that box is labelled, for the eye (a line above it) and for a screen reader (a region with a
   name, reachable by the keyboard).  Checked again when the window is resized.
   tests/browser/test_site.py reads the label (test_no_table_breaks_a_word_and_a_wide_one_says_it_scrolls). */
(function () {
  "use strict";
  var HINT = "posbias-scroll-hint";
  function box(t) {
    for (var e = t; e && !e.matches("main"); e = e.parentElement) {
      var o = getComputedStyle(e).overflowX;
      if (o === "auto" || o === "scroll") return e;
    }
    return null;
  }
  function label() {
    document.querySelectorAll("main table").forEach(function (t) {
      var b = box(t);
      if (!b) return;
      var prev = b.previousElementSibling;
      var has = prev && prev.classList.contains(HINT);
      if (b.scrollWidth > b.clientWidth + 1) {
        b.setAttribute("role", "region");
        b.setAttribute("aria-label", "Table, wider than the page: scroll it sideways");
        b.tabIndex = 0;
        if (!has) {
          var p = document.createElement("p");
          p.className = HINT;
          p.setAttribute("aria-hidden", "true");
          p.textContent = "\u2194 wider than the page: scroll the table sideways";
          b.parentNode.insertBefore(p, b);
        }
      } else {
        b.removeAttribute("aria-label");
        if (b.getAttribute("role") === "region") b.removeAttribute("role");
        if (has) prev.remove();
      }
    });
  }
  var queued = false;
  function later() {  /* once a frame, after the layout the resize made */
    if (queued) return;
    queued = true;
    requestAnimationFrame(function () { queued = false; label(); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", label);
  else label();
  window.addEventListener("load", function () {
    label();
    /* typeset math changes a table's width */
    if (window.MathJax && MathJax.startup && MathJax.startup.promise)
      MathJax.startup.promise.then(label);
  });
  window.addEventListener("resize", later);
  window.posbiasLabelTables = label;
})();
