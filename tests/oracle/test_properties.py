"""The text's claims, stated as properties and checked on generated input."""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from sdpa_ref import attention, softmax, tiled_attention
from sdpa_ref.spread import entropy, max_entropy
from tests.oracle.strategies import gaussian_inputs, gqa_sizes, sdpa_options

finite = st.floats(-50, 50, allow_nan=False, allow_infinity=False)
score_rows = arrays(np.float64, st.integers(1, 12), elements=finite)
widths = st.integers(2, 1024)


@given(score_rows)
def test_weights_are_nonnegative_and_sum_to_one(row):
    w = softmax(row)
    assert (w >= 0).all()
    np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-12)


@given(score_rows, st.floats(-1e6, 1e6))
def test_adding_a_constant_to_a_row_changes_no_weight(row, shift):
    np.testing.assert_allclose(softmax(row + shift), softmax(row), atol=1e-9)


@given(score_rows, widths)
def test_dividing_by_sqrt_dk_keeps_the_order(row, d_k):
    scaled = row / np.sqrt(d_k)
    w_raw, w_scaled = softmax(row), softmax(scaled)
    # Strictly larger scores keep strictly larger scaled scores ...
    for i, j in zip(*np.nonzero(row[:, None] > row[None, :]), strict=True):
        assert scaled[i] > scaled[j]
        assert w_scaled[i] >= w_scaled[j]
    # ... and the key with the top weight stays on top.
    assert w_raw.argmax() == w_scaled.argmax()


@given(score_rows, widths)
def test_dividing_by_sqrt_dk_never_lowers_the_entropy(row, d_k):
    raw = entropy(softmax(row))
    scaled = entropy(softmax(row / np.sqrt(d_k)))
    assert scaled >= raw - 1e-12


@given(score_rows)
def test_entropy_lies_between_0_and_ln_nk(row):
    h = entropy(softmax(row))
    assert -1e-12 <= h <= max_entropy(row.size) + 1e-12


@given(st.integers(1, 12))
def test_uniform_weights_reach_the_ceiling(n):
    np.testing.assert_allclose(entropy(np.full(n, 1 / n)), np.log(n), atol=1e-12)


@given(
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
)
def test_outputs_lie_in_the_convex_hull_of_the_values(n_q, n_k, d_k, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(n_q, d_k)) * 3, rng.normal(size=(n_k, d_k)) * 3
    v = rng.normal(size=(n_k, 2))
    out, w = attention(q, k, v, return_weights=True)
    # A convex combination: nonnegative weights summing to 1, and the output
    # inside the values' bounding box (a necessary condition checked directly).
    assert (w >= 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0)
    np.testing.assert_allclose(out, w @ v, atol=1e-12)
    assert (out >= v.min(0) - 1e-12).all()
    assert (out <= v.max(0) + 1e-12).all()


@given(
    st.integers(1, 3),
    st.integers(1, 7),
    st.integers(1, 20),
    st.integers(1, 6),
    st.integers(1, 25),
    st.booleans(),
    st.sampled_from(["none", "bool", "float"]),
    st.integers(0, 2**32 - 1),
)
def test_tiled_equals_dense(heads, n_q, n_k, d, block, causal, mask_kind, seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(heads, n_q, d))
    k, v = rng.normal(size=(heads, n_k, d)), rng.normal(size=(heads, n_k, d + 1))
    mask = None
    if mask_kind == "bool":
        mask = rng.random((heads, n_q, n_k)) < 0.6
    elif mask_kind == "float":
        mask = np.where(
            rng.random((n_q, n_k)) < 0.6, rng.normal(size=(n_q, n_k)), -np.inf
        )
    options = {"mask": mask, "is_causal": causal, "empty_rows": "zero"}
    dense = attention(q, k, v, **options)
    tiled = tiled_attention(q, k, v, block_size=block, **options)
    np.testing.assert_allclose(tiled, dense, rtol=0, atol=1e-12)


@given(arrays(np.float64, st.integers(1, 8), elements=st.floats(-1e300, 1e300)))
def test_huge_logits_stay_finite(row):
    assume(np.isfinite(row).all())
    w = softmax(row)
    assert np.isfinite(w).all()
    np.testing.assert_allclose(w.sum(), 1.0)


@st.composite
def option_sets(draw):
    """Any combination of FlashAttention's options, on GQA inputs."""
    rng, sizes = gqa_sizes(draw, b=2, h_kv=2, groups=3, n_q=9, n_k=14, d=4)
    b, h_kv, h, n_q, n_k, d = sizes
    options = sdpa_options(draw, rng, sizes, softcap_top=20)
    mask_kind = draw(st.sampled_from(["none", "bool", "float"]))
    if mask_kind == "bool":
        options["mask"] = rng.random((n_q, n_k)) < 0.7
    elif mask_kind == "float":
        options["mask"] = np.where(
            rng.random((h, n_q, 1)) < 0.8, rng.normal(size=(h, n_q, 1)), -np.inf
        )
    if draw(st.booleans()):
        options["dropout_p"] = draw(st.floats(0.01, 0.9))
        options["dropout_mask"] = rng.random((b, 1, n_q, n_k)) > 0.3
    q, k, v = gaussian_inputs(rng, (b, h, n_q, d), (b, h_kv, n_k, d))
    return q, k, v, options


@pytest.mark.slow
@given(option_sets(), st.integers(1, 15))
def test_tiled_equals_dense_with_every_option(case, block):
    q, k, v, options = case
    dense, lse = attention(q, k, v, return_lse=True, **options)
    tiled, tiled_lse = tiled_attention(
        q, k, v, block_size=block, return_lse=True, **options
    )
    np.testing.assert_allclose(tiled, dense, rtol=0, atol=1e-12)
    np.testing.assert_allclose(tiled_lse, lse, rtol=0, atol=1e-12)


@pytest.mark.slow
@given(option_sets())
def test_lse_normalises_the_weights_and_the_sink(case):
    q, k, v, options = case
    _, w, lse = attention(q, k, v, return_weights=True, return_lse=True, **options)
    live = np.isfinite(lse)
    sink = options.get("sink_logits")
    sink_weight = 0.0 if sink is None else np.exp(sink[:, None] - lse)
    total = w.sum(-1) + sink_weight
    np.testing.assert_allclose(total[live], 1.0, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(w[~live], 0.0)


@given(
    st.integers(1, 9),
    st.integers(1, 9),
    st.sampled_from(["top_left", "bottom_right"]),
    st.integers(0, 2**32 - 1),
)
def test_window_zero_zero_sees_only_the_aligned_diagonal(n_q, n_k, align, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.normal(size=(n, 3)) for n in (n_q, n_k, n_k))
    _, w = attention(
        q, k, v, window=(0, 0), align=align, empty_rows="zero", return_weights=True
    )
    offset = 0 if align == "top_left" else n_k - n_q
    rows, cols = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
    np.testing.assert_array_equal(w, (cols == rows + offset).astype(float))


@pytest.mark.slow
@given(option_sets(), st.integers(1, 15))
def test_tiled_backward_equals_dense_backward(case, block):
    from sdpa_ref import attention_backward, tiled_attention_backward

    q, k, v, options = case
    grad_out = np.random.default_rng(block).normal(size=(*q.shape[:-1], v.shape[-1]))
    dense = attention_backward(q, k, v, grad_out, **options)
    out, lse = tiled_attention(q, k, v, block_size=block, return_lse=True, **options)
    tiled = tiled_attention_backward(
        q, k, v, out, grad_out, lse, block_size=block, **options
    )
    for got, expected in zip(tiled, dense, strict=True):
        if expected is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
