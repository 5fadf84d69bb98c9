"""attention_with_kvcache: paged equals contiguous bit for bit; bad tables named."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sdpa_ref import attention, attention_with_kvcache, mods
from sdpa_ref.kvcache import read_cache

B, H, H_KV, D = 3, 4, 2, 5


def paged_cache(rng, n_cache, page_size):
    """FlashAttention's _generate_block_kvcache: pages, a shuffled table, and
    the contiguous cache they stand for (tests/test_flash_attn.py)."""
    blocks = -(-n_cache // page_size)
    num_blocks = blocks * B * 3
    k_pages = rng.standard_normal((num_blocks, page_size, H_KV, D))
    v_pages = rng.standard_normal((num_blocks, page_size, H_KV, D + 2))
    table = rng.permutation(num_blocks)[: B * blocks].reshape(B, blocks)
    k = k_pages[table].reshape(B, blocks * page_size, H_KV, D)[:, :n_cache]
    v = v_pages[table].reshape(B, blocks * page_size, H_KV, D + 2)[:, :n_cache]
    return k_pages, v_pages, table, k, v


OPTIONS = [
    {},
    {"is_causal": True},
    {"window": (3, 0), "sink_tokens": 1, "softcap": 1.5},
    {"chunk": 4, "score_mod": mods.alibi(np.linspace(0.1, 0.4, H), absolute=True)},
    {
        "mask_mod": mods.sliding_window(2, None),
        "align": "top_left",
        "empty_rows": "zero",
    },
]


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTIONS)
@given(
    page_size=st.sampled_from([1, 3, 4, 16]),
    n_q=st.integers(1, 4),
    lengths=st.lists(st.integers(0, 11), min_size=B, max_size=B),
    leftpad=st.booleans(),
)
def test_paged_cache_equals_contiguous_bit_for_bit(
    options, page_size, n_q, lengths, leftpad
):
    rng = np.random.default_rng(page_size * 100 + n_q)
    k_pages, v_pages, table, k, v = paged_cache(rng, 12, page_size)
    q = rng.standard_normal((B, n_q, H, D))
    seqlens = np.array(lengths, dtype=np.int32)
    extra = {"empty_rows": "zero"} | options
    if leftpad:
        extra["key_leftpad"] = seqlens // 3
    paged, paged_lse = attention_with_kvcache(
        q,
        k_pages,
        v_pages,
        cache_seqlens=seqlens,
        block_table=table,
        return_lse=True,
        **extra,
    )
    flat, flat_lse = attention_with_kvcache(
        q, k, v, cache_seqlens=seqlens, return_lse=True, **extra
    )
    np.testing.assert_array_equal(paged, flat)
    np.testing.assert_array_equal(paged_lse, flat_lse)
    assert paged.shape == (B, n_q, H, D + 2)
    assert paged_lse.shape == (B, H, n_q)


def test_kvcache_is_attention_over_each_sequences_cached_keys():
    """Bottom-right by default: a decode step sees every cached key."""
    rng = np.random.default_rng(1)
    k_pages, v_pages, table, k, v = paged_cache(rng, 10, 4)
    q = rng.standard_normal((B, 2, H, D))
    seqlens = np.array([10, 3, 6])
    out = attention_with_kvcache(
        q, k_pages, v_pages, cache_seqlens=seqlens, block_table=table, is_causal=True
    )
    for b, n in enumerate(seqlens):
        want = attention(
            q[b : b + 1],
            k[b : b + 1, :n],
            v[b : b + 1, :n],
            layout="bshd",
            is_causal=True,
            align="bottom_right",
        )
        np.testing.assert_allclose(out[b : b + 1], want, atol=1e-14)


def test_leftpad_skips_the_first_keys_and_counts_positions_from_there():
    rng = np.random.default_rng(2)
    k = rng.standard_normal((1, 8, H_KV, D))
    v = rng.standard_normal((1, 8, H_KV, D))
    q = rng.standard_normal((1, 1, H, D))
    out = attention_with_kvcache(
        q,
        k,
        v,
        cache_seqlens=7,
        key_leftpad=np.array([3]),
        mask_mod=mods.prefix_lm(1),
        is_causal=True,
    )
    # The keys 3..6; position 0 is key 3.
    want = attention(
        q,
        k[:, 3:7],
        v[:, 3:7],
        layout="bshd",
        is_causal=True,
        align="bottom_right",
        mask_mod=mods.prefix_lm(1),
    )
    np.testing.assert_allclose(out, want, atol=1e-14)


def test_unused_cache_slots_never_reach_the_result():
    rng = np.random.default_rng(3)
    k_pages, v_pages, table, *_ = paged_cache(rng, 8, 4)
    q = rng.standard_normal((B, 1, H, D))
    seqlens = np.array([5, 0, 8])
    clean = attention_with_kvcache(
        q, k_pages, v_pages, cache_seqlens=seqlens, block_table=table, empty_rows="zero"
    )
    # NaN in the slots past each sequence's end (sequence 0 ends at position 4,
    # the first of its second page), and -1 in the table of a sequence that
    # reaches no page.
    dirty_k, dirty_v, dirty_table = k_pages.copy(), v_pages.copy(), table.copy()
    dirty_k[table[0, 1], 1:] = np.nan
    dirty_v[table[1]] = np.nan
    dirty_table[1, :] = -1
    np.testing.assert_array_equal(
        attention_with_kvcache(
            q,
            dirty_k,
            dirty_v,
            cache_seqlens=seqlens,
            block_table=dirty_table,
            empty_rows="zero",
        ),
        clean,
    )


def test_read_cache_gathers_pages_in_table_order():
    pages = np.arange(12.0).reshape(6, 1, 2, 1)  # page p holds 2p, 2p + 1
    keys = read_cache(pages, np.array([5, 1]), np.array([[4, 0, 5], [2, 0, 0]]), 6)
    np.testing.assert_array_equal(keys[0, 0, :, 0], [8, 9, 0, 1, 10, 0])
    np.testing.assert_array_equal(keys[1, 0, :, 0], [4, 0, 0, 0, 0, 0])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {
                "cache_seqlens": np.array([4, 9, 1]),
                "block_table": np.array([[0, 1]] * 3),
            },
            ValueError,
            r"cache_seqlens\[1\] = 9 is longer than the 8 positions its blocks hold",
        ),
        (
            {
                "cache_seqlens": np.array([4, 5, 1]),
                "block_table": np.array([[0, 1], [2, 6], [3, 9]]),
            },
            ValueError,
            r"block_table\[1, 1\] = 6 points outside the cache: k_cache holds 6 blocks",
        ),
        (
            {
                "cache_seqlens": np.array([4, 5, 1]),
                "block_table": np.array([[0, 1], [2, -1], [3, 1]]),
            },
            ValueError,
            r"block_table\[1, 1\] = -1 points outside",
        ),
        (
            {
                "cache_seqlens": np.array([4, 5, 1]),
                "block_table": np.array([[0.0, 1.0]] * 3),
            },
            TypeError,
            "block_table must be an integer array",
        ),
        (
            {
                "cache_seqlens": np.array([4, -1, 1]),
                "block_table": np.array([[0, 1]] * 3),
            },
            ValueError,
            r"cache_seqlens\[1\] = -1 must lie in",
        ),
        ({"cache_seqlens": np.array([4, 5])}, TypeError, r"shape \(B,\) = \(3,\)"),
        ({"cache_seqlens": 7}, ValueError, r"cache_seqlens\[0\] = 7 must lie in 0..6"),
        ({"cache_seqlens": 2, "cache_batch_idx": [0]}, TypeError, "cache_batch_idx"),
    ],
)
def test_bad_tables_and_lengths_are_named(kwargs, error, match):
    rng = np.random.default_rng(4)
    q = rng.standard_normal((3, 1, H, D))
    if "block_table" in kwargs:
        cache = rng.standard_normal((6, 4, H_KV, D))  # 6 pages of 4
    else:
        cache = rng.standard_normal((3, 6, H_KV, D))
    with pytest.raises(error, match=match):
        attention_with_kvcache(q, cache, cache, **kwargs)
