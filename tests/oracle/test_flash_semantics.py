"""sdpa_ref's options mean what FlashAttention's reference says they mean.

``attention_ref``, ``construct_local_mask`` and ``construct_chunk_mask`` from
flash-attention's ``flash_attn/utils/testing.py`` (commit 0251105a), ported
line by line from torch to NumPy, in FlashAttention's layout (b, s, h, d),
float64. Nothing from sdpa_ref is used to build the expected values. The
comments give the original line numbers.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdpa_ref import attention, tiled_attention


def construct_local_mask(
    seqlen_q, seqlen_k, window_size, sink_token_length, qpad, kpad
):
    """True = masked out (testing.py:159-192), without key_leftpad."""
    row_idx = np.arange(seqlen_q)[:, None]
    col_idx = np.arange(seqlen_k)
    sk = seqlen_k if kpad is None else kpad.sum(-1).reshape(-1, 1, 1, 1)
    sq = seqlen_q if qpad is None else qpad.sum(-1).reshape(-1, 1, 1, 1)
    if window_size[0] is None:
        return col_idx > row_idx + sk - sq + window_size[1]
    sk = np.full_like(col_idx, seqlen_k) if kpad is None else sk
    right = np.inf if window_size[1] is None else window_size[1]
    return np.logical_or(
        col_idx > np.minimum(row_idx + sk - sq + right, sk),
        np.logical_and(
            col_idx < row_idx + sk - sq - window_size[0],
            col_idx >= sink_token_length,
        ),
    )


def construct_chunk_mask(seqlen_q, seqlen_k, attention_chunk, qpad, kpad):
    """True = masked out (testing.py:195-225), without key_leftpad."""
    row_idx = np.arange(seqlen_q)[:, None]
    col_idx = np.arange(seqlen_k)
    sk = seqlen_k if kpad is None else kpad.sum(-1).reshape(-1, 1, 1, 1)
    sq = seqlen_q if qpad is None else qpad.sum(-1).reshape(-1, 1, 1, 1)
    sk = np.full_like(col_idx, seqlen_k) if kpad is None else sk
    # torch's % on integer tensors is the floor remainder, as np.mod.
    col_limit_left_chunk = (
        row_idx + sk - sq - np.mod(row_idx + sk - sq, attention_chunk)
    )
    return np.logical_or(
        col_idx < col_limit_left_chunk,
        col_idx >= col_limit_left_chunk + attention_chunk,
    )


def attention_ref(  # noqa: PLR0912
    q,
    k,
    v,
    query_padding_mask=None,
    key_padding_mask=None,
    attn_bias=None,
    dropout_p=0.0,
    dropout_mask=None,
    causal=False,
    window_size=(None, None),
    attention_chunk=0,
    sink_token_length=0,
    learnable_sink=None,
    softcap=0.0,
):
    """testing.py:228-360 with upcast to float64 and no qv or descale."""
    if causal:
        window_size = (window_size[0], 0)
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    g = q.shape[2] // k.shape[2]
    k = np.repeat(k, g, axis=2)  # repeat "b s h d -> b s (h g) d"
    v = np.repeat(v, g, axis=2)
    d = q.shape[-1]
    softmax_scale = 1.0 / np.sqrt(d)
    scores = np.einsum("bthd,bshd->bhts", q * softmax_scale, k)
    if softcap > 0:
        scores = np.tanh(scores / softcap) * softcap
    if key_padding_mask is not None:
        scores = np.where(~key_padding_mask[:, None, None, :], -np.inf, scores)
    local_mask = None
    if window_size[0] is not None or window_size[1] is not None:
        local_mask = construct_local_mask(
            seqlen_q,
            seqlen_k,
            window_size,
            sink_token_length,
            query_padding_mask,
            key_padding_mask,
        )
    if attention_chunk > 0:
        chunk_mask = construct_chunk_mask(
            seqlen_q, seqlen_k, attention_chunk, query_padding_mask, key_padding_mask
        )
        local_mask = chunk_mask if local_mask is None else local_mask | chunk_mask
    if local_mask is not None:
        scores = np.where(local_mask, -np.inf, scores)
    if attn_bias is not None:
        scores = scores + attn_bias
    with np.errstate(invalid="ignore"):
        if learnable_sink is None:
            m = scores.max(-1, keepdims=True)
            e = np.exp(scores - m)
            attention = e / e.sum(-1, keepdims=True)
        else:
            logits_max = scores.max(-1, keepdims=True)
            sink = learnable_sink.reshape(-1, 1, 1)
            logits_or_sinks_max = np.maximum(sink, logits_max)
            unnormalized = np.exp(scores - logits_or_sinks_max)
            normalizer = unnormalized.sum(-1, keepdims=True) + np.exp(
                sink - logits_or_sinks_max
            )
            attention = unnormalized / normalizer
    if query_padding_mask is not None:
        attention = np.where(~query_padding_mask[:, None, :, None], 0.0, attention)
    if key_padding_mask is not None:
        attention = np.where(~key_padding_mask[:, None, None, :], 0.0, attention)
    if local_mask is not None:
        attention = np.where(local_mask.all(-1, keepdims=True), 0.0, attention)
    dropout_scaling = 1.0 / (1 - dropout_p)
    attention_drop = (
        attention if dropout_mask is None else np.where(dropout_mask, attention, 0.0)
    )
    output = np.einsum("bhts,bshd->bthd", attention_drop, v * dropout_scaling)
    if query_padding_mask is not None:
        output = np.where(~query_padding_mask[:, :, None, None], 0.0, output)
    return output, attention


def to_heads_first(x):
    return np.swapaxes(x, 1, 2)  # (b, s, h, d) -> (b, h, s, d)


@st.composite
def configurations(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    b = draw(st.integers(1, 3))
    h_kv = draw(st.integers(1, 2))
    h = h_kv * draw(st.integers(1, 3))
    n_q, n_k = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    d = draw(st.integers(1, 5))
    options = {}
    ref = {}
    kind = draw(st.sampled_from(["none", "causal", "window", "left_only"]))
    if kind == "causal":
        ref["causal"] = options["is_causal"] = True
    elif kind == "window":
        left = draw(st.one_of(st.none(), st.integers(0, 12)))
        right = draw(st.integers(0, 12))
        ref["window_size"] = options["window"] = (left, right)
    elif kind == "left_only":
        left = draw(st.integers(0, 12))
        ref["window_size"] = options["window"] = (left, None)
    if ref.get("window_size", (None,))[0] is not None and draw(st.booleans()):
        ref["sink_token_length"] = options["sink_tokens"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        ref["attention_chunk"] = options["chunk"] = draw(st.integers(1, 6))
    if draw(st.booleans()):
        ref["softcap"] = options["softcap"] = draw(st.floats(0.5, 5.0))
    if draw(st.booleans()):
        sink = rng.normal(size=h)
        options["sink_logits"] = ref["learnable_sink"] = sink
    if draw(st.booleans()):
        q_lengths = rng.integers(0, n_q + 1, size=b)
        options["q_lengths"] = q_lengths
        ref["query_padding_mask"] = np.arange(n_q) < q_lengths[:, None]
    if draw(st.booleans()):
        k_lengths = rng.integers(0, n_k + 1, size=b)
        options["k_lengths"] = k_lengths
        ref["key_padding_mask"] = np.arange(n_k) < k_lengths[:, None]
    if draw(st.booleans()):
        bias = rng.normal(size=(b, h, n_q, n_k))
        ref["attn_bias"] = options["mask"] = bias
    if draw(st.booleans()):
        p = draw(st.floats(0.05, 0.9))
        keep = rng.random((b, h, n_q, n_k)) > p
        ref["dropout_p"] = options["dropout_p"] = p
        ref["dropout_mask"] = options["dropout_mask"] = keep
    q = rng.normal(size=(b, n_q, h, d)) * 2
    k = rng.normal(size=(b, n_k, h_kv, d)) * 2
    v = rng.normal(size=(b, n_k, h_kv, d + 1))
    return q, k, v, options, ref


@pytest.mark.slow
@settings(max_examples=300)
@given(configurations(), st.integers(1, 13))
def test_every_option_matches_flash_attention_reference(config, block):
    q, k, v, options, ref = config
    expected_out, expected_weights = attention_ref(q, k, v, **ref)
    qh, kh, vh = (to_heads_first(x) for x in (q, k, v))
    options = options | {"align": "bottom_right", "empty_rows": "zero"}
    out, weights = attention(qh, kh, vh, return_weights=True, **options)
    np.testing.assert_allclose(out, to_heads_first(expected_out), rtol=0, atol=1e-12)
    np.testing.assert_allclose(weights, expected_weights, rtol=0, atol=1e-12)
    tiled = tiled_attention(qh, kh, vh, block_size=block, **options)
    np.testing.assert_allclose(tiled, out, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("n_q", "n_k", "window", "expected"),
    [
        # FlashAttention's decoding case: more keys than queries, bottom-right.
        (2, 4, (1, 0), [[0, 1, 1, 0], [0, 0, 1, 1]]),
        # More queries than keys: the first queries see nothing.
        (4, 2, (None, 0), [[0, 0], [0, 0], [1, 0], [1, 1]]),
    ],
)
def test_bottom_right_window_by_hand(n_q, n_k, window, expected):
    q, k, v = (
        np.zeros((1, 1, n_q, 2)),
        np.zeros((1, 1, n_k, 2)),
        np.ones((1, 1, n_k, 1)),
    )
    _, w = attention(
        q,
        k,
        v,
        window=window,
        align="bottom_right",
        empty_rows="zero",
        return_weights=True,
    )
    np.testing.assert_array_equal(w[0, 0] > 0, np.array(expected, bool))
