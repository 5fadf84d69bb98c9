"""The flash page's stepper: its trace, and the JSON the page carries.

The figure's script only moves between states written at build time, so the
page is right exactly when that JSON equals ``sdpa_ref.flash``'s trace. These
tests recompute the trace here and compare every number of every state.
"""

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

import sdpa_ref
from figures import online_softmax
from sdpa_ref import flash

ROOT = Path(__file__).parents[2]
SHAPE = flash.TRACE_SHAPE


def traced(order):
    return flash.tiled_forward_trace(
        *flash.trace_problem(), SHAPE["block_rows"], SHAPE["block_cols"], order=order
    )


@pytest.fixture(scope="module")
def data():
    return online_softmax.stepper_data()


# -- the trace ---------------------------------------------------------------------
def test_the_problem_is_small_seeded_integers_whose_scores_are_halves():
    q, k, v = flash.trace_problem()
    assert (q.shape, k.shape, v.shape) == ((4, 4), (12, 4), (12, 2))
    for x in (q, k, v):
        assert x.dtype == np.float64
        assert np.array_equal(x, np.round(x))
        assert x.min() >= -2
        assert x.max() <= 2
    scores = q @ k.T / np.sqrt(SHAPE["d"])
    assert np.array_equal(2 * scores, np.round(2 * scores))
    again = flash.trace_problem()
    assert all(np.array_equal(a, b) for a, b in zip((q, k, v), again, strict=True))


def test_the_seed_shows_both_a_rising_and_a_steady_maximum():
    """What TRACE_SEED's comment promises, so that every step teaches something."""
    trace = traced("flash2")
    rises = np.zeros((SHAPE["n_q"], len(trace["key_blocks"])), dtype=bool)
    for step in trace["steps"]:
        rows = slice(step["queries"][0], step["queries"][1] + 1)
        rises[rows, step["key_block"]] = step["max_after"] > step["max_before"]
    later = rises[:, 1:]
    assert later.any(axis=1).all(), "some query's maximum never rises after block 1"
    assert later.any(axis=0).all()
    assert (~later).any(axis=0).all()


@pytest.mark.parametrize("order", flash.LOOP_ORDERS)
def test_each_query_follows_the_one_row_online_softmax(order):
    """Each tile's m, ℓ, factor and a are one_row's steps, query by query."""
    q, k, v = flash.trace_problem()
    trace = traced(order)
    scores = q @ k.T / np.sqrt(SHAPE["d"])
    np.testing.assert_array_equal(trace["scores"], scores)
    rows = {
        r: flash.online_softmax_trace(scores[r], v, SHAPE["block_cols"])
        for r in range(SHAPE["n_q"])
    }
    for step in trace["steps"]:
        first, last = step["queries"]
        for offset, r in enumerate(range(first, last + 1)):
            want = rows[r][0][step["key_block"]]
            assert (want["first_key"], want["last_key"]) == tuple(step["keys"])
            assert step["max_before"][offset] == want["max_before"]
            assert step["max_after"][offset] == want["max_after"]
            assert step["rescale"][offset] == pytest.approx(want["rescale"], rel=1e-15)
            assert step["sum"][offset] == pytest.approx(want["sum"], rel=1e-14)
            np.testing.assert_allclose(step["acc"][offset], want["acc"], rtol=1e-14)
    for r, (_, out) in rows.items():
        np.testing.assert_allclose(trace["output"][r], out, rtol=1e-14)


@pytest.mark.parametrize("order", flash.LOOP_ORDERS)
def test_the_result_is_dense_attention(order):
    q, k, v = flash.trace_problem()
    trace = traced(order)
    dense = sdpa_ref.attention(q, k, v)
    np.testing.assert_array_equal(trace["dense"], dense)
    np.testing.assert_allclose(trace["output"], dense, rtol=1e-14, atol=1e-15)
    assert trace["max_abs_diff"] == float(np.abs(trace["output"] - dense).max())
    assert trace["max_abs_diff"] < 1e-15


def test_the_orders_visit_the_same_tiles_in_their_own_sequence():
    two, one = traced("flash2"), traced("flash")
    tiles2 = [(s["query_block"], s["key_block"]) for s in two["steps"]]
    tiles1 = [(s["query_block"], s["key_block"]) for s in one["steps"]]
    assert tiles2 == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]  # queries outer
    assert tiles1 == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]  # keys outer
    by_tile = {(s["query_block"], s["key_block"]): s for s in one["steps"]}
    for step in two["steps"]:
        other = by_tile[step["query_block"], step["key_block"]]
        np.testing.assert_array_equal(step["max_after"], other["max_after"])
        np.testing.assert_array_equal(step["sum"], other["sum"])
        np.testing.assert_array_equal(step["acc"], other["acc"])
    np.testing.assert_array_equal(two["output"], one["output"])


def test_each_order_moves_what_its_algorithm_1_moves():
    two, one = traced("flash2"), traced("flash")
    n_i, n_j = len(two["query_blocks"]), len(two["key_blocks"])
    reads2 = [r for s in two["steps"] for r in s["reads"]]
    # FlashAttention-2: each Q_i once, each K_j and V_j once per query block,
    # O_i and L_i written once, at the end of its row of tiles.
    assert sorted(reads2) == sorted(
        [("Q", i) for i in range(n_i)]
        + [(a, j) for j in range(n_j) for a in "KV" for _ in range(n_i)]
    )
    assert [w for s in two["steps"] for w in s["writes"]] == [
        (a, i) for i in range(n_i) for a in ("O", "L")
    ]
    assert two["initial"]["writes"] == []
    # FlashAttention: K_j and V_j once; Q_i, O_i, l_i, m_i read at every tile,
    # and O_i, l_i, m_i written back at every tile, after being initialised.
    reads1 = [r for s in one["steps"] for r in s["reads"]]
    assert sorted(r for r in reads1 if r[0] in "KV") == sorted(
        (a, j) for j in range(n_j) for a in "KV"
    )
    for s in one["steps"]:
        i = s["query_block"]
        assert {("Q", i), ("O", i), ("l", i), ("m", i)} <= set(s["reads"])
        assert s["writes"] == [("O", i), ("l", i), ("m", i)]
    assert len(one["initial"]["writes"]) == 3 * n_i


def test_bad_input_names_the_argument():
    q, k, v = flash.trace_problem()
    with pytest.raises(ValueError, match="order must be one of"):
        flash.tiled_forward_trace(q, k, v, 2, 4, order="flash3")
    with pytest.raises(ValueError, match=r"must agree, got shapes \(4, 4\), \(12, 3\)"):
        flash.tiled_forward_trace(q, k[:, :3], v, 2, 4)
    with pytest.raises(ValueError, match="must be 2-D"):
        flash.tiled_forward_trace(q[None], k, v, 2, 4)
    with pytest.raises((ValueError, TypeError), match="block_cols"):
        flash.tiled_forward_trace(q, k, v, 2, 0)


def test_a_ragged_last_block_is_traced_too():
    q, k, v = flash.trace_problem()
    trace = flash.tiled_forward_trace(q[:3], k[:10], v[:10], 2, 4, order="flash")
    assert trace["query_blocks"] == [(0, 1), (2, 2)]
    assert trace["key_blocks"] == [(0, 3), (4, 7), (8, 9)]
    np.testing.assert_allclose(
        trace["output"], sdpa_ref.attention(q[:3], k[:10], v[:10])
    )


# -- the figure's data -------------------------------------------------------------
def expected_state(order, t):
    """The data-state after tile ``t`` (0: before any), straight from the trace."""
    trace = traced(order)
    n_q = SHAPE["n_q"]
    state = trace["initial"]["state"] if t == 0 else trace["steps"][t - 1]["state"]
    rescale = [None] * n_q
    output = [None] * n_q
    for s in trace["steps"][:t]:
        if s["output"] is not None:
            for offset, r in enumerate(range(s["queries"][0], s["queries"][1] + 1)):
                output[r] = [float(x) for x in s["output"][offset]]
    tile = None
    if t:
        s = trace["steps"][t - 1]
        tile = [s["query_block"], s["key_block"]]
        for offset, r in enumerate(range(s["queries"][0], s["queries"][1] + 1)):
            rescale[r] = float(s["rescale"][offset])
    return {
        "order": order,
        "step": t,
        "steps": len(trace["steps"]),
        "tile": tile,
        "on_chip": []
        if t == 0
        else [list(p) for p in trace["steps"][t - 1]["on_chip"]],
        "m": [None if np.isneginf(x) else float(x) for x in state["m"]],
        "l": [float(x) for x in state["l"]],
        "acc": [[float(x) for x in row] for row in state["acc"]],
        "rescale": rescale,
        "output": output,
        "max_abs_diff": trace["max_abs_diff"] if t == len(trace["steps"]) else None,
    }


@pytest.mark.parametrize("order", flash.LOOP_ORDERS)
def test_every_state_carries_the_traces_numbers(data, order):
    views = data["orders"][order]["steps"]
    assert len(views) == len(traced(order)["steps"]) + 1
    for t, view in enumerate(views):
        # Through JSON, as the page carries it: a float survives exactly.
        got = json.loads(online_softmax.state_json(view["state"]))
        assert got == expected_state(order, t), (order, t)


@pytest.mark.parametrize("order", flash.LOOP_ORDERS)
def test_every_state_shows_the_traces_numbers_rounded(data, order):
    trace = traced(order)
    for t, view in enumerate(data["orders"][order]["steps"]):
        state = expected_state(order, t)
        for r, cells in enumerate(view["rows"]):
            m, factor, total, acc, out = cells
            want_m = "−∞" if state["m"][r] is None else f"{state['m'][r]:g}"
            assert m == want_m.replace("-", "−")
            assert total == f"{state['l'][r]:.3f}".replace("-", "−")
            assert acc == (
                "[" + ", ".join(f"{x:.3f}" for x in state["acc"][r]) + "]"
            ).replace("-", "−")
            if state["rescale"][r] is None:
                assert factor == ""
            else:
                f = state["rescale"][r]
                assert factor == ("0" if f == 0 else "1" if f == 1 else f"{f:.3f}")
            if state["output"][r] is None:
                assert out == ""
            else:
                assert out == (
                    "[" + ", ".join(f"{x:.3f}" for x in state["output"][r]) + "]"
                ).replace("-", "−")
        if t == len(trace["steps"]):
            assert "largest difference" in view["result"]
            for row in trace["dense"]:
                vec = "[" + ", ".join(f"{x:.3f}" for x in row) + "]"
                assert vec.replace("-", "−") in view["result"]


def test_the_scores_shown_are_the_traces(data):
    scores = traced("flash2")["scores"]
    shown = [[float(x.replace("−", "-")) for x in row] for row in data["scores"]]
    np.testing.assert_array_equal(shown, scores)


def test_the_root_carries_its_state_and_every_state(data):
    page = online_softmax.root_html(data)
    assert page.startswith('<div class="os-fig" data-figure="online-softmax"')
    state = re.search(r'data-state="([^"]*)"', page).group(1)
    assert json.loads(html.unescape(state)) == expected_state("flash2", 0)
    payload = re.search(
        r'<script type="application/json" class="os-data">(.*?)</script>', page, re.S
    ).group(1)
    assert "</" not in payload
    assert json.loads(payload) == json.loads(online_softmax.stepper_json(data))
    assert online_softmax.stepper_json(data) == online_softmax.stepper_json(data)


def test_the_fallback_lists_every_tile_of_flash2():
    text = online_softmax.fallback_markdown()
    trace = traced("flash2")
    body = [line for line in text.splitlines() if line.startswith("| ")][2:]
    rows = [
        (s, offset)
        for s in trace["steps"]
        for offset in range(s["queries"][1] - s["queries"][0] + 1)
    ]
    assert len(body) == len(rows)
    for line, (step, offset) in zip(body, rows, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1] == f"q{step['queries'][0] + offset}"
        after = f"{step['max_after'][offset]:g}".replace("-", "−")
        assert cells[2].endswith(f"→ {after}")
        assert cells[4] == f"{step['sum'][offset]:.3f}"
    assert "largest difference" in text


def test_the_script_and_style_weigh_under_15_kb():
    static = ROOT / "figures" / "static"
    size = sum(
        (static / f"online-softmax.{ext}").stat().st_size for ext in ["js", "css"]
    )
    assert size < 15_000, size


def test_the_script_does_no_arithmetic_on_the_numbers():
    """It moves between states: no Math, no exp, no rounding of a number."""
    script = (ROOT / "figures" / "static" / "online-softmax.js").read_text()
    for word in ("Math.exp", "toFixed", "toPrecision", "Math.round", "parseFloat"):
        assert word not in script
