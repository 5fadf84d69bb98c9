"""Packed variable-length batches, as FlashAttention's ``flash_attn_varlen_func``.

A serving or training kernel packs a batch of sequences of different lengths
into one token axis, with no padding: q of shape ``(total_q, heads, dim)``
and k, v of shape ``(total_k, heads_kv, dim)``. ``cu_seqlens_q`` and
``cu_seqlens_k`` (int arrays of length B + 1, starting at 0 and ending at
the packed length) say where each sequence starts: sequence ``b`` holds
tokens ``cu_seqlens[b]`` to ``cu_seqlens[b + 1]``. FlashAttention 3 adds
``seqused_k`` (only the first ``seqused_k[b]`` keys of a sequence's slot are
used, for a cache longer than its contents) and ``leftpad_k``, keys skipped
at the start of the slot (hopper/seqlen.h at flash-attention commit
0251105a: the keys of sequence ``b`` start at ``cu_seqlens_k[b] +
leftpad_k[b]`` and number ``seqused_k[b] - leftpad_k[b]``). sdpa_ref calls
that option ``key_leftpad``, as ``attention_ref`` does.

sdpa_ref computes a packed batch by unpacking it into a padded one, with each
sequence's lengths, through the same code as every other input: every
option and mod applies to each sequence on its own, with positions counted
from the sequence's start and, under ``align="bottom_right"``, the diagonal
placed from that sequence's lengths, as FlashAttention does. Results go back
packed: the output and ``dq`` like q, ``dk`` and ``dv`` like k, and the
log-sum-exp as ``(heads, total_q)``, the shape ``flash_attn_varlen_func``
returns its ``softmax_lse`` in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._arrays import BoolArray, FloatArray, IntArray, as_array
from ._checks import first_index, require_within

__all__ = [
    "Packing",
    "cu_seqlens_array",
    "pack",
    "pack_lse",
    "pad",
    "unpack",
    "unpack_lse",
    "unpack_rows",
]


@dataclass(frozen=True)
class Packing:
    """Where each padded (sequence, position) lives on the packed token axis.

    ``q_tokens[b, s]`` is True when query ``s`` of sequence ``b`` exists;
    the packed tokens are those entries in row-major order, which is the
    order of ``cu_seqlens``. ``k_tokens`` likewise for each sequence's slot
    of keys (its used keys and any unused ones around them).
    """

    q_tokens: BoolArray  # (B, max_q)
    k_tokens: BoolArray  # (B, max_k)
    total_q: int
    total_k: int


def cu_seqlens_array(value: object, name: str) -> IntArray:
    """Check cumulative sequence lengths: 1-D ints from 0, never decreasing.

    Examples
    --------
    >>> cu_seqlens_array([0, 3, 3, 5], "cu_seqlens_q")
    array([0, 3, 3, 5])
    >>> cu_seqlens_array([0, 3, 2], "cu_seqlens_q")
    Traceback (most recent call last):
      ...
    ValueError: cu_seqlens_q must not decrease: ... from 3 to 2 at index 2 ([0, 3, 2])
    """
    arr = as_array(value, name)
    if arr.dtype.kind not in "iu" or arr.ndim != 1:
        raise TypeError(
            f"{name} must be a 1-D integer array of length B + 1 (the running "
            f"total of the sequence lengths, from 0), got dtype {arr.dtype} and "
            f"shape {arr.shape}"
        )
    if arr.size < 2:
        raise ValueError(
            f"{name} must hold B + 1 >= 2 entries, 0 and then each sequence's "
            f"end, got {arr.tolist()}"
        )
    if arr[0] != 0:
        raise ValueError(
            f"{name} must start at 0, where the first sequence starts, got "
            f"{arr.tolist()[:6]}"
        )
    steps = np.diff(arr.astype(np.int64))
    if (steps < 0).any():
        where = first_index(steps < 0)[0] + 1
        raise ValueError(
            f"{name} must not decrease: it is the running total of the sequence "
            f"lengths, but it goes from {int(arr[where - 1])} to {int(arr[where])} "
            f"at index {where} ({_short(arr)})"
        )
    result: IntArray = arr.astype(np.intp)
    return result


def _short(arr: npt.NDArray[Any]) -> str:
    values = arr.tolist()
    return str(values) if len(values) <= 12 else f"{values[:12]}..."[:-4] + ", ...]"


def _per_sequence(
    value: object, name: str, batch: int, upper: IntArray, what: str
) -> IntArray:
    arr = as_array(value, name)
    if arr.dtype.kind not in "iu" or arr.shape != (batch,):
        raise ValueError(
            f"{name} must be an integer array of shape (B,) = ({batch},), one per "
            f"sequence, got dtype {arr.dtype} and shape {arr.shape}"
        )
    require_within(
        arr,
        upper,
        lambda b: f"{name}[{b}] = {int(arr[b])} must lie in 0..{int(upper[b])}, {what}",
    )
    result: IntArray = arr.astype(np.intp)
    return result


def _tokens(cu: IntArray) -> tuple[BoolArray, IntArray]:
    lengths = np.diff(cu)
    width = max(1, int(lengths.max()))
    tokens: BoolArray = np.arange(width) < lengths[:, None]
    return tokens, lengths


def unpack(  # noqa: PLR0917 (the packed arrays and their descriptions)
    q: FloatArray,
    k: FloatArray,
    v: FloatArray,
    cu_seqlens_q: object,
    cu_seqlens_k: object,
    seqused_k: object,
) -> tuple[FloatArray, FloatArray, FloatArray, IntArray, IntArray, Packing]:
    """Packed ``(heads, total, dim)`` arrays to padded ``(B, heads, max, dim)``.

    Returns the padded q, k and v, each sequence's number of queries and the
    end of its used keys within its slot (``seqused_k``, or the slot's
    length), and the :class:`Packing` that :func:`pack` undoes.

    Examples
    --------
    >>> q = np.arange(5.0).reshape(1, 5, 1)           # one head, five tokens
    >>> pq, pk, pv, q_len, k_end, packing = unpack(q, q, q, [0, 2, 5], [0, 2, 5], None)
    >>> pq[:, 0, :, 0]
    array([[0., 1., 0.],
           [2., 3., 4.]])
    >>> q_len, k_end
    (array([2, 3]), array([2, 3]))
    """
    cu_q = cu_seqlens_array(cu_seqlens_q, "cu_seqlens_q")
    cu_k = cu_seqlens_array(cu_seqlens_k, "cu_seqlens_k")
    if cu_q.shape != cu_k.shape:
        raise ValueError(
            f"cu_seqlens_q and cu_seqlens_k must both hold B + 1 entries, got "
            f"{cu_q.size} and {cu_k.size}"
        )
    for name, cu, arr, label in (
        ("cu_seqlens_q", cu_q, q, "q"),
        ("cu_seqlens_k", cu_k, k, "k"),
        ("cu_seqlens_k", cu_k, v, "v"),
    ):
        if arr.ndim != 3 or int(cu[-1]) != arr.shape[-2]:
            raise ValueError(
                f"{name} ends at {int(cu[-1])}, the packed length, but {label} "
                f"holds {arr.shape[-2] if arr.ndim == 3 else '?'} tokens (shape "
                f"{arr.shape} as (heads, total, dim)); packed inputs are 3-D, "
                f"FlashAttention's (total, heads, dim) with layout='bshd'"
            )
    q_tokens, q_lengths = _tokens(cu_q)
    k_tokens, k_slots = _tokens(cu_k)
    k_end = k_slots
    if seqused_k is not None:
        k_end = _per_sequence(
            seqused_k, "seqused_k", k_slots.size, k_slots, "the length of its slot"
        )
    packing = Packing(q_tokens, k_tokens, int(cu_q[-1]), int(cu_k[-1]))
    return (
        pad(q, q_tokens),
        pad(k, k_tokens),
        pad(v, k_tokens),
        q_lengths,
        k_end,
        packing,
    )


def pad(packed: FloatArray, tokens: BoolArray) -> FloatArray:
    """``(heads, total, dim)`` to ``(B, heads, max, dim)``, zeros where empty.

    ``tokens`` is :class:`Packing`'s ``q_tokens`` or ``k_tokens``; the dtype
    is kept.

    Examples
    --------
    >>> tokens = np.array([[True, False], [True, True]])
    >>> pad(np.arange(3.0).reshape(1, 3, 1), tokens)[:, 0, :, 0]
    array([[0., 0.],
           [1., 2.]])
    """
    heads, _, dim = packed.shape
    padded = np.zeros((*tokens.shape, heads, dim), dtype=packed.dtype)
    padded[tokens] = np.swapaxes(packed, 0, 1)
    return np.ascontiguousarray(np.moveaxis(padded, 2, 1))


def pack(padded: FloatArray, packing: Packing, side: str) -> FloatArray:
    """``(B, heads, max, dim)`` back to ``(heads, total, dim)``: ``side`` "q" or "k".

    Examples
    --------
    >>> q = np.arange(5.0).reshape(1, 5, 1)
    >>> pq, *_, packing = unpack(q, q, q, [0, 2, 5], [0, 2, 5], None)
    >>> pack(pq, packing, "q")[0, :, 0]
    array([0., 1., 2., 3., 4.])
    """
    tokens = packing.q_tokens if side == "q" else packing.k_tokens
    rows: FloatArray = np.moveaxis(padded, 1, 2)[tokens]  # (total, heads, dim)
    return np.ascontiguousarray(np.swapaxes(rows, 0, 1))


def pack_lse(lse: FloatArray, packing: Packing) -> FloatArray:
    """Padded ``(B, heads, max_q)`` to FlashAttention's ``(heads, total_q)``."""
    rows: FloatArray = np.swapaxes(lse, 1, 2)[packing.q_tokens]  # (total, heads)
    return np.ascontiguousarray(rows.T)


def unpack_lse(lse: FloatArray, packing: Packing, heads: int) -> FloatArray:
    """``(heads, total_q)`` to padded ``(B, heads, max_q)``, ``-inf`` where empty."""
    expected = (heads, packing.total_q)
    if lse.shape != expected:
        raise ValueError(
            f"lse of a packed batch must have shape (heads, total_q) = {expected}, "
            f"as flash_attn_varlen_func returns it, got {lse.shape}"
        )
    padded = np.full((*packing.q_tokens.shape, heads), -np.inf)
    padded[packing.q_tokens] = lse.T
    return np.ascontiguousarray(np.swapaxes(padded, 1, 2))


def unpack_rows(
    packed: FloatArray, packing: Packing, name: str, heads_dim: tuple[int, int]
) -> FloatArray:
    """A packed ``(heads, total_q, d_v)`` array like the output, padded with zeros."""
    heads, dim = heads_dim
    expected = (heads, packing.total_q, dim)
    if packed.shape != expected:
        raise ValueError(
            f"{name} must be packed like the output, (heads, total_q, d_v) = "
            f"{expected} (as (total_q, heads, d_v) with layout='bshd'), got shape "
            f"{packed.shape} in that order"
        )
    return pad(packed, packing.q_tokens)
