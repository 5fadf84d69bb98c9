"""Each attention option written once, as a mask or a score modification.

PyTorch's FlexAttention expresses every variant of attention as a
``mask_mod(b, h, q_idx, kv_idx)`` that says which pairs may attend, or a
``score_mod(score, b, h, q_idx, kv_idx)`` that changes a logit. This module
does the same, vectorised: a *mask mod* takes ``q_idx`` of shape
``(n_q, 1)`` and ``kv_idx`` of shape ``(1, n_block)`` (a contiguous,
ascending range of key indices) and returns a boolean array, True where the
pair may attend, that broadcasts to ``(..., n_q, n_block)``. Batch-dependent
options (sequence lengths) carry a ``(B, 1, 1, 1)`` axis of their own.

The dense and tiled forward passes and both backward passes call these same
functions, so every code path agrees on what each option means. The
semantics follow FlashAttention's reference, ``attention_ref`` in
``flash_attn/utils/testing.py`` (flash-attention commit 0251105a), line
numbers cited at each function.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "align_offset",
    "array_mask",
    "chunk_mask",
    "key_length_mask",
    "query_length_mask",
    "softcap_score",
    "softcap_score_grad",
    "window_mask",
]


def align_offset(n_q, n_k, align, q_lengths=None, k_lengths=None):
    """How far query ``i``'s diagonal sits from key ``i``: ``i' = i + offset``.

    ``"top_left"`` (PyTorch's ``is_causal``) gives 0. ``"bottom_right"``
    (FlashAttention) lines the last query up with the last key, ``offset =
    n_k - n_q``, from each batch entry's true lengths when they are given:
    ``row_idx + sk - sq`` in ``construct_local_mask`` (testing.py:175-186),
    where ``sk`` and ``sq`` are the padding masks' sums.

    Returns an int, or an int array of shape ``(B, 1, 1, 1)`` with lengths.

    Examples
    --------
    >>> align_offset(2, 5, "bottom_right")
    3
    >>> align_offset(2, 5, "bottom_right", k_lengths=np.array([5, 4]))[:, 0, 0, 0]
    array([3, 2])
    """
    if align == "top_left":
        return 0
    if q_lengths is None and k_lengths is None:
        return n_k - n_q
    sk = n_k if k_lengths is None else k_lengths
    sq = n_q if q_lengths is None else q_lengths
    return (np.asarray(sk) - np.asarray(sq)).reshape(-1, 1, 1, 1)


def window_mask(left, right, sink_tokens=0, offset=0):
    """Local attention: query ``i`` sees keys ``i' - left ≤ j ≤ i' + right``.

    ``i' = i + offset``. ``None`` leaves a side unbounded; ``(None, 0)`` is
    causal attention. The first ``sink_tokens`` keys are exempt from the left
    bound (StreamingLLM's attention sinks) but not from the right one.

    FlashAttention's ``construct_local_mask`` (testing.py:185-192) *forbids*
    ``col > row + sk - sq + right`` and, with a left bound, ``col < row + sk -
    sq - left and col >= sink_token_length``; this is its complement. Its
    ``min(..., sk)`` only clips at the key length, which the key-length mask
    enforces anyway.

    Examples
    --------
    >>> q_idx, kv_idx = np.arange(4)[:, None], np.arange(4)[None, :]
    >>> window_mask(1, 0)(q_idx, kv_idx).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    >>> window_mask(0, 0, sink_tokens=1)(q_idx, kv_idx)[3].astype(int)
    array([1, 0, 0, 1])
    """

    def mask_mod(q_idx, kv_idx):
        aligned = q_idx + offset
        allowed = np.ones(np.broadcast_shapes(np.shape(aligned), kv_idx.shape), bool)
        if right is not None:
            allowed &= kv_idx <= aligned + right
        if left is not None:
            allowed &= (kv_idx >= aligned - left) | (kv_idx < sink_tokens)
        return allowed

    return mask_mod


def chunk_mask(size, offset=0):
    """Chunked attention (Llama 4; FlashAttention's ``attention_chunk``).

    Query ``i`` sees only the keys of its own chunk of ``size`` keys, after
    alignment: the chunk starts at ``i' - (i' mod size)``, with the floor
    remainder so negative ``i'`` land in negative chunks, as
    ``construct_chunk_mask`` computes ``col_limit_left_chunk``
    (testing.py:221-225).

    Examples
    --------
    >>> q_idx, kv_idx = np.arange(4)[:, None], np.arange(4)[None, :]
    >>> chunk_mask(2)(q_idx, kv_idx).astype(int)
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [0, 0, 1, 1],
           [0, 0, 1, 1]])
    """

    def mask_mod(q_idx, kv_idx):
        aligned = q_idx + offset
        start = aligned - np.mod(aligned, size)
        return (kv_idx >= start) & (kv_idx < start + size)

    return mask_mod


def key_length_mask(k_lengths):
    """Keys at or past ``k_lengths[b]`` are never attended (varlen batches).

    FlashAttention's ``key_padding_mask`` (testing.py:299-300), with the
    padding at the end of each sequence.

    Examples
    --------
    >>> key_length_mask(np.array([1, 3]))(np.arange(2)[:, None], np.arange(3)[None, :])
    array([[[[ True, False, False]]],
    <BLANKLINE>
    <BLANKLINE>
           [[[ True,  True,  True]]]])
    """
    lengths = np.asarray(k_lengths).reshape(-1, 1, 1, 1)

    def mask_mod(q_idx, kv_idx):
        return kv_idx < lengths

    return mask_mod


def query_length_mask(q_lengths):
    """Queries at or past ``q_lengths[b]`` attend to nothing.

    Such a query is padding, not an empty row: its output and weights are 0
    whatever ``empty_rows`` says (``query_padding_mask``, testing.py:340-341
    and 358-359).

    Examples
    --------
    >>> query_length_mask(np.array([1]))(np.arange(2)[:, None], np.arange(2)[None, :])
    array([[[[ True],
             [False]]]])
    """
    lengths = np.asarray(q_lengths).reshape(-1, 1, 1, 1)

    def mask_mod(q_idx, kv_idx):
        return q_idx < lengths

    return mask_mod


def array_mask(mask):
    """A boolean mask array (True = may attend) as a mask mod.

    The key axis is sliced, never gathered, since ``kv_idx`` is always a
    contiguous range; a key axis of length 1 broadcasts.

    Examples
    --------
    >>> keep = np.array([[True, False, True]])
    >>> array_mask(keep)(np.arange(1)[:, None], np.arange(1, 3)[None, :])
    array([[False,  True]])
    """

    def mask_mod(q_idx, kv_idx):
        return column_block(mask, kv_idx)

    return mask_mod


def column_block(arr, kv_idx):
    """Key columns ``kv_idx`` (a contiguous range) of an array, or all if it has one."""
    if arr.shape[-1] == 1:
        return arr
    return arr[..., int(kv_idx[0, 0]) : int(kv_idx[0, -1]) + 1]


def softcap_score(scores, cap):
    """Gemma 2's logit soft-capping, in place: ``s ← cap · tanh(s / cap)``.

    Applied after the scale and before any mask or float bias, as
    ``attention_ref`` does (testing.py:297-298, before the padding mask at
    299 and ``attn_bias`` at 326-327). Returns ``scores``.

    Examples
    --------
    >>> softcap_score(np.array([0.0, 100.0]), 10.0).round(4)
    array([ 0., 10.])
    """
    scores /= cap
    np.tanh(scores, out=scores)
    scores *= cap
    return scores


def softcap_score_grad(dscores, capped, cap):
    """Chain rule through :func:`softcap_score`, in place, from its output.

    ``d/ds [cap · tanh(s / cap)] = 1 - tanh² = 1 - (capped / cap)²``.

    Examples
    --------
    >>> softcap_score_grad(np.array([1.0]), np.array([0.0]), 10.0)
    array([1.])
    """
    dscores *= 1.0 - np.square(capped / cap)
    return dscores
