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
scrollable-region-focusable, serious), so the wrappers are written as named
tab stops (``tabindex="0"``, ``role="group"``, ``aria-label="Table"``), as are
display formulas. ``_static/reading.js`` keeps them so only while they
actually scroll, and names a table after its caption.

After the build, the page template's two ``<aside>`` landmarks get names
(axe: landmark-unique); the icons above the article (the link to the page's
source, the theme button) become a named navigation landmark, so no content
sits outside one (axe: region); so does Furo's "Back to top" link, which
shows once a reader scrolls back up, inside a navigation landmark of its
own; and an empty header cell (the corner of a
table whose rows are labelled) becomes a plain cell (axe: empty-table-header).
"""

from __future__ import annotations

import re
from pathlib import Path

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


ASIDES = {
    "sidebar-drawer": ("sdpa-site-nav", "Site navigation"),
    "toc-drawer": ("sdpa-page-toc", "On this page"),
}
_ASIDE = re.compile(r'<aside class="((sidebar-drawer|toc-drawer)[^"]*)">')
_ICONS = '<div class="content-icon-container">'
ICONS = (
    '<div class="content-icon-container" role="navigation" aria-label="Page source">'
)
_BACK = re.compile(
    r'(?<!<nav class="sdpa-back-to-top" aria-label="Back to top">)'
    r'(<a href="#" class="back-to-top muted-link">.*?</a>)',
    re.S,
)
BACK = r'<nav class="sdpa-back-to-top" aria-label="Back to top">\1</nav>'
_EMPTY_TH = re.compile(r'<th class="head([^"]*)">(?:<p></p>)?</th>')


def landmarks(html: str) -> str:
    """Named asides and landmarks, and empty header cells as plain cells.

    >>> landmarks('<aside class="toc-drawer no-toc"><th class="head text-left"><p></p></th>')
    '<aside class="toc-drawer no-toc" id="sdpa-page-toc" aria-label="On this page"><td class="head text-left"></td>'
    """

    def aside(match: re.Match) -> str:
        ident, name = ASIDES[match.group(2)]
        return f'<aside class="{match.group(1)}" id="{ident}" aria-label="{name}">'

    html = _BACK.sub(BACK, _ASIDE.sub(aside, html).replace(_ICONS, ICONS))
    return _EMPTY_TH.sub(r'<td class="head\1"></td>', html)


def _finish(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for page in sorted(Path(app.outdir).rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        new = landmarks(text)
        if new != text:
            page.write_text(new, encoding="utf-8")


def setup(app):
    app.connect("build-finished", _finish, priority=450)
    app.set_translator("html", AccessibleTranslator, override=True)
    # Containers are drawn by a handler that MyST-Parser registers on the
    # translator instance, so a subclass method would never run: wrap that
    # handler instead. A table's wrapper is drawn by the handler too, and
    # only its opening tag is then replaced, so that another extension's
    # wrapper around the same handler (page_weight's <noscript>) holds in
    # either order of registration.
    inner = app.registry.translation_handlers.get("html", {}).get("container")
    inner_visit, inner_depart = inner or (
        HTML5Translator.visit_container,
        HTML5Translator.depart_container,
    )

    def visit_container(self, node):
        start = len(self.body)
        inner_visit(self, node)
        if "table-wrapper" not in node["classes"]:
            return
        tag = self.starttag(
            node,
            "div",
            CLASS="docutils container",
            tabindex="0",
            role="group",
            **{"aria-label": "Table"},
        )
        opened = [
            i for i in range(start, len(self.body)) if self.body[i].startswith("<div")
        ]
        self.body[opened[-1]] = tag

    app.add_node(nodes.container, override=True, html=(visit_container, inner_depart))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
