"""How spread out a weight row is: entropy, and the softmax Jacobian.

Two facts carry the page on scaling. The softmax Jacobian is
``diag(w) - w wᵀ``, whose spectral norm never exceeds 1/2 and falls to 0
as the row saturates. And the entropy of ``softmax(beta * s)`` never rises
with ``beta``: its derivative is ``-beta Var_w(s)``.
"""

from __future__ import annotations

import numpy as np

from ._checks import nonnegative_float, quantile_levels, real_array
from .core import softmax

__all__ = [
    "JACOBIAN_NORM_CAP",
    "entropy",
    "entropy_slope",
    "max_entropy",
    "saturation",
    "saturation_quantiles",
    "shifted_weights",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "temperature_sweep",
    "top_gap",
    "weight_ratio",
]

#: How far a weight row's sum may be from 1 and still count as a distribution.
SUM_TOLERANCE = 1e-6

#: The largest spectral norm the softmax Jacobian can have, at any scores.
#: For a unit vector x, ``xᵀ (diag(w) - w wᵀ) x`` is the variance of the
#: entries of x under the weights w. Two entries of a unit vector differ by at
#: most sqrt(2), and anything confined to an interval of length L has variance
#: at most (L/2)² (no more than its mean squared distance to the midpoint), so
#: the variance is at most 1/2. It is reached only when two keys have weight
#: 1/2 each and every other key exactly 0; with more than two keys and finite
#: scores, a softmax only approaches it.
JACOBIAN_NORM_CAP = 0.5


def _weights(weights, axis=-1):
    w = real_array(weights, "weights", min_ndim=1, dtype=np.float64)
    if w.shape[axis] == 0:
        raise ValueError(f"weights has no entries along axis {axis} (shape {w.shape})")
    if not np.isfinite(w).all():
        raise ValueError(f"weights must be finite (shape {w.shape})")
    if (w < 0).any():
        raise ValueError(
            f"weights must be nonnegative, found {w.min():.3g} (shape {w.shape})"
        )
    total = w.sum(axis=axis)
    if np.abs(total - 1).max() > SUM_TOLERANCE:
        raise ValueError(
            f"weights must sum to 1 along axis {axis}, found sums from "
            f"{total.min():.6g} to {total.max():.6g} (shape {w.shape})"
        )
    return w


def entropy(weights, axis=-1):
    """Shannon entropy of weight rows, in nats, with ``0 ln 0 = 0``.

    ``H(w) = -sum_j w_j ln w_j`` lies between 0 (all weight on one key) and
    ``ln n_k`` (uniform over ``n_k`` keys). It describes how spread out the
    weights are, not whether they are right.

    Parameters
    ----------
    weights : array_like
        Nonnegative rows that sum to 1 along ``axis``.
    axis : int, optional
        The key axis.

    Returns
    -------
    numpy.ndarray
        The entropies, with ``axis`` removed (a 0-d float for one row).

    Raises
    ------
    ValueError
        If a weight is negative or not finite, or a row does not sum to 1.

    Examples
    --------
    The worked example, unscaled and scaled:

    >>> print(f"{entropy(softmax([4, 0, 2, -4])):.3f} nats")
    0.444 nats
    >>> print(f"{entropy(softmax([2, 0, 1, -2])):.3f} nats")
    0.888 nats
    >>> print(f"{entropy([0.25, 0.25, 0.25, 0.25]):.3f} nats")
    1.386 nats
    """
    w = _weights(weights, axis)
    # log(1) = 0 where w = 0, so those terms vanish as the limit 0 ln 0 = 0 says.
    return -(w * np.log(np.where(w > 0, w, 1.0))).sum(axis=axis)


def max_entropy(n_keys):
    """The entropy ceiling ``ln n_k``, reached by uniform weights, in nats.

    Examples
    --------
    >>> max_entropy(4)
    1.386...
    """
    if isinstance(n_keys, bool) or not isinstance(n_keys, (int, np.integer)):
        raise TypeError(f"n_keys must be an integer, got {n_keys!r}")
    if n_keys < 1:
        raise ValueError(f"n_keys must be at least 1, got {n_keys}")
    return float(np.log(n_keys))


def softmax_jacobian(weights):
    """Jacobian of softmax at a weight row: ``diag(w) - w wᵀ``.

    Entry ``(i, j)`` is ``d w_i / d s_j``. When one weight approaches 1 every
    entry approaches 0: a saturated softmax passes back almost no gradient.

    Parameters
    ----------
    weights : array_like, shape (..., n)
        Weight rows (the softmax outputs), each summing to 1.

    Returns
    -------
    numpy.ndarray, shape (..., n, n)

    Examples
    --------
    >>> softmax_jacobian([0.5, 0.5])
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    """
    w = _weights(weights)
    # The diagonal w_i (1 - w_i) cancels to 0 once w_i rounds to 1, which is
    # exactly the saturated case worth measuring; w_i * sum_{j != i} w_j, from
    # prefix and suffix sums of the small weights, keeps its digits.
    zero = np.zeros_like(w[..., :1])
    prefix = np.concatenate([zero, np.cumsum(w[..., :-1], axis=-1)], axis=-1)
    suffix = np.flip(
        np.concatenate(
            [zero, np.cumsum(np.flip(w, axis=-1)[..., :-1], axis=-1)], axis=-1
        ),
        axis=-1,
    )
    jac = -w[..., :, None] * w[..., None, :]
    diag = np.einsum("...ii->...i", jac)
    diag.setflags(write=True)
    diag[...] = w * (prefix + suffix)
    return jac


def softmax_jacobian_norm(weights):
    """Spectral norm (largest singular value) of the softmax Jacobian per row.

    The Jacobian is symmetric positive semidefinite, so this is its largest
    eigenvalue. It is at most 1/2 (:data:`~sdpa_ref.spread.JACOBIAN_NORM_CAP`),
    reached only when two keys share all the weight equally, and tends to 0 as
    one weight tends to 1.

    Examples
    --------
    >>> print(f"{softmax_jacobian_norm([0.5, 0.5]):.3f}")
    0.500
    >>> print(f"{softmax_jacobian_norm([0.25, 0.25, 0.25, 0.25]):.3f}")
    0.250
    >>> print(f"{softmax_jacobian_norm(softmax([40.0, 0.0])):.1e}")
    8.5e-18
    """
    return np.linalg.eigvalsh(softmax_jacobian(weights))[..., -1]


def _rest_weight(weights):
    """The weight of all keys but the top one, summed from the small weights."""
    return np.sort(weights, axis=-1)[..., :-1].sum(axis=-1)


def _saturation_curves(stretched, d_k):
    """What :func:`saturation` measures of stretched score rows, raw and scaled."""
    raw = softmax(stretched)
    scaled = softmax(stretched / np.sqrt(d_k))
    return {
        "top_weight_raw": raw.max(axis=-1),
        "top_weight_scaled": scaled.max(axis=-1),
        "rest_weight_raw": _rest_weight(raw),
        "rest_weight_scaled": _rest_weight(scaled),
        "jacobian_norm_raw": softmax_jacobian_norm(raw),
        "jacobian_norm_scaled": softmax_jacobian_norm(scaled),
    }


def saturation(scores, spreads, d_k):
    """Top weight and Jacobian norm as a score row is stretched.

    The row ``spread * scores`` stands for dot products that grow with the
    head width. For each spread, softmax is taken of the raw row and of the
    row divided by ``sqrt(d_k)``.

    Parameters
    ----------
    scores : array_like, shape (n,)
        The base score row.
    spreads : array_like, shape (m,)
        Nonnegative multipliers of the row.
    d_k : int
        The head width whose ``sqrt`` divides the scaled row.

    Returns
    -------
    dict of numpy.ndarray
        ``top_weight_raw``, ``top_weight_scaled``, ``jacobian_norm_raw`` and
        ``jacobian_norm_scaled``, each of shape (m,); and ``rest_weight_raw``
        and ``rest_weight_scaled``, the weight left for all other keys,
        summed from the small weights so that it keeps its digits when the
        top weight rounds to 1.

    Examples
    --------
    >>> curves = saturation([4, 0, 2, -4], [1.0], d_k=4)
    >>> print(f"{curves['top_weight_raw'][0]:.3f} {curves['top_weight_scaled'][0]:.3f}")
    0.867 0.657
    """
    row = real_array(scores, "scores", min_ndim=1, dtype=np.float64)
    stretch = real_array(spreads, "spreads", min_ndim=1, dtype=np.float64)
    if row.ndim != 1 or stretch.ndim != 1:
        raise ValueError(
            f"scores and spreads must be 1-D, got shapes {row.shape} and "
            f"{stretch.shape}"
        )
    if (stretch < 0).any() or not np.isfinite(stretch).all():
        raise ValueError("spreads must be finite and nonnegative")
    return _saturation_curves(stretch[:, None] * row, d_k)


def top_gap(scores):
    """How far the largest score of each row lies above the second largest.

    Softmax gives the top key ``exp(gap)`` times the weight of the runner-up,
    so this one number says much about how close a row is to saturating.

    Parameters
    ----------
    scores : array_like, shape (..., n)
        Score rows with at least two scores each.

    Returns
    -------
    float or numpy.ndarray of shape (...)

    Examples
    --------
    >>> top_gap([4, 0, 2, -4])
    2.0
    >>> top_gap([[1, 3, 2], [5, 5, 0]])
    array([1., 0.])
    """
    row = real_array(scores, "scores", min_ndim=1, dtype=np.float64)
    if row.shape[-1] < 2:
        raise ValueError(f"scores needs at least two per row, got shape {row.shape}")
    ordered = np.sort(row, axis=-1)
    gap = ordered[..., -1] - ordered[..., -2]
    return float(gap) if gap.ndim == 0 else gap


def saturation_quantiles(rows, spread, d_k, quantiles=(0.25, 0.5, 0.75)):
    """Quantiles over many rows of what :func:`saturation` measures on one.

    Each row is stretched by ``spread`` and put through softmax as it is and
    divided by ``sqrt(d_k)``. One row is one draw; the quantiles say how
    typical its numbers are.

    Parameters
    ----------
    rows : array_like, shape (m, n)
        Base score rows, for example from
        :func:`~sdpa_ref.random_model.standard_score_rows`.
    spread : float
        The nonnegative multiplier of every row.
    d_k : int
        The head width whose ``sqrt`` divides the scaled rows.
    quantiles : sequence of float, optional
        The quantiles to return, each between 0 and 1.

    Returns
    -------
    dict of numpy.ndarray
        The keys of :func:`saturation` (``top_weight_raw``,
        ``top_weight_scaled``, ``rest_weight_raw``, ``rest_weight_scaled``,
        ``jacobian_norm_raw``, ``jacobian_norm_scaled``) and ``top_gap``, the
        gap between each base row's two largest scores (:func:`top_gap`), each
        holding one value per quantile.

    Examples
    --------
    The worked example's raw and scaled rows, taken as two rows; quantiles 0
    and 1 are the smallest and the largest value:

    >>> q = saturation_quantiles([[4, 0, 2, -4], [2, 0, 1, -2]], 1.0, 4, [0, 1])
    >>> q["top_weight_raw"].round(3)
    array([0.657, 0.867])
    >>> q["top_gap"]
    array([1., 2.])
    """
    base = real_array(rows, "rows", min_ndim=2, dtype=np.float64)
    if base.ndim != 2:
        raise ValueError(f"rows must be 2-D, got shape {base.shape}")
    stretch = nonnegative_float(spread, "spread")
    levels = quantile_levels(quantiles)
    per_row = {**_saturation_curves(stretch * base, d_k), "top_gap": top_gap(base)}
    return {name: np.quantile(v, levels) for name, v in per_row.items()}


def temperature_sweep(scores, divisors):
    """Weights and entropy of ``softmax(scores / t)`` for each divisor ``t``.

    Dividing by a larger ``t`` never lowers the entropy and never changes
    the order of the weights; dividing by ``sqrt(d_k)`` is one such ``t``.

    Returns
    -------
    weights : numpy.ndarray, shape (m, n)
    entropies : numpy.ndarray, shape (m,)
        In nats.

    Examples
    --------
    >>> w, h = temperature_sweep([4, 0, 2, -4], [1.0, 2.0])
    >>> h.round(3)
    array([0.444, 0.888])
    """
    row = real_array(scores, "scores", min_ndim=1, dtype=np.float64)
    t = real_array(divisors, "divisors", min_ndim=1, dtype=np.float64)
    if row.ndim != 1 or t.ndim != 1:
        raise ValueError(
            f"scores and divisors must be 1-D, got {row.shape} and {t.shape}"
        )
    if not np.isfinite(t).all() or (t <= 0).any():
        raise ValueError("divisors must be positive and finite")
    weights = softmax(row[None, :] / t[:, None])
    return weights, entropy(weights)


def entropy_slope(scores, beta):
    """Derivative of the entropy of ``softmax(beta * scores)`` with respect to ``beta``.

    With ``w = softmax(beta s)``, ``ln w_i = beta s_i - ln Z``, so
    ``H = ln Z - beta E_w[s]``. Since ``d ln Z / d beta = E_w[s]`` and
    ``d E_w[s] / d beta = Var_w(s)``,

    ``dH/d beta = -beta Var_w(s)``,

    which is never positive for ``beta >= 0``: a larger ``beta`` (a lower
    temperature, ``1 / beta``) never spreads the weights more evenly.

    Parameters
    ----------
    scores : array_like, shape (n,)
    beta : float or array_like of shape (m,)
        Inverse temperatures.

    Returns
    -------
    float or numpy.ndarray of shape (m,)

    Examples
    --------
    >>> print(f"{entropy_slope([4, 0, 2, -4], 1.0):.3f}")
    -0.651
    >>> entropy_slope([1, 1, 1], 2.0)  # equal scores: no variance, no change
    0.0
    """
    row = real_array(scores, "scores", min_ndim=1, dtype=np.float64)
    b = real_array(beta, "beta", dtype=np.float64)
    if row.ndim != 1 or b.ndim > 1:
        raise ValueError(
            f"scores must be 1-D and beta a number or 1-D, got shapes {row.shape} "
            f"and {b.shape}"
        )
    if not (np.isfinite(row).all() and np.isfinite(b).all()):
        raise ValueError("scores and beta must be finite")
    betas = np.atleast_1d(b)
    weights = softmax(betas[:, None] * row[None, :])
    centred = row[None, :] - (weights * row).sum(axis=-1, keepdims=True)
    # 0 - x rather than -x, so that a row of equal scores gives 0.0, not -0.0.
    slope = 0.0 - betas * (weights * centred**2).sum(axis=-1)
    return float(slope[0]) if b.ndim == 0 else slope


def shifted_weights(scores, shifts):
    """``softmax(scores + c)`` for each constant ``c``, one row per shift.

    Every row is the same: softmax sees only differences between scores.

    Examples
    --------
    >>> shifted_weights([2, 0, 1, -2], [0, 100]).round(3)
    array([[0.657, 0.089, 0.242, 0.012],
           [0.657, 0.089, 0.242, 0.012]])
    """
    row = real_array(scores, "scores", min_ndim=1, dtype=np.float64)
    c = real_array(shifts, "shifts", min_ndim=1, dtype=np.float64)
    return softmax(row[None, :] + c[:, None])


def weight_ratio(scores, i, j):
    """How the weights of keys ``i`` and ``j`` compare after softmax.

    Softmax weights are proportional to ``exp(score)``, so their ratio
    depends only on the gap between the two scores:
    ``w_i / w_j = exp(s_i - s_j)``.

    Returns
    -------
    dict of float
        ``gap`` (``s_i - s_j``) and ``ratio`` (``w_i / w_j``).

    Examples
    --------
    >>> r = weight_ratio([2, 0, 1, -2], 0, 2)
    >>> print(f"gap {r['gap']:g}, ratio {r['ratio']:.3f}")
    gap 1, ratio 2.718
    """
    row = real_array(scores, "scores", min_ndim=1, dtype=np.float64)
    weights = softmax(row)
    return {"gap": float(row[i] - row[j]), "ratio": float(weights[i] / weights[j])}
