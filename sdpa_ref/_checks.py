"""Argument checks shared by the public functions.

Every check names the argument it rejects and the shape or value involved, so
that bad input stops with a clear ``TypeError`` (wrong kind of thing) or
``ValueError`` (right kind, wrong shape or value) instead of a silent NaN or a
traceback from deep inside NumPy.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._arrays import as_array

EMPTY_ROW_POLICIES = ("raise", "zero", "nan")


def real_array(
    x: object, name: str, *, min_ndim: int = 0, dtype: npt.DTypeLike | None = None
) -> npt.NDArray[Any]:
    """Return ``x`` as a real floating array, or raise naming ``name``.

    ``x`` may be anything :func:`sdpa_ref._arrays.as_array` takes: a NumPy
    array, a torch tensor, a list. Integers become float64; floating inputs
    keep their precision (bfloat16 becomes float32, exactly) unless
    ``dtype`` is given. Booleans, complex numbers, strings and objects are
    rejected: none of them is a score.
    """
    arr = as_array(x, name)
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


def first_index(flags: npt.NDArray[Any]) -> tuple[int, ...]:
    """Index of the first True entry of ``flags``, as a tuple of ints."""
    return tuple(int(i) for i in np.argwhere(flags)[0])


def require_finite(arr: npt.NDArray[Any], name: str) -> None:
    """Reject NaN or infinity in ``arr``, naming where the first one is."""
    bad = ~np.isfinite(arr)
    if bad.any():
        where = first_index(bad)
        raise ValueError(
            f"{name} contains {float(arr[where])} at index {where} "
            f"(shape {arr.shape}); pass check_finite=False to skip this check"
        )


def positive_int(value: object, name: str) -> int:
    """Return ``value`` as an int that is at least 1, or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer, got {value!r} ({type(value).__name__})"
        )
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return int(value)


def nonnegative_int(value: object, name: str) -> int:
    """Return ``value`` as an int that is at least 0, or raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer, got {value!r} ({type(value).__name__})"
        )
    if value < 0:
        raise ValueError(f"{name} must be at least 0, got {value}")
    return int(value)


def positive_scale(scale: object) -> float:
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


def empty_row_policy(policy: object) -> Any:
    """Return ``policy`` if it is one of :data:`EMPTY_ROW_POLICIES`."""
    if policy not in EMPTY_ROW_POLICIES:
        raise ValueError(
            f"empty_rows must be one of {EMPTY_ROW_POLICIES}, got {policy!r}"
        )
    return policy


ALIGNMENTS = ("top_left", "bottom_right")


def alignment(align: object) -> Any:
    """Return ``align`` if it is one of :data:`ALIGNMENTS`."""
    if not isinstance(align, str) or align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    return align


def _bound(value: object, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer >= 0 or None (unbounded), got {value!r} "
            f"({type(value).__name__})"
        )
    if value < 0:
        raise ValueError(
            f"{name} must be >= 0 or None (unbounded), got {value}; FlashAttention's "
            f"-1 for 'unbounded' is None here"
        )
    return int(value)


def window_bounds(window: object) -> tuple[int | None, int | None]:
    """Return ``window`` as ``(left, right)``, each an int >= 0 or None."""
    if window is None:
        return None, None
    if isinstance(window, str | bytes) or not isinstance(window, Sequence | np.ndarray):
        raise TypeError(f"window must be a pair (left, right), got {window!r}")
    if len(window) != 2:
        raise ValueError(
            f"window must be a pair (left, right), got {len(window)} values: {window!r}"
        )
    return _bound(window[0], "window's left bound"), _bound(
        window[1], "window's right bound"
    )


def softcap_value(softcap: object) -> float | None:
    """Return ``softcap`` as a positive finite float, or None."""
    if softcap is None:
        return None
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real):
        raise TypeError(
            f"softcap must be None or a positive number, got {softcap!r} "
            f"({type(softcap).__name__})"
        )
    value = float(softcap)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(
            f"softcap must be positive and finite, got {softcap!r}; "
            f"FlashAttention's 0.0 for 'off' is None here"
        )
    return value


def dropout_probability(p: object) -> float:
    """Return ``p`` as a float in [0, 1), or raise."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(
            f"dropout_p must be a number in [0, 1), got {p!r} ({type(p).__name__})"
        )
    value = float(p)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1), got {p!r}")
    return value


def lengths_array(
    lengths: object, name: str, n: int, batch: tuple[int, ...], shapes: str
) -> npt.NDArray[np.int64] | None:
    """Return per-sequence lengths as an int64 array of shape (B,), or None."""
    if lengths is None:
        return None
    arr = as_array(lengths, name)
    if arr.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must be an integer array of shape (B,), got dtype {arr.dtype} "
            f"(shape {arr.shape})"
        )
    if len(batch) != 2:
        raise ValueError(f"{name} needs 4-D inputs (B, H, n, d), got {shapes}")
    if arr.shape != (batch[0],):
        raise ValueError(
            f"{name} must have shape (B,) = ({batch[0]},), one length per batch "
            f"entry, got shape {arr.shape} ({shapes})"
        )
    bad = (arr < 0) | (arr > n)
    if bad.any():
        where = first_index(bad)[0]
        raise ValueError(
            f"{name} must lie in 0..{n}, got {int(arr[where])} at batch index "
            f"{where} ({shapes})"
        )
    return arr.astype(np.int64)


def sink_array(
    sink_logits: object, batch: tuple[int, ...], shapes: str
) -> npt.NDArray[np.float64] | None:
    """Return the per-head sink logits as float64 of shape (H, 1, 1), or None."""
    if sink_logits is None:
        return None
    arr = real_array(sink_logits, "sink_logits", dtype=np.float64)
    if len(batch) < 1:
        raise ValueError(
            f"sink_logits has one logit per query head on axis -3, but the inputs "
            f"have no head axis ({shapes})"
        )
    if arr.shape != (batch[-1],):
        raise ValueError(
            f"sink_logits must have shape (H,) = ({batch[-1]},), one logit per "
            f"query head, got shape {arr.shape} ({shapes})"
        )
    if not np.isfinite(arr).all():
        raise ValueError(
            f"sink_logits must be finite, got {arr.tolist()}; leave a head's sink "
            f"out with a very negative logit rather than -inf"
        )
    return arr.reshape(-1, 1, 1)


def leftpad_array(
    key_leftpad: object,
    k_end: int | npt.NDArray[Any],
    batch: tuple[int, ...],
    shapes: str,
) -> npt.NDArray[np.int64] | None:
    """Return ``key_leftpad`` as int64 of shape (B,), each at most its keys' end.

    Sequence ``b``'s keys run from ``key_leftpad[b]`` to ``k_end`` (its
    ``k_lengths``, ``seqused_k`` or cache length), so the one may not pass
    the other.
    """
    if key_leftpad is None:
        return None
    arr = as_array(key_leftpad, "key_leftpad")
    if arr.dtype.kind not in "iu":
        raise TypeError(
            f"key_leftpad must be an integer array of shape (B,), got dtype "
            f"{arr.dtype} (shape {arr.shape})"
        )
    if len(batch) != 2 or arr.shape != (batch[0],):
        raise ValueError(
            f"key_leftpad must have shape (B,), one per batch entry of 4-D inputs "
            f"(B, H, n, d), got shape {arr.shape} ({shapes})"
        )
    arr = arr.astype(np.int64)
    end = np.broadcast_to(np.asarray(k_end), arr.shape)
    bad = (arr < 0) | (arr > end)
    if bad.any():
        where = first_index(bad)[0]
        raise ValueError(
            f"key_leftpad[{where}] = {int(arr[where])} must lie in "
            f"0..{int(end[where])}, the end of that sequence's keys: they run from "
            f"key_leftpad to k_lengths (seqused_k, cache_seqlens) ({shapes})"
        )
    return arr
