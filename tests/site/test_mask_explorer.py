"""The masks page's explorer: what its builder writes into the page.

The script computes the grid in the browser (tests/browser/test_mask_explorer.py
holds it to sdpa_ref there). Here: the data it is given, the messages it shows
(captured from sdpa_ref, and equal to what sdpa_ref raises for every invalid
combination the controls can reach), the grid drawn before any script runs and
the no-JavaScript fallback, each against sdpa_ref's own mask.
"""

import html
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest

import sdpa_ref
from figures import mask_explorer
from sdpa_ref import mods

ROOT = Path(__file__).parents[2]
STATIC = ROOT / "figures" / "static"
LIMIT = mask_explorer.LIMIT
BOUNDS = [None, *range(LIMIT + 1)]
SEED = 19


def raised(state):
    """What sdpa_ref.attention raises for ``state``'s options, or None."""
    q = np.zeros((state["n_q"], 1))
    k, v = np.zeros((state["n_k"], 1)), np.ones((state["n_k"], 1))
    try:
        sdpa_ref.attention(q, k, v, empty_rows="zero", **mask_explorer.options(state))
    except ValueError as exc:
        return str(exc)
    return None


def state(**changes):
    return {**mask_explorer.DEFAULT, **changes}


def grids_of(svg_html):
    """Each <svg class="me-grid"> as rows of booleans, from its rect classes."""
    out = []
    for svg in re.findall(r'<svg class="me-grid".*?</svg>', svg_html, re.S):
        width, height = (
            int(x) for x in re.search(r'viewBox="0 0 (\d+) (\d+)"', svg).groups()
        )
        pitch = mask_explorer.CELL + mask_explorer.GAP
        n_k = (width - mask_explorer.MARGIN_LEFT) // pitch
        n_q = (height - mask_explorer.MARGIN_TOP) // pitch
        cells = re.findall(r'<rect class="me-(on|off)"', svg)
        assert len(cells) == n_q * n_k
        out.append(np.array([c == "on" for c in cells]).reshape(n_q, n_k))
    return out


# -- the messages ------------------------------------------------------------------
def test_templates_are_captured_from_sdpa_ref():
    templates = mask_explorer.error_templates()
    assert set(templates) == {"causal_right", "sink_without_left"}
    assert templates["causal_right"].startswith("is_causal=True means a right window")
    assert "{window}" in templates["causal_right"]
    assert "{left}" in templates["causal_right"]
    assert templates["sink_without_left"].startswith("sink_tokens={sink_tokens} ")
    assert mask_explorer.explorer_data()["errors"] == templates


def invalid_states():
    """Every invalid combination of options the controls reach, at one size."""
    for left, right in itertools.product(BOUNDS, range(1, LIMIT + 1)):
        yield state(window=[left, right], is_causal=True)
    for sinks in range(1, LIMIT + 1):
        yield state(is_causal=False, sink_tokens=sinks, window=None)
        for right in BOUNDS:
            yield state(is_causal=False, sink_tokens=sinks, window=[None, right])
            # Both wrong at once: sdpa_ref names the causal one first.
            if right:
                yield state(is_causal=True, sink_tokens=sinks, window=[None, right])


def test_every_invalid_combination_gets_sdpa_refs_exact_message():
    templates = mask_explorer.error_templates()
    count = 0
    for s in invalid_states():
        message = raised(s)
        assert message is not None, s
        name = (
            "causal_right"
            if s["is_causal"] and s["window"] and s["window"][1]
            else "sink_without_left"
        )
        assert mask_explorer.fill(templates[name], s) == message, s
        assert mask_explorer.error_text(s) == message
        assert mask_explorer.state_of(s)["error"] == message
        assert "allowed" not in mask_explorer.state_of(s)
        count += 1
    assert count > 800


def test_valid_neighbours_of_the_invalid_ones_raise_nothing():
    for s in (
        state(is_causal=True, window=[3, 0]),
        state(is_causal=True, window=[None, None]),  # right unbounded: causal's 0
        state(is_causal=False, window=[2, 5], sink_tokens=4),
        state(is_causal=False, window=[0, None], sink_tokens=16),
    ):
        assert raised(s) is None
        assert "allowed" in mask_explorer.state_of(s)


# -- the mask ----------------------------------------------------------------------
def by_mods(s):
    """The same mask composed from sdpa_ref.mods' ready mods, as the flex page says."""
    offset = mods.align_offset(s["n_q"], s["n_k"], s["align"])
    left, right = s["window"] or (None, None)
    if s["is_causal"]:
        right = 0
    parts = []
    if left is not None or right is not None:
        parts.append(
            mods.sliding_window(
                left, right, offset=offset, sink_tokens=s["sink_tokens"]
            )
        )
    if s["chunk"] is not None:
        parts.append(mods.chunked(s["chunk"], offset))
    mod = mods.and_masks(*parts) if parts else (lambda b, h, q, kv: kv >= 0)
    return mods.create_mask(mod, None, None, s["n_q"], s["n_k"])[0, 0]


def random_valid_states(rng, count):
    out = []
    while len(out) < count:
        window = (
            None
            if rng.random() < 0.3
            else [
                None if rng.random() < 0.25 else int(rng.integers(0, LIMIT + 1))
                for _ in range(2)
            ]
        )
        s = {
            "n_q": int(rng.integers(1, LIMIT + 1)),
            "n_k": int(rng.integers(1, LIMIT + 1)),
            "is_causal": bool(rng.random() < 0.5),
            "align": "top_left" if rng.random() < 0.5 else "bottom_right",
            "window": window,
            "sink_tokens": int(rng.integers(0, 4)) if rng.random() < 0.4 else 0,
            "chunk": None if rng.random() < 0.6 else int(rng.integers(1, LIMIT + 1)),
        }
        if raised(s) is None:
            out.append(s)
    return out


def test_the_builders_mask_is_the_one_sdpa_ref_attends_with():
    for s in random_valid_states(np.random.default_rng(SEED), 300):
        np.testing.assert_array_equal(mask_explorer.allowed_mask(s), by_mods(s))


# -- the markup -------------------------------------------------------------------
@pytest.fixture(scope="module")
def root_html():
    return mask_explorer.root_html()


def test_the_root_carries_its_name_and_its_first_state(root_html):
    assert root_html.count(f'data-figure="{mask_explorer.FIGURE_ID}"') == 1
    attr = re.search(r'data-state="([^"]*)"', root_html).group(1)
    got = json.loads(html.unescape(attr))
    default = mask_explorer.DEFAULT
    assert set(got) == {*default, "allowed"}
    assert {k: got[k] for k in default} == default
    want = sdpa_ref.causal_mask(default["n_q"], default["n_k"], default["align"])
    assert got["allowed"] == want.tolist()


def test_the_grid_drawn_before_any_script_is_sdpa_refs(root_html):
    (grid,) = grids_of(root_html)
    d = mask_explorer.DEFAULT
    np.testing.assert_array_equal(
        grid, sdpa_ref.causal_mask(d["n_q"], d["n_k"], d["align"])
    )


def test_the_data_holds_what_the_script_cannot_derive(root_html):
    text = re.search(
        r'<script type="application/json" class="me-data">(.*?)</script>',
        root_html,
        re.S,
    ).group(1)
    data = json.loads(text)
    assert data["limit"] == LIMIT
    assert data["default"] == mask_explorer.DEFAULT
    assert data["errors"] == mask_explorer.error_templates()
    assert data["empty_rows_link"] == "#empty-rows"
    assert "(empty-rows)=" in (ROOT / "docs" / "masks.md").read_text()
    # Each empty-row convention by the page's own name.
    for name in ("zero", "nan", "uniform", "unmask"):
        assert f"{name}, " in data["texts"]["empty"][2]


def test_every_option_is_a_real_form_control(root_html):
    for name in ("n_q", "n_k", "sink_tokens"):
        assert re.search(
            rf'<input type="number" id="[^"]+" name="{name}" min', root_html
        )
    for name in ("left", "right", "chunk"):
        assert re.search(rf'<select id="[^"]+" name="{name}">', root_html)
    assert root_html.count('type="radio"') == 2
    assert root_html.count('type="checkbox"') == 2
    for ident in re.findall(r'<(?:input|select)[^>]* id="([^"]+)"', root_html):
        assert f'<label for="{ident}">' in root_html, ident


def test_the_fallback_draws_both_alignments_from_sdpa_ref():
    d = mask_explorer.DEFAULT
    top_left, bottom_right = grids_of(mask_explorer.fallback_html())
    np.testing.assert_array_equal(top_left, sdpa_ref.causal_mask(d["n_q"], d["n_k"]))
    np.testing.assert_array_equal(
        bottom_right, sdpa_ref.causal_mask(d["n_q"], d["n_k"], "bottom_right")
    )


def test_the_grid_label_reads_each_querys_keys():
    s = state(n_q=4, n_k=2)
    allowed = mask_explorer.allowed_mask(s)
    assert mask_explorer.grid_label(s, allowed).endswith(
        "q0 none; q1 none; q2 k0; q3 k0–k1"
    )


def test_script_and_styles_weigh_under_15_kb_together():
    size = sum(
        (STATIC / f"mask-explorer.{ext}").stat().st_size for ext in ("js", "css")
    )
    assert size < 15_000, size


def test_the_script_asks_no_other_host():
    script = (STATIC / "mask-explorer.js").read_text()
    assert not re.search(
        r"fetch\(|XMLHttpRequest|https?://(?!www\.w3\.org/2000/svg)", script
    )
