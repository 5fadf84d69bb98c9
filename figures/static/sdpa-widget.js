/* The scaled-against-unscaled figure. It draws states that sdpa_ref computed
   when the site was built (the JSON in the root element); it does no
   arithmetic on them, so it cannot disagree with the reference package. */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function h(tag, attrs, children) {
    var node = document.createElement(tag);
    setAll(node, attrs);
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function s(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    setAll(node, attrs);
    return node;
  }
  function setAll(node, attrs) {
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
  }

  function readHash(data) {
    var p = new URLSearchParams(location.hash.slice(1));
    var q = Number(p.get("q")), w = Number(p.get("dk"));
    if (!p.has("q") || !p.has("dk")) return null;
    if (!(q >= 0 && q < data.queries.length) || data.widths.indexOf(w) < 0) return null;
    return { query: q, width: w };
  }

  function radios(name, legend, labels, values, uid) {
    var set = h("fieldset", { class: "sdpa-w-choice" }, [h("legend", { text: legend })]);
    labels.forEach(function (label, i) {
      var id = uid + "-" + name + "-" + values[i];
      var input = h("input", { type: "radio", name: uid + "-" + name, id: id, value: values[i] });
      var lab = h("label", { for: id });
      lab.innerHTML = label; // labels are built below from fixed strings
      set.appendChild(h("span", { class: "sdpa-w-option" }, [input, lab]));
    });
    return set;
  }

  // One panel: a bar per key, each labelled with its weight.
  function panel(title, formula) {
    var bars = s("svg", { viewBox: "0 0 260 150", class: "sdpa-w-bars", role: "img" });
    var p = { root: h("section", { class: "sdpa-w-panel" }), bars: bars, items: [] };
    p.title = h("p", { class: "sdpa-w-title" }, [h("strong", { text: title }), " " + formula]);
    p.scores = h("p", { class: "sdpa-w-scores" });
    p.stats = h("p", { class: "sdpa-w-stats" });
    for (var j = 0; j < 4; j++) {
      var x = 20 + j * 60;
      p.items.push({
        bar: s("rect", { x: x, width: 40, class: "sdpa-w-bar" }),
        value: s("text", { x: x + 20, class: "sdpa-w-value", "text-anchor": "middle" }),
        key: s("text", { x: x + 20, y: 130, class: "sdpa-w-key", "text-anchor": "middle" }),
        score: s("text", { x: x + 20, y: 145, class: "sdpa-w-score", "text-anchor": "middle" }),
      });
    }
    bars.appendChild(s("line", { x1: 10, x2: 250, y1: 115, y2: 115, class: "sdpa-w-axis" }));
    p.items.forEach(function (it) {
      [it.bar, it.value, it.key, it.score].forEach(function (n) { bars.appendChild(n); });
    });
    [p.title, p.scores, bars, p.stats].forEach(function (n) { p.root.appendChild(n); });
    return p;
  }

  function drawPanel(p, side, data) {
    var weights = [];
    p.items.forEach(function (it, j) {
      var top = 115 - side.weights[j] * 100; // weight 1 fills 100 of the 150 units
      setAll(it.bar, { y: top, height: 115 - top, fill: data.colors[j] });
      setAll(it.value, { y: top - 4, text: side.weight_labels[j] });
      setAll(it.key, { text: data.keys[j] });
      setAll(it.score, { text: "score " + side.score_labels[j] });
      weights.push(data.keys[j] + " " + side.weight_labels[j]);
    });
    p.bars.setAttribute("aria-label", "Weights: " + weights.join(", "));
    p.scores.textContent = "Scores [" + side.score_labels.join(", ") + "]";
    p.stats.textContent = "Entropy " + side.entropy + " of at most " + data.max_entropy +
      " nats · top weight " + side.top;
  }

  function valuePlot(data) {
    var b = data.bounds, size = 220, pad = 10;
    function px(v) {
      return [pad + (v[0] - b[0]) / (b[1] - b[0]) * (size - 2 * pad),
              pad + (b[3] - v[1]) / (b[3] - b[2]) * (size - 2 * pad)];
    }
    var svg = s("svg", { viewBox: "0 0 " + size + " " + size, class: "sdpa-w-plane", role: "img" });
    svg.appendChild(s("polygon", {
      class: "sdpa-w-hull",
      points: data.hull.map(function (v) { return px(v).join(","); }).join(" "),
    }));
    data.values.forEach(function (v, j) {
      var c = px(v);
      svg.appendChild(s("circle", { cx: c[0], cy: c[1], r: 6, fill: data.colors[j] }));
      var right = c[0] > size / 2; // keep labels inside: right-hand ones read leftwards
      svg.appendChild(s("text", { x: c[0] + (right ? -9 : 9), y: c[1] - 9, class: "sdpa-w-vlabel",
                                  "text-anchor": right ? "end" : "start", text: "v of " + data.keys[j] }));
    });
    var raw = s("rect", { width: 12, height: 12, class: "sdpa-w-out-raw" });
    var scaled = s("circle", { r: 6, class: "sdpa-w-out-scaled" });
    svg.appendChild(raw);
    svg.appendChild(scaled);
    return {
      svg: svg,
      draw: function (state) {
        var r = px(state.raw.output), c = px(state.scaled.output);
        setAll(raw, { x: r[0] - 6, y: r[1] - 6 });
        setAll(scaled, { cx: c[0], cy: c[1] });
        svg.setAttribute("aria-label", "Values of the four keys, with the unscaled output at " +
          state.raw.output_label + " and the scaled output at " + state.scaled.output_label);
      },
    };
  }

  function vectorRow(name, groups, n) {
    return h("tr", {}, [h("th", { scope: "row", text: name }),
      h("td", {}, groups.map(function (g) { return h("span", { class: "sdpa-w-group", text: g }); })),
      h("td", { text: String(n) })]);
  }

  // One table per width, built on first use; a query change swaps one row.
  function vectorTable(data, query, width) {
    var v = data.vectors[String(width)], rows = [];
    rows.push(vectorRow(data.queries[query], v.queries[query], width));
    v.keys.forEach(function (k, j) { rows.push(vectorRow(data.keys[j], k, width)); });
    data.value_groups.forEach(function (groups, j) {
      rows.push(vectorRow("v of " + data.keys[j], groups, 2));
    });
    return h("table", { class: "sdpa-w-vectors" }, [
      h("caption", { text: "The fixed vectors at dₖ = " + width + ", coordinates in groups of " +
        "four (the width-4 pattern repeats). Values stay 2-wide at every width." }),
      h("thead", {}, [h("tr", {}, [h("th", { scope: "col", text: "vector" }),
        h("th", { scope: "col", text: "coordinates" }), h("th", { scope: "col", text: "width" })])]),
      h("tbody", {}, rows),
    ]);
  }

  var count = 0;
  function mount(root) {
    var data = JSON.parse(root.querySelector("script.sdpa-widget-data").textContent);
    var uid = "sdpa-w" + count++;
    var queries = radios("q", "Query", data.queries, data.queries.map(function (_, i) { return i; }), uid);
    var widths = radios("dk", "Head width", data.widths.map(function (w) {
      return "d<sub>k</sub> = " + w;
    }), data.widths, uid);
    var raw = panel("Unscaled", "softmax(q·k)");
    var scaled = panel("Scaled", "");
    var plane = valuePlot(data);
    var legend = h("p", { class: "sdpa-w-legend" }, [
      h("span", { class: "sdpa-w-key-raw", "aria-hidden": "true" }), " unscaled output ",
      h("span", { class: "sdpa-w-key-scaled", "aria-hidden": "true" }), " scaled output",
    ]);
    var outputs = h("p", { class: "sdpa-w-outputs" });
    var live = h("p", { class: "sdpa-w-live", "aria-live": "polite" });
    var tableBox = h("div", { class: "sdpa-w-table", tabindex: "0", role: "region",
                              "aria-label": "The fixed vectors" });
    root.appendChild(h("div", { class: "sdpa-w-controls" }, [queries, widths]));
    root.appendChild(h("div", { class: "sdpa-w-panels" }, [raw.root, scaled.root]));
    root.appendChild(h("figure", { class: "sdpa-w-mixture" }, [plane.svg,
      h("figcaption", {}, [legend, outputs])]));
    root.appendChild(live);
    root.appendChild(tableBox);

    var current = readHash(data) || data.default;
    var tables = {}; // one table per width, built on first use
    function show(next, announce) {
      current = next;
      var state = data.states[next.query + "/" + next.width];
      queries.querySelectorAll("input")[next.query].checked = true;
      widths.querySelectorAll("input")[data.widths.indexOf(next.width)].checked = true;
      drawPanel(raw, state.raw, data);
      scaled.title.lastChild.textContent = " softmax(q·k / " + state.scale_label + ")";
      drawPanel(scaled, state.scaled, data);
      plane.draw(state);
      outputs.textContent = "Outputs: unscaled " + state.raw.output_label + ", scaled " +
        state.scaled.output_label + ". Each is a weighted average of the values, inside their hull.";
      var table = tables[next.width] || (tables[next.width] = vectorTable(data, next.query, next.width));
      var body = table.querySelector("tbody");
      body.replaceChild(vectorRow(data.queries[next.query],
        data.vectors[String(next.width)].queries[next.query], next.width), body.firstChild);
      if (tableBox.firstChild !== table) tableBox.replaceChildren(table);
      if (announce) live.textContent = state.summary;
      history.replaceState(null, "", "#q=" + next.query + "&dk=" + next.width);
    }
    queries.addEventListener("change", function (e) {
      show({ query: Number(e.target.value), width: current.width }, true);
    });
    widths.addEventListener("change", function (e) {
      show({ query: current.query, width: Number(e.target.value) }, true);
    });
    window.addEventListener("hashchange", function () {
      var next = readHash(data);
      if (next) show(next, true);
    });
    show(current, false);
    live.textContent = data.states[current.query + "/" + current.width].summary;
    document.querySelectorAll(".sdpa-widget-fallback").forEach(function (el) { el.hidden = true; });
    root.classList.add("sdpa-w-ready");
  }

  function start() {
    document.querySelectorAll('[data-figure="scaled-vs-unscaled"]').forEach(mount);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
