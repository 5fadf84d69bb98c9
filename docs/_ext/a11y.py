"""Small accessibility repairs to Sphinx's HTML.

Sphinx writes a toctree's caption as ``<p role="heading">`` without the
``aria-level`` that a heading role requires (axe: aria-required-attr,
critical). The sidebar's captions are section headings of the navigation,
so they get level 2.
"""

from __future__ import annotations

from sphinx import addnodes
from sphinx.writers.html5 import HTML5Translator

CAPTION_LEVEL = "2"


class AccessibleTranslator(HTML5Translator):
    def visit_title(self, node):
        if isinstance(node.parent, addnodes.compact_paragraph) and node.parent.get(
            "toctree"
        ):
            attrs = {"aria-level": CAPTION_LEVEL}
            self.body.append(
                self.starttag(node, "p", "", CLASS="caption", ROLE="heading", **attrs)
            )
            self.body.append('<span class="caption-text">')
            self.context.append("</span></p>\n")
        else:
            super().visit_title(node)


def setup(app):
    app.set_translator("html", AccessibleTranslator, override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
