/* The scaled-against-unscaled figure. It draws states that sdpa_ref computed
   when the site was built (the JSON in the root element); it does no
   arithmetic on them, so it cannot disagree with the reference package. */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function h(tag, attrs, children) {
    var node = document.createElement(tag);
    setAll(node, attrs);
    [].concat(children || []).forEach(function (c) {
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
  // d_k as the site's formulas write it: italic d, subscript k.
  function dk() { return h("span", { class: "sdpa-w-dk" }, [h("i", { text: "d" }), h("sub", { text: "k" })]); }

  // A state in the fragment (#q=2&dk=64), or null: any other fragment is a
  // link to a section and belongs to the browser.
  function readHash(data) {
    var p = new URLSearchParams(location.hash.slice(1));
    var q = Number(p.get("q")), w = Number(p.get("dk"));
    if (!p.has("q") || !p.has("dk")) return null;
    if (!(q >= 0 && q < data.queries.length) || data.widths.indexOf(w) < 0) return null;
    return { query: q, width: w };
  }

  function radios(name, legend, labels, values, uid) {
    var set = h("fieldset", { class: "sdpa-w-choice" }, [h("legend", {}, legend)]);
    labels.forEach(function (label, i) {
      var id = uid + "-" + name + "-" + values[i];
      var input = h("input", { type: "radio", name: uid + "-" + name, id: id, value: values[i] });
      set.appendChild(h("span", { class: "sdpa-w-option" }, [input, h("label", { for: id }, label)]));
    });
    return set;
  }

  // One panel: a bar per key, each labelled with its weight, key and score.
  var BASE = 92, FULL = 72; // bar baseline, and the height of weight 1
  function panel(title, formula) {
    var bars = s("svg", { viewBox: "0 0 260 122", class: "sdpa-w-bars", role: "img" });
    var p = { root: h("section", { class: "sdpa-w-panel" }), bars: bars, items: [] };
    p.formula = h("span", { text: formula });
    p.title = h("p", { class: "sdpa-w-title" }, [h("strong", { text: title }), " ", p.formula]);
    p.scores = h("span", { class: "sdpa-w-scores" });
    p.title.appendChild(p.scores);
    p.stats = h("p", { class: "sdpa-w-stats" });
    for (var j = 0; j < 4; j++) {
      var x = 20 + j * 60;
      p.items.push({
        bar: s("rect", { x: x, width: 40, class: "sdpa-w-bar" }),
        value: s("text", { x: x + 20, class: "sdpa-w-value", "text-anchor": "middle" }),
        key: s("text", { x: x + 20, y: BASE + 14, class: "sdpa-w-key", "text-anchor": "middle" }),
        score: s("text", { x: x + 20, y: BASE + 27, class: "sdpa-w-score", "text-anchor": "middle" }),
      });
    }
    bars.appendChild(s("line", { x1: 10, x2: 250, y1: BASE, y2: BASE, class: "sdpa-w-axis" }));
    p.items.forEach(function (it) {
      [it.bar, it.value, it.key, it.score].forEach(function (n) { bars.appendChild(n); });
    });
    [p.title, bars, p.stats].forEach(function (n) { p.root.appendChild(n); });
    return p;
  }

  function drawPanel(p, side, data) {
    var weights = [];
    p.items.forEach(function (it, j) {
      var top = BASE - side.weights[j] * FULL;
      setAll(it.bar, { y: top, height: BASE - top, fill: data.colors[j] });
      it.value.setAttribute("y", top - 4);
      text(it.value, side.weight_labels[j]);
      text(it.key, data.keys[j]);
      text(it.score, "score " + side.score_labels[j]);
      weights.push(data.keys[j] + " " + side.weight_labels[j]);
    });
    p.bars.setAttribute("aria-label", "Weights: " + weights.join(", "));
    text(p.scores, " · scores [" + side.score_labels.join(", ") + "]");
    text(p.stats, "Entropy " + side.entropy + " of at most " + data.max_entropy +
      " nats · top weight " + side.top);
  }

  // The values in the plane, with axes like the static figure's. The outputs
  // are open marks drawn around a point, so a value dot under them stays seen.
  function valuePlot(data) {
    var b = data.bounds, unit = 22, left = 34, top = 8, bottom = 34, right = 8;
    var w = (b[1] - b[0]) * unit, hgt = (b[3] - b[2]) * unit;
    function px(v) { return [left + (v[0] - b[0]) * unit, top + (b[3] - v[1]) * unit]; }
    var size = [left + w + right, top + hgt + bottom];
    var svg = s("svg", { viewBox: "0 0 " + size[0] + " " + size[1], class: "sdpa-w-plane", role: "img" });
    var axes = s("g", { class: "sdpa-w-axes" });
    axes.appendChild(s("path", { d: "M" + left + " " + top + "V" + (top + hgt) + "H" + (left + w) }));
    for (var x = Math.ceil(b[0]); x <= b[1]; x += 2) {
      var c = px([x, b[2]]);
      axes.appendChild(s("path", { d: "M" + c[0] + " " + c[1] + "v4" }));
      axes.appendChild(s("text", { x: c[0], y: c[1] + 14, "text-anchor": "middle", text: String(x).replace("-", "−") }));
    }
    for (var y = Math.ceil(b[2] / 2) * 2; y <= b[3]; y += 2) {
      var d = px([b[0], y]);
      axes.appendChild(s("path", { d: "M" + d[0] + " " + d[1] + "h-4" }));
      axes.appendChild(s("text", { x: d[0] - 6, y: d[1] + 3.5, "text-anchor": "end", text: String(y).replace("-", "−") }));
    }
    axes.appendChild(s("text", { x: left + w / 2, y: size[1] - 3, "text-anchor": "middle", text: "value coordinate 1" }));
    axes.appendChild(s("text", { transform: "translate(10 " + (top + hgt / 2) + ") rotate(-90)",
                                 "text-anchor": "middle", text: "value coordinate 2" }));
    svg.appendChild(axes);
    svg.appendChild(s("polygon", {
      class: "sdpa-w-hull",
      points: data.hull.map(function (v) { return px(v).join(","); }).join(" "),
    }));
    data.values.forEach(function (v, j) {
      var c = px(v);
      svg.appendChild(s("circle", { cx: c[0], cy: c[1], r: 5.5, fill: data.colors[j], class: "sdpa-w-value-dot" }));
      var right = c[0] > left + w / 2; // keep labels inside: right-hand ones read leftwards
      svg.appendChild(s("text", { x: c[0] + (right ? -13 : 13), y: c[1] - 11, class: "sdpa-w-vlabel",
                                  "text-anchor": right ? "end" : "start", text: "v of " + data.keys[j] }));
    });
    var raw = s("rect", { width: 22, height: 22, class: "sdpa-w-out-raw" });
    var scaled = s("circle", { r: 8, class: "sdpa-w-out-scaled" });
    svg.appendChild(raw);
    svg.appendChild(scaled);
    return {
      svg: svg,
      draw: function (state) {
        var r = px(state.raw.output), c = px(state.scaled.output);
        setAll(raw, { x: r[0] - 11, y: r[1] - 11 });
        setAll(scaled, { cx: c[0], cy: c[1] });
        svg.setAttribute("aria-label", "Values of the four keys, with the unscaled output at " +
          state.raw.output_label + " and the scaled output at " + state.scaled.output_label);
      },
    };
  }

  // Text is set only when it changes: an unchanged cell costs no layout.
  function text(node, value) { if (node.textContent !== value) node.textContent = value; }

  function vectorRow(name, pattern) {
    var row = { name: h("th", { scope: "row", text: name }), pattern: h("td", { class: "sdpa-w-pattern", text: pattern }),
                repeats: h("td"), width: h("td") };
    row.node = h("tr", {}, [row.name, row.pattern, row.repeats, row.width]);
    return row;
  }

  // The fixed vectors: each query and key is its width-4 pattern repeated, so
  // the table shows the pattern and the count, the same few rows at any width.
  function vectorTable(data) {
    var pat = data.patterns, caption = h("caption"), shownWidth = null;
    var query = vectorRow("", "");
    var keys = pat.keys.map(function (k, j) { return vectorRow(data.keys[j], k); });
    var values = pat.values.map(function (v, j) {
      var row = vectorRow("v of " + data.keys[j], v);
      text(row.repeats, "once");
      text(row.width, String(v.split(" ").length));
      return row;
    });
    var rows = [query].concat(keys, values);
    var node = h("table", { class: "sdpa-w-vectors" }, [caption,
      h("thead", {}, [h("tr", {}, ["vector", "width-" + data.base_width + " pattern", "repeated", "width"]
        .map(function (c) { return h("th", { scope: "col", text: c }); }))]),
      h("tbody", {}, rows.map(function (r) { return r.node; }))]);
    return {
      node: node,
      draw: function (q, width) {
        var n = data.repeats[String(width)], times = n > 1 ? "× " + n : "once";
        text(query.name, data.queries[q]);
        text(query.pattern, pat.queries[q]);
        [query].concat(keys).forEach(function (row) {
          text(row.repeats, times);
          text(row.width, String(width));
        });
        if (shownWidth === width) return;
        shownWidth = width;
        caption.replaceChildren("The fixed vectors at ", dk(), " = " + width + ": each query and key " +
          "repeats its width-" + data.base_width + " pattern " + (n > 1 ? n + " times" : "once") +
          ". Values stay 2-wide at every width.");
      },
    };
  }

  var count = 0;
  function mount(root) {
    var data = JSON.parse(root.querySelector("script.sdpa-widget-data").textContent);
    var uid = "sdpa-w" + count++;
    var queries = radios("q", ["Query"], data.queries, data.queries.map(function (_, i) { return i; }), uid);
    var widths = radios("dk", ["Head width ", dk()], data.widths.map(function (w) {
      return [dk(), " = " + w];
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
    // Paper has no radios to read the state from; prose may name it too.
    var printed = h("p", { class: "sdpa-w-state" }, [h("span"), dk(), h("span")]);
    var shownState = Array.from(document.querySelectorAll(".sdpa-shown-state"));
    var table = vectorTable(data);
    var tableBox = h("div", { class: "sdpa-w-table", tabindex: "0", role: "region",
                              "aria-label": "The fixed vectors" }, [table.node]);
    root.appendChild(printed);
    root.appendChild(h("div", { class: "sdpa-w-controls" }, [queries, widths]));
    root.appendChild(h("div", { class: "sdpa-w-panels" }, [raw.root, scaled.root]));
    root.appendChild(h("figure", { class: "sdpa-w-mixture" }, [plane.svg,
      h("figcaption", {}, [legend, outputs])]));
    root.appendChild(live);
    root.appendChild(tableBox);

    var fromUrl = readHash(data);
    var current = fromUrl || data.default;
    function show(next, announce) {
      current = next;
      var state = data.states[next.query + "/" + next.width];
      var name = data.queries[next.query];
      queries.querySelectorAll("input")[next.query].checked = true;
      widths.querySelectorAll("input")[data.widths.indexOf(next.width)].checked = true;
      drawPanel(raw, state.raw, data);
      text(scaled.formula, "softmax(q·k / " + state.scale_label + ")");
      drawPanel(scaled, state.scaled, data);
      plane.draw(state);
      text(outputs, "Outputs: unscaled " + state.raw.output_label + ", scaled " +
        state.scaled.output_label + ". Each is a weighted average of the values, inside their hull.");
      table.draw(next.query, next.width);
      text(printed.firstChild, "Shown: query " + name + " at head width ");
      text(printed.lastChild, " = " + next.width + ".");
      // Prose that names the state on paper follows the figure.
      shownState.forEach(function (el) { text(el, "query " + name + " at width " + next.width); });
      if (announce) live.textContent = state.summary;
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
    queries.addEventListener("change", function (e) {
      choose({ query: Number(e.target.value), width: current.width });
    });
    widths.addEventListener("change", function (e) {
      choose({ query: current.query, width: Number(e.target.value) });
    });
    window.addEventListener("hashchange", function () {
      var next = readHash(data);
      if (next) show(next, true);
    });
    show(current, false);
    live.textContent = data.states[current.query + "/" + current.width].summary;
    root.classList.add("sdpa-w-ready");
    // The figure just grew above what a section link points at: land there
    // again. A state link shows its figure.
    var target = null;
    try {
      target = fromUrl ? root : document.getElementById(decodeURIComponent(location.hash.slice(1)));
    } catch (e) { /* a malformed escape names no section */ }
    if (target && (!fromUrl || window.scrollY === 0)) target.scrollIntoView({ behavior: "instant" });
  }

  function start() {
    document.querySelectorAll('[data-figure="scaled-vs-unscaled"]').forEach(mount);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
