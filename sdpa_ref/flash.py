"""FlashAttention's ideas in numbers: the online softmax, memory, HBM traffic.

Every number quoted from outside the project is a constant of
:mod:`sdpa_ref.published`, with its source and setting, which this module
imports under the same name; everything else is computed. Arithmetic is counted as in
:mod:`sdpa_ref.cost`: a multiply-add is two floating-point operations (FLOPs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc

import numpy as np

from ._checks import positive_int, real_array, real_matrices
from .backward import attention_backward, tiled_attention_backward
from .core import attention, tiled_attention
from .cost import attention_flops
from .published import (  # the published numbers this module uses or names
    A100_HBM_GB,
    A100_HBM_TBPS,
    A100_MATMUL_TFLOPS,
    A100_NON_MATMUL_TFLOPS,
    A100_SHARED_MEMORY_MAX_KB,
    A100_SMS,
    A100_SRAM_KB,
    BACKWARD_MATMULS,
    CAUSAL_SKIP_SPEEDUP,
    FA3_FP8_ERROR_REDUCTION,
    FIGURE_2,
    FIGURE_2_ARXIV_V2,
    FIGURE_2_RECOUNT_GFLOPS,
    FLASH2_A100_BLOCKS,
    FLOPS_UTILISATION,
    PAPER_MAX_MEMORY_SAVING,
    README_MEMORY_SAVINGS,
    README_SETTING,
)
from .random_model import SEED

__all__ = [
    "A100_HBM_GB",
    "A100_HBM_TBPS",
    "A100_MATMUL_TFLOPS",
    "A100_NON_MATMUL_TFLOPS",
    "A100_SHARED_MEMORY_MAX_KB",
    "A100_SMS",
    "A100_SRAM_BYTES",
    "A100_SRAM_KB",
    "BACKWARD_MATMULS",
    "CAUSAL_SKIP_SPEEDUP",
    "FA3_FP8_ERROR_REDUCTION",
    "FIGURE_2",
    "FIGURE_2_ARXIV_V2",
    "FIGURE_2_RECOUNT_GFLOPS",
    "FLASH2_A100_BLOCKS",
    "FLOPS_UTILISATION",
    "FORWARD_MATMULS",
    "LOOP_ORDERS",
    "PAPER_MAX_MEMORY_SAVING",
    "README_MEMORY_SAVINGS",
    "README_SETTING",
    "TRACE_SEED",
    "TRACE_SHAPE",
    "arithmetic_intensity",
    "block_sizes",
    "causal_blocks",
    "figure_2_matmul_flops",
    "figure_2_ratios",
    "flash1_traffic",
    "flash2_kernel_blocks",
    "flash2_traffic",
    "gradient_check",
    "hbm_traffic",
    "memory_sweep",
    "online_softmax_trace",
    "peak_memory",
    "split_kv_attention",
    "split_kv_check",
    "sram_elements",
    "tiled_forward_trace",
    "trace_problem",
]

#: The same in bytes, reading a KB as 1024 bytes (this site's choice).
A100_SRAM_BYTES = A100_SRAM_KB * 1024


#: Matrix products in attention's forward pass, ``S = Q Kᵀ`` and ``O = P V``.
FORWARD_MATMULS = 2


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


#: The loop orders of :func:`tiled_forward_trace`. FlashAttention-2's Algorithm
#: 1 (Dao 2024) runs the blocks of queries in the outer loop, FlashAttention's
#: Algorithm 1 (Dao et al. 2022) the blocks of keys and values.
LOOP_ORDERS = ("flash2", "flash")

#: The size of the flash page's stepped example, ``n_q`` queries and ``n_k``
#: keys of width ``d``, values of width ``d_v``, in tiles of ``block_rows``
#: queries by ``block_cols`` keys.
TRACE_SHAPE = {"n_q": 4, "n_k": 12, "d": 4, "d_v": 2, "block_rows": 2, "block_cols": 4}
#: Seed of :func:`trace_problem`. With ``d = 4`` the scale is 1/2 and every
#: score a multiple of 1/2; the draw is one in which every query's maximum
#: rises at some key block after its first, and at each later block some
#: queries' maximum rises while others' stays (the tests check it).
TRACE_SEED = (SEED, 15)


def trace_problem(seed=TRACE_SEED):
    """The small problem that the flash page's figure steps through.

    Queries, keys and values of :data:`TRACE_SHAPE`, with integer entries
    from −2 to 2, drawn with ``np.random.default_rng(seed)``.

    Returns
    -------
    q, k, v : numpy.ndarray
        Shapes ``(4, 4)``, ``(12, 4)`` and ``(12, 2)``, float64.

    Examples
    --------
    >>> q, k, v = trace_problem()
    >>> q.shape, k.shape, v.shape
    ((4, 4), (12, 4), (12, 2))
    >>> float(q[0] @ k[2] / np.sqrt(4))  # a score a reader can check by hand
    2.5
    """
    rng = np.random.default_rng(seed)
    s = TRACE_SHAPE
    q, k, v = (
        rng.integers(-2, 3, shape).astype(np.float64)
        for shape in ((s["n_q"], s["d"]), (s["n_k"], s["d"]), (s["n_k"], s["d_v"]))
    )
    return q, k, v


def _blocks(n, size):
    return [(start, min(start + size, n) - 1) for start in range(0, n, size)]


def tiled_forward_trace(q, k, v, block_rows, block_cols, *, order="flash2"):
    """Walk the tiled forward pass tile by tile, in either loop order.

    One tile is a block ``Q_i`` of ``block_rows`` queries against a block
    ``K_j, V_j`` of ``block_cols`` keys and values. Each tile's scores
    ``S_ij = Q_i K_jᵀ / √d`` are computed on chip and folded into the running
    maximum ``m``, sum ``ℓ`` and unnormalised output ``a`` of its queries by
    the online softmax (:func:`online_softmax_trace`, FlashAttention-2's
    form), so every query meets its key blocks in the same order whichever
    loop is outside, and its numbers after each tile are the same in both
    orders. What the order changes is what moves between HBM and on-chip
    memory:

    * ``"flash2"``, FlashAttention-2's Algorithm 1 (Dao 2024): queries
      outside. ``Q_i`` is read once, at its first tile; ``K_j`` and ``V_j`` at
      every tile; ``a``, ``ℓ`` and ``m`` stay on chip, and after the last key
      block the output ``O_i = a / ℓ`` and the log-sum-exp ``L_i`` are
      written once.
    * ``"flash"``, FlashAttention's Algorithm 1 (Dao et al. 2022): keys
      outside. ``O``, ``ℓ`` and ``m`` start in HBM (line 2); ``K_j`` and
      ``V_j`` are read once, at their first tile (line 6); every tile reads
      ``Q_i``, ``O_i``, ``ℓ_i`` and ``m_i`` (line 8) and writes the last three
      back (lines 12-13). That algorithm stores the output normalised,
      ``O_i = a / ℓ``; the trace reports ``a``, which is ``ℓ O_i``.

    Parameters
    ----------
    q : array_like, shape (n_q, d)
    k : array_like, shape (n_k, d)
    v : array_like, shape (n_k, d_v)
    block_rows, block_cols : int
        Queries and keys per tile, ``B_r`` and ``B_c``.
    order : {"flash2", "flash"}

    Returns
    -------
    dict
        ``order``; ``scores``, the whole ``S = Q Kᵀ / √d`` (which no kernel
        holds at once: for display); ``query_blocks`` and ``key_blocks``, each
        block's first and last index (inclusive); ``initial``, the state
        before the first tile (``state``, and ``writes``, the arrays the
        order writes to HBM before it); ``steps``, one dict per tile in
        the order's sequence; ``output`` (``acc / l``), ``dense``
        (:func:`sdpa_ref.attention` of the same inputs) and ``max_abs_diff``
        between the two.

        Each step holds ``query_block`` and ``key_block`` (from 0),
        ``queries`` and ``keys`` (first and last index); ``reads``,
        ``writes`` and ``on_chip``, lists of ``(array, block)`` pairs with
        arrays named ``"Q"``, ``"K"``, ``"V"``, ``"O"``, ``"l"``, ``"m"`` and
        ``"L"``; for the tile's queries ``block_max``, ``max_before``,
        ``max_after``, ``rescale`` (``exp(max_before − max_after)``), ``sum``
        and ``acc``, and ``output`` (``acc / sum``) at their last key block,
        else None; and ``state``, the running ``m``, ``l`` and ``acc`` of
        every query after the tile (``−inf``, 0 and 0 for a query not yet
        reached).

    Examples
    --------
    The figure's problem, FlashAttention-2's order: the second tile is query
    block 0 against key block 1, which raises query 0's maximum from 2.5 to
    3.5, so its sum and accumulator shrink by ``e^(2.5 − 3.5)``:

    >>> q, k, v = trace_problem()
    >>> t = tiled_forward_trace(q, k, v, 2, 4)
    >>> step = t["steps"][1]
    >>> step["query_block"], step["key_block"], step["reads"]
    (0, 1, [('K', 1), ('V', 1)])
    >>> step["max_before"].tolist(), step["max_after"].tolist()
    ([2.5, 3.5], [3.5, 3.5])
    >>> step["rescale"].round(3).tolist()
    [0.368, 1.0]
    >>> bool(t["max_abs_diff"] < 1e-15)
    True
    """
    q, k, v = real_matrices(
        q, k, v, "q, k and v must be 2-D (one head), got shapes {q}, {k} and {v}"
    )
    if q.shape[1] != k.shape[1] or k.shape[0] != v.shape[0]:
        raise ValueError(
            f"q (n_q, d), k (n_k, d) and v (n_k, d_v) must agree, got shapes "
            f"{q.shape}, {k.shape} and {v.shape}"
        )
    block_rows = positive_int(block_rows, "block_rows")
    block_cols = positive_int(block_cols, "block_cols")
    if order not in LOOP_ORDERS:
        raise ValueError(f"order must be one of {LOOP_ORDERS}, got {order!r}")
    (n_q, d), (n_k, d_v) = q.shape, v.shape
    scale = 1.0 / np.sqrt(d)
    row_blocks, col_blocks = _blocks(n_q, block_rows), _blocks(n_k, block_cols)
    last = len(col_blocks) - 1
    if order == "flash2":
        tiles = [(i, j) for i in range(len(row_blocks)) for j in range(len(col_blocks))]
    else:
        tiles = [(i, j) for j in range(len(col_blocks)) for i in range(len(row_blocks))]
    m, total, acc = np.full(n_q, -np.inf), np.zeros(n_q), np.zeros((n_q, d_v))
    initial = {
        "state": {"m": m.copy(), "l": total.copy(), "acc": acc.copy()},
        "writes": []
        if order == "flash2"
        else [(name, i) for i in range(len(row_blocks)) for name in ("O", "l", "m")],
    }
    steps = []
    for i, j in tiles:
        rows = slice(row_blocks[i][0], row_blocks[i][1] + 1)
        cols = slice(col_blocks[j][0], col_blocks[j][1] + 1)
        tile = scale * (q[rows] @ k[cols].T)  # S_ij: lives on chip only
        block_max = tile.max(axis=1)
        max_before = m[rows].copy()
        max_after = np.maximum(max_before, block_max)
        rescale = np.exp(max_before - max_after)
        e = np.exp(tile - max_after[:, None])
        m[rows] = max_after
        total[rows] = rescale * total[rows] + e.sum(axis=1)
        acc[rows] = rescale[:, None] * acc[rows] + e @ v[cols]
        if order == "flash2":
            reads = ([("Q", i)] if j == 0 else []) + [("K", j), ("V", j)]
            writes = [("O", i), ("L", i)] if j == last else []
            on_chip = [("Q", i), ("K", j), ("V", j), ("O", i), ("l", i), ("m", i)]
        else:
            reads = [("K", j), ("V", j)] if i == 0 else []
            reads += [("Q", i), ("O", i), ("l", i), ("m", i)]
            writes = [("O", i), ("l", i), ("m", i)]
            on_chip = [("K", j), ("V", j), ("Q", i), ("O", i), ("l", i), ("m", i)]
        steps.append(
            {
                "query_block": i,
                "key_block": j,
                "queries": row_blocks[i],
                "keys": col_blocks[j],
                "reads": reads,
                "writes": writes,
                "on_chip": on_chip,
                "block_max": block_max,
                "max_before": max_before,
                "max_after": max_after,
                "rescale": rescale,
                "sum": total[rows].copy(),
                "acc": acc[rows].copy(),
                "output": acc[rows] / total[rows, None] if j == last else None,
                "state": {"m": m.copy(), "l": total.copy(), "acc": acc.copy()},
            }
        )
    output = acc / total[:, None]
    dense = attention(q, k, v)
    return {
        "order": order,
        "scores": scale * (q @ k.T),
        "query_blocks": row_blocks,
        "key_blocks": col_blocks,
        "initial": initial,
        "steps": steps,
        "output": output,
        "dense": dense,
        "max_abs_diff": float(np.abs(output - dense).max()),
    }


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


def flash1_traffic(n, d, block_cols):
    """HBM reads and writes of FlashAttention's forward pass, in numbers.

    Dao et al. (2022), Algorithm 1, keys and values in the outer loop, with
    ``T_c = ceil(N / B_c)`` blocks of keys: line 2 writes the initial ``O``,
    ``ℓ`` and ``m`` (``N d + 2 N``); line 6 reads every block of ``K`` and
    ``V`` once (``2 N d``); and for each of the ``T_c`` key blocks the inner
    loop reads all of ``Q``, ``O``, ``ℓ`` and ``m`` (line 8) and writes
    ``O``, ``ℓ`` and ``m`` back (lines 12-13), ``3 N d + 4 N`` per pass. In
    all ``3 N d + 2 N + T_c (3 N d + 4 N)``. The query block size ``B_r``
    does not change the count: each pass covers every query once.

    Examples
    --------
    Two key blocks over 8 tokens of width 2: 3·16 + 16 + 2 (48 + 32) = 224.

    >>> flash1_traffic(8, 2, 4)
    224
    """
    n, d = positive_int(n, "n"), positive_int(d, "d")
    passes = -(-n // positive_int(block_cols, "block_cols"))
    return 3 * n * d + 2 * n + passes * (3 * n * d + 4 * n)


def flash2_traffic(n, d, block_rows):
    """HBM reads and writes of FlashAttention-2's forward pass, in numbers.

    Dao (2024), Algorithm 1, queries in the outer loop, with
    ``T_r = ceil(N / B_r)`` blocks of queries: each outer step loads its
    ``Q_i`` once, streams every block of ``K`` and ``V`` through the inner
    loop (``2 N d`` per pass), keeps ``O_i``, ``ℓ_i`` and ``m_i`` on chip, and
    writes ``O_i`` and the log-sum-exp ``L_i`` once at the end. In all
    ``N d`` (Q) ``+ T_r · 2 N d`` (K, V) ``+ N d + N`` (O, L)
    ``= 2 N d + N + 2 N d T_r``. The key block size ``B_c`` does not change
    the count.

    Examples
    --------
    Two query blocks over 8 tokens of width 2: 32 + 8 + 2·2·16 = 104.

    >>> flash2_traffic(8, 2, 4)
    104
    """
    n, d = positive_int(n, "n"), positive_int(d, "d")
    passes = -(-n // positive_int(block_rows, "block_rows"))
    return 2 * n * d + n + 2 * n * d * passes


def flash2_kernel_blocks(d):
    """FlashAttention-2's ``(B_r, B_c)`` on an A100 for head width ``d``.

    The width is rounded up to the next head dimension that release v2.8.3
    compiles (32, 64, 96, 128, 192 or 256), as its ``HEADDIM_SWITCH`` does,
    and looked up in :data:`~sdpa_ref.published.FLASH2_A100_BLOCKS`.

    Examples
    --------
    >>> flash2_kernel_blocks(64), flash2_kernel_blocks(80), flash2_kernel_blocks(128)
    ((128, 128), (128, 64), (128, 64))
    """
    d = positive_int(d, "d")
    for width, blocks in FLASH2_A100_BLOCKS.items():
        if d <= width:
            return blocks
    raise ValueError(
        f"FlashAttention-2 (release 2.8.3) has forward kernels for head "
        f"dimensions up to {max(FLASH2_A100_BLOCKS)}, got d={d}"
    )


def hbm_traffic(n, d, m):
    """HBM reads and writes of one head's forward pass, line by line.

    Standard attention, Dao et al. (2022) Algorithm 0: line 1 reads ``Q`` and
    ``K`` and writes ``S``; line 2 reads ``S`` and writes ``P``; line 3 reads
    ``P`` and ``V`` and writes ``O``: ``4 N d + 4 N²`` numbers.

    FlashAttention (:func:`flash1_traffic`) with Algorithm 1's block sizes
    (:func:`block_sizes`): ``B_c = ceil(M / 4d)`` keys stay on chip while the
    queries stream past, ``T_c = ceil(N / B_c)`` times.

    FlashAttention-2 (:func:`flash2_traffic`) twice. First with the same two
    block sizes, the large one now a block of ``B_r = ceil(M / 4d)`` queries
    that stays on chip while the keys and values stream past, ``T_r = T_c``
    times: FlashAttention-2's loop order with FlashAttention's blocks, which
    compares the two loop orders and nothing else. Its paper leaves ``B_r``
    and ``B_c`` to the kernel, and no kernel of it uses a query block that
    large. Then with the blocks its CUDA kernels use on an A100
    (:func:`flash2_kernel_blocks`): 128 queries for every head width.

    The leading terms are ``4 N²`` against ``3 N d T ≈ 12 N² d² / M`` and
    ``2 N d T ≈ 8 N² d² / M``, so the first two ratios tend to about
    ``M / 3d²`` and ``M / 2d²``: Theorem 2's orders of growth with their
    constants. With the kernel's ``B_r`` the ratio tends to ``2 B_r / d``.

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
        (``B_r``), ``passes`` (``T_c``, and FlashAttention-2's ``T_r`` with
        the same blocks), ``standard``, ``flash`` and ``flash2`` (numbers read
        or written), ``ratio`` and ``ratio2`` (standard over each),
        ``flash2_share`` (``flash2`` over ``flash``), ``leading_ratio`` and
        ``leading_ratio2`` (``M / 3d²`` and ``M / 2d²``); and for the A100
        kernel of FlashAttention-2, ``kernel_block_rows``,
        ``kernel_block_cols``, ``kernel_passes``, ``flash2_kernel`` (numbers
        read or written), ``ratio2_kernel`` (standard over it),
        ``flash2_kernel_share`` (it over ``flash``) and
        ``leading_ratio2_kernel`` (``2 B_r / d``). These seven are ``None``
        for a width above 256, which release 2.8.3 has no kernel for.

    Examples
    --------
    >>> t = hbm_traffic(4096, 64, 98_304)
    >>> t["block_cols"], t["passes"], t["standard"], t["flash"], t["flash2"]
    (384, 11, 68157440, 9625600, 6295552)
    >>> round(t["ratio"], 2), t["leading_ratio"]
    (7.08, 8.0)
    >>> round(t["ratio2"], 2), t["leading_ratio2"]
    (10.83, 12.0)

    The kernel streams the keys past blocks of 128 queries, 32 times:

    >>> t["kernel_block_rows"], t["kernel_passes"], t["flash2_kernel"]
    (128, 32, 17305600)
    >>> round(t["ratio2_kernel"], 2), t["leading_ratio2_kernel"]
    (3.94, 4.0)
    """
    n, d, m = positive_int(n, "n"), positive_int(d, "d"), positive_int(m, "m")
    if not d <= m <= n * d:
        raise ValueError(
            f"the bound holds for d <= M <= N d, got d={d}, M={m}, N d={n * d}"
        )
    cols, rows = block_sizes(d, m)
    standard = 4 * n * d + 4 * n * n
    flash = flash1_traffic(n, d, cols)
    # FlashAttention-2's loop order keeps the large size for the block that
    # stays on chip: the same blocks, the loops swapped.
    flash2 = flash2_traffic(n, d, cols)
    result = {
        "n": n,
        "d": d,
        "m": m,
        "block_cols": cols,
        "block_rows": rows,
        "passes": -(-n // cols),
        "standard": standard,
        "flash": flash,
        "flash2": flash2,
        "ratio": standard / flash,
        "ratio2": standard / flash2,
        "flash2_share": flash2 / flash,
        "leading_ratio": m / (3 * d * d),
        "leading_ratio2": m / (2 * d * d),
    }
    kernel = dict.fromkeys(
        (
            "kernel_block_rows",
            "kernel_block_cols",
            "kernel_passes",
            "flash2_kernel",
            "ratio2_kernel",
            "flash2_kernel_share",
            "leading_ratio2_kernel",
        )
    )
    if d <= max(FLASH2_A100_BLOCKS):
        kernel_rows, kernel_cols = flash2_kernel_blocks(d)
        traffic = flash2_traffic(n, d, kernel_rows)
        kernel = {
            "kernel_block_rows": kernel_rows,
            "kernel_block_cols": kernel_cols,
            "kernel_passes": -(-n // kernel_rows),
            "flash2_kernel": traffic,
            "ratio2_kernel": standard / traffic,
            "flash2_kernel_share": traffic / flash,
            "leading_ratio2_kernel": 2 * kernel_rows / d,
        }
    return result | kernel


def arithmetic_intensity(n, d, *, itemsize=2):
    """FLOPs per byte of HBM traffic in one head's forward pass, against the A100's.

    The arithmetic is the two matrix products, ``4 N² d`` FLOPs
    (:func:`sdpa_ref.cost.attention_flops`); the bytes are the numbers that
    :func:`hbm_traffic` counts, ``itemsize`` bytes each, for standard
    attention and for FlashAttention-2 with its A100 kernel's query blocks.
    A decoding step is counted too: one new query against a cache of ``N``
    keys and values, which it reads once, ``2 N d + 2 d`` numbers (the
    cache, the query and the output) for ``4 N d`` FLOPs.
    A kernel keeps the A100's Tensor Cores busy only if it does at least
    :data:`~sdpa_ref.published.A100_MATMUL_TFLOPS` /
    :data:`~sdpa_ref.published.A100_HBM_TBPS` FLOPs per byte it moves:
    below that ridge of the roofline, it waits for memory.

    Returns
    -------
    dict
        ``flops``; ``standard_bytes`` and ``kernel_bytes``;
        ``standard_intensity`` and ``kernel_intensity`` (FLOPs per byte);
        ``decode_intensity``, the same for one decoding step;
        ``ridge``, the FLOPs per byte needed at the fast and the slow end of
        the HBM bandwidth range (a pair); and ``standard_shortfall``, the ridge
        over standard attention's intensity (a pair): how many times longer its
        memory traffic takes than its arithmetic at peak speed.

    Examples
    --------
    One head of width 64 over 4,096 tokens in 16-bit numbers: about 32 FLOPs
    per byte for standard attention, about 124 for FlashAttention-2's kernel,
    against a ridge of 156 to 208.

    >>> a = arithmetic_intensity(4096, 64)
    >>> round(a["standard_intensity"], 1), round(a["kernel_intensity"], 1)
    (31.5, 124.1)
    >>> a["ridge"], tuple(round(x, 1) for x in a["standard_shortfall"])
    ((156.0, 208.0), (4.9, 6.6))

    A decoding step does about one FLOP per byte it reads:

    >>> round(a["decode_intensity"], 3)
    1.0
    """
    n, d = positive_int(n, "n"), positive_int(d, "d")
    itemsize = positive_int(itemsize, "itemsize")
    flops = attention_flops(n, n, d, d)
    standard_bytes = (4 * n * d + 4 * n * n) * itemsize
    kernel_bytes = flash2_traffic(n, d, flash2_kernel_blocks(d)[0]) * itemsize
    ridge = tuple(A100_MATMUL_TFLOPS / tbps for tbps in reversed(A100_HBM_TBPS))
    standard_intensity = flops / standard_bytes
    decode_bytes = (2 * n * d + 2 * d) * itemsize
    return {
        "flops": flops,
        "standard_bytes": standard_bytes,
        "kernel_bytes": kernel_bytes,
        "standard_intensity": standard_intensity,
        "kernel_intensity": flops / kernel_bytes,
        "decode_intensity": attention_flops(1, n, d, d) / decode_bytes,
        "ridge": ridge,
        "standard_shortfall": tuple(r / standard_intensity for r in ridge),
    }


def causal_blocks(n, block_rows, block_cols):
    """Which blocks of a causal ``n x n`` score matrix a tiled kernel can skip.

    Query ``i`` sees keys ``j <= i`` (self-attention, so the top-left and
    bottom-right alignments agree). A block of ``B_r`` queries and ``B_c``
    keys is *skipped* when its first key comes after its last query: every
    entry is masked, so the kernel never loads it (Dao 2024, Section 3.1.1,
    "Causal masking"). It is *full* when its last key comes no later than its
    first query, and needs no mask; the rest straddle the diagonal and are
    *masked* entry by entry.

    Returns
    -------
    dict
        ``query_blocks`` and ``key_blocks`` (blocks along each side),
        ``blocks`` (all of them), ``skipped``, ``masked``, ``full``, and
        ``computed_fraction``: the share of blocks computed, ``(masked +
        full) / blocks``, which tends to 1/2 as ``n`` grows.

    Examples
    --------
    Four square blocks a side: 6 skipped, 4 on the diagonal, 6 full.

    >>> c = causal_blocks(512, 128, 128)
    >>> c["blocks"], c["skipped"], c["masked"], c["full"], c["computed_fraction"]
    (16, 6, 4, 6, 0.625)
    """
    n = positive_int(n, "n")
    rows, cols = (
        positive_int(block_rows, "block_rows"),
        positive_int(block_cols, "block_cols"),
    )
    first_query = np.arange(0, n, rows)[:, None]
    last_query = np.minimum(first_query + rows, n) - 1
    first_key = np.arange(0, n, cols)[None, :]
    last_key = np.minimum(first_key + cols, n) - 1
    skipped = first_key > last_query
    full = last_key <= first_query
    blocks = skipped.size
    counts = {
        "skipped": int(skipped.sum()),
        "full": int(full.sum()),
        "masked": int((~skipped & ~full).sum()),
    }
    return {
        "query_blocks": skipped.shape[0],
        "key_blocks": skipped.shape[1],
        "blocks": blocks,
        "skipped": counts["skipped"],
        "masked": counts["masked"],
        "full": counts["full"],
        "computed_fraction": (blocks - counts["skipped"]) / blocks,
    }


def split_kv_attention(q, k, v, num_splits, *, mask=None):
    """Attention with the keys split into chunks and the partial results combined.

    Flash-Decoding's three steps (Dao et al. 2023): split the keys and values
    into ``num_splits`` chunks; attend to each chunk on its own, keeping its
    output ``O_s`` and the log-sum-exp ``lse_s`` of its logits; combine,
    with ``lse = log Σ_s exp(lse_s)`` and ``O = Σ_s exp(lse_s − lse) O_s``.
    The weight ``exp(lse_s − lse)`` is the chunk's share of the softmax's
    normaliser, so the result is exact. A chunk in which a query sees no key
    has ``lse_s = −∞`` and weight 0.

    Parameters
    ----------
    q : array_like, shape (..., n_q, d_k)
    k : array_like, shape (..., n_k, d_k)
    v : array_like, shape (..., n_k, d_v)
    num_splits : int
        At most ``n_k``; the chunks differ in length by at most one key.
    mask : array_like of bool, optional
        Broadcastable to ``(..., n_q, n_k)``; True means "may attend".

    Returns
    -------
    output : numpy.ndarray, shape (..., n_q, d_v)
    lse : numpy.ndarray, shape (..., n_q)
        ``-inf`` for a query that sees no key at all (its output is 0).
    splits : list of dict
        One per chunk: ``first_key`` and ``last_key`` (inclusive), ``lse``,
        ``output`` and ``weight``.

    Examples
    --------
    Query Q2 of the worked example scores [−1.5, −0.5, 0.5, 1.5] after
    scaling; in two chunks of two keys, the second carries 0.881 of the
    normaliser, and the combined output is the dense one:

    >>> from sdpa_ref import example
    >>> Q, K, V = example.vectors(4)
    >>> out, lse, splits = split_kv_attention(Q[2:3], K, V, 2)
    >>> [round(float(s["weight"][0]), 3) for s in splits]
    [0.119, 0.881]
    >>> bool(np.abs(out - attention(Q[2:3], K, V)).max() < 1e-15)
    True
    """
    q = real_array(q, "q", min_ndim=2, dtype=np.float64)
    k = real_array(k, "k", min_ndim=2, dtype=np.float64)
    v = real_array(v, "v", min_ndim=2, dtype=np.float64)
    n_k = k.shape[-2]
    num_splits = positive_int(num_splits, "num_splits")
    if num_splits > n_k:
        raise ValueError(
            f"num_splits must be at most the number of keys, got num_splits="
            f"{num_splits} for k of shape {k.shape}"
        )
    scores_shape = (*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], n_k)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != bool:
            raise TypeError(f"mask must be boolean, got dtype {mask.dtype}")
        try:
            mask = np.broadcast_to(mask, scores_shape)
        except ValueError:
            raise ValueError(
                f"mask of shape {mask.shape} does not broadcast to the scores' "
                f"shape {scores_shape}"
            ) from None
    splits = []
    for keys in np.array_split(np.arange(n_k), num_splits):
        chunk = slice(keys[0], keys[-1] + 1)
        out, lse = attention(
            q,
            k[..., chunk, :],
            v[..., chunk, :],
            mask=None if mask is None else mask[..., chunk],
            scale=1.0 / np.sqrt(q.shape[-1]),
            empty_rows="zero",
            return_lse=True,
        )
        splits.append(
            {
                "first_key": int(keys[0]),
                "last_key": int(keys[-1]),
                "lse": lse,
                "output": out,
            }
        )
    lses = np.stack([s["lse"] for s in splits])
    lse = np.logaddexp.reduce(lses, axis=0)
    # A query that sees no key in any chunk has lse = -inf everywhere: give
    # every chunk weight 0 rather than exp(-inf + inf) = NaN.
    shift = np.where(np.isneginf(lse), 0.0, lse)
    output = np.zeros(splits[0]["output"].shape)
    for s in splits:
        s["weight"] = np.exp(s["lse"] - shift)
        output += s["weight"][..., None] * s["output"]
    return output, lse, splits


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
    (1.13, 8.0, 3.0)
    >>> r = figure_2_ratios(FIGURE_2_ARXIV_V2)
    >>> round(r["less_traffic"], 1), round(r["speedup"], 1)
    (9.2, 5.7)
    """
    fig = FIGURE_2 if figure is None else figure
    std, flash = fig["standard"], fig["flash"]
    return {
        "extra_flops": flash["gflops"] / std["gflops"],
        "less_traffic": std["hbm_gb"] / flash["hbm_gb"],
        "speedup": std["runtime_ms"] / flash["runtime_ms"],
    }


def figure_2_matmul_flops(setting=None):
    """Figure 2's FLOPs recounted from its setting: matrix products only.

    The forward pass multiplies ``Q Kᵀ`` and ``P V``, :data:`FORWARD_MATMULS`
    products of ``N² d`` multiply-adds for each of ``batch x heads`` heads,
    ``4 N² d`` FLOPs a head (:func:`sdpa_ref.cost.attention_flops`). The
    backward pass adds :data:`~sdpa_ref.published.BACKWARD_MATMULS` more of
    the same size: 4 for standard attention, 5 for FlashAttention, which
    recomputes ``S``.

    Parameters
    ----------
    setting : dict, optional
        ``seq_len``, ``head_dim``, ``heads`` and ``batch``; by default
        Figure 2's, :data:`~sdpa_ref.published.FIGURE_2` ``["setting"]``.

    Returns
    -------
    dict
        ``forward``, ``standard`` and ``flash`` (forward plus backward), in
        GFLOPs (10⁹ FLOPs); ``ratio``, FlashAttention's over standard
        attention's, (2 + 5) / (2 + 4) = 7/6; and ``printed_factor``, each
        column over the GFLOPs printed in
        :data:`~sdpa_ref.published.FIGURE_2`, as a dict.

    Examples
    --------
    The forward pass is 2³⁸ FLOPs, and the two columns of Figure 2 come to
    about 825 and 963 GFLOPs, as in the author's recount:

    >>> f = figure_2_matmul_flops()
    >>> round(f["forward"], 1), round(f["standard"], 1), round(f["flash"], 1)
    (274.9, 824.6, 962.1)
    >>> round(f["ratio"], 3)
    1.167

    Each is about twelve times the number printed in the figure:

    >>> {name: round(x, 1) for name, x in f["printed_factor"].items()}
    {'standard': 12.4, 'flash': 12.8}
    """
    s = FIGURE_2["setting"] if setting is None else setting
    n, d = (
        positive_int(s["seq_len"], "seq_len"),
        positive_int(s["head_dim"], "head_dim"),
    )
    heads = positive_int(s["heads"], "heads") * positive_int(s["batch"], "batch")
    forward = attention_flops(n, n, d, d, heads=heads)
    per_matmul = forward // FORWARD_MATMULS
    totals = {
        name: forward + BACKWARD_MATMULS[name] * per_matmul
        for name in ("standard", "flash")
    }
    return {
        "forward": forward / 1e9,
        "standard": totals["standard"] / 1e9,
        "flash": totals["flash"] / 1e9,
        "ratio": totals["flash"] / totals["standard"],
        "printed_factor": {
            name: totals[name] / 1e9 / FIGURE_2[name]["gflops"]
            for name in ("standard", "flash")
        },
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


def split_kv_check(q, k, v, num_splits, **options):
    """:func:`split_kv_attention` against dense attention: the chunks and the gap.

    Returns
    -------
    dict
        ``num_splits``, ``chunk_keys`` (keys per chunk), ``weights`` (each
        chunk's share of the normaliser, an array per chunk) and
        ``max_abs_diff`` between the combined and the dense outputs.

    Examples
    --------
    >>> from sdpa_ref import example
    >>> Q, K, V = example.vectors(4)
    >>> c = split_kv_check(Q, K, V, 2)
    >>> c["chunk_keys"], c["max_abs_diff"] < 1e-15
    ([2, 2], True)
    """
    out, _, splits = split_kv_attention(q, k, v, num_splits, **options)
    dense = attention(q, k, v, empty_rows="zero", **options)
    return {
        "num_splits": len(splits),
        "chunk_keys": [s["last_key"] - s["first_key"] + 1 for s in splits],
        "weights": [s["weight"] for s in splits],
        "max_abs_diff": float(np.abs(out - dense).max()),
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
