"""Attention taken apart into its steps, each kept for inspection."""

from __future__ import annotations

import numpy as np

from ._checks import positive_int, real_matrices
from .core import attention, causal_mask, naive_softmax, softmax
from .cost import score_bytes
from .precision import BFLOAT16_MAX

__all__ = ["attention_steps", "overflow_threshold", "score_memory"]


def attention_steps(q, k, v, *, is_causal=False):
    """Every intermediate matrix of scaled dot-product attention, in order.

    For 2-D ``q`` (n_q, d_k), ``k`` (n_k, d_k), ``v`` (n_k, d_v):

    1. ``scores = q kᵀ``, one per query-key pair;
    2. ``scaled = scores / sqrt(d_k)``;
    3. ``mask``, the additive mask ``M``: 0 where a key is allowed, ``-inf``
       where not (top-left causal, or all 0), and ``masked``, the logits
       ``L = scaled + M``; ``allowed`` and ``forbidden`` mark the pairs
       that may and may not take part, as booleans;
    4. ``shifted``: each row of ``L`` minus its maximum, so the largest is 0;
    5. ``weights = softmax(L)``, each row summing to 1;
    6. ``output = weights v``.

    The result also holds ``naive_weights``, the softmax without the shift,
    and ``shift_effect``, the largest difference between the two (zero up
    to rounding), and it checks ``output`` against :func:`sdpa_ref.attention`.

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
    q, k, v = real_matrices(
        q, k, v, "attention_steps takes 2-D q, k, v, got shapes {q}, {k}, {v}"
    )
    output = attention(q, k, v, is_causal=is_causal)  # validates the shapes too
    scores = q @ k.T
    scaled = scores / np.sqrt(q.shape[-1])
    allowed = causal_mask(*scores.shape) if is_causal else np.ones(scores.shape, bool)
    mask = np.where(allowed, 0.0, -np.inf)
    masked = scaled + mask
    shifted = masked - masked.max(axis=-1, keepdims=True)
    weights = softmax(masked)
    naive_weights = naive_softmax(masked)
    return {
        "scores": scores,
        "scaled": scaled,
        "allowed": allowed,
        "forbidden": ~allowed,
        "mask": mask,
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


def score_memory(n, *, heads, layers, batch=1, itemsize=2):
    """Bytes to hold ``n x n`` attention scores, from one head to a whole batch.

    Returns a dict: ``"head"`` (one head of one layer, one sequence),
    ``"layer"`` (all ``heads`` of a layer), ``"model"`` (all ``layers``) and
    ``"batch"`` (``batch`` sequences), each what an implementation that
    materialised every score matrix at once would hold.

    Examples
    --------
    >>> mem = score_memory(4096, heads=32, layers=32, batch=8)
    >>> {name: b / 2**30 for name, b in mem.items()}
    {'head': 0.03125, 'layer': 1.0, 'model': 32.0, 'batch': 256.0}
    """
    heads = positive_int(heads, "heads")
    layers = positive_int(layers, "layers")
    batch = positive_int(batch, "batch")
    head = score_bytes(n, n, itemsize=itemsize)
    return {
        "head": head,
        "layer": heads * head,
        "model": layers * heads * head,
        "batch": batch * layers * heads * head,
    }
