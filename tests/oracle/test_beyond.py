"""The pages beyond the text: online softmax, memory, masks, precision, variants."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import sdpa_ref
from sdpa_ref import example, flash, masks, precision, variants

rows = arrays(np.float64, st.integers(1, 12), elements=st.floats(-30, 30))


@pytest.mark.slow
@given(rows, st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_online_softmax_equals_softmax_times_values(scores, block, seed):
    values = np.random.default_rng(seed).normal(size=(scores.size, 3))
    steps, out = flash.online_softmax_trace(scores, values, block)
    np.testing.assert_allclose(out, sdpa_ref.softmax(scores) @ values, atol=1e-12)
    assert len(steps) == -(-scores.size // block)
    assert steps[0]["rescale"] == 0.0
    assert all(0 < s["rescale"] <= 1 for s in steps[1:])


def test_online_trace_rescales_when_the_maximum_rises():
    steps, _ = flash.online_softmax_trace([-1.5, -0.5, 0.5, 1.5], np.eye(4), 2)
    assert steps[1]["rescale"] == pytest.approx(np.exp(-2.0))
    assert (steps[1]["first_key"], steps[1]["last_key"]) == (2, 3)


def test_peak_memory_is_repeatable_and_sees_numpy():
    # The array is 512 KiB; what differs between calls is the interpreter's
    # own bookkeeping (tens of bytes), which tracemalloc also counts.
    first = flash.peak_memory(np.ones, (256, 256))
    assert abs(first - flash.peak_memory(np.ones, (256, 256))) <= 1024
    assert first >= 256 * 256 * 8


@pytest.mark.slow
def test_dense_memory_grows_like_n_squared_and_tiled_like_n():
    sweep = flash.memory_sweep([1024, 2048, 4096])
    dense = np.array([r["dense_bytes"] for r in sweep])
    tiled = np.array([r["tiled_bytes"] for r in sweep])
    np.testing.assert_allclose(dense[1:] / dense[:-1], 4.0, rtol=0.1)
    np.testing.assert_allclose(tiled[1:] / tiled[:-1], 2.0, rtol=0.1)
    assert all(r["max_abs_diff"] < 1e-14 for r in sweep)
    assert sweep[-1]["tiled_bytes"] * 8 < sweep[-1]["dense_bytes"]


@pytest.mark.parametrize(("n", "left"), [(4, 1), (8, 2), (10, 0), (6, 9), (6, 5)])
def test_window_pairs_match_the_mask(n, left):
    kept, _ = masks.count_pairs(masks.sliding_window_mask(n, left))
    assert masks.window_pairs([n], left)[0]["window"] == kept
    assert (
        masks.window_pairs([n], left)[0]["causal"]
        == masks.count_pairs(sdpa_ref.causal_mask(n, n))[0]
    )


@pytest.mark.parametrize(("n", "left"), [(5, 0), (8, 2), (6, 9)])
def test_the_sliding_window_is_attentions_window_left_zero(n, left):
    """One convention: `left` keys to the query's left, the query not counted."""
    rng = np.random.default_rng(n)
    q, k, v = rng.normal(size=(3, n, 4))
    mask = masks.sliding_window_mask(n, left)
    np.testing.assert_array_equal(
        sdpa_ref.attention(q, k, v, mask=mask),
        sdpa_ref.attention(q, k, v, window=(left, 0)),
    )
    assert mask.sum(axis=1).max() == min(n, left + 1)


def test_padding_makes_padding_invisible():
    assert masks.padding_gap([5, 3, 1], 5) < 1e-15
    assert masks.agreement_text(masks.padding_gap([5, 3], 5)) == "bit for bit"
    assert masks.agreement_text(3e-17) == "to within 3.0e-17"
    with pytest.raises(ValueError, match="gap must be a nonnegative number"):
        masks.agreement_text(float("nan"))
    with pytest.raises(ValueError, match=r"lengths must be integers in 0\.\.4"):
        masks.padding_mask([5], 4)


def test_empty_row_conventions():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(4, 2)), rng.normal(size=(2, 2))
    mask = sdpa_ref.causal_mask(4, 2, "bottom_right")
    out = masks.empty_row_outcomes(q, k, np.eye(2), mask)
    assert np.isnan(out["nan"][:2]).all()
    np.testing.assert_array_equal(
        out["uniform"][:2], 0.5
    )  # exactly even: all logits equal
    np.testing.assert_array_equal(out["zero"][:2], 0.0)
    # unmask: the empty rows attend to both keys with their own scores
    np.testing.assert_allclose(
        out["unmask"][:2], sdpa_ref.attention(q[:2], k, np.eye(2)), atol=1e-15
    )
    assert not np.allclose(out["unmask"][:2], 0.5)
    for name in out:
        np.testing.assert_allclose(out[name][2:], out["zero"][2:], atol=1e-15)
    pooled = masks.pooled_outputs(out)
    assert np.isnan(pooled["nan"]).all()
    assert np.isfinite(pooled["uniform"]).all()
    assert np.isfinite(pooled["unmask"]).all()
    # The plain mean divides by all four queries: zero rows halve the pool.
    np.testing.assert_allclose(pooled["zero"], out["zero"][2:].sum(axis=0) / 4)
    # The mask-aware mean over the queries with a key: the same for every
    # finite convention, and still NaN for "nan" (nan * 0 is nan).
    keep = mask.any(axis=-1)
    masked = masks.pooled_outputs(out, keep)
    for name in ("uniform", "unmask", "zero"):
        np.testing.assert_allclose(masked[name], out["zero"][2:].mean(axis=0))
    assert np.isnan(masked["nan"]).all()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, 1.0),
        (3.14159, 3.140625),
        (999.0, 1000.0),
        (1 + 2**-8, 1.0),
        (1 + 3 * 2**-8, 1 + 2**-6),
    ],
)
def test_bfloat16_rounds_to_nearest_even(value, expected):
    assert float(precision.to_bfloat16(np.float32(value))) == expected


def test_bfloat16_keeps_inf_and_nan_and_overflows_past_its_max():
    out = precision.to_bfloat16(
        np.array([np.inf, -np.inf, np.nan, 3.4e38], dtype=np.float32)
    )
    assert np.isposinf(out[0])
    assert np.isneginf(out[1])
    assert np.isnan(out[2])
    assert np.isposinf(out[3])  # past the largest bfloat16, 3.39e38
    assert (
        float(precision.to_bfloat16(np.float32(precision.BFLOAT16_MAX)))
        == precision.BFLOAT16_MAX
    )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_naive_breaks_past_the_threshold_and_stable_never_does(dtype):
    threshold = sdpa_ref.steps.overflow_threshold(dtype)
    below, above = np.array([threshold - 1.0, 0.0]), np.array([threshold + 1.0, 0.0])
    assert np.isfinite(precision.softmax_in(below, dtype, stable=False)).all()
    assert np.isnan(precision.softmax_error(above, dtype, stable=False))
    assert precision.softmax_error(above, dtype) < 1e-2


def test_bfloat16_cannot_tell_999_from_1000():
    row = precision.precision_sweep([1000.0])[0]
    assert row[("bfloat16", "stable")] == pytest.approx(
        1 / (1 + np.exp(-1)) - 0.5, abs=1e-3
    )
    assert row[("float32", "stable")] < 1e-6


def test_kv_cache_shrinks_by_the_group_size():
    for row in variants.kv_cache_table(4096):
        assert row["vs_multi_head"] == pytest.approx(row["kv_heads"] / row["q_heads"])
    assert variants.gqa_equivalence() == 0.0


def test_linear_attention_is_the_kernel_weighted_average():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    phi = variants.elu_feature_map
    kernel = phi(q) @ phi(k).T
    expected = kernel @ v / kernel.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(variants.linear_attention(q, k, v, phi), expected)


def test_random_features_estimate_exp_without_bias():
    q, k = np.array([0.3, -0.2]), np.array([0.1, 0.4])
    estimates = [
        variants.positive_random_features(q, w)
        @ variants.positive_random_features(k, w)
        for w in (
            np.random.default_rng(s).standard_normal((2000, 2)) for s in range(50)
        )
    ]
    assert np.mean(estimates) == pytest.approx(np.exp(q @ k), rel=0.01)


def test_random_feature_error_falls_with_more_features():
    errs = variants.linear_attention_errors(*example.vectors(4), [16, 256, 16384])
    assert (
        errs["random_features"][0]
        > errs["random_features"][1]
        > errs["random_features"][2]
    )


def test_each_scale_choice_holds_only_its_own_growth():
    ex = variants.scale_choice_entropies(example.WIDTHS, "example")
    np.testing.assert_allclose(ex["1/d_k"], ex["1/d_k"][0])
    np.testing.assert_allclose(ex["QK-norm"], ex["QK-norm"][0])
    assert (np.diff(ex["1/√d_k"]) < 0).all()
    rnd = variants.scale_choice_entropies([4, 64, 1024], "random")
    assert np.ptp(rnd["1/√d_k"]) < 0.1
    assert rnd["none"][-1] < 0.2
    assert rnd["1/d_k"][-1] > 0.99 * np.log(8)
    with pytest.raises(ValueError, match=r"scale must be one of .*, got 'half'"):
        variants.scaled_scores(np.ones((1, 2)), np.ones((1, 2)), "half")


def test_mistral_and_olmo_2_share_all_but_their_key_value_heads():
    """The masks page's comparison: 32 layers, 32 query heads, width 128 each."""
    olmo, mistral = masks.OLMO_2_7B_KV, masks.MISTRAL_7B_KV
    shape = variants.MODEL_SHAPES["Mistral 7B (grouped-query)"]
    assert olmo["layers"] == mistral["layers"] == 32
    assert olmo["head_dim"] == mistral["head_dim"] == 128
    assert olmo["kv_heads"] == shape["q_heads"] == 32  # OLMo 2: one per query head
    row = variants.kv_cache_table(1, models={"m": shape})[0]
    assert row["bytes"] == pytest.approx(
        row["vs_multi_head"] * sdpa_ref.cost.kv_cache_bytes(1, **olmo)
    )
    assert row["vs_multi_head"] == 0.25
