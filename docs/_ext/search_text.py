"""Search that reads formulas as text, and says what it can do from disk.

* **The index.** Sphinx indexes a formula's LaTeX source word by word, so
  ``\\sqrt{d_k}`` adds "sqrt" and "d_k" and no way to find ``dk``. The indexer
  is fed a copy of each page in which every formula is its symbols only:
  commands dropped, ``d_k`` kept, and ``dk`` added beside it.
* **The snippets.** Search results quote the page's text, which for a
  KaTeX formula is its MathML, its LaTeX annotation and its HTML glyphs run
  together ("dk\\sqrt{d_k}dk"). ``search-text.js`` (on the search page only)
  replaces each formula by a plain-text reading of it before quoting.
* **From disk.** A page opened from ``file://`` may not read other files,
  so snippets cannot be fetched there; the search page then skips them and
  says that ``nox -s serve`` shows them.
"""

from __future__ import annotations

import re

from docutils import nodes

SCRIPT = "search-text.js"
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


def setup(app):
    app.add_js_file(SCRIPT)
    app.connect("write-started", _index_readable_math)
    app.connect("html-page-context", _search_page_only)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
