"""Test an attention kernel against sdpa_ref: verdicts that are right in every dtype.

:func:`assert_attention_close` judges everything a kernel returns, the output,
its log-sum-exp and every gradient, against sdpa_ref's float64 reference, with
the rule that fits the kernel's precision:

- **float16 and bfloat16: FlashAttention's rule.** FlashAttention-3's tests
  compare the kernel's error with the error of the same computation done
  naively in the kernel's precision (hopper/test_flash_attn.py:228-285 at
  commit 0251105a), in this form, which this module calls FlashAttention's
  rule; FlashAttention-2's own tests make the same comparison with other
  constants (tests/test_flash_attn.py: factor 2 and no ``atol`` on the
  output at line 704, factor 3 on the gradients at lines 1130-1132)::

      |out - out_ref|.max() <= factor · |out_pt - out_ref|.max() + atol

  ``out_pt`` is emulated in NumPy (:func:`naive_attention`), ``factor`` is 2,
  or 3 with soft-capping (:func:`flash_factor`), and ``atol`` is twice the
  rounding noise of adding 0.3 to the reference and taking it away again in
  the kernel's dtype (:func:`flash_atol`).
  In these precisions the naive computation's rounding dwarfs the difference
  between two summation orders, so the rule is fair.
- **float32 and float64: a bound that holds for every summation order.** One
  ordering's error is no yardstick for a kernel that sums in another order: a
  correct float32 kernel can be more than twice as far from float64 as the
  naive computation. Each element gets a bound from the floating-point error
  analysis of the dot products, the softmax and the weighted sums (Higham,
  *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002, Lemma 3.1
  and §3.1; Blanchard, Higham and Higham, IMA J. Numer. Anal. 41(4), 2021,
  for the shifted softmax). It uses the inputs' magnitudes, the head width,
  the number of keys and the unit roundoff, and allows the exponential
  :data:`~sdpa_ref.published.EXP_ULPS` units in the last place of error.
  The testing page derives it term by term.

A failure names, per output, how many elements exceed their bound, where they
are (batch entries, heads, query or key rows), and the worst element to every
digit; then the common convention slip, if one makes the kernel pass.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, Unpack

import numpy as np

from ._arrays import FORMATS, ArrayInput, Precision, as_array, source_precision
from ._arrays import PRECISIONS as _PRECISIONS
from ._checks import real_array
from ._options import (
    Align,
    OptionKeywords,
    Options,
    Window,
    check_keywords,
    with_signature,
)
from .backward import Gradients, gradients, unbroadcast, ungroup
from .core import (
    Problem,
    apply_score_mod,
    dense_forward,
    dense_forward_and_logits,
    prepare,
    tiled_forward,
)
from .mods import (
    Differentiable,
    MaskMod,
    ScoreMod,
    score_mod_derivative,
    with_derivative,
)
from .precision import to_bfloat16 as _untyped_to_bfloat16
from .published import (  # the published numbers this module uses or names
    EXP_ULPS,
    FLASH_TEST_FWD_ATOL,
    FLASH_TEST_RTOL,
    SOFTCAP_GRAD_ATOL,
)
from .varlen import pad, unpack, unpack_lse

#: sdpa_ref.precision's rounding to bfloat16 (float32 holding the values).
to_bfloat16: Callable[[Any], np.ndarray[Any, Any]] = _untyped_to_bfloat16

__all__ = [
    "EXP_ULPS",
    "MIN_KEY_BLOCK",
    "PRECISIONS",
    "SOFTCAP_GRAD_ATOL",
    "UNIT_ROUNDOFF",
    "Check",
    "Verdict",
    "assert_attention_close",
    "check_attention",
    "exp_relative_error",
    "flash_atol",
    "flash_factor",
    "flash_options",
    "naive_attention",
    "naive_attention_backward",
    "rounding",
]

#: The precisions a kernel can claim, narrowest first.
PRECISIONS = _PRECISIONS

#: Unit roundoff ``u = 2**-p`` of each precision, ``p`` significant bits.
UNIT_ROUNDOFF = {name: 2.0**-f.bits for name, f in FORMATS.items()}


#: The fewest keys the bound lets a kernel put in one block of its online
#: softmax. Each block after the first may move the row's running maximum,
#: and each move multiplies everything summed so far by a computed factor
#: ``exp(m - m')`` with an exponential's error of its own; the bound counts
#: ``ceil(n_k / MIN_KEY_BLOCK) - 1`` of them. FlashAttention-2's kernels take
#: 64 or 128 keys a block (the flash page); a kernel that rescales after
#: every few keys lies outside the model.
MIN_KEY_BLOCK = 16


#: Above this many bytes of float64 scores (n_q x n_k per head, all heads), the
#: reference runs tiled, block by block, so its memory grows with n, not n².
TILED_ABOVE_BYTES = 2**27

#: The naive 16-bit emulation runs one batch entry (or group of heads) at a
#: time above this many float32 scores.
_NAIVE_CHUNK_ELEMENTS = 2**24

_GRADIENTS = ("dq", "dk", "dv", "dmask", "dsink_logits")
_LAYOUTS = ("bhsd", "bshd")

Rule = Literal["auto", "flash", "bound"]


# ---------------------------------------------------------------------------
# Precisions and rounding


def rounding(precision: str) -> Any:
    """A function that rounds float64 values to ``precision``, kept as float64.

    Examples
    --------
    >>> float(rounding("bfloat16")(np.float64(1 / 3)))
    0.333984375
    """
    if precision == "float64":
        return lambda x: np.asarray(x, dtype=np.float64)
    if precision == "bfloat16":
        return lambda x: to_bfloat16(np.asarray(x, np.float32)).astype(np.float64)
    dtype = np.dtype(precision)
    return lambda x: np.asarray(x).astype(dtype).astype(np.float64)


def _accumulator(precision: str) -> Any:
    """GPUs accumulate 16- and 32-bit matmuls in float32."""
    return np.float64 if precision == "float64" else np.float32


def _precision(precision: Any) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return str(precision)


def _as_numpy(x: Any, name: str) -> tuple[np.ndarray[Any, Any], str | None]:
    """``x`` as a NumPy array, and the precision its own dtype names, if any.

    torch tensors come detached and on the CPU; a bfloat16 tensor becomes
    float32 (NumPy has no bfloat16) and names ``"bfloat16"``
    (:func:`sdpa_ref._arrays.as_array`).
    """
    return as_array(x, name), source_precision(x)


def _kernel_precision(
    arrays: Sequence[tuple[np.ndarray, str | None]], precision: Any
) -> str:
    """The precision the kernel computed in: from q, k and v, and ``precision``."""
    named = {source for _, source in arrays}
    if len(named) != 1 or None in named:
        dtypes = sorted({str(source or arr.dtype) for arr, source in arrays})
        raise TypeError(
            f"q, k and v must share one floating dtype, the kernel's inputs, got "
            f"{dtypes}"
        )
    (source,) = named
    if precision is None:
        return str(source)
    claimed = _precision(precision)
    if claimed == source:
        return claimed
    if claimed == "bfloat16" and source == "float32":
        if any(
            not np.array_equal(to_bfloat16(arr), arr, equal_nan=True)
            for arr, _ in arrays
        ):
            raise ValueError(
                "precision='bfloat16' but q, k or v holds values that bfloat16 "
                "cannot represent; pass the kernel's actual (rounded) inputs"
            )
        return claimed
    if claimed == "bfloat16":
        raise ValueError(
            f"precision='bfloat16' needs the inputs as float32, got {source}"
        )
    raise ValueError(f"precision={claimed!r} does not match the inputs' dtype {source}")


def exp_relative_error(precision: str) -> float:
    """The relative error the bound allows ``exp``, ``log`` and ``tanh``.

    :data:`~sdpa_ref.published.EXP_ULPS` units in the last place, each at
    most ``2u`` relative.

    Examples
    --------
    >>> exp_relative_error("float32") == 40 * 2.0**-24
    True
    """
    return 2 * EXP_ULPS * UNIT_ROUNDOFF[_precision(precision)]


def _gamma(n: float, u: float) -> float:
    """Higham's ``γ_n = n u / (1 - n u)``: n roundings in a row, at most."""
    nu = n * u
    return nu / (1.0 - nu) if nu < 1 else math.inf


# ---------------------------------------------------------------------------
# FlashAttention's rule: the naive computation in the kernel's precision


def naive_attention(q: Any, k: Any, v: Any, precision: str, **options: Any) -> Any:
    """FlashAttention's ``out_pt``, emulated: attention in the kernel's precision.

    FlashAttention's tests compute ``out_pt = attention_ref(..., upcast=False,
    reorder_ops=True)`` (hopper/test_flash_attn.py:228-243 at commit
    0251105a): the textbook computation in the kernel's own dtype, with
    ``k`` scaled instead of ``q`` "to estimate the numerical error from
    operation reordering" (flash_attn/utils/testing.py:264-266). This
    function follows the same steps with NumPy, rounding each result to
    ``precision``: ``k · scale``; the scores, accumulated in float32
    (float64 for a float64 kernel) as GPU matmuls are; the soft-cap's
    division, tanh and product; a float mask's sum; the softmax, computed in
    float32 and rounded once, as ``torch.softmax`` does for 16-bit inputs;
    ``v / (1 - dropout_p)``; and the output. The options are sdpa_ref's,
    applied by the same mask mods as :func:`sdpa_ref.attention`. What it
    cannot copy is the order in which a GPU's matmul adds its terms, so it
    agrees with torch's ``attention_ref`` to about a unit in the last place.

    Returns
    -------
    out : numpy.ndarray
        float64 holding values of ``precision``.

    Examples
    --------
    >>> q = k = v = np.eye(3)
    >>> from sdpa_ref import attention
    >>> float(np.abs(naive_attention(q, k, v, "float16") - attention(q, k, v)).max())
    0.0001...
    """
    p = prepare(q, k, v, Options(**(options | {"empty_rows": "zero"})))
    out, _ = _naive_forward(p, _precision(precision))
    return out


def _naive_forward(p: Problem, precision: str) -> tuple[Any, tuple[Any, ...]]:
    r = rounding(precision)
    acc = _accumulator(precision)
    q_r, k_r, v_r = (r(a) for a in (p.q, p.k, p.v))

    def mm(a: Any, b: Any) -> Any:
        return r(np.matmul(a.astype(acc), b.astype(acc)))

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        k_s = r(k_r * p.scale)  # reorder_ops=True: scale k, not q
        scores = mm(q_r, np.swapaxes(k_s, -1, -2))
        grids = p.grids(0, p.n_k)
        # Each score mod's input, for the backward: the soft-cap's tanh, or
        # the scores a user's mod was given. The mod's result is rounded once.
        steps: list[tuple[str, Any, Any]] = []
        for mod, name in p.score_mods:
            if name == "softcap":  # testing.py:298, three rounded steps
                tanh = r(np.tanh(r(scores / p.softcap)))
                steps.append((name, mod, tanh))
                scores = r(tanh * p.softcap)
            else:
                steps.append((name, mod, scores))
                scores = r(apply_score_mod(mod, scores, grids, name))
        allowed = p.allowed(0, p.n_k, grids)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
        if p.bias is not None:
            scores = r(scores + p.bias)
        probs, lse = _softmax(scores.astype(acc), p.sink, acc)
        weights = r(probs)
        keep = _kept(p, weights.shape)
        v_s = r(v_r * p.dropout_scale)
        out = mm(np.where(keep, weights, 0.0), v_s)
    # torch.softmax's backward uses its rounded output; attention_ref's sink
    # path (testing.py:331-337) is float32 arithmetic whose autograd uses the
    # unrounded probabilities.
    saved = weights.astype(acc) if p.sink is None else probs
    return out, (r, mm, q_r, k_s, v_s, weights, saved, keep, steps, lse, acc)


def _softmax(scores: Any, sink: Any, acc: Any) -> tuple[Any, Any]:
    """Softmax of each row in ``acc`` precision with a sink, and the row's lse."""
    row_max = scores.max(axis=-1, keepdims=True)
    if sink is not None:
        sink = sink.astype(acc)
        row_max = np.maximum(row_max, sink)
    row_max = np.where(np.isneginf(row_max), acc(0.0), row_max)
    exps = np.exp(scores - row_max)
    norm = exps.sum(axis=-1, keepdims=True)
    if sink is not None:
        norm = norm + np.exp(sink - row_max)
    lse = (row_max + np.log(norm))[..., 0]
    return exps / np.where(norm == 0, acc(1.0), norm), lse


def _kept(p: Problem, shape: tuple[int, ...]) -> Any:
    """Where dropout keeps a weight (everywhere without dropout)."""
    if p.dropout_mask is None:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(p.dropout_mask, shape)


def naive_attention_backward(
    q: Any, k: Any, v: Any, grad_out: Any, precision: str, **options: Any
) -> tuple[Any, Any, Any]:
    """FlashAttention's ``dq_pt``, ``dk_pt``, ``dv_pt``, emulated.

    Autograd through :func:`naive_attention`'s steps, each result rounded to
    ``precision`` as torch's autograd rounds it on 16-bit tensors
    (hopper/test_flash_attn.py:330): the softmax's backward and the tanh's
    are computed in float32 and rounded once, as torch does. Returns
    ``(dq, dk, dv)``.

    Examples
    --------
    >>> from sdpa_ref import attention_backward
    >>> q = k = v = np.eye(3)
    >>> dq, dk, dv = naive_attention_backward(q, k, v, np.ones((3, 3)), "float32")
    >>> float(np.abs(dv - attention_backward(q, k, v, np.ones((3, 3))).dv).max()) < 1e-6
    True
    """
    p = prepare(q, k, v, Options(**(options | {"empty_rows": "zero"})))
    d_out = np.broadcast_to(real_array(grad_out, "grad_out"), p.out_shape)
    naive = _naive_pass(p, _precision(precision), d_out)
    return naive["dq"], naive["dk"], naive["dv"]


def _naive_pass(p: Problem, precision: str, d_out: Any) -> dict[str, Any]:
    """The naive forward (and, given ``d_out``, backward) of one problem.

    The backward runs twice from ``dP``: once as torch's autograd does, with
    ``D = rowsum(dP ∘ P)``, and once as FlashAttention-2's kernels do, with
    ``D = rowsum(dO ∘ O)`` from the rounded output. With dropout, the
    forward and ``dv`` also run a second way: the kernels scale the kept
    weights by ``1 / (1 - p)`` where ``attention_ref`` scales ``v``. A kernel
    of either kind may be as far off as the worse of the two (keys
    ``out_fa2``, ``dq_fa2``, ...).
    """
    out, (r, mm, q_r, k_s, v_s, weights, saved, keep, steps, lse, acc) = _naive_forward(
        p, precision
    )
    result = {"out": out, "lse": lse.astype(np.float64)}
    dropped = None
    if p.dropout_mask is not None:
        # FlashAttention's kernels scale the kept weights by 1 / (1 - p)
        # before rounding them, where attention_ref scales v.
        dropped = r(np.where(keep, weights * p.dropout_scale, 0.0))
        result["out_fa2"] = mm(dropped, r(p.v))
    if d_out is None:
        return result
    d_out = r(d_out)
    with np.errstate(over="ignore", invalid="ignore"):
        d_vs = mm(np.swapaxes(np.where(keep, weights, 0.0), -1, -2), d_out)
        dv = r(d_vs * p.dropout_scale)
        if dropped is not None:
            dv_fa2 = mm(np.swapaxes(dropped, -1, -2), d_out)
            result["dv_fa2"] = r(ungroup(unbroadcast(dv_fa2, p.v.shape), p.shapes["v"]))
        dweights = np.where(keep, mm(d_out, np.swapaxes(v_s, -1, -2)), 0.0)
        dw = dweights.astype(acc)
        delta = np.sum(out.astype(acc) * d_out.astype(acc), axis=-1)
        for suffix, row_sum in (
            ("", np.sum(dw * saved, axis=-1, keepdims=True)),
            ("_fa2", delta[..., None]),
        ):
            dscores = r(saved * (dw - row_sum))
            dbias = dscores
            dscores = _naive_through_mods(p, steps, dscores, r, acc)
            dq = mm(dscores, k_s)
            dk = r(mm(np.swapaxes(dscores, -1, -2), q_r) * p.scale)
            # Summing over a group of query heads (or broadcast axes) is one
            # more reduction, rounded once.
            result["dq" + suffix] = r(unbroadcast(dq, p.shapes["q"]))
            result["dk" + suffix] = r(
                ungroup(unbroadcast(dk, p.k.shape), p.shapes["k"])
            )
            if p.bias is not None:
                result["dmask" + suffix] = r(unbroadcast(dbias, p.bias.shape))
        if p.sink is not None:
            # d lse / d sink: the sink's weight exp(sink - lse), times -D.
            sink_weight = np.exp(p.sink[..., 0].astype(acc) - lse)
            per_head = -(np.where(np.isfinite(lse), sink_weight, 0.0) * delta)
            result["dsink_logits"] = r(
                per_head.reshape(-1, p.sink.shape[0], p.n_q).sum(axis=(0, 2))
            )
    result["dv"] = r(ungroup(unbroadcast(dv, p.v.shape), p.shapes["v"]))
    return result


def _naive_through_mods(
    p: Problem, steps: Sequence[tuple[str, Any, Any]], dscores: Any, r: Any, acc: Any
) -> Any:
    """The gradient dS carried back through the score mods, last first, rounded.

    The soft-cap as torch's autograd does it (tanh_backward in float32); a
    user's mod times its derivative, rounded once.
    """
    grids = p.grids(0, p.n_k)
    for name, mod, saved in reversed(steps):
        if name == "softcap":
            d_tanh = r(dscores * p.softcap)
            t = saved.astype(acc)
            d_raw = r(d_tanh.astype(acc) * (acc(1.0) - t * t))  # tanh_backward
            dscores = r(d_raw / p.softcap)
        else:
            used = dscores != 0
            derivative = score_mod_derivative(mod, saved, grids, name, where=used)
            dscores = r(np.where(used, dscores * derivative, 0.0))
    return dscores


def _user_score_mod(p: Problem) -> bool:
    """Whether a score mod of the caller's changes the scores (not the soft-cap)."""
    return any(name != "softcap" for _, name in p.score_mods)


def flash_atol(reference: Any, precision: str) -> float:
    """FlashAttention's ``fwd_atol``: twice the noise of ``x + 0.3 - 0.3 - x``.

    hopper/test_flash_attn.py:255 (commit 0251105a) computes
    ``2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max()`` on ``out_ref``, which
    ``attention_ref`` computes in float32 and returns in the kernel's dtype
    (hopper/test_util.py:271-273, 348, imported at hopper/test_flash_attn.py:22-26),
    so the noise is that of the
    kernel's dtype. Here ``x`` is sdpa_ref's float64 ``reference`` rounded to
    ``precision``, and each step is computed in float32 (float64 for a
    float64 kernel) and rounded to ``precision``, as a CUDA kernel of torch
    does with a Python scalar. (On the CPU, torch first rounds ``0.3`` to
    the tensor's dtype, which for a single value can change the result
    several-fold, or between zero and nonzero.) The
    same rule gives the gradients' tolerances (lines 343-348).

    Examples
    --------
    >>> flash_atol(np.array([1.0]), "bfloat16"), flash_atol(np.array([1.0]), "float32")
    (0.0078125, 1.1920928955078125e-07)
    """
    r = rounding(_precision(precision))
    acc = _accumulator(precision)
    values = np.asarray(reference, dtype=np.float64)
    x = r(np.where(np.isfinite(values), values, 0.0))
    offset = np.float64(acc(FLASH_TEST_FWD_ATOL["offset"]))

    def step(a: Any) -> Any:
        return r(a.astype(acc).astype(np.float64))

    noise = step(step(step(x + offset) - offset) - x)
    return float(FLASH_TEST_FWD_ATOL["factor"] * np.abs(noise).max(initial=0.0))


def flash_factor(softcap: float | None = None) -> float:
    """FlashAttention's ``rtol``: 2, or 3 with soft-capping.

    hopper/test_flash_attn.py:256 at commit 0251105a.

    Examples
    --------
    >>> flash_factor(), flash_factor(30.0)
    (2.0, 3.0)
    """
    return FLASH_TEST_RTOL["default" if softcap in (None, 0, 0.0) else "softcap"]


# ---------------------------------------------------------------------------
# The naive emulation, one batch entry or group of heads at a time


def _chunks(
    shapes: Mapping[str, tuple[int, ...]], n_q: int, n_k: int
) -> list[tuple[slice, slice, slice]] | None:
    """(batch, query heads, key heads) slices that split a large 4-D problem.

    None when one piece will do: the problem is small, not 4-D, or broadcasts
    along an axis a piece would cut (its sums would then span pieces).
    """
    q, k, v = shapes["q"], shapes["k"], shapes["v"]
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    b, h_q = q[0], q[1]
    if b * h_q * n_q * n_k <= _NAIVE_CHUNK_ELEMENTS:
        return None
    h_kv = k[1]
    by_batch = k[0] == v[0] == b
    by_group = k[1] == v[1] == h_kv and h_kv > 1 and h_q % h_kv == 0
    group = h_q // h_kv if by_group else h_q
    batches = [slice(i, i + 1) for i in range(b)] if by_batch else [slice(None)]
    heads = (
        [(slice(g * group, (g + 1) * group), slice(g, g + 1)) for g in range(h_kv)]
        if by_group
        else [(slice(None), slice(None))]
    )
    if len(batches) * len(heads) == 1:
        return None
    return [(bs, hq, hk) for bs in batches for hq, hk in heads]


def _cut(arr: Any, batch: slice, heads: slice, ndim: int = 4) -> Any:
    """The piece of an array that broadcasts to (B, H, ...) for one chunk."""
    if arr is None:
        return None
    arr = np.asarray(arr)
    full = arr.reshape((1,) * (ndim - arr.ndim) + arr.shape)
    index = tuple(
        s if full.shape[axis] > 1 else slice(None)
        for axis, s in enumerate((batch, heads))
    )
    return full[index]


def _chunk_options(options: Options, batch: slice, heads: slice) -> Options:
    """The options of one piece: its batch entries' and heads' share of each array."""
    changes: dict[str, Any] = {}
    for name in ("mask", "dropout_mask"):
        if getattr(options, name) is not None:
            changes[name] = _cut(getattr(options, name), batch, heads)
    for name in ("q_lengths", "k_lengths", "key_leftpad"):
        if getattr(options, name) is not None:
            changes[name] = np.asarray(getattr(options, name))[batch]
    if options.sink_logits is not None:
        changes["sink_logits"] = np.asarray(options.sink_logits, np.float64)[heads]
    # A piece's batch entries and heads count from 0: the mods see the whole's.
    first_b, first_h = batch.start or 0, heads.start or 0
    if options.mask_mod is not None:
        changes["mask_mod"] = _shifted_mask(options.mask_mod, first_b, first_h)
    if options.score_mod is not None:
        changes["score_mod"] = _shifted_score(options.score_mod, first_b, first_h)
    return replace(options, **changes)


def _shifted_mask(mod: MaskMod, first_b: int, first_h: int) -> MaskMod:
    def shifted(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return mod(b + first_b, h + first_h, q_idx, kv_idx)

    return shifted


def _shifted_score(mod: ScoreMod, first_b: int, first_h: int) -> ScoreMod:
    def shifted(score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return mod(score, b + first_b, h + first_h, q_idx, kv_idx)

    if not isinstance(mod, Differentiable):
        return shifted
    derivative = mod.derivative

    def shifted_derivative(score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        return derivative(score, b + first_b, h + first_h, q_idx, kv_idx)

    return with_derivative(shifted, shifted_derivative)


def _naive_errors(  # noqa: PLR0917 (a problem, its reference and precision)
    q: Any,
    k: Any,
    v: Any,
    d_out: Any,
    precision: str,
    options: Options,
    reference: Mapping[str, Any],
    *,
    whole: bool = False,
) -> dict[str, float]:
    """The naive emulation's largest error on each array, the worse variant's.

    A large 4-D problem runs one batch entry (or group of heads) at a time,
    keeping only each piece's largest error, so that memory holds one
    piece's scores and no full-size copy of the naive results.
    """
    p = prepare(q, k, v, options)
    pieces = None if whole else _chunks(p.shapes, p.n_q, p.n_k)
    errors: dict[str, float] = {}

    def note(name: str, value: Any, expected: Any) -> None:
        base = name.removesuffix("_fa2")
        worst = float(_errors(value, expected).max(initial=0.0))
        errors[base] = max(errors.get(base, 0.0), worst)

    if pieces is None:
        for name, value in _naive_pass(p, precision, d_out).items():
            note(name, value, reference[name.removesuffix("_fa2")])
        return errors
    sink_grad = None
    for batch, heads, kv_heads in pieces:
        piece = prepare(
            q[batch, heads],
            k[batch, kv_heads],
            v[batch, kv_heads],
            _chunk_options(options, batch, heads),
        )
        d_piece = None if d_out is None else d_out[batch, heads]
        for name, value in _naive_pass(piece, precision, d_piece).items():
            base = name.removesuffix("_fa2")
            if base == "dsink_logits":  # a sum over every batch entry
                if sink_grad is None:
                    sink_grad = np.zeros(p.out_shape[1])
                sink_grad[heads] += value
                continue
            if base == "dmask":
                continue  # judged on problems small enough to run whole
            index = (batch, kv_heads if base in ("dk", "dv") else heads)
            note(name, value, reference[base][index])
    if sink_grad is not None:
        note("dsink_logits", rounding(precision)(sink_grad), reference["dsink_logits"])
    return errors


# ---------------------------------------------------------------------------
# The reference, and the error bound of every correct float32/float64 kernel


def _block_size(p: Problem) -> int | None:
    """Keys per block for the tiled reference, or None to run it dense."""
    rows = int(np.prod(p.batch)) * p.n_q
    if rows * p.n_k * 8 <= TILED_ABOVE_BYTES:
        return None
    # About 32 MiB of scores per block, in blocks of at least 64 keys.
    return int(min(p.n_k, max(64, 2**22 // max(rows, 1))))


def _widen(arrays: Sequence[Any]) -> Any:
    """Concatenate along the last axis, broadcasting the leading axes."""
    lead = np.broadcast_shapes(*(a.shape[:-1] for a in arrays))
    return np.concatenate(
        [np.broadcast_to(a, (*lead, a.shape[-1])) for a in arrays], -1
    )


def _row_max(x: Any, axis: int = -1) -> Any:
    return np.max(x, axis=axis, initial=0.0)


@dataclass
class _ModStats:
    """Per-row sizes of a user's score mod f over the scores it may change."""

    slope: Any  # D_i: max_j |f'(s_ij)|
    value: Any  # F_i: max_j |f(s_ij)|
    given: Any  # max_j |s_ij|, the mod's input
    bend: Any  # C_i: max_j |f''(s_ij)|, from differences of f'


def _score_mod_stats(p: Problem) -> _ModStats | None:
    """D_i, F_i, the input's size and C_i for a user's score mod, or None.

    Taken over the allowed scores of each row (a masked score's weight is 0)
    and in float64, block by block as the reference runs. ``f''`` is the
    central difference of ``f'`` with step ``1e-4 (1 + |s|)``: an estimate
    of how much ``f'`` moves within a logit's error.
    """
    user = [(mod, name) for mod, name in p.score_mods if name != "softcap"]
    if not user:
        return None
    mod, name = user[-1]
    rows = (*p.batch, p.n_q)
    stats = [np.zeros(rows) for _ in range(4)]
    size = _block_size(p) or p.n_k
    q_scaled = p.q * p.scale
    k_t = np.swapaxes(p.k, -1, -2)
    for start in range(0, p.n_k, size):
        block = p.block(start, min(start + size, p.n_k), skip=False)
        assert block is not None
        assert block.grids is not None
        _, inputs = p.logits(q_scaled, k_t, block, keep_inputs=True)
        given = inputs[-1]
        value = apply_score_mod(mod, given, block.grids, name)
        step = 1e-4 * (1.0 + np.abs(given))
        slopes = [
            score_mod_derivative(
                mod, given + shift, block.grids, name, where=block.allowed
            )
            for shift in (0.0, step, -step)
        ]
        keep = np.isfinite(value)
        if block.allowed is not None:
            keep &= block.allowed
        pieces = (
            slopes[0],
            value,
            given,
            (slopes[1] - slopes[2]) / (2 * step),
        )
        for total, piece in zip(stats, pieces, strict=True):
            row = np.max(np.where(keep, np.abs(piece), 0.0), axis=-1)
            np.maximum(total, row, out=total)
    return _ModStats(*stats)


@dataclass
class _Bounds:
    """Per-row quantities of the error analysis (see the testing page)."""

    u: float
    ue: float
    logit: Any  # L_i: error of one logit
    shift: Any  # S_i: Cauchy–Schwarz bound on the row's largest |logit|, sink too
    phi: Any  # Φ_i + ξ_i: perturbation of one term exp(s_ij - m)
    terms: int  # n_k + R: a running sum's additions and rescalings, plus one
    mod: _ModStats | None = None  # a user's score mod's sizes
    given: Any = None  # error of one score where a user's score mod takes it


def _row_bounds(p: Problem, u: float, lse: Any) -> _Bounds:
    """L_i, S_i and Φ_i (with the split-KV allowance ξ_i) for every query row."""
    ue = 2 * EXP_ULPS * u  # exp_relative_error, for any unit roundoff u
    d = p.q.shape[-1]
    q_norm = np.sqrt(np.einsum("...id,...id->...i", p.q, p.q))
    k_norm = _row_max(np.sqrt(np.einsum("...jd,...jd->...j", p.k, p.k)))[..., None]
    dot = p.scale * q_norm * k_norm  # ≥ scale · Σ_l |q_il| |k_jl|, Cauchy–Schwarz
    logit = _gamma(d + 3, u) * dot
    size = dot
    if p.softcap is not None:
        size = np.minimum(dot, p.softcap)
        logit = logit + (_gamma(3, u) + ue) * size
    stats = _score_mod_stats(p)
    given = logit
    if stats is not None:
        # |f(s + δ) - f(s)| <= (D + C |δ|) |δ|, and the kernel's evaluation of f
        # is allowed a few roundings and one transcendental function, as the
        # soft-cap's: (γ_3 + u_e) (F + D |s|).
        logit = logit * (stats.slope + stats.bend * logit) + (_gamma(3, u) + ue) * (
            stats.value + stats.slope * stats.given
        )
        size = stats.value
    if p.bias is not None:
        bias = np.broadcast_to(p.bias, (*p.batch, p.n_q, p.n_k))
        size = size + _row_max(np.abs(np.where(np.isfinite(bias), bias, 0.0)))
        logit = logit + u * size
    if p.sink is not None:
        size = np.maximum(size, np.abs(p.sink[..., 0]))
    size = np.broadcast_to(size, (*p.batch, p.n_q))
    logit = np.broadcast_to(logit, (*p.batch, p.n_q))
    log_n = math.log(p.n_k + 1)
    # One exponential per term, and one more per rescaling of the running sum:
    # a factor exp(m - m') each, whose subtractions' roundings add up to at
    # most u times the distance the maximum moves, 2 S_i.
    rescalings = max(0, -(-p.n_k // MIN_KEY_BLOCK) - 1)
    phi = logit + (_gamma(3, u) + u) * 2 * size + (1 + rescalings) * ue
    # Split-KV: each split's lse carries its sum's and log's rounding into the
    # weight that combines it with the others.
    # A term of a running sum passes through at most n_k - 1 additions and R
    # rescalings (each a product by a computed factor): n_k + R - 1 roundings.
    terms = p.n_k + rescalings
    split = _gamma(terms + 2, u) + ue * (1 + log_n) + _gamma(3, u) * 2 * (size + log_n)
    return _Bounds(
        u=u,
        ue=ue,
        logit=logit,
        shift=size,
        phi=phi + split,
        terms=terms,
        mod=stats,
        given=given,
    )


def _lse_bound(p: Problem, rb: _Bounds, lse: Any) -> Any:
    finite = np.where(np.isfinite(lse), np.abs(lse), 0.0)
    return (
        rb.phi
        + _gamma(2 * rb.terms + 4, rb.u)
        + rb.ue * math.log(p.n_k + 1)
        + _gamma(2, rb.u) * finite
    )


def _reference(
    q: Any, k: Any, v: Any, d_out: Any, options: Options
) -> tuple[Problem, dict[str, Any], Any]:
    """sdpa_ref's forward and backward, each pass once, and each key's weight sum.

    The backward reuses the forward's output and log-sum-exp, and gets one
    more value column, of zeros, whose gradient column of ones makes it also
    return each key's column sum ``Σ_i Z_ij`` (``Z = P ∘ M / (1 - p)``, the
    weights after dropout), summed like ``dv`` over a group of heads. Above
    :data:`TILED_ABOVE_BYTES` both run tiled. Returns the problem, the
    reference (``out``, ``lse`` and, given ``d_out``, the gradients) and the
    column sums (or None).
    """
    p = prepare(q, k, v, options)
    block = _block_size(p)
    logits = None
    if block is None and d_out is not None and not p.score_mods:
        # The backward reuses these logits rather than compute them again.
        out, lse, logits = dense_forward_and_logits(p)
    elif block is None:
        out, _, lse = dense_forward(p, want_weights=False)
    else:
        out, lse = tiled_forward(p, block)
    reference: dict[str, Any] = {"out": out, "lse": lse}
    if d_out is None:
        return p, reference, None
    if options.empty_rows == "nan":
        raise ValueError(
            "empty_rows='nan' has no gradient (its rows are NaN); pass "
            "empty_rows='zero', as FlashAttention, or 'raise'"
        )
    one = np.ones((*d_out.shape[:-1], 1))
    wide = prepare(q, k, _widen([v, np.zeros((*np.shape(v)[:-1], 1))]), options)
    grads = gradients(
        wide,
        np.concatenate([out, 0 * one], -1),
        np.concatenate([d_out, one], -1),
        lse,
        p.n_k if block is None else block,
        logits,
    )
    d_v = p.v.shape[-1]
    reference.update(grads._asdict())
    reference["dv"] = grads.dv[..., :d_v]
    return p, reference, grads.dv[..., d_v:]


def _weights(q: Any, k: Any, v: Any, options: Options) -> Any:
    """The attention weights P, all of them: for a float mask's gradient."""
    weights = dense_forward(prepare(q, k, v, options), want_weights=True)[1]
    assert weights is not None
    return weights


def _column_sums(  # noqa: PLR0917 (a problem and its sums)
    q: Any, k: Any, v: Any, options: Options, p: Problem, sums: Any
) -> Any:
    """``Σ_i P_ij`` per key, summed like dk: the weights before dropout."""
    if p.dropout_mask is None:
        return sums
    plain = replace(options, dropout_mask=None, dropout_p=0.0)
    per_key = _weights(q, k, v, plain).sum(axis=-2)[..., None]
    return ungroup(unbroadcast(per_key, (*p.k.shape[:-1], 1)), (*p.shapes["k"][:-1], 1))


def _largest_row(x: Any) -> Any:
    """``max_i |x_il|`` over the rows, kept as an axis, with no ``|x|`` in memory."""
    return np.maximum(
        np.max(x, axis=-2, keepdims=True), -np.min(x, axis=-2, keepdims=True)
    )


def _largest_like(x: Any, p: Problem, name: str) -> Any:
    """Reduce per-query-head ``x`` to key/value heads with max, as dk sums."""
    target = p.k.shape
    extra = x.ndim - len(target)
    if extra > 0:
        x = x.max(axis=tuple(range(extra)))
    axes = tuple(i for i, n in enumerate(target[:-2]) if n == 1 and x.shape[i] != 1)
    if axes:
        x = x.max(axis=axes, keepdims=True)
    caller = p.shapes[name]
    if len(caller) >= 3 and x.ndim >= 3 and x.shape[-3] != caller[-3]:
        x = x.reshape(*x.shape[:-3], caller[-3], -1, *x.shape[-2:]).max(axis=-3)
    return x


class _Judged(NamedTuple):
    """What a rule's reference pass takes: the float64 inputs and the kernel's u."""

    q: Any
    k: Any
    v: Any
    d_out: Any
    options: Options
    u: float
    wanted: set[str]


def _reference_and_bounds(  # noqa: PLR0915 (one derivation, step by step)
    judged: _Judged,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """sdpa_ref's float64 values and the error bound of a correct kernel.

    The bound is that of a kernel of unit roundoff ``u`` plus that of the
    reference itself (a correct float64 computation, u = 2**-53). Returns
    ``(reference, bound)``, dicts keyed like :data:`_GRADIENTS` plus ``out``
    and ``lse``. Costs the reference's forward and its backward with one
    extra column, and a few passes over each array.
    """
    q, k, v, d_out, options, u, wanted = judged
    p, reference, sums = _reference(q, k, v, d_out, options)
    out, lse = reference["out"], reference["lse"]
    bound: dict[str, Any] = {}
    total = 1.0 + UNIT_ROUNDOFF["float64"] / u  # the reference's own error
    d_v = p.v.shape[-1]
    centred = p.sink is None and p.dropout_mask is None

    rb = _row_bounds(p, u, lse)
    grow = np.exp(2 * rb.phi)[..., None]  # |P̃/P - 1| <= e^{2Φ} - 1
    top = np.max(p.v, axis=-2, keepdims=True)
    bottom = np.min(p.v, axis=-2, keepdims=True)
    # The weights sum to at most 1: Σ_j Z_ij |v_jc| <= max_j |v_jc| / (1 - p),
    # and so is |O_ic|.
    spread = np.maximum(top, -bottom) * p.dropout_scale
    # The sums' rounding, γ (Σ_j Z_ij |v_jc| + |O_ic|) <= 2 γ spread_c.
    summed = (total * 2 * _gamma(2 * rb.terms + 7, u)) * grow * spread
    if centred:
        # The weights sum to 1, so their errors move O_ic by Σ_j ΔP_ij (v_jc -
        # O_ic), at most max_j |v_jc - O_ic| = |O_ic - mid_c| + half_c.
        out_bound = out - (top + bottom) / 2
        np.abs(out_bound, out=out_bound)
        out_bound += (top - bottom) / 2
        out_bound *= total * (grow - 1)
        out_bound += summed
    else:
        out_bound = summed + (total * (grow - 1)) * spread
    del summed
    bound["out"] = out_bound  # the kernel's bound, times total
    lse_bound = _lse_bound(p, rb, lse)
    bound["lse"] = total * lse_bound
    if d_out is None:
        return reference, bound

    # Backward: per-row magnitudes, weighted by each key's column sum.
    ue = rb.ue
    finite_lse = np.where(np.isfinite(lse), np.abs(lse), 0.0)
    g = np.sqrt(np.einsum("...ic,...ic->...i", d_out, d_out))
    v_norm = _row_max(np.sqrt(np.einsum("...jc,...jc->...j", p.v, p.v)))[..., None]
    delta = np.einsum("...ic,...ic->...i", d_out, out)
    dp = g * v_norm * p.dropout_scale  # ≥ |dP_ij|
    big_t = dp + np.abs(delta)  # ≥ |dP_ij - D_i|, so |dS_ij| <= P_ij T_i
    rho = np.maximum(
        np.expm1(rb.logit + lse_bound + _gamma(3, u) * (rb.shift + finite_lse) + ue),
        np.expm1(2 * rb.phi + _gamma(2 * rb.terms + 5, u)),
    ) + _gamma(2, u)
    d_dp = _gamma(d_v + 2, u) * dp
    # Σ_c |dO_ic| x_ic <= ||dO_i|| ||x_i||, for the output's error and size.
    d_delta = np.maximum(
        g * np.sqrt(np.einsum("...ic,...ic->...i", out_bound, out_bound)) / total
        + _gamma(d_v, u) * g * np.sqrt(np.einsum("...ic,...ic->...i", out, out)),
        (rho + (1 + rho) * _gamma(p.n_k + d_v + 3, u)) * dp,
    )
    g_pre = (
        rho * big_t
        + (1 + rho) * (d_dp + d_delta) * (1 + _gamma(2, u))
        + _gamma(2, u) * (1 + rho) * big_t
    )
    # Back through a user's score mod: dS_in = f'(s) dS, with f' taken at a
    # score off by the logit's error, and evaluated with a few roundings.
    g_mid, t_mid, soft_err = g_pre, big_t, rb.logit
    if rb.mod is not None:
        slope_err = rb.mod.bend * rb.given + (_gamma(3, u) + ue) * rb.mod.slope
        g_mid = rb.mod.slope * g_pre * (1 + u) + (1 + rho) * big_t * slope_err
        t_mid = rb.mod.slope * big_t
        soft_err = rb.given
    g_full = g_mid
    if p.softcap is not None:
        t_err = soft_err / p.softcap + ue + _gamma(3, u)
        g_full = g_mid * (1 + u) + 2 * (1 + rho) * t_mid * t_err
    mag = (1 + rho) * t_mid + g_full  # ≥ |dŜ_ij| / P_ij
    n_rows = int(np.prod(p.out_shape[:-1])) // int(np.prod(p.shapes["k"][:-1]))
    w_q = g_full + _gamma(n_rows + 3, u) * mag
    w_v = rho + (1 + rho) * _gamma(n_rows + 2, u)
    # The kernel's last rounding of each gradient, u2 |dq_il|, is bounded by
    # the same row and column factors: |dq_il| <= scale mag_i max_j |k_jl|,
    # |dk_jl| <= scale Σ_i P_ij mag_i |q_il|, |dv_jc| <= Σ_i Z_ij |dO_ic|.
    u2 = _gamma(2, u)
    kq = p.scale * (1 + u2)
    w_q = w_q + u2 * mag
    w_v = w_v + u2
    # Σ_i P_ij w_i |q_il| <= (Σ_i P_ij) max_i w_i max_i |q_il|, and so on.
    pt_wq = _column_sums(q, k, v, options, p, sums) * _largest_like(
        _row_max(w_q)[..., None, None] * _largest_row(p.q), p, "k"
    )
    zt_dout = sums * _largest_like(
        _row_max(w_v)[..., None, None] * _largest_row(d_out), p, "v"
    )
    k_abs = _largest_row(p.k)  # ≥ Σ_j P_ij |k_jl|
    dq_rows = (total * kq) * (g_full + (_gamma(p.n_k + 3, u) + u2) * mag)[..., None]
    bound["dq"] = unbroadcast(dq_rows * k_abs, p.shapes["q"])
    bound["dk"] = (total * kq) * pt_wq
    bound["dv"] = total * zt_dout
    if p.sink is not None:
        sink = np.broadcast_to(p.sink[..., 0], lse.shape)
        weight = np.where(
            np.isfinite(lse), np.exp(sink - np.where(np.isfinite(lse), lse, 0.0)), 0.0
        )
        rho_s = np.maximum(
            np.expm1(lse_bound + _gamma(3, u) * (np.abs(sink) + finite_lse) + ue),
            np.expm1(2 * rb.phi + _gamma(2 * rb.terms + 5, u)),
        )
        rows = weight * (rho_s * np.abs(delta) + (1 + rho_s) * d_delta)
        rows = rows + _gamma(lse.size // lse.shape[-2] + 2, u) * weight * (
            1 + rho_s
        ) * (np.abs(delta) + d_delta)
        per_head = rows.reshape(-1, lse.shape[-2], p.n_q).sum(axis=(0, 2))
        bound["dsink_logits"] = total * (
            per_head + u * np.abs(reference["dsink_logits"])
        )
    if p.bias is not None and "dmask" in wanted:
        weights = _weights(q, k, v, options)
        count = int(np.prod(weights.shape)) // int(np.prod(p.bias.shape))
        per_score = (
            weights
            * (g_pre + _gamma(count + 1, u) * ((1 + rho) * big_t + g_pre))[..., None]
        )
        bound["dmask"] = total * unbroadcast(per_score, p.bias.shape)
    return reference, bound


# ---------------------------------------------------------------------------
# Verdicts


@dataclass(frozen=True)
class Check:
    """The verdict on one array a kernel returned.

    ``rule`` is ``"flash"`` (factor × the naive error + atol, one number for
    the whole array) or ``"bound"`` (an error bound per element, times
    ``factor``, plus ``atol``). ``ratio`` is the largest error over its bound:
    the array passes when it is at most 1. ``bound`` is the bound at the
    ``worst`` element, the one with that ratio.
    """

    name: str
    passed: bool
    rule: str
    precision: str
    kernel_error: float
    bound: float
    ratio: float
    failing: int
    size: int
    worst: tuple[int, ...]
    kernel_value: float
    reference_value: float
    naive_error: float | None
    factor: float
    atol: float
    where: str
    message: str


@dataclass(frozen=True)
class Verdict(Sequence[Check]):
    """Every :class:`Check` of one kernel call, and the slip that explains a failure.

    Indexing and iterating give the checks, in the order out, lse, dq, dk,
    dv, dmask, dsink_logits.
    """

    checks: tuple[Check, ...]
    precision: str
    slip: str | None = None

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return all(c.passed for c in self.checks)

    @property
    def message(self) -> str:
        """The failed checks' messages, and the slip that explains them."""
        failed = [c.message for c in self.checks if not c.passed]
        if not failed:
            return "every check passed: " + ", ".join(c.name for c in self.checks)
        rule = {c.rule for c in self.checks}
        how = (
            "FlashAttention's rule, factor x naive error + atol"
            if rule == {"flash"}
            else "an error bound that holds for any summation order"
            if rule == {"bound"}
            else "the rules above"
        )
        lines = [
            f"The {self.precision} kernel fails {len(failed)} of "
            f"{len(self.checks)} checks ({how}):"
        ]
        lines += failed
        if self.slip is not None:
            lines.append(self.slip)
        return "\n".join(lines)

    def __getitem__(self, index: Any) -> Any:
        return self.checks[index]

    def __len__(self) -> int:
        return len(self.checks)

    def __iter__(self) -> Iterator[Check]:
        return iter(self.checks)


def _errors(actual: Any, reference: Any) -> Any:
    """|actual - reference|, 0 where both are NaN or equal infinities, inf for NaN."""
    actual = np.asarray(actual)
    with np.errstate(invalid="ignore"):
        err = np.subtract(actual, reference, dtype=np.float64)
    np.abs(err, out=err)
    if err.size and np.isnan(err.flat[np.argmax(err)]):  # NaN - NaN, inf - inf, ...
        nan = np.isnan(err)
        same = (np.isnan(actual) & np.isnan(reference)) | (actual == reference)
        err[nan & same] = 0.0
        err[nan & ~same] = np.inf
    return err


def _ranges(indices: Any, limit: int = 4) -> str:
    """``[0, 1, 2, 5]`` (sorted, distinct) as ``"0-2, 5"``, at most ``limit`` ranges."""
    values = [int(i) for i in indices]
    runs: list[list[int]] = []
    for i in values:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        text.append(f"... ({len(runs) - limit} more ranges)")
    return ", ".join(text)


def _labels(name: str, ndim: int, layout: str) -> list[str]:
    """What each axis of an array called ``name`` indexes, in the caller's layout."""
    if name == "dsink_logits":
        return ["head"]
    if name == "dmask":
        return ["batch"] * max(ndim - 3, 0) + ["head", "query", "key"][-min(ndim, 3) :]
    row = "key" if name in ("dk", "dv") else "query"
    if name == "lse":
        tail = ["head", row]
    elif layout == "bshd":
        tail = [row, "head", "column"]
    else:
        tail = ["head", row, "column"]
    tail = tail[-min(ndim, len(tail)) :]
    return ["batch"] * (ndim - len(tail)) + tail


def _judge(  # noqa: PLR0917 (the columns of one verdict)
    name: str,
    actual: Any,
    reference: Any,
    bound: Any,
    rule: str,
    precision: str,
    naive_error: float | None,
    factor: float,
    atol: float,
    layout: str,
    skip: Any = None,
) -> Check:
    """One array's verdict: where it fails, and its worst element."""
    reference = np.asarray(reference, dtype=np.float64)
    actual = np.asarray(actual)
    if actual.shape != reference.shape:
        raise ValueError(
            f"{name} has shape {actual.shape}, but the reference's is {reference.shape}"
        )
    err = _errors(actual, reference)
    limit = np.broadcast_to(np.asarray(bound, dtype=np.float64), err.shape)
    if skip is not None:
        err[np.broadcast_to(skip, err.shape)] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.divide(err, limit)
    worst_at = int(np.argmax(ratio)) if ratio.size else 0
    if ratio.size and np.isnan(ratio.flat[worst_at]):  # argmax stops at a NaN
        ratio[np.isnan(ratio)] = 0.0  # 0 / 0: exact under a zero bound
        worst_at = int(np.argmax(ratio))
    fails = ratio > 1 if ratio.size and ratio.flat[worst_at] > 1 else None
    failing = 0 if fails is None else int(np.count_nonzero(fails))
    worst: tuple[int, ...] = (
        tuple(int(i) for i in np.unravel_index(worst_at, ratio.shape))
        if ratio.size
        else ()
    )
    worst_ratio = float(ratio[worst]) if ratio.size else 0.0
    # Report in the caller's layout: swap sequence and head axes back.
    labels = _labels(name, err.ndim, "bhsd")
    shown_labels = _labels(name, err.ndim, layout)
    moved = worst
    if layout == "bshd" and name in ("out", "dq", "dk", "dv") and err.ndim >= 3:
        moved = (*worst[:-3], worst[-2], worst[-3], worst[-1])
    places = ", ".join(
        f"{label} {i}" for label, i in zip(shown_labels, moved, strict=True)
    )
    kernel_value = float(actual[worst]) if actual.size else 0.0
    reference_value = float(reference[worst]) if reference.size else 0.0
    where = _where_failing(fails, labels) if failing else ""
    size = int(err.size)
    passed = failing == 0
    there = float(limit[worst]) if limit.size else 0.0
    yardstick = _yardstick(name, rule, there, precision, naive_error, factor, atol)
    if passed:
        message = (
            f"{name}: passes; largest error {float(err.max(initial=0.0)):.3g}, "
            f"{worst_ratio:.2g} of its bound"
        )
    else:
        message = (
            f"{name}: {failing:,} of {size:,} elements "
            f"({100 * failing / size:.3g}%) exceed "
            f"their bound, in {where}.\n"
            f"  Worst at {places}: kernel {kernel_value!r}, reference "
            f"{reference_value!r}, error {float(err[worst]):.3g}, {yardstick} "
            f"({worst_ratio:.3g} times the bound)."
        )
    return Check(
        name=name,
        passed=passed,
        rule=rule,
        precision=precision,
        kernel_error=float(err.max(initial=0.0)),
        bound=there,
        ratio=worst_ratio,
        failing=failing,
        size=size,
        worst=moved,
        kernel_value=kernel_value,
        reference_value=reference_value,
        naive_error=naive_error,
        factor=factor,
        atol=atol,
        where=where,
        message=message,
    )


def _where_failing(fails: Any, labels: Sequence[str]) -> str:
    """``"batch entries 0-1, head 3, query rows 32-127"``: where elements fail."""
    nouns = {
        "batch": ("batch entry", "batch entries"),
        "head": ("head", "heads"),
        "query": ("query row", "query rows"),
        "key": ("key row", "key rows"),
    }
    parts = []
    for axis, label in enumerate(labels):
        if label == "column":
            continue
        others = tuple(i for i in range(fails.ndim) if i != axis)
        found = np.flatnonzero(fails.any(axis=others) if others else fails)
        parts.append(f"{nouns[label][found.size > 1]} {_ranges(found)}")
    return ", ".join(parts)


def _yardstick(  # noqa: PLR0917 (the terms of one bound)
    name: str,
    rule: str,
    there: float,
    precision: str,
    naive_error: float | None,
    factor: float,
    atol: float,
) -> str:
    """The bound at the worst element, and what it is made of."""
    if rule != "flash":
        return f"bound there {there:.3g}"
    rule_part = (
        f"{factor:g} x naive {precision} error {naive_error:.3g} + atol {atol:.3g}"
    )
    rest = there - factor * (naive_error or 0.0) - atol
    if rest <= 1e-3 * there:
        return f"bound {there:.3g} = {rule_part}"
    if name == "lse":
        return f"bound {there:.3g}, the float32 bound, above {rule_part}"
    return (
        f"bound {there:.3g} = {rule_part} + {rest:.2g} from the output's rounding in D"
    )


# ---------------------------------------------------------------------------
# One call of the helper


@dataclass(frozen=True)
class _Call:
    """The helper's arguments, as the caller gave them (caller's layout)."""

    out: Any
    q: Any
    k: Any
    v: Any
    precision: str
    layout: str
    lse: Any
    lse_base: float
    grad_out: Any
    grads: Mapping[str, Any]
    factor: float | None
    atol: float | None
    rule: str
    options: Options  # in (..., heads, seqlen, dim) order: layout is the call's


def _heads_first(x: Any, layout: str, name: str) -> Any:
    if x is None or layout == "bhsd":
        return x
    if np.ndim(x) < 3:
        raise ValueError(
            f"layout='bshd' needs {name} with at least 3 axes (..., seqlen, heads, "
            f"dim), got shape {np.shape(x)}"
        )
    return np.swapaxes(x, -3, -2)


def _grads_dict(grads: Any) -> dict[str, Any]:
    if grads is None:
        return {}
    items: Iterable[tuple[str, Any]]
    if isinstance(grads, Gradients | Mapping):
        given = grads._asdict() if isinstance(grads, Gradients) else dict(grads)
        if given.pop("dscore_mod", None) is not None:
            raise ValueError(
                "grads has dscore_mod, the gradients of a score mod's parameters, "
                "which the helper does not judge: compare them with "
                "sdpa_ref.attention_backward(...).dscore_mod yourself"
            )
        grads = given
    if isinstance(grads, Mapping):
        unknown = sorted(set(grads) - set(_GRADIENTS))
        if unknown:
            raise ValueError(
                f"grads has unknown names {unknown}; it may hold {list(_GRADIENTS)}"
            )
        items = grads.items()
    elif isinstance(grads, (tuple, list)):
        grads = list(grads)
        while len(grads) > len(_GRADIENTS) and grads[-1] is None:
            grads.pop()  # tuple(Gradients(...)) ends with dscore_mod=None
        if not 1 <= len(grads) <= len(_GRADIENTS):
            raise ValueError(
                f"grads must be a Gradients, a mapping, or (dq, dk, dv[, dmask, "
                f"dsink_logits]), got {len(grads)} arrays"
            )
        items = zip(_GRADIENTS, grads, strict=False)
    else:
        raise TypeError(
            f"grads must be a Gradients, a mapping or a tuple of arrays, got "
            f"{type(grads).__name__}"
        )
    out = {}
    for name, value in items:
        if value is not None:
            out[name] = _as_numpy(value, name)[0]
    return out


def _unpacked(call: _Call) -> _Call:
    """A packed batch's call as the padded call it stands for.

    Each sequence becomes a batch entry of the (B, heads, max, dim) layout,
    with its lengths, as :func:`sdpa_ref.attention` unpacks it; the
    kernel's results are padded the same way. A key slot's positions outside
    ``key_leftpad`` to ``seqused_k`` take no part in attention, so the
    kernel's dk and dv there are not judged (they become the reference's 0).
    """
    o = call.options
    q, k, v = (
        _heads_first(a, call.layout, name)
        for a, name in ((call.q, "q"), (call.k, "k"), (call.v, "v"))
    )
    q_pad, k_pad, v_pad, q_len, k_end, packing = unpack(
        q, k, v, o.cu_seqlens_q, o.cu_seqlens_k, o.seqused_k
    )
    start = 0 if o.key_leftpad is None else np.asarray(o.key_leftpad)
    used = np.arange(packing.k_tokens.shape[1]) < np.asarray(k_end)[:, None]
    used &= np.arange(packing.k_tokens.shape[1]) >= np.reshape(start, (-1, 1))

    def rows(x: Any, name: str) -> Any:
        return pad(_heads_first(np.asarray(x), call.layout, name), packing.q_tokens)

    def keys(x: Any, name: str) -> Any:
        padded = pad(_heads_first(np.asarray(x), call.layout, name), packing.k_tokens)
        return np.where(used[:, None, :, None], padded, 0)

    grads = dict(call.grads)
    for name, fill in (("dq", rows), ("dk", keys), ("dv", keys)):
        if name in grads:
            grads[name] = fill(grads[name], name)
    heads = q_pad.shape[1]
    return replace(
        call,
        out=rows(call.out, "out"),
        q=q_pad,
        k=k_pad,
        v=v_pad,
        layout="bhsd",
        lse=None
        if call.lse is None
        else unpack_lse(np.asarray(call.lse, np.float64), packing, heads),
        grad_out=None if call.grad_out is None else rows(call.grad_out, "grad_out"),
        grads=grads,
        options=replace(
            o,
            cu_seqlens_q=None,
            cu_seqlens_k=None,
            seqused_k=None,
            q_lengths=q_len,
            k_lengths=k_end,
        ),
    )


def _run(call: _Call) -> Verdict:  # noqa: PLR0912, PLR0915 (the checks, one by one)
    """Judge every array of one call; no slip search."""
    precision = call.precision
    layout = call.layout
    q, k, v = (
        _heads_first(a, layout, n)
        for a, n in ((call.q, "q"), (call.k, "k"), (call.v, "v"))
    )
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    p = prepare(q64, k64, v64, call.options)
    options = replace(call.options, check_finite=False)  # checked once, just above
    grads = {
        name: _heads_first(a, layout, name) if name in ("dq", "dk", "dv") else a
        for name, a in call.grads.items()
    }
    if "dmask" in grads and p.bias is None:
        raise ValueError("grads has dmask, but there is no float mask to differentiate")
    if "dsink_logits" in grads and p.sink is None:
        raise ValueError("grads has dsink_logits, but no sink_logits were given")
    d_out = None
    if grads:
        if call.grad_out is None:
            raise ValueError("grads need the grad_out that the kernel was given")
        grad_out = _heads_first(
            _as_numpy(call.grad_out, "grad_out")[0], layout, "grad_out"
        )
        d_out = real_array(grad_out, "grad_out")
        if d_out.dtype.name != precision:  # the kernel saw it in its own dtype
            d_out = rounding(precision)(d_out)
        d_out = np.broadcast_to(np.asarray(d_out, dtype=np.float64), p.out_shape)
    judged = _Judged(
        q64, k64, v64, d_out, options, UNIT_ROUNDOFF[precision], set(grads)
    )
    rule = call.rule
    if rule == "auto":
        rule = "flash" if precision in ("float16", "bfloat16") else "bound"
    out = _heads_first(call.out, layout, "out")
    lse = None
    skip_lse = None
    if call.lse is not None:
        lse = np.asarray(call.lse, dtype=np.float64) * math.log(call.lse_base)
        skip_lse = p.padded_rows()
    checks: list[Check] = []

    def add(  # noqa: PLR0917 (the columns of one verdict)
        name: str,
        actual: Any,
        reference: Any,
        bound: Any,
        naive: float | None,
        factor: float,
        atol: float,
        skip: Any = None,
    ) -> None:
        checks.append(
            _judge(
                name,
                actual,
                reference,
                bound,
                rule,
                precision,
                naive,
                factor,
                atol,
                layout,
                skip,
            )
        )

    if rule == "bound":
        factor = 1.0 if call.factor is None else float(call.factor)
        atol = 0.0 if call.atol is None else float(call.atol)
        reference, bound = _reference_and_bounds(judged)
        add(
            "out",
            out,
            reference["out"],
            factor * bound["out"] + atol,
            None,
            factor,
            atol,
        )
        if lse is not None:
            skip = _lse_skip(lse, reference["lse"], skip_lse)
            add(
                "lse",
                lse,
                reference["lse"],
                factor * bound["lse"] + atol,
                None,
                factor,
                atol,
                skip,
            )
        for name in _GRADIENTS:
            if name in grads:
                add(
                    name,
                    grads[name],
                    reference[name],
                    factor * bound[name] + atol,
                    None,
                    factor,
                    atol,
                )
        return Verdict(tuple(checks), precision)

    # FlashAttention's rule: factor x the naive computation's error + atol.
    # FlashAttention's factor 3 with a soft-cap: any score mod bends the scores.
    bent = p.softcap if p.softcap is not None or not _user_score_mod(p) else 1.0
    factor = flash_factor(bent) if call.factor is None else float(call.factor)
    reference, inherited = _reference_rounded_d(judged)
    # The pieces cannot rebuild a reduced mask gradient: run it whole.
    naive = _naive_errors(
        q64, k64, v64, d_out, precision, options, reference, whole="dmask" in grads
    )

    def yardstick(
        name: str, dtype: str, extra: float = 0.0
    ) -> tuple[float, float, float]:
        naive_error = naive[name]
        atol = (
            flash_atol(reference[name], dtype) + extra
            if call.atol is None
            else float(call.atol)
        )
        return factor * naive_error + atol, naive_error, atol

    limit, naive_error, atol = yardstick("out", precision)
    add("out", out, reference["out"], limit, naive_error, factor, atol)
    if lse is not None:
        # Kernels keep the log-sum-exp in float32 whatever their dtype. One
        # that computes it from scores rounded to its dtype is off like the
        # naive computation; one that computes it in float32 from the 16-bit
        # inputs, as FlashAttention's kernels do, like a float32 kernel. The
        # verdict allows the larger of the two.
        limit, naive_error, atol = yardstick("lse", "float32")
        u32 = UNIT_ROUNDOFF["float32"]
        in_float32 = (1 + UNIT_ROUNDOFF["float64"] / u32) * _lse_bound(
            p, _row_bounds(p, u32, reference["lse"]), reference["lse"]
        )
        skip = _lse_skip(lse, reference["lse"], skip_lse)
        add(
            "lse",
            lse,
            reference["lse"],
            np.maximum(limit, in_float32),
            naive_error,
            factor,
            atol,
            skip,
        )
    extra = SOFTCAP_GRAD_ATOL if bent is not None else 0.0
    for name in _GRADIENTS:
        if name not in grads:
            continue
        limit, naive_error, atol = yardstick(name, precision, extra)
        if name == "dsink_logits":
            # FlashAttention's CuTe tests: factor x naive + 2 ulp of the
            # reference in the kernel's dtype + atol (check_dsink_vs_ref).
            atol = extra if call.atol is None else float(call.atol)
            limit = factor * naive_error + atol + 2 * _ulp(reference[name], precision)
        limit = limit + inherited.get(name, 0.0)
        add(name, grads[name], reference[name], limit, naive_error, factor, atol)
    return Verdict(tuple(checks), precision)


def _reference_rounded_d(judged: _Judged) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reference, and what rounding the output to ``u`` can do to D.

    A FlashAttention-2 backward computes ``D = rowsum(dO ∘ O)`` from the
    output it wrote in its own dtype, so each ``D_i`` can be off by ``δD_i =
    u Σ_c |dO_ic O_ic|``, and ``dS_ij = P_ij (dP_ij - D_i)`` by ``P_ij δD_i``.
    The naive computation, like torch's autograd, takes ``D`` from ``P`` and
    ``dP`` instead and never sees that error. Returns the reference and, per
    gradient, the bound on what ``δD`` passes on.
    """
    q, k, v, d_out, options, u, wanted = judged
    p, reference, sums = _reference(q, k, v, d_out, options)
    inherited: dict[str, Any] = {}
    if d_out is None:
        return reference, inherited
    out, lse = reference["out"], reference["lse"]
    d_err = u * np.einsum("...ic,...ic->...i", np.abs(d_out), np.abs(out))
    q_abs = np.abs(np.broadcast_to(p.q, (*p.batch, p.n_q, p.q.shape[-1])))
    k_abs = np.max(np.abs(p.k), axis=-2, keepdims=True)
    inherited["dq"] = p.scale * unbroadcast(d_err[..., None] * k_abs, p.shapes["q"])
    inherited["dk"] = (
        p.scale
        * _column_sums(q, k, v, options, p, sums)
        * _largest_like(
            np.max(d_err[..., None] * q_abs, axis=-2, keepdims=True), p, "k"
        )
    )
    if p.sink is not None:
        finite = np.isfinite(lse)
        sink = np.broadcast_to(p.sink[..., 0], lse.shape)
        weight = np.where(finite, np.exp(sink - np.where(finite, lse, 0.0)), 0.0)
        inherited["dsink_logits"] = (
            (weight * d_err).reshape(-1, lse.shape[-2], p.n_q).sum(axis=(0, 2))
        )
    if p.bias is not None and "dmask" in wanted:
        weights = _weights(q, k, v, options)
        inherited["dmask"] = unbroadcast(weights * d_err[..., None], p.bias.shape)
    return reference, inherited


def _ulp(x: Any, precision: str) -> Any:
    """The spacing of ``precision``'s numbers at each ``|x|`` (subnormals included)."""
    bits, min_exponent = FORMATS[precision]
    subnormal = min_exponent - (bits - 1)  # the spacing below the normal numbers
    _, exponent = np.frexp(np.abs(np.asarray(x, dtype=np.float64)))
    return np.ldexp(1.0, np.maximum(exponent - bits, subnormal))


def _lse_skip(lse: Any, reference: Any, padded: Any) -> Any:
    """Rows not judged: padded queries, and empty rows the kernel marks ±inf."""
    if lse.shape != reference.shape:
        raise ValueError(
            f"lse has shape {lse.shape}, but the forward's rows are {reference.shape} "
            f"(..., heads, n_q), in either layout"
        )
    empty = np.isneginf(reference) & np.isinf(lse)
    return np.broadcast_to(padded, reference.shape) | empty


# ---------------------------------------------------------------------------
# Naming the slip


def _slips(call: _Call, p: Problem) -> Iterator[tuple[str, _Call]]:
    """Common convention slips, each as (what it means, the call that tests it)."""
    options = call.options
    causal = options.is_causal
    window = options.window
    align = options.align
    aligned = causal or window is not None or options.chunk is not None
    lengths = options.q_lengths is not None or options.k_lengths is not None
    if aligned and (p.n_q != p.n_k or lengths):
        other: Align = "bottom_right" if align == "top_left" else "top_left"
        who = {
            "top_left": "to the top left, as PyTorch's is_causal does",
            "bottom_right": "to the bottom right, as FlashAttention does",
        }
        yield (
            f"The kernel passes with align={other!r} instead of {align!r}: it aligns "
            f"its causal mask (and window) {who[other]}.",
            replace(call, options=replace(options, align=other)),
        )
    other_layout = "bshd" if call.layout == "bhsd" else "bhsd"
    names = {
        "bhsd": "(batch, heads, seqlen, dim)",
        "bshd": "(batch, seqlen, heads, dim)",
    }
    yield (
        f"The kernel passes with layout={other_layout!r}: it reads its arrays as "
        f"{names[other_layout]}, not {names[call.layout]}.",
        replace(call, layout=other_layout),
    )
    d = p.q.shape[-1]
    if d > 1 and math.isclose(p.scale, 1 / math.sqrt(d), rel_tol=1e-9):
        yield (
            f"The kernel passes with scale=1/d = {1 / d:g}: it divides the scores by "
            f"d = {d}, not by √d.",
            replace(call, options=replace(options, scale=1.0 / d)),
        )
    if call.precision == "float32" and all(
        np.array_equal(to_bfloat16(a), a) for a in (call.q, call.k, call.v)
    ):
        yield (
            "The kernel passes with precision='bfloat16': it computes in bfloat16 "
            "(its float32 inputs hold bfloat16 values); pass precision='bfloat16'.",
            replace(call, precision="bfloat16"),
        )
    if call.lse is not None:
        base, name = (2.0, "2") if call.lse_base != 2 else (math.e, "math.e")
        yield (
            f"The kernel's lse passes with lse_base={name}: it stores the "
            f"log-sum-exp in base {'2' if base == 2 else 'e'}.",
            replace(call, lse_base=base),
        )
    yield from _window_slips(call, options, causal, window)


def _window_slips(
    call: _Call, options: Options, causal: bool, window: Window | None
) -> Iterator[tuple[str, _Call]]:
    if not causal and window is None:
        return
    left, right = (None, None) if window is None else window
    if causal:
        right = 0
    for side, value in (("left", left), ("right", right)):
        if value is None:
            continue
        for step in (1, -1):
            new = value + step
            if new < 0:
                continue
            bounds = (new, right) if side == "left" else (left, new)
            changed = replace(
                options, window=bounds, is_causal=causal and bounds[1] == 0
            )
            reach = "one key further" if step > 0 else "one key less far"
            if causal and side == "right":
                what = (
                    f"window={bounds!r}, is_causal=False: its causal mask is off by "
                    f"one, and lets each query see the next key"
                )
            else:
                what = (
                    f"window={bounds!r}: its window's {side} bound is off by one "
                    f"(it reaches {reach} to the {side})"
                )
            yield (f"The kernel passes with {what}.", replace(call, options=changed))


def _explain(call: _Call) -> str:
    q64 = np.asarray(_heads_first(call.q, call.layout, "q"), dtype=np.float64)
    k64 = np.asarray(_heads_first(call.k, call.layout, "k"), dtype=np.float64)
    v64 = np.asarray(_heads_first(call.v, call.layout, "v"), dtype=np.float64)
    p = prepare(q64, k64, v64, call.options)
    tried = []
    for text, variant in _slips(call, p):
        tried.append(
            text.split(": ")[0]
            .removeprefix("The kernel passes with ")
            .removeprefix("The kernel's lse passes with ")
        )
        try:
            if _run(variant).passed:
                return text
        except (ValueError, TypeError):
            continue
    return (
        "No common convention slip explains it; tried " + "; ".join(tried) + "."
        if tried
        else "No common convention slip applies."
    )


# ---------------------------------------------------------------------------
# The helper


#: The forms ``grads=`` takes, a Gradients, a mapping or (dq, dk, dv[, ...]).
GradsInput = Gradients | Mapping[str, ArrayInput | None] | Sequence[ArrayInput | None]


@check_keywords(empty_rows="zero")
def check_attention(
    out: ArrayInput,
    q: ArrayInput,
    k: ArrayInput,
    v: ArrayInput,
    *,
    lse: ArrayInput | None = None,
    lse_base: float = math.e,
    grad_out: ArrayInput | None = None,
    grads: GradsInput | None = None,
    precision: Precision | None = None,
    rule: Rule = "auto",
    factor: float | None = None,
    atol: float | None = None,
    diagnose: bool = True,
    **options: Unpack[OptionKeywords],
) -> Verdict:
    """:func:`assert_attention_close` without the assertion: the :class:`Verdict`.

    ``diagnose=False`` skips the search for a convention slip on failure.

    Examples
    --------
    >>> q = k = v = np.eye(2, dtype=np.float32)
    >>> verdict = check_attention(q, q, k, v)
    >>> verdict.passed, verdict[0].name, verdict[0].failing
    (False, 'out', 4)
    """
    layout = options.pop("layout", Options.layout)
    if layout not in _LAYOUTS:
        raise ValueError(f"layout must be one of {_LAYOUTS}, got {layout!r}")
    if rule not in ("auto", "flash", "bound"):
        raise ValueError(f"rule must be 'auto', 'flash' or 'bound', got {rule!r}")
    if not (isinstance(lse_base, (int, float)) and lse_base > 0 and lse_base != 1):
        raise ValueError(
            f"lse_base must be a positive number other than 1, got {lse_base!r}"
        )
    # One validated, frozen set of options, shared by every pass below. The
    # helper puts the kernel's arrays in (..., heads, seqlen, dim) order itself.
    checked = Options(**options)
    arrays = [_as_numpy(a, name) for a, name in ((q, "q"), (k, "k"), (v, "v"))]
    resolved = _kernel_precision(arrays, precision)
    call = _Call(
        out=_as_numpy(out, "out")[0],
        q=arrays[0][0],
        k=arrays[1][0],
        v=arrays[2][0],
        precision=resolved,
        layout=layout,
        lse=None if lse is None else _as_numpy(lse, "lse")[0],
        lse_base=float(lse_base),
        grad_out=grad_out,
        grads=_grads_dict(grads),
        factor=factor,
        atol=atol,
        rule=rule,
        options=checked,
    )
    if checked.cu_seqlens_q is not None:
        call = _unpacked(call)
    verdict = _run(call)
    if verdict.passed or not diagnose:
        return verdict
    return Verdict(verdict.checks, verdict.precision, _explain(call))


class CheckKeywords(OptionKeywords, total=False):
    """The keywords of :func:`assert_attention_close`, for type checkers.

    :func:`check_attention`'s, less ``diagnose``; their defaults are
    :func:`check_attention`'s.
    """

    lse: ArrayInput | None
    lse_base: float
    grad_out: ArrayInput | None
    grads: GradsInput | None
    precision: Precision | None
    rule: Rule
    factor: float | None
    atol: float | None


_ASSERT_SIGNATURE = inspect.signature(check_attention)


@with_signature(
    _ASSERT_SIGNATURE.replace(
        parameters=[
            p for p in _ASSERT_SIGNATURE.parameters.values() if p.name != "diagnose"
        ]
    )
)
def assert_attention_close(
    out: ArrayInput,
    q: ArrayInput,
    k: ArrayInput,
    v: ArrayInput,
    **checks: Unpack[CheckKeywords],
) -> Verdict:
    """Check everything an attention kernel returned against sdpa_ref's float64.

    The output, and when given the log-sum-exp and every gradient, are each
    judged by the rule that fits the kernel's precision (see the module's
    docstring): FlashAttention's rule in float16 and bfloat16, an error bound
    that holds for any summation order in float32 and float64.

    Parameters
    ----------
    out : array_like or torch.Tensor
        The kernel's output, in ``layout``.
    q, k, v : array_like or torch.Tensor
        The kernel's inputs, exactly as it received them. Their dtype is the
        kernel's precision: a bfloat16 tensor means ``precision="bfloat16"``,
        a float16 one float16. NumPy has no bfloat16, so a bfloat16 kernel
        tested with NumPy passes float32 arrays holding bfloat16 values and
        ``precision="bfloat16"``.
    lse : array_like, shape (..., heads, n_q), optional
        The kernel's log-sum-exp of each row, in both layouts. Rows of padded
        queries are not judged; an empty row passes with -inf or +inf.
    lse_base : float
        ``math.e`` for a natural log-sum-exp; ``2`` for kernels that store it in
        base 2.
    grad_out : array_like, optional
        The gradient the kernel's backward received, rounded to the kernel's
        precision here as the kernel saw it.
    grads : Gradients, mapping or tuple, optional
        The kernel's gradients: any of ``dq``, ``dk``, ``dv``, ``dmask`` (a
        float mask's) and ``dsink_logits``, each judged.
    precision : str, optional
        One of :data:`PRECISIONS`; by default the inputs' dtype.
    rule : {"auto", "flash", "bound"}
        ``"auto"`` picks FlashAttention's rule for float16 and bfloat16 and the
        error bound for float32 and float64. ``"flash"`` applies
        FlashAttention's rule in any precision: sharper, but one summation
        order's error is its yardstick, so correct float32 kernels can fail.
    factor, atol : float, optional
        FlashAttention's rule: the multiple of the naive error (default
        :func:`flash_factor`) and the absolute tolerance (default
        :func:`flash_atol`). The error bound: a multiple of the bound (default
        1) and an absolute tolerance added to it (default 0).
    mask, mask_mod, score_mod, is_causal, scale, empty_rows, check_finite, align, \
window, sink_tokens, chunk, softcap, sink_logits, q_lengths, k_lengths, key_leftpad, \
cu_seqlens_q, cu_seqlens_k, seqused_k, dropout_mask, dropout_p
        As for :func:`sdpa_ref.attention`, except that ``empty_rows``
        defaults to ``"zero"``, what FlashAttention and PyTorch 2.5 and later
        give a row with no allowed key. :func:`flash_options` translates
        FlashAttention's names. FlexAttention's ``mask_mod`` and
        ``score_mod`` are sdpa_ref's; a kernel written with a score mod is
        judged as one with a soft-cap (FlashAttention's factor 3 and its
        gradient allowance). A packed batch (``cu_seqlens_q``,
        ``cu_seqlens_k``) is judged one sequence per batch entry: a failure
        names the sequence as the batch entry and rows within it; keys of a
        slot outside ``key_leftpad`` to ``seqused_k`` are not judged.
    layout : {"bhsd", "bshd"}
        ``"bshd"`` is FlashAttention's (batch, seqlen, heads, dim) for q, k,
        v, the output, ``grad_out`` and dq, dk, dv. Masks and the
        log-sum-exp keep their (batch, heads, ...) shapes in both.

    Returns
    -------
    Verdict
        A :class:`Check` per array: ``verdict[0]`` is the output's.

    Raises
    ------
    AssertionError
        Naming, per failing array, how many elements exceed the bound and
        where, the worst element to every digit, and the convention slip
        (alignment, layout, scale, precision, lse base, window bound) that
        makes the kernel pass, if one does.

    Examples
    --------
    A correct kernel, here sdpa_ref itself rounded to float32:

    >>> from sdpa_ref import attention
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.standard_normal((1, 2, 8, 4)).astype(np.float32)
    ...            for _ in range(3))
    >>> out = attention(q, k, v).astype(np.float32)
    >>> verdict = assert_attention_close(out, q, k, v)
    >>> verdict.passed, verdict[0].rule
    (True, 'bound')
    """
    __tracebackhide__ = True
    verdict = check_attention(out, q, k, v, **checks)
    if not verdict.passed:
        raise AssertionError(verdict.message)
    return verdict


# ---------------------------------------------------------------------------
# FlashAttention's names


def _flash_bound(value: Any, name: str) -> int | None:
    if value is None or (not isinstance(value, bool) and value == -1):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(
            f"window_size's {name} bound must be an int >= 0, or -1 or None for "
            f"unbounded, got {value!r}"
        )
    return int(value)


def _padding(mask: Any, name: str) -> tuple[Any, bool]:
    """A (batch, seqlen) boolean mask, and whether its padding is all at the end."""
    arr = _as_numpy(mask, name)[0]
    if arr.dtype != bool or arr.ndim != 2:
        raise ValueError(
            f"{name} must be a boolean (batch, seqlen) array, True = a real token, "
            f"got dtype {arr.dtype}, shape {arr.shape}"
        )
    lengths = arr.sum(axis=-1)
    prefix = bool(np.array_equal(arr, np.arange(arr.shape[1]) < lengths[:, None]))
    return arr, prefix


def flash_options(  # noqa: PLR0912 (attention_ref's arguments)
    *,
    causal: bool = False,
    window_size: tuple[int | None, int | None] = (None, None),
    softcap: float = 0.0,
    softmax_scale: float | None = None,
    attention_chunk: int = 0,
    sink_token_length: int = 0,
    learnable_sink: Any = None,
    dropout_p: float = 0.0,
    dropout_mask: Any = None,
    attn_bias: Any = None,
    query_padding_mask: Any = None,
    key_padding_mask: Any = None,
    key_leftpad: Any = None,
) -> dict[str, Any]:
    """The sdpa_ref options that FlashAttention's ``attention_ref`` arguments mean.

    ``attention_ref`` (flash_attn/utils/testing.py:228-360 at commit 0251105a)
    aligns every mask to the bottom right, zeroes the output of a row with no
    allowed key and of a padded query, and names its options differently:

    - ``causal`` sets the window's right bound to 0 (``window_size =
      (window_size[0], 0)``, line 269), whatever ``window_size`` said;
    - ``window_size``: ``-1`` or ``None`` for an unbounded side, as the
      kernels (-1) and ``attention_ref`` (None) write it;
    - ``softcap=0.0`` and ``attention_chunk=0`` mean off;
    - ``sink_token_length`` counts only with a left window bound, as in
      ``construct_local_mask``;
    - ``learnable_sink`` is ``sink_logits``, ``attn_bias`` a float ``mask``,
      ``softmax_scale`` (the kernels' name) ``scale``;
    - ``key_leftpad`` (with the ``key_padding_mask`` that is True from it to
      each sequence's last key) is sdpa_ref's ``key_leftpad``;
    - ``query_padding_mask`` and ``key_padding_mask`` are (batch, seqlen)
      boolean masks, True for a real token. Padding at the end becomes
      ``q_lengths`` and ``k_lengths``. Any other pattern, left padding
      included, becomes a boolean ``mask``, with the causal, window and chunk
      masks built as ``construct_local_mask`` builds them, from each
      sequence's count of real tokens; a padded query's row is then all
      False, so its output is 0.

    Returns
    -------
    dict
        Keyword options for :func:`sdpa_ref.attention` and
        :func:`assert_attention_close`.

    Examples
    --------
    >>> options = flash_options(causal=True, window_size=(3, -1))
    >>> options["is_causal"], options["window"], options["align"]
    (True, (3, None), 'bottom_right')
    >>> flash_options(key_padding_mask=np.array([[True, True, False]]))
    {'align': 'bottom_right', 'empty_rows': 'zero', 'k_lengths': array([2])}
    """
    if len(window_size) != 2:
        raise ValueError(
            f"window_size must be a pair (left, right), got {window_size!r}"
        )
    left = _flash_bound(window_size[0], "left")
    right = 0 if causal else _flash_bound(window_size[1], "right")
    options: dict[str, Any] = {"align": "bottom_right", "empty_rows": "zero"}
    local: dict[str, Any] = {}
    if causal:
        local["is_causal"] = True
        if left is not None:
            local["window"] = (left, None)
    elif left is not None or right is not None:
        local["window"] = (left, right)
    if sink_token_length and left is not None:
        local["sink_tokens"] = int(sink_token_length)
    if attention_chunk:
        local["chunk"] = int(attention_chunk)
    if softcap < 0:
        raise ValueError(f"softcap must be >= 0 (0.0 = off), got {softcap!r}")
    if softcap > 0:
        options["softcap"] = float(softcap)
    if softmax_scale is not None:
        options["scale"] = float(softmax_scale)
    if learnable_sink is not None:
        options["sink_logits"] = _as_numpy(learnable_sink, "learnable_sink")[0]
    if dropout_p:
        options["dropout_p"] = float(dropout_p)
    if dropout_mask is not None:
        options["dropout_mask"] = _as_numpy(dropout_mask, "dropout_mask")[0]
    bias = None if attn_bias is None else _as_numpy(attn_bias, "attn_bias")[0]
    if key_leftpad is not None:
        return _leftpadded(
            options | local, bias, key_leftpad, query_padding_mask, key_padding_mask
        )
    pads = {
        name: _padding(mask, name)
        for name, mask in (
            ("query_padding_mask", query_padding_mask),
            ("key_padding_mask", key_padding_mask),
        )
        if mask is not None
    }
    if all(prefix for _, prefix in pads.values()):
        for name, (mask, _) in pads.items():
            options["q_lengths" if name.startswith("query") else "k_lengths"] = (
                mask.sum(-1)
            )
        if bias is not None:
            options["mask"] = bias
        return options | local
    qpad = pads.get("query_padding_mask", (None, True))[0]
    kpad = pads.get("key_padding_mask", (None, True))[0]
    allowed: Any = True
    if local:
        if qpad is None or kpad is None:
            raise ValueError(
                "a padding mask that is not padding at the end, with causal, "
                "window_size or attention_chunk, needs both query_padding_mask and "
                "key_padding_mask (all True where nothing is padded): attention_ref "
                "aligns its masks from both sequences' lengths"
            )
        allowed = _flash_local_mask(qpad, kpad, local, left, right)
    if kpad is not None:
        allowed = allowed & kpad[:, None, None, :]
    if qpad is not None:
        allowed = allowed & qpad[:, None, :, None]
    allowed = np.asarray(allowed)
    options["mask"] = allowed if bias is None else np.where(allowed, bias, -np.inf)
    return options


def _leftpadded(
    options: dict[str, Any], bias: Any, key_leftpad: Any, qpad: Any, kpad: Any
) -> dict[str, Any]:
    """``attention_ref``'s ``key_leftpad``: keys from it to each sequence's end.

    Its tests pass a ``key_padding_mask`` that is True from ``key_leftpad``
    to the last cached key (tests/test_flash_attn.py:1986-1990), and the
    masks count positions from ``key_leftpad`` (testing.py:171-174): that is
    sdpa_ref's ``key_leftpad`` with ``k_lengths`` at the end of the run.
    """
    start = _as_numpy(key_leftpad, "key_leftpad")[0]
    if kpad is None:
        raise ValueError(
            "key_leftpad needs the key_padding_mask that goes with it (True from "
            "key_leftpad to each sequence's last key), as FlashAttention's tests "
            "pass them together"
        )
    keys = _padding(kpad, "key_padding_mask")[0]
    end = start + keys.sum(-1)
    run = (np.arange(keys.shape[1]) >= start[:, None]) & (
        np.arange(keys.shape[1]) < end[:, None]
    )
    if not np.array_equal(run, keys):
        raise ValueError(
            "with key_leftpad, key_padding_mask must be True from key_leftpad[b] "
            "to the end of sequence b's keys and False elsewhere"
        )
    options = options | {"key_leftpad": start, "k_lengths": end}
    if qpad is not None:
        queries, prefix = _padding(qpad, "query_padding_mask")
        if not prefix:
            raise ValueError("with key_leftpad, query_padding_mask must pad at the end")
        options["q_lengths"] = queries.sum(-1)
    if bias is not None:
        options["mask"] = bias
    return options


def _flash_local_mask(
    qpad: Any, kpad: Any, local: Mapping[str, Any], left: int | None, right: int | None
) -> Any:
    """``~(construct_local_mask | construct_chunk_mask)``, testing.py:159-225."""
    sq = qpad.sum(-1).reshape(-1, 1, 1, 1)
    sk = kpad.sum(-1).reshape(-1, 1, 1, 1)
    row = np.arange(qpad.shape[1])[:, None]
    col = np.arange(kpad.shape[1])[None, :]
    aligned = row + sk - sq
    masked = np.zeros((1, 1, *np.broadcast_shapes(row.shape, col.shape)), dtype=bool)
    if left is None and right is not None:
        masked = masked | (col > aligned + right)
    elif left is not None:
        reach = aligned + (right if right is not None else np.inf)
        masked = masked | (col > np.minimum(reach, sk))
        masked = masked | (
            (col < aligned - left) & (col >= local.get("sink_tokens", 0))
        )
    chunk = local.get("chunk")
    if chunk:
        start = aligned - np.mod(aligned, chunk)
        masked = masked | (col < start) | (col >= start + chunk)
    return ~masked
