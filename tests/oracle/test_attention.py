"""What attention and tiled_attention compute, case by case."""

import numpy as np
import pytest

import sdpa_ref.backward
import sdpa_ref.core
from sdpa_ref import attention, causal_mask, softmax, tiled_attention

RNG_SEED = 7


def reference(q, k, v, scale, logits_mask=None):
    """Attention written out the slow, obvious way, row by row."""
    out = np.empty((q.shape[0], v.shape[1]))
    for i, row in enumerate(q):
        logits = np.array([row @ key for key in k]) * scale
        if logits_mask is not None:
            logits = logits + logits_mask[i]
        out[i] = softmax(logits) @ v
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(RNG_SEED)


@pytest.mark.parametrize("fn", [attention, tiled_attention])
@pytest.mark.parametrize(
    ("n_q", "n_k", "d_k", "d_v"), [(3, 5, 4, 2), (5, 3, 2, 7), (1, 1, 1, 1)]
)
def test_matches_row_by_row_reference(fn, rng, n_q, n_k, d_k, d_v):
    q, k = rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k))
    v = rng.normal(size=(n_k, d_v))
    np.testing.assert_allclose(fn(q, k, v), reference(q, k, v, d_k**-0.5), atol=1e-13)


def test_scale_one_is_unscaled(rng):
    q, k, v = rng.normal(size=(2, 8)), rng.normal(size=(3, 8)), rng.normal(size=(3, 2))
    np.testing.assert_allclose(attention(q, k, v, scale=1.0), reference(q, k, v, 1.0))
    np.testing.assert_allclose(attention(q, k, v, scale=0.25), reference(q, k, v, 0.25))


def test_integer_inputs_are_computed_in_float64():
    out = attention([[1, 0]], [[1, 0], [0, 1]], [[1, 0], [0, 1]], scale=np.log(3))
    np.testing.assert_allclose(out, [[0.75, 0.25]])
    assert out.dtype == np.float64


def test_leading_axes_broadcast(rng):
    q = rng.normal(size=(2, 1, 3, 4))
    k = rng.normal(size=(1, 5, 6, 4))
    v = rng.normal(size=(6, 2))
    out = attention(q, k, v)
    assert out.shape == (2, 5, 3, 2)
    np.testing.assert_allclose(out[1, 3], attention(q[1, 0], k[0, 3], v))


def test_bool_mask_forbids_keys(rng):
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    mask = np.array([[True, False, True], [False, False, True]])
    out, w = attention(q, k, v, mask=mask, return_weights=True)
    np.testing.assert_array_equal(w[~mask], 0.0)
    np.testing.assert_allclose(out[1], v[2])
    np.testing.assert_allclose(w.sum(-1), 1.0)


def test_float_mask_is_added_to_the_logits(rng):
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    bias = np.array([[0.5, -1.0, 0.0], [2.0, 0.0, -np.inf]])
    np.testing.assert_allclose(
        attention(q, k, v, mask=bias), reference(q, k, v, 0.5, bias)
    )


def test_mask_broadcast_over_queries(rng):
    q, k, v = rng.normal(size=(4, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    padding = np.array([True, True, False])  # the last key is padding
    np.testing.assert_allclose(
        attention(q, k, v, mask=padding), attention(q, k[:2], v[:2])
    )


def test_is_causal_is_top_left(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    _, w = attention(q, k, v, is_causal=True, return_weights=True)
    np.testing.assert_array_equal(w > 0, causal_mask(3, 5))
    np.testing.assert_allclose(w[0], [1, 0, 0, 0, 0])


def test_causal_mask_alignments():
    np.testing.assert_array_equal(
        causal_mask(2, 4, "top_left"), [[1, 0, 0, 0], [1, 1, 0, 0]]
    )
    np.testing.assert_array_equal(
        causal_mask(2, 4, "bottom_right"), [[1, 1, 1, 0], [1, 1, 1, 1]]
    )
    np.testing.assert_array_equal(
        causal_mask(3, 3, "top_left"), causal_mask(3, 3, "bottom_right")
    )
    # More queries than keys, bottom-right: the first query sees nothing.
    assert not causal_mask(3, 2, "bottom_right")[0].any()


def test_causal_combines_with_mask(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    padding = np.array([True, False, True])
    _, w = attention(q, k, v, mask=padding, is_causal=True, return_weights=True)
    np.testing.assert_array_equal(w > 0, causal_mask(3, 3) & padding)


@pytest.mark.parametrize("fn", [attention, tiled_attention])
def test_grouped_query_heads_share_kv_heads(fn, rng):
    q = rng.normal(size=(2, 6, 3, 4))
    k, v = rng.normal(size=(2, 2, 5, 4)), rng.normal(size=(2, 2, 5, 3))
    out = fn(q, k, v)
    for h in range(6):
        np.testing.assert_allclose(
            out[:, h], attention(q[:, h], k[:, h // 3], v[:, h // 3])
        )


def test_multi_query_attention_is_one_kv_head(rng):
    q = rng.normal(size=(4, 3, 8))
    k, v = rng.normal(size=(1, 5, 8)), rng.normal(size=(1, 5, 2))
    out = attention(q, k, v)
    for h in range(4):
        np.testing.assert_allclose(out[h], attention(q[h], k[0], v[0]))


@pytest.mark.parametrize("fn", [attention, tiled_attention])
def test_empty_rows_zero_and_nan(fn, rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(2, 4)), rng.normal(size=(2, 2))
    mask = np.array([[True, True], [False, False], [True, False]])
    zero = fn(q, k, v, mask=mask, empty_rows="zero")
    np.testing.assert_array_equal(zero[1], 0.0)
    np.testing.assert_allclose(zero[2], v[0])
    nan = fn(q, k, v, mask=mask, empty_rows="nan")
    assert np.isnan(nan[1]).all()
    np.testing.assert_allclose(nan[[0, 2]], zero[[0, 2]])


def test_empty_row_weights_follow_the_policy(rng):
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(2, 4)), rng.normal(size=(2, 2))
    mask = np.array([[False, False], [True, True]])
    _, w = attention(q, k, v, mask=mask, empty_rows="zero", return_weights=True)
    np.testing.assert_array_equal(w[0], 0.0)
    np.testing.assert_allclose(w[1].sum(), 1.0)
    _, w = attention(q, k, v, mask=mask, empty_rows="nan", return_weights=True)
    assert np.isnan(w[0]).all()


@pytest.mark.parametrize("fn", [attention, tiled_attention])
def test_empty_row_raises_naming_the_row(fn, rng):
    q, k, v = (
        rng.normal(size=(2, 3, 4)),
        rng.normal(size=(2, 2, 4)),
        rng.normal(size=(2, 2, 2)),
    )
    mask = np.ones((2, 3, 2), dtype=bool)
    mask[1, 2] = False
    with pytest.raises(
        ValueError, match=r"query 2 \(batch index \(1,\)\) has no allowed key"
    ):
        fn(q, k, v, mask=mask)


@pytest.mark.parametrize("block_size", [1, 2, 3, 7, 128])
def test_tiled_equals_dense_with_masks(rng, block_size):
    q, k, v = (
        rng.normal(size=(2, 9, 5)),
        rng.normal(size=(2, 11, 5)),
        rng.normal(size=(2, 11, 3)),
    )
    mask = rng.random((2, 9, 11)) < 0.7
    mask[..., 0] = True
    dense = attention(q, k, v, mask=mask, is_causal=True)
    tiled = tiled_attention(q, k, v, mask=mask, is_causal=True, block_size=block_size)
    np.testing.assert_allclose(tiled, dense, rtol=0, atol=1e-12)


@pytest.fixture
def record_matmuls(monkeypatch):
    """Given modules, spies on the np.matmul they call from then on.

    It returns the list that the shape of each product is appended to.
    """

    def record(*modules):
        seen = []
        real_matmul = np.matmul

        def spy(a, b, *args, **kwargs):
            out = real_matmul(a, b, *args, **kwargs)
            seen.append(out.shape)
            return out

        for module in modules:
            monkeypatch.setattr(module.np, "matmul", spy)
        return seen

    return record


def six_queries_fifty_keys(rng):
    return rng.normal(size=(6, 4)), rng.normal(size=(50, 4)), rng.normal(size=(50, 3))


def test_tiled_holds_one_block_of_scores(record_matmuls, rng):
    seen = record_matmuls(sdpa_ref.core)
    q, k, v = six_queries_fifty_keys(rng)
    tiled_attention(q, k, v, block_size=16)
    score_blocks = [s for s in seen if s[-1] != 3]
    assert score_blocks == [(6, 16), (6, 16), (6, 16), (6, 2)]


def test_huge_inputs_give_finite_weights():
    q = np.array([[1e150, 0.0]])
    k = np.array([[1e150, 0.0], [-1e150, 0.0]])
    v = np.array([[1.0], [2.0]])
    np.testing.assert_array_equal(attention(q, k, v), [[1.0]])


def test_overflowing_scores_raise():
    q = np.array([[1e200, 0.0]])
    k = np.array([[1e200, 0.0]])
    with pytest.raises(ValueError, match="overflowed"):
        attention(q, k, np.ones((1, 1)))


def test_check_finite_false_lets_the_caller_take_responsibility():
    q = np.array([[np.nan, 0.0]])
    with pytest.raises(ValueError, match="overflowed"):
        attention(q, np.ones((2, 2)), np.ones((2, 1)), check_finite=False)


def test_return_order_is_out_weights_lse(rng):
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    out, w, lse = attention(q, k, v, return_weights=True, return_lse=True)
    logits = q @ k.T / 2
    np.testing.assert_allclose(lse, np.log(np.exp(logits).sum(-1)))
    np.testing.assert_allclose(w, np.exp(logits - lse[:, None]))
    np.testing.assert_allclose(out, w @ v)
    out2, lse2 = attention(q, k, v, return_lse=True)
    np.testing.assert_array_equal(out2, out)
    np.testing.assert_array_equal(lse2, lse)


@pytest.mark.parametrize("fn", [attention, tiled_attention])
def test_a_sink_makes_an_empty_row_zero_without_an_error(fn, rng):
    q, k, v = (rng.normal(size=(1, 2, n, 3)) for n in (2, 4, 4))
    mask = np.array([[True, True, False, False], [False] * 4])
    out, lse = fn(
        q, k, v, mask=mask, sink_logits=np.array([0.5, -1.0]), return_lse=True
    )
    np.testing.assert_array_equal(out[..., 1, :], 0.0)
    np.testing.assert_allclose(lse[..., 1], [[0.5, -1.0]])


@pytest.mark.parametrize("fn", [attention, tiled_attention])
def test_padded_queries_are_zero_even_when_empty_rows_raise(fn, rng):
    q, k, v = (rng.normal(size=(2, 1, n, 3)) for n in (3, 4, 4))
    out, lse = fn(q, k, v, q_lengths=np.array([1, 3]), return_lse=True)
    np.testing.assert_array_equal(out[0, 0, 1:], 0.0)
    assert np.isneginf(lse[0, 0, 1:]).all()
    np.testing.assert_allclose(out[1], attention(q[1], k[1], v[1]))


def test_dropout_returns_weights_before_dropout(rng):
    q, k, v = rng.normal(size=(2, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    keep = np.array([[True, False, True], [True, True, True]])
    out, w = attention(q, k, v, dropout_mask=keep, dropout_p=0.25, return_weights=True)
    np.testing.assert_allclose(w, attention(q, k, v, return_weights=True)[1])
    np.testing.assert_allclose(out, (w * keep) @ v / 0.75)


def test_causal_is_a_right_bound_of_zero(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    for align in ("top_left", "bottom_right"):
        np.testing.assert_array_equal(
            attention(q, k, v, is_causal=True, align=align),
            attention(q, k, v, window=(None, 0), align=align),
        )
    np.testing.assert_allclose(
        attention(q, k, v, is_causal=True, align="bottom_right"),
        attention(q, k, v, mask=causal_mask(3, 5, "bottom_right")),
    )


def test_tiled_backward_holds_one_block_of_scores(record_matmuls, rng):
    from sdpa_ref import tiled_attention_backward

    q, k, v = six_queries_fifty_keys(rng)
    out, lse = tiled_attention(q, k, v, return_lse=True)
    seen = record_matmuls(sdpa_ref.core, sdpa_ref.backward)
    tiled_attention_backward(q, k, v, out, np.ones_like(out), lse, block_size=16)
    assert max(a * b for a, b in seen) <= 6 * 16
    assert (6, 50) not in seen
