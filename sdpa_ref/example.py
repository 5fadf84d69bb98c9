"""The authored vectors of the site's worked example and interactive figure.

Four keys, four queries and four values, written at width 4 and repeated to
reach the wider heads. Each key is built from two signed unit pairs, so a
reader can check every dot product by hand. Each query teaches one thing:

* ``Q0`` scores ``[4, 0, 2, -4]``: one key dominates. Dividing by
  ``sqrt(4) = 2`` gives ``[2, 0, 1, -2]``, the text's worked example.
* ``Q1`` scores ``[3, 1, 2, 2]``: a near-tie at the top, K0 only one ahead
  of K2 and K3, which tie exactly; scaling keeps this distribution
  informative the longest as the width grows.
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

from dataclasses import dataclass

import numpy as np

from ._checks import positive_int
from .core import attention
from .published import (  # the published numbers this module uses or names
    GEMMA2_27B_QUERY_PRE_ATTN_SCALAR,
    GEMMA2_ATTN_SOFTCAP,
    GEMMA2_SHAPES,
    TRANSFORMER_D_MODEL,
    TRANSFORMER_HEADS,
)
from .spread import entropy, max_entropy

__all__ = [
    "BASE_WIDTH",
    "GEMMA2_27B_QUERY_PRE_ATTN_SCALAR",
    "GEMMA2_ATTN_SOFTCAP",
    "GEMMA2_SHAPES",
    "KEY_NAMES",
    "QUERY_NAMES",
    "TRANSFORMER_D_MODEL",
    "TRANSFORMER_HEADS",
    "WIDTHS",
    "Comparison",
    "compare",
    "cross_attention_vectors",
    "head_width",
    "head_width_rows",
    "projection_example",
    "raw_scores",
    "scale_divisor",
    "shape_rows",
    "vectors",
]

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

# Three tokens of width d_model = 4 and projections to width 2, small
# integers so that every product can be checked by hand.
_TOKENS = np.array(
    [
        [1, 0, 1, 0],
        [0, 2, 0, 1],
        [1, 1, 0, -1],
    ],
    dtype=np.float64,
)
_W_Q = np.array([[1, 0], [0, 1], [1, 1], [0, -1]], dtype=np.float64)
_W_K = np.array([[0, 1], [1, 0], [1, 0], [0, 1]], dtype=np.float64)
_W_V = np.array([[1, 0], [0, 1], [0, 1], [1, 0]], dtype=np.float64)


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


@dataclass(frozen=True)
class Comparison:
    """Unscaled against scaled attention for one query at one width.

    Both sides start from the same raw dot products; only the division by
    ``sqrt(d_k)`` differs.
    """

    query: int
    width: int
    raw_scores: np.ndarray
    scaled_scores: np.ndarray
    raw_weights: np.ndarray
    scaled_weights: np.ndarray
    raw_entropy: float
    scaled_entropy: float
    max_entropy: float
    raw_output: np.ndarray
    scaled_output: np.ndarray

    @property
    def raw_top_weight(self) -> float:
        """The largest unscaled weight."""
        return float(self.raw_weights.max())

    @property
    def scaled_top_weight(self) -> float:
        """The largest scaled weight."""
        return float(self.scaled_weights.max())


def compare(query, width):
    """Compare unscaled and scaled attention for query ``query`` at ``width``.

    Parameters
    ----------
    query : int
        Index of the query, ``0`` for ``Q0``.
    width : int
        A head width from :data:`WIDTHS`.

    Returns
    -------
    Comparison

    Examples
    --------
    >>> c = compare(0, 4)
    >>> print(f"{c.raw_top_weight:.3f} -> {c.scaled_top_weight:.3f}")
    0.867 -> 0.657
    >>> print(f"{c.raw_entropy:.3f} -> {c.scaled_entropy:.3f} nats")
    0.444 -> 0.888 nats
    >>> print(f"at most {c.max_entropy:.3f} nats")
    at most 1.386 nats
    """
    q, k, v = vectors(width)
    if isinstance(query, bool) or query not in range(len(q)):
        raise ValueError(f"query must be an index in 0..{len(q) - 1}, got {query!r}")
    raw_output, raw_weights = attention(
        q[query : query + 1], k, v, scale=1.0, return_weights=True
    )
    scaled_output, scaled_weights = attention(
        q[query : query + 1], k, v, return_weights=True
    )
    raw_scores = q[query] @ k.T
    return Comparison(
        query=query,
        width=width,
        raw_scores=raw_scores,
        scaled_scores=raw_scores / np.sqrt(width),
        raw_weights=raw_weights[0],
        scaled_weights=scaled_weights[0],
        raw_entropy=float(entropy(raw_weights[0])),
        scaled_entropy=float(entropy(scaled_weights[0])),
        max_entropy=max_entropy(k.shape[0]),
        raw_output=raw_output[0],
        scaled_output=scaled_output[0],
    )


def cross_attention_vectors():
    """A small cross-attention example: 2 queries, 3 keys, ``d_k = 4``, ``d_v = 2``.

    The queries could come from a decoder and the keys and values from an
    encoder's three tokens: their counts differ, and so do the widths of
    keys and values. The three widths and counts are all different
    (``n_k = 3``, ``d_k = 4``, ``d_v = 2``), so no shape can be mistaken for
    another, and the values are not an identity matrix, so each output row
    is a genuine mixture of value rows.

    Examples
    --------
    >>> Q, K, V = cross_attention_vectors()
    >>> [a.shape for a in (Q, K, V)]
    [(2, 4), (3, 4), (3, 2)]
    >>> Q @ K.T
    array([[ 3., -3.,  1.],
           [ 0.,  4.,  0.]])
    >>> attention(Q, K, V).shape
    (2, 2)
    """
    q = np.array([[1.0, 0.0, 2.0, -1.0], [0.0, 1.0, -1.0, 1.0]])
    k = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 2.0, -1.0, 1.0], [2.0, -1.0, 0.0, 1.0]])
    v = np.array([[2.0, 1.0], [-1.0, 3.0], [0.0, -2.0]])
    return q, k, v


def shape_rows(n_q, n_k, d_k, d_v):
    """Each matrix of attention with its symbolic and its concrete shape.

    Examples
    --------
    >>> shape_rows(2, 3, 4, 2)[-1]
    ('output', 'n_q × d_v', (2, 2))
    """
    return [
        ("Q", "n_q × d_k", (n_q, d_k)),
        ("K", "n_k × d_k", (n_k, d_k)),
        ("V", "n_k × d_v", (n_k, d_v)),
        ("QKᵀ (scores)", "n_q × n_k", (n_q, n_k)),
        ("softmax(QKᵀ/√dₖ) (weights)", "n_q × n_k", (n_q, n_k)),
        ("output", "n_q × d_v", (n_q, d_v)),
    ]


def head_width(d_model, heads):
    """The width of one head when the model width is split evenly, ``d_model / h``.

    The Transformer paper splits the model width evenly between the heads, so
    that each head's queries and keys are ``d_model / h`` wide (Vaswani et al.
    2017, Section 3.2.2: ``d_k = d_v = d_model / h = 64``). That is a choice:
    other models set the head width on its own
    (:data:`~sdpa_ref.published.GEMMA2_SHAPES`).

    Parameters
    ----------
    d_model : int
        The model width.
    heads : int
        The number of heads ``h``; it must divide ``d_model``.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``heads`` does not divide ``d_model``.

    Examples
    --------
    >>> head_width(TRANSFORMER_D_MODEL, TRANSFORMER_HEADS)
    64
    >>> head_width(512, 16)
    32
    """
    d_model = positive_int(d_model, "d_model")
    heads = positive_int(heads, "heads")
    if d_model % heads:
        raise ValueError(
            f"heads must divide d_model evenly, got d_model = {d_model} "
            f"and heads = {heads}"
        )
    return d_model // heads


def scale_divisor(d_k):
    """The divisor ``sqrt(d_k)`` that scaled dot-product attention applies.

    Examples
    --------
    >>> scale_divisor(head_width(TRANSFORMER_D_MODEL, TRANSFORMER_HEADS))
    8.0
    >>> scale_divisor(4)
    2.0
    """
    return float(np.sqrt(positive_int(d_k, "d_k")))


def projection_example():
    """Queries, keys and values projected from three tokens, as in self-attention.

    Each token is a row of ``X`` (``n = 3`` tokens of width ``d_model = 4``);
    ``W_Q``, ``W_K`` and ``W_V`` (``4 × 2`` each) are the learned projections,
    here small integers. Row ``i`` of ``Q = X W_Q`` is token ``i``'s query,
    and likewise for keys and values.

    Returns
    -------
    dict of numpy.ndarray
        ``"X"``, ``"W_Q"``, ``"W_K"``, ``"W_V"``, ``"Q"``, ``"K"``, ``"V"``, and
        ``"scores"`` (``Q Kᵀ``); fresh copies.

    Examples
    --------
    >>> p = projection_example()
    >>> p["X"][0], p["W_Q"][:, 1]
    (array([1., 0., 1., 0.]), array([ 0.,  1.,  1., -1.]))
    >>> p["Q"]
    array([[2., 1.],
           [0., 1.],
           [1., 2.]])
    >>> p["scores"][0]
    array([3., 5., 2.])
    """
    x = _TOKENS.copy()
    q, k, v = x @ _W_Q, x @ _W_K, x @ _W_V
    return {
        "X": x,
        "W_Q": _W_Q.copy(),
        "W_K": _W_K.copy(),
        "W_V": _W_V.copy(),
        "Q": q,
        "K": k,
        "V": v,
        "scores": q @ k.T,
    }


def head_width_rows(models=None):
    """Model width, heads, the even split ``d_model / h`` and the head width used.

    The first row is the original Transformer's base model, which splits its
    width evenly; the others are :data:`~sdpa_ref.published.GEMMA2_SHAPES`
    (or ``models``, a dict of the same form), which do not. ``concat_width``
    is ``h · d_k``, the width of the heads' outputs side by side before the
    output projection (for heads whose values are as wide as their keys).

    Returns
    -------
    list of dict
        ``name``, ``d_model``, ``heads`` (query heads), ``kv_heads`` (key
        and value heads: as many as query heads unless the model shares
        them), ``even_split``, ``head_width``, ``concat_width``.

    Examples
    --------
    >>> rows = head_width_rows()
    >>> [(r["name"], r["even_split"], r["head_width"]) for r in rows[:3]]
    [('Transformer', 64, 64), ('Gemma 2 2B', 288, 256), ('Gemma 2 9B', 224, 256)]
    >>> rows[2]["concat_width"], rows[2]["d_model"], rows[2]["kv_heads"]
    (4096, 3584, 8)
    """
    transformer = {
        "d_model": TRANSFORMER_D_MODEL,
        "heads": TRANSFORMER_HEADS,
        "head_width": head_width(TRANSFORMER_D_MODEL, TRANSFORMER_HEADS),
    }
    shapes = {"Transformer": transformer, **(models or GEMMA2_SHAPES)}
    rows = []
    for name, shape in shapes.items():
        d_model = positive_int(shape["d_model"], "d_model")
        heads = positive_int(shape["heads"], "heads")
        kv_heads = positive_int(shape.get("kv_heads", heads), "kv_heads")
        width = positive_int(shape["head_width"], "head_width")
        rows.append(
            {
                "name": name,
                "d_model": d_model,
                "heads": heads,
                "kv_heads": kv_heads,
                "even_split": head_width(d_model, heads),
                "head_width": width,
                "concat_width": heads * width,
            }
        )
    return rows
