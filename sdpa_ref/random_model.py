"""The random model behind the square-root factor, and where it breaks.

The model: every coordinate of q and of k is an independent random variable
with mean 0 and variance 1. Then each product ``q_i k_i`` has mean 0 and
variance 1, the ``d_k`` products are independent, and their sum ``q·k`` has
variance ``d_k``: standard deviation ``sqrt(d_k)``. Dividing by ``sqrt(d_k)``
brings it back to 1 at every width.

The sampler here can break each assumption on purpose: a nonzero mean,
unequal variances (shared by q and k, or not), or correlated coordinates.
Two further quantities describe one row of scores, one query against many
keys: the spread inside the row, which is what softmax sees, and how far out
the row's largest score sits.
"""

from __future__ import annotations

import numpy as np

from ._checks import nonnegative_float, positive_int, quantile_levels, real_array

__all__ = [
    "BROKEN_MODELS",
    "SEED",
    "SIMULATED_WIDTHS",
    "dot_product_mean",
    "dot_product_std",
    "expected_max_score",
    "max_score_bound",
    "measured_score_std",
    "model_sweep",
    "row_top",
    "sample_dot_products",
    "score_std",
    "standard_score_row",
    "standard_score_rows",
    "variance_profile",
    "within_row_std",
]

#: The seed of every random draw on the site, so every quoted number repeats.
SEED = 20170612  # the day "Attention Is All You Need" appeared on arXiv

_CHUNK = 4096

#: Head widths the site simulates, 1 to 1024, including the text's 512.
SIMULATED_WIDTHS = tuple(2**i for i in range(11))


def variance_profile(d_k, *, reverse=False):
    """Coordinate standard deviations whose variances run evenly from 0.1 to 1.9.

    The variances average 1, as in the text's model, but differ from one
    coordinate to the next. ``reverse=True`` gives the same variances in the
    opposite order: large where the other profile is small.

    Examples
    --------
    >>> (variance_profile(3) ** 2).round(2)
    array([0.1, 1. , 1.9])
    >>> (variance_profile(3, reverse=True) ** 2).round(2)
    array([1.9, 1. , 0.1])
    """
    variances = np.linspace(0.1, 1.9, positive_int(d_k, "d_k"))
    return np.sqrt(variances[::-1] if reverse else variances)


#: Models of the coordinates that the site simulates, the text's own model
#: and one broken assumption each. ``std`` (and ``key_std``) may be a function
#: of the width.
BROKEN_MODELS = {
    "independent, mean 0, variance 1": {},
    "mean 0.5 instead of 0": {"mean": 0.5},
    "variances spread from 0.1 to 1.9": {"std": variance_profile},
    "correlation 0.3 between coordinates": {"correlation": 0.3},
}


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


def _stds(std, d_k, name):
    sd = real_array(std, name, dtype=np.float64)
    try:
        sd = np.broadcast_to(sd, (d_k,))
    except ValueError:
        raise ValueError(
            f"{name} must be a number or have shape ({d_k},), got {sd.shape}"
        ) from None
    if not np.isfinite(sd).all() or (sd < 0).any():
        raise ValueError(f"{name} must be finite and nonnegative")
    return sd


def _model(d_k, mean, std, correlation, key_std=None):
    d_k = positive_int(d_k, "d_k")
    mu = np.broadcast_to(real_array(mean, "mean", dtype=np.float64), (d_k,))
    if not np.isfinite(mu).all():
        raise ValueError("mean must be finite")
    sd = _stds(std, d_k, "std")
    key_sd = sd if key_std is None else _stds(key_std, d_k, "key_std")
    rho = float(correlation)
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"correlation must lie in [0, 1], got {correlation!r}")
    return d_k, mu, sd, key_sd, rho


def _covariances(d_k, sd, key_sd, rho):
    corr = np.full((d_k, d_k), rho)
    np.fill_diagonal(corr, 1.0)
    return np.outer(sd, sd) * corr, np.outer(key_sd, key_sd) * corr


def dot_product_mean(d_k, *, mean=0.0, std=1.0, correlation=0.0, key_std=None):
    """Exact mean of ``q·k`` for independent q and k drawn from the model.

    ``E[q·k] = sum_i mean_i²``: zero in the text's model, and growing like
    ``d_k`` once the coordinates have a common nonzero mean.

    Examples
    --------
    >>> dot_product_mean(64, mean=0.5)
    16.0
    """
    _, mu, _, _, _ = _model(d_k, mean, std, correlation, key_std)
    return float(mu @ mu)


def dot_product_std(d_k, *, mean=0.0, std=1.0, correlation=0.0, key_std=None):
    """Exact standard deviation of ``q·k`` under a (possibly broken) model.

    q and k are independent, each with coordinate means ``mean`` and a common
    pairwise correlation ``correlation`` between its coordinates; the
    coordinates of q have standard deviations ``std``, those of k
    ``key_std`` (the same as q's unless given). So q has covariance
    ``S_q = diag(std) R diag(std)``, with ``R`` 1 on the diagonal and
    ``correlation`` elsewhere, and k likewise ``S_k``. Then

    ``Var(q·k) = tr(S_q S_k) + meanᵀ (S_q + S_k) mean``,

    which is ``d_k`` for the text's model.

    Examples
    --------
    >>> dot_product_std(512)
    22.6...
    >>> dot_product_std(512, correlation=0.5)  # grows like d_k, not sqrt(d_k)
    256.7...

    Unequal variances raise the spread when q and k share them, and can lower
    it when they do not:

    >>> print(f"{dot_product_std(512, std=variance_profile(512)):.1f}")
    25.5
    >>> shared, opposite = variance_profile(512), variance_profile(512, reverse=True)
    >>> print(f"{dot_product_std(512, std=shared, key_std=opposite):.1f}")
    19.3
    """
    d_k, mu, sd, key_sd, rho = _model(d_k, mean, std, correlation, key_std)
    cov_q, cov_k = _covariances(d_k, sd, key_sd, rho)
    return float(np.sqrt((cov_q * cov_k).sum() + mu @ (cov_q + cov_k) @ mu))


def within_row_std(d_k, *, mean=0.0, std=1.0, correlation=0.0, key_std=None):
    """Exact spread of the scores inside one row: one query, many keys.

    A row of the score matrix holds ``q·k_j`` for one query and many
    independent keys. Given the query, the row's scores have mean
    ``q·mean``, a shift shared by the whole row that softmax ignores, and
    variance ``qᵀ S_k q``. The root of that variance's average over queries,

    ``sqrt(E[qᵀ S_k q]) = sqrt(tr(S_q S_k) + meanᵀ S_k mean)``,

    is the spread softmax sees. It leaves out ``Var(q·mean) = meanᵀ S_q
    mean``, the part of :func:`dot_product_std`'s variance that moves whole
    rows up and down. With mean 0 the two spreads are the same.

    Parameters are those of :func:`dot_product_std`.

    Examples
    --------
    With coordinates of mean 0.5 at width 512, the spread over all pairs is
    ``sqrt(1.5 d_k)`` but the spread inside a row only ``sqrt(1.25 d_k)``:

    >>> print(f"{dot_product_std(512, mean=0.5):.1f}")
    27.7
    >>> print(f"{within_row_std(512, mean=0.5):.1f}")
    25.3
    >>> within_row_std(512) == dot_product_std(512)
    True
    """
    d_k, mu, sd, key_sd, rho = _model(d_k, mean, std, correlation, key_std)
    cov_q, cov_k = _covariances(d_k, sd, key_sd, rho)
    return float(np.sqrt((cov_q * cov_k).sum() + mu @ cov_k @ mu))


def sample_dot_products(
    d_k,
    n_samples=10_000,
    *,
    mean=0.0,
    std=1.0,
    correlation=0.0,
    key_std=None,
    seed=SEED,
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
        Coordinate standard deviations of q (and of k unless ``key_std``).
    correlation : float in [0, 1]
        Correlation between any two coordinates of one vector.
    key_std : float or array_like of shape (d_k,), optional
        Coordinate standard deviations of k, if different from q's.
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
    d_k, mu, sd, key_sd, rho = _model(d_k, mean, std, correlation, key_std)
    n_samples = positive_int(n_samples, "n_samples")
    rng = np.random.default_rng(seed)
    own, shared = np.sqrt(1.0 - rho), np.sqrt(rho)

    def draw(n, scale):
        z = rng.standard_normal((n, d_k))
        z *= own
        z += shared * rng.standard_normal((n, 1))
        return mu + scale * z

    out = np.empty(n_samples)
    # Samples are drawn a chunk at a time, to bound memory at wide heads.
    for start in range(0, n_samples, _CHUNK):
        n = min(_CHUNK, n_samples - start)
        q = draw(n, sd)
        out[start : start + n] = np.einsum("ij,ij->i", q, draw(n, key_sd))
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
        ``std``, ``correlation``, ``key_std``). A ``std`` or ``key_std``
        given as a callable is called with the width, so unequal variances
        can be described once.
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
            for key in ("std", "key_std"):
                if callable(kwargs.get(key)):
                    kwargs[key] = kwargs[key](w)
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

    Multiplying it by ``s`` gives a row whose standard deviation is ``s``, the
    x-axis of the saturation figure. It is the first row of
    :func:`sdpa_ref.random_model.standard_score_rows` with the same seed.

    Examples
    --------
    >>> row = standard_score_row(8)
    >>> print(f"{row.mean():.3f} {row.std():.3f}")
    0.000 1.000
    """
    return standard_score_rows(n_keys, 1, seed=seed)[0]


def standard_score_rows(n_keys, n_rows, *, seed=SEED):
    """``n_rows`` seeded rows of ``n_keys`` scores, each of mean 0 and deviation 1.

    Each row is drawn as independent standard normals and then centred and
    divided by its own standard deviation, so that every row, stretched by
    ``s``, has standard deviation exactly ``s``. One row is one draw; these
    rows show how much a quantity computed from one of them varies from row
    to row.

    Parameters
    ----------
    n_keys : int
        Scores per row, at least 2.
    n_rows : int
        Number of rows.
    seed : int, optional
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    numpy.ndarray, shape (n_rows, n_keys)

    Examples
    --------
    >>> rows = standard_score_rows(8, 3)
    >>> bool(np.allclose(rows.mean(axis=1), 0)), bool(np.allclose(rows.std(axis=1), 1))
    (True, True)
    >>> bool(np.array_equal(rows[0], standard_score_row(8)))
    True
    """
    n_keys = positive_int(n_keys, "n_keys")
    n_rows = positive_int(n_rows, "n_rows")
    if n_keys < 2:
        raise ValueError(f"n_keys must be at least 2 to have a spread, got {n_keys}")
    rows = np.random.default_rng(seed).standard_normal((n_rows, n_keys))
    rows -= rows.mean(axis=1, keepdims=True)
    return rows / rows.std(axis=1, keepdims=True)


def expected_max_score(n_keys, *, std=1.0, n_rows=10_000, seed=SEED):
    """Expected largest of ``n_keys`` independent normal scores, by simulation.

    Under the random model with normal coordinates (as the site samples
    them), the scores ``q·k_j`` of one row are, given the query, independent
    normal numbers with mean 0 and standard deviation ``‖q‖``, which is close
    to ``sqrt(d_k)``. So the row's largest score, in standard deviations, is
    the largest of ``n_keys`` independent standard normals. Its mean grows
    without limit as the row gets longer, slowly: see
    :func:`max_score_bound`.

    Parameters
    ----------
    n_keys : int
        Scores in the row.
    std : float, optional
        Standard deviation of one score; the result is in the same units.
    n_rows : int, optional
        Simulated rows to average over.
    seed : int, optional

    Returns
    -------
    float

    Examples
    --------
    The mean of the larger of two standard normals is ``1/sqrt(pi)``:

    >>> print(f"{expected_max_score(2, n_rows=200_000):.2f} {1 / np.sqrt(np.pi):.2f}")
    0.56 0.56
    >>> print(f"{expected_max_score(1024):.1f}")
    3.2
    """
    n_keys = positive_int(n_keys, "n_keys")
    n_rows = positive_int(n_rows, "n_rows")
    scale = nonnegative_float(std, "std")
    rng = np.random.default_rng(seed)
    rows_at_once = max(1, 2**20 // n_keys)  # bounds memory for long rows
    total = 0.0
    for start in range(0, n_rows, rows_at_once):
        n = min(rows_at_once, n_rows - start)
        total += rng.standard_normal((n, n_keys)).max(axis=1).sum()
    return float(scale * total / n_rows)


def max_score_bound(n_keys, *, std=1.0):
    """Upper bound ``std * sqrt(2 ln n_keys)`` on the mean of a row's largest score.

    For any ``n`` normal scores with mean 0 and standard deviation 1,
    independent or not, ``E[max] <= sqrt(2 ln n)``: for every ``t > 0``,
    ``exp(t E[max]) <= E[exp(t max)] <= sum_j E[exp(t s_j)] = n exp(t²/2)``,
    and ``t = sqrt(2 ln n)`` gives the bound. The ratio of the true mean to the
    bound tends to 1 as ``n`` grows, but slowly; at realistic row lengths the
    bound overstates the mean by a sizeable margin.

    Examples
    --------
    >>> print(f"{max_score_bound(1024):.2f}")
    3.72
    >>> bool(expected_max_score(1024) < max_score_bound(1024))
    True
    """
    n_keys = positive_int(n_keys, "n_keys")
    return float(std) * float(np.sqrt(2.0 * np.log(n_keys)))


def row_top(n_keys, *, std=1.0, n_rows=5_000, seed=SEED, quantiles=(0.25, 0.5, 0.75)):
    """How far a row's largest score leads the next, and the weight it gets.

    Rows of ``n_keys`` independent normal scores with mean 0 and standard
    deviation ``std``, as :func:`expected_max_score` draws them. What makes a
    softmax saturate is the lead of the largest score over the second
    largest: softmax gives the top key ``exp(gap)`` times the runner-up's
    weight (:func:`sdpa_ref.spread.top_gap`). This returns quantiles over
    the rows of that gap, in the scores' units, and of the top key's weight
    when the row is put through softmax as it is.

    Parameters
    ----------
    n_keys : int
        Scores per row, at least 2.
    std : float, optional
        Standard deviation of one score.
    n_rows : int, optional
    seed : int, optional
    quantiles : sequence of float, optional

    Returns
    -------
    dict of numpy.ndarray
        ``gap`` and ``top_weight``, one value per quantile.

    Examples
    --------
    The gap scales with the spread; the weight does not, and saturates:

    >>> narrow = row_top(1024)
    >>> wide = row_top(1024, std=score_std(512))
    >>> bool(np.allclose(wide["gap"], score_std(512) * narrow["gap"]))
    True
    >>> print(f"{narrow['top_weight'][1]:.3f} {wide['top_weight'][1]:.3f}")
    0.015 0.989
    """
    n_keys = positive_int(n_keys, "n_keys")
    n_rows = positive_int(n_rows, "n_rows")
    if n_keys < 2:
        raise ValueError(f"n_keys must be at least 2 to have a gap, got {n_keys}")
    scale = nonnegative_float(std, "std")
    levels = quantile_levels(quantiles)
    rng = np.random.default_rng(seed)
    rows_at_once = max(1, 2**20 // n_keys)  # bounds memory for long rows
    gaps, tops = [], []
    for start in range(0, n_rows, rows_at_once):
        rows = scale * rng.standard_normal((min(rows_at_once, n_rows - start), n_keys))
        two = np.sort(np.partition(rows, -2, axis=1)[:, -2:], axis=1)
        gaps.append(two[:, 1] - two[:, 0])
        # The top weight is 1 / sum_j exp(s_j - max): no softmax of the whole row.
        tops.append(1.0 / np.exp(rows - two[:, 1:]).sum(axis=1))
    return {
        "gap": np.quantile(np.concatenate(gaps), levels),
        "top_weight": np.quantile(np.concatenate(tops), levels),
    }
