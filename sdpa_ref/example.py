"""The authored vectors of the site's worked example and interactive figure.

Four keys, four queries and four values, written at width 4 and repeated to
reach the wider heads. Each key is built from two signed unit pairs, so a
reader can check every dot product by hand. Each query teaches one thing:

* ``Q0`` scores ``[4, 0, 2, -4]``: one key dominates. Dividing by
  ``sqrt(4) = 2`` gives ``[2, 0, 1, -2]``, the text's worked example.
* ``Q1`` scores ``[3, 1, 2, 2]``: a near-tie, where scaling keeps the
  distribution informative the longest as the width grows.
* ``Q2`` scores ``[-3, -1, 1, 3]``: evenly spaced, so the ordering, which
  scaling preserves, can be read off by eye.
* ``Q3`` scores ``[1, 1, 1, 1]``: all equal, so the weights are uniform at
  every width and scale and the entropy sits at its ceiling ``ln 4``.

The values stay 2-wide at every width so that the outputs, weighted
averages of the values, can be drawn in the plane.

Repeating the width-4 pattern ``width / 4`` times keeps every angle between
vectors fixed, so the raw dot products grow in proportion to the width, and
the scaled ones like its square root. These vectors do **not** follow the
random model behind the square-root factor, whose dot products grow only
like ``sqrt(width)``; that contrast is part of what the figure shows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BASE_WIDTH", "KEY_NAMES", "QUERY_NAMES", "WIDTHS", "raw_scores", "vectors"]

#: Head widths the figure offers.
WIDTHS = (4, 16, 64, 256)

#: The width the vectors are written at; wider heads repeat it.
BASE_WIDTH = 4

_QUERIES = np.array(
    [
        [2, 2, -1, 3],
        [2, 1, 2, 0],
        [-2, -1, 2, -1],
        [1, 0, 1, 0],
    ],
    dtype=np.float64,
)
_KEYS = np.array(
    [
        [1, 1, 0, 0],
        [1, -1, 0, 0],
        [0, 0, 1, 1],
        [0, 0, 1, -1],
    ],
    dtype=np.float64,
)
_VALUES = np.array(
    [
        [3.0, 1.0],
        [-1.0, 3.0],
        [1.0, -2.0],
        [-3.0, -1.0],
    ]
)

QUERY_NAMES = tuple(f"Q{i}" for i in range(len(_QUERIES)))
KEY_NAMES = tuple(f"K{j}" for j in range(len(_KEYS)))


def vectors(width):
    """The figure's ``(Q, K, V)`` at a head width from :data:`WIDTHS`.

    Parameters
    ----------
    width : int
        The query/key width ``d_k``.

    Returns
    -------
    Q : numpy.ndarray, shape (4, width)
    K : numpy.ndarray, shape (4, width)
    V : numpy.ndarray, shape (4, 2)
        Fresh copies; changing them changes nothing here.

    Raises
    ------
    ValueError
        If ``width`` is not in :data:`WIDTHS`.

    Examples
    --------
    >>> Q, K, V = vectors(4)
    >>> Q[0] @ K.T
    array([ 4.,  0.,  2., -4.])
    >>> Q[0] @ K.T / np.sqrt(4)
    array([ 2.,  0.,  1., -2.])
    >>> [a.shape for a in vectors(16)]
    [(4, 16), (4, 16), (4, 2)]
    """
    if isinstance(width, bool) or width not in WIDTHS:
        raise ValueError(f"width must be one of {WIDTHS}, got {width!r}")
    repeats = width // BASE_WIDTH
    return np.tile(_QUERIES, repeats), np.tile(_KEYS, repeats), _VALUES.copy()


def raw_scores(width):
    """The raw dot products ``Q Kᵀ`` at ``width``, one row per query.

    Examples
    --------
    >>> raw_scores(4)[0]
    array([ 4.,  0.,  2., -4.])
    >>> raw_scores(16)[0]
    array([ 16.,   0.,   8., -16.])
    """
    q, k, _ = vectors(width)
    return q @ k.T
