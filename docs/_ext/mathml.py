"""Render math to MathML when the site is built: no JavaScript, no CDN.

Browsers draw MathML Core natively, so the pages need no math library at
read time, work offline and stay light. The LaTeX is converted by the
``math-core`` package, which targets MathML Core.
"""

from __future__ import annotations

from docutils import nodes
from math_core import LatexError, LatexToMathML
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

logger = logging.getLogger(__name__)
_CONVERTER = LatexToMathML()


def _mathml(self, node, *, display: bool) -> str:
    latex = node.astext()
    try:
        return _CONVERTER.convert_with_local_state(latex, displaystyle=display)
    except LatexError as exc:
        logger.warning("cannot render math %r: %s", latex, exc, location=node)
        return f"<code>{self.encode(latex)}</code>"


def visit_math(self, node):
    self.body.append(self.starttag(node, "span", "", CLASS="math"))
    self.body.append(_mathml(self, node, display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node):
    self.body.append(self.starttag(node, "div", CLASS="math"))
    if node["number"]:
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})')
        self.add_permalink_ref(node, "Link to this equation")
        self.body.append("</span>")
    self.body.append(_mathml(self, node, display=True) + "</div>\n")
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer(
        "mathml",
        inline_renderers=(visit_math, None),
        block_renderers=(visit_displaymath, None),
    )
    return {"parallel_read_safe": True, "parallel_write_safe": True}
