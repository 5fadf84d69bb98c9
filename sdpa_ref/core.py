"""Softmax and scaled dot-product attention, dense and tiled, in float64."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._checks import (
    alignment,
    dropout_probability,
    empty_row_policy,
    first_index,
    lengths_array,
    nonnegative_int,
    positive_int,
    positive_scale,
    real_array,
    require_finite,
    sink_array,
    softcap_value,
    window_bounds,
)
from .mods import (
    align_offset,
    array_mask,
    chunk_mask,
    column_block,
    key_length_mask,
    query_length_mask,
    softcap_score,
    window_mask,
)

__all__ = ["attention", "causal_mask", "naive_softmax", "softmax", "tiled_attention"]


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
    return align_offset(n_q, n_k, alignment(align))


def _causal_block(n_q: int, start: int, stop: int, offset: int):
    """Columns ``start:stop`` of a causal mask; never builds the full mask."""
    rows = np.arange(n_q)[:, None]
    cols = np.arange(start, stop)[None, :]
    return cols <= rows + offset


@dataclass(frozen=True)
class _Problem:
    """Validated, broadcast-ready inputs shared by every code path.

    Each option lives here once: the boolean ones as mask mods (see
    :mod:`sdpa_ref.mods`), soft-capping and the float mask as score changes,
    the sink as an extra term of the normaliser, dropout as a change of the
    probabilities. Dense and tiled, forward and backward, all call
    :meth:`logits` and :meth:`drop`.
    """

    q: np.ndarray  # broadcast to the full batch shape
    k: np.ndarray  # key/value heads repeated for grouped-query attention
    v: np.ndarray
    scale: float
    empty_rows: str
    out_shape: tuple[int, ...]
    mask_mods: tuple = ()
    softcap: float | None = None
    bias: np.ndarray | None = None  # the float mask, added to the logits
    sink: np.ndarray | None = None  # (H, 1, 1), joins each row's normaliser
    dropout_mask: np.ndarray | None = None
    dropout_scale: float = 1.0
    q_valid: np.ndarray | None = None  # (B, 1, n_q, 1) from q_lengths
    shapes: dict = field(default_factory=dict)  # the caller's q, k, v shapes

    @property
    def n_k(self) -> int:
        return self.k.shape[-2]

    @property
    def n_q(self) -> int:
        return self.q.shape[-2]

    @property
    def batch(self) -> tuple[int, ...]:
        return self.out_shape[:-2]

    def logits(self, q_scaled, k_t, start, stop, *, keep_capped=False):
        """Final logits for key columns ``start:stop``, and the capped ones.

        The order is ``attention_ref``'s (flash_attn/utils/testing.py:291-327):
        scale, soft-cap, then the boolean masks, then the float mask. A mask
        before the soft-cap would be undone by it: ``cap · tanh(-inf)`` is
        ``-cap``, not ``-inf``.
        """
        with np.errstate(over="ignore", invalid="ignore"):  # _check_row_max
            scores = np.matmul(q_scaled, k_t[..., start:stop])
        capped = None
        if self.softcap is not None:
            scores = softcap_score(scores, self.softcap)
            if keep_capped:
                capped = scores.copy()
        if self.mask_mods:
            q_idx = np.arange(self.n_q)[:, None]
            kv_idx = np.arange(start, stop)[None, :]
            allowed = self.mask_mods[0](q_idx, kv_idx)
            for mod in self.mask_mods[1:]:
                allowed = allowed & mod(q_idx, kv_idx)
            np.copyto(scores, -np.inf, where=~allowed)
        if self.bias is not None:
            scores += column_block(self.bias, np.arange(start, stop)[None, :])
        return scores, capped

    def drop(self, probs, start, stop):
        """Dropout of ``probs`` (key columns ``start:stop``): ``P ∘ mask / (1 - p)``.

        A new array; ``probs`` itself stays the weights before dropout, which
        is what FlashAttention returns (testing.py:351-360).
        """
        if self.dropout_mask is None:
            return probs
        keep = column_block(self.dropout_mask, np.arange(start, stop)[None, :])
        return np.where(keep, probs * self.dropout_scale, 0.0)

    def padded_rows(self):
        """Boolean ``(*batch, n_q)``: queries at or past ``q_lengths``."""
        if self.q_valid is None:
            return np.zeros((*self.batch, self.n_q), dtype=bool)
        return np.broadcast_to(~self.q_valid[..., 0], (*self.batch, self.n_q))


OPTION_DEFAULTS = {
    "mask": None,
    "is_causal": False,
    "scale": None,
    "empty_rows": "raise",
    "check_finite": True,
    "align": "top_left",
    "window": None,
    "sink_tokens": 0,
    "chunk": None,
    "softcap": None,
    "sink_logits": None,
    "q_lengths": None,
    "k_lengths": None,
    "dropout_mask": None,
    "dropout_p": 0.0,
}


def _prepare(
    q,
    k,
    v,
    *,
    mask=None,
    is_causal=False,
    scale=None,
    empty_rows="raise",
    check_finite=True,
    align="top_left",
    window=None,
    sink_tokens=0,
    chunk=None,
    softcap=None,
    sink_logits=None,
    q_lengths=None,
    k_lengths=None,
    dropout_mask=None,
    dropout_p=0.0,
) -> _Problem:
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    v = real_array(v, "v", min_ndim=2, dtype=np.float64)
    shapes = f"q {q.shape}, k {k.shape}, v {v.shape}"
    original = {"q": q.shape, "k": k.shape, "v": v.shape}
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

    mask = _check_mask(mask, scores_shape)
    mask_mods, q_valid = _mask_mods(
        mask,
        is_causal,
        {
            "align": align,
            "window": window,
            "sink_tokens": sink_tokens,
            "chunk": chunk,
            "q_lengths": q_lengths,
            "k_lengths": k_lengths,
        },
        (n_q, n_k, batch, shapes),
    )
    dropout_p = dropout_probability(dropout_p)
    dropout_mask = _check_dropout_mask(dropout_mask, dropout_p, scores_shape)
    return _Problem(
        q=q,
        k=k,
        v=v,
        scale=1.0 / np.sqrt(q.shape[-1]) if scale is None else positive_scale(scale),
        empty_rows=empty_row_policy(empty_rows),
        out_shape=(*batch, n_q, v.shape[-1]),
        mask_mods=mask_mods,
        softcap=softcap_value(softcap),
        bias=mask if mask is not None and mask.dtype != bool else None,
        sink=sink_array(sink_logits, batch, shapes),
        dropout_mask=dropout_mask,
        dropout_scale=1.0 / (1.0 - dropout_p),
        q_valid=q_valid,
        shapes=original,
    )


def _mask_mods(mask, is_causal, options, sizes):
    """The boolean options, checked, as a tuple of mask mods; and q_valid."""
    n_q, n_k, batch, shapes = sizes
    window = options["window"]
    align = alignment(options["align"])
    left, right = window_bounds(window)
    if is_causal:
        if right is not None and right > 0:
            raise ValueError(
                f"is_causal=True means a right window bound of 0, but window = "
                f"{window!r}; pass window=({left!r}, 0) or is_causal=False"
            )
        right = 0  # attention_ref: `if causal: window_size = (window_size[0], 0)`
    sink_tokens = nonnegative_int(options["sink_tokens"], "sink_tokens")
    if sink_tokens and left is None:
        raise ValueError(
            f"sink_tokens={sink_tokens} exempts keys from the window's left bound, "
            f"but there is none (window = {window!r}); pass window=(left, right)"
        )
    chunk = options["chunk"]
    chunk = None if chunk is None else positive_int(chunk, "chunk")
    q_lengths = lengths_array(options["q_lengths"], "q_lengths", n_q, batch, shapes)
    k_lengths = lengths_array(options["k_lengths"], "k_lengths", n_k, batch, shapes)
    offset = align_offset(n_q, n_k, align, q_lengths, k_lengths)
    mask_mods = []
    if mask is not None and mask.dtype == bool:
        mask_mods.append(array_mask(mask))
    if left is not None or right is not None:
        mask_mods.append(window_mask(left, right, sink_tokens, offset))
    if chunk is not None:
        mask_mods.append(chunk_mask(chunk, offset))
    if k_lengths is not None:
        mask_mods.append(key_length_mask(k_lengths))
    q_valid = None
    if q_lengths is not None:
        mask_mods.append(query_length_mask(q_lengths))
        q_valid = np.arange(n_q)[:, None] < q_lengths.reshape(-1, 1, 1, 1)
    return tuple(mask_mods), q_valid


def _check_dropout_mask(dropout_mask, dropout_p, scores_shape):
    if dropout_mask is None:
        if dropout_p > 0:
            raise ValueError(
                f"dropout_p={dropout_p} needs the dropout_mask that the kernel drew "
                f"(bool, True = keep, broadcastable to {scores_shape}); sdpa_ref "
                f"draws no random numbers"
            )
        return None
    mask = np.asarray(dropout_mask)
    if mask.dtype != bool:
        raise TypeError(
            f"dropout_mask must be boolean (True = keep), got dtype {mask.dtype} "
            f"(shape {mask.shape})"
        )
    if not _broadcasts_to(mask.shape, scores_shape):
        raise ValueError(
            f"dropout_mask with shape {mask.shape} does not broadcast to the "
            f"scores' shape {scores_shape} (..., n_q, n_k)"
        )
    if dropout_p == 0:
        raise ValueError(
            "a dropout_mask with dropout_p=0 drops entries without rescaling the "
            "rest; pass the dropout_p that the mask was drawn with"
        )
    return mask


def _broadcasts_to(shape, target):
    """Whether an array of ``shape`` broadcasts to exactly ``target``."""
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


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
    if not _broadcasts_to(mask.shape, scores_shape):
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
    return_weights=False,
    return_lse=False,
    **options,
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
        attend". Floating: added to the logits, ``-inf`` forbids.
    is_causal : bool
        Query ``i`` sees keys ``j <= i'`` (a right window bound of 0); top-left
        aligned by default, as PyTorch. Combines with ``mask``.
    scale : float, optional
        Multiplies ``q kᵀ``. ``None`` means ``1 / sqrt(d_k)``; ``scale=1.0``
        is unscaled attention.
    empty_rows : {"raise", "zero", "nan"}
        What a query with no allowed key gets: an error naming the row, an
        output (and weights) of 0 as PyTorch 2.5+ and FlashAttention give,
        or NaN, the textbook softmax of an all ``-inf`` row.
    check_finite : bool
        Reject NaN and infinity in q, k and v, as SciPy does.
    align : {"top_left", "bottom_right"}
        Where query ``i``'s diagonal lies, for ``is_causal``, ``window`` and
        ``chunk``: at key ``i`` (PyTorch's ``is_causal``), or at key ``i +
        n_k - n_q`` (FlashAttention), from each batch entry's true lengths
        when ``q_lengths`` or ``k_lengths`` are given.
    window : (int or None, int or None), optional
        ``(left, right)``: query ``i`` sees keys ``i' - left <= j <= i' +
        right``, ``i'`` being ``i`` aligned; None leaves a side unbounded.
        FlashAttention's ``window_size``, with None for its -1.
    sink_tokens : int
        The first ``sink_tokens`` keys are exempt from the window's left bound
        (StreamingLLM). Needs a left bound.
    chunk : int, optional
        Query ``i`` sees only the keys of its own chunk of ``chunk`` keys,
        after alignment (Llama 4; FlashAttention's ``attention_chunk``).
    softcap : float, optional
        Logits become ``softcap · tanh(logits / softcap)`` after the scale and
        before the masks and a float ``mask`` (Gemma 2).
    sink_logits : array_like, shape (H,), optional
        One logit per query head that joins each row's softmax normaliser
        without a value (gpt-oss). A row whose keys are all masked then gets
        weights and output 0, whatever ``empty_rows`` says.
    q_lengths, k_lengths : array_like of int, shape (B,), optional
        For 4-D inputs ``(B, H, n, d)``: keys at or past ``k_lengths[b]`` are
        never attended; queries at or past ``q_lengths[b]`` give output,
        weights and gradients 0 and a log-sum-exp of ``-inf``.
    dropout_mask : array_like of bool, optional
        True = keep; broadcastable to ``(..., n_q, n_k)``. The output is
        ``(P ∘ dropout_mask) v / (1 - dropout_p)``; the weights returned are
        ``P`` before dropout, as FlashAttention returns them.
    dropout_p : float
        The dropout probability in [0, 1) that ``dropout_mask`` was drawn
        with. sdpa_ref draws no random numbers, so ``dropout_p > 0`` needs a
        mask.
    return_weights : bool
        Also return the attention weights, shape ``(..., n_q, n_k)``.
    return_lse : bool
        Also return each row's log-sum-exp, shape ``(..., n_q)``, natural log,
        over the final logits and the sink; ``-inf`` for an empty row.

    Returns
    -------
    numpy.ndarray or tuple
        The output, shape ``(..., n_q, d_v)``, float64; then the weights if
        ``return_weights``, then the log-sum-exp if ``return_lse``.

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

    A window of one key to the left, bottom-right aligned, as a decoding step
    of FlashAttention sees it: the last query reads the last two keys.

    >>> _, w = attention(Q[:1], K, V, window=(1, 0), align="bottom_right",
    ...                  return_weights=True)
    >>> w.round(3)
    array([[0.   , 0.   , 0.953, 0.047]])
    """
    p = _prepare(q, k, v, **options)
    out, weights, lse = _dense_forward(p, return_weights)
    return _results(out, weights, lse, return_weights, return_lse)


def _results(out, weights, lse, return_weights, return_lse):
    for flag, name in ((return_weights, "return_weights"), (return_lse, "return_lse")):
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    extra = [a for a, flag in ((weights, return_weights), (lse, return_lse)) if flag]
    return (out, *extra) if extra else out


def _dense_forward(p: _Problem, want_weights: bool):
    """Output, weights (or None) and log-sum-exp, all keys at once."""
    with np.errstate(over="ignore", invalid="ignore"):  # _check_row_max reports it
        # Scaling q (n_q x d_k numbers) instead of the scores (n_q x n_k)
        # saves a whole pass over the largest array.
        q_scaled = p.q * p.scale
    scores, _ = p.logits(q_scaled, np.swapaxes(p.k, -1, -2), 0, p.n_k)
    row_max = scores.max(axis=-1, keepdims=True)
    _check_row_max(row_max)
    if p.sink is not None:
        # attention_ref's `logits_or_sinks_max` (testing.py:332-336).
        row_max = np.maximum(row_max, p.sink)
    no_logit = np.isneginf(row_max)
    row_max[no_logit] = 0.0  # exp(-inf - 0) = 0 rather than NaN
    # In place from here on: no second n_q x n_k temporary.
    scores -= row_max
    np.exp(scores, out=scores)
    norm = scores.sum(axis=-1, keepdims=True)
    if p.sink is not None:
        norm += np.exp(p.sink - row_max)
    with np.errstate(divide="ignore"):
        lse = (row_max + np.log(norm))[..., 0]
    empty = _empty_rows(p, lse)
    norm[norm == 0] = 1.0  # empty or padded rows: their exps are all 0
    if p.dropout_mask is None:
        out = np.matmul(scores, p.v)
        out /= norm
        if want_weights:
            scores /= norm
    else:
        scores /= norm
        out = np.matmul(p.drop(scores, 0, p.n_k), p.v)
    weights = scores if want_weights else None
    if empty is not None:
        _fill_empty([a for a in (out, weights) if a is not None], empty, p.empty_rows)
    return out, weights, lse


def _empty_rows(p: _Problem, lse):
    """Rows with no key and no sink, after padded queries get lse = -inf.

    Returns None if there are none, else the boolean ``(*batch, n_q)`` array;
    raises under ``empty_rows="raise"``. Padded queries are not empty rows:
    they are not there.
    """
    padded = p.padded_rows()
    if padded.any():
        lse[padded] = -np.inf
    if p.sink is not None:
        return None
    empty = np.isneginf(lse) & ~padded
    if not empty.any():
        return None
    if p.empty_rows == "raise":
        raise _empty_row_error(empty)
    return empty


def tiled_attention(
    q,
    k,
    v,
    *,
    block_size=128,
    return_lse=False,
    **options,
):
    """Attention over key/value blocks with an online softmax, as FlashAttention.

    The result equals :func:`attention` to about 1e-12 in float64, but no more
    than ``n_q x block_size`` scores (per batch entry) exist at any time. For
    each block of keys, the running row maximum ``m`` is updated, the running
    sum ``l`` and the output accumulator are rescaled by ``exp(m_old - m_new)``,
    and the block's contribution is added. Every mask is built one block at a
    time; a sink starts the running maximum and sum at ``(sink, 1)``.

    Parameters
    ----------
    q, k, v
        As for :func:`attention`.
    block_size : int
        Keys per block, at least 1.
    return_lse : bool
        Also return each row's log-sum-exp, ``m + log l``, as FlashAttention's
        forward saves it for the backward pass.
    **options
        ``mask``, ``is_causal``, ``scale``, ``empty_rows``, ``check_finite``,
        ``align``, ``window``, ``sink_tokens``, ``chunk``, ``softcap``,
        ``sink_logits``, ``q_lengths``, ``k_lengths``, ``dropout_mask``,
        ``dropout_p``: as for :func:`attention`.

    Returns
    -------
    numpy.ndarray or tuple
        The output, shape ``(..., n_q, d_v)``, float64; with ``return_lse``,
        the pair ``(output, lse)``.

    Examples
    --------
    >>> from sdpa_ref import example
    >>> Q, K, V = example.vectors(64)
    >>> dense = attention(Q, K, V)
    >>> tiled = tiled_attention(Q, K, V, block_size=3)
    >>> bool(np.abs(dense - tiled).max() < 1e-12)
    True
    """
    p = _prepare(q, k, v, **options)
    block_size = positive_int(block_size, "block_size")
    batch = p.batch
    if p.sink is None:
        running_max = np.full((*batch, p.n_q, 1), -np.inf)
        running_sum = np.zeros((*batch, p.n_q, 1))
    else:
        # The sink is a key with logit s_h and no value: fold it in first.
        running_max = np.broadcast_to(p.sink, (*batch, p.n_q, 1)).copy()
        running_sum = np.ones((*batch, p.n_q, 1))
    acc = np.zeros(p.out_shape)
    k_t = np.swapaxes(p.k, -1, -2)
    with np.errstate(over="ignore", invalid="ignore"):
        q_scaled = p.q * p.scale
    for start in range(0, p.n_k, block_size):
        stop = min(start + block_size, p.n_k)
        scores, _ = p.logits(q_scaled, k_t, start, stop)
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
        acc += np.matmul(p.drop(scores, start, stop), p.v[..., start:stop, :])
        running_max = new_max
    with np.errstate(divide="ignore"):
        shift = np.where(np.isneginf(running_max), 0.0, running_max)
        lse = (shift + np.log(running_sum))[..., 0]
    empty = _empty_rows(p, lse)
    running_sum[running_sum == 0] = 1.0
    acc /= running_sum
    if empty is not None:
        _fill_empty((acc,), empty, p.empty_rows)
    return _results(acc, None, lse, False, return_lse)
