"""FlashAttention's ideas in numbers: the online softmax, memory, HBM traffic.

Every number quoted from outside the project sits in a constant below with its
source and setting; everything else is computed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import numpy as np

from ._checks import positive_int, real_array
from .backward import attention_backward, tiled_attention_backward
from .core import attention, tiled_attention
from .random_model import SEED

__all__ = [
    "A100_HBM_GB",
    "A100_SHARED_MEMORY_MAX_KB",
    "A100_SMS",
    "A100_SRAM_BYTES",
    "A100_SRAM_KB",
    "FIGURE_2",
    "PAPER_MAX_MEMORY_SAVING",
    "README_MEMORY_SAVINGS",
    "README_SETTING",
    "block_sizes",
    "figure_2_ratios",
    "gradient_check",
    "hbm_traffic",
    "memory_sweep",
    "online_softmax_trace",
    "peak_memory",
    "sram_elements",
]

#: The A100 GPU as Dao et al. (2022, arXiv:2205.14135, Section 2.1) describe
#: it: "40-80GB of high bandwidth memory (HBM) ... and 192KB of on-chip SRAM
#: per each of 108 streaming multiprocessors".
A100_HBM_GB = (40, 80)
A100_SMS = 108
#: The A100's SRAM per streaming multiprocessor as the paper writes it, "192KB".
A100_SRAM_KB = 192
#: The same in bytes: reading a KB as 1024 bytes is this site's choice.
A100_SRAM_BYTES = A100_SRAM_KB * 1024
#: The most of those 192 KB that a kernel can configure as shared memory on an
#: A100: "The NVIDIA A100 GPU supports shared memory capacity of 0, 8, 16, 32,
#: 64, 100, 132 or 164 KB per SM" (NVIDIA Ampere GPU Architecture Tuning
#: Guide, Section 1.4.2.3, where 192 KB is the combined capacity of the L1
#: cache, texture cache and shared memory).
A100_SHARED_MEMORY_MAX_KB = 164

#: Figure 2 (left) of Dao et al. (2022): attention of GPT-2 medium (sequence
#: length 1024, head dimension 64, 16 heads, batch size 64), forward plus
#: backward pass, on an A100 GPU. Quoted, not computed.
FIGURE_2 = {
    "setting": {"seq_len": 1024, "head_dim": 64, "heads": 16, "batch": 64},
    "standard": {"gflops": 66.6, "hbm_gb": 40.3, "runtime_ms": 41.7},
    "flash": {"gflops": 75.2, "hbm_gb": 4.4, "runtime_ms": 7.3},
}

#: "FlashAttention is up to 20x more memory efficient than exact attention
#: baselines" (Dao et al. 2022, Section 4.3, Figure 3 right: attention memory
#: on one A100 with 40 GB of HBM, with dropout and a padding mask).
PAPER_MAX_MEMORY_SAVING = 20

#: Memory savings of FlashAttention over PyTorch's standard attention by
#: sequence length, from the memory benchmark of the flash-attention README
#: ("We see 10X memory savings at sequence length 2K, and 20X at 4K"), a
#: sentence the README has kept from May 2022 to release v2.8.3, with the same
#: graph (assets/flashattn_memory.jpg, unchanged since commit 67c37795).
#: Quoted, not computed.
README_MEMORY_SAVINGS = {2048: 10, 4096: 20}
#: The benchmark setting of :data:`README_MEMORY_SAVINGS`, which only the
#: README of May 2022 states (commit dc6d1300, "similar to BERT-base": batch
#: size 8, head dimension 64, 12 attention heads, on an A100); the README of
#: v2.8.3 lists the setting of its newer speed benchmarks instead.
README_SETTING = {"batch": 8, "head_dim": 64, "heads": 12}


def online_softmax_trace(scores, values, block_size):
    """Walk one score row through the online softmax, block by block.

    The running maximum ``m``, running sum ``l`` and accumulator ``acc``
    start at ``-inf``, 0 and 0. For each block ``B`` of scores ``s``::

        m_new = max(m, max(s_B))
        c     = exp(m - m_new)            # rescales what came before
        l     = c * l + sum(exp(s_B - m_new))
        acc   = c * acc + exp(s_B - m_new) @ v_B

    and at the end the output is ``acc / l``, exactly ``softmax(s) @ v``.

    Parameters
    ----------
    scores : array_like, shape (n,)
        One query's (scaled) scores.
    values : array_like, shape (n, d_v)
    block_size : int

    Returns
    -------
    steps : list of dict
        One per block: ``first_key`` and ``last_key`` (inclusive), ``block_max``,
        ``max_before``, ``max_after``, ``rescale``, ``sum``, ``acc``.
    output : numpy.ndarray, shape (d_v,)
        ``acc / l`` after the last block.

    Examples
    --------
    >>> steps, out = online_softmax_trace([2, 0, 1, -2], np.eye(4), 2)
    >>> [round(s["rescale"], 3) for s in steps]
    [0.0, 1.0]
    >>> out.round(3)
    array([0.657, 0.089, 0.242, 0.012])
    """
    s = real_array(scores, "scores", min_ndim=1, dtype=np.float64)
    v = real_array(values, "values", min_ndim=2, dtype=np.float64)
    if s.ndim != 1 or v.shape[0] != s.shape[0]:
        raise ValueError(
            f"scores must be 1-D with one entry per row of values, got {s.shape} "
            f"and {v.shape}"
        )
    block_size = positive_int(block_size, "block_size")
    m, total, acc = -np.inf, 0.0, np.zeros(v.shape[1])
    steps = []
    for start in range(0, s.size, block_size):
        block = s[start : start + block_size]
        m_new = max(m, float(block.max()))
        rescale = float(np.exp(m - m_new))
        e = np.exp(block - m_new)
        total = rescale * total + float(e.sum())
        acc = rescale * acc + e @ v[start : start + block_size]
        steps.append(
            {
                "first_key": start,
                "last_key": start + block.size - 1,
                "block_max": float(block.max()),
                "max_before": m,
                "max_after": m_new,
                "rescale": rescale,
                "sum": total,
                "acc": acc.copy(),
            }
        )
        m = m_new
    return steps, acc / total


def sram_elements(sram_bytes, itemsize):
    """How many numbers of ``itemsize`` bytes fit in ``sram_bytes``: the paper's ``M``.

    Examples
    --------
    The A100's 192 KB per streaming multiprocessor, in 16-bit and 32-bit numbers:

    >>> sram_elements(A100_SRAM_BYTES, 2), sram_elements(A100_SRAM_BYTES, 4)
    (98304, 49152)
    """
    return positive_int(sram_bytes, "sram_bytes") // positive_int(itemsize, "itemsize")


def block_sizes(d, m):
    """Algorithm 1's block sizes: ``B_c = ceil(M / 4d)`` keys, ``B_r = min(B_c, d)``.

    Four blocks of ``d``-wide rows (``K_j``, ``V_j``, ``Q_i``, ``O_i``) then
    fit in ``M`` numbers of on-chip memory (Dao et al. 2022, Algorithm 1,
    line 1).

    Examples
    --------
    >>> block_sizes(64, 98_304)
    (384, 64)
    """
    d, m = positive_int(d, "d"), positive_int(m, "m")
    cols = -(-m // (4 * d))
    return cols, min(cols, d)


def hbm_traffic(n, d, m):
    """HBM reads and writes of one head's forward pass, counted line by line.

    Standard attention, Dao et al. (2022) Algorithm 0: line 1 reads ``Q`` and
    ``K`` and writes ``S``; line 2 reads ``S`` and writes ``P``; line 3 reads
    ``P`` and ``V`` and writes ``O``: ``4 N d + 4 N²`` numbers.

    FlashAttention, Algorithm 1, with ``T_c = ceil(N / B_c)`` blocks of keys
    (:func:`block_sizes`): line 2 writes the initial ``O``, ``ℓ`` and ``m``
    (``N d + 2 N``); line 6 reads every block of ``K`` and ``V`` once
    (``2 N d``); and for each of the ``T_c`` key blocks the inner loop reads
    all of ``Q``, ``O``, ``ℓ`` and ``m`` (line 8) and writes ``O``, ``ℓ`` and
    ``m`` back (lines 12-13), ``3 N d + 4 N`` per pass. In all
    ``3 N d + 2 N + T_c (3 N d + 4 N)``.

    The leading terms are ``4 N²`` and ``3 N d T_c ≈ 12 N² d² / M``, so the
    ratio tends to about ``M / (3 d²)``: Theorem 2's orders of growth with
    their constants.

    Parameters
    ----------
    n : int
        Sequence length ``N``.
    d : int
        Head width.
    m : int
        On-chip (SRAM) memory, in numbers (elements), ``d <= M <= N d`` as in
        Theorem 2.

    Returns
    -------
    dict
        ``n``, ``d``, ``m``, ``block_cols`` (``B_c``), ``block_rows``
        (``B_r``), ``passes`` (``T_c``), ``standard`` and ``flash`` (numbers
        read or written), ``ratio`` (standard over flash) and
        ``leading_ratio`` (``M / 3d²``).

    Examples
    --------
    >>> t = hbm_traffic(4096, 64, 98_304)
    >>> t["block_cols"], t["passes"], t["standard"], t["flash"]
    (384, 11, 68157440, 9625600)
    >>> round(t["ratio"], 2), t["leading_ratio"]
    (7.08, 8.0)
    """
    n, d, m = positive_int(n, "n"), positive_int(d, "d"), positive_int(m, "m")
    if not d <= m <= n * d:
        raise ValueError(
            f"the bound holds for d <= M <= N d, got d={d}, M={m}, N d={n * d}"
        )
    cols, rows = block_sizes(d, m)
    passes = -(-n // cols)
    standard = 4 * n * d + 4 * n * n
    flash = 3 * n * d + 2 * n + passes * (3 * n * d + 4 * n)
    return {
        "n": n,
        "d": d,
        "m": m,
        "block_cols": cols,
        "block_rows": rows,
        "passes": passes,
        "standard": standard,
        "flash": flash,
        "ratio": standard / flash,
        "leading_ratio": m / (3 * d * d),
    }


def figure_2_ratios(figure=None):
    """What the paper's Figure 2 (left) measured, as three ratios.

    Returns
    -------
    dict
        ``extra_flops`` (FlashAttention's GFLOPs over standard attention's),
        ``less_traffic`` (standard HBM gigabytes over FlashAttention's) and
        ``speedup`` (standard runtime over FlashAttention's).

    Examples
    --------
    >>> r = figure_2_ratios()
    >>> round(r["extra_flops"], 2), round(r["less_traffic"], 1), round(r["speedup"], 1)
    (1.13, 9.2, 5.7)
    """
    fig = FIGURE_2 if figure is None else figure
    std, flash = fig["standard"], fig["flash"]
    return {
        "extra_flops": flash["gflops"] / std["gflops"],
        "less_traffic": std["hbm_gb"] / flash["hbm_gb"],
        "speedup": std["runtime_ms"] / flash["runtime_ms"],
    }


def gradient_check(n=256, d=64, block_size=64, *, seed=SEED):
    """Seeded random inputs through both backward passes: how far apart they land.

    The dense pass is :func:`sdpa_ref.attention_backward`, with the whole
    weight matrix ``P`` in memory; the tiled one is
    :func:`sdpa_ref.tiled_attention_backward`, FlashAttention-2's, which
    recomputes ``P`` block by block from the forward pass's log-sum-exp.

    Returns
    -------
    dict
        ``n``, ``d``, ``block_size``, ``max_abs_diff`` (largest difference over
        ``dQ``, ``dK`` and ``dV``), ``saved`` (numbers the forward pass keeps
        for the backward besides ``O``: ``n`` log-sum-exps), ``weights`` (the
        ``n²`` entries of ``P`` a standard implementation keeps instead) and
        ``largest_block`` (entries of the biggest block of ``P`` in memory).

    Examples
    --------
    >>> c = gradient_check(64, 8, 16)
    >>> c["max_abs_diff"] < 1e-13, c["saved"], c["weights"], c["largest_block"]
    (True, 64, 4096, 1024)
    """
    n, d = positive_int(n, "n"), positive_int(d, "d")
    block_size = positive_int(block_size, "block_size")
    rng = np.random.default_rng((seed, n, d))
    q, k, v, do = (rng.standard_normal((n, d)) for _ in range(4))
    dense = attention_backward(q, k, v, do)
    out, lse = tiled_attention(q, k, v, block_size=block_size, return_lse=True)
    tiled = tiled_attention_backward(q, k, v, out, do, lse, block_size=block_size)
    return {
        "n": n,
        "d": d,
        "block_size": block_size,
        "max_abs_diff": float(
            max(np.abs(t - g).max() for t, g in zip(tiled[:3], dense[:3], strict=True))
        ),
        "saved": int(lse.size),
        "weights": n * n,
        # The tiled backward recomputes one (queries x block) slab of P at a time.
        "largest_block": n * min(block_size, n),
    }


def peak_memory(fn, *args, **kwargs):
    """Peak bytes that NumPy allocates while ``fn(*args, **kwargs)`` runs.

    ``tracemalloc`` sees every NumPy array allocation, so the same call
    reports the same peak up to the interpreter's own bookkeeping, a few tens
    of bytes (unlike the process's RSS, which moves by pages).

    Examples
    --------
    >>> peak_memory(np.ones, 1000) >= 8000
    True
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return peak - base


def memory_sweep(lengths, d=64, block_size=128, *, seed=SEED, isolated=True):
    """Measured peak memory and exactness of dense against tiled attention.

    For each sequence length ``n``, one head of self-attention on seeded
    random ``(n, d)`` inputs, run by :func:`sdpa_ref.attention` and by
    :func:`sdpa_ref.tiled_attention`. The measurement runs in a fresh Python
    process unless ``isolated=False``.

    Returns
    -------
    list of dict
        ``n``, ``dense_bytes``, ``tiled_bytes``, ``score_bytes`` (one dense
        float64 score matrix), ``max_abs_diff`` between the two outputs,
        ``pairs_evaluated`` (all ``n²``, by both), and ``memory_ratio``
        (dense over tiled).

    Examples
    --------
    >>> row = memory_sweep([512])[0]
    >>> row["dense_bytes"] > row["score_bytes"] > row["tiled_bytes"]
    True
    >>> row["max_abs_diff"] < 1e-14
    True
    """
    if isolated:
        # tracemalloc traces every thread; in a notebook kernel, its own
        # threads allocate a few bytes at random moments. A fresh interpreter
        # runs nothing else, so the same sweep always measures the same bytes.
        code = (
            "import json, sdpa_ref.flash as f; print(json.dumps(f.memory_sweep("
            f"{[int(n) for n in lengths]!r}, {int(d)}, {int(block_size)}, "
            f"seed={seed!r}, isolated=False)))"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)
    rows = []
    for length in lengths:
        n = positive_int(int(length), "lengths")
        rng = np.random.default_rng((seed, n))
        q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
        dense = attention(q, k, v)
        tiled = tiled_attention(q, k, v, block_size=block_size)
        rows.append(
            {
                "n": n,
                "dense_bytes": peak_memory(attention, q, k, v),
                "tiled_bytes": peak_memory(
                    tiled_attention, q, k, v, block_size=block_size
                ),
                "score_bytes": n * n * 8,
                "max_abs_diff": float(np.abs(dense - tiled).max()),
                "pairs_evaluated": n * n,
            }
        )
    for row in rows:
        row["memory_ratio"] = row["dense_bytes"] / row["tiled_bytes"]
    return rows
