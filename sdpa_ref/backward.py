"""The backward pass of attention, dense and tiled, as FlashAttention-2 does it.

For ``S`` the final logits, ``P = exp(S - lse)`` the weights, ``Z = P ∘ M /
(1 - p)`` after dropout and ``O = Z V``, the gradients are::

    dV = Zᵀ dO
    dP = (dO Vᵀ) ∘ M / (1 - p)
    D  = rowsum(dO ∘ O)            # = rowsum(dP ∘ P), one number per query
    dS = P ∘ (dP - D)
    dQ = scale · dS' K,   dK = scale · dS'ᵀ Q

where ``dS'`` is ``dS`` carried back through the soft-cap. Dao (2023),
FlashAttention-2, Algorithm 2: ``D`` and ``lse`` are all that the backward
needs from the forward besides ``O``, so ``P`` can be recomputed one key
block at a time. A sink is a key with logit ``s_h`` and no value, so its
weight is ``exp(s_h - lse)`` and its gradient ``-Σ exp(s_h - lse) D``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._checks import first_index, positive_int, real_array
from .core import _dense_forward, _empty_row_error, _prepare, _Problem
from .mods import softcap_score_grad

__all__ = ["Gradients", "attention_backward", "tiled_attention_backward"]


class Gradients(NamedTuple):
    """Gradients of a scalar loss with respect to attention's inputs.

    ``dq``, ``dk`` and ``dv`` have the shapes of q, k and v (with grouped
    heads, summed over each group). ``dmask`` is the gradient with respect to
    a float ``mask``, reduced to its shape, else None; ``dsink_logits`` has
    shape (H,) when ``sink_logits`` were given, else None.
    """

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    dmask: np.ndarray | None = None
    dsink_logits: np.ndarray | None = None


def attention_backward(q, k, v, grad_out, **options):
    """Gradients of attention for an upstream gradient ``grad_out``.

    Runs the dense forward, then the backward over all keys at once.

    Parameters
    ----------
    q, k, v : array_like
        As for :func:`sdpa_ref.attention`.
    grad_out : array_like, shape (..., n_q, d_v)
        The gradient of the loss with respect to attention's output.
    **options
        Every option of :func:`sdpa_ref.attention` (``mask``, ``is_causal``,
        ``scale``, ``align``, ``window``, ``sink_tokens``, ``chunk``,
        ``softcap``, ``sink_logits``, ``q_lengths``, ``k_lengths``,
        ``dropout_mask``, ``dropout_p``, ``empty_rows``, ``check_finite``).
        ``empty_rows="nan"`` is refused: a NaN output has no gradient.

    Returns
    -------
    Gradients
        ``(dq, dk, dv, dmask, dsink_logits)``, float64.

    Examples
    --------
    The output is a weighted average of the values, so its gradient with
    respect to v is the weights (transposed):

    >>> q, k, v = np.eye(2), np.eye(2), np.eye(2)
    >>> g = attention_backward(q, k, v, grad_out=np.ones((2, 2)))
    >>> g.dv.round(3)
    array([[1., 1.],
           [1., 1.]])
    >>> float(np.abs(g.dq).max())
    0.0
    """
    p = _prepare(q, k, v, **options)
    _refuse_nan_rows(p)
    d_out = _grad_like(grad_out, "grad_out", p.out_shape)
    out, _, lse = _dense_forward(p, want_weights=False)
    return _backward(p, out, d_out, lse, p.n_k)


def tiled_attention_backward(  # noqa: PLR0917 (the forward's saved tensors)
    q, k, v, out, grad_out, lse, *, block_size=128, **options
):
    """FlashAttention-2's backward: recompute ``P`` block by block from ``lse``.

    Never holds an ``n_q x n_k`` array: for each block of ``block_size``
    keys it recomputes that block's logits, ``P = exp(S - lse)``, and adds
    the block's share to ``dq`` while writing the block's ``dk`` and ``dv``.
    The results equal :func:`attention_backward` to about 1e-12.

    Parameters
    ----------
    q, k, v : array_like
        As for :func:`sdpa_ref.attention`.
    out : array_like, shape (..., n_q, d_v)
        The forward output, from ``tiled_attention(..., return_lse=True)``.
    grad_out : array_like, shape (..., n_q, d_v)
        The gradient of the loss with respect to ``out``.
    lse : array_like, shape (..., n_q)
        The forward's log-sum-exp, ``-inf`` for an empty or padded row.
    block_size : int
        Keys per block, at least 1.
    **options
        As for :func:`attention_backward`; the same as the forward's.

    Returns
    -------
    Gradients

    Examples
    --------
    >>> from sdpa_ref import example, tiled_attention
    >>> Q, K, V = example.vectors(16)
    >>> out, lse = tiled_attention(Q, K, V, return_lse=True)
    >>> dO = np.ones_like(out)
    >>> tiled = tiled_attention_backward(Q, K, V, out, dO, lse, block_size=3)
    >>> dense = attention_backward(Q, K, V, dO)
    >>> bool(np.abs(tiled.dq - dense.dq).max() < 1e-12)
    True
    """
    p = _prepare(q, k, v, **options)
    _refuse_nan_rows(p)
    block_size = positive_int(block_size, "block_size")
    out = _grad_like(out, "out", p.out_shape)
    d_out = _grad_like(grad_out, "grad_out", p.out_shape)
    lse = real_array(lse, "lse", dtype=np.float64)
    expected = (*p.batch, p.n_q)
    if lse.shape != expected:
        raise ValueError(
            f"lse must have the shape (..., n_q) = {expected} of the forward's "
            f"rows, got {lse.shape}"
        )
    bad = np.isnan(lse) | np.isposinf(lse)
    if bad.any():
        raise ValueError(
            f"lse holds NaN or +inf at index {first_index(bad)}; pass the "
            f"log-sum-exp that tiled_attention(..., return_lse=True) gives"
        )
    if p.sink is None and p.empty_rows == "raise":
        empty = np.isneginf(lse) & ~p.padded_rows()
        if empty.any():
            raise _empty_row_error(empty)
    return _backward(p, out, d_out, lse, block_size)


def _refuse_nan_rows(p: _Problem) -> None:
    if p.empty_rows == "nan":
        raise ValueError(
            "empty_rows='nan' has no gradient (its rows are NaN); pass "
            "empty_rows='zero', as FlashAttention, or 'raise'"
        )


def _grad_like(x, name, shape):
    arr = real_array(x, name, dtype=np.float64)
    if arr.shape != shape:
        raise ValueError(
            f"{name} must have the output's shape (..., n_q, d_v) = {shape}, "
            f"got {arr.shape}"
        )
    return arr


def _backward(p: _Problem, out, d_out, lse, block_size):
    """dq, dk, dv (and dmask, dsink) over key blocks of ``block_size``."""
    batch, n_q = p.batch, p.n_q
    q_scaled = p.q * p.scale
    k_t = np.swapaxes(p.k, -1, -2)
    # D = rowsum(dO ∘ O): FlashAttention-2's backward, Algorithm 2 line 4.
    delta = np.einsum("...id,...id->...i", d_out, out)[..., None]
    row_lse = lse[..., None]
    no_row = np.isneginf(row_lse)  # empty or padded: P = 0 in every block
    shift = np.where(no_row, 0.0, row_lse)
    dq = np.zeros((*batch, n_q, p.q.shape[-1]))
    dk = np.empty((*batch, p.n_k, p.q.shape[-1]))
    dv = np.empty((*batch, p.n_k, p.v.shape[-1]))
    dbias = None if p.bias is None else np.zeros(p.bias.shape)
    for start in range(0, p.n_k, block_size):
        stop = min(start + block_size, p.n_k)
        probs, capped = p.logits(
            q_scaled, k_t, start, stop, keep_capped=p.softcap is not None
        )
        probs -= shift
        np.exp(probs, out=probs)
        dv[..., start:stop, :] = np.matmul(
            np.swapaxes(p.drop(probs, start, stop), -1, -2), d_out
        )
        dscores = np.matmul(d_out, np.swapaxes(p.v[..., start:stop, :], -1, -2))
        dscores = p.drop(dscores, start, stop)
        dscores -= delta
        dscores *= probs  # dS = P ∘ (dP - D)
        if dbias is not None:
            _add_bias_grad(dbias, dscores, start, stop)
        if p.softcap is not None:
            softcap_score_grad(dscores, capped, p.softcap)
        dq += np.matmul(dscores, p.k[..., start:stop, :])
        dk[..., start:stop, :] = np.matmul(np.swapaxes(dscores, -1, -2), p.q)
    dq *= p.scale
    dk *= p.scale
    dsink = None
    if p.sink is not None:
        sink_weight = np.where(no_row, 0.0, np.exp(p.sink - shift))
        per_head = -(sink_weight * delta)
        dsink = per_head.reshape(-1, per_head.shape[-3], n_q).sum(axis=(0, 2))
    return Gradients(
        dq=_unbroadcast(dq, p.shapes["q"]),
        dk=_ungroup(_unbroadcast(dk, p.k.shape), p.shapes["k"]),
        dv=_ungroup(_unbroadcast(dv, p.v.shape), p.shapes["v"]),
        dmask=dbias,
        dsink_logits=dsink,
    )


def _add_bias_grad(dbias, dscores, start, stop):
    """Add a block's dS to the float mask's gradient, reduced to its shape."""
    if dbias.shape[-1] == 1:
        dbias += _unbroadcast(dscores.sum(axis=-1, keepdims=True), dbias.shape)
    else:
        target = dbias[..., start:stop]
        target += _unbroadcast(dscores, target.shape)


def _unbroadcast(grad, shape):
    """Sum ``grad`` over the axes that broadcasting added to ``shape``."""
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def _ungroup(grad, shape):
    """Sum a grouped-query gradient back over each key/value head's group."""
    if grad.shape == tuple(shape):
        return grad
    h_kv = shape[-3]
    grouped = grad.reshape(*grad.shape[:-3], h_kv, -1, *grad.shape[-2:])
    return grouped.sum(axis=-3)
