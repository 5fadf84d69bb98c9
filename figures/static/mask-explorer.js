/* The mask explorer (figures/mask_explorer.py). Each cell is the rule of
   sdpa_ref.mods, and the checks are sdpa_ref's Options', in its order; the
   messages and notes come from the page's JSON. The browser tests hold it to
   sdpa_ref.attention on thousands of random states. */
(function () {
  "use strict";
  var SVGNS = "http://www.w3.org/2000/svg";
  var CELL = 18, PITCH = 20, LEFT = 28, TOP = 16, SCALE = 1.3;

  function py(v) { return v === null ? "None" : String(v); }
  function pyWindow(w) { return w === null ? "None" : "(" + py(w[0]) + ", " + py(w[1]) + ")"; }

  // Options.__post_init__: the causal check comes before the sink check.
  function error(s, errors) {
    var w = s.window, left = w ? w[0] : null, right = w ? w[1] : null;
    var fill = function (t) {
      return t.replace("{window}", pyWindow(w)).replace("{left}", py(left))
        .replace("{sink_tokens}", String(s.sink_tokens));
    };
    if (s.is_causal && right !== null && right > 0) return fill(errors.causal_right);
    if (s.sink_tokens && left === null) return fill(errors.sink_without_left);
    return null;
  }

  // sdpa_ref.mods.align_offset, sliding_window and chunked, one cell at a time.
  function grid(s, align) {
    var offset = (align || s.align) === "top_left" ? 0 : s.n_k - s.n_q;
    var left = s.window ? s.window[0] : null, right = s.window ? s.window[1] : null;
    if (s.is_causal) right = 0;
    var rows = [];
    for (var i = 0; i < s.n_q; i++) {
      var a = i + offset, row = [];
      var start = s.chunk === null ? 0 : a - (((a % s.chunk) + s.chunk) % s.chunk);
      for (var j = 0; j < s.n_k; j++) {
        var ok = true;
        if (right !== null && j > a + right) ok = false;
        if (left !== null && !(j >= a - left || j < s.sink_tokens)) ok = false;
        if (s.chunk !== null && !(j >= start && j < start + s.chunk)) ok = false;
        row.push(ok);
      }
      rows.push(row);
    }
    return rows;
  }

  // -- the three calls ---------------------------------------------------------
  function sdpaCall(s, empty) {
    var o = [];
    if (s.is_causal) o.push("is_causal=True");
    if (s.align !== "top_left") o.push('align="' + s.align + '"');
    if (s.window) o.push("window=" + pyWindow(s.window));
    if (s.sink_tokens) o.push("sink_tokens=" + s.sink_tokens);
    if (s.chunk !== null) o.push("chunk=" + s.chunk);
    if (empty) o.push('empty_rows="zero"');
    return "sdpa_ref.attention(q, k, v" + o.map(function (x) { return ", " + x; }).join("") + ")";
  }
  function same(a, b) { return JSON.stringify(a) === JSON.stringify(b); }
  function flashCall(s, allowed, T) {
    if (s.sink_tokens) return [null, T.flash_sink];
    // flash_attn_func aligns to the bottom right: fine wherever that is the same mask.
    if (s.align === "top_left" && !same(allowed, grid(s, "bottom_right"))) return [null, T.flash_top_left];
    var o = [], notes = [];
    if (s.is_causal) o.push("causal=True");
    if (s.window && (s.window[0] !== null || s.window[1] !== null)) {
      var b = s.window.map(function (x) { return x === null ? -1 : x; });
      o.push("window_size=(" + b[0] + ", " + b[1] + ")");
    }
    if (s.chunk !== null) {
      o.push("attention_chunk=" + s.chunk);
      notes.push(T.flash_chunk);
    }
    notes.unshift(T.flash_layout);
    return ["flash_attn_func(q, k, v" + o.map(function (x) { return ", " + x; }).join("") + ")", notes.join(" ")];
  }
  function shifted(c) { return c === 0 ? "q_idx" : c > 0 ? "q_idx + " + c : "q_idx - " + (-c); }
  function flexCall(s, T) {
    var offset = s.align === "top_left" ? 0 : s.n_k - s.n_q, t = [];
    var left = s.window ? s.window[0] : null, right = s.window ? s.window[1] : null;
    if (s.is_causal) right = 0;
    if (right !== null) t.push("kv_idx <= " + shifted(offset + right));
    if (left !== null) {
      var lower = "kv_idx >= " + shifted(offset - left);
      t.push(s.sink_tokens ? "(" + lower + ") | (kv_idx < " + s.sink_tokens + ")" : lower);
    }
    if (s.chunk !== null) {
      var q = offset === 0 ? "q_idx" : "(" + shifted(offset) + ")";
      t.push(q + " // " + s.chunk + " == kv_idx // " + s.chunk);
    }
    if (!t.length) return [null, T.flex_none];
    var body = t.length === 1 ? t[0] : t.map(function (x) { return "(" + x + ")"; }).join(" & ");
    return ["def mask_mod(b, h, q_idx, kv_idx): return " + body, sizes(T.flex_use, s)];
  }

  // -- the URL ---------------------------------------------------------------
  function int(text, low, high) {
    return /^\d+$/.test(text) && +text >= low && +text <= high ? +text : NaN;
  }
  function bound(text, limit) { return text === "inf" ? null : int(text, 0, limit); }
  // A state in the fragment, or null: any other fragment is a section link.
  function readHash(limit) {
    var p = new URLSearchParams(location.hash.slice(1)), s = {};
    if (!p.has("n_q") || !p.has("n_k")) return null;
    s.n_q = int(p.get("n_q"), 1, limit);
    s.n_k = int(p.get("n_k"), 1, limit);
    s.is_causal = p.get("is_causal") === "1";
    s.align = p.get("align") === "bottom_right" ? "bottom_right" : "top_left";
    var w = (p.get("window") || "off").split(",");
    s.window = w[0] === "off" ? null : w.length === 2 ? [bound(w[0], limit), bound(w[1], limit)] : [NaN, NaN];
    s.sink_tokens = int(p.get("sink_tokens") || "0", 0, limit);
    s.chunk = (p.get("chunk") || "off") === "off" ? null : int(p.get("chunk"), 1, limit);
    var numbers = [s.n_q, s.n_k, s.sink_tokens, s.chunk].concat(s.window || []);
    return numbers.some(function (x) { return Number.isNaN(x); }) ? null : s;
  }
  function hashOf(s) {
    var b = function (x) { return x === null ? "inf" : x; };
    return "#n_q=" + s.n_q + "&n_k=" + s.n_k + "&is_causal=" + (s.is_causal ? 1 : 0) +
      "&align=" + s.align + "&window=" + (s.window ? b(s.window[0]) + "," + b(s.window[1]) : "off") +
      "&sink_tokens=" + s.sink_tokens + "&chunk=" + (s.chunk === null ? "off" : s.chunk);
  }

  // -- the figure ---------------------------------------------------------------
  function el(name, attrs, text) {
    var e = document.createElementNS(SVGNS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function sizes(t, s) { return t.replace("{n_q}", s.n_q).replace(/\{n_k\}/g, s.n_k); }
  function names(list) {
    return list.length === 1 ? list[0] : list.slice(0, -1).join(", ") + " and " + list[list.length - 1];
  }

  function mount(root) {
    var data = JSON.parse(root.querySelector("script.me-data").textContent), T = data.texts;
    var form = root.querySelector("form"), f = form.elements, limit = data.limit;
    var svg = root.querySelector(".me-grid"), status = root.querySelector(".me-status");
    var out = {};
    ["sdpa", "flash", "flex"].forEach(function (k) {
      out[k] = [root.querySelector(".me-" + k), root.querySelector(".me-" + k + "-note")];
    });
    var current;

    function readForm() {
      var num = function (name, low) {
        var v = Math.round(Number(f[name].value));
        return Number.isFinite(v) && f[name].value !== "" ? Math.max(low, Math.min(limit, v)) : current[name];
      };
      var side = function (name) { return f[name].value === "none" ? null : +f[name].value; };
      return {
        n_q: num("n_q", 1), n_k: num("n_k", 1), is_causal: f.is_causal.checked,
        align: f.align.value, window: f.window.checked ? [side("left"), side("right")] : null,
        sink_tokens: num("sink_tokens", 0), chunk: f.chunk.value === "none" ? null : +f.chunk.value,
      };
    }
    // The number a reader is typing is left alone until the change is done.
    function writeForm(s, typing) {
      ["n_q", "n_k", "sink_tokens"].forEach(function (k) {
        if (f[k] !== typing && String(s[k]) !== f[k].value) f[k].value = s[k];
      });
      f.is_causal.checked = s.is_causal;
      f.align.value = s.align;
      f.window.checked = s.window !== null;
      var w = s.window || [null, null];
      f.left.value = w[0] === null ? "none" : w[0];
      f.right.value = w[1] === null ? "none" : w[1];
      f.left.disabled = f.right.disabled = s.window === null;
      f.chunk.value = s.chunk === null ? "none" : s.chunk;
    }
    function setCall(k, pair) {
      out[k][0].textContent = pair[0] === null ? "—" : pair[0];
      out[k][0].parentNode.classList.toggle("me-none", pair[0] === null);
      out[k][1].textContent = pair[1] || "";
    }
    function draw(s, allowed) {
      var w = LEFT + s.n_k * PITCH, h = TOP + s.n_q * PITCH;
      var frag = document.createDocumentFragment(), i, j, text = [];
      svg.setAttribute("viewBox", "0 0 " + w + " " + h);
      svg.setAttribute("width", w * SCALE);
      svg.setAttribute("height", h * SCALE);
      for (j = 0; j < s.n_k; j++) {
        frag.appendChild(el("text", { x: LEFT + j * PITCH + CELL / 2, y: 11, "text-anchor": "middle" }, "k" + j));
      }
      for (i = 0; i < s.n_q; i++) {
        var y = TOP + i * PITCH, row = allowed ? allowed[i] : null, keys = [];
        var empty = row && row.indexOf(true) < 0;
        var label = el("text", { x: LEFT - 4, y: y + 13, "text-anchor": "end" }, "q" + i);
        if (empty) label.setAttribute("class", "me-empty");
        frag.appendChild(label);
        for (j = 0; j < s.n_k; j++) {
          var on = row && row[j];
          if (on) keys.push("k" + j);
          frag.appendChild(el("rect", { "class": row ? (on ? "me-on" : "me-off") : "me-x",
            x: LEFT + j * PITCH, y: y, width: CELL, height: CELL, rx: 2 }));
        }
        text.push("q" + i + " " + (keys.length ? keys.join(" ") : "none"));
      }
      svg.replaceChildren(frag);
      svg.setAttribute("aria-label", allowed
        ? "Allowed pairs of " + s.n_q + " queries and " + s.n_k + " keys: " + text.join("; ")
        : "No mask: sdpa_ref refuses these options.");
    }
    function describe(s, allowed, message) {
      status.replaceChildren();
      root.classList.toggle("me-invalid", message !== null);
      if (message !== null) {
        status.append(T.raises);
        var m = document.createElement("span");
        m.className = "me-error";
        m.textContent = message;
        status.append(m);
        return [];
      }
      var count = 0, empty = [];
      allowed.forEach(function (row, i) {
        var n = row.filter(Boolean).length;
        count += n;
        if (!n) empty.push("q" + i);
      });
      status.append(count + " of " + s.n_q * s.n_k + " pairs allowed.");
      if (empty.length) {
        var note = document.createElement("span");
        note.className = "me-flag";
        note.append(" " + names(empty) + (empty.length === 1 ? " sees" : " see") + T.empty[0]);
        var a = document.createElement("a");
        a.href = data.empty_rows_link;
        a.textContent = T.empty[1];
        note.append(a, sizes(T.empty[2], s));
        status.append(note);
      }
      return empty;
    }
    function show(s, typing) {
      current = s;
      writeForm(s, typing);
      var message = error(s, data.errors);
      var allowed = message === null ? grid(s) : null;
      draw(s, allowed);
      var empty = describe(s, allowed, message);
      setCall("sdpa", [sdpaCall(s, empty.length > 0), message === null ? T.sdpa : T.sdpa_raises]);
      setCall("flash", message === null ? flashCall(s, allowed, T) : [null, T.refused]);
      setCall("flex", message === null ? flexCall(s, T) : [null, ""]);
      var state = { n_q: s.n_q, n_k: s.n_k, is_causal: s.is_causal, align: s.align,
        window: s.window, sink_tokens: s.sink_tokens, chunk: s.chunk };
      if (message === null) state.allowed = allowed; else state.error = message;
      root.setAttribute("data-state", JSON.stringify(state));
    }

    // Only a reader's change writes the URL, once per burst of changes.
    var pending = null;
    function changed(e) {
      show(readForm(), e.type === "input" ? e.target : null);
      if (pending === null) {
        pending = setTimeout(function () {
          pending = null;
          history.replaceState(null, "", hashOf(current));
        }, 0);
      }
    }
    form.addEventListener("input", changed);
    form.addEventListener("change", changed);
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    window.addEventListener("hashchange", function () {
      var s = readHash(limit);
      if (s) { show(s); root.scrollIntoView({ block: "start" }); }
    });
    var fromUrl = readHash(limit);
    current = data.default;
    show(fromUrl || data.default);
    if (fromUrl && window.scrollY === 0) root.scrollIntoView({ behavior: "instant" });
  }

  function start() {
    document.querySelectorAll('[data-figure="mask-explorer"]').forEach(mount);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
