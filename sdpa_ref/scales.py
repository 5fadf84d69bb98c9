"""The scale choices: what multiplies ``q·k`` before the softmax, in one table.

Each entry of :data:`TABLE` has two spellings, both accepted wherever a
scale is asked for: a short ``name`` (the training experiment's
``"sqrt"``, ``"none"``, ``"linear"``) and the ``label`` the variants page
shows (``"1/√d_k"``, ``"QK-norm"``, ...). An entry scores in two steps:
``normalise`` maps each query and key to a new vector (or leaves it as it
is), then ``factor`` multiplies the dot products of the results. Three
entries only multiply, by 1, ``1/√d_k`` or ``1/d_k``: those are
:data:`FIXED`, and :func:`scale_factor` gives their number. The two kinds
of QK-normalisation normalise first. The one labelled ``"QK-norm"`` is
only the cosine form :cite:p:`henry2020query`: it scales unit vectors by a
gain, so the width drops out. ``"RMSNorm + 1/√d_k"`` normalises and then
scales as usual, the form of the models that call it QK normalization,
ViT-22B with LayerNorm :cite:p:`dehghani2023scaling` and OLMo 2 with
RMSNorm :cite:p:`olmo2024olmo2`; of the entries, this one is the closest
to a model's QK-norm flag, not the label ``"QK-norm"``. Here it is RMSNorm
per head, without a learned weight or an epsilon, so the scores are
exactly ``√d_k · cos(q, k)``; the models add learned weights (and OLMo 2
in transformers 5.23.0 normalises the whole projection, all heads
together, with a weight per channel :cite:p:`hf_transformers_5230`), so
theirs are neither that nor bounded by ``√d_k``. ``q̂ = RMSNorm(q)`` is ``q`` divided by
its root mean square, a vector of length ``√d_k``. :doc:`The variants page
<variants>` compares them all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ._checks import positive_int, real_array, require_finite

__all__ = [  # noqa: RUF022 (source order, which the API page follows)
    "QK_NORM_GAIN",
    "unit_normalise",
    "rms_normalise",
    "Scale",
    "TABLE",
    "NAMES",
    "LABELS",
    "FIXED",
    "lookup",
    "scale_factor",
    "scaled_scores",
]

#: The fixed gain of the cosine form of QK-normalisation on this site. Henry
#: et al. (2020) learn it, so a trained model would move it.
QK_NORM_GAIN = 4.0


def _directions(x, name="x"):
    """``x`` as float64 vectors to normalise, each with a direction.

    A vector of zeros has none, and a value that is not finite none that
    float64 can say, so both are refused, naming the argument. A vector
    whose largest entry is beyond 1e150 or below 1e-150 in size is divided
    by that entry first, so that squaring it neither overflows nor loses
    digits; the division leaves its normalised form unchanged.
    """
    x = real_array(x, name, min_ndim=1, dtype=np.float64)
    if x.shape[-1] == 0:
        raise ValueError(f"{name} of shape {x.shape} has vectors of no entries")
    require_finite(x, name, ", which has no direction to normalise")
    peak = np.abs(x).max(axis=-1, keepdims=True)
    if not peak.all():
        where = tuple(int(i) for i in np.argwhere(peak == 0)[0][:-1])
        raise ValueError(
            f"{name} of shape {x.shape} has a zero vector at {where}, which has "
            f"no direction to normalise"
        )
    extreme = (peak > 1e150) | (peak < 1e-150)
    return np.where(extreme, x / peak, x) if extreme.any() else x


def unit_normalise(x):
    """Divide each vector by its length, so that ``unit(q)·unit(k) = cos(q, k)``.

    Examples
    --------
    >>> unit_normalise(np.array([[3.0, 4.0]]))
    array([[0.6, 0.8]])
    """
    x = _directions(x)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def rms_normalise(x):
    """Divide each vector by its root mean square: RMSNorm without its learned weight.

    The result has length ``sqrt(d)``, so ``q̂·k̂ = d · cos(q, k)`` for
    ``q̂ = rms_normalise(q)`` and ``k̂ = rms_normalise(k)``.

    Examples
    --------
    >>> rms_normalise(np.array([[3.0, 4.0]])).round(4)  # RMS of [3, 4] is √12.5
    array([[0.8485, 1.1314]])
    """
    x = _directions(x)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True))


def _one(d_k, gain):
    return 1.0


def _inverse_root(d_k, gain):
    return 1 / np.sqrt(d_k)


def _inverse(d_k, gain):
    return 1 / d_k


def _gain(d_k, gain):
    return gain


class Scale(NamedTuple):
    """One scale choice: its two spellings and what it does to the scores.

    The scores are ``factor(d_k, gain) · normalise(q)·normalise(k)``, with
    ``normalise`` None for the choices that only multiply.
    """

    #: The short name, as the training experiment spells it.
    name: str
    #: The label, as the variants page shows it.
    label: str
    #: What each query and key becomes first; None leaves them as they are.
    normalise: Callable[[Any], Any] | None
    #: ``factor(d_k, gain)``, the number that multiplies the dot products.
    factor: Callable[[int, Any], Any]
    #: The score it gives, as a formula.
    description: str


#: Every scale choice, in the variants page's order. No divisor, the paper's
#: 1/√d_k, μP's 1/d_k (for q·k that grows like d_k, as μP's authors expect
#: once training correlates q and k :cite:p:`yang2022tensor`), and the two
#: kinds of QK-normalisation: the cosine form, labelled ``"QK-norm"``, and
#: ``"RMSNorm + 1/√d_k"``.
#:
#: :meta hide-value:
TABLE = (
    Scale("none", "none", None, _one, "q·k"),
    Scale("sqrt", "1/√d_k", None, _inverse_root, "q·k / √d_k"),
    Scale("linear", "1/d_k", None, _inverse, "q·k / d_k"),
    Scale("cosine", "QK-norm", unit_normalise, _gain, "gain · cos(q, k)"),
    Scale(
        "rmsnorm",
        "RMSNorm + 1/√d_k",
        rms_normalise,
        _inverse_root,
        "q̂·k̂ / √d_k = √d_k · cos(q, k), q̂ = RMSNorm(q)",
    ),
)
#: The short name of each entry of :data:`TABLE`, in its order.
NAMES = tuple(entry.name for entry in TABLE)
#: The label of each entry of :data:`TABLE`, as the variants page shows it.
LABELS = tuple(entry.label for entry in TABLE)
#: The names of the entries that only multiply ``q·k``, by 1, 1/√d_k or 1/d_k.
FIXED = tuple(entry.name for entry in TABLE if entry.normalise is None)


def lookup(scale):
    """The entry of :data:`TABLE` that ``scale`` names, by name or by label.

    Examples
    --------
    >>> lookup("sqrt") is lookup("1/√d_k")
    True
    >>> lookup("QK-norm").name
    'cosine'
    """
    for entry in TABLE:
        if isinstance(scale, str) and scale in (entry.name, entry.label):
            return entry
    raise ValueError(
        f"scale must be one of {NAMES} or their labels {LABELS}, got {scale!r}"
    )


def scale_factor(scale, d_k):
    """The number that multiplies ``q·k`` for a scale that only multiplies.

    ``scale`` is one of :data:`~sdpa_ref.scales.FIXED`, by name or label
    (:func:`~sdpa_ref.scales.lookup`); the two kinds of
    QK-normalisation change ``q`` and ``k`` first, so no one number stands
    for them.

    Examples
    --------
    >>> [scale_factor(s, 64) for s in ("sqrt", "none", "linear")]
    [0.125, 1.0, 0.015625]
    >>> scale_factor("1/√d_k", 64)
    0.125
    """
    d_k = positive_int(d_k, "d_k")
    entry = lookup(scale)
    if entry.normalise is not None:
        raise ValueError(
            f"scale {scale!r} normalises q and k, so no number multiplies q·k "
            f"alone; scale_factor takes one of {FIXED}"
        )
    return float(entry.factor(d_k, None))


def scaled_scores(q, k, scale, *, gain=QK_NORM_GAIN):
    """Scores of every query against every key under a scale choice.

    ``q`` has shape ``(..., n_q, d_k)`` and ``k`` ``(..., n_k, d_k)``; the
    result, ``(..., n_q, n_k)``, is ``factor · normalise(q) normalise(k)ᵀ``
    for the entry of :data:`~sdpa_ref.scales.TABLE` that ``scale`` names,
    by name or by label (:func:`~sdpa_ref.scales.lookup`). ``none`` is
    ``q·k``; ``1/√d_k`` the standard rule; ``1/d_k`` the μP choice, for
    q·k that grows like ``d_k``; ``QK-norm``, the cosine form, scales
    unit vectors, ``gain * cos(q, k)``, so the width drops out;
    ``RMSNorm + 1/√d_k``, normalise then scale, normalises both sides with
    :func:`~sdpa_ref.scales.rms_normalise` and keeps the standard divisor,
    giving ``sqrt(d_k) * cos(q, k)``. ``gain`` matters to ``QK-norm``
    only. The two normalising choices refuse a query or key that is all
    zeros (a zero-padded row, say) or not finite, with a ``ValueError`` that
    names it; the three that only multiply do not look at the values.

    Examples
    --------
    >>> q, k = np.array([[2.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> scaled_scores(q, k, "1/d_k")
    array([[1., 0.]])
    >>> scaled_scores(q, k, "QK-norm")
    array([[4., 0.]])
    >>> scaled_scores(q, k, "RMSNorm + 1/√d_k").round(4)  # √2 · cos
    array([[1.4142, 0.    ]])
    >>> scaled_scores(q, k, "cosine", gain=2.5)  # QK-norm by its name
    array([[2.5, 0. ]])
    """
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same width d_k, got shapes {q.shape} and {k.shape}"
        )
    entry = lookup(scale)
    if entry.normalise is not None:
        q, k = _directions(q, "q"), _directions(k, "k")
        q, k = entry.normalise(q), entry.normalise(k)
    return entry.factor(q.shape[-1], gain) * (q @ np.swapaxes(k, -1, -2))
