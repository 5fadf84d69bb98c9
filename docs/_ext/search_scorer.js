/* The search's scores (Sphinx's html_search_scorer; it lands in
   language_data.js, after searchtools.js, so it replaces Sphinx's Scorer).
   Sphinx's defaults, except that a page's title and headings outweigh an API
   object (titles score 15, objects at most 11, a function 9), and a page
   whose own title holds a query word comes first: 5 more where the title
   has it as a word, 2 where inside a word, and up to 3 more the larger the
   share of the title it is. Words are compared as plain letters and digits,
   so "√dₖ", "dk" and "d_k" are one word: a query for "dk" puts "Why scale
   by √dₖ" first, not last of a tie broken by name. */
var Scorer = {
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 0, 1: -2, 2: -8 },
  objPrioDefault: -2,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
  titleWord: 5,
  titlePart: 2,
  titleShare: 3,
  plain: function (text) {
    return text.normalize("NFKC").toLowerCase().replace(/[^\p{L}\p{N}\s]+/gu, "");
  },
  score: function (result) {
    var title = result[1], anchor = result[2], score = result[4], kind = result[6];
    if (kind === "object" || anchor) return score;
    var page = Scorer.plain(title.split(" > ")[0]);
    var words = page.split(/\s+/), joined = words.join("");
    var query = new URLSearchParams(window.location.search).get("q") || "";
    var best = 0;
    Scorer.plain(query).split(/\s+/).forEach(function (word) {
      if (!word) return;
      var share = Scorer.titleShare * word.length / Math.max(joined.length, 1);
      if (words.indexOf(word) >= 0) best = Math.max(best, Scorer.titleWord + share);
      else if (joined.indexOf(word) >= 0) best = Math.max(best, Scorer.titlePart + share);
    });
    return score + best;
  },
};
