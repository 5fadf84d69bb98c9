/* The mask explorer: see figures/mask_explorer.py. */
(() => {
  "use strict";
  const CELL = 18, PITCH = 20, LEFT = 28, TOP = 16, SCALE = 1.3;
  const py = (v) => (v === null ? "None" : String(v));
  const pyWindow = (w) => (w === null ? "None" : `(${py(w[0])}, ${py(w[1])})`);
  const args = (o) => o.map((x) => ", " + x).join("");
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const sizes = (t, s) => t.replace("{n_q}", s.n_q).replace(/\{n_k\}/g, s.n_k);
  const bounds = (s) => {
    const w = s.window || [null, null];
    return [w[0], s.is_causal ? 0 : w[1]]; // attention_ref: causal means right = 0
  };

  // sdpa_ref's order: the causal check, then sinks.
  function error(s, errors) {
    const [left, right] = s.window || [null, null];
    const fill = (t) => t.replace("{window}", pyWindow(s.window)).replace("{left}", py(left))
      .replace("{sink_tokens}", s.sink_tokens);
    if (s.is_causal && right !== null && right > 0) return fill(errors.causal_right);
    if (s.sink_tokens && left === null) return fill(errors.sink_without_left);
    return null;
  }

  // sdpa_ref.mods' rules, cell by cell.
  function grid(s, align = s.align) {
    const offset = align === "top_left" ? 0 : s.n_k - s.n_q, [left, right] = bounds(s);
    const c = s.chunk, rows = [];
    for (let i = 0; i < s.n_q; i++) {
      const a = i + offset, start = c === null ? 0 : a - (((a % c) + c) % c), row = [];
      for (let j = 0; j < s.n_k; j++) {
        row.push((right === null || j <= a + right) &&
          (left === null || j >= a - left || j < s.sink_tokens) &&
          (c === null || (j >= start && j < start + c)));
      }
      rows.push(row);
    }
    return rows;
  }

  function sdpaCall(s, empty) {
    const o = [];
    if (s.is_causal) o.push("is_causal=True");
    if (s.align !== "top_left") o.push(`align="${s.align}"`);
    if (s.window) o.push("window=" + pyWindow(s.window));
    if (s.sink_tokens) o.push("sink_tokens=" + s.sink_tokens);
    if (s.chunk !== null) o.push("chunk=" + s.chunk);
    if (empty) o.push('empty_rows="zero"');
    return `sdpa_ref.attention(q, k, v${args(o)})`;
  }
  // FlashAttention-2's kernel rewrites window_size (see mask_explorer.py).
  function fa2(s, L, R) {
    const n = s.n_k, f = (x) => (x === null || x >= n ? null : x), l = f(L), r = f(R);
    const w = [l ?? (r === null ? null : n), r ?? (l === null ? null : n)];
    return grid({ ...s, is_causal: false, chunk: null, window: w }, "bottom_right");
  }
  function flashCall(s, allowed, T) {
    if (s.sink_tokens) return [null, T.flash_sink];
    const o = [], notes = [T.flash_layout], w = s.window, m = (x) => (x === null ? -1 : x);
    let [L, R] = bounds(s);
    // Top left as a bottom-right window shifted by n_k - n_q, if one can.
    if (s.align === "top_left" && !same(allowed, grid(s, "bottom_right"))) {
      const d = s.n_k - s.n_q;
      L = L === null ? null : L + d;
      R = R === null ? null : R - d;
      if (s.chunk !== null || L < 0 || R < 0) return [null, T.flash_top_left];
      o.push(`window_size=(${m(L)}, ${m(R)})`);
      notes.push(sizes(T.flash_shifted, s));
    } else {
      if (s.is_causal) o.push("causal=True");
      if (w && (w[0] !== null || w[1] !== null)) o.push(`window_size=(${w.map(m).join(", ")})`);
      if (s.chunk !== null) {
        o.push("attention_chunk=" + s.chunk);
        notes.push(T.flash_chunk);
      }
    }
    if (s.chunk === null && !same(fa2(s, L, R), allowed)) notes.push(sizes(T.flash_fa2, s));
    return [`flash_attn_func(q, k, v${args(o)})`, notes.join(" ")];
  }
  const shifted = (c) => (c === 0 ? "q_idx" : c > 0 ? "q_idx + " + c : "q_idx - " + -c);
  function flexCall(s, T) {
    const offset = s.align === "top_left" ? 0 : s.n_k - s.n_q, [left, right] = bounds(s), t = [];
    if (right !== null) t.push("kv_idx <= " + shifted(offset + right));
    if (left !== null) {
      const lower = "kv_idx >= " + shifted(offset - left);
      t.push(s.sink_tokens ? `(${lower}) | (kv_idx < ${s.sink_tokens})` : lower);
    }
    if (s.chunk !== null) {
      t.push(`${offset ? `(${shifted(offset)})` : "q_idx"} // ${s.chunk} == kv_idx // ${s.chunk}`);
    }
    if (!t.length) return [null, T.flex_none];
    const body = t.length === 1 ? t[0] : t.map((x) => `(${x})`).join(" & ");
    return ["def mask_mod(b, h, q_idx, kv_idx): return " + body, sizes(T.flex_use, s)];
  }

  // null for a section link.
  function readHash(limit) {
    const p = new URLSearchParams(location.hash.slice(1));
    if (!p.has("n_q") || !p.has("n_k")) return null;
    const int = (t, low) => (/^\d+$/.test(t) && +t >= low && +t <= limit ? +t : NaN);
    const w = (p.get("window") || "off").split(",");
    const s = {
      n_q: int(p.get("n_q"), 1), n_k: int(p.get("n_k"), 1), is_causal: p.get("is_causal") === "1",
      align: p.get("align") === "bottom_right" ? "bottom_right" : "top_left",
      window: w[0] === "off" ? null : w.length === 2 ? w.map((x) => (x === "inf" ? null : int(x, 0))) : [NaN],
      sink_tokens: int(p.get("sink_tokens") || "0", 0),
      chunk: (p.get("chunk") || "off") === "off" ? null : int(p.get("chunk"), 1),
    };
    return [s.n_q, s.n_k, s.sink_tokens, s.chunk, ...(s.window || [])].some(Number.isNaN) ? null : s;
  }
  function hashOf(s) {
    const w = s.window ? s.window.map((x) => (x === null ? "inf" : x)).join(",") : "off";
    return `#n_q=${s.n_q}&n_k=${s.n_k}&is_causal=${+s.is_causal}&align=${s.align}` +
      `&window=${w}&sink_tokens=${s.sink_tokens}&chunk=${s.chunk === null ? "off" : s.chunk}`;
  }

  function mount(root) {
    const $ = (sel) => root.querySelector(sel), out = {};
    const data = JSON.parse($("script.me-data").textContent), T = data.texts;
    const form = $("form"), f = form.elements, limit = data.limit, svg = $(".me-grid"), status = $(".me-status");
    for (const k of ["sdpa", "flash", "flex"]) out[k] = [$(".me-" + k), $(`.me-${k}-note`)];
    let current = data.default, pending = null;
    // Touch only what changed: phones are slow.
    const put = (node, key, value) => { if (node[key] !== value) node[key] = value; };

    function readForm() {
      const num = (name, low) => {
        const v = Math.round(Number(f[name].value));
        return f[name].value !== "" && Number.isFinite(v) ? Math.max(low, Math.min(limit, v)) : current[name];
      };
      const side = (name) => (f[name].value === "none" ? null : +f[name].value);
      return {
        n_q: num("n_q", 1), n_k: num("n_k", 1), is_causal: f.is_causal.checked, align: f.align.value,
        window: f.window.checked ? [side("left"), side("right")] : null,
        sink_tokens: num("sink_tokens", 0), chunk: f.chunk.value === "none" ? null : +f.chunk.value,
      };
    }
    // Leave the number being typed alone.
    function writeForm(s, typing) {
      for (const k of ["n_q", "n_k", "sink_tokens"]) if (f[k] !== typing && String(s[k]) !== f[k].value) f[k].value = s[k];
      const w = s.window || [null, null], name = (x) => (x === null ? "none" : String(x));
      put(f.is_causal, "checked", s.is_causal);
      put(f.align, "value", s.align);
      put(f.window, "checked", s.window !== null);
      put(f.left, "value", name(w[0]));
      put(f.right, "value", name(w[1]));
      f.left.disabled = f.right.disabled = s.window === null;
      put(f.chunk, "value", name(s.chunk));
    }
    function setCall(k, [line, note]) {
      put(out[k][0], "textContent", line === null ? "—" : line);
      out[k][0].parentNode.classList.toggle("me-none", line === null);
      put(out[k][1], "textContent", note);
    }
    // Drawn once, at the largest size; viewBox crops.
    const parts = [];
    for (let j = 0; j < limit; j++) parts.push(`<text x="${LEFT + j * PITCH + CELL / 2}" y="11" text-anchor="middle">k${j}</text>`);
    for (let i = 0; i < limit; i++) {
      const y = TOP + i * PITCH;
      parts.push(`<text class="me-q" x="${LEFT - 4}" y="${y + 13}" text-anchor="end">q${i}</text>`);
      for (let j = 0; j < limit; j++) parts.push(`<rect x="${LEFT + j * PITCH}" y="${y}" width="${CELL}" height="${CELL}" rx="2"/>`);
    }
    svg.innerHTML = parts.join("");
    const rects = svg.querySelectorAll("rect"), labels = svg.querySelectorAll(".me-q");
    const classes = [], flags = [];
    let drawn = "";
    function draw(s, allowed) {
      if (drawn !== s.n_q + "," + s.n_k) {
        drawn = s.n_q + "," + s.n_k;
        const w = LEFT + s.n_k * PITCH, h = TOP + s.n_q * PITCH;
        svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
        svg.setAttribute("width", w * SCALE);
        svg.setAttribute("height", h * SCALE);
      }
      const text = [];
      for (let i = 0; i < s.n_q; i++) {
        const row = allowed && allowed[i], keys = [];
        const flag = row && !row.includes(true) ? "me-q me-empty" : "me-q";
        if (flags[i] !== flag) labels[i].setAttribute("class", (flags[i] = flag));
        for (let j = 0, n = i * limit; j < s.n_k; j++, n++) {
          if (row && row[j]) keys.push("k" + j);
          const cls = !row ? "me-x" : row[j] ? "me-on" : "me-off";
          if (classes[n] !== cls) rects[n].setAttribute("class", (classes[n] = cls));
        }
        text.push(`q${i} ${keys.join(" ") || "none"}`);
      }
      const label = allowed ? sizes(T.pairs, s) + text.join("; ") : T.refused;
      if (svg.getAttribute("aria-label") !== label) svg.setAttribute("aria-label", label);
    }
    let said = null;
    function describe(s, allowed, message, empty) {
      const make = (tag, props) => Object.assign(document.createElement(tag), props);
      const key = JSON.stringify([message, allowed, s.n_k]);
      if (key === said) return;
      said = key;
      status.replaceChildren();
      if (message !== null) return status.append(T.raises, make("span", { className: "me-error", textContent: message }));
      const count = allowed.flat().filter(Boolean).length;
      status.append(`${count} of ${s.n_q * s.n_k} pairs allowed.`);
      if (empty.length) {
        const list = empty.length === 1 ? empty[0] : empty.slice(0, -1).join(", ") + " and " + empty.at(-1);
        status.append(` ${list} ${empty.length === 1 ? "sees" : "see"}${T.empty[0]}`,
          make("a", { href: data.empty_rows_link, textContent: T.empty[1] }), sizes(T.empty[2], s));
      }
    }
    function show(s, typing) {
      current = s;
      writeForm(s, typing);
      const message = error(s, data.errors), allowed = message === null ? grid(s) : null;
      const empty = [];
      if (allowed) allowed.forEach((row, i) => row.includes(true) || empty.push("q" + i));
      draw(s, allowed);
      describe(s, allowed, message, empty);
      setCall("sdpa", [sdpaCall(s, empty.length > 0), allowed ? T.sdpa : T.sdpa_raises]);
      setCall("flash", allowed ? flashCall(s, allowed, T) : [null, T.refused]);
      setCall("flex", allowed ? flexCall(s, T) : [null, T.refused]);
      const state = { ...s };
      if (allowed) state.allowed = allowed; else state.error = message;
      root.setAttribute("data-state", JSON.stringify(state));
    }

    function changed(e) {
      show(readForm(), e.type === "input" ? e.target : null);
      pending = pending || setTimeout(() => {
        pending = null;
        history.replaceState(null, "", hashOf(current));
      }, 0);
    }
    form.addEventListener("input", changed);
    form.addEventListener("change", changed);
    form.addEventListener("submit", (e) => e.preventDefault());
    window.addEventListener("hashchange", () => {
      const s = readHash(limit);
      if (s) {
        show(s);
        root.scrollIntoView();
      }
    });
    const fromUrl = readHash(limit);
    show(fromUrl || data.default);
    if (fromUrl && window.scrollY === 0) root.scrollIntoView({ behavior: "instant" });
  }

  const start = () => document.querySelectorAll('[data-figure="mask-explorer"]').forEach(mount);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
