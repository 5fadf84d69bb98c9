"""The masks page's explorer, in a real browser.

The explorer computes its grid in the browser, so it is held to
``sdpa_ref.attention`` itself, called here at test time (not ``figures``):
the mask is read off attention's weights (equal scores, so each allowed key
gets a positive weight and each forbidden one exactly 0), and an invalid
state's message is the ValueError that sdpa_ref raises. The three calls the
figure shows are run, too, and must give the grid it draws. Only the starting
state and the controls' bounds are taken from ``figures.mask_explorer``.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import sdpa_ref
from figures.mask_explorer import DEFAULT, LIMIT, OPTION_KEYS
from sdpa_ref import mods
from sdpa_ref.testing import flash_options

from .helpers import (
    PHONE,
    TOUCH_PHONE,
    assert_fits,
    contrast_script,
    expect,
    is_dark,
    shown,
)

PAGE = "masks.html"
ROOT = '[data-figure="mask-explorer"]'
SEED = 19
RANDOM_STATES = 2400

#: Sets the form to each state, as a reader's change would, and reads back
#: the root's data-state, the three calls and the status line.
DRIVE = """states => {
    const root = document.querySelector('[data-figure="mask-explorer"]');
    const form = root.querySelector('form'), f = form.elements;
    const side = x => x === null ? 'none' : String(x);
    return states.map(s => {
        f.n_q.value = s.n_q; f.n_k.value = s.n_k; f.is_causal.checked = s.is_causal;
        f.align.value = s.align; f.window.checked = s.window !== null;
        if (s.window) {
            f.left.value = side(s.window[0]); f.right.value = side(s.window[1]);
        }
        f.sink_tokens.value = s.sink_tokens; f.chunk.value = side(s.chunk);
        form.dispatchEvent(new Event('change', {bubbles: true}));
        return {
            state: JSON.parse(root.dataset.state),
            calls: [...root.querySelectorAll('.me-calls pre')].map(p => p.textContent),
            flashNote: root.querySelector('.me-flash-note').textContent,
            status: root.querySelector('.me-status').textContent,
        };
    });
}"""


# -- sdpa_ref's answers -----------------------------------------------------------
def keywords(s):
    """sdpa_ref.attention's keyword options for a state."""
    out = {
        "is_causal": s["is_causal"],
        "align": s["align"],
        "sink_tokens": s["sink_tokens"],
        "chunk": s["chunk"],
    }
    if s["window"] is not None:
        out["window"] = tuple(s["window"])
    return out


def problem(s):
    q = np.zeros((s["n_q"], 1))
    return q, np.zeros((s["n_k"], 1)), np.ones((s["n_k"], 1))


def weights_mask(call, s, **extra):
    _, weights = call(*problem(s), return_weights=True, **extra)
    return weights > 0


def sdpa_answer(s):
    """(mask, None) from sdpa_ref.attention, or (None, its ValueError's text)."""
    try:
        return weights_mask(
            sdpa_ref.attention, s, empty_rows="zero", **keywords(s)
        ), None
    except ValueError as exc:
        return None, str(exc)


def random_states(rng, count):
    def bound():
        return None if rng.random() < 0.25 else int(rng.integers(0, LIMIT + 1))

    return [
        {
            "n_q": int(rng.integers(1, LIMIT + 1)),
            "n_k": int(rng.integers(1, LIMIT + 1)),
            "is_causal": bool(rng.random() < 0.5),
            "align": "top_left" if rng.random() < 0.5 else "bottom_right",
            "window": None if rng.random() < 0.3 else [bound(), bound()],
            "sink_tokens": 0 if rng.random() < 0.6 else int(rng.integers(1, LIMIT + 1)),
            "chunk": None if rng.random() < 0.6 else int(rng.integers(1, LIMIT + 1)),
        }
        for _ in range(count)
    ]


# -- the calls, run -----------------------------------------------------------------
class _SdpaRef:
    """``sdpa_ref`` for evaluating the shown call: the same call, with weights."""

    @staticmethod
    def attention(q, k, v, **options):
        return sdpa_ref.attention(q, k, v, return_weights=True, **options)[1] > 0


def run_sdpa_call(line, s):
    q, k, v = problem(s)
    return eval(line, {"sdpa_ref": _SdpaRef, "q": q, "k": k, "v": v})


def run_flash_call(line, s):
    """flash_attn_func's arguments, as attention_ref reads them (flash_options)."""

    def flash_attn_func(q, k, v, **kwargs):
        return weights_mask(sdpa_ref.attention, s, **flash_options(**kwargs))

    q, k, v = problem(s)
    return eval(line, {"flash_attn_func": flash_attn_func, "q": q, "k": k, "v": v})


def run_flash2_kernel(line, s):
    """flash_attn_func's arguments as FlashAttention-2's kernel reads them.

    csrc/flash_attn/flash_api.cpp (mha_fwd and set_params_fprop, v2.8.3): a
    bound of seqlen_k or more becomes -1; one query drops causal; causal sets
    the right bound to 0; then -1 becomes seqlen_k if the other side is
    bounded. Written from the C++, not from the explorer's script.
    """

    def flash_attn_func(q, k, v, causal=False, window_size=(-1, -1)):
        n_k = s["n_k"]
        left, right = (-1 if x >= n_k else x for x in window_size)
        if s["n_q"] == 1:
            causal = False
        if causal:
            right = 0
        if left < 0 <= right:
            left = n_k
        if right < 0 <= left:
            right = n_k
        return weights_mask(
            sdpa_ref.attention, s, **flash_options(window_size=(left, right))
        )

    q, k, v = problem(s)
    return eval(line, {"flash_attn_func": flash_attn_func, "q": q, "k": k, "v": v})


FLASH2_NOTE = "FlashAttention-2's kernel reads this window_size differently"


def run_mask_mod(line, s):
    namespace = {}
    exec(line, namespace)
    return mods.create_mask(namespace["mask_mod"], None, None, s["n_q"], s["n_k"])[0, 0]


def shifted_window(s):
    """A top-left mask as FlashAttention's bottom-right window, if one exists.

    Aligned at the bottom right, query i sits at i + n_k - n_q: a top-left
    bound l or r becomes l + (n_k - n_q) or r - (n_k - n_q), which
    window_size can hold only while it stays nonnegative (-1 is unbounded).
    """
    if s["align"] != "top_left" or s["chunk"] is not None:
        return None
    left, right = s["window"] if s["window"] is not None else (None, None)
    if s["is_causal"]:
        right = 0
    d = s["n_k"] - s["n_q"]
    shifted = (
        None if left is None else left + d,
        None if right is None else right - d,
    )
    if any(x is not None and x < 0 for x in shifted):
        return None
    return shifted


def test_no_window_size_gives_a_top_left_mask_the_explorer_calls_untranslatable():
    """The note "no flash_attn_func equivalent" is true: no causal flag and no
    window_size reproduce those top-left masks."""
    rng = np.random.default_rng(7)
    checked = 0
    while checked < 60:
        s = {
            "n_q": int(rng.integers(1, 9)),
            "n_k": int(rng.integers(1, 9)),
            "is_causal": bool(rng.integers(2)),
            "align": "top_left",
            "window": None,
            "sink_tokens": 0,
            "chunk": None,
        }
        if rng.integers(2):
            s["window"] = [int(rng.integers(0, 5)), None]
        mask, error = sdpa_answer(s)
        if error is not None or shifted_window(s) is not None:
            continue
        bottom_right = weights_mask(
            sdpa_ref.attention,
            s,
            empty_rows="zero",
            **{**keywords(s), "align": "bottom_right"},
        )
        if np.array_equal(mask, bottom_right):
            continue
        checked += 1
        n = max(s["n_q"], s["n_k"])
        for causal in (False, True):
            for left in range(-1, n + 1):
                for right in range(-1, n + 1):
                    try:
                        options = flash_options(
                            causal=causal, window_size=(left, right)
                        )
                        got = weights_mask(sdpa_ref.attention, s, **options)
                    except ValueError:
                        continue
                    assert not np.array_equal(got, mask), (s, causal, left, right)


def check_calls(s, mask, calls, flash_note=None):
    """The three calls give the mask; the FlashAttention-2 note stands where
    its kernel would give another one (and returns whether it does)."""
    sdpa, flash, flex = calls
    np.testing.assert_array_equal(run_sdpa_call(sdpa, s), mask, err_msg=sdpa)
    assert ("empty_rows=" in sdpa) == (not mask.any(axis=1).all()), sdpa
    bottom_right = weights_mask(
        sdpa_ref.attention,
        s,
        empty_rows="zero",
        **{**keywords(s), "align": "bottom_right"},
    )
    has_flash = s["sink_tokens"] == 0 and (
        np.array_equal(mask, bottom_right) or shifted_window(s) is not None
    )
    flash2_differs = False
    if has_flash:
        np.testing.assert_array_equal(run_flash_call(flash, s), mask, err_msg=flash)
        if s["chunk"] is None:
            flash2_differs = not np.array_equal(run_flash2_kernel(flash, s), mask)
    else:
        assert flash == "—", (s, flash)
    if flash_note is not None:
        assert (FLASH2_NOTE in flash_note) == flash2_differs, (s, flash, flash_note)
    masked = (
        s["is_causal"]
        or s["chunk"] is not None
        or (s["window"] is not None and s["window"] != [None, None])
    )
    if masked:
        np.testing.assert_array_equal(run_mask_mod(flex, s), mask, err_msg=flex)
    else:
        assert flex == "—", (s, flex)
        assert mask.all()
    return flash2_differs


# -- the page --------------------------------------------------------------------
def state(page):
    return json.loads(page.locator(ROOT).get_attribute("data-state"))


def assert_shows(page, want):
    got = state(page)
    assert {k: got[k] for k in want} == want
    mask, message = sdpa_answer({**DEFAULT, **got})
    if message is None:
        assert "error" not in got
        assert got["allowed"] == mask.tolist()
    else:
        assert "allowed" not in got
        assert got["error"] == message
    return got


def form(page):
    return page.locator(f"{ROOT} form")


def test_the_root_carries_its_name_and_state(open_page):
    page = open_page(PAGE)
    root = shown(page, ROOT)
    got = assert_shows(page, DEFAULT)
    assert set(got) == {"n_q", "n_k", *OPTION_KEYS, "allowed"}
    assert got["allowed"] == sdpa_ref.causal_mask(3, 6, "bottom_right").tolist()
    expect(root.locator(".me-status")).to_have_text("15 of 18 pairs allowed.")


def test_the_grid_and_calls_equal_sdpa_ref_on_random_states(open_page):
    """Random states, invalid ones included: every grid, message and call."""
    page = open_page(PAGE)
    states = random_states(np.random.default_rng(SEED), RANDOM_STATES)
    results = []
    for start in range(0, len(states), 400):
        results += page.evaluate(DRIVE, states[start : start + 400])
    valid = invalid = empty = flash2 = 0
    for s, got in zip(states, results, strict=True):
        shown = got["state"]
        assert {k: shown[k] for k in s} == s
        mask, message = sdpa_answer(s)
        if message is not None:
            invalid += 1
            assert "allowed" not in shown, s
            assert shown["error"] == message, s
            assert got["status"] == f"sdpa_ref raises ValueError: {message}"
            assert got["calls"][1:] == ["—", "—"]
            with pytest.raises(ValueError, match=re.escape(message)):
                run_sdpa_call(got["calls"][0], s)
            continue
        valid += 1
        assert "error" not in shown, s
        assert shown["allowed"] == mask.tolist(), s
        flash2 += check_calls(s, mask, got["calls"], got["flashNote"])
        rows = [f"q{i}" for i in np.flatnonzero(~mask.any(axis=1))]
        if rows:
            empty += 1
            assert "see no key" in got["status"] or "sees no key" in got["status"]
            for name in ("zero", "nan", "uniform", "unmask"):
                assert f"{name}, " in got["status"]
    assert valid + invalid == len(states) >= 2000
    assert valid > 1000
    assert invalid > 300
    assert empty > 50
    assert flash2 > 20  # states where FlashAttention-2's kernel differs


def test_every_invalid_kind_shows_sdpa_refs_message(open_page):
    page = open_page(PAGE)
    cases = [
        {**DEFAULT, "is_causal": True, "window": [None, 3]},
        {**DEFAULT, "is_causal": True, "window": [4, 16]},
        {**DEFAULT, "is_causal": False, "sink_tokens": 2, "window": None},
        {**DEFAULT, "is_causal": False, "sink_tokens": 16, "window": [None, 0]},
        {**DEFAULT, "is_causal": True, "sink_tokens": 1, "window": [None, 5]},
    ]
    for s, got in zip(cases, page.evaluate(DRIVE, cases), strict=True):
        _, message = sdpa_answer(s)
        assert message is not None
        assert got["state"]["error"] == message
    expect(page.locator(f"{ROOT} .me-error")).to_have_text(message)


def test_mouse_clicks_compose_a_mask(open_page):
    page = open_page(PAGE)
    root = page.locator(ROOT)
    root.locator("label", has_text="is_causal").click()
    assert_shows(page, {**DEFAULT, "is_causal": False})
    root.locator("label", has_text="top-left").click()
    root.locator("label", has_text="is_causal").click()
    assert_shows(page, {**DEFAULT, "align": "top_left"})
    root.locator('label:text-is("on")').click()
    root.locator('select[name="left"]').select_option("1")
    assert_shows(page, {**DEFAULT, "align": "top_left", "window": [1, None]})
    root.locator('select[name="right"]').select_option("0")
    root.locator('select[name="chunk"]').select_option("2")
    got = assert_shows(
        page, {**DEFAULT, "align": "top_left", "window": [1, 0], "chunk": 2}
    )
    assert got["allowed"][2] == [False, False, True, False, False, False]


def test_keyboard_reaches_and_changes_every_control(open_page):
    page = open_page(PAGE)
    n_q = page.locator(f"{ROOT} input[name=n_q]")
    n_q.focus()
    page.keyboard.press("ArrowUp")
    assert_shows(page, {**DEFAULT, "n_q": 4})
    outline = n_q.evaluate("e => getComputedStyle(e).outlineStyle")
    assert outline != "none"
    page.keyboard.press("Tab")  # n_k
    page.keyboard.press("Control+A")
    page.keyboard.type("2")
    assert_shows(page, {**DEFAULT, "n_q": 4, "n_k": 2})
    status = page.locator(f"{ROOT} .me-status")
    expect(status).to_contain_text("q0 and q1 see no key")
    expect(status.locator("a")).to_have_attribute("href", "#empty-rows")
    page.keyboard.press("Tab")  # is_causal
    page.keyboard.press("Space")
    assert_shows(page, {**DEFAULT, "n_q": 4, "n_k": 2, "is_causal": False})
    page.keyboard.press("Tab")  # the checked alignment radio
    page.keyboard.press("ArrowLeft")
    assert_shows(
        page, {**DEFAULT, "n_q": 4, "n_k": 2, "is_causal": False, "align": "top_left"}
    )
    page.keyboard.press("Tab")  # window on
    page.keyboard.press("Space")
    page.keyboard.press("Tab")  # left
    page.keyboard.press("ArrowDown")  # unbounded -> 0
    got = assert_shows(
        page,
        {
            "n_q": 4,
            "n_k": 2,
            "is_causal": False,
            "align": "top_left",
            "window": [0, None],
        },
    )
    assert got["allowed"][0] == [True, True]
    expect(page).to_have_url(re.compile(r"#n_q=4&n_k=2&is_causal=0&align=top_left"))


def test_a_tap_changes_the_mask_on_a_touch_phone(open_page):
    page = open_page(PAGE, **TOUCH_PHONE)
    root = page.locator(ROOT)
    root.locator("label", has_text="top-left").tap()
    assert_shows(page, {**DEFAULT, "align": "top_left"})
    root.locator('label:text-is("on")').tap()
    root.locator("label", has_text="is_causal").tap()
    assert_shows(
        page,
        {
            **DEFAULT,
            "align": "top_left",
            "is_causal": False,
            "window": [None, None],
        },
    )


def test_state_lives_in_the_url_and_survives_a_reload(open_page):
    fragment = (
        "#n_q=5&n_k=9&is_causal=1&align=bottom_right&window=2,inf&sink_tokens=1"
        "&chunk=off"
    )
    page = open_page(PAGE + fragment, width=PHONE["width"], height=PHONE["height"])
    want = {**DEFAULT, "n_q": 5, "n_k": 9, "window": [2, None], "sink_tokens": 1}
    assert_shows(page, want)
    expect(page.locator(ROOT)).to_be_in_viewport()  # a state link shows its figure
    page.locator(f"{ROOT} select[name=chunk]").select_option("4")
    expect(page).to_have_url(re.compile(r"&chunk=4$"))
    page.reload()
    assert_shows(page, {**want, "chunk": 4})
    page.evaluate("location.hash = 'n_q=2&n_k=2&is_causal=0&align=top_left&window=off'")
    assert_shows(
        page, {**DEFAULT, "n_q": 2, "n_k": 2, "is_causal": False, "align": "top_left"}
    )


@pytest.mark.parametrize(
    "fragment",
    ["#n_q=17&n_k=3", "#n_q=3&n_k=3&window=1", "#n_q=3&n_k=3&chunk=0", "#empty-rows"],
)
def test_a_bad_or_section_link_leaves_the_default(open_page, fragment):
    page = open_page(PAGE + fragment)
    assert_shows(page, DEFAULT)
    assert page.url.endswith(fragment)  # loading never rewrites a link


BIG = {
    "n_q": 16,
    "n_k": 16,
    "is_causal": False,
    "align": "bottom_right",
    "window": [3, 2],
    "sink_tokens": 12,
    "chunk": 16,
}
FLAGGED = {**DEFAULT, "n_q": 16, "n_k": 2}
INVALID = {**DEFAULT, "n_q": 16, "n_k": 16, "window": [None, 15]}

CONTRAST = contrast_script(
    "root",
    """
    const css = (sel, prop) => getComputedStyle(root.querySelector(sel))[prop];
    const page = getComputedStyle(document.body).backgroundColor;
    const code = css('.me-calls .highlight', 'backgroundColor');
    const solid = code.startsWith('rgba(0, 0, 0, 0)') ? page : code;
    return {
        body: page,
        status: ratio(css('.me-status', 'color'), page),
        note: ratio(css('.me-note', 'color'), page),
        call: ratio(css('.me-calls pre', 'color'), solid),
        label: ratio(css('.me-grid text', 'fill'), page),
        flag: ratio(css('.me-grid text.me-empty', 'fill'), page),
        cell: ratio(css('.me-on', 'fill'), page),
        field: ratio(css('input[name=n_q]', 'color'),
                     css('input[name=n_q]', 'backgroundColor')),
    };""",
)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_readable_at_both_widths_in_both_themes(open_page, width, scheme):
    page = open_page(PAGE, width=width, height=844, color_scheme=scheme)
    root = page.locator(ROOT)
    for s in (BIG, FLAGGED, INVALID, DEFAULT):
        page.evaluate(DRIVE, [s])
        assert_fits(page, root, (s, width))
        box = root.locator(".me-grid").bounding_box()
        cell = box["width"] / (28 + 20 * s["n_k"]) * 18
        assert cell >= 14, (s, width, cell)  # a cell a finger can see
    page.evaluate(DRIVE, [FLAGGED])
    ratios = root.evaluate(CONTRAST)
    assert is_dark(ratios.pop("body")) == (scheme == "dark")
    for key in ("status", "note", "call", "label", "flag", "field"):
        assert ratios[key] >= 4.5, (key, ratios)
    assert ratios["cell"] >= 3.0, ratios


def test_without_javascript_the_fallback_draws_both_alignments(open_page):
    fallback = shown(open_page(PAGE, js=False), ROOT, js=False)
    grids = fallback.locator("svg.me-grid")
    expect(grids).to_have_count(2)
    for i, align in enumerate(("top_left", "bottom_right")):
        cells = (
            grids.nth(i)
            .locator("rect")
            .evaluate_all("rs => rs.map(r => r.getAttribute('class') === 'me-on')")
        )
        want = sdpa_ref.causal_mask(3, 6, align)
        assert cells == want.ravel().tolist()
        expect(fallback.locator("figcaption").nth(i)).to_contain_text(
            f'align="{align}"'
        )


def test_the_flash2_note_stands_where_its_kernel_reads_the_window_otherwise(open_page):
    """Four queries, two keys, top-left causal: attention_ref reads
    window_size=(-1, 2) as the grid (7 of 8 pairs); FlashAttention-2's kernel
    turns the 2 into -1 and allows all 8."""
    page = open_page(PAGE)
    four_by_two = {**DEFAULT, "n_q": 4, "n_k": 2, "align": "top_left"}
    four_by_two.update(is_causal=True, window=None, sink_tokens=0, chunk=None)
    odd, usual = page.evaluate(DRIVE, [four_by_two, DEFAULT])
    assert odd["calls"][1] == "flash_attn_func(q, k, v, window_size=(-1, 2))"
    assert FLASH2_NOTE in odd["flashNote"]
    assert FLASH2_NOTE not in usual["flashNote"]
