/* Furo's colour-theme button is named "Toggle Light / Dark / Auto color
   theme" whatever it shows. Name it after the active mode and the next one,
   as Furo cycles them: auto, then the opposite of the system's, then the
   system's own. */
(function () {
  "use strict";
  var system = window.matchMedia("(prefers-color-scheme: dark)");
  function name() {
    var dark = system.matches, mode = document.body.dataset.theme || "auto";
    var order = dark ? ["auto", "light", "dark"] : ["auto", "dark", "light"];
    var next = order[(order.indexOf(mode) + 1) % 3];
    function say(m) { return m === "auto" ? "automatic (as the system: " + (dark ? "dark" : "light") + ")" : m; }
    var label = "Colour theme: " + say(mode) + ". Switch to " + say(next);
    document.querySelectorAll(".theme-toggle").forEach(function (b) {
      b.setAttribute("aria-label", label);
      b.title = label;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    name();
    new MutationObserver(name).observe(document.body, { attributes: true, attributeFilter: ["data-theme"] });
    system.addEventListener("change", name);
  });
})();
