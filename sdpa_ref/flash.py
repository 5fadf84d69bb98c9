"""FlashAttention's ideas in numbers: the online softmax, memory, HBM traffic."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import numpy as np

from ._checks import positive_int, real_array
from .core import attention, tiled_attention
from .random_model import SEED

__all__ = [
    "PAPER_MEMORY_SAVINGS",
    "hbm_accesses",
    "memory_sweep",
    "online_softmax_trace",
    "peak_memory",
]


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


def hbm_accesses(n, d, m):
    """HBM accesses of standard and tiled attention, to leading order.

    Dao et al. (2022), Theorem 2: standard attention makes ``Θ(N d + N²)``
    accesses to the GPU's main memory (HBM), FlashAttention
    ``Θ(N² d² / M)`` with on-chip memory of ``M`` elements, for
    ``d <= M <= N d``. The constants are dropped, so compare orders of
    magnitude and trends, not exact counts.

    Parameters
    ----------
    n : int
        Sequence length ``N``.
    d : int
        Head width.
    m : int
        On-chip (SRAM) memory, in elements.

    Returns
    -------
    dict
        ``n``, ``d``, ``m``, and ``standard``, ``flash`` and ``ratio``
        (standard over flash).

    Examples
    --------
    >>> a = hbm_accesses(4096, 64, 100_000)
    >>> a["standard"], round(a["flash"]), round(a["ratio"], 1)
    (17039360, 687195, 24.8)
    """
    n, d, m = positive_int(n, "n"), positive_int(d, "d"), positive_int(m, "m")
    if not d <= m <= n * d:
        raise ValueError(
            f"the bound holds for d <= M <= N d, got d={d}, M={m}, N d={n * d}"
        )
    standard = n * d + n * n
    flash = n * n * d * d / m
    return {
        "n": n,
        "d": d,
        "m": m,
        "standard": standard,
        "flash": flash,
        "ratio": standard / flash,
    }


def peak_memory(fn, *args, **kwargs):
    """Peak bytes that NumPy allocates while ``fn(*args, **kwargs)`` runs.

    ``tracemalloc`` sees every NumPy array allocation, deterministically, so
    the same call always reports the same peak (unlike the process's RSS).

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


#: Memory savings that Dao et al. (2022) report for FlashAttention over
#: standard attention, by sequence length: "10x memory savings at sequence
#: length 2K and 20x at 4K". Quoted, not computed; the site measures its own.
PAPER_MEMORY_SAVINGS = {2048: 10, 4096: 20}
