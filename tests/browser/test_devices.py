"""The site as readers meet it on a phone, a tablet, by keyboard, on paper,
without JavaScript, through search and opened from disk."""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest

from sdpa_ref import example

from .helpers import PHONE, expect, url_ending
from .pdf_marks import lowest_marks
from .test_site import pages

ROOT = '[data-figure="scaled-vs-unscaled"]'
# A4 in CSS pixels, as page.pdf() lays it out with no margins.
A4 = {"width": 794, "height": 1123}


def settle(page):
    page.wait_for_load_state("load")
    page.wait_for_function("document.fonts.status === 'loaded'")
    page.wait_for_timeout(200)


# -- links into the landing page -------------------------------------------------------
@pytest.mark.parametrize("width", [1280, 390])
def test_a_section_link_lands_on_its_section_and_keeps_its_fragment(open_page, width):
    page = open_page("index.html#the-worked-example", width=width, height=844)
    settle(page)
    expect(page).to_have_url(url_ending("index.html#the-worked-example"))
    top = page.locator("#the-worked-example").evaluate(
        "el => el.getBoundingClientRect().top"
    )
    header = page.evaluate(
        "document.querySelector('.mobile-header').getBoundingClientRect().height"
    )
    assert 0 <= top - header <= 100, f"the section starts {top}px below the top"


def test_a_plain_visit_adds_nothing_to_the_url(open_page):
    page = open_page()
    settle(page)
    assert "#" not in page.url
    page.get_by_role("radio", name="Q2", exact=True).click()
    expect(page).to_have_url(url_ending("index.html#q=2&dk=4"))


def test_a_state_link_restores_the_figure_and_shows_it(open_page):
    page = open_page("index.html#q=2&dk=64", **PHONE)
    settle(page)
    expect(page.get_by_role("radio", name="Q2", exact=True)).to_be_checked()
    expect(page).to_have_url(url_ending("#q=2&dk=64"))
    controls = page.locator(f"{ROOT} .sdpa-w-controls")
    expect(controls).to_be_in_viewport()


# -- the interactive figure on a phone -------------------------------------------------
FIT = """() => {
    const root = document.querySelector('[data-figure="scaled-vs-unscaled"]');
    const controls = root.querySelector('.sdpa-w-controls');
    const header = document.querySelector('.mobile-header').getBoundingClientRect();
    const gap = controls.getBoundingClientRect().top - header.bottom;
    window.scrollBy({top: gap, behavior: 'instant'});
    const stats = root.querySelectorAll('.sdpa-w-stats');
    return {top: controls.getBoundingClientRect().top,
            bottom: stats[stats.length - 1].getBoundingClientRect().bottom,
            screen: innerHeight};
}"""


@pytest.mark.parametrize("query", range(len(example.QUERY_NAMES)))
def test_controls_and_both_results_fit_one_phone_screen(open_page, query):
    for width in example.WIDTHS:
        page = open_page(f"index.html#q={query}&dk={width}", **PHONE)
        settle(page)
        box = page.evaluate(FIT)
        assert box["bottom"] <= box["screen"], (
            f"q={query} dk={width}: the last entropy line ends at "
            f"{box['bottom']:.0f}px with the controls just below the header at "
            f"{box['top']:.0f}px"
        )
        page.context.close()


def test_widest_head_shows_the_pattern_and_how_often_it_repeats(open_page):
    page = open_page("index.html#q=3&dk=256", **PHONE)
    table = page.locator(f"{ROOT} table.sdpa-w-vectors")
    rows = table.locator("tbody tr")
    assert rows.count() == 1 + 4 + 4
    query = rows.first.locator("th, td").all_inner_texts()
    assert query == ["Q3", "1 0 1 0", "× 64", "256"]
    assert "64 times" in table.locator("caption").inner_text()
    height = table.evaluate("el => el.getBoundingClientRect().height")
    assert height < 450, f"the table is {height}px tall"
    box = page.locator(f"{ROOT} .sdpa-w-table")
    assert box.evaluate("el => el.scrollWidth <= el.clientWidth + 1")


def test_saturated_outputs_leave_the_value_dot_visible(open_page):
    # Q0 at the widest head: both outputs sit on K0's value.
    page = open_page("index.html#q=0&dk=256", **PHONE)
    # Judge the figure at rest: the outputs glide for 0.2 s to their places.
    hits = page.evaluate("""async () => {
        await Promise.all(document.getAnimations().map(a => a.finished));
        const dot = document.querySelectorAll('[data-figure] .sdpa-w-plane circle')[0];
        dot.scrollIntoView({block: 'center', behavior: 'instant'});
        const r = dot.getBoundingClientRect();
        const cx = r.left + r.width / 2, cy = r.top + r.height / 2, d = r.width / 4;
        return [[0, 0], [d, 0], [-d, 0], [0, d], [0, -d]].map(([x, y]) =>
            document.elementFromPoint(cx + x, cy + y) === dot);
    }""")
    assert all(hits), hits


def test_the_plane_has_axes_like_the_static_figure(open_page):
    page = open_page()
    plane = page.locator(f"{ROOT} svg.sdpa-w-plane")
    text = plane.locator("text").all_text_contents()
    assert "value coordinate 1" in text
    assert "value coordinate 2" in text
    for tick in ("−4", "−2", "0", "2", "4"):
        assert tick in text


# -- wide blocks on a phone ------------------------------------------------------------
SCROLL_CUES = """() => Array.from(document.querySelectorAll(
        'div.math, .table-wrapper, .sdpa-w-table'))
    .filter(el => el.scrollWidth > el.clientWidth + 1)
    .map(el => {
        const s = getComputedStyle(el);
        const gradients = (s.backgroundImage.match(/gradient/g) || []).length;
        const cue = gradients >= 2 && s.backgroundAttachment.includes('local')
            && s.backgroundAttachment.includes('scroll');
        return {what: el.className, cue};
    })"""


def test_sideways_scrolling_blocks_show_that_they_scroll(site, open_page):
    missing, seen = [], 0
    for name in pages(site):
        page = open_page(name, **PHONE)
        blocks = page.evaluate(SCROLL_CUES)
        seen += len(blocks)
        missing += [f"{name}: {b['what']}" for b in blocks if not b["cue"]]
        page.context.close()
    assert seen, "no block scrolls sideways at 390px: the test checks nothing"
    assert not missing, "\n".join(missing)


# -- keyboard --------------------------------------------------------------------------
FOCUSED = """() => {
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    if (el.dataset.tabbedTo) return {again: true};
    el.dataset.tabbedTo = '1';
    el.getAnimations().forEach(a => a.finish());  // judge where a fade ends
    const r = el.getBoundingClientRect();
    const seen = el.checkVisibility({visibilityProperty: true, opacityProperty: true});
    const onScreen = r.width > 0 && r.height > 0 && r.right > 0 && r.left < innerWidth;
    return {tag: el.tagName, text: (el.textContent || '').trim().slice(0, 40),
            visible: seen && onScreen};
}"""


@pytest.mark.parametrize(
    ("name", "width"),
    [
        ("index.html", 390),
        ("scaling.html", 390),
        ("scaling.html", 900),
        ("steps.html", 1280),
    ],
)
def test_no_focus_lands_on_an_invisible_element(open_page, name, width):
    page = open_page(name, width=width, height=800)
    invisible, seen = [], 0
    for _ in range(600):
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused is None:
            continue
        if focused.get("again"):
            break  # round the page and back at the start
        seen += 1
        if not focused["visible"]:
            invisible.append(f"{focused['tag']} {focused['text']!r}")
    assert seen > 10
    assert not invisible, f"{len(invisible)} invisible focus stops: {invisible[:8]}"


def test_an_open_drawer_takes_focus(open_page):
    page = open_page("scaling.html", **PHONE)
    page.locator(".mobile-header button[aria-controls=sdpa-site-nav]").click()
    page.wait_for_timeout(400)
    assert page.evaluate(
        "document.querySelector('.sidebar-drawer').contains(document.activeElement)"
    )
    link = page.locator(".sidebar-drawer a.reference").first
    link.focus()
    assert link.evaluate("el => document.activeElement === el")
    assert link.evaluate("el => el.checkVisibility({visibilityProperty: true})")


# -- print and no JavaScript -----------------------------------------------------------
def test_print_shows_no_skip_link(site, open_page):
    for name in ("index.html", "scaling.html"):
        page = open_page(name)
        page.emulate_media(media="print")
        expect(page.locator(".skip-to-content")).to_be_hidden()
        page.context.close()


# Chromium repeats position:fixed elements (da71a88's skip link) at the foot
# of every printed page; content that flows ends above this band.
FOOT = 0.93


@pytest.mark.parametrize("js", [True, False])
def test_the_landing_pages_first_printed_page_is_mostly_used(open_page, js):
    page = open_page(js=js)
    settle(page)
    marks = lowest_marks(page.pdf(format="A4"), foot=FOOT)
    assert len(marks) > 1
    assert marks[0] > 0.6, f"the first printed page ends {marks[0]:.0%} of the way down"


def test_the_printed_figure_names_its_state(open_page):
    page = open_page("index.html#q=2&dk=64")
    page.emulate_media(media="print")
    state = page.locator(f"{ROOT} .sdpa-w-state")
    expect(state).to_be_visible()
    assert re.search(r"query Q2 at head width dk? ?= 64", state.inner_text())
    expect(page.locator(f"{ROOT} .sdpa-w-controls")).to_be_hidden()
    expect(page.locator(".sdpa-shown-state")).to_have_text("query Q2 at width 64")
    static = open_page(js=False)
    static.emulate_media(media="print")
    note = static.locator(".sdpa-w-static-note")
    expect(note).to_be_visible()
    assert "query Q0 at head width dₖ = 4" in note.inner_text()


@pytest.mark.parametrize("how", ["no JavaScript", "print"])
def test_without_controls_the_lead_says_what_the_figure_shows(open_page, how):
    page = open_page(js=how != "no JavaScript")
    if how == "print":
        page.emulate_media(media="print")
    text = page.locator("article").inner_text()
    assert "pick another query or head width" not in text
    assert "The figure shows query Q0 at width 4." in text


def test_with_controls_the_lead_invites_the_reader_to_pick(open_page):
    text = open_page().locator("article").inner_text()
    assert "then pick another query or head width" in text
    assert "The figure shows" not in text


# -- search ----------------------------------------------------------------------------
def search(open_page, query, **options):
    page = open_page(f"search.html?q={query}", **options)
    page.wait_for_selector("#search-results .search-summary:not(:empty)")
    return page


def snippets(page):
    page.wait_for_load_state("networkidle")  # every result's page fetched
    return page.locator("#search-results li p.context").all_inner_texts()


@pytest.mark.parametrize("query", ["softmax", "sqrt", "scaling"])
def test_search_snippets_contain_no_tex(open_page, query):
    found = snippets(search(open_page, query))
    assert found
    tex = [s for s in found if "\\" in s or re.search(r"d_?k\\?sqrt|dkdk", s)]
    assert not tex, tex[:3]


@pytest.mark.parametrize("query", ["d_k", "dk"])
def test_searching_the_head_width_finds_its_pages(open_page, query):
    page = search(open_page, query)
    links = page.locator("#search-results ul.search li > a").evaluate_all(
        "els => els.map(a => a.getAttribute('href'))"
    )
    assert any(link.startswith("scaling") for link in links), links
    assert any(link.startswith("index") for link in links), links


def test_search_from_disk_explains_why_there_are_no_snippets(site, open_page):
    page = search(open_page, "softmax", base=site.resolve().as_uri() + "/")
    expect(page.locator("#search-results ul.search li").first).to_be_visible()
    note = page.locator(".search-from-disk")
    expect(note).to_be_visible()
    assert "nox -s serve" in note.inner_text()
    page.wait_for_timeout(500)  # any fetch would have failed by now (open_page checks)


# -- images and weight -----------------------------------------------------------------
def test_every_image_declares_its_size(site):
    missing = []
    for name in pages(site):
        html = (site / name).read_text(encoding="utf-8")
        missing += [
            f"{name}: {tag[:100]}"
            for tag in re.findall(r"<img\b[^>]*>", html)
            if not re.search(r'\swidth="\d+"', tag)
            or not re.search(r'\sheight="\d+"', tag)
        ]
    assert not missing, "\n".join(missing)


def test_with_javascript_the_fallback_figures_are_not_fetched(open_page):
    static = open_page(js=False)
    fallback = static.locator(".sdpa-widget-fallback img").evaluate_all(
        "els => els.map(e => new URL(e.src).pathname)"
    )
    assert fallback
    requested = []
    page = open_page()
    page.on("request", lambda r: requested.append(urlparse(r.url).path))
    page.reload(wait_until="networkidle")
    assert any(p.endswith(".js") for p in requested), "no requests were recorded"
    fetched = [p for p in requested if p in fallback]
    assert not fetched, fetched


# -- the theme toggle ------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_theme_toggle_says_which_mode_is_active(open_page, scheme):
    page = open_page(color_scheme=scheme)
    toggle = page.locator(".theme-toggle:visible").first
    for _ in range(3):
        mode = page.evaluate("document.body.dataset.theme")
        name = toggle.get_attribute("aria-label")
        want = "automatic" if mode == "auto" else mode
        assert name.startswith(f"Colour theme: {want}"), (mode, name)
        toggle.click()
