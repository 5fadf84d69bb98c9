"""Masks beyond the causal one, and what each convention does to an empty row."""

from __future__ import annotations

import numpy as np

from ._checks import nonnegative_int, positive_int
from ._options import Options
from .core import attention, prepare, softmax
from .mods import create_mask, sliding_window
from .published import (  # the published numbers this module uses or names
    D2L_FILL_EXPONENT,
    MISTRAL_7B_KV,
    OLMO_2_7B_HIDDEN,
    OLMO_2_7B_KV,
    TUTORIAL_FILL,
    TUTORIAL_FILL_EXPONENT,
)
from .random_model import SEED

__all__ = [
    "D2L_FILL_EXPONENT",
    "MISTRAL_7B_KV",
    "OLMO_2_7B_HIDDEN",
    "OLMO_2_7B_KV",
    "TUTORIAL_FILL",
    "TUTORIAL_FILL_EXPONENT",
    "agreement_text",
    "as_logits",
    "count_pairs",
    "empty_row_outcomes",
    "fill_text",
    "kv_cache_tokens",
    "masked_fill_attention",
    "padding_gap",
    "padding_mask",
    "pooled_outputs",
    "sliding_window_mask",
    "unmask_empty_rows",
    "window_pairs",
]


def padding_mask(lengths, n):
    """Boolean key mask for a batch of sequences padded to length ``n``.

    Returns shape ``(batch, 1, n)``: it broadcasts over the queries, and key
    ``j`` of sequence ``b`` is allowed when ``j < lengths[b]``.

    Examples
    --------
    >>> padding_mask([3, 1], 4).astype(int)
    array([[[1, 1, 1, 0]],
    <BLANKLINE>
           [[1, 0, 0, 0]]])
    """
    n = positive_int(n, "n")
    lengths = np.asarray(lengths)
    valid = lengths.ndim == 1 and lengths.dtype.kind in "iu"
    if not valid or (lengths < 0).any() or (lengths > n).any():
        raise ValueError(f"lengths must be integers in 0..{n}, got {lengths.tolist()}")
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :]


def fill_text(exponent=TUTORIAL_FILL_EXPONENT):
    """The fill ``-10**exponent`` as text, with a real minus sign and a superscript.

    Examples
    --------
    >>> fill_text()
    '−10⁹'
    >>> fill_text(12)
    '−10¹²'
    """
    exponent = positive_int(exponent, "exponent")
    return "\u221210" + str(exponent).translate(
        str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
    )


def kv_cache_tokens(n, window=None):
    """Positions whose keys and values a decoder's cache holds after ``n`` tokens.

    A full cache keeps every position, ``n``. A rolling buffer for a sliding
    window of ``window`` tokens stores position ``i`` in slot ``i % window``
    and overwrites the oldest, so it stops growing at ``window`` (Mistral 7B).

    Examples
    --------
    >>> kv_cache_tokens(8192), kv_cache_tokens(8192, window=4096)
    (8192, 4096)
    >>> kv_cache_tokens(1000, window=4096)
    1000
    """
    n = positive_int(n, "n")
    if window is None:
        return n
    return min(n, positive_int(window, "window"))


def sliding_window_mask(n, left):
    """Causal sliding window: query ``i`` sees itself and the ``left`` keys before it.

    Keys ``i - left`` to ``i``, ``left + 1`` of them: the mask of
    ``sdpa_ref.attention(q, k, v, window=(left, 0))`` on ``n`` tokens, as
    FlashAttention's ``window_size=(left, 0)``. ``left`` counts the keys to
    the query's left, not the query itself.

    Examples
    --------
    >>> sliding_window_mask(4, 1).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    n = positive_int(n, "n")
    left = nonnegative_int(left, "left")
    return create_mask(sliding_window(left, 0), None, None, n, n)[0, 0]


def masked_fill_attention(q, k, v, mask, fill=TUTORIAL_FILL):
    """Attention as the Annotated Transformer writes it: masked logits set to ``fill``.

    ``scores.masked_fill(mask == 0, -1e9)`` (the Annotated Transformer's
    code) puts the same finite number in
    every forbidden place. In a row with allowed keys that number is so low
    that those keys get weight 0; in a row with **no** allowed key every
    logit equals ``fill``, and the softmax spreads the weight evenly over
    keys that were all supposed to be invisible.

    Examples
    --------
    >>> q = np.zeros((1, 2)); k = np.ones((3, 2)); v = np.eye(3)
    >>> masked_fill_attention(q, k, v, np.array([[False, False, False]])).round(3)
    array([[0.333, 0.333, 0.333]])
    """
    mask = np.asarray(mask, dtype=bool)
    # The same checks of q, k, v and the mask as attention makes, nothing computed.
    p = prepare(q, k, v, Options(mask=mask, empty_rows="raise", check_finite=True))
    scores = np.matmul(p.q * p.scale, np.swapaxes(p.k, -1, -2))
    return softmax(np.where(mask, scores, fill)) @ p.v


def unmask_empty_rows(mask):
    """Allow every key to the queries that were allowed none.

    Rows with at least one allowed key are returned unchanged; a row with no
    allowed key becomes all ``True``, so that query attends to every key with
    its ordinary scores. Hugging Face transformers 4.46.3 treats such rows
    this way before calling PyTorch's ``scaled_dot_product_attention``
    (``AttentionMaskConverter._unmask_unattended``); its later mask code
    does so only for PyTorch older than 2.5.

    Examples
    --------
    >>> unmask_empty_rows([[True, False], [False, False]]).astype(int)
    array([[1, 0],
           [1, 1]])
    """
    mask = np.asarray(mask, dtype=bool)
    return mask | ~mask.any(axis=-1, keepdims=True)


def empty_row_outcomes(q, k, v, mask):
    """The four answers in use for queries with no allowed key, side by side.

    Returns
    -------
    dict of numpy.ndarray
        ``"nan"`` (the textbook softmax of an all ``-inf`` row),
        ``"uniform"`` (masked logits replaced by -1e9, as in the Annotated
        Transformer: equal weights on the forbidden keys), ``"unmask"`` (the
        row's mask lifted by :func:`unmask_empty_rows`: the forbidden keys
        weighted by their scores) and ``"zero"`` (PyTorch's math backend and
        CUDA memory-efficient kernel from 2.5, FlashAttention). Rows with an
        allowed key are the same in all four.

    Examples
    --------
    >>> q = np.zeros((2, 2)); k = np.ones((2, 2)); v = np.array([[1.0], [3.0]])
    >>> mask = np.array([[True, True], [False, False]])
    >>> outcomes = empty_row_outcomes(q, k, v, mask)
    >>> {name: out[:, 0].tolist() for name, out in outcomes.items()}
    {'nan': [2.0, nan], 'uniform': [2.0, 2.0], 'unmask': [2.0, 2.0], 'zero': [2.0, 0.0]}
    """
    return {
        "nan": attention(q, k, v, mask=mask, empty_rows="nan"),
        "uniform": masked_fill_attention(q, k, v, mask),
        "unmask": attention(q, k, v, mask=unmask_empty_rows(mask)),
        "zero": attention(q, k, v, mask=mask, empty_rows="zero"),
    }


def count_pairs(mask):
    """How many query-key pairs a mask keeps, and the fraction of all pairs.

    Examples
    --------
    >>> count_pairs(sliding_window_mask(4, 1))
    (7, 0.4375)
    """
    mask = np.asarray(mask, dtype=bool)
    kept = int(mask.sum())
    return kept, kept / mask.size


def pooled_outputs(outcomes, keep=None):
    """Each convention's outputs averaged over queries: one pooled vector each.

    Pooling is a typical next step (a classifier head, a loss). Without
    ``keep`` it is the plain mean over all queries: the empty rows count in
    the denominator whatever they hold, so "zero" adds nothing to the sum
    but still shrinks the mean. With ``keep``, a boolean per query, it is the
    mask-aware mean ``sum(out * keep) / sum(keep)`` over the queries that saw
    a key; NaN survives even that, because ``nan * 0`` is NaN.

    Examples
    --------
    >>> rows = {"nan": [[1.0], [np.nan]], "zero": [[1.0], [0.0]]}
    >>> {name: p.tolist() for name, p in pooled_outputs(rows).items()}
    {'nan': [nan], 'zero': [0.5]}
    >>> {k: p.tolist() for k, p in pooled_outputs(rows, [True, False]).items()}
    {'nan': [nan], 'zero': [1.0]}
    """
    if keep is not None:
        keep = np.asarray(keep, dtype=np.float64)[:, None]
    pooled = {}
    for name, rows in outcomes.items():
        out = np.asarray(rows, dtype=np.float64)
        if keep is None:
            pooled[name] = out.mean(axis=-2)
        else:
            pooled[name] = (out * keep).sum(axis=-2) / keep.sum()
    return pooled


def agreement_text(gap):
    """How two computations agree, in words: exactly, or to within ``gap``.

    Examples
    --------
    >>> agreement_text(0.0)
    'bit for bit'
    >>> agreement_text(2.2e-16)
    'to within 2.2e-16'
    """
    gap = float(gap)
    if gap < 0 or np.isnan(gap):
        raise ValueError(f"gap must be a nonnegative number, got {gap}")
    return "bit for bit" if gap == 0 else f"to within {gap:.1e}"


def window_pairs(lengths, left):
    """Pairs a causal sliding window keeps, against full causal attention.

    The window is :func:`sliding_window_mask`'s: each query sees itself and
    the ``left`` keys before it.

    Returns
    -------
    list of dict
        ``n``, ``causal`` (``n (n + 1) / 2`` pairs), ``window`` (pairs kept)
        and ``fraction`` (kept over causal).

    Examples
    --------
    >>> window_pairs([4], 1)
    [{'n': 4, 'causal': 10, 'window': 7, 'fraction': 0.7}]
    """
    left = nonnegative_int(left, "left")
    rows = []
    for length in lengths:
        n = positive_int(int(length), "lengths")
        causal = n * (n + 1) // 2
        # Query i drops the i - left keys before its window, when i > left.
        dropped = (n - left - 1) * (n - left) // 2 if n > left else 0
        kept = causal - dropped
        rows.append(
            {"n": n, "causal": causal, "window": kept, "fraction": kept / causal}
        )
    return rows


def as_logits(mask):
    """A boolean mask as the logits it adds: 0 where allowed, ``-inf`` where not.

    Examples
    --------
    >>> as_logits([True, False])
    array([  0., -inf])
    """
    return np.where(np.asarray(mask, dtype=bool), 0.0, -np.inf)


def padding_gap(lengths, n, d=4, *, seed=SEED):
    """Padded batch attention against each sequence computed alone, unpadded.

    Returns the largest absolute difference, over all sequences, between the
    outputs of a sequence's real queries in the padded batch (with
    :func:`padding_mask`) and the same queries attending to the unpadded keys
    alone. Zero up to rounding: the mask makes padding invisible.

    Examples
    --------
    >>> padding_gap([5, 3], 5) < 1e-15
    True
    """
    mask = padding_mask(lengths, n)
    rng = np.random.default_rng((seed, n))
    q, k, v = (rng.standard_normal((len(lengths), n, d)) for _ in range(3))
    padded = attention(q, k, v, mask=mask)
    gaps = [
        np.abs(padded[b] - attention(q[b], k[b, :length], v[b, :length])).max()
        for b, length in enumerate(lengths)
    ]
    return float(max(gaps))
