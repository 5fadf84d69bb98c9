"""What dense attention costs: arithmetic, score memory, KV-cache memory.

Arithmetic is counted in multiply-adds, ``a * b + c``, the unit of a matrix
product's inner loop. The FlashAttention papers count floating-point
operations (FLOPs) instead, two to a multiply-add
(:data:`FLOPS_PER_MULTIPLY_ADD`), so one head's forward pass of
``n² (d_k + d_v)`` multiply-adds is ``2 n² (d_k + d_v)`` FLOPs, the
``4 n² d`` of FlashAttention-2's benchmarks when ``d_k = d_v = d``.
"""

from __future__ import annotations

from ._checks import positive_int
from .published import (  # the published numbers this module uses or names
    OLMO_2_7B,
)

__all__ = [
    "FLOPS_PER_MULTIPLY_ADD",
    "OLMO_2_7B",
    "attention_flops",
    "attention_macs",
    "cost_table",
    "kv_cache_bytes",
    "model_score_bytes",
    "score_bytes",
]


#: Floating-point operations in one multiply-add, a multiplication and an
#: addition.
FLOPS_PER_MULTIPLY_ADD = 2


def attention_macs(n_q, n_k, d_k, d_v, *, heads=1):
    """Multiply-adds of attention's forward pass: ``heads * n_q * n_k * (d_k + d_v)``.

    ``q kᵀ`` takes ``n_q n_k d_k`` of them and ``A v`` another
    ``n_q n_k d_v``; the softmax adds only ``O(n_q n_k)`` operations, which
    are not counted. For self-attention with ``n`` tokens and
    ``d_k = d_v = d`` this is the familiar ``O(n² d)``. In FLOPs, twice as
    many: :func:`sdpa_ref.cost.attention_flops`.

    Examples
    --------
    >>> attention_macs(1024, 1024, 64, 64)
    134217728
    """
    n_q, n_k = positive_int(n_q, "n_q"), positive_int(n_k, "n_k")
    d_k, d_v = positive_int(d_k, "d_k"), positive_int(d_v, "d_v")
    return positive_int(heads, "heads") * n_q * n_k * (d_k + d_v)


def attention_flops(n_q, n_k, d_k, d_v, *, heads=1):
    """Floating-point operations of the same two matrix products: 2 per multiply-add.

    For ``d_k = d_v = d`` this is ``4 n_q n_k d`` per head, the forward-pass
    count that FlashAttention-2's benchmarks use (Dao 2024, Section 4.1).

    Examples
    --------
    One head of width 64 over 1,024 tokens: 134,217,728 multiply-adds, and
    twice as many FLOPs.

    >>> attention_flops(1024, 1024, 64, 64)
    268435456
    >>> attention_flops(1024, 1024, 64, 64) == 4 * 1024**2 * 64
    True
    """
    return FLOPS_PER_MULTIPLY_ADD * attention_macs(n_q, n_k, d_k, d_v, heads=heads)


def score_bytes(n_q, n_k, *, heads=1, itemsize=4):
    """Bytes to hold the score (or weight) matrix: ``heads * n_q * n_k * itemsize``.

    Examples
    --------
    A 4096-token sequence, one head, float32: 64 MiB.

    >>> score_bytes(4096, 4096) / 2**20
    64.0
    """
    n_q, n_k = positive_int(n_q, "n_q"), positive_int(n_k, "n_k")
    return positive_int(heads, "heads") * n_q * n_k * positive_int(itemsize, "itemsize")


def model_score_bytes(n, *, layers, heads, itemsize=2):
    """Bytes of every head's weight matrix in every layer, for one sequence.

    Training with standard attention keeps each layer's ``n x n`` weights
    ``A`` (the FlashAttention papers' ``P``) for the backward pass, one
    matrix per head:
    ``layers * heads * n² * itemsize``.

    Examples
    --------
    OLMo 2 7B's 32 layers of 32 heads at its context length, 16-bit: 32 GiB.

    >>> model_score_bytes(4096, layers=32, heads=32) / 2**30
    32.0
    """
    layers = positive_int(layers, "layers")
    return score_bytes(
        n, n, heads=layers * positive_int(heads, "heads"), itemsize=itemsize
    )


def kv_cache_bytes(seq_len, *, layers, kv_heads, head_dim, itemsize=2, batch=1):
    """Bytes of a decoder's key/value cache.

    Keys and values (the factor 2) for every layer, key/value head, position
    and batch entry. Multi-head attention has as many key/value heads as
    query heads; multi-query attention has one; grouped-query attention has
    one per group.

    Examples
    --------
    32 layers, 32 heads of width 128, 4096 tokens in 16-bit floats: 2 GiB,
    and an eighth of that with 4 key/value heads.

    >>> kv_cache_bytes(4096, layers=32, kv_heads=32, head_dim=128) / 2**30
    2.0
    >>> kv_cache_bytes(4096, layers=32, kv_heads=4, head_dim=128) / 2**30
    0.25
    """
    return (
        2
        * positive_int(batch, "batch")
        * positive_int(layers, "layers")
        * positive_int(kv_heads, "kv_heads")
        * positive_int(seq_len, "seq_len")
        * positive_int(head_dim, "head_dim")
        * positive_int(itemsize, "itemsize")
    )


def cost_table(lengths, *, d_k=64, d_v=64, heads=1, itemsize=4):
    """Self-attention cost for each sequence length: one dict per length.

    Each row holds ``n``, ``macs`` (multiply-adds of the forward pass),
    ``flops`` (the same work in FLOPs, twice ``macs``) and ``score_bytes``
    (the ``n x n`` score matrix of every head), all exact integers, and
    ``length_growth`` and ``macs_growth``, both relative to the first row.

    Examples
    --------
    >>> rows = cost_table([1024, 2048])
    >>> [row["macs"] for row in rows]
    [134217728, 536870912]
    >>> rows[0]["flops"] == 2 * rows[0]["macs"]
    True
    >>> rows[-1]["length_growth"], rows[-1]["macs_growth"]
    (2.0, 4.0)
    """
    rows = [
        {
            "n": n,
            "macs": attention_macs(n, n, d_k, d_v, heads=heads),
            "flops": attention_flops(n, n, d_k, d_v, heads=heads),
            "score_bytes": score_bytes(n, n, heads=heads, itemsize=itemsize),
        }
        for n in lengths
    ]
    for row in rows:
        row["length_growth"] = row["n"] / rows[0]["n"]
        row["macs_growth"] = row["macs"] / rows[0]["macs"]
    return rows
