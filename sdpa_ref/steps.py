"""Attention taken apart into its steps, each kept for inspection."""

from __future__ import annotations

import numpy as np

from ._checks import real_array
from .core import attention, causal_mask, naive_softmax, softmax
from .precision import BFLOAT16_MAX

__all__ = ["attention_steps", "overflow_threshold"]


def attention_steps(q, k, v, *, is_causal=False):
    """Every intermediate matrix of scaled dot-product attention, in order.

    For 2-D ``q`` (n_q, d_k), ``k`` (n_k, d_k), ``v`` (n_k, d_v):

    1. ``scores = q kᵀ``, one per query-key pair;
    2. ``scaled = scores / sqrt(d_k)``;
    3. ``masked``: forbidden logits set to ``-inf`` (top-left causal mask);
    4. ``shifted``: each row minus its maximum, so the largest is 0;
    5. ``weights = softmax(masked)``, each row summing to 1;
    6. ``output = weights v``.

    The result also holds ``naive_weights``, the softmax without the shift,
    and ``shift_effect``, the largest difference between the two (zero up
    to rounding), and it checks ``output`` against :func:`attention`.

    Returns
    -------
    dict of numpy.ndarray

    Examples
    --------
    >>> from sdpa_ref import example
    >>> Q, K, V = example.vectors(4)
    >>> steps = attention_steps(Q, K, V, is_causal=True)
    >>> steps["scores"][0]
    array([ 4.,  0.,  2., -4.])
    >>> steps["masked"][0]
    array([ 2., -inf, -inf, -inf])
    >>> steps["weights"][1].round(3)
    array([0.731, 0.269, 0.   , 0.   ])
    """
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    v = real_array(v, "v", min_ndim=2, dtype=np.float64)
    if q.ndim != 2 or k.ndim != 2 or v.ndim != 2:
        raise ValueError(
            f"attention_steps takes 2-D q, k, v, got shapes {q.shape}, {k.shape}, "
            f"{v.shape}"
        )
    output = attention(q, k, v, is_causal=is_causal)  # validates the shapes too
    scores = q @ k.T
    scaled = scores / np.sqrt(q.shape[-1])
    allowed = causal_mask(*scores.shape) if is_causal else np.ones(scores.shape, bool)
    masked = np.where(allowed, scaled, -np.inf)
    shifted = masked - masked.max(axis=-1, keepdims=True)
    weights = softmax(masked)
    naive_weights = naive_softmax(masked)
    return {
        "scores": scores,
        "scaled": scaled,
        "allowed": allowed,
        "masked": masked,
        "shifted": shifted,
        "weights": weights,
        "naive_weights": naive_weights,
        "shift_effect": float(np.abs(weights - naive_weights).max()),
        "output": weights @ v,
        "reference_gap": float(np.abs(weights @ v - output).max()),
    }


def overflow_threshold(dtype):
    """The largest ``x`` whose ``exp(x)`` is finite in ``dtype``: ``ln(max)``.

    Past it the naive softmax's numerator becomes ``inf`` and the row NaN.

    Examples
    --------
    >>> for name in ("float16", "bfloat16", "float32", "float64"):
    ...     print(name, f"{overflow_threshold(name):.2f}")
    float16 11.09
    bfloat16 88.72
    float32 88.72
    float64 709.78
    """
    if dtype == "bfloat16":  # not a NumPy type; see sdpa_ref.precision
        return float(np.log(BFLOAT16_MAX))
    info = np.finfo(np.dtype(dtype))
    return float(np.log(np.float64(info.max)))
