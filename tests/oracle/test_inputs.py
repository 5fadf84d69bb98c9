"""Arrays from anywhere and both layouts, without torch (see test_torch_inputs)."""

import numpy as np
import pytest

from sdpa_ref import (
    attention,
    attention_backward,
    tiled_attention,
    tiled_attention_backward,
)
from sdpa_ref._arrays import as_array, source_precision

RNG = np.random.default_rng(7)
# (batch, heads, seqlen, dim) with grouped heads and n_q != n_k.
Q = RNG.standard_normal((2, 4, 5, 8))
K = RNG.standard_normal((2, 2, 7, 8))
V = RNG.standard_normal((2, 2, 7, 3))
D_OUT = RNG.standard_normal((2, 4, 5, 3))


def bshd(a):
    return np.ascontiguousarray(np.swapaxes(a, 1, 2))


def in_bshd(fn, *arrays, **options):
    """fn on the arrays turned to (batch, seqlen, heads, dim), with layout='bshd'."""
    return fn(*(bshd(a) for a in arrays), layout="bshd", **options)


class OnlyDLPack:
    """An array that offers nothing but the DLPack protocol."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kwargs):
        return self._arr.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


class OnlyArray:
    """An array-like with nothing but ``__array__``."""

    def __init__(self, arr):
        self._arr = arr

    def __array__(self, dtype=None, copy=None):
        return self._arr if dtype is None else self._arr.astype(dtype)


def test_dlpack_and_array_protocols_give_the_same_values():
    got = attention(OnlyDLPack(Q), OnlyArray(K), OnlyDLPack(V))
    assert np.array_equal(got, attention(Q, K, V))
    assert as_array(OnlyDLPack(Q), "q").dtype == np.float64


def test_float32_input_gives_the_float64_result_of_its_values():
    q32, k32, v32 = (a.astype(np.float32) for a in (Q, K, V))
    out = attention(q32, k32, v32)
    assert out.dtype == np.float64
    expected = attention(*(a.astype(np.float64) for a in (q32, k32, v32)))
    assert np.array_equal(out, expected)


def test_source_precision_reads_the_dtype():
    assert [source_precision(np.ones(1, t)) for t in ("f2", "f4", "f8", "i8")] == [
        "float16",
        "float32",
        "float64",
        None,
    ]
    assert source_precision(3.0) is None


def test_ragged_input_names_the_argument():
    with pytest.raises(TypeError, match="k must be a real numeric array"):
        attention(Q, [[1.0], [1.0, 2.0]], V)


@pytest.mark.parametrize("fn", [attention, tiled_attention])
def test_bshd_equals_transposing_by_hand(fn):
    mask = RNG.standard_normal((2, 4, 5, 7))  # the scores' shape in both layouts
    expected = fn(Q, K, V, mask=mask, is_causal=True, align="bottom_right")
    got = in_bshd(fn, Q, K, V, mask=mask, is_causal=True, align="bottom_right")
    assert got.shape == (2, 5, 4, 3)
    assert np.array_equal(got, bshd(expected))


def test_bshd_weights_and_lse_keep_the_scores_order():
    out, w, lse = attention(Q, K, V, return_weights=True, return_lse=True)
    got = in_bshd(attention, Q, K, V, return_weights=True, return_lse=True)
    assert np.array_equal(got[0], bshd(out))
    assert np.array_equal(got[1], w)  # (B, H, n_q, n_k), FlashAttention's S_dmask
    assert np.array_equal(got[2], lse)  # (B, H, n_q), FlashAttention's softmax_lse
    _, tiled_lse = in_bshd(tiled_attention, Q, K, V, return_lse=True)
    assert np.allclose(tiled_lse, lse, rtol=0, atol=1e-12)


def test_bshd_gradients_come_back_in_bshd():
    sinks = np.array([0.5, -1.0, 0.0, 2.0])
    bias = RNG.standard_normal((1, 4, 5, 7))
    expected = attention_backward(Q, K, V, D_OUT, mask=bias, sink_logits=sinks)
    got = in_bshd(attention_backward, Q, K, V, D_OUT, mask=bias, sink_logits=sinks)
    for name in ("dq", "dk", "dv"):
        assert np.array_equal(getattr(got, name), bshd(getattr(expected, name)))
    assert got.dq.shape == (2, 5, 4, 8)
    assert got.dk.shape == (2, 7, 2, 8)
    assert np.array_equal(got.dmask, expected.dmask)
    assert np.array_equal(got.dsink_logits, expected.dsink_logits)

    out, lse = in_bshd(
        tiled_attention, Q, K, V, mask=bias, sink_logits=sinks, return_lse=True
    )
    tiled = tiled_attention_backward(
        bshd(Q),
        bshd(K),
        bshd(V),
        out,
        bshd(D_OUT),
        lse,
        mask=bias,
        sink_logits=sinks,
        layout="bshd",
        block_size=3,
    )
    for name in ("dq", "dk", "dv", "dmask", "dsink_logits"):
        assert np.allclose(getattr(tiled, name), getattr(got, name), atol=1e-12)


def test_bshd_needs_three_axes():
    with pytest.raises(ValueError, match=r"layout='bshd' .* q has shape \(5, 8\)"):
        attention(Q[0, 0], K[0, 0], V[0, 0], layout="bshd")
    with pytest.raises(ValueError, match=r"layout must be one of \('bhsd', 'bshd'\)"):
        attention(Q, K, V, layout="bsdh")


def test_bshd_grad_out_of_the_wrong_layout_names_the_shapes():
    with pytest.raises(
        ValueError,
        match=r"grad_out must have the output's shape \(..., n_q, H, d_v\) = "
        r"\(2, 5, 4, 3\), got \(2, 4, 5, 3\)",
    ):
        attention_backward(bshd(Q), bshd(K), bshd(V), D_OUT, layout="bshd")


def test_backward_reuses_the_forward_it_is_given():
    out, lse = attention(Q, K, V, is_causal=True, return_lse=True)
    reused = attention_backward(Q, K, V, D_OUT, out=out, lse=lse, is_causal=True)
    fresh = attention_backward(Q, K, V, D_OUT, is_causal=True)
    for got, expected in zip(reused, fresh, strict=True):
        assert (got is None and expected is None) or np.array_equal(got, expected)
    # The given forward is used, not recomputed: D = rowsum(dO ∘ O) changes.
    shifted = attention_backward(Q, K, V, D_OUT, out=out + 1.0, lse=lse, is_causal=True)
    assert not np.allclose(shifted.dq, fresh.dq)
    assert np.array_equal(shifted.dv, fresh.dv)  # dV = Pᵀ dO needs only lse


def test_backward_wants_out_and_lse_together():
    out, lse = attention(Q, K, V, return_lse=True)
    with pytest.raises(ValueError, match="out was given without lse"):
        attention_backward(Q, K, V, D_OUT, out=out)
    with pytest.raises(ValueError, match="lse was given without out"):
        attention_backward(Q, K, V, D_OUT, lse=lse)
    with pytest.raises(ValueError, match=r"lse must have the shape .* \(2, 4, 5\)"):
        attention_backward(Q, K, V, D_OUT, out=out, lse=lse[..., :3])
