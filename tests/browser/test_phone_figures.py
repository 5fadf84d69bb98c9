"""On a 390 px phone, every figure's smallest text renders at 9 CSS px or more."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

from .test_site import pages

PHONE = {"width": 390, "height": 844}
MIN_TEXT_PX = 9.0
VISIBLE_SVGS = """els => els
    .filter(e => e.getBoundingClientRect().width > 0)
    .map(e => ({src: e.currentSrc || e.src, width: e.getBoundingClientRect().width}))"""
_WIDTH = re.compile(r'<svg[^>]*\swidth="([\d.]+)pt"')
# Matplotlib writes each text as glyph paths in a group scaled by its size:
# transform="translate(x y) scale(s -s)" draws s * 100 pt type; glyphs within
# it (a super- or subscript) may be scaled again.
_TEXT = re.compile(r'<g [^>]*transform="translate\([^)]*\) scale\(([\d.]+) -[\d.]+\)"')


def svg_text_sizes(svg: str) -> tuple[float, list[float]]:
    """The SVG's width in points and the size in points of each text in it."""
    width = float(_WIDTH.search(svg).group(1))
    return width, [float(s) * 100 for s in _TEXT.findall(svg)]


def test_svg_text_sizes_reads_matplotlib_output():
    svg = (
        '<svg width="345.6pt">'
        '<g style="x" transform="translate(1 2) scale(0.09 -0.09)">'
    )
    assert svg_text_sizes(svg) == (345.6, [9.0])


def test_figure_text_is_readable_on_a_phone(site, open_page):
    too_small = []
    checked = 0
    # With JavaScript off the landing page shows its static figures instead.
    for name, js in [*((name, True) for name in pages(site)), ("index.html", False)]:
        page = open_page(name, js=js, **PHONE)
        for image in page.eval_on_selector_all("article img", VISIBLE_SVGS):
            path = urlparse(image["src"]).path
            if not path.endswith(".svg"):
                continue
            file = site / Path(path).relative_to(Path(urlparse(page.url).path).parent)
            width_pt, sizes = svg_text_sizes(file.read_text())
            if not sizes:
                continue
            checked += 1
            smallest = min(sizes) * image["width"] / width_pt
            if smallest < MIN_TEXT_PX:
                too_small.append(f"{name}: {file.name[:12]} {smallest:.1f} px")
        page.close()
    assert checked >= 10, f"only {checked} figures found: the scan is broken"
    assert not too_small, f"figure text under {MIN_TEXT_PX} px at 390 px: {too_small}"
