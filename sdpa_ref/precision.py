"""Softmax in low precision: naive against max-subtracted, with bfloat16 simulated."""

from __future__ import annotations

import numpy as np

from ._checks import real_array
from .core import softmax

__all__ = [
    "BFLOAT16_MAX",
    "DTYPES",
    "precision_sweep",
    "softmax_error",
    "softmax_in",
    "to_bfloat16",
]

#: The largest finite bfloat16: 8 bits of significand, float32's exponents.
BFLOAT16_MAX = (2 - 2**-7) * 2.0**127

#: The precisions the site compares, narrowest first.
DTYPES = ("float16", "bfloat16", "float32")


def to_bfloat16(x):
    """Round to the nearest bfloat16 (ties to even), returned as float32.

    bfloat16 keeps float32's 8 exponent bits and 7 of its 23 fraction bits:
    the same range, about 3 significant decimal digits. NumPy has no such
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


def softmax_in(x, dtype, *, stable=True):
    """Softmax with every intermediate rounded to ``dtype``, as float64.

    ``stable`` subtracts the row maximum first. For ``"bfloat16"`` each step
    is computed in float32 and rounded to bfloat16, as kernels that store
    bfloat16 and compute in float32 do. Overflow is not an error here: it is
    what the naive version is meant to show, as ``inf`` or ``nan``.

    Examples
    --------
    >>> softmax_in([12.0, 0.0], "float16", stable=False)
    array([nan,  0.])
    >>> softmax_in([12.0, 0.0], "float16").round(4)
    array([1., 0.])
    """
    x = real_array(x, "x", min_ndim=1, dtype=np.float64)
    if dtype not in (*DTYPES, "float64"):
        raise ValueError(f"dtype must be one of {(*DTYPES, 'float64')}, got {dtype!r}")
    if dtype == "bfloat16":
        cast = to_bfloat16
    else:

        def cast(a):
            return np.asarray(a).astype(dtype)

    with np.errstate(over="ignore", invalid="ignore"):
        z = cast(x)
        if stable:
            z = cast(z - z.max(axis=-1, keepdims=True))
        e = cast(np.exp(z))
        w = cast(e / cast(e.sum(axis=-1, keepdims=True)))
    return w.astype(np.float64)


def softmax_error(x, dtype, *, stable=True):
    """Largest absolute error of :func:`softmax_in` against float64, or ``nan``.

    ``nan`` means the result was not finite: the computation broke down.

    Examples
    --------
    >>> float(softmax_error([100.0, 0.0], "float32", stable=False))
    nan
    >>> softmax_error([100.0, 0.0], "float32") < 1e-7
    True
    """
    got = softmax_in(x, dtype, stable=stable)
    if not np.isfinite(got).all():
        return float("nan")
    return float(np.abs(got - softmax(np.asarray(x, dtype=np.float64))).max())


def precision_sweep(top_logits, gaps=(0.0, -1.0, -100.0, -103.0)):
    """Softmax errors in each precision as the logits grow.

    Each row of scores is ``top + gaps``: a leader, a runner-up one behind,
    and two far behind. For each top logit, the error of the naive and of
    the max-subtracted softmax in each of :data:`DTYPES`, against float64.

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
    """
    rows = []
    for top in top_logits:
        scores = float(top) + np.asarray(gaps, dtype=np.float64)
        row = {"top": float(top)}
        for dtype in DTYPES:
            row[(dtype, "naive")] = softmax_error(scores, dtype, stable=False)
            row[(dtype, "stable")] = softmax_error(scores, dtype)
        rows.append(row)
    return rows
