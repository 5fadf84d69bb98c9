/* The online softmax, tile by tile. The page already holds the figure, drawn
   at build time in its first state (figures/online_softmax.py). Every state
   is in the JSON of the root, traced by sdpa_ref.flash when the site was
   built: this script only moves between them. It does no arithmetic on the
   numbers and no rounding, so the figure cannot disagree with the trace. */
(function () {
  "use strict";

  // Text is set only when it changes: an unchanged cell costs no layout.
  function text(node, value) { if (node.textContent !== value) node.textContent = value; }
  function has(obj, key) { return Object.prototype.hasOwnProperty.call(obj, key); }

  // A state in the fragment (#order=flash&step=3), or null: any other
  // fragment is a link to a section and belongs to the browser.
  function readHash(data) {
    var p = new URLSearchParams(location.hash.slice(1));
    if (!p.has("order") || !p.has("step")) return null;
    var order = p.get("order"), step = Number(p.get("step"));
    if (!has(data.orders, order) || !/^\d+$/.test(p.get("step"))) return null;
    if (step >= data.orders[order].steps.length) return null;
    return { order: order, step: step };
  }

  function mount(root) {
    var data = JSON.parse(root.querySelector("script.os-data").textContent);
    var radios = Array.from(root.querySelectorAll(".os-order input"));
    var back = root.querySelector(".os-back"), next = root.querySelector(".os-next");
    var count = root.querySelector(".os-count"), title = root.querySelector(".os-name");
    var svg = root.querySelector(".os-svg");
    var cols = svg.querySelectorAll(".os-col"), tiles = svg.querySelectorAll(".os-tile");
    var cells = svg.querySelectorAll(".os-s"), outLabel = svg.querySelector(".os-out-label");
    var memory = root.querySelector(".os-memory"), live = root.querySelector(".os-live");
    var result = root.querySelector(".os-result");
    var rows = Array.from(root.querySelectorAll(".os-table tbody tr"), function (tr) {
      return { tr: tr, cells: Array.from(tr.children).slice(1) };
    });
    var marked = [];

    var fromUrl = readHash(data);
    var current = fromUrl || data.default;
    function show(to) {
      current = to;
      var view = data.orders[to.order].steps[to.step];
      var last = data.orders[to.order].steps.length - 1;
      radios.forEach(function (r) { r.checked = r.value === to.order; });
      back.setAttribute("aria-disabled", String(to.step === 0));
      next.setAttribute("aria-disabled", String(to.step === last));
      text(count, view.count);
      text(title, view.title);
      Array.prototype.forEach.call(cols, function (col, i) {
        var f = view.columns[i];
        col.classList.toggle("os-chip", f.indexOf("c") >= 0);
        col.classList.toggle("os-read", f.indexOf("r") >= 0);
        col.classList.toggle("os-write", f.indexOf("w") >= 0);
      });
      Array.prototype.forEach.call(tiles, function (tile, i) {
        tile.classList.toggle("os-done", view.tiles[i] === "done");
        tile.classList.toggle("os-now", view.tiles[i] === "now");
      });
      marked.forEach(function (i) { cells[i].classList.remove("os-max"); });
      view.max_cells.forEach(function (i) { cells[i].classList.add("os-max"); });
      marked = view.max_cells;
      text(outLabel, data.out_label[to.order]);
      svg.setAttribute("aria-label", view.svg_label);
      text(memory, view.memory);
      rows.forEach(function (row, r) {
        row.tr.classList.toggle("os-now", view.row_flags[r] === "now");
        row.tr.classList.toggle("os-idle", view.row_flags[r] === "idle");
        row.cells.forEach(function (cell, c) { text(cell, view.rows[r][c]); });
      });
      text(live, view.summary);
      text(result, view.result);
      root.setAttribute("data-state", JSON.stringify(view.state));
    }

    // Only a reader's change writes the URL; loading the page never does, so
    // a link to a section keeps its fragment. A run of quick steps writes once.
    var pending = null;
    function choose(to) {
      show(to);
      if (pending === null) {
        pending = setTimeout(function () {
          pending = null;
          history.replaceState(null, "", "#order=" + current.order + "&step=" + current.step);
        }, 0);
      }
    }
    function go(step) {
      var last = data.orders[current.order].steps.length - 1;
      step = Math.max(0, Math.min(last, step));
      if (step !== current.step) choose({ order: current.order, step: step });
    }
    back.addEventListener("click", function () { go(current.step - 1); });
    next.addEventListener("click", function () { go(current.step + 1); });
    radios.forEach(function (r) {
      r.addEventListener("change", function () {
        // The same step in the other order: as many tiles done, in its sequence.
        choose({ order: r.value, step: current.step });
      });
    });
    // Arrow keys step anywhere in the figure, except where they already mean
    // something: in the radio group (they pick the order) and on the table
    // (it may scroll sideways).
    root.addEventListener("keydown", function (e) {
      if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
      if (e.target.type === "radio" || e.target.classList.contains("os-table")) return;
      var moves = { ArrowLeft: current.step - 1, ArrowRight: current.step + 1,
        Home: 0, End: Infinity };
      if (!has(moves, e.key)) return;
      e.preventDefault();
      go(moves[e.key]);
    });
    window.addEventListener("hashchange", function () {
      var to = readHash(data);
      if (to) show(to);
    });
    if (fromUrl) {
      show(current);
      // A state link shows its figure.
      if (window.scrollY === 0) root.scrollIntoView({ behavior: "instant" });
    }
  }

  function start() {
    document.querySelectorAll('[data-figure="online-softmax"]').forEach(mount);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
