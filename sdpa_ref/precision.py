"""Softmax in low precision: naive against max-subtracted, with bfloat16 simulated."""

from __future__ import annotations

import numpy as np

from ._arrays import FORMATS
from ._checks import positive_int, real_array
from .core import softmax

__all__ = [
    "ACCUMULATE",
    "BFLOAT16_MAX",
    "DTYPES",
    "decimal_digits",
    "equal_row_weights",
    "min_fill_logits",
    "min_fill_regimes",
    "min_fill_weights",
    "most_negative",
    "precision_sweep",
    "relative_rounding_bound",
    "significand_bits",
    "smallest_normal",
    "softmax_error",
    "softmax_in",
    "stable_error_in_units",
    "to_bfloat16",
    "unit_roundoff",
]

#: The largest finite bfloat16, with 8 bits of significand and float32's exponents.
BFLOAT16_MAX = (2 - 2**-7) * 2.0**127

#: The precisions the site compares, narrowest first.
DTYPES = ("float16", "bfloat16", "float32")

#: Where :func:`softmax_in` keeps its intermediates. ``None`` rounds every
#: step to the type itself (a pessimistic model), ``"float32"`` keeps them in
#: float32 and rounds only the weights, close to what fused kernels do.
ACCUMULATE = (None, "float32")


def significand_bits(dtype):
    """Significant bits of a floating-point type: the stored fraction bits plus one.

    The leading 1 of a normal number is implicit, so float16 (10 stored
    bits) has 11, bfloat16 (7 stored) has 8 and float32 (23 stored) has 24.

    Examples
    --------
    >>> [significand_bits(t) for t in ("float16", "bfloat16", "float32", "float64")]
    [11, 8, 24, 53]
    """
    return FORMATS[_name(dtype)].bits


def decimal_digits(dtype):
    """Decimal digits a type carries: ``significand_bits * log10(2)``.

    Examples
    --------
    >>> round(decimal_digits("float16"), 2), round(decimal_digits("bfloat16"), 2)
    (3.31, 2.41)
    """
    return float(significand_bits(dtype) * np.log10(2.0))


def unit_roundoff(dtype):
    """Unit roundoff ``u = 2**-p`` of a type with ``p`` significant bits.

    Rounding to nearest changes a number by a relative amount of at most
    ``u``: ``2**-11`` in float16, ``2**-8`` in bfloat16, ``2**-24`` in float32.

    Examples
    --------
    >>> [unit_roundoff(t) == 2.0**-b for t, b in [("float16", 11), ("bfloat16", 8)]]
    [True, True]
    >>> f"{unit_roundoff('float32'):.2e}"
    '5.96e-08'
    """
    return 2.0 ** -significand_bits(dtype)


def _name(dtype):
    """A type's name in :data:`sdpa_ref._arrays.FORMATS` (bfloat16 is not NumPy's)."""
    return dtype if dtype == "bfloat16" else np.dtype(dtype).name


def _min_exponent(dtype):
    """The exponent of a type's smallest normal number: -14 in float16."""
    return FORMATS[_name(dtype)].min_exponent


def smallest_normal(dtype):
    """The smallest positive normal number of a type, ``2**emin``.

    Below it lie the subnormal numbers, evenly spaced all the way to zero.

    Examples
    --------
    >>> f"{smallest_normal('float16'):.3e}", f"{smallest_normal('bfloat16'):.3e}"
    ('6.104e-05', '1.175e-38')
    >>> smallest_normal("float32") == float(np.finfo(np.float32).smallest_normal)
    True
    """
    return 2.0 ** _min_exponent(dtype)


def relative_rounding_bound(x, dtype, *, in_units=False):
    """How far, relative to ``|x|``, rounding ``x`` to nearest in ``dtype`` may move it.

    Half the spacing of the type's numbers at ``x``, divided by ``|x|``. In
    the normal range this is at most the unit roundoff ``u``
    (:func:`unit_roundoff`), and exactly ``u`` at a power of two. Below the
    smallest normal number (:func:`smallest_normal`) the spacing stays at
    that of the smallest normals, so the bound grows as ``x`` shrinks.

    Parameters
    ----------
    x : float
        A positive or negative finite number, not zero.
    dtype : str
        ``"float16"``, ``"bfloat16"``, ``"float32"`` or ``"float64"``.
    in_units : bool, optional
        Give the bound in units of ``u`` rather than as a fraction.

    Examples
    --------
    The weight ``e⁻¹² / (1 + e⁻¹²)`` is a float16 subnormal: rounding can
    move a number that small by about ten units of float16's ``u``.

    >>> w = float(np.exp(-12) / (1 + np.exp(-12)))
    >>> f"{relative_rounding_bound(w, 'float16'):.2e}"
    '4.85e-03'
    >>> round(relative_rounding_bound(w, "float16", in_units=True), 1)
    9.9
    >>> relative_rounding_bound(1.0, "float16", in_units=True)  # normal: at most u
    1.0
    """
    value = abs(float(x))
    if not np.isfinite(value) or value == 0.0:
        raise ValueError(f"x must be finite and not zero, got {x!r}")
    p = significand_bits(dtype)
    exponent = max(int(np.floor(np.log2(value))), _min_exponent(dtype))
    bound = 2.0 ** (exponent - p) / value
    return bound / unit_roundoff(dtype) if in_units else bound


def to_bfloat16(x):
    """Round to the nearest bfloat16 (ties to even), returned as float32.

    bfloat16 keeps float32's 8 exponent bits and 7 of its 23 fraction bits:
    the same range, but 8 significant bits (the 7 stored and the implicit
    leading one), about 2 to 3 significant decimal digits. NumPy has no such
    type, so the value is rounded and stored in a float32.

    Examples
    --------
    >>> to_bfloat16(np.float32(1.0 + 2**-8))  # halfway: ties to the even 1.0
    array(1., dtype=float32)
    >>> float(to_bfloat16(np.float32(3.14159)))
    3.140625
    """
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = bits.astype(np.uint32).view(np.float32)
    return np.where(nan, np.float32(np.nan), out)


def _caster(dtype):
    """The function that rounds an array to ``dtype`` (bfloat16 simulated)."""
    if dtype == "bfloat16":
        return to_bfloat16

    def cast(a):
        return np.asarray(a).astype(dtype)

    return cast


def _sum_in(e, cast):
    """Row sums along the last axis, rounded to the type after every addition.

    NumPy's own ``sum`` of a float16 array adds in float32 internally and
    rounds once; this adds one term at a time and rounds each partial sum, so
    that nothing is accumulated in a wider type.
    """
    total = cast(np.zeros((*e.shape[:-1], 1), dtype=np.float32))
    for j in range(e.shape[-1]):
        total = cast(total + e[..., j : j + 1])
    return total


def _pairwise_sum_in(e, cast):
    """Row sums along the last axis by halving, each partial sum rounded to the type.

    The two halves of a row are summed separately and then added, down to
    single terms: the rounding errors grow like ``log2(n)`` instead of ``n``.
    """
    n = e.shape[-1]
    if n == 1:
        return cast(e)
    half = n // 2
    return cast(
        _pairwise_sum_in(e[..., :half], cast) + _pairwise_sum_in(e[..., half:], cast)
    )


def softmax_in(x, dtype, *, stable=True, accumulate=None):
    """Softmax with its intermediates rounded to ``dtype``, as float64.

    ``stable`` subtracts the row maximum first. Overflow is not an error
    here: it is what the naive version is meant to show, as ``inf`` or
    ``nan``.

    With ``accumulate=None`` (the default) every step is rounded to
    ``dtype``: the logits, the shifted logits, each exponential, every
    partial sum of the row (one term at a time) and each weight. It is a
    pessimistic model of an implementation with no wider accumulator, not a
    bound: a pairwise sum, for one, does better. For ``"bfloat16"`` each step
    is computed in float32 and its result rounded to bfloat16.

    With ``accumulate="float32"`` the logits, exponentials, sum and division
    stay in float32 and only the weights are rounded to ``dtype``. Fused
    kernels such as FlashAttention come close: they keep scores, row maxima
    and sums in float32, round the exponentials to 16 bits before the product
    with V and divide by the row sum afterwards.

    Examples
    --------
    >>> softmax_in([12.0, 0.0], "float16", stable=False)
    array([nan,  0.])
    >>> softmax_in([12.0, 0.0], "float16").round(4)
    array([1., 0.])

    Four thousand equal logits: a float16 running sum stops growing at 2048,
    so every weight comes out twice too large unless the sum is kept in
    float32.

    >>> float(softmax_in(np.zeros(4096), "float16")[0]) * 4096
    2.0
    >>> float(softmax_in(np.zeros(4096), "float16", accumulate="float32")[0]) * 4096
    1.0
    """
    x = real_array(x, "x", min_ndim=1, dtype=np.float64)
    if dtype not in (*DTYPES, "float64"):
        raise ValueError(f"dtype must be one of {(*DTYPES, 'float64')}, got {dtype!r}")
    if accumulate not in ACCUMULATE:
        raise ValueError(f"accumulate must be one of {ACCUMULATE}, got {accumulate!r}")
    cast = _caster(dtype)
    inner = cast if accumulate is None else _caster(accumulate)
    with np.errstate(over="ignore", invalid="ignore"):
        z = inner(x)
        if stable:
            z = inner(z - z.max(axis=-1, keepdims=True))
        e = inner(np.exp(z))
        if accumulate is None:
            total = _sum_in(e, inner)
        else:
            total = inner(e.sum(axis=-1, keepdims=True))
        w = cast(inner(e / total))
    return w.astype(np.float64)


def equal_row_weights(n, dtype):
    """The weight each of ``n`` equal logits gets, three ways.

    Every key of such a row deserves exactly ``1 / n``. Returns a dict with
    ``"exact"`` (that value), ``"in_type"`` (the weight from
    :func:`softmax_in` with every step in ``dtype``), ``"in_type_sum"`` (the
    row sum of the ``n`` exponentials, each ``1``, as that computation
    accumulates it, one term at a time), ``"pairwise_sum"`` (the same ones
    summed pairwise, every partial sum still rounded to ``dtype``),
    ``"float32"`` (the weight with float32 accumulation) and
    ``"in_type_total"``, the sum of the ``in_type`` weights, which should
    be 1.

    A running sum of ones in a narrow type stops growing once the spacing of
    the type reaches 2: adding 1 then lands exactly halfway, and the tie
    rounds to the even neighbour, the sum itself. That happens at 2048 in
    float16 (11 significant bits) and at 256 in bfloat16 (8 bits). Summed
    pairwise, 4096 ones are exact even in float16: every partial sum is a
    power of two.

    Examples
    --------
    >>> row = equal_row_weights(300, "bfloat16")
    >>> row["in_type"], row["in_type_sum"]
    (0.00390625, 256.0)
    >>> equal_row_weights(4096, "float16")["pairwise_sum"]
    4096.0
    >>> round(row["float32"], 6), round(row["in_type_total"], 2)
    (0.003326, 1.17)
    """
    n = positive_int(n, "n")
    logits = np.zeros(n)
    in_type = softmax_in(logits, dtype)
    cast = _caster(dtype)
    return {
        "exact": 1.0 / n,
        "in_type": float(in_type[0]),
        "in_type_sum": float(_sum_in(cast(np.ones((1, n))), cast)[0, 0]),
        "pairwise_sum": float(_pairwise_sum_in(cast(np.ones((1, n))), cast)[0, 0]),
        "float32": float(softmax_in(logits, dtype, accumulate="float32")[0]),
        "in_type_total": float(in_type.sum()),
    }


def softmax_error(x, dtype, *, stable=True, accumulate=None):
    """Largest absolute error of :func:`softmax_in` against float64, or ``nan``.

    ``nan`` means the result was not finite: the computation broke down.
    ``stable`` and ``accumulate`` are passed on to :func:`softmax_in`.

    Examples
    --------
    >>> float(softmax_error([100.0, 0.0], "float32", stable=False))
    nan
    >>> softmax_error([100.0, 0.0], "float32") < 1e-7
    True

    Logits of 1000 and 999 are one bfloat16 step apart only if they stay in
    float32 until the weights are rounded:

    >>> round(softmax_error([1000.0, 999.0], "bfloat16"), 3)
    0.231
    >>> softmax_error([1000.0, 999.0], "bfloat16", accumulate="float32") < 1e-2
    True
    """
    got = softmax_in(x, dtype, stable=stable, accumulate=accumulate)
    if not np.isfinite(got).all():
        return float("nan")
    return float(np.abs(got - softmax(np.asarray(x, dtype=np.float64))).max())


def precision_sweep(top_logits, gaps=(0.0, -1.0, -100.0, -103.0), *, accumulate=None):
    """Softmax errors in each precision as the logits grow.

    Each row of scores is ``top + gaps``: a leader, a runner-up one behind,
    and two far behind. For each top logit, the error of the naive and of
    the max-subtracted softmax in each of :data:`DTYPES`, against float64.
    ``accumulate`` is passed on to :func:`softmax_in`: by default every step
    is rounded to the type.

    Returns
    -------
    list of dict
        ``top``, and ``(dtype, "naive" | "stable")`` to the largest absolute
        error, ``nan`` where the result was not finite.

    Examples
    --------
    >>> row = precision_sweep([50.0])[0]
    >>> bool(np.isnan(row[("float16", "naive")])), row[("float16", "stable")] < 1e-3
    (True, True)
    >>> kept = precision_sweep([1000.0], accumulate="float32")[0]
    >>> round(kept[("bfloat16", "stable")], 5)
    0.00059
    """
    rows = []
    for top in top_logits:
        scores = float(top) + np.asarray(gaps, dtype=np.float64)
        row = {"top": float(top)}
        for dtype in DTYPES:
            row[(dtype, "naive")] = softmax_error(
                scores, dtype, stable=False, accumulate=accumulate
            )
            row[(dtype, "stable")] = softmax_error(scores, dtype, accumulate=accumulate)
        rows.append(row)
    return rows


def stable_error_in_units(rows):
    """The largest max-subtracted error of a sweep, in units of roundoff.

    For rows of :func:`precision_sweep`, the largest ``error / u`` of the
    ``"stable"`` entries over all rows and :data:`DTYPES`, with ``u`` from
    :func:`unit_roundoff`.

    Examples
    --------
    >>> stable_error_in_units(precision_sweep([5.0, 10.0])) < 2
    True
    >>> stable_error_in_units(precision_sweep([1000.0])) > 50
    True
    """
    return max(
        row[(dtype, "stable")] / unit_roundoff(dtype)
        for row in rows
        for dtype in DTYPES
    )


def most_negative(dtype):
    """The most negative finite number of a type: ``finfo(dtype).min``.

    Examples
    --------
    >>> most_negative("float16"), most_negative("bfloat16") == -BFLOAT16_MAX
    (-65504.0, True)
    """
    if dtype == "bfloat16":
        return -BFLOAT16_MAX
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return float(np.finfo(dtype).min)


def min_fill_logits(scores, dtype):
    """What a forbidden key's logit becomes when the mask's fill is *added*.

    A mask that holds 0 for allowed keys and :func:`most_negative` of the
    model's type for forbidden ones, added to the scores in that type, gives
    a forbidden key the logit ``score + most_negative(dtype)``, rounded to
    the type: -inf when the sum overflows. The scores are rounded to the type
    first, as a model in that type computes them. Returned as float64.

    The sum of two such numbers is exact in float64 wherever the rounding
    could matter, so rounding it once to the type gives the correctly
    rounded sum; for bfloat16 the float64 sum goes through float32, which is
    exact there too.

    Examples
    --------
    In float16 the fill is -65504 and its neighbours lie 32 apart:

    >>> min_fill_logits([-20.0, -15.0, 15.0, 20.0], "float16")
    array([   -inf, -65504., -65504., -65472.])
    """
    fill = most_negative(dtype)  # also rejects an unknown dtype
    cast = _caster(dtype)
    scores = real_array(scores, "scores", dtype=np.float64)
    with np.errstate(over="ignore"):
        exact = fill + np.asarray(cast(scores), dtype=np.float64)
        return np.asarray(cast(exact), dtype=np.float64)


def min_fill_weights(scores, dtype):
    """Softmax, in float32, of a row whose every key is forbidden by an added fill.

    The logits are :func:`min_fill_logits`; the softmax is taken in float32
    with the row maximum subtracted, as ``torch.softmax(..., dtype=float32)``
    does, so a row whose logits are all -inf gives NaN.

    Examples
    --------
    >>> min_fill_weights([1.0, -3.0, 5.0, 0.0], "float16")
    array([0.25, 0.25, 0.25, 0.25])
    >>> min_fill_weights([-20.0, -16.0], "float16")
    array([nan, nan])
    """
    logits = min_fill_logits(scores, dtype).astype(np.float32)
    with np.errstate(invalid="ignore"):
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(np.float64)


#: Bit patterns of the largest finite positive value of each type, and how a
#: pattern becomes a value; positive floats sort as their patterns do.
_POSITIVE_PATTERNS = {
    "float16": (0x7BFF, lambda b: np.array(b, np.uint16).view(np.float16)),
    "bfloat16": (0x7F7F, lambda b: np.array(b << 16, np.uint32).view(np.float32)),
    "float32": (0x7F7FFFFF, lambda b: np.array(b, np.uint32).view(np.float32)),
}


def _smallest_positive(dtype, holds):
    """The smallest positive value ``s`` of the type for which ``holds(s)``.

    ``holds`` must be monotone (false, then true) over the positive values;
    a bisection over their bit patterns finds where it turns.
    """
    top, value = _POSITIVE_PATTERNS[dtype]
    lo, hi = 1, top
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(float(value(mid))):
            hi = mid
        else:
            lo = mid + 1
    return float(value(lo))


def min_fill_regimes(dtype):
    """Where an added score starts to move the fill, and where it overflows.

    Returns a dict: ``fill`` (:func:`most_negative`), ``moves_from`` (the
    smallest positive score of the type that changes the logit),
    ``step`` (how far that score moves it: the spacing of the type at the
    fill), and ``overflows_from`` (the negative score of smallest size that
    sends the logit to -inf). Scores strictly between ``overflows_from`` and
    ``moves_from`` leave the logit at the fill exactly.

    Examples
    --------
    >>> min_fill_regimes("float16")
    {'fill': -65504.0, 'moves_from': 16.0, 'step': 32.0, 'overflows_from': -16.0}
    """
    fill = most_negative(dtype)

    def moved(s):
        return bool(min_fill_logits(s, dtype) > fill)

    def overflowed(s):
        return bool(np.isneginf(min_fill_logits(-s, dtype)))

    moves_from = _smallest_positive(dtype, moved)
    return {
        "fill": fill,
        "moves_from": moves_from,
        "step": float(min_fill_logits(moves_from, dtype)) - fill,
        "overflows_from": -_smallest_positive(dtype, overflowed),
    }
