"""Every page of the built site, checked the way readers and maintainers meet it."""

from __future__ import annotations

import itertools
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from .browsing import ALL_IMAGES
from .helpers import SIDEWAYS_OVERFLOW, contrast_script

try:
    from axe_playwright_python.sync_playwright import Axe
except ImportError:  # the browser fixture skips, or fails under REQUIRE_BROWSER=1
    Axe = None

# Every byte a page needs, decoded, once all its images have loaded.
MAX_PAGE_BYTES = 400_000
# Every SVG figure, on disk.
MAX_SVG_BYTES = 60_000
IMAGES_WITHOUT_ALT = (
    "els => els.filter(e => !(e.getAttribute('alt') || '').trim()).map(e => e.src)"
)
HEADINGS = "article h1, article h2, article h3, article h4, article h5, article h6"
WIDGET_CONTRAST = contrast_script(
    "()",
    """
    const style = sel => getComputedStyle(document.querySelector(sel));
    const panel = style('.sdpa-w-panel').backgroundColor;
    const bars = Array.from(document.querySelectorAll('.sdpa-w-bar')).slice(0, 4)
        .map(b => ratio(getComputedStyle(b).backgroundColor, panel));
    return {bars, text: ratio(style('.sdpa-w-stats').color, panel)};""",
)
RAW_TEX = ("\\frac", "$$", "\\sqrt", "\\operatorname", "\\begin{", "\\left")
# axe's impacts the site must never have; target-size (WCAG 2.2's 24 px
# targets) is off by default in axe and switched on here.
FAILING = {"moderate", "serious", "critical"}
AXE_OPTIONS = {
    "resultTypes": ["violations"],
    "rules": {"target-size": {"enabled": True}},
}
# Whatever their impact: every landmark named apart, one h1 on every page.
# (axe's empty-table-header also flags a header whose only text is a formula,
# whose MathML it does not count; empty cells are checked in the HTML below.)
ALWAYS = {"landmark-unique", "page-has-heading-one"}
EMPTY_HEADER = re.compile(r"<th\b[^>]*>(?:\s|<p>\s*</p>)*</th>")


def pages(site: Path) -> list[str]:
    """Every HTML page of the built site, found by walking it."""
    found = sorted(str(p.relative_to(site)) for p in site.rglob("*.html"))
    assert "index.html" in found
    return found


class _Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])


def test_site_has_the_pages_of_the_text_and_beyond(site):
    names = set(pages(site))
    for page in (
        "index",
        "formula",
        "similarity",
        "scaling",
        "steps",
        "api",
        "cost",
        "flash",
        "masks",
        "precision",
        "variants",
    ):
        assert f"{page}.html" in names


def test_internal_links_and_anchors_resolve(site):
    parsed = {}
    for name in pages(site):
        parser = _Anchors()
        parser.feed((site / name).read_text(encoding="utf-8"))
        parsed[name] = parser
    broken = []
    for name, parser in parsed.items():
        for href in parser.links:
            target = urlparse(urljoin(f"http://site/{name}", href))
            if (
                urlparse(href).scheme in ("http", "https", "mailto")
                or target.netloc != "site"
            ):
                continue
            path = unquote(target.path.lstrip("/")) or "index.html"
            if path.endswith("/"):
                path += "index.html"
            if not (site / path).exists():
                broken.append(f"{name}: {href} (no {path})")
            elif (
                target.fragment
                and path.endswith(".html")
                and target.fragment not in parsed[path].ids
            ):
                broken.append(f"{name}: {href} (no #{target.fragment} in {path})")
    assert not broken, "\n".join(broken)


def page_problems(name, page):
    """Alt text, raw TeX and the heading outline of one loaded page."""
    problems = [
        f"{name}: image without alt text: {src}"
        for src in page.eval_on_selector_all("img", IMAGES_WITHOUT_ALT)
    ]
    unnamed = page.eval_on_selector_all(
        "svg[role=img]", "els => els.filter(e => !e.getAttribute('aria-label')).length"
    )
    if unnamed:
        problems.append(f"{name}: {unnamed} svg role=img without aria-label")
    text = page.inner_text("body")
    problems += [
        f"{name}: raw TeX {tex!r} is visible" for tex in RAW_TEX if tex in text
    ]
    levels = page.eval_on_selector_all(
        HEADINGS, "els => els.map(e => Number(e.tagName[1]))"
    )
    if levels and (levels[0] != 1 or levels.count(1) != 1):
        problems.append(f"{name}: headings {levels[:6]}: need exactly one h1, first")
    for before, after in itertools.pairwise(levels):
        if after > before + 1:
            problems.append(f"{name}: heading outline skips from h{before} to h{after}")
            break
    return problems


DECODED = """() => {
    const [page] = performance.getEntriesByType('navigation');
    const parts = {[location.pathname.split('/').pop()]: page.decodedBodySize};
    for (const r of performance.getEntriesByType('resource'))
        parts[r.name.split('/').pop().split('?')[0]] = r.decodedBodySize;
    return parts;
}"""


def decoded_bytes(page):
    """Every response the page needed once all its images loaded, decoded."""
    page.evaluate(ALL_IMAGES)
    page.wait_for_load_state("networkidle")
    return page.evaluate(DECODED)


def test_every_page_loads_cleanly_and_stays_light(site, open_page, page_weights):
    """Console, foreign hosts and 404s are checked by open_page; the rest here.

    A page's weight counts everything it needed once every lazy image has
    loaded: its HTML, scripts, fonts and every figure.
    """
    problems = []
    for name in pages(site):
        page = open_page(name, width=390, height=844)
        parts = decoded_bytes(page)
        total = page_weights[name] = sum(parts.values())
        if total > MAX_PAGE_BYTES:
            biggest = sorted(parts.items(), key=lambda kv: -kv[1])[:4]
            problems.append(
                f"{name}: {total / 1000:.0f} kB once its images loaded, over the "
                f"budget; most: {[(n[:24], round(b / 1000)) for n, b in biggest]}"
            )
        problems += page_problems(name, page)
        page.context.close()
    assert not problems, "\n".join(problems)


def test_every_published_number_cites_its_sources_on_the_api_page(site):
    """The citations extension adds each constant's SOURCES under its entry."""
    from sdpa_ref import published

    text = (site / "api-kernels.html").read_text(encoding="utf-8")
    for name, keys in published.SOURCES.items():
        start = text.index(f'id="sdpa_ref.published.{name}"')
        entry = text[start : text.index("</dd>", start)]
        label = "Sources:" if len(keys) > 1 else "Source:"
        assert label in entry, name
        cites = re.findall(
            r'class="reference internal sdpa-cite" href="references', entry
        )
        assert len(cites) >= len(keys), name


def test_no_table_has_an_empty_header_cell(site):
    empty = [
        f"{name}: {cell}"
        for name in pages(site)
        for cell in EMPTY_HEADER.findall((site / name).read_text(encoding="utf-8"))
    ]
    assert not empty, empty


def test_every_svg_figure_is_small(site):
    figures = sorted(site.rglob("*.svg"))
    assert len(figures) > 10, "no figures found: the scan is broken"
    heavy = [
        f"{p.relative_to(site)}: {p.stat().st_size / 1000:.0f} kB"
        for p in figures
        if p.stat().st_size > MAX_SVG_BYTES
    ]
    assert not heavy, heavy


def axe_failures(axe, page) -> list[tuple[str, str, list]]:
    """(rule, impact, first targets) of each violation the site must never have."""
    results = axe.run(page, options=AXE_OPTIONS)
    return [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in results.response["violations"]
        if v["impact"] in FAILING or v["id"] in ALWAYS
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_no_accessibility_violations(site, open_page, scheme, width):
    axe = Axe()
    found = []
    for name in pages(site):
        page = open_page(name, color_scheme=scheme, width=width)
        page.wait_for_load_state("load")
        for rule, impact, targets in axe_failures(axe, page):
            found.append(f"{name} [{scheme}, {width}px]: {rule} ({impact}): {targets}")
        page.context.close()
    assert not found, "\n".join(found)


@pytest.mark.parametrize("width", [390, 1280])
def test_the_back_to_top_link_sits_in_a_landmark_once_it_shows(open_page, width):
    # Furo shows the link only after a reader scrolls back up, a state the
    # scan at load above never sees.
    page = open_page("flash.html", width=width)
    page.wait_for_load_state("load")
    page.mouse.wheel(0, 3000)
    page.wait_for_timeout(300)
    page.mouse.wheel(0, -400)
    link = page.locator(".back-to-top")
    link.wait_for(state="visible")
    assert not axe_failures(Axe(), page)
    page.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_widget_graphics_contrast_in_both_themes(open_page, scheme):
    page = open_page(color_scheme=scheme)
    ratios = page.evaluate(WIDGET_CONTRAST)
    assert min(ratios["bars"]) >= 3.0, ratios
    assert ratios["text"] >= 4.5, ratios


def test_pages_print_cleanly(site, open_page):
    problems = []
    for name in pages(site):
        page = open_page(name)
        page.emulate_media(media="print")
        overflow = page.evaluate(SIDEWAYS_OVERFLOW)
        if overflow > 1:
            problems.append(f"{name}: printed page overflows sideways by {overflow}px")
        pdf = page.pdf(format="A4")
        if not pdf.startswith(b"%PDF"):
            problems.append(f"{name}: no PDF")
        page.context.close()
    assert not problems, "\n".join(problems)


def test_printing_the_landing_page_shows_a_figure(open_page):
    # With JavaScript, paper gets the figure as the reader left it, without
    # its controls; without, the static stand-in.
    page = open_page()
    page.emulate_media(media="print")
    assert page.locator(
        '[data-figure="scaled-vs-unscaled"] .sdpa-w-panels'
    ).is_visible()
    assert not page.locator(".sdpa-w-controls").is_visible()
    static = open_page(js=False)
    static.emulate_media(media="print")
    assert static.locator(".sdpa-widget-fallback").is_visible()


def test_site_works_opened_from_disk(site, open_page):
    page = open_page("index.html#q=2&dk=16", base=site.resolve().as_uri() + "/")
    radio = page.get_by_role("radio", name="Q2", exact=True)
    assert radio.is_checked()
    assert page.evaluate("document.fonts.check('16px KaTeX_Main')")
    page.wait_for_function("document.fonts.status === 'loaded'")
    loaded = page.evaluate(
        "[...document.fonts].filter(f => f.status === 'loaded').map(f => f.family)"
    )
    assert any("KaTeX" in family for family in loaded)
    other = open_page("scaling.html", base=site.resolve().as_uri() + "/")
    assert "22.6" in other.inner_text("body")


def test_at_a_wide_screen_both_sidebars_are_named_landmarks(open_page):
    # From 1312 px both asides show, and two unnamed asides were two
    # complementary landmarks a screen reader could not tell apart.
    page = open_page("scaling.html", width=1440, height=900)
    options = {
        "resultTypes": ["violations"],
        "runOnly": {
            "type": "rule",
            "values": ["landmark-unique", "region", "target-size"],
        },
    }
    violations = Axe().run(page, options=options).response["violations"]
    assert not violations, [
        (v["id"], [n["target"] for n in v["nodes"]]) for v in violations
    ]
    names = page.eval_on_selector_all(
        "aside", "els => els.map(e => e.getAttribute('aria-label'))"
    )
    assert names == ["Site navigation", "On this page"]
