"""The random model behind the square-root factor, and where it breaks.

The model: every coordinate of q and of k is an independent random variable
with mean 0 and variance 1. Then each product ``q_i k_i`` has mean 0 and
variance 1, the ``d_k`` products are independent, and their sum ``q·k`` has
variance ``d_k``: standard deviation ``sqrt(d_k)``. Dividing by ``sqrt(d_k)``
brings it back to 1 at every width.

The sampler here can break each assumption on purpose: a nonzero mean,
unequal variances, or correlated coordinates.
"""

from __future__ import annotations

import numpy as np

from ._checks import positive_int, real_array

__all__ = [
    "BROKEN_MODELS",
    "SEED",
    "SIMULATED_WIDTHS",
    "dot_product_mean",
    "dot_product_std",
    "measured_score_std",
    "model_sweep",
    "sample_dot_products",
    "score_std",
    "standard_score_row",
]

#: The seed of every random draw on the site, so every quoted number repeats.
SEED = 20170612  # the day "Attention Is All You Need" appeared on arXiv

_CHUNK = 4096

#: Head widths the site simulates, 1 to 1024, including the text's 512.
SIMULATED_WIDTHS = tuple(2**i for i in range(11))

#: Models of the coordinates that the site simulates: the text's own model,
#: and one broken assumption each. ``std`` may be a function of the width.
BROKEN_MODELS = {
    "independent, mean 0, variance 1": {},
    "mean 0.5 instead of 0": {"mean": 0.5},
    "variances spread from 0.1 to 1.9": {
        "std": lambda d_k: np.sqrt(np.linspace(0.1, 1.9, d_k)),
    },
    "correlation 0.3 between coordinates": {"correlation": 0.3},
}  # samples drawn at once, to bound memory at wide heads


def score_std(d_k):
    """Standard deviation of ``q·k`` under the random model: ``sqrt(d_k)``.

    It is a typical size, not a bound: individual scores can be several
    times larger.

    Parameters
    ----------
    d_k : int or array_like of int
        Head width(s), at least 1.

    Examples
    --------
    >>> score_std(4)
    2.0
    >>> score_std(512)
    22.6...
    """
    if np.ndim(d_k) == 0:
        return float(np.sqrt(positive_int(d_k, "d_k")))
    widths = np.asarray(d_k)
    if widths.dtype.kind not in "iu" or (widths < 1).any():
        raise ValueError(f"d_k must hold integers of at least 1, got {widths!r}")
    return np.sqrt(widths)


def _model(d_k, mean, std, correlation):
    d_k = positive_int(d_k, "d_k")
    mu = np.broadcast_to(real_array(mean, "mean", dtype=np.float64), (d_k,))
    sd = real_array(std, "std", dtype=np.float64)
    try:
        sd = np.broadcast_to(sd, (d_k,))
    except ValueError:
        raise ValueError(
            f"std must be a number or have shape ({d_k},), got {sd.shape}"
        ) from None
    if not (np.isfinite(mu).all() and np.isfinite(sd).all()) or (sd < 0).any():
        raise ValueError("mean must be finite, std finite and nonnegative")
    rho = float(correlation)
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"correlation must lie in [0, 1], got {correlation!r}")
    return d_k, mu, sd, rho


def dot_product_mean(d_k, *, mean=0.0, std=1.0, correlation=0.0):
    """Exact mean of ``q·k`` for independent q and k drawn from the model.

    ``E[q·k] = sum_i mean_i²``: zero in the text's model, and growing like
    ``d_k`` once the coordinates have a common nonzero mean.

    Examples
    --------
    >>> dot_product_mean(64, mean=0.5)
    16.0
    """
    _, mu, _, _ = _model(d_k, mean, std, correlation)
    return float(mu @ mu)


def dot_product_std(d_k, *, mean=0.0, std=1.0, correlation=0.0):
    """Exact standard deviation of ``q·k`` under a (possibly broken) model.

    q and k are independent, each with coordinate means ``mean``, standard
    deviations ``std`` and a common pairwise correlation ``correlation``, so
    each has covariance ``S = diag(std) R diag(std)`` with ``R`` 1 on the
    diagonal and ``correlation`` elsewhere. Then
    ``Var(q·k) = ||S||_F² + 2 meanᵀ S mean``, which is ``d_k`` for the
    text's model.

    Examples
    --------
    >>> dot_product_std(512)
    22.6...
    >>> dot_product_std(512, correlation=0.5)  # grows like d_k, not sqrt(d_k)
    256.7...
    """
    d_k, mu, sd, rho = _model(d_k, mean, std, correlation)
    corr = np.full((d_k, d_k), rho)
    np.fill_diagonal(corr, 1.0)
    cov = np.outer(sd, sd) * corr
    return float(np.sqrt((cov * cov).sum() + 2 * mu @ cov @ mu))


def sample_dot_products(
    d_k, n_samples=10_000, *, mean=0.0, std=1.0, correlation=0.0, seed=SEED
):
    """Draw ``q·k`` for independent random q and k, seeded.

    Each coordinate is ``mean + std * (sqrt(1 - correlation) z_i +
    sqrt(correlation) z_0)`` with standard normal ``z``: the ``z_0`` shared by
    the coordinates of one vector correlates them. With the defaults this is
    the text's model exactly.

    Parameters
    ----------
    d_k : int
        Head width.
    n_samples : int
        Number of (q, k) pairs.
    mean : float or array_like of shape (d_k,)
        Coordinate means.
    std : float or array_like of shape (d_k,)
        Coordinate standard deviations.
    correlation : float in [0, 1]
        Correlation between any two coordinates of one vector.
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    numpy.ndarray, shape (n_samples,)

    Examples
    --------
    >>> samples = sample_dot_products(512, 20_000)
    >>> print(f"{samples.std():.1f}")
    22.6
    """
    d_k, mu, sd, rho = _model(d_k, mean, std, correlation)
    n_samples = positive_int(n_samples, "n_samples")
    rng = np.random.default_rng(seed)
    own, shared = np.sqrt(1.0 - rho), np.sqrt(rho)

    def draw(n):
        z = rng.standard_normal((n, d_k))
        z *= own
        z += shared * rng.standard_normal((n, 1))
        return mu + sd * z

    out = np.empty(n_samples)
    for start in range(0, n_samples, _CHUNK):
        n = min(_CHUNK, n_samples - start)
        out[start : start + n] = np.einsum("ij,ij->i", draw(n), draw(n))
    return out


def measured_score_std(widths, n_samples=10_000, *, seed=SEED, **model):
    """Monte Carlo standard deviation of ``q·k`` at each width.

    Each width gets its own stream, seeded from ``seed`` and the width, so
    adding a width leaves the others' numbers unchanged.

    Examples
    --------
    Sampling noise is about 1% at 20,000 pairs, so compare with ``sqrt(d_k)``:

    >>> measured = measured_score_std([4, 512], 20_000)
    >>> (measured / score_std(np.array([4, 512]))).round(2)
    array([1.01, 1.01])
    """
    widths = [positive_int(int(w), "widths") for w in widths]
    return np.array(
        [
            sample_dot_products(w, n_samples, seed=(seed, w), **model).std()
            for w in widths
        ]
    )


def model_sweep(widths, models, n_samples=10_000, *, seed=SEED):
    """Measured and exact ``q·k`` statistics for several models over widths.

    Parameters
    ----------
    widths : sequence of int
    models : dict of str to dict
        Name to keyword arguments of :func:`sample_dot_products` (``mean``,
        ``std``, ``correlation``). A ``std`` given as a callable is called
        with the width, so unequal variances can be described once.
    n_samples : int
    seed : int

    Returns
    -------
    dict of str to dict of numpy.ndarray
        For each model, one entry per width: ``measured_std``, ``exact_std``
        and ``exact_mean`` of ``q·k``; ``measured_scaled_std``, the measured
        standard deviation of ``q·k / sqrt(d_k)``; and ``exact_vs_model``,
        the exact standard deviation over the text's ``sqrt(d_k)``.

    Examples
    --------
    >>> sweep = model_sweep([64], {"correlated": {"correlation": 0.5}}, 20_000)
    >>> print(f"{sweep['correlated']['exact_std'][0]:.1f}")
    32.7
    """
    widths = [positive_int(int(w), "widths") for w in widths]
    result = {}
    for name, model in models.items():
        rows = []
        for w in widths:
            kwargs = dict(model)
            if callable(kwargs.get("std")):
                kwargs["std"] = kwargs["std"](w)
            rows.append(
                (
                    measured_score_std([w], n_samples, seed=seed, **kwargs)[0],
                    dot_product_std(w, **kwargs),
                    dot_product_mean(w, **kwargs),
                )
            )
        measured, exact, mean = np.array(rows).T
        root = np.sqrt(widths)
        result[name] = {
            "measured_std": measured,
            "exact_std": exact,
            "exact_mean": mean,
            "measured_scaled_std": measured / root,
            "exact_vs_model": exact / root,
        }
    return result


def standard_score_row(n_keys, *, seed=SEED):
    """A seeded row of ``n_keys`` scores with mean 0 and standard deviation 1.

    Multiplying it by ``s`` gives a row whose spread is ``s`` standard
    deviations, the x-axis of the saturation figure.

    Examples
    --------
    >>> row = standard_score_row(8)
    >>> print(f"{row.mean():.3f} {row.std():.3f}")
    0.000 1.000
    """
    n_keys = positive_int(n_keys, "n_keys")
    if n_keys < 2:
        raise ValueError(f"n_keys must be at least 2 to have a spread, got {n_keys}")
    row = np.random.default_rng(seed).standard_normal(n_keys)
    row -= row.mean()
    return row / row.std()
