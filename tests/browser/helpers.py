"""What several browser tests check the same way: the page's width, contrast,
fallbacks, URLs and keyboard reach."""

from __future__ import annotations

import re

import pytest

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips, or fails under REQUIRE_BROWSER=1
    expect = None

#: A phone's viewport, in CSS pixels.
PHONE = {"width": 390, "height": 844}
#: open_page's options for a touch phone.
TOUCH_PHONE = {**PHONE, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}
#: How far the document scrolls sideways (0 or less when it does not).
SIDEWAYS_OVERFLOW = (
    "document.documentElement.scrollWidth - document.documentElement.clientWidth"
)
#: How many of a figure root's boxes (outside its SVGs) end right of it.
SPILL = (
    "r => [r, ...r.querySelectorAll('*')].filter(e => !e.closest('svg')"
    " || e.tagName === 'svg').map(e => e.getBoundingClientRect())"
    ".filter(b => b.width && b.right > r.getBoundingClientRect().right + 1)"
    ".length"
)
# WCAG's relative luminance of a CSS colour, and the contrast ratio of two.
_RATIO = """
    const lum = c => {
        const [r, g, b] = c.match(/[\\d.]+/g).slice(0, 3).map(x => x / 255)
            .map(x => x <= 0.04045 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4);
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const ratio = (a, b) => {
        const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x);
        return (hi + 0.05) / (lo + 0.05);
    };"""


def contrast_script(params, body):
    """The page function ``params => {...body}``, in whose body
    ``ratio(a, b)`` is the WCAG contrast ratio of two CSS colours."""
    return f"{params} => {{{_RATIO}\n{body}}}"


def is_dark(colour):
    """Whether a CSS rgb() colour is a dark theme's background."""
    return sum(int(x) for x in re.findall(r"\d+", colour)[:3]) < 200


def url_ending(text):
    """What expect(page).to_have_url waits for: a URL ending in ``text``."""
    return re.compile(re.escape(text) + "$")


def assert_fits(page, root, why):
    """Neither the page nor the figure ``root`` (a locator) spills sideways."""
    overflow = page.evaluate(SIDEWAYS_OVERFLOW)
    assert overflow <= 0, (why, f"the page scrolls {overflow}px sideways")
    spill = root.evaluate(SPILL)
    assert spill == 0, (why, f"{spill} boxes end right of the figure")


def shown(page, root, js=True):
    """What the page shows of the figure ``root``, checked: with JavaScript
    the one figure, its static fallback hidden; without, the fallback."""
    figure, fallback = page.locator(root), page.locator(".figure-fallback")
    if js:
        expect(figure).to_have_count(1)
    visible, hidden = (figure, fallback) if js else (fallback, figure)
    expect(visible).to_be_visible()
    expect(hidden).to_be_hidden()
    return visible


def tab_to(page, target, presses, what):
    """Press Tab until ``target`` has the focus; fail after ``presses``."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        if target.evaluate("e => e === document.activeElement"):
            return
    pytest.fail(f"Tab never reached {what}")
