/* Search snippets that read as text. Loaded on the search page only.
   A KaTeX formula's text is its MathML, its LaTeX annotation and its glyphs
   run together ("dk\sqrt{d_k}dk"); each formula is read once, from its LaTeX,
   as plain text ("√d_k") before Sphinx quotes the page. Opened from disk the
   browser may not fetch the pages, so snippets are skipped, and said so. */
(function () {
  "use strict";
  var SYMBOLS = {
    cdot: "·", times: "×", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠",
    approx: "≈", sim: "∼", to: "→", infty: "∞", in: "∈", sum: "Σ", prod: "Π",
    ldots: "…", dots: "…", cdots: "⋯", mid: "|", pm: "±", top: "ᵀ", prime: "′",
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε",
    theta: "θ", lambda: "λ", mu: "μ", pi: "π", sigma: "σ", tau: "τ", phi: "φ",
    Sigma: "Σ", Delta: "Δ", ell: "ℓ", lVert: "‖", rVert: "‖", Vert: "‖",
    langle: "⟨", rangle: "⟩", lfloor: "⌊", rfloor: "⌋", lceil: "⌈", rceil: "⌉",
  };
  var SPACES = { quad: " ", qquad: " ", ",": " ", ";": " ", ":": " ", " ": " ", "!": "", "\\": "; " };

  // One braced group or single token at i: [text, next index].
  function group(tex, i) {
    while (tex[i] === " ") i++;
    if (tex[i] === "{") {
      var depth = 1, j = i + 1;
      while (j < tex.length && depth) {
        if (tex[j] === "\\") j++;
        else if (tex[j] === "{") depth++;
        else if (tex[j] === "}") depth--;
        j++;
      }
      return [read(tex.slice(i + 1, j - 1)), j];
    }
    if (tex[i] === "\\") {
      var m = /^\\([A-Za-z]+|.)/.exec(tex.slice(i));
      return [read(m[0]), i + m[0].length];
    }
    return [tex[i] || "", i + 1];
  }
  function wrap(t) { return t.length > 1 ? "(" + t + ")" : t; }

  function read(tex) {
    var out = "", i = 0, g, a, b;
    while (i < tex.length) {
      var c = tex[i];
      if (c === "\\") {
        var m = /^\\([A-Za-z]+|.)/.exec(tex.slice(i)), name = m[1];
        i += m[0].length;
        if (name === "frac" || name === "dfrac" || name === "tfrac") {
          a = group(tex, i); b = group(tex, a[1]); i = b[1];
          out += wrap(a[0]) + "/" + wrap(b[0]);
        } else if (name === "sqrt") {
          g = group(tex, i); i = g[1]; out += "√" + wrap(g[0]);
        } else if (/^(operatorname|mathrm|text|textrm|mathit|mathbf|mathbb|mathcal|boldsymbol)$/.test(name)) {
          g = group(tex, i); i = g[1]; out += g[0];
        } else if (name === "begin" || name === "end") {
          i = group(tex, i)[1]; // an environment's name (aligned, cases) is not read
        } else if (/^(left|right|big|Big|bigg|Bigg|displaystyle|limits)$/.test(name)) {
          continue;
        } else if (name in SPACES) out += SPACES[name];
        else if (name in SYMBOLS) out += SYMBOLS[name];
        else out += name.length === 1 ? name : " " + name + " ";
      } else if (c === "^") {
        g = group(tex, i + 1); i = g[1];
        out += g[0] === "ᵀ" || g[0] === "′" ? g[0] : "^" + wrap(g[0]);
      } else if (c === "_") {
        g = group(tex, i + 1); i = g[1]; out += "_" + wrap(g[0]);
      } else if (c === "{" || c === "}" || c === "&") {
        i++;
      } else {
        out += c; i++;
      }
    }
    return out.replace(/\s+/g, " ").trim();
  }

  function readable(doc) {
    doc.querySelectorAll(".katex").forEach(function (k) {
      var tex = k.querySelector('annotation[encoding="application/x-tex"]');
      var text = tex ? read(tex.textContent) : (k.querySelector(".katex-mathml") || k).textContent;
      k.replaceWith(doc.createTextNode(text));
    });
    return doc;
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (typeof Search === "undefined") return;
    var htmlToText = Search.htmlToText;
    Search.htmlToText = function (html, anchor) {
      var doc = readable(new DOMParser().parseFromString(html, "text/html"));
      return htmlToText(doc.documentElement.outerHTML, anchor);
    };
    if (location.protocol === "file:") {
      DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
      var results = document.getElementById("search-results");
      var note = document.createElement("p");
      note.className = "search-from-disk";
      note.textContent = "This site is open from disk, where the browser does not let a page " +
        "read the others, so results come without a quote from each page. Serve the " +
        "site (nox -s serve, then http://127.0.0.1:8000) to see them.";
      if (results) results.parentNode.insertBefore(note, results);
    }
  });
  window.sdpaReadTeX = read; // for the tests
})();
