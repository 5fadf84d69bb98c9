"""The dot product as a similarity: direction and magnitude."""

from __future__ import annotations

import numpy as np

from ._checks import real_array

__all__ = [
    "cosine_similarity",
    "distance_decomposition",
    "score_from_angle",
    "similarity_parts",
]


def cosine_similarity(q, k):
    """``q·k / (‖q‖ ‖k‖)``: the dot product with the norms taken out.

    Examples
    --------
    >>> print(f"{cosine_similarity([1, 0], [1, 1]):.3f}")
    0.707
    """
    q = real_array(q, "q", min_ndim=1, dtype=np.float64)
    k = real_array(k, "k", min_ndim=1, dtype=np.float64)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same width, got {q.shape} and {k.shape}"
        )
    norms = np.linalg.norm(q, axis=-1) * np.linalg.norm(k, axis=-1)
    if np.any(norms == 0):
        raise ValueError("the cosine of a zero vector is undefined")
    return (q * k).sum(axis=-1) / norms


def score_from_angle(angles, norm_q, norm_k):
    """The dot product ``‖q‖ ‖k‖ cos(angle)`` for each angle, in radians.

    Examples
    --------
    Unit vectors score their cosine; doubling one norm doubles the score:

    >>> score_from_angle(np.array([0.0, np.pi / 2]), 1.0, 1.0).round(12)
    array([1., 0.])
    >>> score_from_angle(np.array([0.0]), 2.0, 1.0)
    array([2.])
    """
    angles = real_array(angles, "angles", dtype=np.float64)
    if norm_q < 0 or norm_k < 0:
        raise ValueError(f"norms must be nonnegative, got {norm_q} and {norm_k}")
    return norm_q * norm_k * np.cos(angles)


def similarity_parts(q, k):
    """The dot product of two vectors, taken apart into length and direction.

    Returns
    -------
    dict of float
        ``dot`` (``q·k``), ``norm_q`` and ``norm_k`` (lengths), and
        ``cosine``, so that ``dot == norm_q * norm_k * cosine``.

    Examples
    --------
    >>> parts = similarity_parts([2, 2, -1, 3], [1, 1, 0, 0])
    >>> dot, nq, nk, cos = parts.values()
    >>> print(f"{dot:g} = {nq:.3f} x {nk:.3f} x {cos:.3f}")
    4 = 4.243 x 1.414 x 0.667
    """
    q = real_array(q, "q", min_ndim=1, dtype=np.float64)
    k = real_array(k, "k", min_ndim=1, dtype=np.float64)
    return {
        "dot": float(q @ k),
        "norm_q": float(np.linalg.norm(q)),
        "norm_k": float(np.linalg.norm(k)),
        "cosine": float(cosine_similarity(q, k)),
    }


def distance_decomposition(q, k):
    """Split ``q·k`` into a distance term and two length terms.

    Expanding ``‖q - k‖² = ‖q‖² - 2 q·k + ‖k‖²`` gives

        ``-‖q - k‖² / 2 = q·k - ‖q‖² / 2 - ‖k‖² / 2``,

    so ``q·k = -‖q - k‖²/2 + ‖q‖²/2 + ‖k‖²/2``. In one query's row of scores
    the ``‖q‖²/2`` term is the same for every key, and softmax ignores it;
    the ``‖k‖²/2`` term is a bias per key.

    Parameters
    ----------
    q : array_like, shape (d,)
        One query.
    k : array_like, shape (d,) or (n_k, d)
        One key, or keys as rows.

    Returns
    -------
    dict
        ``dot`` (``q·k``), ``neg_half_sq_distance`` (``-‖q - k‖²/2``) and
        ``half_sq_norm_k`` (``‖k‖²/2``), one entry per key, and
        ``half_sq_norm_q`` (``‖q‖²/2``), a float, such that
        ``dot == neg_half_sq_distance + half_sq_norm_q + half_sq_norm_k``.

    Examples
    --------
    Query Q0 against key K0 of the worked example:

    >>> parts = distance_decomposition([2, 2, -1, 3], [1, 1, 0, 0])
    >>> [float(parts[name]) for name in
    ...  ("dot", "neg_half_sq_distance", "half_sq_norm_q", "half_sq_norm_k")]
    [4.0, -6.0, 9.0, 1.0]
    """
    q = real_array(q, "q", min_ndim=1, dtype=np.float64)
    k = real_array(k, "k", min_ndim=1, dtype=np.float64)
    if q.ndim != 1 or k.ndim > 2 or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "q must be one vector and k one vector or a matrix of key rows of "
            f"the same width, got shapes {q.shape} and {k.shape}"
        )
    return {
        "dot": k @ q,
        "neg_half_sq_distance": -0.5 * ((q - k) ** 2).sum(axis=-1),
        "half_sq_norm_q": 0.5 * float(q @ q),
        "half_sq_norm_k": 0.5 * (k**2).sum(axis=-1),
    }
