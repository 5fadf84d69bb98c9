"""Example kernels for the testing page and the tests, and the page's tables.

Two families of kernels, each a FlashAttention-style online softmax over key
blocks, written in NumPy:

- the page's exhibits: :func:`online_softmax_kernel` (correct) and five
  forward kernels with common bugs (:data:`BROKEN_KERNELS`), judged in
  :func:`tolerance_table` by FlashAttention's rule and by fixed tolerances;
- :func:`blocked_attention` and :func:`blocked_attention_backward`, a forward
  (with its log-sum-exp) and a FlashAttention-2 backward in any of the four
  precisions, with the options most kernels have (grouped heads, scale, causal
  and window masks in either alignment, a float or boolean mask, soft-capping,
  sink logits, dropout), into which the tests plant one bug at a time
  (:data:`PLANTED_BUGS`).

The module also holds the option names of FlashAttention and PyTorch that the
page tabulates.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from ._options import with_signature
from .precision import to_bfloat16
from .published import (  # the published numbers this module uses or names
    TORCH_ASSERT_CLOSE_DEFAULTS,
)
from .random_model import SEED
from .testing import check_attention

__all__ = [
    "BROKEN_KERNELS",
    "FIXED_TOLERANCES",
    "OPTION_NAMES",
    "PLANTED_BUGS",
    "TORCH_ASSERT_CLOSE_DEFAULTS",
    "blocked_attention",
    "blocked_attention_backward",
    "demo_inputs",
    "forgot_rescale_kernel",
    "no_max_softmax_kernel",
    "off_by_one_causal_kernel",
    "online_softmax_kernel",
    "tolerance_table",
    "wrong_gqa_kernel",
    "wrong_scale_kernel",
]


# ---------------------------------------------------------------------------
# The page's exhibits: a FlashAttention-style forward in the inputs' precision,
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
    if precision not in ("float16", "float32", "float64"):
        raise ValueError(
            f"precision must be float16, bfloat16, float32 or float64, "
            f"got {precision!r}"
        )
    return tuple(a.astype(precision) for a in (q, k, v))


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
        float64), ``rule_term`` (``2 x naive``), ``atol`` and ``bound``
        (``2 x naive + atol``), ``flash``
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
        # FlashAttention's rule in every precision: the table shows what it
        # catches, float32 included.
        (report,) = check_attention(
            out, q, k, v, precision=precision, rule="flash", is_causal=is_causal
        )
        rows.append(
            {
                "kernel": names.get(kernel, "correct"),
                "broken": broken,
                "precision": precision,
                "logit_scale": logit_scale,
                "kernel_error": report.kernel_error,
                "naive_error": report.naive_error,
                "atol": report.atol,
                "rule_term": report.factor * report.naive_error,
                "bound": report.bound,
                "flash": report.passed,
                "fixed": {
                    tol: bool(report.kernel_error <= tol) for tol in FIXED_TOLERANCES
                },
            }
        )
    return rows


#: Each option, as Markdown, by sdpa_ref's name, FlashAttention's and PyTorch's.
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
        "`window_size=(left, right)`; `-1` = unbounded in FlashAttention-2 and -3 "
        "and in their tests' `attention_ref`, `None` in the CuTe interface and in "
        "`flash_attn/utils/testing.py`",
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
        "(FlashAttention-3, CuTe interface)",
        "nested tensors, or a mask",
    ),
    (
        "`k_lengths=key_padding_mask.sum(-1)` when the padding is at the end, "
        "else `mask=key_padding_mask[:, None, None, :]`; the same for queries; "
        "`sdpa_ref.testing.flash_options` does both",
        "`query_padding_mask`, `key_padding_mask`, shape `(batch, seqlen)` "
        "(`attention_ref`)",
        "a boolean `attn_mask`",
    ),
    (
        "`mask` (bool: `True` = attend)",
        "none",
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
        "+∞ in FlashAttention-2, split or not (each split writes −∞ only to its own "
        "buffer), −∞ in FlashAttention-3",
        "SDPA returns none",
    ),
)


# ---------------------------------------------------------------------------
# A blocked forward and backward in any precision, with planted bugs.

#: The bugs :func:`blocked_attention` and :func:`blocked_attention_backward`
#: can plant, one at a time, and what each does.
PLANTED_BUGS = {
    "window_off_by_one": "the window's left bound reaches one key further",
    "causal_alignment": "the causal mask and window are aligned at the other corner",
    "gqa_head_order": "query head h reads key/value head h % H_kv, not h // group",
    "scale": "the scores are scaled by 1/d instead of 1/√d",
    "no_rescale": "the online softmax never rescales its running sum and output",
    "no_max": "the softmax skips the row maximum: float16's exp overflows past 11.09",
    "lse_log2": "the log-sum-exp comes out in base 2",
    "lse_no_max": "the log-sum-exp leaves out the row maximum",
    "softcap_after_mask": "masks come before the soft-cap, which maps -inf to -cap",
    "dropout_no_rescale": "dropout drops weights without dividing by 1 - p",
    "no_delta": "the backward drops D: dS = P ∘ dP instead of P ∘ (dP - D)",
    "dk_no_scale": "dk is not multiplied by the scale",
    "dsink_sign": "the sink logits' gradient has the wrong sign",
}


class _Blocked:
    """What the forward and the backward share: precision, heads, masks, scores."""

    def __init__(
        self,
        q,
        k,
        v,
        *,
        precision=None,
        scale=None,
        is_causal=False,
        align="top_left",
        window=None,
        mask=None,
        softcap=None,
        sink_logits=None,
        dropout_mask=None,
        dropout_p=0.0,
        block_size=16,
        bug=None,
    ):
        if bug is not None and bug not in PLANTED_BUGS:
            raise ValueError(
                f"bug must be None or one of {sorted(PLANTED_BUGS)}, got {bug!r}"
            )
        q, k, v = (np.asarray(a) for a in (q, k, v))
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            raise ValueError(
                f"q, k and v must be (batch, heads, seqlen, dim), got {q.shape}, "
                f"{k.shape}, {v.shape}"
            )
        self.precision = precision or q.dtype.name
        self.work = np.float64 if self.precision == "float64" else np.float32
        self.bug = bug
        h_q, h_kv = q.shape[1], k.shape[1]
        group = h_q // h_kv
        heads = (
            np.arange(h_q) % h_kv
            if bug == "gqa_head_order"
            else np.arange(h_q) // group
        )
        self.heads, self.h_kv = heads, h_kv
        self.q = q.astype(self.work)
        self.k = k.astype(self.work)[:, heads]
        self.v = v.astype(self.work)[:, heads]
        d = q.shape[-1]
        if scale is None:
            scale = 1.0 / d if bug == "scale" else 1.0 / math.sqrt(d)
        self.scale = self.work(scale)
        self.n_q, self.n_k = q.shape[2], k.shape[2]
        corner = align == "bottom_right"
        if bug == "causal_alignment":
            corner = not corner
        self.offset = self.n_k - self.n_q if corner else 0
        left, right = (None, None) if window is None else window
        if is_causal:
            right = 0
        if bug == "window_off_by_one" and left is not None:
            left += 1
        self.left, self.right = left, right
        mask = None if mask is None else np.asarray(mask)
        self.bool_mask = mask if mask is not None and mask.dtype == bool else None
        self.bias = (
            mask.astype(self.work) if mask is not None and mask.dtype != bool else None
        )
        self.softcap = softcap
        self.sink = None if sink_logits is None else np.asarray(sink_logits, self.work)
        self.keep = dropout_mask
        self.drop = self.work(
            1.0 if bug == "dropout_no_rescale" else 1.0 / (1.0 - dropout_p)
        )
        self.block = block_size

    def rounded(self, x):
        """``x`` rounded to the kernel's precision (kept in the working dtype)."""
        if self.precision == "bfloat16":
            return to_bfloat16(x.astype(np.float32))
        if self.precision == "float16":
            return x.astype(np.float16).astype(self.work)
        return x.astype(self.work)

    def output(self, x):
        """``x`` as the kernel writes it: float16, bfloat16 values in float32, ..."""
        if self.precision == "float16":
            return x.astype(np.float16)
        return self.rounded(x)

    def blocks(self):
        return [
            (start, min(start + self.block, self.n_k))
            for start in range(0, self.n_k, self.block)
        ]

    def scores(self, start, stop):
        """Final logits of key columns start:stop, and the soft-capped ones."""
        cols = np.arange(start, stop)[None, :]
        rows = np.arange(self.n_q)[:, None] + self.offset
        allowed = np.ones((self.n_q, stop - start), dtype=bool)
        if self.right is not None:
            allowed &= cols <= rows + self.right
        if self.left is not None:
            allowed &= cols >= rows - self.left
        if self.bool_mask is not None:
            allowed = allowed & self.bool_mask[..., start:stop]
        with np.errstate(over="ignore", invalid="ignore"):
            s = np.matmul(self.q, np.swapaxes(self.k[..., start:stop, :], -1, -2))
            s = s * self.scale
            if self.bug == "softcap_after_mask":
                s = np.where(allowed, s, -np.inf)
            capped = None
            if self.softcap is not None:
                s = self.work(self.softcap) * np.tanh(s / self.work(self.softcap))
                capped = s
            if self.bug != "softcap_after_mask":
                s = np.where(allowed, s, -np.inf)
            if self.bias is not None:
                s = s + self.bias[..., start:stop]
        return s.astype(self.work), capped

    def dropped(self, p, start, stop):
        if self.keep is None:
            return p
        return np.where(self.keep[..., start:stop], p * self.drop, 0.0).astype(
            self.work
        )


def _kernel_signature(*arrays):
    """A kernel's signature: its arrays, then :class:`_Blocked`'s settings."""
    settings = list(inspect.signature(_Blocked).parameters.values())[3:]
    arrays = [
        inspect.Parameter(a, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in arrays
    ]
    return inspect.Signature([*arrays, *settings])


@with_signature(_kernel_signature("q", "k", "v"))
def blocked_attention(
    q,
    k,
    v,
    **settings,
):
    """A FlashAttention-style forward in ``precision``: ``(out, lse)``.

    Online softmax over blocks of ``block_size`` keys, in float32 (float64 for
    a float64 kernel). As FlashAttention's kernels do, a 16-bit kernel rounds
    each block's probabilities to its precision before multiplying them by
    ``v`` and accumulates in float32. ``out`` comes back in the kernel's
    precision (bfloat16 values in float32), ``lse`` in float32 (float64).
    Inputs are ``(batch, heads, seqlen, dim)``; the options mean what
    :func:`sdpa_ref.attention`'s do. ``bug`` plants one of
    :data:`PLANTED_BUGS`.

    Examples
    --------
    >>> q = k = v = np.eye(2, dtype=np.float32)[None, None]
    >>> out, lse = blocked_attention(q, k, v)
    >>> out.round(3), lse.round(3)
    (array([[[[0.67, 0.33],
             [0.33, 0.67]]]], dtype=float32), array([[[1.108, 1.108]]], dtype=float32))
    """
    kernel = _Blocked(q, k, v, **settings)
    work = kernel.work
    shape = (*kernel.q.shape[:-1], 1)
    if kernel.sink is None:
        m = np.full(shape, -np.inf, dtype=work)
        total = np.zeros(shape, dtype=work)
    else:  # the sink is a key with logit s_h and no value: fold it in first
        m = np.broadcast_to(kernel.sink[:, None, None], shape).astype(work)
        total = np.ones(shape, dtype=work)
    acc = np.zeros((*kernel.q.shape[:-1], kernel.v.shape[-1]), dtype=work)
    with np.errstate(over="ignore", invalid="ignore"):
        for start, stop in kernel.blocks():
            s, _ = kernel.scores(start, stop)
            if kernel.bug == "no_max":  # the textbook exp(s) / sum(exp(s))
                low = np.float16 if kernel.precision == "float16" else work
                e = np.exp(s.astype(low)).astype(work)
                total = total + e.sum(axis=-1, keepdims=True)
                acc = acc + np.matmul(
                    kernel.rounded(kernel.dropped(e, start, stop)),
                    kernel.v[..., start:stop, :],
                )
                m = np.zeros_like(m)
                continue
            m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
            shift = np.where(np.isneginf(m_new), work(0), m_new)
            e = np.exp(s - shift)
            rescale = (
                np.ones_like(m) if kernel.bug == "no_rescale" else np.exp(m - shift)
            )
            total = total * rescale + e.sum(axis=-1, keepdims=True)
            p = kernel.rounded(kernel.dropped(e, start, stop))
            acc = acc * rescale + np.matmul(p, kernel.v[..., start:stop, :])
            m = m_new
        out = acc / np.where(total == 0, work(1), total)
        shift = np.where(np.isneginf(m), work(0), m)
        with np.errstate(divide="ignore"):
            log_total = np.log(total)
        lse = log_total if kernel.bug == "lse_no_max" else shift + log_total
        if kernel.bug == "lse_log2":
            lse = lse / work(math.log(2))
    return kernel.output(out), lse[..., 0].astype(work)


@with_signature(_kernel_signature("q", "k", "v", "out", "lse", "grad_out"))
def blocked_attention_backward(  # noqa: PLR0917 (a kernel)
    q,
    k,
    v,
    out,
    lse,
    grad_out,
    **settings,
):
    """FlashAttention-2's backward in ``precision``, from the forward's out and lse.

    For each key block: recompute ``P = exp(S - lse)``, then ``dV += Pᵀ dO``,
    ``dP = dO Vᵀ``, ``dS = P ∘ (dP - D)`` with ``D = rowsum(dO ∘ O)``, ``dQ +=
    dS K`` and ``dK = dSᵀ Q``, in float32 (float64); a 16-bit kernel rounds
    ``P`` and ``dS`` to its precision before each product. Returns a dict
    with ``dq``, ``dk``, ``dv`` in the kernel's precision and, when there is a
    float ``mask`` or ``sink_logits``, ``dmask`` and ``dsink_logits`` in
    float32 (float64).

    Examples
    --------
    >>> q = k = v = np.eye(2, dtype=np.float32)[None, None]
    >>> out, lse = blocked_attention(q, k, v)
    >>> grads = blocked_attention_backward(q, k, v, out, lse, np.ones_like(out))
    >>> grads["dv"].round(3)
    array([[[[1., 1.],
             [1., 1.]]]], dtype=float32)
    """
    kernel = _Blocked(q, k, v, **settings)
    work = kernel.work
    d_out = np.asarray(grad_out).astype(work)
    out = np.asarray(out).astype(work)
    lse = np.asarray(lse).astype(work)[..., None]
    no_row = np.isneginf(lse)
    lse_shift = np.where(no_row, work(0), lse)
    delta = (
        np.zeros_like(lse)
        if kernel.bug == "no_delta"
        else (d_out * out).sum(-1, keepdims=True)
    )
    dq = np.zeros(kernel.q.shape, dtype=work)
    dk = np.zeros(kernel.k.shape, dtype=work)
    dv = np.zeros(kernel.v.shape, dtype=work)
    dbias = (
        None
        if kernel.bias is None
        else np.zeros(
            np.broadcast_shapes(kernel.bias.shape, (*kernel.q.shape[:-1], kernel.n_k)),
            work,
        )
    )
    with np.errstate(over="ignore", invalid="ignore"):
        for start, stop in kernel.blocks():
            s, capped = kernel.scores(start, stop)
            p = np.where(no_row, work(0), np.exp(s - lse_shift))
            pd = kernel.rounded(kernel.dropped(p, start, stop))
            dv[..., start:stop, :] = np.matmul(np.swapaxes(pd, -1, -2), d_out)
            dp = np.matmul(d_out, np.swapaxes(kernel.v[..., start:stop, :], -1, -2))
            dp = kernel.dropped(dp, start, stop)
            ds = p * (dp - delta)
            if dbias is not None:
                dbias[..., start:stop] = ds
            if kernel.softcap is not None:
                ds = ds * (work(1) - np.square(capped / work(kernel.softcap)))
            ds_low = kernel.rounded(ds)
            dq += np.matmul(ds_low, kernel.k[..., start:stop, :])
            dk[..., start:stop, :] = np.matmul(np.swapaxes(ds_low, -1, -2), kernel.q)
    dq *= kernel.scale
    if kernel.bug != "dk_no_scale":
        dk *= kernel.scale
    # Grouped heads: each key/value head sums the gradients of its query heads.
    b = kernel.q.shape[0]
    dk_g = np.zeros((b, kernel.h_kv, *dk.shape[2:]), dtype=work)
    dv_g = np.zeros((b, kernel.h_kv, *dv.shape[2:]), dtype=work)
    np.add.at(dk_g, (slice(None), kernel.heads), dk)
    np.add.at(dv_g, (slice(None), kernel.heads), dv)
    grads = {
        "dq": kernel.output(dq),
        "dk": kernel.output(dk_g),
        "dv": kernel.output(dv_g),
    }
    if dbias is not None:
        shape = kernel.bias.shape
        extra = dbias.ndim - len(shape)
        reduced = dbias.sum(axis=tuple(range(extra))) if extra else dbias
        axes = tuple(i for i, n in enumerate(shape) if n == 1 and reduced.shape[i] != 1)
        grads["dmask"] = reduced.sum(axis=axes, keepdims=True) if axes else reduced
    if kernel.sink is not None:
        weight = np.where(
            no_row, work(0), np.exp(kernel.sink[:, None, None] - lse_shift)
        )
        per_row = weight * delta
        sign = 1 if kernel.bug == "dsink_sign" else -1
        grads["dsink_logits"] = sign * per_row.sum(axis=(0, 2, 3))
    return grads


def random_problem(rng, precision):
    """A random problem for :func:`blocked_attention`, as a kernel test draws one.

    Up to 2 batch entries, 4 query heads in groups over 1 or 2 key/value heads,
    1 to 47 queries and keys, head width 4 to 32, logit scales 0.1 to 3, and
    any of a causal or window mask in either alignment, a scale, a soft-cap,
    sink logits, a float or boolean mask and dropout, with blocks of 1 to 64
    keys. Returns ``((q, k, v, grad_out), options)``, the arrays as a kernel of
    ``precision`` receives them and the options with ``block_size``.

    Examples
    --------
    >>> arrays, options = random_problem(np.random.default_rng(0), "float16")
    >>> arrays[0].dtype, "block_size" in options
    (dtype('float16'), True)
    """
    b = int(rng.integers(1, 3))
    h_kv = int(rng.integers(1, 3))
    h = h_kv * int(rng.integers(1, 3))
    n_q, n_k = int(rng.integers(1, 48)), int(rng.integers(1, 48))
    d = int(rng.choice([4, 8, 16, 32]))
    sigma = float(rng.choice([0.1, 1.0, 3.0]))
    options = {"block_size": int(rng.choice([1, 5, 16, 64]))}
    shape = (b, h, n_q, n_k)
    kind = rng.integers(0, 4)
    align = str(rng.choice(["top_left", "bottom_right"]))
    if kind == 1:
        options.update(is_causal=True, align=align)
    elif kind == 2:
        window = (int(rng.integers(0, 8)), int(rng.integers(0, 8)))
        options.update(window=window, align=align)
    if rng.random() < 0.3:
        options["scale"] = float(rng.uniform(0.05, 1.0))
    if rng.random() < 0.25:
        options["softcap"] = float(rng.uniform(1.0, 10.0))
    if rng.random() < 0.25:
        options["sink_logits"] = rng.standard_normal(h)
    if rng.random() < 0.25:
        options["mask"] = rng.standard_normal(shape)
    elif rng.random() < 0.2:
        options["mask"] = rng.random(shape) < 0.8
    if rng.random() < 0.2:
        p = float(rng.uniform(0.1, 0.5))
        options.update(dropout_p=p, dropout_mask=rng.random(shape) > p)
    q = rng.standard_normal((b, h, n_q, d)) * sigma
    k, v = (rng.standard_normal((b, h_kv, n_k, d)) for _ in range(2))
    grad_out = rng.standard_normal((b, h, n_q, d))
    arrays = (q, k, v, grad_out)
    if precision == "bfloat16":
        return tuple(to_bfloat16(a.astype(np.float32)) for a in arrays), options
    return tuple(a.astype(precision) for a in arrays), options


#: Problem sizes, (keys, head width), at which :func:`bound_growth` judges
#: the float32 kernels: the testing page's own and a longer, wider one.
GROWTH_SIZES = ((64, 16), (1024, 64))


def bound_growth(sizes=GROWTH_SIZES, logit_scale=0.01, *, seed=SEED):
    """The float32 error bound as the problem grows, against two real bugs.

    The bound sums worst cases over the keys and the head's width, so it
    loosens as they grow. For each ``(keys, width)``: the correct blocked
    kernel and the two bugs of the tolerance table that stay small at small
    logits, judged by :func:`sdpa_ref.testing.check_attention`'s default
    float32 rule on seeded inputs (:func:`demo_inputs`, 4 query heads),
    and by FlashAttention's rule.

    Returns
    -------
    list of dict
        Per size and kernel: ``keys``, ``width``, ``kernel``, ``error``
        (largest output error), ``bound`` (the bound at the worst element),
        ``ratio`` and ``passed``, and ``flash_passed``: whether
        FlashAttention's rule (``rule="flash"``) passes it.

    Examples
    --------
    >>> rows = bound_growth(sizes=((64, 16),))
    >>> [r["passed"] for r in rows]  # correct, wrong scale, no rescaling
    [True, False, False]
    """
    kernels = {
        "correct": online_softmax_kernel,
        "wrong scale": wrong_scale_kernel,
        "online softmax that forgets to rescale": forgot_rescale_kernel,
    }
    rows = []
    for keys, width in sizes:
        q, k, v = demo_inputs(
            "float32", logit_scale, seed=seed, shape=(1, 4, keys, width)
        )
        for name, kernel in kernels.items():
            out = kernel(q, k, v)
            (check,) = check_attention(out, q, k, v)
            (flash,) = check_attention(out, q, k, v, rule="flash")
            rows.append(
                {
                    "keys": keys,
                    "width": width,
                    "kernel": name,
                    "error": check.kernel_error,
                    "bound": check.bound,
                    "ratio": check.ratio,
                    "passed": check.passed,
                    "flash_passed": flash.passed,
                }
            )
    return rows


def rule_comparison(precisions=("float32", "float64"), problems=100, *, seed=SEED):
    """Correct blocked kernels judged by FlashAttention's rule and by the error bound.

    For each precision, ``problems`` random problems (:func:`random_problem`),
    each with its output, log-sum-exp and every gradient checked.

    Returns
    -------
    dict
        Per precision: ``problems``, ``flash_failures`` and ``bound_failures``
        (problems failing each rule), ``flash_failed_arrays`` (how often each
        array failed FlashAttention's rule), ``largest_ratio`` and
        ``median_ratio`` (of an array's error to its bound).

    Examples
    --------
    >>> result = rule_comparison(("float32",), problems=3)
    >>> result["float32"]["bound_failures"]
    0
    """
    rng = np.random.default_rng(seed)
    summary = {}
    for precision in precisions:
        flash_failures, bound_failures, ratios, failed_arrays = 0, 0, [], {}
        for _ in range(problems):
            (q, k, v, grad_out), options = random_problem(rng, precision)
            out, lse = blocked_attention(q, k, v, precision=precision, **options)
            grads = blocked_attention_backward(
                q, k, v, out, lse, grad_out, precision=precision, **options
            )
            if "mask" not in options or options["mask"].dtype == bool:
                grads.pop("dmask", None)
            checked = {k_: v_ for k_, v_ in options.items() if k_ != "block_size"}
            common = {
                "lse": lse,
                "grad_out": grad_out,
                "grads": grads,
                "diagnose": False,
            }
            flash = check_attention(out, q, k, v, rule="flash", **common, **checked)
            bound = check_attention(out, q, k, v, **common, **checked)
            flash_failures += not flash.passed
            bound_failures += not bound.passed
            for c in flash:
                if not c.passed:
                    failed_arrays[c.name] = failed_arrays.get(c.name, 0) + 1
            ratios += [c.ratio for c in bound]
        summary[precision] = {
            "problems": problems,
            "flash_failures": flash_failures,
            "bound_failures": bound_failures,
            "flash_failed_arrays": failed_arrays,
            "largest_ratio": float(max(ratios)),
            "median_ratio": float(np.median(ratios)),
        }
    return summary
