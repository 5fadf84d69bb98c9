"""Argument checks shared by the public functions.

Every check names the argument it rejects and the shape or value involved, so
that bad input stops with a clear ``TypeError`` (wrong kind of thing) or
``ValueError`` (right kind, wrong shape or value) instead of a silent NaN or a
traceback from deep inside NumPy.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
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


def real_matrices(
    q: object, k: object, v: object, message: str
) -> tuple[npt.NDArray[np.float64], ...]:
    """Return ``q``, ``k`` and ``v`` as 2-D float64 arrays, or raise.

    ``message`` is the ``ValueError``'s text when one is not 2-D, with
    ``{q}``, ``{k}`` and ``{v}`` standing for their shapes.
    """
    arrays = tuple(
        real_array(x, name, min_ndim=2, dtype=np.float64)
        for x, name in ((q, "q"), (k, "k"), (v, "v"))
    )
    if any(x.ndim != 2 for x in arrays):
        q_shape, k_shape, v_shape = (x.shape for x in arrays)
        raise ValueError(message.format(q=q_shape, k=k_shape, v=v_shape))
    return arrays


def first_index(flags: npt.NDArray[Any]) -> tuple[int, ...]:
    """Index of the first True entry of ``flags``, as a tuple of ints."""
    return tuple(int(i) for i in np.argwhere(flags)[0])


def require_within(
    arr: npt.NDArray[Any], upper: Any, describe: Callable[[int], str]
) -> None:
    """Raise ``ValueError(describe(i))`` if 1-D ``arr`` leaves ``0..upper``.

    ``i`` is the index of the first entry outside that range; ``upper`` is
    one bound for all entries or one per entry.

    Examples
    --------
    >>> require_within(np.array([2, 4]), 4, str)
    >>> require_within(np.array([2, 5, -1]), 4, lambda i: f"entry {i} is out")
    Traceback (most recent call last):
      ...
    ValueError: entry 1 is out
    """
    bad = (arr < 0) | (arr > upper)
    if bad.any():
        raise ValueError(describe(first_index(bad)[0]))


def require_finite(
    arr: npt.NDArray[Any],
    name: str,
    why: str = "; pass check_finite=False to skip this check",
) -> None:
    """Reject NaN or infinity in ``arr``, naming where the first one is.

    ``why`` ends the message: by default how to skip the check, for the
    functions that take ``check_finite``.
    """
    bad = ~np.isfinite(arr)
    if bad.any():
        where = first_index(bad)
        raise ValueError(
            f"{name} contains {float(arr[where])} at index {where} "
            f"(shape {arr.shape}){why}"
        )


def _number(value: object, kind: type, what: str) -> Any:
    """Return ``value`` if it is a ``kind`` and not a bool, or raise a ``TypeError``.

    The error says ``what`` the value must be, then what it is.
    """
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{what}, got {value!r} ({type(value).__name__})")
    return value


def _int_at_least(value: object, name: str, least: int) -> int:
    number = _number(value, numbers.Integral, f"{name} must be an integer")
    if number < least:
        raise ValueError(f"{name} must be at least {least}, got {number}")
    return int(number)


def positive_int(value: object, name: str) -> int:
    """Return ``value`` as an int that is at least 1, or raise."""
    return _int_at_least(value, name, 1)


def nonnegative_int(value: object, name: str) -> int:
    """Return ``value`` as an int that is at least 0, or raise."""
    return _int_at_least(value, name, 0)


def _positive_real(value: object, name: str, what: str, note: str = "") -> float:
    result = float(_number(value, numbers.Real, f"{name} must be {what}"))
    if not np.isfinite(result) or result <= 0:
        raise ValueError(f"{name} must be positive and finite, got {value!r}{note}")
    return result


def positive_scale(scale: object) -> float:
    """Return a user's ``scale`` as a positive finite float, or raise."""
    return _positive_real(scale, "scale", "None or a real number")


def nonnegative_float(value: Any, name: str) -> float:
    """Return ``float(value)`` if it is finite and at least 0, or raise."""
    result = float(value)
    if not (np.isfinite(result) and result >= 0):
        raise ValueError(f"{name} must be finite and nonnegative, got {value!r}")
    return result


def quantile_levels(quantiles: object) -> npt.NDArray[np.float64]:
    """Return ``quantiles`` as a float64 array of at least one level in [0, 1]."""
    levels = real_array(quantiles, "quantiles", min_ndim=1, dtype=np.float64)
    if ((levels < 0) | (levels > 1)).any():
        raise ValueError(f"quantiles must lie in [0, 1], got {levels}")
    return levels


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
    number = _number(
        value, numbers.Integral, f"{name} must be an integer >= 0 or None (unbounded)"
    )
    if number < 0:
        raise ValueError(
            f"{name} must be >= 0 or None (unbounded), got {value}; FlashAttention's "
            f"-1 for 'unbounded' is None here"
        )
    return int(number)


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
    return _positive_real(
        softcap,
        "softcap",
        "None or a positive number",
        "; FlashAttention's 0.0 for 'off' is None here",
    )


def dropout_probability(p: object) -> float:
    """Return ``p`` as a float in [0, 1), or raise."""
    value = float(_number(p, numbers.Real, "dropout_p must be a number in [0, 1)"))
    if not 0.0 <= value < 1.0:
        raise ValueError(f"dropout_p must lie in [0, 1), got {p!r}")
    return value


def _integer_array(value: object, name: str) -> npt.NDArray[Any]:
    arr = as_array(value, name)
    if arr.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must be an integer array of shape (B,), got dtype {arr.dtype} "
            f"(shape {arr.shape})"
        )
    return arr


def lengths_array(
    lengths: object, name: str, n: int, batch: tuple[int, ...], shapes: str
) -> npt.NDArray[np.int64] | None:
    """Return per-sequence lengths as an int64 array of shape (B,), or None."""
    if lengths is None:
        return None
    arr = _integer_array(lengths, name)
    if len(batch) != 2:
        raise ValueError(f"{name} needs 4-D inputs (B, H, n, d), got {shapes}")
    if arr.shape != (batch[0],):
        raise ValueError(
            f"{name} must have shape (B,) = ({batch[0]},), one length per batch "
            f"entry, got shape {arr.shape} ({shapes})"
        )
    require_within(
        arr,
        n,
        lambda where: (
            f"{name} must lie in 0..{n}, got {int(arr[where])} at batch index "
            f"{where} ({shapes})"
        ),
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
    arr = _integer_array(key_leftpad, "key_leftpad")
    if len(batch) != 2 or arr.shape != (batch[0],):
        raise ValueError(
            f"key_leftpad must have shape (B,), one per batch entry of 4-D inputs "
            f"(B, H, n, d), got shape {arr.shape} ({shapes})"
        )
    arr = arr.astype(np.int64)
    end = np.broadcast_to(np.asarray(k_end), arr.shape)
    require_within(
        arr,
        end,
        lambda where: (
            f"key_leftpad[{where}] = {int(arr[where])} must lie in "
            f"0..{int(end[where])}, the end of that sequence's keys: they run from "
            f"key_leftpad to k_lengths (seqused_k, cache_seqlens) ({shapes})"
        ),
    )
    return arr
