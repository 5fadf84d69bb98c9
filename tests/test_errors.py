"""Bad input stops with a TypeError or ValueError that names what is wrong."""

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import attention, causal_mask, entropy, example, tiled_attention

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
        sdpa_ref.score_std(0)
    with pytest.raises(ValueError, match="correlation must lie in"):
        sdpa_ref.dot_product_std(8, correlation=1.5)
    with pytest.raises(ValueError, match=r"std must be a number or have shape \(8,\)"):
        sdpa_ref.sample_dot_products(8, 10, std=np.ones(3))
