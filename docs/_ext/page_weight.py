"""What a page costs a reader to load, and what it makes the browser wait for.

* **Images declare their size, and wait to be needed.** Sphinx writes
  ``<img>`` without ``width`` and ``height``, so the page shifts as each
  figure arrives. After the build every image gets the intrinsic size of its
  file (an SVG's ``width``/``height``, a PNG's header; the stylesheet still
  scales it to the column) and ``loading="lazy"``, so a phone fetches the
  figures near what it shows, not every figure of a long page at once.
* **The no-JavaScript figure stays out of the way.** The landing page's static
  stand-in for the interactive figure (a container with the class
  ``sdpa-widget-fallback``, or ``figure-fallback`` for the other interactive
  figures) is written inside ``<noscript>``, so a browser running scripts
  neither draws nor downloads it.
* **Each page carries exactly the CSS it uses, inline.** Eight stylesheets in
  the head cost a phone on a slow network a second round trip before it may
  paint anything. After the build each page gets one ``<style>`` in their
  place: the rules of every sheet it linked, in their order, without the
  selectors that name a class neither the page nor any script uses, and
  without custom properties that nothing then reads. The sheets themselves
  are then linked by no page and are not shipped. sphinx-design's script is
  linked only from pages with tabs, each interactive figure's only from the
  page that has it (:data:`FIGURE_ASSETS`).
* **Scripts never hold up the page.** Every ``<script src>`` is deferred: it
  runs, in order, once the document is parsed.
"""

from __future__ import annotations

import posixpath
import re
import struct
from pathlib import Path

from css_tools import drop_unused_properties, rebase_urls, trim_css
from docutils import nodes
from sphinx.writers.html5 import HTML5Translator

#: The class of a container that stands in for an interactive figure when
#: scripts do not run: the landing page's, and a generic one for the others.
FALLBACK_CLASSES = ("sdpa-widget-fallback", "figure-fallback")
#: Each interactive figure's root carries ``data-figure="<name>"``; its script
#: and stylesheet (files named by the value here) are linked only from pages
#: that hold that root.
FIGURE_ASSETS = {
    "scaled-vs-unscaled": "sdpa-widget",
    "online-softmax": "online-softmax",
    "mask-explorer": "mask-explorer",
}
_IMG = re.compile(r"<img\b[^>]*>")
_SRC = re.compile(r'\ssrc="([^"]+)"')
_SVG_SIZE = re.compile(rb"<svg\b[^>]*>", re.S)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|`(?:[^`\\]|\\.)*`')
_UNITS = {
    "pt": 4 / 3,
    "px": 1.0,
    "": 1.0,
    "in": 96.0,
    "cm": 96 / 2.54,
    "mm": 9.6 / 2.54,
}


# -- image sizes ---------------------------------------------------------------
def _length(text: bytes | None) -> float | None:
    if not text:
        return None
    m = re.fullmatch(rb"\s*([\d.]+)\s*([a-z]*)\s*", text)
    if not m or m.group(2).decode() not in _UNITS:
        return None
    return float(m.group(1)) * _UNITS[m.group(2).decode()]


def image_size(path: Path) -> tuple[int, int] | None:
    """Intrinsic CSS-pixel size of an SVG or PNG file, or None."""
    try:
        head = path.read_bytes()[:4096]
    except OSError:
        return None
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return struct.unpack(">II", head[16:24])
    tag = _SVG_SIZE.search(head)
    if not tag:
        return None
    attr = dict(re.findall(rb'\s([\w-]+)="([^"]*)"', tag.group(0)))
    width, height = _length(attr.get(b"width")), _length(attr.get(b"height"))
    if (width is None or height is None) and attr.get(b"viewBox"):
        # SVG separates viewBox's four numbers by spaces, commas or both.
        box = re.split(rb"[\s,]+", attr[b"viewBox"].strip())
        if len(box) != 4:
            return None
        _, _, width, height = (float(x) for x in box)
    if not width or not height:
        return None
    return round(width), round(height)


def sized_images(html: str, page_dir: Path) -> str:
    """``html`` with each size-less ``<img>`` given its file's intrinsic size."""

    def add_size(match: re.Match) -> str:
        tag = match.group(0)
        src = _SRC.search(tag)
        if not src or re.search(r"\s(width|height)=", tag):
            return tag
        size = image_size(page_dir / src.group(1).split("?")[0])
        if size is None:
            return tag
        end = "/>" if tag.endswith("/>") else ">"
        lazy = "" if "loading=" in tag else ' loading="lazy"'
        return (
            f'{tag[: -len(end)].rstrip()} width="{size[0]}" height="{size[1]}"'
            f"{lazy} {end}"
        )

    return _IMG.sub(add_size, html)


# -- per-page assets -------------------------------------------------------------
#: Furo marks <html class="no-js"> and drops the mark once the document is
#: parsed; what shows only without scripts would flash, and what shows only
#: with them would arrive late and push the page down. Dropped at once here.
NO_JS_MARK = '<script>document.documentElement.classList.remove("no-js")</script>'


def _page_context(app, pagename, templatename, context, doctree):
    context["metatags"] = context.get("metatags", "") + NO_JS_MARK
    body = context.get("body")
    unused = []
    if not (body and re.search(r'class="(?:[^"]*\s)?sd-', body)):
        unused += ["sphinx-design", "design-tabs"]
    elif "sd-tab-" not in body:
        unused += ["design-tabs"]  # the exercises' dropdowns are <details>: no script
    unused += [
        asset
        for figure, asset in FIGURE_ASSETS.items()
        if not (body and f'data-figure="{figure}"' in body)
    ]
    for key in ("css_files", "script_files"):
        if key in context:
            context[key] = [
                f for f in context[key] if not any(n in str(f.filename) for n in unused)
            ]


# -- the no-JavaScript stand-in ------------------------------------------------------
def _wrap_containers(app):
    inner = app.registry.translation_handlers.get("html", {}).get("container")
    visit, depart = inner or (
        HTML5Translator.visit_container,
        HTML5Translator.depart_container,
    )

    def visit_container(self, node):
        if set(FALLBACK_CLASSES) & set(node["classes"]):
            self.body.append("<noscript>")
        visit(self, node)

    def depart_container(self, node):
        depart(self, node)
        if set(FALLBACK_CLASSES) & set(node["classes"]):
            self.body.append("</noscript>\n")

    app.add_node(
        nodes.container, override=True, html=(visit_container, depart_container)
    )


_LINK = re.compile(r'<link rel="stylesheet"[^>]*\shref="([^"?]+)(?:\?[^"]*)?"[^>]*>\n?')
_SCRIPT_SRC = re.compile(r"<script (?![^>]*\b(?:defer|async|type=)\b)(?=[^>]*\ssrc=)")
_CLASS_ATTR = re.compile(r'\sclass="([^"]*)"')
_STYLE_ATTR = re.compile(r'\sstyle="([^"]*)"')
_STYLE_TAG = re.compile(r"<style>(.*?)</style>", re.S)


def page_classes(html: str) -> set[str]:
    """Every class named in a page's ``class`` attributes."""
    return {name for value in _CLASS_ATTR.findall(html) for name in value.split()}


def script_words(outdir: Path) -> set[str]:
    """Every word in the string literals of the site's scripts.

    A script adds classes by name, in a string: take every word of every
    string literal (minified code's one-letter variables would keep all of
    Pygments' one-letter token classes otherwise). The search index is data,
    not code: its words would keep every rule whose class is an English word.
    """
    used: set[str] = set()
    for script in sorted(outdir.rglob("*.js")):
        if script.name == "searchindex.js":
            continue
        for literal in _STRING.findall(script.read_text(encoding="utf-8")):
            used.update(re.findall(r"-?[_a-zA-Z][\w-]*", literal))
    return used


def inline_styles(
    html: str, page: str, sheets: dict[str, str], words: set[str], scripts: str = ""
) -> str:
    """The page with its stylesheet links replaced by one ``<style>``.

    ``page`` and the keys of ``sheets`` are paths from the site's root;
    ``words`` are the class names scripts may add, ``scripts`` their code
    (a custom property they read counts as read).
    """
    links = _LINK.findall(html)
    if not links:
        return html
    used = page_classes(html) | words
    here = posixpath.dirname(page)
    parts = {}
    for href in links:
        sheet = posixpath.normpath(posixpath.join(here, href))
        if sheet in sheets:
            parts[sheet] = rebase_urls(trim_css(sheets[sheet], used), sheet, page)
    readers = " ".join(_STYLE_ATTR.findall(html) + _STYLE_TAG.findall(html))
    parts = drop_unused_properties(parts, f"{readers} {scripts}")
    css = "\n".join(text for text in parts.values() if text)
    first = True

    def replace(match: re.Match) -> str:
        nonlocal first
        keep = posixpath.normpath(posixpath.join(here, match.group(1))) not in sheets
        if keep:
            return match.group(0)
        if first:
            first = False
            return f"<style>{css}</style>\n"
        return ""

    return _LINK.sub(replace, html)


def _finish(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    static = outdir / "_static"
    sheets = {
        sheet.relative_to(outdir).as_posix(): sheet.read_text(encoding="utf-8")
        for sheet in sorted(static.rglob("*.css"))
    }
    words = script_words(outdir)
    scripts = "".join(
        p.read_text(encoding="utf-8")
        for p in sorted(outdir.rglob("*.js"))
        if p.name != "searchindex.js"
    )
    pages = sorted(outdir.rglob("*.html"))
    for page in pages:
        text = page.read_text(encoding="utf-8")
        # Images are copied after the pages are written, and the index pages'
        # templates write some of their own: size them all here.
        new = sized_images(text, page.parent)
        name = page.relative_to(outdir).as_posix()
        new = inline_styles(new, name, sheets, words, scripts)
        new = _SCRIPT_SRC.sub("<script defer ", new)
        if new != text:
            page.write_text(new, encoding="utf-8")
    linked = {
        posixpath.normpath(
            posixpath.join(posixpath.dirname(p.relative_to(outdir).as_posix()), href)
        )
        for p in pages
        for href in _LINK.findall(p.read_text(encoding="utf-8"))
    }
    for sheet in sheets:
        if sheet not in linked:
            (outdir / sheet).unlink()


def _clear_trimmed(app):
    # Every build copies the stylesheets afresh; one that copies only into an
    # empty place (MyST-NB's) would meet last build's trimmed sheet and warn.
    static = Path(app.outdir, "_static")
    if app.builder.format == "html" and static.is_dir():
        for sheet in static.rglob("*.css"):
            sheet.unlink()


def setup(app):
    _wrap_containers(app)
    app.connect("builder-inited", _clear_trimmed, priority=100)
    app.connect("html-page-context", _page_context)
    # Last: Furo writes its pygments.css (with the dark theme's colours) when
    # the build finishes, and every other pass must have changed the pages.
    app.connect("build-finished", _finish, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
