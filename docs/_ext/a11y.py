"""Small accessibility repairs to Sphinx's HTML.

Sphinx writes a toctree's caption as ``<p role="heading">`` without the
``aria-level`` that a heading role requires (axe: aria-required-attr,
critical). The sidebar's captions are section headings of the navigation,
so they get level 2.

Docutils writes each citation of a citation list with the role
``doc-biblioentry``, which DPUB-ARIA 1.1 deprecated and which is not a list
item, so the list has no items (axe: aria-required-children, critical). The
entries get ``role="listitem"``.

Furo wraps each table in a ``div.table-wrapper`` that scrolls sideways on a
narrow screen; a scrolling region must be reachable by keyboard (axe:
scrollable-region-focusable, serious), so the wrappers get ``tabindex="0"``.
"""

from __future__ import annotations

from docutils import nodes
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

    def visit_citation(self, node):
        super().visit_citation(node)
        self.body[-1] = self.body[-1].replace(
            'role="doc-biblioentry"', 'role="listitem"'
        )


def setup(app):
    app.set_translator("html", AccessibleTranslator, override=True)
    # Containers are drawn by a handler that MyST-Parser registers on the
    # translator instance, so a subclass method would never run: wrap that
    # handler instead, and leave every other container to it.
    inner = app.registry.translation_handlers.get("html", {}).get("container")
    inner_visit, inner_depart = inner or (
        HTML5Translator.visit_container,
        HTML5Translator.depart_container,
    )

    def visit_container(self, node):
        if "table-wrapper" in node["classes"]:
            self.body.append(
                self.starttag(node, "div", CLASS="docutils container", tabindex="0")
            )
        else:
            inner_visit(self, node)

    app.add_node(nodes.container, override=True, html=(visit_container, inner_depart))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
