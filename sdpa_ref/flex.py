"""The FlexAttention page's numbers: mods, their gradients, packed and paged inputs.

Every number that page quotes is computed here, from the oracle's own
functions: :func:`sdpa_ref.attention` and its backward with ``mask_mod`` and
``score_mod`` (:mod:`sdpa_ref.mods`), packed batches (:mod:`sdpa_ref.varlen`)
and :func:`sdpa_ref.attention_with_kvcache`.
"""

from __future__ import annotations

import numpy as np

from . import mods
from .backward import attention_backward, tiled_attention_backward
from .core import attention, tiled_attention
from .kvcache import attention_with_kvcache
from .random_model import SEED

__all__ = [
    "DOCUMENT_LENGTHS",
    "PAGED",
    "VARLEN",
    "document_mask_example",
    "gradient_routes",
    "option_mod_pairs",
    "options_agree_with_mods",
    "paged_example",
    "varlen_example",
]

#: The lengths of the three documents packed into the page's one sequence.
DOCUMENT_LENGTHS = (3, 4, 3)


def document_mask_example(lengths=DOCUMENT_LENGTHS):
    """FlexAttention's document-causal mask over documents of ``lengths`` tokens.

    Returns the document id of each token, the boolean mask (queries by
    keys) that ``mods.document(ids, mods.causal())`` describes, and a label
    per token: its position and its document's letter.

    Examples
    --------
    >>> ex = document_mask_example((2, 1))
    >>> ex["ids"].tolist(), ex["mask"].astype(int).tolist()
    ([0, 0, 1], [[1, 0, 0], [1, 1, 0], [0, 0, 1]])
    """
    ids = np.repeat(np.arange(len(lengths)), lengths)
    n = len(ids)
    mask = mods.create_mask(mods.document(ids, mods.causal()), None, None, n, n)
    labels = [f"{i} {'ABCDEFGH'[d]}" for i, d in enumerate(ids)]
    return {"ids": ids, "mask": mask[0, 0], "n": n, "labels": labels}


def option_mod_pairs(n_q=6, n_k=9):
    """Each built-in option beside the ready mod it is, for ``n_q`` by ``n_k`` scores.

    Returns a list of ``(name, options, mod_options)``: keyword arguments of
    :func:`sdpa_ref.attention` that give the same result.

    Examples
    --------
    >>> [name for name, _, _ in option_mod_pairs()][:2]
    ['is_causal', 'is_causal, bottom-right']
    """
    offset = n_k - n_q
    lengths = np.array([5, 9])
    return [
        ("is_causal", {"is_causal": True}, {"mask_mod": mods.causal()}),
        (
            "is_causal, bottom-right",
            {"is_causal": True, "align": "bottom_right"},
            {"mask_mod": mods.causal(offset=offset)},
        ),
        ("window, causal", {"window": (2, 0)}, {"mask_mod": mods.sliding_window(2)}),
        (
            "window, both bounds",
            {"window": (2, 1), "align": "bottom_right"},
            {"mask_mod": mods.sliding_window(2, 1, offset=offset)},
        ),
        (
            "sink_tokens",
            {"window": (1, 0), "sink_tokens": 2},
            {"mask_mod": mods.sliding_window(1, 0, sink_tokens=2)},
        ),
        ("chunk", {"chunk": 3}, {"mask_mod": mods.chunked(3)}),
        ("softcap", {"softcap": 0.5}, {"score_mod": mods.softcap(0.5)}),
        ("k_lengths", {"k_lengths": lengths}, {"mask_mod": mods.key_padding(lengths)}),
    ]


def options_agree_with_mods(n_q=6, n_k=9, *, seed=SEED):
    """The largest difference between each option and its mod, dense and tiled.

    Forward and backward, on random (2, 3, n_q, 4) inputs.

    Returns
    -------
    dict
        ``count`` (how many options) and ``largest`` (the largest absolute
        difference in the output or any gradient).

    Examples
    --------
    >>> options_agree_with_mods()["largest"]
    0.0
    """
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((2, 3, n_q, 4))
    k, v = rng.standard_normal((2, 2, 3, n_k, 4))
    d_out = rng.standard_normal(q.shape)
    largest = 0.0
    pairs = option_mod_pairs(n_q, n_k)
    for _, options, as_mods in pairs:
        for kw in (options, as_mods):
            kw["empty_rows"] = "zero"
        results = []
        for kw in (options, as_mods):
            out, lse = tiled_attention(q, k, v, block_size=4, return_lse=True, **kw)
            dense = attention_backward(q, k, v, d_out, **kw)
            tiled = tiled_attention_backward(
                q, k, v, out, d_out, lse, block_size=4, **kw
            )
            results.append([out, *dense[:3], *tiled[:3]])
        for a, b in zip(*results, strict=True):
            largest = max(largest, float(np.abs(a - b).max()))
    return {"count": len(pairs), "largest": largest}


def gradient_routes(cap=0.5, *, seed=SEED):
    """How exact each way of differentiating a score mod is, on random scores.

    The soft-cap ``cap · tanh(s / cap)`` three ways: its derivative as
    :func:`sdpa_ref.mods.softcap` supplies it, by complex steps (the same
    function as a user's mod), and by central differences with step 1e-6,
    each against ``sech²(s / cap)``. Then the gradient of a loss with
    respect to ALiBi's slopes, returned exactly by the backward, against
    central differences of the loss.

    Returns
    -------
    dict
        ``complex_step`` and ``central``: the largest relative error of each
        route's derivative; ``slopes_gap``: the largest difference between
        the exact slope gradient and central differences.

    Examples
    --------
    >>> routes = gradient_routes()
    >>> routes["complex_step"] < 1e-15 < 1e-12 < routes["central"]
    True
    """
    rng = np.random.default_rng(seed)
    score = rng.normal(scale=2.0, size=(1, 1, 8, 8))
    grids = mods.index_grids((1, 1), np.arange(8), np.arange(8))
    exact = 1.0 / np.cosh(score / cap) ** 2  # sech², accurate where tanh saturates

    def user_softcap(s, b, h, q_idx, kv_idx):
        return cap * np.tanh(s / cap)

    by_steps = mods.score_mod_derivative(user_softcap, score, grids, "score_mod")
    step = 1e-6
    central = (
        user_softcap(score + step, *grids) - user_softcap(score - step, *grids)
    ) / (2 * step)
    q, k, v, d_out = (rng.standard_normal((1, 2, 5, 3)) for _ in range(4))
    slopes = np.array([0.25, 0.0625])
    grads = attention_backward(
        q, k, v, d_out, score_mod=mods.alibi(slopes), is_causal=True
    )

    def loss(s):
        out = attention(q, k, v, score_mod=mods.alibi(s), is_causal=True)
        return float((out * d_out).sum())

    differences = [
        (loss(slopes + step * e) - loss(slopes - step * e)) / (2 * step)
        for e in np.eye(len(slopes))
    ]
    return {
        "complex_step": float(np.max(np.abs(by_steps - exact) / np.abs(exact))),
        "central": float(np.max(np.abs(central - exact) / np.abs(exact))),
        "slopes_gap": float(np.max(np.abs(grads.dscore_mod["slopes"] - differences))),
    }


#: The page's packed batch, with each sequence's queries, key slots, used
#: keys (``seqused_k``) and left padding (``key_leftpad``).
VARLEN = {
    "q_lengths": (3, 0, 1, 5),
    "k_slots": (4, 2, 1, 7),
    "seqused_k": (4, 2, 1, 6),
    "key_leftpad": (1, 0, 0, 1),
}


def varlen_example(spec=VARLEN, *, seed=SEED, heads=2, dim=4):
    """A packed batch against each of its sequences computed alone.

    Bottom-right causal attention over the packed batch of ``spec``, forward
    and backward, and the same sequences one by one, unpacked, each from its
    first used key to its last.

    Returns
    -------
    dict
        ``cu_seqlens_q`` and ``cu_seqlens_k``, the packed shapes of the
        output and the log-sum-exp, and ``largest``: the largest difference
        in the output, lse, dq, dk or dv.

    Examples
    --------
    >>> ex = varlen_example()
    >>> ex["cu_seqlens_q"], ex["out_shape"], ex["lse_shape"]
    ([0, 3, 3, 4, 9], (9, 2, 4), (2, 9))
    >>> ex["largest"] < 1e-14
    True
    """
    rng = np.random.default_rng(seed)
    cu_q = np.concatenate([[0], np.cumsum(spec["q_lengths"])])
    cu_k = np.concatenate([[0], np.cumsum(spec["k_slots"])])
    used, leftpad = np.array(spec["seqused_k"]), np.array(spec["key_leftpad"])
    q = rng.standard_normal((cu_q[-1], heads, dim))
    k, v = rng.standard_normal((2, cu_k[-1], heads, dim))
    d_out = rng.standard_normal(q.shape)
    options = {"is_causal": True, "align": "bottom_right", "layout": "bshd"}
    packed = {
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
        "seqused_k": used,
        "key_leftpad": leftpad,
    }
    out, lse = attention(q, k, v, return_lse=True, **options, **packed)
    grads = attention_backward(q, k, v, d_out, **options, **packed)
    largest = 0.0
    for b in range(len(cu_q) - 1):
        rows = slice(cu_q[b], cu_q[b + 1])
        keys = slice(cu_k[b] + leftpad[b], cu_k[b] + used[b])
        if rows.start == rows.stop:
            continue
        args = (q[None, rows], k[None, keys], v[None, keys])
        alone, alone_lse = attention(*args, return_lse=True, **options)
        g = attention_backward(*args, d_out[None, rows], **options)
        pairs = [
            (out[rows], alone[0]),
            (lse[:, rows], alone_lse[0]),
            (grads.dq[rows], g.dq[0]),
            (grads.dk[keys], g.dk[0]),
            (grads.dv[keys], g.dv[0]),
        ]
        largest = max(largest, *(float(np.abs(a - c).max()) for a, c in pairs))
    return {
        "cu_seqlens_q": cu_q.tolist(),
        "cu_seqlens_k": cu_k.tolist(),
        "out_shape": out.shape,
        "lse_shape": lse.shape,
        "largest": largest,
    }


#: The page's paged cache, with pages of ``page_size`` positions, how many
#: there are, and each sequence's cached keys.
PAGED = {"page_size": 4, "num_blocks": 12, "cache_seqlens": (10, 3, 7)}


def paged_example(spec=PAGED, *, seed=SEED, heads=2, dim=4):
    """A paged cache through a shuffled block table, and the same cache contiguous.

    The contiguous cache is built from the pages as FlashAttention's tests
    build it, ``k_cache_paged[block_table]``.

    Returns
    -------
    dict
        ``block_table``, ``equal`` (whether the outputs and log-sum-exps
        are identical, bit for bit), and ``error``: the message for a block
        table that points past the last page.

    Examples
    --------
    >>> ex = paged_example()
    >>> ex["equal"], ex["block_table"]
    (True, [[11, 0, 9], [10, 7, 1], [5, 6, 2]])
    """
    rng = np.random.default_rng(seed)
    page, num_blocks = spec["page_size"], spec["num_blocks"]
    lengths = np.array(spec["cache_seqlens"])
    batch, per_seq = len(lengths), -(-int(lengths.max()) // page)
    k_pages, v_pages = rng.standard_normal((2, num_blocks, page, heads, dim))
    table = rng.permutation(num_blocks)[: batch * per_seq].reshape(batch, per_seq)
    contiguous = [
        p[table].reshape(batch, per_seq * page, heads, dim) for p in (k_pages, v_pages)
    ]
    q = rng.standard_normal((batch, 2, heads, dim))
    options = {"cache_seqlens": lengths, "is_causal": True, "return_lse": True}
    paged = attention_with_kvcache(q, k_pages, v_pages, block_table=table, **options)
    flat = attention_with_kvcache(q, *contiguous, **options)
    equal = all(np.array_equal(a, b) for a, b in zip(paged, flat, strict=True))
    bad = table.copy()
    bad[0, 1] = num_blocks
    try:
        attention_with_kvcache(q, k_pages, v_pages, block_table=bad, **options)
    except ValueError as exc:
        error = str(exc)
    else:  # pragma: no cover
        raise AssertionError("a block table out of range was accepted")
    return {"block_table": table.tolist(), "equal": bool(equal), "error": error}
