"""Search that reads formulas as text, and says what it can do from disk.

* **The index.** Sphinx indexes a formula's LaTeX source word by word, so
  ``\\sqrt{d_k}`` adds "sqrt" and "d_k" and no way to find ``dk``. The indexer
  is fed a copy of each page in which every formula is its symbols only:
  commands dropped, ``d_k`` kept, and ``dk`` added beside it.
* **The snippets.** Search results quote the page's text, which for a
  KaTeX formula is its MathML, its LaTeX annotation and its HTML glyphs run
  together ("dk\\sqrt{d_k}dk"). ``search-text.js`` (on the search page only)
  replaces each formula by a plain-text reading of it before quoting.
* **Words as readers type them.** The English indexer splits text into
  words like Sphinx's, and adds for each word the forms a reader may type
  instead: ``dk`` and ``d_k`` for ``dₖ`` (a title's Unicode subscript),
  ``flash`` and ``attention`` for ``FlashAttention``, ``bf16`` for
  ``bfloat16`` and back. A title's words count as title words, so "Why scale
  by √dₖ" is found, and ranked, by "dk".
* **Titles first.** ``search_scorer.js`` ranks a page's title and headings
  above API objects, and a page whose own title holds the query first.
* **From disk.** A page opened from ``file://`` may not read other files,
  so snippets cannot be fetched there; the search page then skips them and
  says that ``nox -s serve`` shows them.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from docutils import nodes
from sphinx.search.en import SearchEnglish

SCRIPT = "search-text.js"
SCORER = Path(__file__).with_name("search_scorer.js")
#: Names of one number format that readers type either way.
SYNONYMS = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "float32": "fp32",
    "float64": "fp64",
}
SYNONYMS |= {short: long for long, short in SYNONYMS.items()}
_SEARCH_WORD = re.compile(r"\w+")
_CAMEL = re.compile(r"[A-Z][a-z]+|[a-z]+|[A-Z]+(?![a-z])|\d+")
_COMMAND = re.compile(r"\\[A-Za-z]+|\\.")
_WORD = re.compile(r"[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*")


def math_words(latex: str) -> str:
    """The searchable words of a formula: symbols, not LaTeX commands.

    Examples
    --------
    >>> math_words(r"\\operatorname{softmax}\\!\\left(\\frac{QK^\\top}{\\sqrt{d_k}}\\right)")
    'softmax QK d_k dk'
    """
    text = re.sub(r"_\{([^{}]*)\}", r"_\1", latex)
    text = _COMMAND.sub(" ", text)
    words = []
    for word in _WORD.findall(text):
        words.append(word)
        if "_" in word:
            words.append(word.replace("_", ""))
    return " ".join(words)


def typed_forms(word: str) -> list[str]:
    """Other spellings of ``word`` that a reader may search for.

    >>> typed_forms("dₖ"), typed_forms("FlashAttention"), typed_forms("BF16")
    (['dk', 'd_k'], ['Flash', 'Attention'], ['bfloat16'])
    """
    forms = []
    plain = unicodedata.normalize("NFKC", word)
    if plain != word:
        forms.append(plain)
        marked = "".join(
            "_" + unicodedata.normalize("NFKC", c)
            if unicodedata.decomposition(c).startswith("<sub>")
            else unicodedata.normalize("NFKC", c)
            for c in word
        )
        if marked != plain:
            forms.append(marked)
    parts = _CAMEL.findall(word)
    mixed = not word.isupper() and not word.islower()
    if mixed and len(parts) > 1 and "".join(parts) == word:
        forms += parts
    synonym = SYNONYMS.get(word.lower())
    if synonym:
        forms.append(synonym)
    return forms


def search_words(text: str) -> list[str]:
    """Sphinx's words of ``text``, each followed by its :func:`typed_forms`."""
    out = []
    for word in _SEARCH_WORD.findall(text):
        out.append(word)
        out += typed_forms(word)
    return out


class SiteSearch(SearchEnglish):
    """English search with the forms readers type (:func:`typed_forms`)."""

    def split(self, input: str) -> list[str]:
        return search_words(input)


def _readable_copy(doctree):
    copy = doctree.deepcopy()
    for formula in list(
        copy.findall(lambda n: isinstance(n, nodes.math | nodes.math_block))
    ):
        latex = formula.astext()
        formula.children = []
        formula.append(nodes.Text(math_words(latex)))
    return copy


def _index_readable_math(app, builder):
    if builder.format != "html":
        return
    index_page = builder.index_page

    def index_with_readable_math(pagename, doctree, title):
        index_page(pagename, _readable_copy(doctree), title)

    builder.index_page = index_with_readable_math


def _search_page_only(app, pagename, templatename, context, doctree):
    if pagename != "search" and "script_files" in context:
        context["script_files"] = [
            f for f in context["script_files"] if SCRIPT not in str(f.filename)
        ]


def _scorer(app, config):
    config.html_search_scorer = config.html_search_scorer or str(SCORER)


def setup(app):
    app.add_search_language(SiteSearch)
    app.connect("config-inited", _scorer)
    app.add_js_file(SCRIPT)
    app.connect("write-started", _index_readable_math)
    app.connect("html-page-context", _search_page_only)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
