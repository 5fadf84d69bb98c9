"""Argument checks shared by the public functions.

Every check names the argument it rejects and the shape or value involved, so
that bad input stops with a clear ``TypeError`` (wrong kind of thing) or
``ValueError`` (right kind, wrong shape or value) instead of a silent NaN or a
traceback from deep inside NumPy.
"""

from __future__ import annotations

import numbers

import numpy as np

EMPTY_ROW_POLICIES = ("raise", "zero", "nan")


def real_array(x, name: str, *, min_ndim: int = 0, dtype=None) -> np.ndarray:
    """Return ``x`` as a real floating array, or raise naming ``name``.

    Integers become float64; floating inputs keep their precision unless
    ``dtype`` is given. Booleans, complex numbers, strings and objects are
    rejected: none of them is a score.
    """
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as exc:  # ragged nested lists, mostly
        raise TypeError(f"{name} must be a real numeric array; {exc}") from None
    kind = arr.dtype.kind
    if kind == "c":
        raise TypeError(
            f"{name} must be real, but has complex dtype {arr.dtype} "
            f"(shape {arr.shape})"
        )
    if kind not in "iuf":
        raise TypeError(
            f"{name} must be a real numeric array, but has dtype {arr.dtype} "
            f"(shape {arr.shape})"
        )
    if arr.ndim < min_ndim:
        raise ValueError(
            f"{name} must have at least {min_ndim} dimension(s), "
            f"but has shape {arr.shape}"
        )
    if dtype is not None:
        return arr.astype(dtype, copy=False)
    if kind in "iu":
        return arr.astype(np.float64)
    return arr


def first_index(flags: np.ndarray) -> tuple[int, ...]:
    """Index of the first True entry of ``flags``, as a tuple of ints."""
    return tuple(int(i) for i in np.argwhere(flags)[0])


def require_finite(arr: np.ndarray, name: str) -> None:
    """Reject NaN or infinity in ``arr``, naming where the first one is."""
    bad = ~np.isfinite(arr)
    if bad.any():
        where = first_index(bad)
        raise ValueError(
            f"{name} contains {float(arr[where])} at index {where} "
            f"(shape {arr.shape}); pass check_finite=False to skip this check"
        )


def positive_int(value, name: str) -> int:
    """Return ``value`` as an int that is at least 1, or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer, got {value!r} ({type(value).__name__})"
        )
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


def nonnegative_int(value, name: str) -> int:
    """Return ``value`` as an int that is at least 0, or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer, got {value!r} ({type(value).__name__})"
        )
    if value < 0:
        raise ValueError(f"{name} must be at least 0, got {value}")
    return int(value)


def positive_scale(scale) -> float:
    """Return a user's ``scale`` as a positive finite float, or raise."""
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(
            f"scale must be None or a real number, got {scale!r} "
            f"({type(scale).__name__})"
        )
    value = float(scale)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"scale must be positive and finite, got {scale!r}")
    return value


def empty_row_policy(policy) -> str:
    """Return ``policy`` if it is one of :data:`EMPTY_ROW_POLICIES`."""
    if policy not in EMPTY_ROW_POLICIES:
        raise ValueError(
            f"empty_rows must be one of {EMPTY_ROW_POLICIES}, got {policy!r}"
        )
    return policy
