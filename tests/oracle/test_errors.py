"""Bad input stops with a TypeError or ValueError that names what is wrong."""

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import attention, causal_mask, example, tiled_attention
from sdpa_ref.spread import entropy

Q = np.ones((3, 4))
K = np.ones((5, 4))
V = np.ones((5, 2))

BOTH = pytest.mark.parametrize("fn", [attention, tiled_attention])

VALUE_ERRORS = [
    ({"k": np.ones((5, 3))}, r"d_k = 4 and 3 \(q \(3, 4\), k \(5, 3\), v \(5, 2\)\)"),
    ({"v": np.ones((6, 2))}, r"same number of keys n_k on axis -2, got 5 and 6"),
    (
        {"mask": np.ones((3, 4), dtype=bool)},
        r"mask with shape \(3, 4\) does not broadcast .*\(3, 5\)",
    ),
    ({"mask": np.ones((2, 3, 5), dtype=bool)}, r"mask with shape \(2, 3, 5\)"),
    ({"mask": np.array([0.0, np.nan, 0, 0, 0])}, "not NaN or \\+inf"),
    ({"scale": 0.0}, "scale must be positive and finite, got 0.0"),
    ({"scale": -1.0}, "scale must be positive and finite, got -1.0"),
    ({"scale": float("inf")}, "scale must be positive and finite, got inf"),
    ({"scale": float("nan")}, "scale must be positive and finite, got nan"),
    ({"q": np.ones((3, 0)), "k": np.ones((5, 0))}, r"zero width, d_k = 0"),
    ({"v": np.ones((5, 0))}, r"v has zero width, d_v = 0"),
    ({"k": np.ones((0, 4)), "v": np.ones((0, 2))}, r"no keys, n_k = 0"),
    (
        {"empty_rows": "ignore"},
        r"empty_rows must be one of \('raise', 'zero', 'nan'\), got 'ignore'",
    ),
    ({"q": np.ones(4)}, r"q must have at least 2 dimension\(s\), but has shape \(4,\)"),
    ({"q": np.full((3, 4), np.nan)}, r"q contains nan at index \(0, 0\)"),
    ({"v": np.full((5, 2), np.inf)}, r"v contains inf at index \(0, 0\)"),
    (
        {
            "q": np.ones((2, 1, 3, 4)),
            "k": np.ones((3, 1, 5, 4)),
            "v": np.ones((3, 1, 5, 2)),
        },
        r"leading \(batch, head\) axes do not broadcast",
    ),
    (
        {
            "q": np.ones((1, 6, 3, 4)),
            "k": np.ones((1, 4, 5, 4)),
            "v": np.ones((1, 4, 5, 2)),
        },
        "q has 6 heads on axis -3 but k and v have 4",
    ),
    (
        {"q": np.ones((4, 3, 4)), "k": np.ones((2, 5, 4)), "v": np.ones((3, 5, 2))},
        "k and v must have the same number of heads on axis -3, got 2 and 3",
    ),
]

TYPE_ERRORS = [
    (
        {"q": np.ones((3, 4), dtype=complex)},
        "q must be real, but has complex dtype complex128",
    ),
    (
        {"k": np.array([["a"] * 4] * 5)},
        "k must be a real numeric array, but has dtype <U1",
    ),
    (
        {"v": np.ones((5, 2), dtype=bool)},
        "v must be a real numeric array, but has dtype bool",
    ),
    (
        {"mask": np.ones((3, 5), dtype=np.int64)},
        "mask must be boolean .* got dtype int64",
    ),
    ({"scale": "0.5"}, "scale must be None or a real number, got '0.5'"),
    ({"scale": True}, "scale must be None or a real number, got True"),
    ({"is_causal": "yes"}, "is_causal must be True or False"),
]


def call(fn, overrides):
    args = {"q": Q, "k": K, "v": V} | overrides
    return fn(args.pop("q"), args.pop("k"), args.pop("v"), **args)


@BOTH
@pytest.mark.parametrize(("overrides", "match"), VALUE_ERRORS)
def test_value_errors(fn, overrides, match):
    with pytest.raises(ValueError, match=match):
        call(fn, overrides)


@BOTH
@pytest.mark.parametrize(("overrides", "match"), TYPE_ERRORS)
def test_type_errors(fn, overrides, match):
    with pytest.raises(TypeError, match=match):
        call(fn, overrides)


@pytest.mark.parametrize(
    ("block_size", "error"), [(0, ValueError), (-3, ValueError), (2.0, TypeError)]
)
def test_block_size(block_size, error):
    with pytest.raises(error, match="block_size must be"):
        tiled_attention(Q, K, V, block_size=block_size)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([0.5, 0.6], "sum to 1 .* from 1.1 to 1.1"),
        ([1.5, -0.5], "nonnegative, found -0.5"),
        ([np.nan, 1.0], "finite"),
        (np.zeros((2, 0)), "no entries"),
    ],
)
def test_entropy_rejects_non_distributions(weights, match):
    with pytest.raises(ValueError, match=match):
        entropy(weights)


def test_causal_mask_arguments():
    with pytest.raises(ValueError, match="align must be one of"):
        causal_mask(2, 2, align="left")
    with pytest.raises(ValueError, match="n_q must be at least 0, got -1"):
        causal_mask(-1, 2)
    with pytest.raises(TypeError, match=r"n_k must be an integer, got 2\.5"):
        causal_mask(2, 2.5)


@pytest.mark.parametrize("width", [0, 3, 8, 512, True, "4"])
def test_unknown_width(width):
    with pytest.raises(ValueError, match=r"width must be one of \(4, 16, 64, 256\)"):
        example.vectors(width)


def test_random_model_arguments():
    with pytest.raises(ValueError, match="d_k must be at least 1, got 0"):
        sdpa_ref.random_model.score_std(0)
    with pytest.raises(ValueError, match="correlation must lie in"):
        sdpa_ref.random_model.dot_product_std(8, correlation=1.5)
    with pytest.raises(ValueError, match=r"std must be a number or have shape \(8,\)"):
        sdpa_ref.random_model.sample_dot_products(8, 10, std=np.ones(3))


Q4, K4, V4 = np.ones((2, 4, 3, 4)), np.ones((2, 2, 5, 4)), np.ones((2, 2, 5, 2))

OPTION_VALUE_ERRORS = [
    ({"align": "bottom-right"}, r"align must be one of \('top_left', 'bottom_right'\)"),
    ({"window": (-1, 0)}, r"window's left bound must be >= 0 or None .*got -1"),
    ({"window": (2, -1)}, r"window's right bound must be >= 0 or None .*got -1"),
    ({"window": (1, 2, 3)}, r"window must be a pair \(left, right\), got 3 values"),
    ({"is_causal": True, "window": (4, 2)}, r"is_causal=True means a right window"),
    ({"sink_tokens": 2}, r"sink_tokens=2 exempts keys .* there is none"),
    ({"sink_tokens": 2, "window": (None, 0)}, "there is none"),
    ({"sink_tokens": -1, "window": (1, 0)}, "sink_tokens must be at least 0"),
    ({"chunk": 0}, "chunk must be at least 1, got 0"),
    ({"softcap": 0.0}, "softcap must be positive and finite, got 0.0"),
    ({"softcap": -1.0}, "softcap must be positive and finite"),
    ({"softcap": float("nan")}, "softcap must be positive and finite, got nan"),
    ({"softcap": float("inf")}, "softcap must be positive and finite, got inf"),
    ({"sink_logits": np.zeros(2)}, r"sink_logits must have shape \(H,\) = \(4,\)"),
    ({"sink_logits": np.zeros((1, 4))}, r"got shape \(1, 4\)"),
    ({"sink_logits": np.array([0, 0, np.nan, 0])}, "sink_logits must be finite"),
    ({"q_lengths": np.array([3])}, r"q_lengths must have shape \(B,\) = \(2,\)"),
    ({"k_lengths": np.array([5, 6])}, r"k_lengths must lie in 0..5, got 6 at batch"),
    ({"q_lengths": np.array([-1, 2])}, r"q_lengths must lie in 0..3, got -1"),
    ({"dropout_p": 1.0, "dropout_mask": np.ones(5, bool)}, r"dropout_p must lie in"),
    ({"dropout_p": -0.1}, r"dropout_p must lie in \[0, 1\), got -0.1"),
    ({"dropout_p": 0.1}, "dropout_p=0.1 needs the dropout_mask"),
    ({"dropout_mask": np.ones(5, bool)}, "dropout_mask with dropout_p=0"),
    (
        {"dropout_p": 0.5, "dropout_mask": np.ones((3, 4), bool)},
        r"dropout_mask with shape \(3, 4\) does not broadcast",
    ),
]

OPTION_TYPE_ERRORS = [
    ({"window": 3}, r"window must be a pair \(left, right\), got 3"),
    ({"window": (1.5, 0)}, "window's left bound must be an integer"),
    ({"window": (True, 0)}, "window's left bound must be an integer"),
    ({"chunk": 2.0}, "chunk must be an integer"),
    ({"softcap": "30"}, "softcap must be None or a positive number"),
    ({"q_lengths": np.array([1.0, 2.0])}, "q_lengths must be an integer array"),
    ({"dropout_p": True}, "dropout_p must be a number"),
    (
        {"dropout_p": 0.5, "dropout_mask": np.ones(5)},
        "dropout_mask must be boolean .* float64",
    ),
    ({"sink_logits": ["a"] * 4}, "sink_logits must be a real numeric array"),
    ({"return_lse": 1}, "return_lse must be True or False"),
]


@BOTH
@pytest.mark.parametrize(("overrides", "match"), OPTION_VALUE_ERRORS)
def test_option_value_errors(fn, overrides, match):
    with pytest.raises(ValueError, match=match):
        fn(Q4, K4, V4, **overrides)


@BOTH
@pytest.mark.parametrize(("overrides", "match"), OPTION_TYPE_ERRORS)
def test_option_type_errors(fn, overrides, match):
    with pytest.raises(TypeError, match=match):
        fn(Q4, K4, V4, **overrides)


@BOTH
def test_lengths_need_4d_inputs(fn):
    with pytest.raises(ValueError, match=r"q_lengths needs 4-D inputs \(B, H, n, d\)"):
        fn(Q, K, V, q_lengths=np.array([1]))


@BOTH
def test_sinks_need_a_head_axis(fn):
    with pytest.raises(ValueError, match="sink_logits has one logit per query head"):
        fn(Q, K, V, sink_logits=np.zeros(1))


@BOTH
def test_unknown_option_is_a_type_error(fn):
    with pytest.raises(TypeError, match="window_size"):
        fn(Q, K, V, window_size=(1, 1))


def test_backward_arguments():
    from sdpa_ref import attention_backward, tiled_attention_backward

    out, lse = tiled_attention(Q, K, V, return_lse=True)
    with pytest.raises(ValueError, match=r"grad_out must have the output's shape"):
        attention_backward(Q, K, V, np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"out must have the output's shape"):
        tiled_attention_backward(Q, K, V, out[:2], out, lse)
    with pytest.raises(
        ValueError, match=r"lse must have the shape \(..., n_q\) = \(3,\)"
    ):
        tiled_attention_backward(Q, K, V, out, out, lse[:, None])
    with pytest.raises(ValueError, match="lse holds NaN"):
        tiled_attention_backward(Q, K, V, out, out, np.full(3, np.nan))
    with pytest.raises(ValueError, match="empty_rows='nan' has no gradient"):
        attention_backward(Q, K, V, out, empty_rows="nan")
    with pytest.raises(ValueError, match="block_size must be at least 1"):
        tiled_attention_backward(Q, K, V, out, out, lse, block_size=0)
    with pytest.raises(TypeError, match="grad_out must be a real numeric array"):
        attention_backward(Q, K, V, np.array([["a"]]))
    mask = np.array([[True] * 5, [False] * 5, [True] * 5])
    with pytest.raises(
        ValueError, match=r"query 1 \(batch index \(\)\) has no allowed"
    ):
        attention_backward(Q, K, V, out, mask=mask)
    out, lse = tiled_attention(Q, K, V, mask=mask, empty_rows="zero", return_lse=True)
    with pytest.raises(ValueError, match=r"query 1 .* has no allowed key"):
        tiled_attention_backward(Q, K, V, out, out, lse, mask=mask)
