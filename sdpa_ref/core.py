"""Softmax and scaled dot-product attention, dense and tiled, in float64."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import (
    empty_row_policy,
    first_index,
    nonnegative_int,
    positive_int,
    positive_scale,
    real_array,
    require_finite,
)

__all__ = ["attention", "causal_mask", "naive_softmax", "softmax", "tiled_attention"]

CAUSAL_ALIGNMENTS = ("top_left", "bottom_right")


def softmax(x, axis=-1):
    """Normalise scores into weights along ``axis``, safely.

    Each row's maximum is subtracted before ``exp``. That shifts every score
    of the row by the same amount, which leaves the weights unchanged, and it
    keeps the largest exponent at ``exp(0) = 1`` so nothing overflows.

    Parameters
    ----------
    x : array_like
        Real scores (logits). ``-inf`` marks a forbidden entry. Floating
        inputs keep their precision; integers become float64.
    axis : int, optional
        The axis to normalise over, the key axis by default.

    Returns
    -------
    numpy.ndarray
        Nonnegative weights of the same shape that sum to 1 along ``axis``.

    Raises
    ------
    ValueError
        If ``x`` holds NaN or ``+inf``, is empty along ``axis``, or has a row
        with no finite entry (every entry ``-inf``).

    Examples
    --------
    The worked example's raw and scaled scores:

    >>> w_raw = softmax([4, 0, 2, -4])
    >>> w_scaled = softmax([2, 0, 1, -2])
    >>> print(f"{w_raw[0]:.3f} -> {w_scaled[0]:.3f}")
    0.867 -> 0.657

    A huge logit stays finite:

    >>> softmax([1000.0, 0.0])
    array([1., 0.])
    """
    x = real_array(x, "x", min_ndim=1)
    if x.shape[axis] == 0:
        raise ValueError(f"x has no entries along axis {axis} (shape {x.shape})")
    if np.isnan(x).any():
        raise ValueError(f"x contains NaN at index {first_index(np.isnan(x))}")
    if np.isposinf(x).any():
        raise ValueError(f"x contains +inf at index {first_index(np.isposinf(x))}")
    row_max = np.max(x, axis=axis, keepdims=True)
    if np.isneginf(row_max).any():
        row = first_index(np.isneginf(row_max))
        raise ValueError(
            f"x has a row with no finite entry along axis {axis} at index {row} "
            f"(shape {x.shape}); the softmax of an all -inf row is undefined"
        )
    weights = np.exp(x - row_max)
    weights /= weights.sum(axis=axis, keepdims=True)
    return weights


def naive_softmax(x, axis=-1):
    """Softmax without the max-subtraction, to show why it is needed.

    This is the textbook ``exp(x) / sum(exp(x))``. It is exact in real
    arithmetic and breaks in floating point: once a logit passes the dtype's
    overflow threshold (about 88.72 in float32), ``exp`` gives ``inf`` and
    the row becomes NaN. It is kept for the precision pages; use
    :func:`softmax` for anything else.

    Examples
    --------
    >>> naive_softmax([2.0, 0.0, 1.0, -2.0]).round(3)
    array([0.657, 0.089, 0.242, 0.012])
    >>> naive_softmax(np.array([100.0, 0.0], dtype=np.float32))
    array([nan,  0.], dtype=float32)
    """
    x = real_array(x, "x", min_ndim=1)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=axis, keepdims=True)


def causal_mask(n_q, n_k, align="top_left"):
    """Boolean causal mask of shape ``(n_q, n_k)``; True means "may attend".

    Parameters
    ----------
    n_q, n_k : int
        Numbers of queries and keys.
    align : {"top_left", "bottom_right"}
        ``"top_left"`` lets query ``i`` see keys ``j <= i``, as PyTorch's
        ``is_causal``. ``"bottom_right"`` lines the last query up with the
        last key, so query ``i`` sees keys ``j <= i + (n_k - n_q)``: the
        convention of FlashAttention 2.1 and later and of KV-cache decoding,
        where new queries come after the cached keys. The two agree when
        ``n_q == n_k``.

    Examples
    --------
    One new token decoding against three cached keys plus itself:

    >>> causal_mask(1, 4, align="bottom_right")
    array([[ True,  True,  True,  True]])
    >>> causal_mask(1, 4, align="top_left")
    array([[ True, False, False, False]])
    """
    n_q = nonnegative_int(n_q, "n_q")
    n_k = nonnegative_int(n_k, "n_k")
    return _causal_block(n_q, 0, n_k, _causal_offset(n_q, n_k, align))


def _causal_offset(n_q: int, n_k: int, align) -> int:
    if align not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"align must be one of {CAUSAL_ALIGNMENTS}, got {align!r}")
    return 0 if align == "top_left" else n_k - n_q


def _causal_block(n_q: int, start: int, stop: int, offset: int):
    """Columns ``start:stop`` of a causal mask; never builds the full mask."""
    rows = np.arange(n_q)[:, None]
    cols = np.arange(start, stop)[None, :]
    return cols <= rows + offset


@dataclass(frozen=True)
class _Problem:
    """Validated, broadcast-ready inputs shared by the dense and tiled paths."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    mask: np.ndarray | None
    causal_offset: int | None
    scale: float
    empty_rows: str
    out_shape: tuple[int, ...]

    @property
    def n_k(self) -> int:
        return self.k.shape[-2]

    def mask_logits(self, scores: np.ndarray, start: int, stop: int) -> None:
        """Apply the mask to ``scores``, the key columns ``start:stop``, in place."""
        if self.mask is not None:
            block = (
                self.mask if self.mask.shape[-1] == 1 else self.mask[..., start:stop]
            )
            if block.dtype == bool:
                np.copyto(scores, -np.inf, where=~block)
            else:
                scores += block
        if self.causal_offset is not None:
            allowed = _causal_block(scores.shape[-2], start, stop, self.causal_offset)
            np.copyto(scores, -np.inf, where=~allowed)


def _prepare(q, k, v, *, mask, is_causal, scale, empty_rows, check_finite) -> _Problem:
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    v = real_array(v, "v", min_ndim=2, dtype=np.float64)
    shapes = f"q {q.shape}, k {k.shape}, v {v.shape}"
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share the last axis d_k, got d_k = {q.shape[-1]} and "
            f"{k.shape[-1]} ({shapes})"
        )
    if q.shape[-1] == 0:
        raise ValueError(f"q and k have zero width, d_k = 0 ({shapes})")
    if v.shape[-1] == 0:
        raise ValueError(f"v has zero width, d_v = 0 ({shapes})")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must hold the same number of keys n_k on axis -2, got "
            f"{k.shape[-2]} and {v.shape[-2]} ({shapes})"
        )
    if k.shape[-2] == 0:
        raise ValueError(f"there are no keys, n_k = 0 ({shapes})")
    if check_finite:
        for name, arr in (("q", q), ("k", k), ("v", v)):
            require_finite(arr, name)
    k, v = _group_heads(q, k, v, shapes)
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch, head) axes do not broadcast: {shapes}"
        ) from None
    if not isinstance(is_causal, (bool, np.bool_)):
        raise TypeError(f"is_causal must be True or False, got {is_causal!r}")
    n_q, n_k = q.shape[-2], k.shape[-2]
    scores_shape = (*batch, n_q, n_k)
    # A broadcast view costs nothing and gives every score block the full
    # batch shape, so the in-place updates below never meet a smaller array.
    q = np.broadcast_to(q, (*batch, n_q, q.shape[-1]))
    return _Problem(
        q=q,
        k=k,
        v=v,
        mask=_check_mask(mask, scores_shape),
        causal_offset=0 if is_causal else None,
        scale=1.0 / np.sqrt(q.shape[-1]) if scale is None else positive_scale(scale),
        empty_rows=empty_row_policy(empty_rows),
        out_shape=(*batch, n_q, v.shape[-1]),
    )


def _group_heads(q, k, v, shapes):
    """Repeat shared key/value heads for grouped- and multi-query attention.

    With ``H_q`` query heads and ``H_kv`` key/value heads on axis -3, query
    head ``h`` reads key/value head ``h // (H_q // H_kv)``, as PyTorch's
    ``enable_gqa``. A head axis of size 1 on either side is ordinary
    broadcasting; ``H_kv == 1`` is multi-query attention.
    """
    if q.ndim < 3 or k.ndim < 3:
        return k, v
    h_q, h_kv = q.shape[-3], k.shape[-3]
    if v.ndim >= 3 and v.shape[-3] != h_kv:
        raise ValueError(
            f"k and v must have the same number of heads on axis -3, got {h_kv} "
            f"and {v.shape[-3]} ({shapes})"
        )
    if h_kv in (h_q, 1) or h_q == 1:  # equal, or plain broadcasting
        return k, v
    if h_q % h_kv:
        raise ValueError(
            f"q has {h_q} heads on axis -3 but k and v have {h_kv}; grouped-query "
            f"attention needs the query heads to be a multiple of the key/value "
            f"heads ({shapes})"
        )
    group = h_q // h_kv
    v = np.repeat(v, group, axis=-3) if v.ndim >= 3 else v
    return np.repeat(k, group, axis=-3), v


def _check_mask(mask, scores_shape):
    if mask is None:
        return None
    try:
        mask = np.asarray(mask)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"mask must be a boolean or float array; {exc}") from None
    if mask.dtype != bool and mask.dtype.kind != "f":
        raise TypeError(
            f"mask must be boolean (True = may attend) or floating (added to the "
            f"logits), got dtype {mask.dtype} (shape {mask.shape})"
        )
    try:
        fits = np.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"mask with shape {mask.shape} does not broadcast to the scores' "
            f"shape {scores_shape} (..., n_q, n_k)"
        )
    if mask.dtype.kind == "f" and (np.isnan(mask).any() or np.isposinf(mask).any()):
        raise ValueError(
            "a float mask may hold finite values and -inf, not NaN or +inf"
        )
    return mask


def _empty_row_error(empty: np.ndarray) -> ValueError:
    where = first_index(empty)
    return ValueError(
        f"query {where[-1]} (batch index {where[:-1]}) has no allowed key: every "
        f"logit in its row is -inf after masking. Pass empty_rows='zero' "
        f"(PyTorch >= 2.5, FlashAttention) or empty_rows='nan' (textbook softmax)"
    )


def _check_row_max(row_max: np.ndarray) -> None:
    # Inputs are finite, so NaN or +inf here means q·k overflowed float64.
    bad = np.isnan(row_max) | np.isposinf(row_max)
    if bad.any():
        raise ValueError(
            f"the scaled scores hold NaN or +inf in row {first_index(bad[..., 0])}: "
            f"q·k overflowed float64, or non-finite input got past "
            f"check_finite=False"
        )


def _fill_empty(arrays, empty: np.ndarray, policy: str) -> None:
    fill = 0.0 if policy == "zero" else np.nan
    for arr in arrays:
        arr[np.broadcast_to(empty[..., None], arr.shape)] = fill


def attention(
    q,
    k,
    v,
    *,
    mask=None,
    is_causal=False,
    scale=None,
    empty_rows="raise",
    return_weights=False,
    check_finite=True,
):
    """Scaled dot-product attention, ``softmax(q kᵀ · scale + mask) v``.

    Parameters
    ----------
    q : array_like, shape (..., n_q, d_k)
        Queries.
    k : array_like, shape (..., n_k, d_k)
        Keys.
    v : array_like, shape (..., n_k, d_v)
        Values. ``n_q != n_k`` and ``d_v != d_k`` are both fine. Leading axes
        broadcast. If axis -3 holds heads and q has ``H_q`` of them while k
        and v have ``H_kv``, with ``H_q % H_kv == 0``, query head ``h`` uses
        key/value head ``h // (H_q // H_kv)`` (grouped- and multi-query
        attention, PyTorch's ``enable_gqa``).
    mask : array_like of bool or float, optional
        Broadcastable to ``(..., n_q, n_k)``. Boolean: True means "may
        attend". Floating: added to the scaled logits, ``-inf`` forbids.
    is_causal : bool
        Query ``i`` sees keys ``j <= i`` (top-left aligned, as PyTorch). For
        the bottom-right convention pass ``mask=causal_mask(n_q, n_k,
        "bottom_right")``. Combines with ``mask``.
    scale : float, optional
        Multiplies ``q kᵀ``. ``None`` means ``1 / sqrt(d_k)``; ``scale=1.0``
        is unscaled attention.
    empty_rows : {"raise", "zero", "nan"}
        What a query with no allowed key gets: an error naming the row, an
        output (and weights) of 0 as PyTorch 2.5+ and FlashAttention give,
        or NaN, the textbook softmax of an all ``-inf`` row.
    return_weights : bool
        Also return the attention weights, shape ``(..., n_q, n_k)``.
    check_finite : bool
        Reject NaN and infinity in q, k and v, as SciPy does.

    Returns
    -------
    numpy.ndarray or tuple
        The output, shape ``(..., n_q, d_v)``, float64; with
        ``return_weights``, the pair ``(output, weights)``.

    Examples
    --------
    Query Q0 of the worked example at width 4 scores [4, 0, 2, -4]; scaled
    attention divides by √4 = 2 before the softmax:

    >>> from sdpa_ref import example
    >>> Q, K, V = example.vectors(4)
    >>> out, w = attention(Q[:1], K, V, return_weights=True)
    >>> w.round(3)
    array([[0.657, 0.089, 0.242, 0.012]])
    >>> out, w = attention(Q[:1], K, V, scale=1.0, return_weights=True)
    >>> w.round(3)
    array([[0.867, 0.016, 0.117, 0.   ]])
    """
    p = _prepare(
        q,
        k,
        v,
        mask=mask,
        is_causal=is_causal,
        scale=scale,
        empty_rows=empty_rows,
        check_finite=check_finite,
    )
    with np.errstate(over="ignore", invalid="ignore"):  # _check_row_max reports it
        # Scaling q (n_q x d_k numbers) instead of the scores (n_q x n_k)
        # saves a whole pass over the largest array.
        scores = np.matmul(p.q * p.scale, np.swapaxes(p.k, -1, -2))
    p.mask_logits(scores, 0, p.n_k)
    row_max = scores.max(axis=-1, keepdims=True)
    _check_row_max(row_max)
    empty = np.isneginf(row_max[..., 0])
    has_empty = bool(empty.any())
    if has_empty:
        if p.empty_rows == "raise":
            raise _empty_row_error(empty)
        row_max[empty] = 0.0  # exp(-inf - 0) = 0 rather than NaN
    # In place from here on: no second n_q x n_k temporary.
    scores -= row_max
    np.exp(scores, out=scores)
    norm = scores.sum(axis=-1, keepdims=True)
    if has_empty:
        norm[empty] = 1.0
    out = np.matmul(scores, p.v)
    out /= norm
    if return_weights:
        scores /= norm
        if has_empty:
            _fill_empty((out, scores), empty, p.empty_rows)
        return out, scores
    if has_empty:
        _fill_empty((out,), empty, p.empty_rows)
    return out


def tiled_attention(
    q,
    k,
    v,
    *,
    block_size=128,
    mask=None,
    is_causal=False,
    scale=None,
    empty_rows="raise",
    check_finite=True,
):
    """Attention over key/value blocks with an online softmax, as FlashAttention.

    The result equals :func:`attention` to about 1e-12 in float64, but no more
    than ``n_q x block_size`` scores (per batch entry) exist at any time. For
    each block of keys, the running row maximum ``m`` is updated, the running
    sum ``l`` and the output accumulator are rescaled by ``exp(m_old - m_new)``,
    and the block's contribution is added. The mask is sliced, and the causal
    mask built, one block at a time.

    Parameters
    ----------
    q, k, v, mask, is_causal, scale, empty_rows, check_finite
        As for :func:`attention`.
    block_size : int
        Keys per block, at least 1.

    Returns
    -------
    numpy.ndarray
        The output, shape ``(..., n_q, d_v)``, float64.

    Examples
    --------
    >>> from sdpa_ref import example
    >>> Q, K, V = example.vectors(64)
    >>> dense = attention(Q, K, V)
    >>> tiled = tiled_attention(Q, K, V, block_size=3)
    >>> bool(np.abs(dense - tiled).max() < 1e-12)
    True
    """
    p = _prepare(
        q,
        k,
        v,
        mask=mask,
        is_causal=is_causal,
        scale=scale,
        empty_rows=empty_rows,
        check_finite=check_finite,
    )
    block_size = positive_int(block_size, "block_size")
    n_q = p.q.shape[-2]
    batch = p.out_shape[:-2]
    running_max = np.full((*batch, n_q, 1), -np.inf)
    running_sum = np.zeros((*batch, n_q, 1))
    acc = np.zeros(p.out_shape)
    k_t = np.swapaxes(p.k, -1, -2)
    with np.errstate(over="ignore", invalid="ignore"):
        q_scaled = p.q * p.scale
    for start in range(0, p.n_k, block_size):
        stop = min(start + block_size, p.n_k)
        with np.errstate(over="ignore", invalid="ignore"):  # _check_row_max reports it
            scores = np.matmul(q_scaled, k_t[..., start:stop])
        p.mask_logits(scores, start, stop)
        block_max = scores.max(axis=-1, keepdims=True)
        _check_row_max(block_max)
        new_max = np.maximum(running_max, block_max)
        # A row that has seen no allowed key yet keeps a -inf maximum; shift it
        # by 0 so that exp gives 0 instead of exp(-inf + inf) = NaN.
        shift = np.where(np.isneginf(new_max), 0.0, new_max)
        rescale = np.exp(running_max - shift)
        scores -= shift
        np.exp(scores, out=scores)
        running_sum *= rescale
        running_sum += scores.sum(axis=-1, keepdims=True)
        acc *= rescale
        acc += np.matmul(scores, p.v[..., start:stop, :])
        running_max = new_max
    empty = running_sum[..., 0] == 0  # >= 1 as soon as a row has an allowed key
    if empty.any():
        if p.empty_rows == "raise":
            raise _empty_row_error(empty)
        running_sum[empty] = 1.0
        acc /= running_sum
        _fill_empty((acc,), empty, p.empty_rows)
        return acc
    acc /= running_sum
    return acc
