"""Variants of the scoring rule: shared K/V heads, linear attention, other scales."""

from __future__ import annotations

import numpy as np

from . import example as authored
from ._checks import positive_int, real_array
from .core import attention
from .cost import kv_cache_bytes
from .random_model import SEED
from .spread import entropy

__all__ = [
    "MODEL_SHAPES",
    "QK_NORM_GAIN",
    "SCALE_CHOICES",
    "elu_feature_map",
    "gqa_equivalence",
    "kv_cache_table",
    "linear_attention",
    "linear_attention_errors",
    "positive_random_features",
    "scale_choice_entropies",
    "scaled_scores",
]

#: Attention shapes of a few published decoder models: layers, query heads,
#: key/value heads and head width, from their published configurations.
MODEL_SHAPES = {
    "Llama 2 7B (multi-head)": {
        "layers": 32,
        "q_heads": 32,
        "kv_heads": 32,
        "head_dim": 128,
    },
    "Mistral 7B (grouped-query)": {
        "layers": 32,
        "q_heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
    },
    "Llama 2 70B (grouped-query)": {
        "layers": 80,
        "q_heads": 64,
        "kv_heads": 8,
        "head_dim": 128,
    },
    "Falcon 7B (multi-query)": {
        "layers": 32,
        "q_heads": 71,
        "kv_heads": 1,
        "head_dim": 64,
    },
}

#: The fixed gain of QK-normalisation on this site (it is learned in practice).
QK_NORM_GAIN = 4.0

#: The scale rules compared on the variants page, in order.
SCALE_CHOICES = ("none", "1/√d_k", "1/d_k", "QK-norm")


def kv_cache_table(seq_len, *, itemsize=2, models=None):
    """KV-cache bytes per sequence for each model, and against full multi-head.

    Examples
    --------
    >>> row = kv_cache_table(4096)[0]
    >>> row["bytes"] / 2**30, row["vs_multi_head"]
    (2.0, 1.0)
    """
    rows = []
    for name, shape in (models or MODEL_SHAPES).items():
        kw = {
            "layers": shape["layers"],
            "head_dim": shape["head_dim"],
            "itemsize": itemsize,
        }
        cache = kv_cache_bytes(seq_len, kv_heads=shape["kv_heads"], **kw)
        full = kv_cache_bytes(seq_len, kv_heads=shape["q_heads"], **kw)
        rows.append(
            {"model": name, **shape, "bytes": cache, "vs_multi_head": cache / full}
        )
    return rows


def elu_feature_map(x):
    """``elu(x) + 1``: a positive feature map (Katharopoulos et al., 2020).

    Examples
    --------
    >>> elu_feature_map(np.array([-1.0, 0.0, 2.0])).round(3)
    array([0.368, 1.   , 3.   ])
    """
    x = real_array(x, "x", dtype=np.float64)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def positive_random_features(x, projection):
    """Positive random features whose dot products estimate ``exp(q·k)``.

    ``phi(x) = exp(W x - |x|² / 2) / sqrt(m)`` for the ``m`` rows of ``W``,
    each standard normal (Choromanski et al., 2021): for any ``q`` and ``k``,
    ``E[phi(q)·phi(k)] = exp(q·k)``, and every feature is positive.

    Examples
    --------
    >>> w = np.random.default_rng(0).standard_normal((20_000, 2))
    >>> q, k = np.array([0.5, 0.0]), np.array([1.0, 0.0])
    >>> est = positive_random_features(q, w) @ positive_random_features(k, w)
    >>> print(f"{est:.2f} vs {np.exp(0.5):.2f}")  # an estimate, a few per cent off
    1.70 vs 1.65
    """
    x = real_array(x, "x", min_ndim=1, dtype=np.float64)
    w = real_array(projection, "projection", min_ndim=2, dtype=np.float64)
    sq = 0.5 * (x * x).sum(axis=-1, keepdims=True)
    return np.exp(x @ w.T - sq) / np.sqrt(w.shape[0])


def linear_attention(q, k, v, feature_map):
    """``phi(q) (phi(k)ᵀ v) / (phi(q) phi(k)ᵀ 1)``: linear in the number of keys.

    The keys' summary ``phi(k)ᵀ v`` is computed once and shared by every
    query, so the cost is ``O(n m d)`` for ``m`` features instead of
    ``O(n² d)``.

    Examples
    --------
    >>> q = k = np.eye(2); v = np.array([[1.0], [0.0]])
    >>> linear_attention(q, k, v, elu_feature_map).round(3)  # phi(e1) = [2, 1]: 5/9
    array([[0.556],
           [0.444]])
    """
    fq, fk = feature_map(q), feature_map(k)
    v = real_array(v, "v", min_ndim=2, dtype=np.float64)
    return (fq @ (fk.T @ v)) / (fq @ fk.sum(axis=0))[:, None]


def linear_attention_errors(q, k, v, feature_counts, *, repeats=10, seed=SEED):
    """How far linear attention lands from exact scaled softmax attention.

    With positive random features of each size in ``feature_counts``
    (approximating ``exp(q·k / sqrt(d_k))``), the largest absolute output
    error is averaged over ``repeats`` seeded draws of the features: one draw
    is too noisy to show the trend. With ``elu(x) + 1``, which approximates
    nothing in particular, there is nothing to draw.

    Returns
    -------
    dict
        ``random_features``: mean largest absolute error for each count;
        ``elu``: the largest absolute error of the ``elu + 1`` map.

    Examples
    --------
    >>> from sdpa_ref import example
    >>> errs = linear_attention_errors(*example.vectors(4), [16, 4096])
    >>> errs["random_features"].round(2)
    array([1.29, 0.36])
    >>> round(errs["elu"], 2)
    1.54
    """
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    exact = attention(q, k, v)
    root = q.shape[-1] ** 0.25  # split 1/sqrt(d_k) between q and k
    mean_errors = []
    for count in feature_counts:
        m = positive_int(count, "feature_counts")
        errors = []
        for r in range(positive_int(repeats, "repeats")):
            w = np.random.default_rng((seed, m, r)).standard_normal((m, q.shape[-1]))
            approx = linear_attention(
                q / root, k / root, v, lambda x, w=w: positive_random_features(x, w)
            )
            errors.append(float(np.abs(approx - exact).max()))
        mean_errors.append(float(np.mean(errors)))
    elu = linear_attention(q, k, v, elu_feature_map)
    return {
        "random_features": np.array(mean_errors),
        "elu": float(np.abs(elu - exact).max()),
    }


def scaled_scores(q, k, choice, *, gain=QK_NORM_GAIN):
    """Score rows under one of :data:`SCALE_CHOICES`.

    ``none`` is ``q·k``; ``1/√d_k`` the standard rule; ``1/d_k`` the
    muP choice, which assumes q·k grows like ``d_k``; ``QK-norm`` scales unit
    vectors, ``gain * cos(q, k)``, so the width drops out.

    Examples
    --------
    >>> q, k = np.array([[2.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> scaled_scores(q, k, "1/d_k")
    array([[1., 0.]])
    >>> scaled_scores(q, k, "QK-norm")
    array([[4., 0.]])
    """
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    d = q.shape[-1]
    if choice == "none":
        return q @ k.T
    if choice == "1/√d_k":
        return q @ k.T / np.sqrt(d)
    if choice == "1/d_k":
        return q @ k.T / d
    if choice == "QK-norm":
        qn = q / np.linalg.norm(q, axis=-1, keepdims=True)
        kn = k / np.linalg.norm(k, axis=-1, keepdims=True)
        return gain * (qn @ kn.T)
    raise ValueError(f"choice must be one of {SCALE_CHOICES}, got {choice!r}")


def scale_choice_entropies(widths, vectors, n_keys=8, n_queries=64, *, seed=SEED):
    """Entropy of a query's weights under each scale choice, at each width.

    Parameters
    ----------
    widths : sequence of int
    vectors : {"example", "random"}
        ``"example"``: query Q0 and the keys of the site's authored vectors,
        whose dot products grow like ``d_k``. ``"random"``: ``n_queries``
        queries and ``n_keys`` keys from the random model (seeded), whose
        dot products grow like ``sqrt(d_k)``; the entropy is their mean.

    Returns
    -------
    dict of str to numpy.ndarray
        Entropy in nats for each choice, one per width.

    Examples
    --------
    >>> h = scale_choice_entropies([4, 16], "example")
    >>> h["1/d_k"].round(3)  # the example grows like d_k, so 1/d_k holds it still
    array([1.193, 1.193])
    """
    result = {choice: [] for choice in SCALE_CHOICES}
    for width in widths:
        if vectors == "example":
            q, k, _ = authored.vectors(width)
            q = q[:1]
        elif vectors == "random":
            rng = np.random.default_rng((seed, width))
            q = rng.standard_normal((n_queries, width))
            k = rng.standard_normal((n_keys, width))
        else:
            raise ValueError(f"vectors must be 'example' or 'random', got {vectors!r}")
        for choice in SCALE_CHOICES:
            scores = scaled_scores(q, k, choice)
            w = np.exp(scores - scores.max(axis=-1, keepdims=True))
            result[choice].append(
                float(entropy(w / w.sum(axis=-1, keepdims=True)).mean())
            )
    return {choice: np.array(h) for choice, h in result.items()}


def gqa_equivalence(q_heads=8, kv_heads=2, n=16, d=32, *, seed=SEED):
    """Grouped-query attention against multi-head attention with copied K/V heads.

    Returns the largest absolute difference between ``attention`` called
    with ``kv_heads`` shared heads and with each shared head copied to its
    group of query heads: the scoring rule is the same, only the storage
    differs.

    Examples
    --------
    >>> gqa_equivalence() == 0.0
    True
    """
    rng = np.random.default_rng((seed, q_heads, kv_heads))
    q = rng.standard_normal((q_heads, n, d))
    k, v = rng.standard_normal((kv_heads, n, d)), rng.standard_normal((kv_heads, n, d))
    group = q_heads // kv_heads
    copied = attention(q, np.repeat(k, group, axis=0), np.repeat(v, group, axis=0))
    return float(np.abs(attention(q, k, v) - copied).max())
