"""Attention over a key-value cache, contiguous or paged, as FlashAttention's.

``flash_attn_with_kvcache`` (flash_attn/flash_attn_interface.py at
flash-attention commit 0251105a) decodes new queries against a cache of
earlier keys and values. Sequence ``b`` has ``cache_seqlens[b]`` cached
keys; the cache is either one array per batch entry, ``(B, n_cache, H_kv,
d)``, or pages: ``(num_blocks, page_size, H_kv, d)`` shared by every
sequence, with a ``block_table`` of shape ``(B, max_blocks)`` saying which
page holds positions ``j · page_size`` to ``(j + 1) · page_size - 1`` of
sequence ``b``. FlashAttention's tests build the contiguous cache that a
paged one stands for by gathering ``k_cache_paged[block_table]``
(tests/test_flash_attn.py, ``_generate_block_kvcache``); sdpa_ref reads
pages the same way, so paged and contiguous caches give the same result,
bit for bit.

The masks are aligned to the bottom right by default, as FlashAttention
aligns them: the last query sits at the last cached key.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt

from ._arrays import ArrayInput, FloatArray, IntArray, as_array, from_layout, to_layout
from ._checks import first_index, real_array, require_within
from ._options import (
    CacheOptionKeywords,
    Options,
    check_keywords,
)
from .core import dense_forward, prepare

__all__ = ["attention_with_kvcache", "read_cache"]


def _cache_lengths(cache_seqlens: object, batch: int, capacity: int) -> IntArray:
    if isinstance(cache_seqlens, int | np.integer) and not isinstance(
        cache_seqlens, bool
    ):
        lengths = np.full(batch, int(cache_seqlens))
    else:
        arr = as_array(cache_seqlens, "cache_seqlens")
        if arr.dtype.kind not in "iu" or arr.shape != (batch,):
            raise TypeError(
                f"cache_seqlens must be an int or an integer array of shape (B,) = "
                f"({batch},), got dtype {arr.dtype} and shape {arr.shape}"
            )
        lengths = arr.astype(np.intp)
    require_within(
        lengths,
        capacity,
        lambda b: (
            f"cache_seqlens[{b}] = {int(lengths[b])} must lie in "
            f"0..{capacity}, the positions its cache holds"
        ),
    )
    result: IntArray = lengths.astype(np.intp)
    return result


def _page_indices(
    block_table: object, lengths: IntArray, page_size: int, num_blocks: int
) -> IntArray:
    """The checked block table, with the entries no sequence reaches set to 0."""
    table = as_array(block_table, "block_table")
    if table.dtype.kind not in "iu" or table.ndim != 2 or len(table) != len(lengths):
        raise TypeError(
            f"block_table must be an integer array of shape (B, max_blocks) with "
            f"B = {len(lengths)}, got dtype {table.dtype} and shape {table.shape}"
        )
    capacity = table.shape[1] * page_size
    longer = lengths > capacity
    if longer.any():
        b = first_index(longer)[0]
        raise ValueError(
            f"cache_seqlens[{b}] = {int(lengths[b])} is longer than the {capacity} "
            f"positions its blocks hold: block_table has {table.shape[1]} blocks "
            f"per sequence, of page_size {page_size}"
        )
    # Only the pages a sequence reaches are read, as the kernels read them.
    used = np.arange(table.shape[1]) < -(-lengths[:, None] // page_size)
    bad = used & ((table < 0) | (table >= num_blocks))
    if bad.any():
        b, j = first_index(bad)
        raise ValueError(
            f"block_table[{b}, {j}] = {int(table[b, j])} points outside the cache: "
            f"k_cache holds {num_blocks} blocks (pages 0..{num_blocks - 1}), and "
            f"sequence {b} reads that entry for its {int(lengths[b])} cached keys"
        )
    indices: IntArray = np.where(used, table, 0).astype(np.intp)
    return indices


def read_cache(
    cache: FloatArray,
    cache_seqlens: IntArray,
    block_table: IntArray | None,
    n_keys: int,
) -> FloatArray:
    """The first ``n_keys`` positions of each sequence's cache, ``(B, H_kv, n, d)``.

    ``cache`` is in (..., heads, seqlen, dim) order: ``(B, H_kv, n_cache,
    d)``, or pages ``(num_blocks, H_kv, page_size, d)`` read through
    ``block_table``. Positions at or past ``cache_seqlens[b]`` become 0, so
    that whatever an unused slot holds (a previous sequence, NaN from
    uninitialised memory) never enters the result.

    Examples
    --------
    >>> pages = np.arange(6.0).reshape(3, 1, 2, 1)   # 3 pages of 2 positions
    >>> read_cache(pages, np.array([3]), np.array([[2, 0]]), 4)[0, 0, :, 0]
    array([4., 5., 0., 0.])
    """
    if block_table is None:
        keys = cache[:, :, :n_keys]
    else:
        page_size = cache.shape[-2]
        pages = -(-n_keys // page_size)
        gathered = cache[block_table[:, :pages]]  # (B, pages, H, page_size, d)
        gathered = np.moveaxis(gathered, 1, 2)  # (B, H, pages, page_size, d)
        keys = gathered.reshape(*gathered.shape[:2], -1, cache.shape[-1])[:, :, :n_keys]
    used = np.arange(n_keys) < cache_seqlens[:, None]
    result: FloatArray = np.where(used[:, None, :, None], keys, 0.0)
    return result


@check_keywords(align="bottom_right", layout="bshd")
def attention_with_kvcache(
    q: ArrayInput,
    k_cache: ArrayInput,
    v_cache: ArrayInput,
    *,
    cache_seqlens: int | ArrayInput,
    block_table: ArrayInput | None = None,
    return_lse: bool = False,
    **options: Unpack[CacheOptionKeywords],
) -> Any:
    """Attention of new queries over a KV cache, as ``flash_attn_with_kvcache``.

    Parameters
    ----------
    q : array_like, shape (B, n_q, H, d)
        The new queries, in FlashAttention's layout (``layout="bhsd"``:
        ``(B, H, n_q, d)``, and the caches likewise with heads first).
    k_cache, v_cache : array_like
        ``(B, n_cache, H_kv, d)`` without a block table; with one, pages
        ``(num_blocks, page_size, H_kv, d)``. Any page size works. Only
        each sequence's first ``cache_seqlens[b]`` positions are read.
    cache_seqlens : int or array_like of int, shape (B,)
        How many keys each sequence has cached. They end at
        ``cache_seqlens[b]``; with ``key_leftpad`` they start at
        ``key_leftpad[b]`` (FlashAttention's ``cache_leftpad``).
    block_table : array_like of int, shape (B, max_blocks), optional
        Entry ``[b, j]`` is the page that holds positions ``j · page_size``
        to ``(j + 1) · page_size - 1`` of sequence ``b``. Entries past a
        sequence's last page are not read.
    mask, mask_mod, score_mod, is_causal, scale, empty_rows, check_finite
        As for :func:`sdpa_ref.attention`; a ``mask`` has the shape of the
        scores, ``(B, H, n_q, max(cache_seqlens))``.
    window, sink_tokens, chunk, softcap, sink_logits, key_leftpad
        As for :func:`sdpa_ref.attention`.
    align : {"bottom_right", "top_left"}
        Bottom right by default, as FlashAttention: the last query lines up
        with each sequence's last cached key.
    layout : {"bshd", "bhsd"}
        FlashAttention's (batch, seqlen, heads, dim) by default.
    return_lse : bool
        Also return the log-sum-exp, shape ``(B, H, n_q)``, as
        ``return_softmax_lse`` does.

    Returns
    -------
    numpy.ndarray or tuple
        The output, ``(B, n_q, H, d_v)`` (in ``layout``), float64; with
        ``return_lse``, the pair ``(output, lse)``.

    Examples
    --------
    One new token against a paged cache of 2-position pages, and the same
    cache laid out contiguously:

    >>> rng = np.random.default_rng(0)
    >>> pages_k, pages_v = rng.normal(size=(2, 5, 2, 1, 4))
    >>> table = np.array([[3, 0, 4]])            # positions 0-1, 2-3, 4-5
    >>> q = rng.normal(size=(1, 1, 1, 4))
    >>> paged = attention_with_kvcache(q, pages_k, pages_v, cache_seqlens=5,
    ...                                block_table=table)
    >>> k = pages_k[table[0]].reshape(1, 6, 1, 4)
    >>> v = pages_v[table[0]].reshape(1, 6, 1, 4)
    >>> flat = attention_with_kvcache(q, k, v, cache_seqlens=5)
    >>> bool(np.array_equal(paged, flat))
    True
    """
    checked = Options(**options)
    if not isinstance(return_lse, bool | np.bool_):
        raise TypeError(f"return_lse must be True or False, got {return_lse!r}")
    q64 = to_layout(real_array(q, "q", dtype=np.float64), checked.layout, "q")
    caches = [
        to_layout(real_array(c, name, dtype=np.float64), checked.layout, name)
        for c, name in ((k_cache, "k_cache"), (v_cache, "v_cache"))
    ]
    batch = _check_shapes(q64, caches[0], caches[1], paged=block_table is not None)
    if block_table is None:
        lengths = _cache_lengths(cache_seqlens, batch, caches[0].shape[-2])
        table = None
    else:
        lengths = _cache_lengths(cache_seqlens, batch, np.iinfo(np.int64).max)
        page_size, num_blocks = caches[0].shape[-2], caches[0].shape[0]
        table = _page_indices(block_table, lengths, page_size, num_blocks)
    n_keys = max(1, int(lengths.max()))
    k, v = (read_cache(c, lengths, table, n_keys) for c in caches)
    p = prepare(q64, k, v, _replace_layout(checked, lengths))
    out, _, lse = dense_forward(p, want_weights=False)
    out = from_layout(out, checked.layout)
    return (out, lse) if return_lse else out


def _replace_layout(options: Options, lengths: npt.NDArray[np.intp]) -> Options:
    """The options for the cache read out: (B, H, n, d), keys ending at lengths."""
    return dataclasses.replace(options, layout="bhsd", k_lengths=lengths)


def _check_shapes(
    q: FloatArray, k_cache: FloatArray, v_cache: FloatArray, *, paged: bool
) -> int:
    """The batch size, once q and the caches are 4-D and agree."""
    shapes = f"q {q.shape}, k_cache {k_cache.shape}, v_cache {v_cache.shape}"
    if q.ndim != 4 or k_cache.ndim != 4 or v_cache.ndim != 4:
        raise ValueError(
            f"q and the caches must be 4-D, (B, n_q, H, d) and (B, n_cache, H_kv, "
            f"d) or pages (num_blocks, page_size, H_kv, d), got {shapes} (read as "
            f"heads before seqlen)"
        )
    if k_cache.shape[:-1] != v_cache.shape[:-1]:
        raise ValueError(
            f"k_cache and v_cache must hold the same positions and heads, got "
            f"{shapes} (read as heads before seqlen)"
        )
    if not paged and k_cache.shape[0] != q.shape[0]:
        raise ValueError(
            f"without a block_table the caches hold one sequence per batch entry "
            f"of q: k_cache's first axis must be B = {q.shape[0]}, got {shapes}"
        )
    return int(q.shape[0])
