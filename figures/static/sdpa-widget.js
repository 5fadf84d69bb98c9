/* The scaled-against-unscaled figure. The page already holds it, drawn at
   build time in its first state (figures/widget.py), so it takes its place
   before this script runs. The script only updates it to the states that
   sdpa_ref computed when the site was built (the JSON in the root element);
   it does no arithmetic on them, so it cannot disagree with the reference. */
(function () {
  "use strict";

  function setAll(node, attrs) {
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
  }
  // Text is set only when it changes: an unchanged cell costs no layout.
  function text(node, value) { if (node.textContent !== value) node.textContent = value; }

  // A state in the fragment (#q=2&dk=64), or null: any other fragment is a
  // link to a section and belongs to the browser.
  function readHash(data) {
    var p = new URLSearchParams(location.hash.slice(1));
    var q = Number(p.get("q")), w = Number(p.get("dk"));
    if (!p.has("q") || !p.has("dk")) return null;
    if (!(q >= 0 && q < data.queries.length) || data.widths.indexOf(w) < 0) return null;
    return { query: q, width: w };
  }

  function panel(root, data) {
    var cols = root.querySelectorAll(".sdpa-w-col");
    return {
      formula: root.querySelector(".sdpa-w-formula"),
      scores: root.querySelector(".sdpa-w-scores"),
      bars: root.querySelector(".sdpa-w-bars"),
      stats: root.querySelector(".sdpa-w-stats"),
      items: Array.prototype.map.call(cols, function (c) {
        return { bar: c.querySelector(".sdpa-w-bar"), value: c.querySelector(".sdpa-w-value") };
      }),
      draw: function (side) {
        var weights = [];
        this.items.forEach(function (it, j) {
          it.bar.style.height = 100 * side.weights[j] + "%";
          text(it.value, side.weight_labels[j]);
          weights.push(data.keys[j] + " " + side.weight_labels[j]);
        });
        this.bars.setAttribute("aria-label", "Weights: " + weights.join(", "));
        text(this.scores, " · scores [" + side.score_labels.join(", ") + "]");
        text(this.stats, "Entropy " + side.entropy + " of at most " + data.max_entropy +
          " nats · top weight " + side.top);
      },
    };
  }

  // The outputs are open marks drawn around a point, so a value dot under
  // them stays seen.
  function plane(svg, data) {
    var g = data.plane, b = data.bounds;
    var raw = svg.querySelector(".sdpa-w-out-raw"), scaled = svg.querySelector(".sdpa-w-out-scaled");
    function px(v) { return [g.left + (v[0] - b[0]) * g.unit, g.top + (b[3] - v[1]) * g.unit]; }
    return function (state) {
      var r = px(state.raw.output), c = px(state.scaled.output);
      setAll(raw, { x: r[0] - 11, y: r[1] - 11 });
      setAll(scaled, { cx: c[0], cy: c[1] });
      svg.setAttribute("aria-label", "Values of the four keys, with the unscaled output at " +
        state.raw.output_label + " and the scaled output at " + state.scaled.output_label);
    };
  }

  // The fixed vectors: each query and key is its width-4 pattern repeated, so
  // the table shows the pattern and the count, the same few rows at any width.
  function vectors(table, data) {
    var rows = table.querySelectorAll("tbody tr"), caption = table.querySelector("caption");
    var parts = caption.childNodes, shownWidth = data.default.width;
    return function (q, width) {
      var n = data.repeats[String(width)], times = n > 1 ? "× " + n : "once";
      for (var i = 0; i <= data.keys.length; i++) {
        var cells = rows[i].children;
        if (i === 0) {
          text(cells[0], data.queries[q]);
          text(cells[1], data.patterns.queries[q]);
        }
        text(cells[2], times);
        text(cells[3], String(width));
      }
      if (shownWidth === width) return;
      shownWidth = width;
      // "The fixed vectors at " dₖ " = 4: each ... pattern once. Values ..."
      text(parts[parts.length - 1], " = " + width + ": each query and key repeats its width-" +
        data.base_width + " pattern " + (n > 1 ? n + " times" : "once") +
        ". Values stay 2-wide at every width.");
    };
  }

  function mount(root) {
    var data = JSON.parse(root.querySelector("script.sdpa-widget-data").textContent);
    var sets = root.querySelectorAll(".sdpa-w-choice");
    var queries = sets[0].querySelectorAll("input"), widths = sets[1].querySelectorAll("input");
    var sides = root.querySelectorAll(".sdpa-w-panel");
    var raw = panel(sides[0], data), scaled = panel(sides[1], data);
    var drawPlane = plane(root.querySelector(".sdpa-w-plane"), data);
    var drawTable = vectors(root.querySelector(".sdpa-w-vectors"), data);
    var outputs = root.querySelector(".sdpa-w-outputs"), live = root.querySelector(".sdpa-w-live");
    // Paper has no radios to read the state from; prose may name it too.
    var printed = root.querySelector(".sdpa-w-state").children;
    var shownState = Array.from(document.querySelectorAll(".sdpa-shown-state"));

    var fromUrl = readHash(data);
    var current = fromUrl || data.default;
    function show(next, announce) {
      current = next;
      var state = data.states[next.query + "/" + next.width];
      var name = data.queries[next.query];
      queries[next.query].checked = true;
      widths[data.widths.indexOf(next.width)].checked = true;
      raw.draw(state.raw);
      text(scaled.formula, "softmax(q·k / " + state.scale_label + ")");
      scaled.draw(state.scaled);
      drawPlane(state);
      text(outputs, "Outputs: unscaled " + state.raw.output_label + ", scaled " +
        state.scaled.output_label + ". Each is a weighted average of the values, inside their hull.");
      drawTable(next.query, next.width);
      text(printed[0], "Shown: query " + name + " at head width ");
      text(printed[printed.length - 1], " = " + next.width + ".");
      shownState.forEach(function (el) { text(el, "query " + name + " at width " + next.width); });
      if (announce) text(live, state.summary);
    }
    // Only a reader's change writes the URL; loading a page never does, so a
    // link to a section keeps its fragment and a plain visit stays plain. The
    // write (a same-document navigation, ~2 ms) waits until the figure is
    // drawn, and a run of quick changes writes once.
    var pending = null;
    function choose(next) {
      show(next, true);
      if (pending === null) {
        pending = setTimeout(function () {
          pending = null;
          history.replaceState(null, "", "#q=" + current.query + "&dk=" + current.width);
        }, 0);
      }
    }
    sets[0].addEventListener("change", function (e) {
      choose({ query: Number(e.target.value), width: current.width });
    });
    sets[1].addEventListener("change", function (e) {
      choose({ query: current.query, width: Number(e.target.value) });
    });
    window.addEventListener("hashchange", function () {
      var next = readHash(data);
      if (next) show(next, true);
    });
    if (fromUrl) {
      show(current, false);
      text(live, data.states[current.query + "/" + current.width].summary);
      // A state link shows its figure.
      if (window.scrollY === 0) root.scrollIntoView({ behavior: "instant" });
    }
  }

  function start() {
    document.querySelectorAll('[data-figure="scaled-vs-unscaled"]').forEach(mount);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
