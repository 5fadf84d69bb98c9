"""Packed variable-length batches: each sequence on its own, packed back."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdpa_ref import (
    attention,
    attention_backward,
    mods,
    tiled_attention,
    tiled_attention_backward,
)
from sdpa_ref.varlen import cu_seqlens_array

ATOL = 1e-12
H, H_KV, D = 4, 2, 3


def packed_batch(rng, q_lens, k_slots):
    """Packed (total, heads, dim) q, k, v, the upstream gradient, cu_seqlens."""
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(k_slots)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], H, D))
    k = rng.standard_normal((cu_k[-1], H_KV, D))
    v = rng.standard_normal((cu_k[-1], H_KV, D + 1))
    d_out = rng.standard_normal((cu_q[-1], H, D + 1))
    return q, k, v, d_out, cu_q, cu_k


def one_by_one(q, k, v, d_out, cu_q, cu_k, used, leftpad, **options):
    """Each sequence through attention on its own, in FlashAttention's layout."""
    out = np.zeros((len(q), H, D + 1))
    lse = np.full((H, len(q)), -np.inf)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for b in range(len(cu_q) - 1):
        rows = slice(cu_q[b], cu_q[b + 1])
        keys = slice(cu_k[b] + leftpad[b], cu_k[b] + used[b])
        if rows.stop == rows.start:
            continue
        if keys.stop == keys.start:  # no keys: an empty row, output 0
            continue
        args = (q[rows][None], k[keys][None], v[keys][None])
        o, row_lse = attention(*args, layout="bshd", return_lse=True, **options)
        out[rows], lse[:, rows] = o[0], row_lse[0]
        g = attention_backward(*args, d_out[rows][None], layout="bshd", **options)
        dq[rows], dk[keys], dv[keys] = g.dq[0], g.dk[0], g.dv[0]
    return out, lse, (dq, dk, dv)


OPTIONS = [
    {},
    {"is_causal": True, "align": "bottom_right"},
    {"is_causal": True},
    {"window": (2, 1), "align": "bottom_right", "softcap": 2.0},
    {"chunk": 2, "align": "bottom_right"},
    {"mask_mod": mods.prefix_lm(2), "score_mod": mods.alibi([0.1, 0.2, 0.3, 0.4])},
]


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTIONS)
@given(
    lengths=st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 7), st.integers(0, 2)),
        min_size=1,
        max_size=5,
    ),
    seqused=st.booleans(),
)
def test_packed_equals_each_sequence_on_its_own(options, lengths, seqused):
    rng = np.random.default_rng(len(lengths))
    q_lens = [n_q for n_q, _, _ in lengths]
    k_slots = [n_k for _, n_k, _ in lengths]
    q, k, v, d_out, cu_q, cu_k = packed_batch(rng, q_lens, k_slots)
    used = np.array([max(0, n - extra) if seqused else n for _, n, extra in lengths])
    leftpad = np.minimum(used, [extra for _, _, extra in lengths])
    varlen = {
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
        "seqused_k": used if seqused else None,
        "key_leftpad": leftpad,
        "layout": "bshd",
        "empty_rows": "zero",
    }
    expected = one_by_one(
        q, k, v, d_out, cu_q, cu_k, used, leftpad, empty_rows="zero", **options
    )
    out, lse = attention(q, k, v, return_lse=True, **varlen, **options)
    np.testing.assert_allclose(out, expected[0], atol=ATOL)
    np.testing.assert_allclose(lse, expected[1], atol=ATOL)
    tiled, tiled_lse = tiled_attention(
        q, k, v, block_size=3, return_lse=True, **varlen, **options
    )
    np.testing.assert_allclose(tiled, expected[0], atol=ATOL)
    np.testing.assert_allclose(tiled_lse, expected[1], atol=ATOL)
    grads = attention_backward(q, k, v, d_out, **varlen, **options)
    blocks = tiled_attention_backward(
        q, k, v, out, d_out, lse, block_size=2, **varlen, **options
    )
    for got in (grads, blocks):
        for name, want in zip(("dq", "dk", "dv"), expected[2], strict=True):
            np.testing.assert_allclose(
                getattr(got, name), want, atol=ATOL, err_msg=name
            )


def test_packed_equals_padded_with_lengths():
    """The padded batch with q_lengths and k_lengths is the other spelling."""
    rng = np.random.default_rng(4)
    q_lens, k_lens = [3, 1, 0, 5], [4, 1, 2, 5]
    q, k, v, d_out, cu_q, cu_k = packed_batch(rng, q_lens, k_lens)
    pad = (
        np.zeros((4, 5, H, D)),
        np.zeros((4, 5, H_KV, D)),
        np.zeros((4, 5, H_KV, D + 1)),
    )
    pad_dout = np.zeros((4, 5, H, D + 1))
    for b in range(4):
        pad[0][b, : q_lens[b]] = q[cu_q[b] : cu_q[b + 1]]
        pad_dout[b, : q_lens[b]] = d_out[cu_q[b] : cu_q[b + 1]]
        pad[1][b, : k_lens[b]] = k[cu_k[b] : cu_k[b + 1]]
        pad[2][b, : k_lens[b]] = v[cu_k[b] : cu_k[b + 1]]
    options = {"is_causal": True, "align": "bottom_right", "layout": "bshd"}
    padded = attention(
        *pad, q_lengths=np.array(q_lens), k_lengths=np.array(k_lens), **options
    )
    packed = attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **options)
    for b in range(4):
        np.testing.assert_allclose(
            packed[cu_q[b] : cu_q[b + 1]], padded[b, : q_lens[b]], atol=ATOL
        )
    g_pad = attention_backward(
        *pad,
        pad_dout,
        q_lengths=np.array(q_lens),
        k_lengths=np.array(k_lens),
        **options,
    )
    g = attention_backward(
        q, k, v, d_out, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, **options
    )
    for b in range(4):
        np.testing.assert_allclose(
            g.dk[cu_k[b] : cu_k[b + 1]], g_pad.dk[b, : k_lens[b]], atol=ATOL
        )


def test_bhsd_packs_heads_first_and_mods_see_each_sequence():
    rng = np.random.default_rng(5)
    q, k, v, _, cu_q, cu_k = packed_batch(rng, [2, 3], [2, 3])
    seen = []

    def spy(b, h, q_idx, kv_idx):
        seen.append((b.ravel().tolist(), q_idx.ravel().tolist()))
        return kv_idx <= q_idx + b  # sequence 1 sees one key ahead

    bshd = attention(
        q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, layout="bshd", mask_mod=spy
    )
    assert seen[0] == ([0, 1], [0, 1, 2])  # b is the sequence, positions its own
    bhsd = attention(
        np.swapaxes(q, 0, 1),
        np.swapaxes(k, 0, 1),
        np.swapaxes(v, 0, 1),
        cu_seqlens_q=cu_q,
        cu_seqlens_k=cu_k,
        mask_mod=spy,
    )
    np.testing.assert_array_equal(np.swapaxes(bhsd, 0, 1), bshd)
    second = attention(
        q[2:][None],
        k[2:][None],
        v[2:][None],
        layout="bshd",
        mask_mod=lambda b, h, i, j: j <= i + 1,
    )[0]
    np.testing.assert_allclose(bshd[2:], second, atol=ATOL)


def test_weights_come_back_padded_per_sequence():
    rng = np.random.default_rng(6)
    q, k, v, _, cu_q, cu_k = packed_batch(rng, [2, 3], [1, 4])
    _, w = attention(
        q,
        k,
        v,
        cu_seqlens_q=cu_q,
        cu_seqlens_k=cu_k,
        layout="bshd",
        return_weights=True,
    )
    assert w.shape == (2, H, 3, 4)
    np.testing.assert_allclose(w[0, :, :2, :1], 1.0)
    np.testing.assert_array_equal(w[0, :, 2], 0.0)  # no third query in sequence 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"cu_seqlens_q": [0, 3, 2], "cu_seqlens_k": [0, 2, 5]},
            ValueError,
            "must not decrease",
        ),
        (
            {"cu_seqlens_q": [0, 2, 4], "cu_seqlens_k": [0, 2, 5]},
            ValueError,
            "ends at 4, the packed length, but q holds 5",
        ),
        (
            {"cu_seqlens_q": [1, 2, 5], "cu_seqlens_k": [0, 2, 5]},
            ValueError,
            "must start at 0",
        ),
        (
            {"cu_seqlens_q": [0, 5], "cu_seqlens_k": [0, 2, 5]},
            ValueError,
            "both hold B",
        ),
        (
            {"cu_seqlens_q": [0.0, 5.0], "cu_seqlens_k": [0, 5]},
            TypeError,
            "1-D integer",
        ),
        ({"cu_seqlens_q": [0, 2, 5]}, ValueError, "without cu_seqlens_k"),
        ({"seqused_k": [1, 1]}, ValueError, "pass cu_seqlens_q and cu_seqlens_k"),
        (
            {"cu_seqlens_q": [0, 2, 5], "cu_seqlens_k": [0, 2, 5], "seqused_k": [3, 1]},
            ValueError,
            r"seqused_k\[0\] = 3 must lie in 0..2",
        ),
        (
            {
                "cu_seqlens_q": [0, 2, 5],
                "cu_seqlens_k": [0, 2, 5],
                "key_leftpad": [0, 4],
            },
            ValueError,
            r"key_leftpad\[1\] = 4 must lie in 0..3",
        ),
        (
            {"cu_seqlens_q": [0, 2, 5], "cu_seqlens_k": [0, 2, 5], "k_lengths": [1, 1]},
            ValueError,
            "k_lengths cannot be given with cu_seqlens",
        ),
    ],
)
def test_bad_packing_is_named(kwargs, error, match):
    q = k = v = np.ones((5, 2, 3))
    with pytest.raises(error, match=match):
        attention(q, k, v, layout="bshd", **kwargs)


def test_cu_seqlens_accepts_int32_and_lists():
    np.testing.assert_array_equal(
        cu_seqlens_array(np.array([0, 0, 4], np.int32), "cu_seqlens_q"), [0, 0, 4]
    )


def test_backward_checks_packed_out_and_lse():
    rng = np.random.default_rng(7)
    q, k, v, d_out, cu_q, cu_k = packed_batch(rng, [2, 3], [2, 3])
    varlen = {"cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "layout": "bshd"}
    out, lse = attention(q, k, v, return_lse=True, **varlen)
    assert lse.shape == (H, 5)
    with pytest.raises(
        ValueError, match=r"lse of a packed batch must have shape \(heads, total_q\)"
    ):
        tiled_attention_backward(q, k, v, out, d_out, lse.T, **varlen)
    with pytest.raises(ValueError, match="grad_out must be packed like the output"):
        tiled_attention_backward(q, k, v, out, d_out[:4], lse, **varlen)
    again = attention_backward(q, k, v, d_out, out=out, lse=lse, **varlen)
    fresh = attention_backward(q, k, v, d_out, **varlen)
    np.testing.assert_array_equal(again.dq, fresh.dq)
