"""Test an attention kernel against sdpa_ref, with FlashAttention's tolerance.

A fixed tolerance cannot serve every precision: 1e-2 passes a float32
kernel that scales by ``1 / d`` on inputs with small logits, and 1e-3 fails
a correct bfloat16 kernel. FlashAttention's tests instead compare the
kernel's error with the error of the *same computation done naively in the
kernel's precision* (hopper/test_flash_attn.py:228-285 at commit
0251105a)::

    |out - out_ref|.max() <= rtol · |out_pt - out_ref|.max() + fwd_atol

``out_ref`` is ``attention_ref`` computed in float32 and rounded to the
kernel's dtype; ``out_pt`` is ``attention_ref(upcast=False,
reorder_ops=True)``, the computation in the kernel's dtype with ``k``
scaled instead of ``q``; ``rtol`` is 2, or 3 with soft-capping; and
``fwd_atol = 2 · |out_ref + 0.3 - 0.3 - out_ref|.max()`` is the rounding
noise of one addition in the kernel's dtype. Here the reference is
sdpa_ref's float64, ``out_pt`` is emulated in NumPy
(:func:`naive_attention`), and the tolerance is measured on the float64
reference rounded to the kernel's dtype (:func:`flash_atol`).

The rule only catches bugs whose error exceeds about twice the naive
error: test at several logit scales, and in float32.

The module also holds small example kernels, one correct and five with
common bugs, for the tests and the page.
"""

from __future__ import annotations

import numpy as np

from ._checks import real_array
from .backward import _unbroadcast, _ungroup, attention_backward
from .core import _prepare, attention
from .precision import to_bfloat16
from .random_model import SEED

__all__ = [
    "BROKEN_KERNELS",
    "FIXED_TOLERANCES",
    "OPTION_NAMES",
    "PRECISIONS",
    "SOFTCAP_GRAD_ATOL",
    "TORCH_ASSERT_CLOSE_DEFAULTS",
    "assert_attention_close",
    "check_attention",
    "demo_inputs",
    "flash_atol",
    "flash_factor",
    "forgot_rescale_kernel",
    "naive_attention",
    "naive_attention_backward",
    "no_max_softmax_kernel",
    "off_by_one_causal_kernel",
    "online_softmax_kernel",
    "rounding",
    "tolerance_report",
    "tolerance_table",
    "wrong_gqa_kernel",
    "wrong_scale_kernel",
]

#: The precisions a kernel can claim, narrowest first.
PRECISIONS = ("float16", "bfloat16", "float32", "float64")


def rounding(precision):
    """A function that rounds float64 values to ``precision``, kept as float64."""
    if precision == "float64":
        return lambda x: np.asarray(x, dtype=np.float64)
    if precision == "bfloat16":
        return lambda x: to_bfloat16(np.asarray(x, np.float32)).astype(np.float64)
    dtype = np.dtype(precision)
    return lambda x: np.asarray(x).astype(dtype).astype(np.float64)


def _accumulator(precision):
    """GPUs accumulate 16- and 32-bit matmuls in float32."""
    return np.float64 if precision == "float64" else np.float32


def naive_attention(q, k, v, precision, **options):
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
    >>> float(np.abs(naive_attention(q, k, v, "float16") - attention(q, k, v)).max())
    0.0001...
    """
    out, _ = _naive_forward(q, k, v, precision, options)
    return out


def _naive_forward(q, k, v, precision, options):
    precision = _precision(precision)
    r = rounding(precision)
    acc = _accumulator(precision)
    p = _prepare(q, k, v, **(options | {"empty_rows": "zero"}))
    q_r, k_r, v_r = (r(a) for a in (p.q, p.k, p.v))

    def mm(a, b):
        return r(np.matmul(a.astype(acc), b.astype(acc)))

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        k_s = r(k_r * p.scale)  # reorder_ops=True: scale k, not q
        scores = mm(q_r, np.swapaxes(k_s, -1, -2))
        tanh = None
        if p.softcap is not None:  # testing.py:298, three rounded steps
            tanh = r(np.tanh(r(scores / p.softcap)))
            scores = r(tanh * p.softcap)
        if p.mask_mods:
            q_idx, kv_idx = np.arange(p.n_q)[:, None], np.arange(p.n_k)[None, :]
            allowed = p.mask_mods[0](q_idx, kv_idx)
            for mod in p.mask_mods[1:]:
                allowed = allowed & mod(q_idx, kv_idx)
            scores = np.where(allowed, scores, -np.inf)
        if p.bias is not None:
            scores = r(scores + p.bias)
        probs = _softmax(scores.astype(acc), p.sink, acc)
        weights = r(probs)
        keep = _kept(p, weights.shape)
        v_s = r(v_r * p.dropout_scale)
        out = mm(np.where(keep, weights, 0.0), v_s)
    # torch.softmax's backward uses its rounded output; attention_ref's sink
    # path (testing.py:331-337) is float32 arithmetic whose autograd uses the
    # unrounded probabilities.
    saved = weights.astype(acc) if p.sink is None else probs
    return out, (p, r, mm, q_r, k_s, v_s, weights, saved, keep, tanh)


def _softmax(scores, sink, acc):
    """Softmax of each row in ``acc`` precision, with a sink in the normaliser."""
    row_max = scores.max(axis=-1, keepdims=True)
    if sink is not None:
        sink = sink.astype(acc)
        row_max = np.maximum(row_max, sink)
    row_max = np.where(np.isneginf(row_max), acc(0.0), row_max)
    exps = np.exp(scores - row_max)
    norm = exps.sum(axis=-1, keepdims=True)
    if sink is not None:
        norm = norm + np.exp(sink - row_max)
    return exps / np.where(norm == 0, acc(1.0), norm)


def _kept(p, shape):
    """Where dropout keeps a weight (everywhere without dropout)."""
    if p.dropout_mask is None:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(p.dropout_mask, shape)


def naive_attention_backward(q, k, v, grad_out, precision, **options):
    """FlashAttention's ``dq_pt``, ``dk_pt``, ``dv_pt``, emulated.

    Autograd through :func:`naive_attention`'s steps, each result rounded to
    ``precision`` as torch's autograd rounds it on 16-bit tensors
    (hopper/test_flash_attn.py:330): the softmax's backward and the tanh's
    are computed in float32 and rounded once, as torch does. Returns
    ``(dq, dk, dv)``.

    Examples
    --------
    >>> q = k = v = np.eye(3)
    >>> dq, dk, dv = naive_attention_backward(q, k, v, np.ones((3, 3)), "float32")
    >>> float(np.abs(dv - attention_backward(q, k, v, np.ones((3, 3))).dv).max()) < 1e-6
    True
    """
    out, (p, r, mm, q_r, k_s, v_s, weights, saved, keep, tanh) = _naive_forward(
        q, k, v, precision, options
    )
    acc = _accumulator(_precision(precision))
    d_out = r(np.broadcast_to(real_array(grad_out, "grad_out"), out.shape))
    with np.errstate(over="ignore", invalid="ignore"):
        d_vs = mm(np.swapaxes(np.where(keep, weights, 0.0), -1, -2), d_out)
        dv = r(d_vs * p.dropout_scale)
        dweights = np.where(keep, mm(d_out, np.swapaxes(v_s, -1, -2)), 0.0)
        dw = dweights.astype(acc)
        dscores = r(saved * (dw - np.sum(dw * saved, axis=-1, keepdims=True)))
        if tanh is not None:
            d_tanh = r(dscores * p.softcap)
            t = tanh.astype(acc)
            d_raw = r(d_tanh.astype(acc) * (acc(1.0) - t * t))  # tanh_backward
            dscores = r(d_raw / p.softcap)
        dq = mm(dscores, k_s)
        dk = r(mm(np.swapaxes(dscores, -1, -2), q_r) * p.scale)
    # Summing over a group of query heads (or broadcast axes) is one more
    # reduction, rounded once.
    return (
        r(_unbroadcast(dq, p.shapes["q"])),
        r(_ungroup(_unbroadcast(dk, p.k.shape), p.shapes["k"])),
        r(_ungroup(_unbroadcast(dv, p.v.shape), p.shapes["v"])),
    )


def _precision(precision):
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return precision


def _kernel_precision(q, k, v, precision):
    dtypes = {np.asarray(a).dtype for a in (q, k, v)}
    if len(dtypes) != 1:
        raise TypeError(
            f"q, k and v must share one dtype, the kernel's inputs, got "
            f"{sorted(str(d) for d in dtypes)}"
        )
    (dtype,) = dtypes
    if dtype.name not in ("float16", "float32", "float64"):
        raise TypeError(
            f"q, k and v must be float16, float32 or float64 (a bfloat16 kernel "
            f"passes float32 with precision='bfloat16'), got {dtype}"
        )
    if precision is None:
        return dtype.name
    _precision(precision)
    if precision == "bfloat16" and dtype.name != "float32":
        raise ValueError(
            f"precision='bfloat16' needs the inputs as float32, got {dtype}"
        )
    if precision == "bfloat16":
        as_bf16 = to_bfloat16(q), to_bfloat16(k), to_bfloat16(v)
        if any(
            not np.array_equal(a, b, equal_nan=True)
            for a, b in zip(as_bf16, (q, k, v), strict=True)
        ):
            raise ValueError(
                "precision='bfloat16' but q, k or v holds values that bfloat16 "
                "cannot represent; pass the kernel's actual (rounded) inputs"
            )
    elif precision != dtype.name:
        raise ValueError(
            f"precision={precision!r} does not match the inputs' dtype {dtype}"
        )
    return precision


def flash_atol(reference, precision):
    """FlashAttention's ``fwd_atol``: twice the noise of ``x + 0.3 - 0.3 - x``.

    hopper/test_flash_attn.py:255 (commit 0251105a) computes
    ``2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max()`` on ``out_ref``, which
    ``attention_ref`` computes in float32 and returns in the kernel's dtype
    (flash_attn/utils/testing.py:273-275, 360), so the noise is that of the
    kernel's dtype. Here ``x`` is sdpa_ref's float64 ``reference`` rounded to
    ``precision``, and each step is computed in float32 (float64 for a
    float64 kernel) and rounded to ``precision``, as a CUDA kernel of torch
    does with a Python scalar. (On the CPU, torch first rounds ``0.3`` to
    the tensor's dtype, which can change the result by a factor of two.) The
    same rule gives the gradients' tolerances (lines 343-348).

    Examples
    --------
    >>> flash_atol(np.array([1.0]), "bfloat16"), flash_atol(np.array([1.0]), "float32")
    (0.0078125, 1.1920928955078125e-07)
    """
    r = rounding(_precision(precision))
    acc = _accumulator(precision)
    x = r(np.nan_to_num(np.asarray(reference, dtype=np.float64)))
    point3 = np.float64(acc(0.3))

    def step(a):
        return r(a.astype(acc).astype(np.float64))

    noise = step(step(step(x + point3) - point3) - x)
    return float(2 * np.abs(noise).max(initial=0.0))


#: FlashAttention adds this to each gradient's tolerance with soft-capping
#: (hopper/test_flash_attn.py:343-348).
SOFTCAP_GRAD_ATOL = 3e-4


def flash_factor(softcap=None):
    """FlashAttention's ``rtol``: 2, or 3 with soft-capping.

    hopper/test_flash_attn.py:256 at commit 0251105a.

    Examples
    --------
    >>> flash_factor(), flash_factor(30.0)
    (2.0, 3.0)
    """
    return 2.0 if softcap in (None, 0, 0.0) else 3.0


def _errors(actual, reference):
    actual = np.asarray(actual, dtype=np.float64)
    both_nan = np.isnan(actual) & np.isnan(reference)
    err = np.abs(actual - reference)
    err[both_nan] = 0.0
    err[np.isnan(err)] = np.inf
    return err


def tolerance_report(  # noqa: PLR0917 (the columns of one report)
    name, actual, reference, naive, precision, factor, atol
):
    """The numbers behind one check: a dict, with ``passed`` and ``message``.

    The check is ``kernel_error <= factor * naive_error + atol``, errors
    being largest absolute differences from ``reference``; the dict also
    holds the ``bound``, the ``ratio`` of the two errors and the ``worst``
    element's index. ``atol=None`` means :func:`flash_atol`.

    Examples
    --------
    >>> r = tolerance_report("out", np.array([1.1]), np.array([1.0]),
    ...                      np.array([1.0004]), "float16", 2.0, 0.0)
    >>> r["passed"], round(r["ratio"])
    (False, 250)
    """
    reference = np.asarray(reference, dtype=np.float64)
    if np.shape(actual) != reference.shape:
        raise ValueError(
            f"{name} has shape {np.shape(actual)}, the reference {reference.shape}"
        )
    kernel_err = _errors(actual, reference)
    naive_err = float(_errors(naive, reference).max(initial=0.0))
    worst = np.unravel_index(int(np.argmax(kernel_err)), kernel_err.shape)
    kernel_max = float(kernel_err[worst]) if kernel_err.size else 0.0
    if atol is None:
        atol = flash_atol(reference, precision)
    bound = factor * naive_err + atol
    passed = kernel_max <= bound
    ratio = kernel_max / naive_err if naive_err > 0 else np.inf * (kernel_max > 0)
    message = (
        f"{name}: worst element at {_where(worst, name)}: kernel "
        f"{float(np.asarray(actual, np.float64)[worst]):.6g}, reference "
        f"{float(reference[worst]):.6g}. Kernel error {kernel_max:.3g} "
        f"{'<=' if passed else '>'} {factor:g} x naive {precision} error "
        f"{naive_err:.3g} + atol {atol:.3g} (ratio to the naive error "
        f"{ratio:.3g})"
    )
    return {
        "name": name,
        "passed": bool(passed),
        "kernel_error": kernel_max,
        "naive_error": naive_err,
        "atol": atol,
        "factor": factor,
        "bound": bound,
        "ratio": float(ratio),
        "worst": tuple(int(i) for i in worst),
        "message": message,
    }


def _where(index, name):
    row = "key" if name in ("dk", "dv") else "query"
    labels = ["batch"] * max(len(index) - 3, 0) + ["head", row, "column"]
    labels = labels[-len(index) :]
    return ", ".join(f"{label} {i}" for label, i in zip(labels, index, strict=True))


def assert_attention_close(
    actual,
    q,
    k,
    v,
    *,
    precision=None,
    factor=None,
    atol=None,
    grad_out=None,
    grads=None,
    **options,
):
    """Check a kernel's output (and gradients) the way FlashAttention tests its own.

    The kernel's largest error against sdpa_ref's float64 reference may be at
    most ``factor`` times the largest error of FlashAttention's naive
    computation in the kernel's precision (:func:`naive_attention`), plus
    ``atol``. The defaults are those of hopper/test_flash_attn.py at commit
    0251105a (lines 255-256 and 343-348).

    Parameters
    ----------
    actual : array_like, shape (..., n_q, d_v)
        The kernel's output.
    q, k, v : array_like
        The kernel's inputs, float16, float32 or float64. A bfloat16 kernel
        passes its inputs as float32 with ``precision="bfloat16"``.
    precision : {"float16", "bfloat16", "float32", "float64"}, optional
        The kernel's precision; by default the inputs' dtype.
    factor : float, optional
        Default :func:`flash_factor`: 2, or 3 with ``softcap``.
    atol : float, optional
        One tolerance for every array checked. Default: FlashAttention's, per
        array, :func:`flash_atol` of the reference rounded to ``precision``,
        plus :data:`SOFTCAP_GRAD_ATOL` for gradients with ``softcap``.
    grad_out : array_like, optional
        The upstream gradient the kernel's backward was given.
    grads : (dq, dk, dv), optional
        The kernel's gradients, checked the same way against
        :func:`sdpa_ref.attention_backward` and
        :func:`naive_attention_backward`.
    **options
        Any option of :func:`sdpa_ref.attention`.

    Returns
    -------
    list of dict
        One :func:`tolerance_report` per array checked.

    Raises
    ------
    AssertionError
        Naming the worst element (batch, head, query, column), the two errors
        and their ratio.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.standard_normal((1, 2, 8, 4)).astype(np.float16)
    ...            for _ in range(3))
    >>> reports = assert_attention_close(online_softmax_kernel(q, k, v), q, k, v)
    >>> reports[0]["passed"], reports[0]["factor"]
    (True, 2.0)
    """
    reports = check_attention(
        actual,
        q,
        k,
        v,
        precision=precision,
        factor=factor,
        atol=atol,
        grad_out=grad_out,
        grads=grads,
        **options,
    )
    failed = [r["message"] for r in reports if not r["passed"]]
    if failed:
        raise AssertionError("\n".join(failed))
    return reports


def check_attention(
    actual,
    q,
    k,
    v,
    *,
    precision=None,
    factor=None,
    atol=None,
    grad_out=None,
    grads=None,
    **options,
):
    """:func:`assert_attention_close` without the assertion: its reports.

    Examples
    --------
    >>> q = k = v = np.eye(2, dtype=np.float32)
    >>> [r["passed"] for r in check_attention(q, q, k, v)]
    [False]
    """
    precision = _kernel_precision(q, k, v, precision)
    if factor is None:
        factor = flash_factor(options.get("softcap"))
    q64, k64, v64 = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    options = {"empty_rows": "zero"} | options
    reference = attention(q64, k64, v64, **options)
    naive = naive_attention(q64, k64, v64, precision, **options)
    reports = [
        tolerance_report("out", actual, reference, naive, precision, factor, atol)
    ]
    if grads is not None:
        if grad_out is None:
            raise ValueError("grads need the grad_out that the kernel was given")
        if len(grads) != 3:
            raise ValueError(f"grads must be (dq, dk, dv), got {len(grads)} arrays")
        d_out = np.asarray(grad_out, dtype=np.float64)
        ref_grads = attention_backward(q64, k64, v64, d_out, **options)
        naive_grads = naive_attention_backward(
            q64, k64, v64, d_out, precision, **options
        )
        softcapped = flash_factor(options.get("softcap")) != 2.0
        extra = SOFTCAP_GRAD_ATOL if softcapped else 0.0
        for name, got, ref, nv in zip(
            ("dq", "dk", "dv"), grads, ref_grads[:3], naive_grads, strict=True
        ):
            grad_atol = flash_atol(ref, precision) + extra if atol is None else atol
            reports.append(
                tolerance_report(name, got, ref, nv, precision, factor, grad_atol)
            )
    return reports


# ---------------------------------------------------------------------------
# Example kernels: a FlashAttention-style forward in the inputs' precision,
# correct, and with five common bugs.


def _kernel(q, k, v, *, is_causal=False, block_size=16, bug=None):
    """Online-softmax attention over key blocks, in the inputs' precision.

    Shapes ``(B, H_q, n_q, d)`` and ``(B, H_kv, n_k, d)``; top-left causal.
    Arithmetic runs in float32 (bfloat16 and float16 inputs are upcast, as
    GPU kernels accumulate in float32) and the output is rounded back to the
    inputs' dtype.
    """
    dtype = np.asarray(q).dtype
    work = np.float64 if dtype == np.float64 else np.float32
    q, k, v = (np.asarray(a, dtype=work) for a in (q, k, v))
    h_q, h_kv = q.shape[-3], k.shape[-3]
    group = h_q // h_kv
    heads = np.arange(h_q) % h_kv if bug == "gqa_heads" else np.arange(h_q) // group
    k, v = k[..., heads, :, :], v[..., heads, :, :]
    d = q.shape[-1]
    scale = work(1.0 / d) if bug == "scale" else work(1.0 / np.sqrt(d))
    n_q, n_k = q.shape[-2], k.shape[-2]
    if bug == "no_max":
        # The textbook exp(s) / sum(exp(s)), in float16: exp overflows at 11.1.
        with np.errstate(over="ignore", invalid="ignore"):
            s = np.matmul(q * scale, np.swapaxes(k, -1, -2)).astype(np.float16)
            if is_causal:
                s[..., np.arange(n_k)[None, :] > np.arange(n_q)[:, None]] = -np.inf
            e = np.exp(s)
            w = e / e.sum(axis=-1, keepdims=True)
            return np.matmul(w.astype(work), v).astype(dtype)
    m = np.full((*q.shape[:-1], 1), -np.inf, dtype=work)
    total = np.zeros((*q.shape[:-1], 1), dtype=work)
    acc = np.zeros((*q.shape[:-1], v.shape[-1]), dtype=work)
    reach = 1 if bug == "causal_off_by_one" else 0
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, n_k, block_size):
            stop = min(start + block_size, n_k)
            s = np.matmul(q * scale, np.swapaxes(k[..., start:stop, :], -1, -2))
            if is_causal:
                cols = np.arange(start, stop)[None, :]
                s[..., cols > np.arange(n_q)[:, None] + reach] = -np.inf
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            shift = np.where(np.isneginf(m_new), 0, m_new)
            e = np.exp(s - shift)
            rescale = np.ones_like(m) if bug == "no_rescale" else np.exp(m - shift)
            total = total * rescale + e.sum(axis=-1, keepdims=True)
            acc = acc * rescale + np.matmul(e, v[..., start:stop, :])
            m = m_new
        return (acc / total).astype(dtype)


def online_softmax_kernel(q, k, v, *, is_causal=False, block_size=16):
    """A correct FlashAttention-style forward: online softmax over key blocks.

    Examples
    --------
    >>> q = k = v = np.eye(2, dtype=np.float32)[None, None]
    >>> online_softmax_kernel(q, k, v).round(3)
    array([[[[0.67, 0.33],
             [0.33, 0.67]]]], dtype=float32)
    """
    return _kernel(q, k, v, is_causal=is_causal, block_size=block_size)


def wrong_scale_kernel(q, k, v, *, is_causal=False, block_size=16):
    """Bug: scales the scores by ``1 / d`` instead of ``1 / sqrt(d)``."""
    return _kernel(q, k, v, is_causal=is_causal, block_size=block_size, bug="scale")


def off_by_one_causal_kernel(q, k, v, *, is_causal=True, block_size=16):
    """Bug: the causal mask lets query ``i`` see key ``i + 1``."""
    return _kernel(
        q, k, v, is_causal=is_causal, block_size=block_size, bug="causal_off_by_one"
    )


def wrong_gqa_kernel(q, k, v, *, is_causal=False, block_size=16):
    """Bug: query head ``h`` reads key/value head ``h % H_kv``, not ``h // group``."""
    return _kernel(q, k, v, is_causal=is_causal, block_size=block_size, bug="gqa_heads")


def forgot_rescale_kernel(q, k, v, *, is_causal=False, block_size=16):
    """Bug: the online softmax never rescales by ``exp(m_old - m_new)``."""
    return _kernel(
        q, k, v, is_causal=is_causal, block_size=block_size, bug="no_rescale"
    )


def no_max_softmax_kernel(q, k, v, *, is_causal=False, block_size=16):
    """Bug: a float16 softmax without subtracting the row maximum."""
    return _kernel(q, k, v, is_causal=is_causal, block_size=block_size, bug="no_max")


#: The broken example kernels, by the bug each one has.
BROKEN_KERNELS = {
    "wrong scale": wrong_scale_kernel,
    "off-by-one causal mask": off_by_one_causal_kernel,
    "GQA heads mapped wrongly": wrong_gqa_kernel,
    "online softmax that forgets to rescale": forgot_rescale_kernel,
    "float16 softmax without the max": no_max_softmax_kernel,
}


#: Two fixed tolerances that a kernel test might pick instead.
FIXED_TOLERANCES = (1e-2, 1e-3)

#: ``torch.testing.assert_close``'s default ``(rtol, atol)`` per dtype:
#: ``_DTYPE_PRECISIONS`` in torch/testing/_comparison.py (torch 2.13.0).
TORCH_ASSERT_CLOSE_DEFAULTS = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
}

# (kernel, is it broken, precision, logit scale, causal). The queries are
# multiplied by the logit scale. Small logits hide a wrong scale or a missing
# rescale from a fixed tolerance of 1e-2, since both matter less as the
# weights approach uniform; in bfloat16 they hide them from FlashAttention's
# rule too. float16's exp overflows past 11.09, so that bug needs large ones.
_DEMO_CASES = (
    (online_softmax_kernel, False, "float16", 1.0, False),
    (online_softmax_kernel, False, "bfloat16", 1.0, False),
    (online_softmax_kernel, False, "float32", 1.0, False),
    (wrong_scale_kernel, True, "float32", 0.01, False),
    (wrong_scale_kernel, True, "bfloat16", 0.01, False),
    (forgot_rescale_kernel, True, "float32", 0.01, False),
    (forgot_rescale_kernel, True, "bfloat16", 0.01, False),
    (wrong_gqa_kernel, True, "float32", 1.0, False),
    (off_by_one_causal_kernel, True, "float32", 1.0, True),
    (no_max_softmax_kernel, True, "float16", 4.0, False),
)


def demo_inputs(precision, logit_scale=1.0, *, seed=SEED, shape=(1, 4, 64, 16)):
    """Seeded q, k, v with two key/value heads, as a kernel of ``precision`` gets them.

    bfloat16 values come as float32, rounded to bfloat16.

    Examples
    --------
    >>> q, k, v = demo_inputs("float16")
    >>> q.dtype, q.shape, k.shape
    (dtype('float16'), (1, 4, 64, 16), (1, 2, 64, 16))
    """
    rng = np.random.default_rng(seed)
    b, h, n, d = shape
    q = rng.standard_normal((b, h, n, d)) * logit_scale
    k, v = (rng.standard_normal((b, 2, n, d)) for _ in range(2))
    if precision == "bfloat16":
        return tuple(to_bfloat16(a.astype(np.float32)) for a in (q, k, v))
    return tuple(a.astype(_precision(precision)) for a in (q, k, v))


def _run(kernel, precision, q, k, v, *, is_causal):
    out = kernel(q, k, v, is_causal=is_causal)
    return to_bfloat16(out) if precision == "bfloat16" else out


def tolerance_table(seed=SEED):
    """Example kernels judged by FlashAttention's rule and by fixed tolerances.

    Returns
    -------
    list of dict
        Per kernel: ``kernel`` (its bug, or "correct"), ``broken``,
        ``precision``, ``logit_scale`` (the queries' multiplier),
        ``kernel_error`` and ``naive_error`` (largest absolute errors against
        float64), ``atol`` and ``bound`` (``2 x naive + atol``), ``flash``
        (passes FlashAttention's rule) and ``fixed`` (passes each of
        :data:`FIXED_TOLERANCES`).

    Examples
    --------
    The rule is wrong only about the two bfloat16 bugs with small logits:

    >>> rows = tolerance_table()
    >>> for r in rows:
    ...     if r["flash"] == r["broken"]:
    ...         print(r["kernel"], r["precision"], r["logit_scale"])
    wrong scale bfloat16 0.01
    online softmax that forgets to rescale bfloat16 0.01
    >>> [any(r["fixed"][t] == r["broken"] for r in rows) for t in FIXED_TOLERANCES]
    [True, True]
    """
    names = {fn: bug for bug, fn in BROKEN_KERNELS.items()}
    rows = []
    for kernel, broken, precision, logit_scale, is_causal in _DEMO_CASES:
        q, k, v = demo_inputs(precision, logit_scale, seed=seed)
        out = _run(kernel, precision, q, k, v, is_causal=is_causal)
        (report,) = check_attention(
            out, q, k, v, precision=precision, is_causal=is_causal
        )
        rows.append(
            {
                "kernel": names.get(kernel, "correct"),
                "broken": broken,
                "precision": precision,
                "logit_scale": logit_scale,
                "kernel_error": report["kernel_error"],
                "naive_error": report["naive_error"],
                "atol": report["atol"],
                "bound": report["bound"],
                "flash": report["passed"],
                "fixed": {
                    tol: bool(report["kernel_error"] <= tol) for tol in FIXED_TOLERANCES
                },
            }
        )
    return rows


#: Each option, as Markdown: sdpa_ref's name, FlashAttention's and PyTorch's.
#: FlashAttention: ``flash_attn_func`` of FlashAttention-2
#: (flash_attn/flash_attn_interface.py), FlashAttention-3
#: (hopper/flash_attn_interface.py) and the CuTe interface
#: (flash_attn/cute/interface.py), and ``attention_ref``
#: (flash_attn/utils/testing.py), all at commit 0251105a. PyTorch:
#: ``scaled_dot_product_attention`` (SDPA) and FlexAttention, torch 2.13.
OPTION_NAMES = (
    (
        "`(..., H, n, d)`: heads on axis −3",
        "`(batch, seqlen, nheads, headdim)`: heads on axis −2",
        "SDPA: `(N, ..., Hq, L, E)`: heads on axis −3",
    ),
    (
        "`scale`",
        "`softmax_scale`; `attention_ref` has none (1/√d)",
        "`scale`",
    ),
    (
        '`is_causal=True, align="bottom_right"`',
        "`causal=True`, bottom-right",
        "`is_causal=True` is top-left; `causal_lower_right` is bottom-right",
    ),
    (
        "`window=(left, right)`; `None` = unbounded",
        "`window_size=(left, right)`; `-1` = unbounded in FlashAttention-2 and -3, "
        "`None` in the CuTe interface and `attention_ref`",
        "a FlexAttention `mask_mod`",
    ),
    (
        "`sink_tokens`",
        "`sink_token_length` (`attention_ref` only)",
        "a FlexAttention `mask_mod`",
    ),
    (
        "`chunk`; `None` = off",
        "`attention_chunk`; `0` = off (FlashAttention-3, `attention_ref`)",
        "a FlexAttention `mask_mod`",
    ),
    (
        "`softcap`; `None` = off",
        "`softcap`; `0.0` = off",
        "a FlexAttention `score_mod`",
    ),
    (
        "`sink_logits`",
        "`learnable_sink` (CuTe interface, `attention_ref`)",
        "none built in",
    ),
    (
        "`q_lengths`, `k_lengths`",
        "`cu_seqlens_q/k` (the varlen functions), `seqused_q/k` "
        "(FlashAttention-3, CuTe interface); `query_padding_mask`, "
        "`key_padding_mask` (`attention_ref`)",
        "nested tensors, or a mask",
    ),
    (
        "`mask` (bool: `True` = attend)",
        "`key_padding_mask` (`attention_ref`)",
        "`attn_mask` (bool: `True` = attend)",
    ),
    (
        "`mask` (float: added)",
        "`attn_bias` (`attention_ref`); `alibi_slopes` (FlashAttention-2)",
        "`attn_mask` (float: added)",
    ),
    (
        "`dropout_mask`, `dropout_p`",
        "`dropout_p`, mask drawn inside (FlashAttention-2); "
        "`dropout_p`, `dropout_mask` (`attention_ref`)",
        "`dropout_p`, mask drawn inside",
    ),
    (
        "fewer heads in `k`, `v`",
        "fewer heads in `k`, `v`",
        "`enable_gqa=True`",
    ),
    (
        "`return_lse=True`",
        "`return_attn_probs=True` (FlashAttention-2 and -3); "
        "`return_lse=True` (CuTe interface)",
        "FlexAttention `return_aux=AuxRequest(lse=True)`; none in SDPA",
    ),
    (
        "log-sum-exp of a row with no allowed key: −∞",
        "+∞ in FlashAttention-2 (−∞ when it splits the keys), −∞ in FlashAttention-3",
        "SDPA returns none",
    ),
)
