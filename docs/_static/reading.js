/* Reading by keyboard, screen reader and touch, at every width.
   - Furo's drawer toggles are labels over hidden checkboxes: keyboards cannot
     reach them. Each becomes a real button that says whether its drawer is
     open; opening moves focus into the drawer, Escape or leaving it closes it
     and focus returns to the button.
   - A formula or table that scrolls sideways (or, for a tall table on a
     phone, down) is a named tab stop while it scrolls, and only then.
   - A citation opens its reference where it is cited: on hover or focus, or
     on a tap on a touch screen, with a link to the full entry.
   - Each code block has a copy button that copies what a reader would type:
     of a doctest, its >>> and ... lines without the prompts.
   - Paper gets the exercises' answers open. */
(function () {
  "use strict";

  // -- drawers ---------------------------------------------------------------
  var DRAWERS = {
    __navigation: { drawer: ".sidebar-drawer", id: "sdpa-site-nav", name: "Site navigation" },
    __toc: { drawer: ".toc-drawer", id: "sdpa-page-toc", name: "On this page" },
  };

  function drawers() {
    Object.keys(DRAWERS).forEach(function (key) {
      var box = document.getElementById(key), spec = DRAWERS[key];
      var drawer = document.querySelector(spec.drawer);
      if (!box || !drawer) return;
      drawer.id = spec.id;
      var buttons = [], opener = null;
      document.querySelectorAll('label[for="' + key + '"]:not(.overlay)').forEach(function (label) {
        var button = document.createElement("button");
        button.type = "button";
        button.className = label.className + " sdpa-drawer-toggle";
        button.setAttribute("aria-controls", spec.id);
        button.setAttribute("aria-expanded", "false");
        button.setAttribute("aria-label", spec.name);
        while (label.firstChild) button.appendChild(label.firstChild);
        label.replaceWith(button);
        button.addEventListener("click", function () { set(!box.checked, button); });
        buttons.push(button);
      });
      function focusable() {
        return Array.prototype.filter.call(
          drawer.querySelectorAll("a[href], input, button, [tabindex='0']"),
          function (el) { return el.offsetParent !== null || el === document.activeElement; });
      }
      function set(open, from) {
        box.checked = open;
        buttons.forEach(function (b) { b.setAttribute("aria-expanded", String(open)); });
        if (open) {
          opener = from || opener;
          var target = focusable()[0];
          if (target) target.focus();
        } else if (opener && (drawer.contains(document.activeElement) || document.activeElement === document.body)) {
          opener.focus();
        }
      }
      // The overlay (a label) and a link inside toggle the checkbox directly.
      box.addEventListener("change", function () { set(box.checked); });
      drawer.addEventListener("click", function (e) {
        if (box.checked && e.target.closest("a[href]") && isDrawer(drawer)) box.checked = false;
      });
      document.addEventListener("keydown", function (e) {
        if (e.key === "Escape" && box.checked) { e.preventDefault(); set(false); }
      });
      // Tabbing out of an open drawer, over the page it covers, closes it.
      document.addEventListener("focusin", function (e) {
        if (box.checked && isDrawer(drawer) && !drawer.contains(e.target) && buttons.indexOf(e.target) < 0) {
          box.checked = false;
          buttons.forEach(function (b) { b.setAttribute("aria-expanded", "false"); });
        }
      });
    });
  }
  // A drawer slides over the page only below Furo's breakpoints.
  function isDrawer(drawer) {
    return getComputedStyle(drawer).position === "fixed";
  }

  // -- containers that scroll ------------------------------------------------
  var SCROLLERS = "div.math, .table-wrapper, .sdpa-w-table, .os-table";

  function scrollers() {
    var boxes = document.querySelectorAll(SCROLLERS);
    if (!boxes.length) return;
    function check(el) {
      var scrolls = el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1;
      el.classList.toggle("sdpa-scrolls", scrolls);
      if (!el.dataset.sdpaName) {
        var caption = el.querySelector("caption");
        var what = el.matches("div.math") ? "Formula" : "Table";
        el.dataset.sdpaName = el.getAttribute("aria-label") ||
          (caption ? what + ": " + caption.textContent.trim().replace(/\s*¶$/, "") : what);
      }
      if (scrolls) {
        el.tabIndex = 0;
        el.setAttribute("role", el.getAttribute("role") || "group");
        el.setAttribute("aria-label", el.dataset.sdpaName);
      } else {
        el.removeAttribute("tabindex");
        if (el.getAttribute("role") === "group" || el.getAttribute("role") === "region") el.removeAttribute("role");
        el.removeAttribute("aria-label");
      }
    }
    var observer = new ResizeObserver(function (entries) { entries.forEach(function (e) { check(e.target); }); });
    boxes.forEach(function (el) { check(el); observer.observe(el); });
    // What is inside may widen without the box changing size: math once its
    // fonts arrive.
    function all() { boxes.forEach(check); }
    document.fonts.ready.then(all);
    window.addEventListener("load", all);
  }

  // -- citations -------------------------------------------------------------
  var count = 0;
  function citations() {
    var store = document.getElementById("sdpa-references");
    if (!store) return;
    var entries = {};
    store.content.querySelectorAll("[data-ref]").forEach(function (el) { entries[el.dataset.ref] = el; });
    var open = null, hideTimer = null, touch = false, pressing = false, openBefore = null;
    // A press focuses the link before its click: the click decides, not the focus.
    // A tap's focus may come after its pointerup (a gesture is recognised late
    // on a busy page), so the tap toggles from the state before it began.
    document.addEventListener("pointerdown", function (e) {
      touch = e.pointerType === "touch";
      pressing = true;
      openBefore = open && open.link;
    }, true);
    ["pointerup", "pointercancel"].forEach(function (type) {
      document.addEventListener(type, function () { setTimeout(function () { pressing = false; }, 0); }, true);
    });

    function close() {
      if (!open) return;
      open.link.setAttribute("aria-expanded", "false");
      open.card.remove();
      open = null;
    }
    function show(link) {
      clearTimeout(hideTimer);
      if (open && open.link === link) return;
      close();
      var id = link.hash.slice(1), entry = entries[id];
      if (!entry) return;
      var card = document.createElement("span");
      card.className = "sdpa-cite-card";
      card.id = "sdpa-cite-card-" + count++;
      card.setAttribute("role", "group");
      card.setAttribute("aria-label", "Reference");
      card.appendChild(entry.cloneNode(true));
      var more = document.createElement("a");
      more.setAttribute("href", link.getAttribute("href"));
      more.className = "sdpa-cite-full";
      more.textContent = "Full entry on the References page";
      card.appendChild(more);
      link.after(card);
      link.setAttribute("aria-expanded", "true");
      link.setAttribute("aria-controls", card.id);
      place(link, card);
      card.addEventListener("mouseenter", function () { clearTimeout(hideTimer); });
      card.addEventListener("mouseleave", later);
      open = { link: link, card: card };
    }
    // Below the citation (above it near the screen's foot), inside the column.
    function place(link, card) {
      card.style.left = card.style.top = "0px";
      var origin = card.getBoundingClientRect(), r = link.getBoundingClientRect();
      var column = (link.closest("article") || document.body).getBoundingClientRect();
      var x = Math.max(column.left, Math.min(r.left, column.right - origin.width));
      var y = r.bottom + 4;
      if (y + origin.height > window.innerHeight && r.top - origin.height - 4 > 0) {
        y = r.top - origin.height - 4;
      }
      card.style.left = x - origin.left + "px";
      card.style.top = y - origin.top + "px";
    }
    function later() {
      clearTimeout(hideTimer);
      hideTimer = setTimeout(function () {
        if (open && !open.card.contains(document.activeElement) && document.activeElement !== open.link) close();
      }, 250);
    }
    document.querySelectorAll("a.sdpa-cite").forEach(function (link) {
      link.setAttribute("aria-expanded", "false");
      link.addEventListener("mouseenter", function () { if (!touch) show(link); });
      link.addEventListener("mouseleave", later);
      link.addEventListener("focus", function () { if (!pressing) show(link); });
      link.addEventListener("click", function (e) {
        // On a touch screen the first tap opens the card; its link goes on.
        if (touch) {
          e.preventDefault();
          if (openBefore === link) close(); else show(link);
          openBefore = open && open.link;
        }
      });
    });
    document.addEventListener("focusout", function () {
      setTimeout(function () {
        if (open && !open.card.contains(document.activeElement) && document.activeElement !== open.link) close();
      }, 0);
    });
    document.addEventListener("keydown", function (e) {
      if (e.key === "Escape" && open) {
        var link = open.link;
        var inside = open.card.contains(document.activeElement);
        close();
        if (inside) link.focus();
        hideTimer = null;
      }
    });
    document.addEventListener("click", function (e) {
      if (open && !open.card.contains(e.target) && e.target.closest("a.sdpa-cite") !== open.link) close();
    });
  }

  // -- copy buttons ------------------------------------------------------------
  var PROMPT = /^(>>> |\.\.\. )/;
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var done = document.execCommand("copy");
    area.remove();
    return done ? Promise.resolve() : Promise.reject(new Error("copy refused"));
  }
  function copyButtons() {
    document.querySelectorAll("div.highlight > pre").forEach(function (pre) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sdpa-copy";
      button.textContent = "Copy";
      button.addEventListener("click", function () {
        var lines = pre.textContent.replace(/\n$/, "").split("\n");
        var typed = lines.filter(function (l) { return PROMPT.test(l); });
        var text = typed.length ? typed.map(function (l) { return l.replace(PROMPT, ""); }).join("\n")
          : lines.join("\n");
        copyText(text).then(function () { button.textContent = "Copied"; },
                            function () { button.textContent = "Select and copy"; });
        setTimeout(function () { button.textContent = "Copy"; }, 2000);
      });
      pre.parentNode.appendChild(button);
    });
  }

  // -- paper -----------------------------------------------------------------
  function printing() {
    var opened = [];
    window.addEventListener("beforeprint", function () {
      document.querySelectorAll("details:not([open])").forEach(function (d) { d.open = true; opened.push(d); });
    });
    window.addEventListener("afterprint", function () {
      opened.forEach(function (d) { d.open = false; });
      opened = [];
    });
  }

  function settle() {
    // Let the load's own jump to a #section land first, instantly.
    requestAnimationFrame(function () { document.documentElement.classList.add("sdpa-settled"); });
  }

  function start() {
    if (document.readyState === "complete") settle();
    else window.addEventListener("load", settle);
    drawers();
    scrollers();
    citations();
    copyButtons();
    printing();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
