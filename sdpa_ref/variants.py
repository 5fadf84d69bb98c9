"""Variants of the scoring rule: shared K/V heads, linear attention, other scales."""

from __future__ import annotations

import numpy as np

from . import example as authored
from . import scales
from ._checks import positive_int, real_array
from .core import attention
from .cost import kv_cache_bytes
from .published import (  # the published numbers this module uses or names
    MISTRAL_7B_WINDOW,
    MODEL_SHAPES,
)
from .random_model import SEED
from .scales import QK_NORM_GAIN, scaled_scores  # noqa: F401 (the page's name)
from .spread import entropy

__all__ = [
    "MISTRAL_7B_WINDOW",
    "MODEL_SHAPES",
    "RANDOM_FEATURE_DRAWS",
    "SCALE_CHOICES",
    "elu_feature_map",
    "gqa_equivalence",
    "kv_cache_table",
    "linear_attention",
    "linear_attention_errors",
    "positive_feature_relative_mse",
    "positive_random_features",
    "random_feature_error_by_query",
    "scale_choice_entropies",
    "softmax_kernel_inputs",
    "window_reach",
]


#: The scale rules compared on the variants page, in order, the labels of
#: :data:`sdpa_ref.scales.TABLE`. ``QK-norm`` is the
#: cosine form (unit vectors times a gain, no ``1/√d_k``); ``RMSNorm + 1/√d_k``
#: normalises q and k to root-mean-square 1 and keeps the standard divisor.
SCALE_CHOICES = scales.LABELS

#: Seeded draws of the random features that each mean error averages over.
#: With ten, the mean at one feature count could sit level with the next
#: (a standard error near 0.08 against steps of 0.15 to 0.25); with 200 the
#: standard errors are a few hundredths, and the means fall at every step.
RANDOM_FEATURE_DRAWS = 200


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


def window_reach(left, layers):
    """How far back a token can draw information through stacked windows.

    A causal sliding window that shows each query itself and the ``left``
    keys before it (``window=(left, 0)``) lets each layer look ``left``
    positions back. Information from further back reaches a token only by
    hopping from layer to layer, so after ``layers`` layers it spans at most
    ``layers * left`` positions: the distance at which the ``layers``-fold
    product of the window mask (see :func:`sdpa_ref.masks.sliding_window_mask`)
    first becomes zero.

    Examples
    --------
    A window of two keys to the left over 4 layers reaches 8 positions back;
    Mistral 7B's W = 4096 positions back over its 32 layers, 131,072.

    >>> window_reach(2, 4), window_reach(4096, 32)
    (8, 131072)
    """
    left = positive_int(left, "left")
    return positive_int(layers, "layers") * left


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


def softmax_kernel_inputs(q, k):
    """``q`` and ``k`` over ``d_k ** (1/4)``: ``exp(q'·k')`` is then the softmax kernel.

    Random features estimate ``exp(x·y)``. Scaled attention needs
    ``exp(q·k / sqrt(d_k))``, so the divisor is split evenly between the two
    sides before the feature map is applied.

    Examples
    --------
    >>> q, k = np.array([[2.0, 2.0, -1.0, 3.0]]), np.array([[1.0, 1.0, 0.0, 0.0]])
    >>> qs, ks = softmax_kernel_inputs(q, k)
    >>> print(f"{(qs @ ks.T).item():.6f}, {(q @ k.T).item() / 4**0.5:.6f}")  # q·k/√d_k
    2.000000, 2.000000
    """
    q = real_array(q, "q", min_ndim=1, dtype=np.float64)
    k = real_array(k, "k", min_ndim=1, dtype=np.float64)
    root = q.shape[-1] ** 0.25
    return q / root, k / root


def positive_feature_relative_mse(x, y, feature_count):
    """Mean squared error of the positive-feature estimate of ``exp(x·y)``, relative.

    Lemma 2 of Choromanski et al. (2021) gives, for ``m`` independent
    features, ``MSE = exp(|x+y|²) exp(x·y)² (1 - exp(-|x+y|²)) / m``.
    Divided by the squared kernel ``exp(x·y)²`` this is
    ``(exp(|x+y|²) - 1) / m``: it grows exponentially with the squared length
    of ``x + y`` and falls only like ``1 / m``.

    Examples
    --------
    >>> x = y = np.array([0.5, 0.0])  # |x + y|² = 1
    >>> round(positive_feature_relative_mse(x, y, 1), 4)  # e - 1
    1.7183
    >>> longer = positive_feature_relative_mse(2 * x, 2 * y, 1)  # |x + y|² = 4
    >>> round(longer, 2)  # e⁴ - 1: four times the squared length, 31 times the error
    53.6
    """
    x = real_array(x, "x", min_ndim=1, dtype=np.float64)
    y = real_array(y, "y", min_ndim=1, dtype=np.float64)
    m = positive_int(feature_count, "feature_count")
    z = x + y
    mse = np.expm1((z * z).sum(axis=-1)) / m
    return float(mse) if mse.ndim == 0 else mse


def _random_feature_outputs(q, k, v, count, *, repeats, seed):
    """Linear attention with ``count`` positive random features, one per seeded draw."""
    qs, ks = softmax_kernel_inputs(q, k)
    m = positive_int(count, "feature_counts")
    for r in range(positive_int(repeats, "repeats")):
        w = np.random.default_rng((seed, m, r)).standard_normal((m, q.shape[-1]))
        yield linear_attention(qs, ks, v, lambda x, w=w: positive_random_features(x, w))


def linear_attention_errors(
    q, k, v, feature_counts, *, repeats=RANDOM_FEATURE_DRAWS, seed=SEED
):
    """How far linear attention lands from exact scaled softmax attention.

    With positive random features of each size in ``feature_counts``
    (approximating ``exp(q·k / sqrt(d_k))`` through
    :func:`softmax_kernel_inputs`), the largest absolute output error is
    averaged over ``repeats`` seeded draws of the features: one draw is too
    noisy to show the trend, and a few are too noisy to compare neighbouring
    counts (:data:`RANDOM_FEATURE_DRAWS`). With ``elu(x) + 1``, which
    approximates nothing in particular, there is nothing to draw.

    Returns
    -------
    dict
        ``random_features``: mean largest absolute error for each count;
        ``random_features_se``: the standard error of each mean (the sample
        standard deviation over the draws, divided by the square root of
        ``repeats``); ``elu``: the largest absolute error of the ``elu + 1``
        map.

    Examples
    --------
    >>> from sdpa_ref import example
    >>> errs = linear_attention_errors(*example.vectors(4), [16, 4096])
    >>> errs["random_features"].round(2), errs["random_features_se"].round(2)
    (array([1.24, 0.4 ]), array([0.03, 0.01]))
    >>> round(errs["elu"], 2)
    1.54
    """
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    exact = attention(q, k, v)
    repeats = positive_int(repeats, "repeats")
    if repeats < 2:
        raise ValueError(
            f"repeats must be at least 2 for a standard error, got {repeats}"
        )
    means, standard_errors = [], []
    for count in feature_counts:
        draws = _random_feature_outputs(q, k, v, count, repeats=repeats, seed=seed)
        errors = np.array([np.abs(a - exact).max() for a in draws])
        means.append(float(errors.mean()))
        standard_errors.append(float(errors.std(ddof=1) / np.sqrt(repeats)))
    elu = linear_attention(q, k, v, elu_feature_map)
    return {
        "random_features": np.array(means),
        "random_features_se": np.array(standard_errors),
        "elu": float(np.abs(elu - exact).max()),
    }


def random_feature_error_by_query(
    q, k, v, feature_count, *, repeats=RANDOM_FEATURE_DRAWS, seed=SEED
):
    """Per query: the longest ``q' + k'``, Lemma 2's error factor, the output error.

    ``q'`` and ``k'`` are the inputs of the feature map
    (:func:`softmax_kernel_inputs`). For each query, ``norm_sq`` is the
    largest ``|q' + k'|²`` over the keys, ``mse_factor`` is
    ``exp(norm_sq) - 1``, ``m`` times the relative mean squared error that
    :func:`positive_feature_relative_mse` gives for that pair, and
    ``output_error`` is the largest absolute error of that query's output,
    averaged over the same seeded draws as :func:`linear_attention_errors`.

    Returns
    -------
    dict of str to numpy.ndarray
        ``norm_sq``, ``mse_factor`` and ``output_error``, one entry per query.

    Examples
    --------
    >>> from sdpa_ref import example
    >>> r = random_feature_error_by_query(*example.vectors(4), 4096)
    >>> r["norm_sq"].round(2)
    array([14. ,  8.5,  9. ,  3. ])
    >>> r["output_error"].round(2)  # the shortest vectors, Q3, fare best
    array([0.3 , 0.24, 0.21, 0.06])
    """
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    qs, ks = softmax_kernel_inputs(q, k)
    z = qs[:, None, :] + ks[None, :, :]
    norm_sq = (z * z).sum(axis=-1).max(axis=-1)
    exact = attention(q, k, v)
    errors = [
        np.abs(approx - exact).max(axis=-1)
        for approx in _random_feature_outputs(
            q, k, v, feature_count, repeats=repeats, seed=seed
        )
    ]
    return {
        "norm_sq": norm_sq,
        "mse_factor": np.expm1(norm_sq),
        "output_error": np.mean(errors, axis=0),
    }


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
