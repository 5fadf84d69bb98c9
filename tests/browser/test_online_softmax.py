"""The flash page's online-softmax stepper, in a real browser.

What the figure must show is computed here, at test time, by
``sdpa_ref.flash.tiled_forward_trace``: not read from the page's JSON nor
from ``figures``, so a figure that drew stale or wrong data would fail.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import flash

from .helpers import TOUCH_PHONE, assert_fits, contrast_script, expect, is_dark, shown

PAGE = "flash.html"
ROOT = '[data-figure="online-softmax"]'
SHAPE = flash.TRACE_SHAPE
ORDER_NAMES = {"flash2": "FlashAttention-2", "flash": "FlashAttention:"}


def trace(order):
    q, k, v = flash.trace_problem()
    return flash.tiled_forward_trace(
        q, k, v, SHAPE["block_rows"], SHAPE["block_cols"], order=order
    )


def minus(text):
    return text.replace("-", "−")


def vec(xs):
    return minus("[" + ", ".join(f"{x:.3f}" for x in xs) + "]")


def expected(order, t):
    """State and table text after tile ``t`` (0: before the first)."""
    tr = trace(order)
    n_q = SHAPE["n_q"]
    steps = tr["steps"]
    state = tr["initial"]["state"] if t == 0 else steps[t - 1]["state"]
    rescale, output = [None] * n_q, [None] * n_q
    for s in steps[:t]:
        if s["output"] is not None:
            for offset, r in enumerate(range(s["queries"][0], s["queries"][1] + 1)):
                output[r] = list(s["output"][offset])
    if t:
        s = steps[t - 1]
        for offset, r in enumerate(range(s["queries"][0], s["queries"][1] + 1)):
            rescale[r] = float(s["rescale"][offset])
    rows = []
    for r in range(n_q):
        m = state["m"][r]
        f = rescale[r]
        rows.append(
            [
                f"q{r}",
                "−∞" if np.isneginf(m) else minus(f"{m:g}"),
                "" if f is None else "0" if f == 0 else "1" if f == 1 else f"{f:.3f}",
                f"{state['l'][r]:.3f}",
                vec(state["acc"][r]),
                "" if output[r] is None else vec(output[r]),
            ]
        )
    return {
        "trace": tr,
        "m": [None if np.isneginf(x) else float(x) for x in state["m"]],
        "l": [float(x) for x in state["l"]],
        "acc": [[float(x) for x in row] for row in state["acc"]],
        "rescale": rescale,
        "output": output,
        "rows": rows,
        "tile": None
        if t == 0
        else [steps[t - 1]["query_block"], steps[t - 1]["key_block"]],
    }


def state(page):
    return json.loads(page.locator(ROOT).get_attribute("data-state"))


def table(page):
    return [
        [" ".join(c.split()) for c in row.locator("th, td").all_inner_texts()]
        for row in page.locator(f"{ROOT} .os-table tbody tr").all()
    ]


def assert_shows(page, order, t):
    want = expected(order, t)
    total = len(want["trace"]["steps"])
    got = state(page)
    assert (got["order"], got["step"], got["steps"]) == (order, t, total)
    assert got["tile"] == want["tile"]
    assert got["m"] == want["m"]
    np.testing.assert_allclose(got["l"], want["l"], rtol=1e-15)
    np.testing.assert_allclose(got["acc"], want["acc"], rtol=1e-15, atol=1e-300)
    assert [x is None for x in got["rescale"]] == [x is None for x in want["rescale"]]
    for a, b in zip(got["rescale"], want["rescale"], strict=True):
        if b is not None:
            assert a == pytest.approx(b, rel=1e-15)
    for a, b in zip(got["output"], want["output"], strict=True):
        assert (a is None) == (b is None)
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-15)
    assert table(page) == want["rows"], (order, t)
    root = page.locator(ROOT)
    expect(root.locator(".os-count")).to_have_text(f"Step {t} of {total}")
    expect(
        page.get_by_role("radio", name=re.compile(ORDER_NAMES[order]))
    ).to_be_checked()
    last = t == total
    diff = want["trace"]["max_abs_diff"]
    assert got["max_abs_diff"] == (diff if last else None)
    result = root.locator(".os-result").inner_text()
    if last:
        dense = sdpa_ref.attention(*flash.trace_problem())
        assert diff == float(np.abs(want["trace"]["output"] - dense).max())
        for row in dense:
            assert vec(row) in result
        mantissa, exponent = f"{diff:.1e}".split("e")
        superscript = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
        printed = f"{mantissa} × 10{str(int(exponent)).translate(superscript)}"
        assert printed in result, result
    else:
        assert "After the last tile" in result


def next_button(page):
    return page.locator(f"{ROOT} .os-next")


def back_button(page):
    return page.locator(f"{ROOT} .os-back")


def test_the_root_carries_its_name_and_state(open_page):
    page = open_page(PAGE)
    shown(page, ROOT)
    assert_shows(page, "flash2", 0)


@pytest.mark.parametrize("order", ["flash2", "flash"])
def test_every_step_of_both_orders_matches_sdpa_ref(open_page, order):
    page = open_page(PAGE)
    page.get_by_role("radio", name=re.compile(ORDER_NAMES[order])).check()
    total = len(trace(order)["steps"])
    assert_shows(page, order, 0)
    expect(back_button(page)).to_have_attribute("aria-disabled", "true")
    for t in range(1, total + 1):
        next_button(page).click()
        assert_shows(page, order, t)
    expect(next_button(page)).to_have_attribute("aria-disabled", "true")
    next_button(page).click(force=True)  # past the end: nothing moves
    assert_shows(page, order, total)
    for t in range(total - 1, -1, -1):
        back_button(page).click()
        assert_shows(page, order, t)


def test_switching_order_keeps_the_step_and_shows_the_others_tiles(open_page):
    page = open_page(PAGE)
    for _ in range(2):
        next_button(page).click()
    page.get_by_role("radio", name=re.compile("FlashAttention:")).check()
    assert_shows(page, "flash", 2)
    # Keys outside: after two tiles K₁ has met both query blocks.
    assert state(page)["tile"] == [1, 0]


def test_live_region_says_what_the_tile_did(open_page):
    page = open_page(PAGE)
    live = page.locator(f"{ROOT} [aria-live=polite]")
    next_button(page).click()
    next_button(page).click()
    step = trace("flash2")["steps"][1]
    before, after = step["max_before"][0], step["max_after"][0]
    factor = f"{np.exp(before - after):.3f}"
    expect(live).to_contain_text(
        f"q0’s maximum rises from {before:g} to {after:g}, so its ℓ and a shrink by "
        f"e^({before:g} − {after:g}) = {factor}"
    )


def test_keyboard_tabs_to_the_buttons_and_steps_with_arrows(open_page):
    page = open_page(PAGE)
    radio = page.get_by_role("radio", name=re.compile("FlashAttention-2"))
    radio.focus()
    page.keyboard.press("ArrowRight")  # the radio group picks the order
    assert_shows(page, "flash", 0)
    page.keyboard.press("Tab")
    expect(back_button(page)).to_be_focused()
    page.keyboard.press("Tab")
    expect(next_button(page)).to_be_focused()
    # Each key in turn, and the step the stepper shows after it.
    steps = {
        "Enter": 1,
        "Space": 2,
        "ArrowRight": 3,
        "ArrowLeft": 2,
        "End": 6,
        "Home": 0,
    }
    for key, step in steps.items():
        page.keyboard.press(key)
        assert_shows(page, "flash", step)
    expect(page).to_have_url(re.compile(r"#order=flash&step=0$"))


def test_a_tap_steps_on_a_touch_phone(open_page):
    page = open_page(PAGE, **TOUCH_PHONE)
    next_button(page).tap()
    assert_shows(page, "flash2", 1)
    page.locator(f"{ROOT} label", has_text="FlashAttention: keys").tap()
    assert_shows(page, "flash", 1)
    next_button(page).tap()
    back_button(page).tap()
    back_button(page).tap()
    assert_shows(page, "flash", 0)


def test_state_lives_in_the_url_and_survives_a_reload(open_page):
    page = open_page(PAGE + "#order=flash&step=4")
    assert_shows(page, "flash", 4)
    next_button(page).click()
    expect(page).to_have_url(re.compile(r"#order=flash&step=5$"))
    page.reload()
    assert_shows(page, "flash", 5)
    page.evaluate("location.hash = 'order=flash2&step=3'")
    assert_shows(page, "flash2", 3)


@pytest.mark.parametrize(
    "fragment",
    ["#order=flash3&step=1", "#order=flash&step=7", "#order=flash&step=-1", "#tiling"],
)
def test_a_bad_or_section_link_leaves_the_default(open_page, fragment):
    page = open_page(PAGE + fragment)
    assert_shows(page, "flash2", 0)
    assert page.url.endswith(fragment)  # loading never rewrites a link


@pytest.mark.parametrize("width", [390, 1280])
def test_no_step_spills_sideways(open_page, width):
    page = open_page(PAGE, width=width, height=844)
    root = page.locator(ROOT)
    for order in ("flash2", "flash"):
        page.get_by_role("radio", name=re.compile(ORDER_NAMES[order])).check()
        for t in range(len(trace(order)["steps"]) + 1):
            page.evaluate(f"location.hash = 'order={order}&step={t}'")
            assert_shows(page, order, t)
            assert_fits(page, root, (order, t, width))


CONTRAST = contrast_script(
    "root",
    """
    const css = (sel, prop) => getComputedStyle(root.querySelector(sel))[prop];
    const page = getComputedStyle(document.body).backgroundColor;
    const panel = css('.os-live', 'backgroundColor');
    return {
        body: page,
        text: ratio(css('.os-table td', 'color'), page),
        live: ratio(css('.os-live', 'color'), panel),
        svg_text: ratio(css('.os-svg text', 'fill'), page),
        chip_name: ratio(css('.os-chip .os-on-name', 'fill'),
                         css('.os-chip .os-on', 'fill')),
        chip_box: ratio(css('.os-chip .os-on', 'fill'), page),
        button: ratio(css('.os-next', 'color'), css('.os-next', 'backgroundColor')),
        muted: ratio(css('.os-result', 'color'), page),
    };""",
)


@pytest.mark.parametrize("theme", ["light", "dark", "auto-dark", "forced-dark"])
def test_text_and_marks_contrast_in_both_themes(open_page, theme):
    scheme = "dark" if theme in ("dark", "auto-dark") else "light"
    page = open_page(PAGE + "#order=flash&step=3", color_scheme=scheme)
    if theme == "forced-dark":  # Furo's own switch, against the system's light
        page.evaluate("document.body.dataset.theme = 'dark'")
    elif theme == "auto-dark":
        page.evaluate("document.body.dataset.theme = 'auto'")
    ratios = page.locator(ROOT).evaluate(CONTRAST)
    assert is_dark(ratios.pop("body")) == (theme != "light"), theme
    for key in ("text", "live", "svg_text", "chip_name", "button", "muted"):
        assert ratios[key] >= 4.5, (key, ratios)
    assert ratios["chip_box"] >= 3.0, ratios


def test_without_javascript_the_fallback_shows_every_tile(open_page):
    fallback = shown(open_page(PAGE, js=False), ROOT, js=False)
    text = fallback.inner_text()
    tr = trace("flash2")
    for step in tr["steps"]:
        for acc in step["acc"]:
            assert vec(acc) in text
    for row in sdpa_ref.attention(*flash.trace_problem()):
        assert vec(row) in text
    assert "largest difference" in text
