"""What a page costs a reader to load, and what it makes the browser guess.

* **Images declare their size, and wait to be needed.** Sphinx writes
  ``<img>`` without ``width`` and ``height``, so the page shifts as each
  figure arrives. After the build every image gets the intrinsic size of its
  file (an SVG's ``width``/``height``, a PNG's header; the stylesheet still
  scales it to the column) and ``loading="lazy"``, so a phone fetches the
  figures near what it shows, not every figure of a long page at once.
* **The no-JavaScript figure stays out of the way.** The landing page's static
  stand-in for the interactive figure (a container with the class
  ``sdpa-widget-fallback``) is written inside ``<noscript>``, so a browser
  running scripts neither draws nor downloads it.
* **Unused CSS is not shipped.** After the build, every stylesheet in
  ``_static`` loses the selectors that name a class no page uses and no
  script mentions (Furo's, MyST-NB's, sphinx-design's, KaTeX's and Pygments'
  sheets each style far more than this site shows); sphinx-design's sheet and
  tab script are linked only from pages that use its components, and the
  interactive figure's only from the page that has it. Custom properties
  that nothing reads any more (Furo's icons for admonitions the site never
  uses, say) go too.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from docutils import nodes
from sphinx.writers.html5 import HTML5Translator

FALLBACK_CLASS = "sdpa-widget-fallback"
WIDGET_MARK = 'data-figure="scaled-vs-unscaled"'
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
        _, _, width, height = (float(x) for x in attr[b"viewBox"].split())
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
def _page_context(app, pagename, templatename, context, doctree):
    body = context.get("body")
    unused = []
    if not (body and re.search(r'class="(?:[^"]*\s)?sd-', body)):
        unused += ["sphinx-design", "design-tabs"]
    elif "sd-tab-" not in body:
        unused += ["design-tabs"]  # the exercises' dropdowns are <details>: no script
    if not (body and WIDGET_MARK in body):
        unused += ["sdpa-widget"]
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
        if FALLBACK_CLASS in node["classes"]:
            self.body.append("<noscript>")
        visit(self, node)

    def depart_container(self, node):
        depart(self, node)
        if FALLBACK_CLASS in node["classes"]:
            self.body.append("</noscript>\n")

    app.add_node(
        nodes.container, override=True, html=(visit_container, depart_container)
    )


# -- stylesheet trimming -----------------------------------------------------------
def _blocks(css: str):
    """Top-level (prelude, body or None) pairs; comments dropped, strings kept."""
    out, i, start, n = [], 0, 0, len(css)
    while i < n:
        c = css[i]
        if css.startswith("/*", i):
            end = css.find("*/", i + 2)
            end = n if end < 0 else end + 2
            keep = css.startswith("/*!", i)
            css = css[:i] + (css[i:end] if keep else "") + css[end:]
            n = len(css)
            i = i + (end - i if keep else 0)
            continue
        if c in "\"'":
            j = i + 1
            while j < n and css[j] != c:
                j += 2 if css[j] == "\\" else 1
            i = j + 1
            continue
        if c == ";":
            out.append((css[start : i + 1].strip(), None))
            start = i = i + 1
            continue
        if c == "{":
            depth, j = 1, i + 1
            while j < n and depth:
                if css[j] in "\"'":
                    q, j = css[j], j + 1
                    while j < n and css[j] != q:
                        j += 2 if css[j] == "\\" else 1
                elif css[j] == "{":
                    depth += 1
                elif css[j] == "}":
                    depth -= 1
                j += 1
            out.append((css[start:i].strip(), css[i + 1 : j - 1]))
            start = i = j
            continue
        i += 1
    return out


def _split_selectors(prelude: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(prelude):
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(prelude[start:i])
            start = i + 1
    parts.append(prelude[start:])
    return [p.strip() for p in parts if p.strip()]


def _selector_used(selector: str, used: set[str]) -> bool:
    if "\\" in selector or re.search(r":(is|where|has|matches)\(", selector):
        return True
    bare = re.sub(r":not\([^()]*\)", "", selector)
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # attribute values are not classes
    return all(name in used for name in re.findall(r"\.(-?[_a-zA-Z][\w-]*)", bare))


def trim_css(css: str, used: set[str]) -> str:
    """CSS without the selectors that need a class outside ``used``."""
    out = []
    for prelude, body in _blocks(css):
        if body is None:
            out.append(prelude)
        elif prelude.startswith("@"):
            keyword = prelude[1:].split("(")[0].split()[0].lower()
            if keyword in ("media", "supports", "layer", "container", "document"):
                inner = trim_css(body, used)
                if inner:
                    out.append(f"{prelude}{{{inner}}}")
            else:  # @font-face, @keyframes, @page: kept whole
                out.append(f"{prelude}{{{body}}}")
        else:
            keep = [s for s in _split_selectors(prelude) if _selector_used(s, used)]
            if keep:
                out.append(f"{','.join(keep)}{{{body.strip()}}}")
    return "\n".join(out)


def _declarations(body: str) -> list[str]:
    """A rule's declarations, split at the semicolons outside strings and ()."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(body):
        if quote:
            quote = "" if c == quote and body[i - 1] != "\\" else quote
        elif c in "\"'":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == ";" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


_CUSTOM = re.compile(r"(--[\w-]+)\s*:")
_VAR = re.compile(r"var\(\s*(--[\w-]+)")
_RULE = re.compile(r"\{([^{}]*)\}")


def drop_unused_properties(sheets: dict[str, str], extra: str = "") -> dict[str, str]:
    """The sheets without custom properties (``--x: ...``) that nothing reads.

    A property is read if a kept declaration of any sheet, an inline style or
    a script (``extra``) names it in ``var()``; reading is followed through
    properties that are themselves kept.
    """
    decls = [
        d
        for text in sheets.values()
        for b in _RULE.findall(text)
        for d in _declarations(b)
    ]
    read = set(_VAR.findall(extra))
    plain = [d for d in decls if not _CUSTOM.match(d)]
    for d in plain:
        read.update(_VAR.findall(d))
    custom = [(m.group(1), d) for d in decls if (m := _CUSTOM.match(d))]
    while True:
        more = {v for name, d in custom if name in read for v in _VAR.findall(d)} - read
        if not more:
            break
        read |= more

    def rule(match: re.Match) -> str:
        kept = [
            d
            for d in _declarations(match.group(1))
            if not (m := _CUSTOM.match(d)) or m.group(1) in read
        ]
        return "{" + ";".join(kept) + "}"

    return {name: _RULE.sub(rule, text) for name, text in sheets.items()}


def used_names(outdir: Path) -> set[str]:
    """Every class in the site's HTML, and every word in its scripts' strings."""
    used: set[str] = set()
    for page in outdir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for value in re.findall(r'\sclass="([^"]*)"', text):
            used.update(value.split())
    # A script adds classes by name, in a string: take every word of every
    # string literal (minified code's one-letter variables would keep all of
    # Pygments' one-letter token classes otherwise).
    for script in outdir.rglob("*.js"):
        for literal in _STRING.findall(script.read_text(encoding="utf-8")):
            used.update(re.findall(r"-?[_a-zA-Z][\w-]*", literal))
    return used


def _finish(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    # Images are copied after the pages are written, and the index pages'
    # templates write some of their own: size them all here.
    for page in outdir.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        sized = sized_images(text, page.parent)
        if sized != text:
            page.write_text(sized, encoding="utf-8")
    used = used_names(outdir)
    sheets = {
        sheet: sheet.read_text(encoding="utf-8")
        for sheet in sorted((outdir / "_static").rglob("*.css"))
    }
    trimmed = {sheet: trim_css(text, used) + "\n" for sheet, text in sheets.items()}
    scripts = "".join(
        p.read_text(encoding="utf-8") for p in sorted(outdir.rglob("*.js"))
    )
    styles = "".join(
        " ".join(re.findall(r'\sstyle="([^"]*)"', p.read_text(encoding="utf-8")))
        for p in sorted(outdir.rglob("*.html"))
    )
    trimmed = drop_unused_properties(trimmed, scripts + styles)
    for sheet, text in trimmed.items():
        if len(text) < len(sheets[sheet]):
            sheet.write_text(text, encoding="utf-8")


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
    app.connect("build-finished", _finish)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
