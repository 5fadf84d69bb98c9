"""The backward pass of attention, dense and tiled, as FlashAttention-2 does it.

For ``S`` the final logits, ``P = exp(S - lse)`` the weights, ``Z = P ∘ M /
(1 - p)`` after dropout and ``O = Z V``, the gradients are::

    dV = Zᵀ dO
    dP = (dO Vᵀ) ∘ M / (1 - p)
    D  = rowsum(dO ∘ O)            # = rowsum(dP ∘ P), one number per query
    dS = P ∘ (dP - D)
    dQ = scale · dS' K,   dK = scale · dS'ᵀ Q

where ``dS'`` is ``dS`` carried back through the soft-cap. Dao (2024),
FlashAttention-2, Algorithm 2: ``D`` and ``lse`` are all that the backward
needs from the forward besides ``O``, so ``P`` can be recomputed one key
block at a time. A sink is a key with logit ``s_h`` and no value, so its
weight is ``exp(s_h - lse)`` and its gradient ``-Σ exp(s_h - lse) D``.
"""

from __future__ import annotations

from typing import NamedTuple, Unpack

import numpy as np

from ._arrays import ArrayInput, FloatArray
from ._checks import first_index, positive_int
from ._options import (
    OptionKeywords,
    Options,
    check_keywords,
)
from .core import Block, Problem, dense_forward, empty_row_error, prepare
from .mods import score_mod_derivative

__all__ = [
    "Gradients",
    "attention_backward",
    "gradients",
    "tiled_attention_backward",
    "unbroadcast",
    "ungroup",
]


class Gradients(NamedTuple):
    """Gradients of a scalar loss with respect to attention's inputs.

    ``dq``, ``dk`` and ``dv`` have the shapes of q, k and v, in the layout
    they were given (with grouped heads, summed over each group). ``dmask``
    is the gradient with respect to a float ``mask``, reduced to its shape,
    else None; ``dsink_logits`` has shape (H,) when ``sink_logits`` were
    given, else None. ``dscore_mod`` holds the gradients with respect to the
    score_mod's own parameters, by name (``"slopes"`` for
    :func:`sdpa_ref.mods.alibi`, ``"table"`` for
    :func:`sdpa_ref.mods.relative_position_bias`), when it has any.
    """

    dq: FloatArray
    dk: FloatArray
    dv: FloatArray
    dmask: FloatArray | None = None
    dsink_logits: FloatArray | None = None
    dscore_mod: dict[str, FloatArray] | None = None


@check_keywords()
def attention_backward(
    q: ArrayInput,
    k: ArrayInput,
    v: ArrayInput,
    grad_out: ArrayInput,
    *,
    out: ArrayInput | None = None,
    lse: ArrayInput | None = None,
    **options: Unpack[OptionKeywords],
) -> Gradients:
    """Gradients of attention for an upstream gradient ``grad_out``.

    Runs the dense forward, unless its output and log-sum-exp are given,
    then the backward over all keys at once. The options ``mask`` to
    ``layout`` mean what they mean for :func:`sdpa_ref.attention`, and must
    be the forward's; ``empty_rows="nan"`` is refused, since a NaN output
    has no gradient.

    Parameters
    ----------
    q, k, v : array_like
        As for :func:`sdpa_ref.attention`.
    grad_out : array_like, shape (..., n_q, d_v)
        The gradient of the loss with respect to attention's output, in
        ``layout``.
    out : array_like, shape (..., n_q, d_v), optional
        The forward's output, from ``attention(..., return_lse=True)``, in
        ``layout``. With ``lse``, the forward is not computed again.
    lse : array_like, shape (..., H, n_q), optional
        The forward's log-sum-exp (natural log), in either layout. Comes
        with ``out``.

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

    A forward already computed is reused:

    >>> out, lse = attention(q, k, v, return_lse=True)
    >>> again = attention_backward(q, k, v, np.ones((2, 2)), out=out, lse=lse)
    >>> bool(np.array_equal(again.dv, g.dv))
    True
    """
    p = prepare(q, k, v, Options(**options))
    _refuse_nan_rows(p)
    d_out = p.from_caller(grad_out, "grad_out")
    if (out is None) != (lse is None):
        given, missing = ("out", "lse") if lse is None else ("lse", "out")
        raise ValueError(
            f"{given} was given without {missing}: the backward needs both of the "
            f"forward's results, attention(..., return_lse=True), or neither"
        )
    if out is None or lse is None:
        out64, _, lse64 = dense_forward(p, want_weights=False)
    else:
        out64 = p.from_caller(out, "out")
        lse64 = _saved_lse(p, lse)
    return gradients(p, out64, d_out, lse64, p.n_k)


@check_keywords()
def tiled_attention_backward(  # noqa: PLR0917 (the forward's saved arrays)
    q: ArrayInput,
    k: ArrayInput,
    v: ArrayInput,
    out: ArrayInput,
    grad_out: ArrayInput,
    lse: ArrayInput,
    *,
    block_size: int = 128,
    **options: Unpack[OptionKeywords],
) -> Gradients:
    """FlashAttention-2's backward: recompute ``P`` block by block from ``lse``.

    Never holds an ``n_q x n_k`` array: for each block of ``block_size``
    keys it recomputes that block's logits, ``P = exp(S - lse)``, and adds
    the block's share to ``dq`` while writing the block's ``dk`` and ``dv``.
    The results equal :func:`attention_backward` to about 1e-12. The
    options ``mask`` to ``layout`` are the forward's, as for
    :func:`attention_backward`.

    Parameters
    ----------
    q, k, v : array_like
        As for :func:`sdpa_ref.attention`.
    out : array_like, shape (..., n_q, d_v)
        The forward output, from ``tiled_attention(..., return_lse=True)``,
        in ``layout``.
    grad_out : array_like, shape (..., n_q, d_v)
        The gradient of the loss with respect to ``out``, in ``layout``.
    lse : array_like, shape (..., H, n_q)
        The forward's log-sum-exp, ``-inf`` for an empty or padded row, in
        either layout.
    block_size : int
        Keys per block, at least 1.

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
    p = prepare(q, k, v, Options(**options))
    _refuse_nan_rows(p)
    block_size = positive_int(block_size, "block_size")
    out64 = p.from_caller(out, "out")
    d_out = p.from_caller(grad_out, "grad_out")
    return gradients(p, out64, d_out, _saved_lse(p, lse), block_size)


def _saved_lse(p: Problem, lse: ArrayInput) -> FloatArray:
    """The forward's log-sum-exp, checked against the rows of ``p``."""
    arr = p.lse_from_caller(lse)
    bad = np.isnan(arr) | np.isposinf(arr)
    if bad.any():
        raise ValueError(
            f"lse holds NaN or +inf at index {first_index(bad)}; pass the "
            f"log-sum-exp that attention(..., return_lse=True) gives"
        )
    if p.sink is None and p.empty_rows == "raise":
        empty = np.isneginf(arr) & ~p.padded_rows()
        if empty.any():
            raise empty_row_error(empty)
    return arr


def _refuse_nan_rows(p: Problem) -> None:
    if p.empty_rows == "nan":
        raise ValueError(
            "empty_rows='nan' has no gradient (its rows are NaN); pass "
            "empty_rows='zero', as FlashAttention, or 'raise'"
        )


def gradients(  # noqa: PLR0917 (the forward's results, each by name)
    p: Problem,
    out: FloatArray,
    d_out: FloatArray,
    lse: FloatArray,
    block_size: int,
    logits: FloatArray | None = None,
) -> Gradients:
    """dq, dk, dv (and dmask, dsink, dscore_mod) over key blocks of ``block_size``.

    ``out`` and ``d_out`` in :class:`sdpa_ref.core.Problem`'s (..., heads,
    seqlen, dim) order; the gradients come back in the caller's layout (and
    packing). ``logits``, the dense forward's over all keys
    (``sdpa_ref.core.dense_forward_and_logits``), save computing them
    again when there is one block, every row active and no score mod (which
    needs its inputs): the same numbers, one matrix product fewer.
    """
    reuse = logits is not None and block_size >= p.n_k and not p.score_mods
    batch, n_q = p.batch, p.n_q
    q_scaled = p.q * p.scale
    k_t = np.swapaxes(p.k, -1, -2)
    # D = rowsum(dO ∘ O): FlashAttention-2's backward, Algorithm 2 line 4.
    delta = np.einsum("...id,...id->...i", d_out, out)[..., None]
    row_lse = lse[..., None]
    no_row = np.isneginf(row_lse)  # empty or padded: P = 0 in every block
    shift = np.where(no_row, 0.0, row_lse)
    dq = np.zeros((*batch, n_q, p.q.shape[-1]))
    dk = np.zeros((*batch, p.n_k, p.q.shape[-1]))
    dv = np.zeros((*batch, p.n_k, p.v.shape[-1]))
    dbias = None if p.bias is None else np.zeros(p.bias.shape)
    dparams: dict[str, FloatArray] = {}
    for start in range(0, p.n_k, block_size):
        stop = min(start + block_size, p.n_k)
        block = p.block(start, stop)
        if block is None:  # no query sees these keys: their gradients stay 0
            continue
        rows = block.rows
        inputs: list[FloatArray] = []
        if reuse and rows == slice(None):
            assert logits is not None
            probs = logits - shift
        else:
            probs, inputs = p.logits(
                q_scaled, k_t, block, keep_inputs=bool(p.score_mods)
            )
            probs -= shift[..., rows, :]
        np.exp(probs, out=probs)
        d_out_rows = d_out[..., rows, :]
        dv[..., start:stop, :] = np.matmul(
            np.swapaxes(p.drop(probs, block), -1, -2), d_out_rows
        )
        dscores = np.matmul(d_out_rows, np.swapaxes(p.v[..., start:stop, :], -1, -2))
        dscores = p.drop(dscores, block)
        dscores -= delta[..., rows, :]
        dscores *= probs  # dS = P ∘ (dP - D)
        if dbias is not None:
            _add_bias_grad(dbias, dscores, block)
        if inputs:
            dscores = _through_score_mods(p, dscores, inputs, block, dparams)
        dq[..., rows, :] += np.matmul(dscores, p.k[..., start:stop, :])
        dk[..., start:stop, :] = np.matmul(
            np.swapaxes(dscores, -1, -2), p.q[..., rows, :]
        )
    dq *= p.scale
    dk *= p.scale
    dsink = None
    if p.sink is not None:
        sink_weight = np.where(no_row, 0.0, np.exp(p.sink - shift))
        per_head = -(sink_weight * delta)
        dsink = per_head.reshape(-1, per_head.shape[-3], n_q).sum(axis=(0, 2))
    return Gradients(
        dq=p.to_caller(unbroadcast(dq, p.shapes["q"])),
        dk=p.to_caller(ungroup(unbroadcast(dk, p.k.shape), p.shapes["k"]), "k"),
        dv=p.to_caller(ungroup(unbroadcast(dv, p.v.shape), p.shapes["v"]), "k"),
        dmask=dbias,
        dsink_logits=dsink,
        dscore_mod=dparams or None,
    )


def _through_score_mods(
    p: Problem,
    dscores: FloatArray,
    inputs: list[FloatArray],
    block: Block,
    dparams: dict[str, FloatArray],
) -> FloatArray:
    """Carry dS back through the score mods, last first, by the chain rule.

    Each mod's parameters (ALiBi's slopes, a bias table) get their share of
    the block's gradient on the way. Where dS is 0 (masked, or no weight) the
    product stays 0 whatever the derivative is there.
    """
    grids = block.grids
    assert grids is not None  # Problem.block builds them for score mods
    zero = dscores == 0
    for (mod, name), score in zip(
        reversed(p.score_mods), reversed(inputs), strict=True
    ):
        shares = getattr(mod, "parameter_gradients", None)
        if callable(shares):
            for key, value in shares(dscores, score, *grids).items():
                arr = np.asarray(value, dtype=np.float64)
                dparams[key] = arr if key not in dparams else dparams[key] + arr
        derivative = score_mod_derivative(mod, score, grids, name, where=~zero)
        with np.errstate(invalid="ignore", over="ignore"):
            dscores = dscores * derivative
        dscores[zero] = 0.0
    return dscores


def _add_bias_grad(dbias: FloatArray, dscores: FloatArray, block: Block) -> None:
    """Add a block's dS to the float mask's gradient, reduced to its shape."""
    rows = slice(None) if dbias.ndim < 2 or dbias.shape[-2] == 1 else block.rows
    cols = slice(None) if dbias.shape[-1] == 1 else slice(block.start, block.stop)
    target = dbias[..., rows, cols] if dbias.ndim >= 2 else dbias[..., cols]
    target += unbroadcast(
        dscores.sum(axis=-1, keepdims=True) if dbias.shape[-1] == 1 else dscores,
        target.shape,
    )


def unbroadcast(grad: FloatArray, shape: tuple[int, ...]) -> FloatArray:
    """Sum ``grad`` over the axes that broadcasting added to ``shape``."""
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def ungroup(grad: FloatArray, shape: tuple[int, ...]) -> FloatArray:
    """Sum a grouped-query gradient back over each key/value head's group."""
    if grad.shape == tuple(shape):
        return grad
    h_kv = shape[-3]
    grouped = grad.reshape(*grad.shape[:-3], h_kv, -1, *grad.shape[-2:])
    summed: FloatArray = grouped.sum(axis=-3)
    return summed


# The names older callers import.
_backward = gradients
_unbroadcast = unbroadcast
_ungroup = ungroup
