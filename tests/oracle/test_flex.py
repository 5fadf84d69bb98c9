"""FlexAttention's contract: mask mods, score mods and their gradients, in NumPy."""

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import (
    attention,
    attention_backward,
    mods,
    tiled_attention,
    tiled_attention_backward,
)

SEED = 18


@pytest.fixture
def qkv():
    rng = np.random.default_rng(SEED)
    return tuple(rng.standard_normal((2, 3, 9, 4)) for _ in range(3))


def loops(n_q, n_k, allowed):
    """A mask written as two loops over the pairs, the obvious way."""
    return np.array([[allowed(i, j) for j in range(n_k)] for i in range(n_q)])


def mask_of(mod, n_q, n_k):
    return mods.create_mask(mod, None, None, n_q, n_k)[0, 0]


# -- the ready mask mods, against their definitions -------------------------------


@pytest.mark.parametrize(("n_q", "n_k"), [(5, 5), (3, 7), (7, 3)])
def test_ready_mask_mods_match_their_definitions(n_q, n_k):
    offset = n_k - n_q
    ids = np.array([0, 0, 0, 1, 1, 2, 2][:n_k] + [2] * max(0, n_k - 7))
    cases = [
        (mods.causal(), lambda i, j: j <= i),
        (mods.causal(offset=offset), lambda i, j: j <= i + offset),
        (mods.sliding_window(2), lambda i, j: i - 2 <= j <= i),
        (mods.sliding_window(1, 1), lambda i, j: abs(i - j) <= 1),
        (mods.sliding_window(None, None), lambda i, j: True),
        (
            mods.sliding_window(1, 0, sink_tokens=1),
            lambda i, j: j <= i and (j >= i - 1 or j < 1),
        ),
        (mods.chunked(2), lambda i, j: i // 2 == j // 2),
        (mods.prefix_lm(2), lambda i, j: j < 2 or j <= i),
    ]
    for mod, rule in cases:
        np.testing.assert_array_equal(mask_of(mod, n_q, n_k), loops(n_q, n_k, rule))
    if n_q == n_k:
        doc = mods.document(ids[:n_k], mods.causal())
        np.testing.assert_array_equal(
            mask_of(doc, n_q, n_k),
            loops(n_q, n_k, lambda i, j: ids[i] == ids[j] and j <= i),
        )


def test_document_mask_mod_counts_positions_from_each_document():
    ids = np.array([4, 4, 7, 7, 7, 9])  # runs of 4s and 7s, then a 9
    seen = {}

    def inner(b, h, q_idx, kv_idx):
        seen["q"] = np.asarray(q_idx).ravel().tolist()
        return np.ones(np.broadcast_shapes(np.shape(q_idx), np.shape(kv_idx)), bool)

    mask = mask_of(mods.document(ids, inner), 6, 6)
    assert seen["q"] == [0, 1, 0, 1, 2, 0]
    np.testing.assert_array_equal(mask, ids[:, None] == ids[None, :])


@pytest.mark.parametrize(
    ("ids", "match"),
    [
        (
            [0, 0, 1, 0, 1],
            r"give id 0 to separate runs of tokens, starting at "
            r"positions \[0, 3\] \(shape \(5,\)\)",
        ),
        ([[0, 0, 1, 1], [2, 3, 3, 2]], r"document_ids in batch entry 1 give id 2"),
    ],
)
def test_an_id_that_comes_back_after_another_is_refused(ids, match):
    # With causal positions counted from each run's start, query 0 of
    # [0, 0, 1, 0, 1] would see key 3, a later token of "its" document.
    with pytest.raises(ValueError, match=match):
        mods.document(np.array(ids), mods.causal())


def test_and_or_masks_combine_as_flexattention():
    window = mods.sliding_window(1, None)
    causal = mods.causal()
    np.testing.assert_array_equal(
        mask_of(mods.and_masks(window, causal), 4, 4),
        mask_of(window, 4, 4) & mask_of(causal, 4, 4),
    )
    np.testing.assert_array_equal(
        mask_of(mods.or_masks(window, causal), 4, 4),
        mask_of(window, 4, 4) | mask_of(causal, 4, 4),
    )
    assert mask_of(mods.and_masks(), 2, 2).all()
    assert not mask_of(mods.or_masks(), 2, 2).any()
    with pytest.raises(TypeError, match="argument 1 is 3"):
        mods.and_masks(causal, 3)


def test_per_batch_offsets_are_read_at_b():
    mask = mods.create_mask(mods.causal(offset=np.array([0, 2])), 2, 1, 2, 3)
    np.testing.assert_array_equal(mask[0, 0], [[1, 0, 0], [1, 1, 0]])
    np.testing.assert_array_equal(mask[1, 0], [[1, 1, 1], [1, 1, 1]])


# -- the built-in options are these mods ------------------------------------------


@pytest.mark.parametrize("fn", [attention, tiled_attention])
@pytest.mark.parametrize(
    ("options", "mod"),
    [
        ({"is_causal": True}, mods.causal()),
        ({"is_causal": True, "align": "bottom_right"}, mods.causal(offset=3)),
        (
            {"window": (2, 1), "align": "bottom_right"},
            mods.sliding_window(2, 1, offset=3),
        ),
        (
            {"window": (1, 0), "sink_tokens": 2},
            mods.sliding_window(1, 0, sink_tokens=2),
        ),
        ({"chunk": 3}, mods.chunked(3)),
        ({"k_lengths": np.array([5, 12])}, mods.key_padding(np.array([5, 12]))),
    ],
)
def test_each_option_equals_its_mask_mod(fn, options, mod):
    rng = np.random.default_rng(SEED)
    q = rng.standard_normal((2, 3, 9, 4))
    k, v = rng.standard_normal((2, 2, 3, 12, 4))
    kw = {"block_size": 5} if fn is tiled_attention else {}
    np.testing.assert_array_equal(
        fn(q, k, v, **options, **kw), fn(q, k, v, mask_mod=mod, **kw)
    )


def test_softcap_option_equals_its_score_mod(qkv):
    q, k, v = qkv
    out = attention(q, k, v, softcap=0.7, is_causal=True)
    np.testing.assert_array_equal(
        out, attention(q, k, v, score_mod=mods.softcap(0.7), is_causal=True)
    )
    lam = attention(q, k, v, score_mod=lambda s, b, h, i, j: 0.7 * np.tanh(s / 0.7))
    np.testing.assert_allclose(lam, attention(q, k, v, softcap=0.7), atol=1e-15)


def test_mask_mod_combines_with_every_other_mask(qkv):
    q, k, v = qkv
    keep = np.random.default_rng(1).random((9, 9)) < 0.7
    keep[:, 0] = True
    both = attention(q, k, v, mask=keep, is_causal=True, mask_mod=mods.chunked(4))
    alone = attention(
        q,
        k,
        v,
        mask=keep & mask_of(mods.causal(), 9, 9) & mask_of(mods.chunked(4), 9, 9),
    )
    np.testing.assert_array_equal(both, alone)


def test_grids_follow_flexattention_b_h_and_query_heads():
    """b runs over axis -4, h over the query heads (grouped-query too)."""
    rng = np.random.default_rng(SEED)
    q = rng.standard_normal((2, 4, 3, 5))
    k, v = rng.standard_normal((2, 2, 2, 6, 5))  # two key/value heads for four
    seen = []

    def spy(b, h, q_idx, kv_idx):
        seen.append((b.ravel().tolist(), h.ravel().tolist(), q_idx.shape, kv_idx.shape))
        return (h + b) % 2 == 0

    attention(q, k, v, mask_mod=spy, empty_rows="zero")
    assert seen == [([0, 1], [0, 1, 2, 3], (1, 1, 3, 1), (1, 1, 1, 6))]
    out = attention(q, k, v, mask_mod=spy, empty_rows="zero")
    expected = attention(
        q, k, v, mask=mods.create_mask(spy, 2, 4, 3, 6), empty_rows="zero"
    )
    np.testing.assert_array_equal(out, expected)
    # Without batch or head axes, b and h are 0.
    seen.clear()
    attention(q[0, 0], k[0, 0], v[0, 0], mask_mod=spy)
    assert seen[0][:2] == ([0], [0])


def test_tiled_paths_call_mods_block_by_block(qkv):
    q, k, v = qkv
    widths = []

    def spy_mask(b, h, q_idx, kv_idx):
        widths.append(kv_idx.shape[-1])
        return kv_idx <= q_idx

    def spy_score(score, b, h, q_idx, kv_idx):
        widths.append(score.shape[-1])
        return score + 0.1 * np.sin(score)

    out, lse = tiled_attention(
        q, k, v, mask_mod=spy_mask, score_mod=spy_score, block_size=4, return_lse=True
    )
    assert widths
    assert max(widths) <= 4, widths
    widths.clear()
    dO = np.ones_like(out)
    tiled_attention_backward(
        q, k, v, out, dO, lse, mask_mod=spy_mask, score_mod=spy_score, block_size=4
    )
    assert widths
    assert max(widths) <= 4, widths


def test_dense_and_tiled_agree_with_mods_forward_and_backward(qkv):
    q, k, v = qkv
    rng = np.random.default_rng(3)
    slopes = rng.uniform(0.05, 0.5, 3)
    options = {
        "mask_mod": mods.document(np.array([0] * 4 + [1] * 5), mods.causal()),
        "score_mod": mods.alibi(slopes),
        "softcap": 3.0,
    }
    out, lse = attention(q, k, v, return_lse=True, **options)
    tiled, tiled_lse = tiled_attention(
        q, k, v, block_size=2, return_lse=True, **options
    )
    np.testing.assert_allclose(tiled, out, atol=1e-13)
    np.testing.assert_allclose(tiled_lse, lse, atol=1e-13)
    dO = rng.standard_normal(out.shape)
    dense = attention_backward(q, k, v, dO, **options)
    blocks = tiled_attention_backward(q, k, v, out, dO, lse, block_size=2, **options)
    for name in ("dq", "dk", "dv"):
        np.testing.assert_allclose(
            getattr(blocks, name), getattr(dense, name), atol=1e-13
        )
    np.testing.assert_allclose(
        blocks.dscore_mod["slopes"], dense.dscore_mod["slopes"], atol=1e-13
    )


# -- gradients through a score mod --------------------------------------------------


def central(f, x, step=1e-6):
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = step
        grad[i] = (f(x + e) - f(x - e)) / (2 * step)
    return grad


def loss_of(dO, **options):
    def loss(q, k, v):
        return float((attention(q, k, v, **options) * dO).sum())

    return loss


@pytest.mark.parametrize(
    "score_mod",
    [
        lambda s, b, h, i, j: s + 0.3 * np.sin(s + 0.1 * (i - j)),
        lambda s, b, h, i, j: np.log1p(np.exp(s)) * (1 + h),
        mods.softcap(0.8),
    ],
    ids=["sine", "softplus", "softcap"],
)
def test_score_mod_gradients_match_central_differences(score_mod):
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 2, 4, 3)) for _ in range(3))
    dO = rng.standard_normal((1, 2, 4, 3))
    g = attention_backward(q, k, v, dO, score_mod=score_mod, is_causal=True)
    loss = loss_of(dO, score_mod=score_mod, is_causal=True)
    np.testing.assert_allclose(g.dq, central(lambda x: loss(x, k, v), q), atol=1e-8)
    np.testing.assert_allclose(g.dk, central(lambda x: loss(q, x, v), k), atol=1e-8)
    np.testing.assert_allclose(g.dv, central(lambda x: loss(q, k, x), v), atol=1e-8)


def test_complex_steps_are_exact_to_rounding():
    g = mods.index_grids((), np.arange(1), np.arange(3))
    s = np.array([[-2.0, 0.5, 30.0]])

    def mod(score, b, h, q_idx, kv_idx):
        return np.sin(score) * np.exp(-0.01 * score)

    d = mods.score_mod_derivative(mod, s, g, "score_mod")
    exact = np.cos(s) * np.exp(-0.01 * s) - 0.01 * np.sin(s) * np.exp(-0.01 * s)
    np.testing.assert_allclose(d, exact, rtol=1e-15, atol=1e-17)


def test_parameter_gradients_of_alibi_and_the_bias_table_are_exact():
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    dO = rng.standard_normal((2, 3, 5, 4))
    slopes = rng.uniform(0.1, 0.6, 3)
    per_batch = rng.uniform(0.1, 0.6, (2, 3))
    table = rng.standard_normal((3, 5))  # R = 2
    shared = rng.standard_normal(3)  # R = 1, shared by the heads
    cases = [
        (mods.alibi, slopes, "slopes"),
        (lambda p: mods.alibi(p, absolute=True, offset=1), per_batch, "slopes"),
        (mods.relative_position_bias, table, "table"),
        (mods.relative_position_bias, shared, "table"),
    ]
    for make, param, key in cases:
        got = attention_backward(q, k, v, dO, score_mod=make(param), is_causal=True)

        def loss(p, make=make):
            return float(
                (attention(q, k, v, score_mod=make(p), is_causal=True) * dO).sum()
            )

        np.testing.assert_allclose(got.dscore_mod[key], central(loss, param), atol=1e-8)


def test_a_mod_may_supply_its_derivative_and_its_parameters_gradients():
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 1, 4, 3)) for _ in range(3))
    dO = rng.standard_normal((1, 1, 4, 3))
    damping = np.array([0.3])

    def damped(score, b, h, q_idx, kv_idx):
        return score - damping[0] * np.abs(score)

    def slope(score, b, h, q_idx, kv_idx):
        return 1.0 - damping[0] * np.sign(score)

    def shares(grad, score, b, h, q_idx, kv_idx):
        return {"damping": np.array([-np.sum(grad * np.abs(score))])}

    with pytest.raises(TypeError, match="cannot differentiate score_mod by complex"):
        attention_backward(q, k, v, dO, score_mod=damped)
    mod = mods.with_derivative(damped, slope, shares)
    g = attention_backward(q, k, v, dO, score_mod=mod)
    loss = loss_of(dO, score_mod=mod)
    np.testing.assert_allclose(g.dq, central(lambda x: loss(x, k, v), q), atol=1e-8)
    np.testing.assert_allclose(g.dk, central(lambda x: loss(q, x, v), k), atol=1e-8)

    def by_damping(c):
        def m(score, b, h, q_idx, kv_idx):
            return score - c[0] * np.abs(score)

        return float((attention(q, k, v, score_mod=m) * dO).sum())

    np.testing.assert_allclose(
        g.dscore_mod["damping"], central(by_damping, damping), atol=1e-8
    )


def test_piecewise_mods_written_with_where_differentiate_by_complex_steps():
    """NumPy compares complex numbers by their real parts first, so a
    ``np.where`` on the score picks the right branch and its slope."""
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 1, 4, 3)) for _ in range(3))
    dO = rng.standard_normal((1, 1, 4, 3))

    def leaky(score, b, h, q_idx, kv_idx):
        return np.where(score > 0, score, 0.2 * score)

    g = attention_backward(q, k, v, dO, score_mod=leaky)
    loss = loss_of(dO, score_mod=leaky)
    np.testing.assert_allclose(g.dq, central(lambda x: loss(x, k, v), q), atol=1e-8)


def test_a_smooth_mod_with_large_values_is_not_refused(qkv):
    # score + 1e8 rounds its values to 1e8 * eps = 1.5e-8 over a step of
    # 1e-6: the central difference is off by about 0.01, the complex step
    # is exact, and the mod is analytic.
    q, k, v = qkv
    d_out = np.ones_like(q)
    shifted = attention_backward(
        q, k, v, d_out, score_mod=lambda s, b, h, i, j: s + 1e8
    )
    plain = attention_backward(q, k, v, d_out)
    np.testing.assert_allclose(shifted.dq, plain.dq, atol=1e-6)


def test_a_kink_at_zero_is_refused_only_where_its_derivative_is_used():
    """Zeros that pad a packed batch or fill a masked key sit on a leaky mod's
    kink, where the complex step and a central difference disagree; the
    backward must not refuse the mod for them, and must where an allowed
    score with a gradient is exactly 0."""

    def leaky(score, b, h, q_idx, kv_idx):
        return np.where(score > 0, score, 0.1 * score)

    def slope(score, b, h, q_idx, kv_idx):
        return np.where(score > 0, 1.0, 0.1)

    supplied = mods.with_derivative(leaky, slope)
    rng = np.random.default_rng(SEED)
    q, k, v = rng.standard_normal((3, 5, 2, 4))
    d_out = rng.standard_normal((5, 2, 4))
    packed = {"cu_seqlens_q": [0, 2, 5], "cu_seqlens_k": [0, 2, 5], "layout": "bshd"}
    got = attention_backward(q, k, v, d_out, score_mod=leaky, **packed)
    want = attention_backward(q, k, v, d_out, score_mod=supplied, **packed)
    for name in ("dq", "dk", "dv"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))

    # keys past each length are zeros, so their scores sit on the kink
    q, k, v = rng.standard_normal((3, 2, 1, 4, 3))
    k[0, :, 2:] = 0.0
    d_out = np.ones_like(q)
    out, lse = attention(q, k, v, k_lengths=[2, 4], score_mod=leaky, return_lse=True)
    for backward in (
        lambda mod: attention_backward(q, k, v, d_out, k_lengths=[2, 4], score_mod=mod),
        lambda mod: tiled_attention_backward(
            q, k, v, out, d_out, lse, k_lengths=[2, 4], score_mod=mod, block_size=2
        ),
    ):
        np.testing.assert_array_equal(backward(leaky).dq, backward(supplied).dq)

    k[1, :, 0] = 0.0  # an allowed key whose scores are exactly 0
    with pytest.raises(TypeError, match="disagrees with a central difference"):
        attention_backward(q, k, v, d_out, k_lengths=[2, 4], score_mod=leaky)


@pytest.mark.parametrize(
    ("score_mod", "reason"),
    [
        (lambda s, b, h, i, j: np.abs(s), "dropped their"),
        (lambda s, b, h, i, j: s.real * 2, "dropped their"),
        (lambda s, b, h, i, j: s + 0.5 * np.conj(s), "central difference"),
        (lambda s, b, h, i, j: s + np.floor(s), "raised"),
    ],
    ids=["abs", "real", "conj", "floor"],
)
def test_a_mod_complex_steps_cannot_differentiate_is_refused_with_the_way_out(
    qkv, score_mod, reason
):
    q, k, v = qkv
    out = attention(q, k, v, score_mod=score_mod)  # the forward is fine
    with pytest.raises(TypeError) as info:
        attention_backward(q, k, v, np.ones_like(out), score_mod=score_mod)
    message = str(info.value)
    assert reason in message
    assert "with_derivative(mod, derivative)" in message


# -- bad mods --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"mask_mod": lambda b, h, i, j: i - j},
            TypeError,
            "mask_mod must return booleans",
        ),
        (
            {"mask_mod": lambda b, h, i, j: (i >= j)[..., :2]},
            ValueError,
            "mask_mod returned shape",
        ),
        ({"mask_mod": lambda s, b, h, i, j: i >= j}, TypeError, "is it a score_mod"),
        ({"score_mod": lambda b, h, i, j: i}, TypeError, "is it a mask_mod"),
        ({"mask_mod": "causal"}, TypeError, "mask_mod must be callable"),
        (
            {"score_mod": lambda s, b, h, i, j: s > 0},
            TypeError,
            "score_mod must return float64",
        ),
        (
            {"score_mod": lambda s, b, h, i, j: s.astype(np.float32)},
            TypeError,
            "float32 parameter",
        ),
        (
            {"score_mod": lambda s, b, h, i, j: s[..., :1, :]},
            ValueError,
            "score_mod returned shape",
        ),
        (
            {"score_mod": mods.alibi([0.5, 0.5])},
            ValueError,
            "score_mod raised IndexError",
        ),
    ],
)
def test_a_bad_mod_is_named(qkv, kwargs, error, match):
    q, k, v = qkv
    with pytest.raises(error, match=match):
        attention(q, k, v, **kwargs)


def test_a_score_mod_that_makes_nan_is_named(qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match="the score_mod returned NaN"):
        attention(q, k, v, score_mod=lambda s, b, h, i, j: s * np.nan)


def test_a_score_mod_may_mask_with_minus_infinity(qkv):
    q, k, v = qkv

    def causal_score(score, b, h, q_idx, kv_idx):
        return np.where(kv_idx <= q_idx, score, -np.inf)

    np.testing.assert_allclose(
        attention(q, k, v, score_mod=causal_score),
        attention(q, k, v, is_causal=True),
        atol=1e-15,
    )
    dO = np.ones((2, 3, 9, 4))
    with_mod = attention_backward(
        q, k, v, dO, score_mod=mods.with_derivative(causal_score, lambda *a: 1.0)
    )
    plain = attention_backward(q, k, v, dO, is_causal=True)
    np.testing.assert_allclose(with_mod.dq, plain.dq, atol=1e-14)


def test_mods_are_on_the_face():
    assert "attention_with_kvcache" in sdpa_ref.__all__
    assert len(sdpa_ref.__all__) <= 15
    assert sdpa_ref.mods.COMPLEX_STEP == 1e-30


def test_tiled_paths_skip_the_rows_a_block_is_hidden_from():
    """As FlexAttention's block mask skips tiles: a block of keys is computed
    only for the range of queries that may see one of them."""
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 2, 24, 3)) for _ in range(3))
    ids = np.repeat([0, 1, 2], 8)
    rows = []

    def spy(score, b, h, q_idx, kv_idx):
        rows.append(q_idx.ravel().tolist())
        return score * 1.0

    options = {"mask_mod": mods.document(ids, mods.causal()), "score_mod": spy}
    out, lse = tiled_attention(q, k, v, block_size=8, return_lse=True, **options)
    assert rows == [list(range(0, 8)), list(range(8, 16)), list(range(16, 24))]
    np.testing.assert_allclose(out, attention(q, k, v, **options), atol=1e-15)
    rows.clear()
    dO = rng.standard_normal(out.shape)
    blocks = tiled_attention_backward(q, k, v, out, dO, lse, block_size=8, **options)
    assert {len(r) for r in rows} == {8}
    dense = attention_backward(q, k, v, dO, **options)
    np.testing.assert_allclose(blocks.dk, dense.dk, atol=1e-14)


def test_document_ids_and_prefixes_may_differ_per_batch_entry():
    ids = np.array([[0, 0, 1, 1], [0, 1, 1, 1]])
    mask = mods.create_mask(mods.document(ids, mods.causal()), 2, 1, 4, 4)
    np.testing.assert_array_equal(
        mask[0, 0], loops(4, 4, lambda i, j: ids[0, i] == ids[0, j] and j <= i)
    )
    np.testing.assert_array_equal(
        mask[1, 0], loops(4, 4, lambda i, j: ids[1, i] == ids[1, j] and j <= i)
    )
    prefix = mods.create_mask(mods.prefix_lm(np.array([1, 3])), 2, 1, 4, 4)
    np.testing.assert_array_equal(
        prefix[0, 0], loops(4, 4, lambda i, j: j < 1 or j <= i)
    )
    np.testing.assert_array_equal(
        prefix[1, 0], loops(4, 4, lambda i, j: j < 3 or j <= i)
    )


def test_alibi_and_the_bias_table_add_what_they_say():
    q_idx, kv_idx = np.arange(4)[:, None], np.arange(4)[None, :]
    zero = np.zeros((4, 4))
    np.testing.assert_array_equal(
        mods.alibi([0.5], absolute=True, offset=1)(zero, 0, 0, q_idx, kv_idx),
        -0.5 * np.abs(q_idx + 1 - kv_idx),
    )
    table = np.array([[-2.0, -1.0, 0.0, 1.0, 2.0]])  # R = 2: bias = kv - q, clipped
    np.testing.assert_array_equal(
        mods.relative_position_bias(table)(zero, 0, 0, q_idx, kv_idx),
        np.clip(kv_idx - q_idx, -2, 2),
    )
    with pytest.raises(ValueError, match="odd last axis"):
        mods.relative_position_bias(np.zeros(4))
    with pytest.raises(ValueError, match=r"shape \(H,\) or \(B, H\)"):
        mods.alibi(np.zeros((1, 2, 3)))


@pytest.mark.parametrize("sinks", [1, 2, 3])
@pytest.mark.parametrize("left", [0, 1, 3])
def test_the_pages_spelling_of_sink_tokens_is_the_option(sinks, left):
    """flex.md's table: sinks escape the window's left bound, not causality."""

    def first_keys(b, h, q_idx, kv_idx):
        return kv_idx < sinks

    def left_bound(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= left

    spelled = mods.and_masks(mods.causal(), mods.or_masks(first_keys, left_bound))
    ready = mods.sliding_window(left, 0, sink_tokens=sinks)
    for n_q, n_k in [(6, 6), (3, 7)]:
        np.testing.assert_array_equal(
            mods.create_mask(spelled, None, None, n_q, n_k),
            mods.create_mask(ready, None, None, n_q, n_k),
        )
    # Without causality, the first queries would see sink keys in their future.
    leaky = mods.or_masks(first_keys, mods.sliding_window(left))
    if sinks > 1:
        assert not np.array_equal(
            mods.create_mask(leaky, None, None, 6, 6),
            mods.create_mask(ready, None, None, 6, 6),
        )
