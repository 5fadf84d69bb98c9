"""The interactive figure on the landing page, in a real browser."""

import json
import re

import pytest

from figures import widget
from sdpa_ref import example

from .helpers import expect, url_ending

ROOT = '[data-figure="scaled-vs-unscaled"]'


def expected(query, width):
    """What the figure must show, straight from sdpa_ref."""
    c = example.compare(query, width)
    return {
        "raw_weights": [f"{w:.3f}" for w in c.raw_weights],
        "scaled_weights": [f"{w:.3f}" for w in c.scaled_weights],
        "raw_entropy": f"{c.raw_entropy:.3f}",
        "scaled_entropy": f"{c.scaled_entropy:.3f}",
        "raw_top": f"{c.raw_top_weight:.3f}",
        "scaled_top": f"{c.scaled_top_weight:.3f}",
    }


def width_radio(page, width):
    return page.get_by_role("radio", name=re.compile(rf"= {width}$"))


def assert_shows(page, query, width):
    want = expected(query, width)
    root = page.locator(ROOT)
    raw, scaled = root.locator(".sdpa-w-panel").all()
    assert raw.locator(".sdpa-w-value").all_text_contents() == want["raw_weights"]
    assert scaled.locator(".sdpa-w-value").all_text_contents() == want["scaled_weights"]
    assert f"Entropy {want['raw_entropy']} of at most 1.386 nats" in raw.inner_text()
    assert (
        f"Entropy {want['scaled_entropy']} of at most 1.386 nats" in scaled.inner_text()
    )
    assert f"top weight {want['raw_top']}" in raw.inner_text()
    assert f"top weight {want['scaled_top']}" in scaled.inner_text()
    text = root.inner_text()
    assert want["raw_entropy"] in text
    assert want["scaled_entropy"] in text
    expect(
        page.get_by_role("radio", name=example.QUERY_NAMES[query], exact=True)
    ).to_be_checked()
    expect(width_radio(page, width)).to_be_checked()


def test_starts_at_q0_width_4_with_the_worked_numbers(open_page):
    page = open_page()
    assert_shows(page, 0, 4)
    text = page.locator(ROOT).inner_text()
    for number in (
        "0.444",
        "0.888",
        "0.867",
        "0.657",
        "[4, 0, 2, −4]",
        "[2, 0, 1, −2]",
    ):
        assert number in text


def test_every_query_and_width_matches_sdpa_ref(open_page):
    page = open_page()
    for width in example.WIDTHS:
        width_radio(page, width).click()
        for query, name in enumerate(example.QUERY_NAMES):
            page.get_by_role("radio", name=name, exact=True).click()
            assert_shows(page, query, width)
            if (query, width) != (0, 4):  # the first state is no change
                expect(page).to_have_url(url_ending(f"#q={query}&dk={width}"))


def test_controls_have_the_promised_accessible_names(open_page):
    page = open_page()
    for name in example.QUERY_NAMES:
        expect(page.get_by_role("radio", name=name, exact=True)).to_have_count(1)
    for width in example.WIDTHS:
        expect(width_radio(page, width)).to_have_count(1)
    for legend in ("Query", "Head width"):
        expect(page.get_by_role("group", name=legend)).to_have_count(1)


def test_state_lives_in_the_url_and_survives_a_reload(open_page):
    page = open_page("index.html#q=2&dk=64")
    assert_shows(page, 2, 64)
    page.get_by_role("radio", name="Q1", exact=True).click()
    expect(page).to_have_url(url_ending("#q=1&dk=64"))
    page.reload()
    assert_shows(page, 1, 64)


@pytest.mark.parametrize(
    "fragment", ["#q=9&dk=64", "#q=1&dk=5", "#nothing", "#q=x&dk=y"]
)
def test_a_bad_link_falls_back_to_the_default(open_page, fragment):
    page = open_page("index.html" + fragment)
    assert_shows(page, 0, 4)


def test_keyboard_moves_through_the_choices(open_page):
    page = open_page()
    page.get_by_role("radio", name="Q0", exact=True).focus()
    page.keyboard.press("ArrowRight")
    assert_shows(page, 1, 4)
    page.keyboard.press("Tab")  # into the width group, onto its checked radio
    page.keyboard.press("ArrowRight")
    assert_shows(page, 1, 16)
    page.keyboard.press("ArrowLeft")
    assert_shows(page, 1, 4)
    expect(page).to_have_url(url_ending("#q=1&dk=4"))


def test_live_region_says_what_changed(open_page):
    page = open_page()
    live = page.locator(f"{ROOT} [aria-live=polite]")
    width_radio(page, 64).click()
    page.get_by_role("radio", name="Q2", exact=True).click()
    summary = widget.widget_data()["states"]["2/64"]["summary"]
    expect(live).to_have_text(summary)


def test_without_javascript_the_worked_example_still_shows(open_page):
    page = open_page(js=False)
    fallback = page.locator(".sdpa-widget-fallback")
    expect(fallback).to_be_visible()
    expect(fallback.locator("img").first).to_be_visible()
    assert fallback.locator("img").first.get_attribute("alt")
    table_text = fallback.locator("table").first.inner_text()
    for number in ("0.867", "0.657", "0.444", "0.888"):
        assert number in table_text
    expect(page.locator(ROOT)).to_be_hidden()
    expect(page.get_by_role("radio")).to_have_count(0)
    # The fixed vectors the text promises stay inspectable, without scripts too.
    vectors = " ".join(fallback.locator("table").nth(1).inner_text().split())
    for row in ("Q0 2 2 −1 3 once 4", "K3 0 0 1 −1 once 4", "v of K0 3 1 once 2"):
        assert row in vectors, vectors


def test_with_javascript_the_static_fallback_gives_way(open_page):
    page = open_page()
    expect(page.locator(".sdpa-widget-fallback")).to_be_hidden()
    expect(page.locator(ROOT)).to_be_visible()


def test_reduced_motion_turns_transitions_off(open_page):
    page = open_page(reduced_motion="reduce")
    duration = page.locator(f"{ROOT} .sdpa-w-bar").first.evaluate(
        "el => getComputedStyle(el).transitionDuration"
    )
    assert duration == "0s"
    moving = (
        open_page()
        .locator(f"{ROOT} .sdpa-w-bar")
        .first.evaluate("el => getComputedStyle(el).transitionDuration")
    )
    assert moving != "0s"


def test_the_page_carries_exactly_what_sdpa_ref_computes(site):
    html = (site / "index.html").read_text()
    match = re.search(
        r'<script type="application/json" class="sdpa-widget-data">(.*?)</script>', html
    )
    assert match, "no figure data in the landing page"
    assert json.loads(match.group(1).replace("<\\/", "</")) == widget.widget_data()


# -- a figure that neither jumps nor spills ------------------------------------------
LAYOUT_SHIFT = """() => new Promise(resolve => {
    let total = 0;
    new PerformanceObserver(list => {
        for (const e of list.getEntries()) if (!e.hadRecentInput) total += e.value;
    }).observe({type: 'layout-shift', buffered: true});
    document.fonts.ready.then(() => setTimeout(() => resolve(total), 1000));
})"""


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1280, 900)])
def test_the_landing_page_does_not_shift_as_it_loads(open_page, width, height):
    # On a slow phone's CPU the scripts run late: the figure must not wait
    # for them to take its place.
    page = open_page("index.html", width=width, height=height)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": 4})
    page.reload(wait_until="load")
    shift = page.evaluate(LAYOUT_SHIFT)
    assert shift < 0.02, f"cumulative layout shift {shift:.3f}"


SPAN = """() => {
    const root = document.querySelector('[data-figure="scaled-vs-unscaled"]');
    const controls = root.querySelector('.sdpa-w-controls');
    const header = document.querySelector('.mobile-header').getBoundingClientRect();
    window.scrollBy({top: controls.getBoundingClientRect().top - header.bottom,
                     behavior: 'instant'});
    const plane = root.querySelector('.sdpa-w-plane').getBoundingClientRect();
    return {top: controls.getBoundingClientRect().top, bottom: plane.bottom,
            screen: innerHeight};
}"""


def test_a_tap_shows_its_whole_effect_on_one_phone_screen(open_page):
    """Controls, both weight panels and the value plane, below the header."""
    page = open_page(width=390, height=844)
    for width in example.WIDTHS:
        for query in range(len(example.QUERY_NAMES)):
            page.evaluate(f"location.hash = 'q={query}&dk={width}'")
            box = page.evaluate(SPAN)
            assert box["bottom"] - box["top"] <= 844
            assert box["bottom"] <= box["screen"], (
                f"q={query} dk={width}: the value plane ends at {box['bottom']:.0f}px "
                f"with the controls just below the header at {box['top']:.0f}px"
            )


TEXT_SIZES = """root => {
    const sizes = [];
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const el = n.parentElement;
        if (!n.textContent.trim() || !el.checkVisibility()) continue;
        if (el.closest('.sdpa-w-sr, script')) continue;
        let size = parseFloat(getComputedStyle(el).fontSize);
        const svg = el.closest('svg');
        if (svg) size *= svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
        sizes.push([size, n.textContent.trim().slice(0, 20)]);
    }
    return sizes;
}"""


def test_figure_text_is_nine_pixels_or_more_on_a_phone(open_page):
    page = open_page(width=390, height=844)
    sizes = page.locator(ROOT).evaluate(TEXT_SIZES)
    assert len(sizes) > 40
    small = [s for s in sizes if s[0] < 9]
    assert not small, small


OVERLAPS = """() => {
    const plane = document.querySelector('[data-figure] .sdpa-w-plane');
    const marks = [...plane.querySelectorAll('.sdpa-w-out-raw, .sdpa-w-out-scaled')]
        .map(m => m.getBoundingClientRect());
    const hit = (a, b) => a.left < b.right && b.left < a.right
        && a.top < b.bottom && b.top < a.bottom;
    return [...plane.querySelectorAll('.sdpa-w-vlabel')]
        .filter(l => marks.some(m => hit(l.getBoundingClientRect(), m)))
        .map(l => l.textContent);
}"""


def test_no_output_mark_covers_a_value_label(open_page):
    page = open_page(reduced_motion="reduce")
    for width in example.WIDTHS:
        for query in range(len(example.QUERY_NAMES)):
            page.evaluate(f"location.hash = 'q={query}&dk={width}'")
            assert page.evaluate(OVERLAPS) == [], (query, width)
