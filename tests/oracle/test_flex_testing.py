"""The testing helpers with mask mods, score mods and packed batches."""

import numpy as np
import pytest

from sdpa_ref import attention, attention_backward, mods, testing

SEED = 1818
SLOPES = np.array([0.3, 0.1])


def wobble(score, b, h, q_idx, kv_idx):
    """A user's nonlinear score mod, differentiated by complex steps."""
    return score + 0.5 * np.sin(score) + 0.02 * (kv_idx - q_idx)


def float32_kernel(q, k, v, d_out, mask_mod, score_mod):
    """Dense attention computed in float32, forward and backward, by hand."""
    f32 = np.float32
    q, k, v, d_out = (np.asarray(a, f32) for a in (q, k, v, d_out))
    scale = f32(1 / np.sqrt(q.shape[-1]))
    scores = (q @ np.swapaxes(k, -1, -2)) * scale
    grids = mods.index_grids(
        scores.shape[:-2], np.arange(scores.shape[-2]), np.arange(scores.shape[-1])
    )
    given = scores.astype(np.float64)
    logits = score_mod(given, *grids).astype(f32)
    allowed = np.broadcast_to(mask_mod(*grids), logits.shape)
    logits = np.where(allowed, logits, -np.inf).astype(f32)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    out = p @ v
    lse = (logits.max(-1) + np.log(e.sum(-1))).astype(f32)
    dp = d_out @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    slope = mods.score_mod_derivative(score_mod, given, grids, "score_mod")
    ds = (ds * slope.astype(f32)).astype(f32)
    dq = (ds @ k) * scale
    dk = (np.swapaxes(ds, -1, -2) @ q) * scale
    dv = np.swapaxes(p, -1, -2) @ d_out
    return out, lse, (dq, dk, dv)


@pytest.fixture
def problem():
    rng = np.random.default_rng(SEED)
    q, k, v, d_out = (
        rng.standard_normal((2, 2, 24, 8)).astype(np.float32) for _ in range(4)
    )
    return q * 2, k, v, d_out


def judge(check, problem, out, grads, mask_mod, score_mod, **options):
    """check (a testing function) on a kernel's out and grads for the problem."""
    q, k, v, d_out = problem
    return check(
        out,
        q,
        k,
        v,
        grad_out=d_out,
        grads=grads,
        mask_mod=mask_mod,
        score_mod=score_mod,
        **options,
    )


@pytest.mark.parametrize(
    "score_mod",
    [wobble, mods.alibi(SLOPES), mods.softcap(1.5)],
    ids=["wobble", "alibi", "softcap"],
)
def test_a_correct_float32_kernel_with_mods_passes_forward_and_backward(
    problem, score_mod
):
    q, k, v, d_out = problem
    mask_mod = mods.document(np.repeat([0, 1, 2], 8), mods.causal())
    out, lse, grads = float32_kernel(q, k, v, d_out, mask_mod, score_mod)
    verdict = judge(
        testing.assert_attention_close,
        problem,
        out,
        grads,
        mask_mod,
        score_mod,
        lse=lse,
    )
    assert [c.name for c in verdict] == ["out", "lse", "dq", "dk", "dv"]
    assert verdict[0].rule == "bound"


def test_a_kernel_that_forgets_the_score_mods_slope_fails(problem):
    q, k, v, d_out = problem
    mask_mod = mods.causal()
    out, _, (dq, dk, dv) = float32_kernel(q, k, v, d_out, mask_mod, wobble)
    # The same kernel, but its backward drops d wobble / d score.
    wrong = float32_kernel(
        q,
        k,
        v,
        d_out,
        mask_mod,
        mods.with_derivative(wobble, lambda s, b, h, i, j: np.ones_like(s)),
    )[2]
    verdict = judge(
        testing.check_attention, problem, out, wrong, mask_mod, wobble, diagnose=False
    )
    assert verdict[0].passed
    assert not verdict[1].passed  # dq
    good = judge(testing.check_attention, problem, out, (dq, dk, dv), mask_mod, wobble)
    assert good.passed


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_a_kernel_that_applies_the_score_mod_wrongly_fails(problem, dtype):
    q, k, v, _ = (a.astype(dtype) for a in problem)
    alibi = mods.alibi(SLOPES)
    flipped = mods.alibi(-SLOPES)
    right = attention(q, k, v, is_causal=True, score_mod=alibi).astype(dtype)
    wrong = attention(q, k, v, is_causal=True, score_mod=flipped).astype(dtype)
    assert testing.check_attention(
        right, q, k, v, is_causal=True, score_mod=alibi
    ).passed
    verdict = testing.check_attention(
        wrong, q, k, v, is_causal=True, score_mod=alibi, diagnose=False
    )
    assert not verdict.passed
    assert verdict[0].rule == ("flash" if dtype == np.float16 else "bound")


def test_the_naive_emulation_applies_mods_and_keeps_b_and_h_in_pieces(monkeypatch):
    """FlashAttention's rule cuts large problems into pieces: a mod still sees
    the batch entries and heads of the whole problem."""
    rng = np.random.default_rng(SEED)
    q, k, v, d_out = (
        rng.standard_normal((3, 2, 16, 4)).astype(np.float16) for _ in range(4)
    )

    def per_entry(score, b, h, q_idx, kv_idx):
        return score * (1.0 + 0.25 * b + 0.5 * h)

    def odd_keys(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & ((kv_idx + b) % 2 == 0) | (kv_idx == 0)

    options = {"score_mod": per_entry, "mask_mod": odd_keys}
    whole = testing.naive_attention(q, k, v, "float16", **options)
    np.testing.assert_allclose(whole, attention(q, k, v, **options), atol=3e-3)
    monkeypatch.setattr(testing, "_NAIVE_CHUNK_ELEMENTS", 16)
    out = attention(q, k, v, **options).astype(np.float16)
    grads = [
        g.astype(np.float16) for g in attention_backward(q, k, v, d_out, **options)[:3]
    ]
    verdict = testing.assert_attention_close(
        out, q, k, v, grad_out=d_out, grads=grads, **options
    )
    assert verdict[0].rule == "flash"
    assert verdict[0].factor == 3.0  # a score mod counts as a soft-cap


def packed(rng, q_lens, k_slots, dtype=np.float32):
    cu_q = np.concatenate([[0], np.cumsum(q_lens)])
    cu_k = np.concatenate([[0], np.cumsum(k_slots)])
    q = rng.standard_normal((cu_q[-1], 4, 8)).astype(dtype)
    k, v = (rng.standard_normal((cu_k[-1], 2, 8)).astype(dtype) for _ in range(2))
    d_out = rng.standard_normal(q.shape).astype(dtype)
    return q, k, v, d_out, cu_q, cu_k


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_packed_batches_are_judged_sequence_by_sequence(dtype):
    rng = np.random.default_rng(SEED)
    q, k, v, d_out, cu_q, cu_k = packed(rng, [5, 0, 3, 9], [6, 2, 3, 9], dtype)
    options = {
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
        "seqused_k": np.array([6, 2, 2, 9]),
        "key_leftpad": np.array([1, 0, 0, 0]),
        "is_causal": True,
        "align": "bottom_right",
        "layout": "bshd",
        "score_mod": mods.softcap(2.0),
        "empty_rows": "zero",
    }
    out, lse = attention(q, k, v, return_lse=True, **options)
    g = attention_backward(q, k, v, d_out, **options)
    dk = g.dk.astype(dtype)
    dk[10] = np.nan  # sequence 2 uses keys 8 and 9 of its slot 8-10: 10 is not judged
    verdict = testing.assert_attention_close(
        out.astype(dtype),
        q,
        k,
        v,
        lse=lse.astype(np.float32),
        grad_out=d_out,
        grads=(g.dq.astype(dtype), dk, g.dv.astype(dtype)),
        **options,
    )
    assert [c.name for c in verdict] == ["out", "lse", "dq", "dk", "dv"]
    # A kernel aligned to the top left: only sequence 2 has more queries than
    # keys, so only its rows move, and the message names it as batch entry 2.
    slip = attention(q, k, v, **{**options, "align": "top_left"}).astype(dtype)
    verdict = testing.check_attention(slip, q, k, v, **options)
    assert not verdict.passed
    assert "in batch entry 2, heads 0-3, query rows 0-1" in verdict.message
    assert "align='top_left'" in verdict.message


def test_packed_lse_and_grads_must_be_packed():
    rng = np.random.default_rng(SEED)
    q, k, v, _, cu_q, cu_k = packed(rng, [2, 3], [2, 3])
    options = {"cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "layout": "bshd"}
    out, lse = attention(q, k, v, return_lse=True, **options)
    with pytest.raises(ValueError, match=r"lse of a packed batch must have shape"):
        testing.check_attention(out.astype(np.float32), q, k, v, lse=lse.T, **options)
    with pytest.raises(ValueError, match="dscore_mod"):
        testing.check_attention(
            out,
            q,
            k,
            v,
            grad_out=out,
            grads={"dq": q, "dscore_mod": {"slopes": SLOPES}},
            **options,
        )


def attention_ref_leftpad(q, k, v, key_leftpad, key_padding_mask, window):
    """attention_ref's path with key_leftpad (flash_attn/utils/testing.py:
    159-192, 297-300, 329-349 at flash-attention 0251105a), in NumPy, for
    (batch, seqlen, heads, dim) inputs and a window (left, right), None open."""
    n_q, n_k = q.shape[1], k.shape[1]
    scores = np.einsum("bthd,bshd->bhts", q / np.sqrt(q.shape[-1]), k)
    scores = np.where(key_padding_mask[:, None, None, :], scores, -np.inf)
    left, right = window
    if left is not None or right is not None:
        row = np.arange(n_q)[:, None]
        col = np.arange(n_k)
        lp = key_leftpad.reshape(-1, 1, 1, 1)
        col = np.where(col >= lp, col - lp, 2**32)
        sk = key_padding_mask.sum(-1).reshape(-1, 1, 1, 1)
        if left is None:
            masked = col > row + sk - n_q + right
        else:
            reach = row + sk - n_q + (right if right is not None else 2**40)
            masked = (col > np.minimum(reach, sk)) | (col < row + sk - n_q - left)
        scores = np.where(masked, -np.inf, scores)
    top = np.max(scores, axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(scores - top)
    norm = e.sum(-1, keepdims=True)
    weights = e / np.where(norm == 0, 1.0, norm)
    return np.einsum("bhts,bshd->bthd", weights, v)


@pytest.mark.parametrize(
    ("causal", "window_size"),
    [(False, (-1, -1)), (True, (-1, -1)), (False, (2, 1)), (True, (3, -1))],
)
def test_flash_options_key_leftpad_means_what_attention_ref_means(causal, window_size):
    rng = np.random.default_rng(SEED)
    b, n_q, n_k = 3, 4, 9
    q = rng.standard_normal((b, n_q, 2, 5))
    k, v = rng.standard_normal((2, b, n_k, 2, 5))
    lp = np.array([0, 2, 5])
    cache_seqlens = np.array([9, 6, 9])
    arange = np.arange(n_k)
    kpad = (arange < cache_seqlens[:, None]) & (arange >= lp[:, None])
    window = tuple(None if w == -1 else w for w in window_size)
    if causal:
        window = (window[0], 0)
    expected = attention_ref_leftpad(q, k, v, lp, kpad, window)
    options = testing.flash_options(
        causal=causal, window_size=window_size, key_leftpad=lp, key_padding_mask=kpad
    )
    out = attention(q, k, v, layout="bshd", **options)
    np.testing.assert_allclose(out, expected, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="key_leftpad needs the key_padding_mask"):
        testing.flash_options(key_leftpad=lp)
