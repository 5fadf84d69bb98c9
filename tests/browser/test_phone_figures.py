"""On a 390 px phone, every figure's smallest text renders at 9 CSS px or more."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

from .helpers import PHONE
from .test_site import pages

MIN_TEXT_PX = 9.0
VISIBLE_SVGS = """els => els
    .filter(e => e.getBoundingClientRect().width > 0)
    .map(e => ({src: e.currentSrc || e.src, width: e.getBoundingClientRect().width}))"""
_WIDTH = re.compile(r'<svg[^>]*\swidth="([\d.]+)pt"')
# Figures keep their text as text (figures._svg): each label is a <text> of a
# class whose rule sets its size in points (the SVG's user unit), or, for
# mathtext, runs of <tspan> of such classes, sub- and superscripts smaller.
_RULE = re.compile(r"\.(t\d+)\{font:([\d.]+)px ")
_LABEL = re.compile(r"<text( class=\"(t\d+)\")?[^>]*>(.*?)</text>", re.S)
_SPAN_CLASS = re.compile(r'<tspan class="(t\d+)"')


def svg_text_sizes(svg: str) -> tuple[float, list[float]]:
    """The SVG's width in points and the size in points of each label in it.

    A mathtext label's size is that of its largest run: its sub- and
    superscripts are smaller by design.
    """
    width = float(_WIDTH.search(svg).group(1))
    size = {name: float(px) for name, px in _RULE.findall(svg)}
    sizes = []
    for _, cls, body in _LABEL.findall(svg):
        runs = [size[c] for c in _SPAN_CLASS.findall(body)] if not cls else [size[cls]]
        if runs:
            sizes.append(max(runs))
    return width, sizes


def test_svg_text_sizes_reads_compacted_matplotlib_output():
    svg = (
        '<svg width="345.6pt"><style>.t0{font:9px f0}.t1{font:10px f1}'
        ".t2{font:7px f1}</style>"
        '<text class="t0" x="1" y="2">0.5</text>'
        '<g><text><tspan class="t1" x="0" y="0">d</tspan>'
        '<tspan class="t2" x="6" y="2">k</tspan></text></g>'
    )
    assert svg_text_sizes(svg) == (345.6, [9.0, 10.0])


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
