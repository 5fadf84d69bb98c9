"""The dot product as a similarity: direction and magnitude."""

from __future__ import annotations

import numpy as np

from ._checks import real_array

__all__ = ["cosine_similarity", "score_from_angle", "similarity_parts"]


def cosine_similarity(q, k):
    """``q·k / (|q| |k|)``: the dot product with the norms taken out.

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
    """The dot product ``|q| |k| cos(angle)`` for each angle, in radians.

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
