"""flash_options: FlashAttention's attention_ref arguments, as sdpa_ref options.

The expected values come from the line-by-line NumPy port of attention_ref in
tests/test_flash_semantics.py; nothing of sdpa_ref builds them.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdpa_ref import attention, kernels
from sdpa_ref.testing import assert_attention_close, flash_options
from tests.oracle.strategies import gaussian_inputs, gqa_sizes, optional

_spec = importlib.util.spec_from_file_location(
    "flash_semantics", Path(__file__).with_name("test_flash_semantics.py")
)
flash_semantics = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flash_semantics)


def padding(draw, rng, b, n):
    """A (b, n) padding mask: none, at the end, at the start, or anywhere."""
    kind = draw(st.sampled_from(["end", "start", "anywhere"]))
    if kind == "end":
        return np.arange(n) < rng.integers(0, n + 1, size=b)[:, None]
    if kind == "start":
        return np.arange(n) >= rng.integers(0, n + 1, size=b)[:, None]
    return rng.random((b, n)) < 0.7


@st.composite
def flash_arguments(draw):
    """attention_ref's arguments (kernels' -1 included) and random inputs."""
    rng, (b, h_kv, h, n_q, n_k, d) = gqa_sizes(
        draw, b=3, h_kv=2, groups=2, n_q=10, n_k=10, d=4
    )
    unbounded = st.sampled_from([None, -1])
    kwargs = {}
    kind = draw(st.sampled_from(["none", "causal", "window", "left", "causal_left"]))
    if kind == "causal":
        kwargs["causal"] = True
    elif kind == "causal_left":
        kwargs["causal"] = True
        kwargs["window_size"] = (draw(st.integers(0, 10)), draw(unbounded))
    elif kind == "window":
        kwargs["window_size"] = (
            draw(st.one_of(unbounded, st.integers(0, 10))),
            draw(st.integers(0, 10)),
        )
    elif kind == "left":
        kwargs["window_size"] = (draw(st.integers(0, 10)), draw(unbounded))
    kwargs |= optional(
        draw,
        {
            "sink_token_length": st.integers(1, 3),
            "attention_chunk": st.integers(1, 5),
            "softcap": st.floats(0.5, 5.0),
            "learnable_sink": lambda: rng.normal(size=h),
            "attn_bias": lambda: rng.normal(size=(b, h, n_q, n_k)),
        },
    )
    if draw(st.booleans()):
        p = draw(st.floats(0.05, 0.9))
        kwargs["dropout_p"] = p
        kwargs["dropout_mask"] = rng.random((b, h, n_q, n_k)) > p
    if draw(st.booleans()):
        kwargs["query_padding_mask"] = padding(draw, rng, b, n_q)
        kwargs["key_padding_mask"] = padding(draw, rng, b, n_k)
    q, k, v = gaussian_inputs(rng, (b, n_q, h, d), (b, n_k, h_kv, d))
    return q, k, v, kwargs


def as_reference(kwargs):
    """The same arguments for the port, which writes None for an open side."""
    ref = dict(kwargs)
    if "window_size" in ref:
        ref["window_size"] = tuple(
            None if side in (None, -1) else side for side in ref["window_size"]
        )
    if ref.get("causal") and "window_size" in ref:
        ref["window_size"] = (ref["window_size"][0], 0)
    return ref


@pytest.mark.slow
@settings(max_examples=300)
@given(flash_arguments())
def test_flash_options_mean_what_attention_ref_means(args):
    """Output and weights to 1e-12, padding at the end, at the start or anywhere.

    attention_ref leaves NaN in a real query's row when its window holds no
    real key (the key padding is only zeroed afterwards); sdpa_ref gives such a
    row 0, as the kernels do. Those rows are compared as 0.
    """
    q, k, v, kwargs = args
    expected_out, expected_weights = flash_semantics.attention_ref(
        q, k, v, **as_reference(kwargs)
    )
    heads_first = (np.swapaxes(a, 1, 2) for a in (q, k, v))
    out, weights = attention(
        *heads_first, return_weights=True, **flash_options(**kwargs)
    )
    nan_rows = np.isnan(expected_weights).any(axis=-1)
    np.testing.assert_allclose(
        weights, np.where(nan_rows[..., None], 0.0, expected_weights), atol=1e-12
    )
    expected_out = np.swapaxes(expected_out, 1, 2)
    np.testing.assert_allclose(
        out, np.where(nan_rows[..., None], 0.0, expected_out), atol=1e-12, rtol=0
    )


def test_the_issue_example_ports_a_flash_attention_test():
    """assert_attention_close(out, q, k, v, layout="bshd", **flash_options(...))."""
    rng = np.random.default_rng(6)
    q, k, v = (
        rng.standard_normal((2, n, 4, 32)).astype(np.float32) for n in (48, 80, 80)
    )  # FlashAttention's (batch, seqlen, nheads, headdim)
    heads_first = [np.swapaxes(a, 1, 2) for a in (q, k, v)]
    out, _ = kernels.blocked_attention(
        *heads_first, is_causal=True, window=(3, None), align="bottom_right"
    )
    out = np.swapaxes(out, 1, 2)
    assert_attention_close(
        out, q, k, v, layout="bshd", **flash_options(causal=True, window_size=(3, -1))
    )
    with pytest.raises(AssertionError, match="passes with window=\\(3, 0\\)"):
        assert_attention_close(
            out,
            q,
            k,
            v,
            layout="bshd",
            **flash_options(causal=True, window_size=(2, -1)),
        )


def test_each_name_and_convention():
    assert flash_options() == {"align": "bottom_right", "empty_rows": "zero"}
    causal = flash_options(causal=True, window_size=(5, 7))
    assert causal["is_causal"] is True
    assert causal["window"] == (5, None)  # the right bound is clamped to 0
    assert flash_options(window_size=(-1, 2))["window"] == (None, 2)
    assert "window" not in flash_options(window_size=(-1, -1))
    assert "softcap" not in flash_options(softcap=0.0)
    assert flash_options(softcap=30.0)["softcap"] == 30.0
    assert "chunk" not in flash_options(attention_chunk=0)
    assert flash_options(attention_chunk=8)["chunk"] == 8
    # sink tokens count only with a left bound, as in construct_local_mask.
    assert "sink_tokens" not in flash_options(causal=True, sink_token_length=4)
    assert flash_options(window_size=(8, 0), sink_token_length=4)["sink_tokens"] == 4
    assert flash_options(softmax_scale=0.125)["scale"] == 0.125
    sink = flash_options(learnable_sink=np.array([0.5, 1.0]))["sink_logits"]
    np.testing.assert_array_equal(sink, [0.5, 1.0])


def test_padding_masks_become_lengths_or_a_mask():
    end = np.array([[True, True, False], [True, False, False]])
    start = end[:, ::-1]
    lengths = flash_options(key_padding_mask=end, query_padding_mask=end)
    np.testing.assert_array_equal(lengths["k_lengths"], [2, 1])
    np.testing.assert_array_equal(lengths["q_lengths"], [2, 1])
    left = flash_options(key_padding_mask=start)
    assert left["mask"].shape == (2, 1, 1, 3)
    np.testing.assert_array_equal(left["mask"][:, 0, 0], start)
    with_bias = flash_options(key_padding_mask=start, attn_bias=np.zeros((2, 1, 3, 3)))
    assert np.isneginf(with_bias["mask"][0, 0, :, 0]).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window_size": (-2, 0)}, "window_size's left bound"),
        ({"window_size": (1, 2, 3)}, "window_size must be a pair"),
        ({"softcap": -1.0}, "softcap must be >= 0"),
        ({"key_padding_mask": np.ones(3, bool)}, "boolean \\(batch, seqlen\\)"),
        (
            {"causal": True, "key_padding_mask": np.array([[False, True]])},
            "needs both query_padding_mask and key_padding_mask",
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        flash_options(**kwargs)
