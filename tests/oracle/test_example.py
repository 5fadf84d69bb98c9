"""The authored vectors behind the worked example and the figure."""

import numpy as np
import pytest

from sdpa_ref import attention, example, softmax
from sdpa_ref.spread import entropy


def test_widths_include_4_and_two_larger_up_to_256():
    assert 4 in example.WIDTHS
    assert len([w for w in example.WIDTHS if w > 4]) >= 2
    assert max(example.WIDTHS) >= 256


@pytest.mark.parametrize("width", example.WIDTHS)
def test_shapes(width):
    q, k, v = example.vectors(width)
    assert q.shape == (len(example.QUERY_NAMES), width)
    assert q.shape[0] >= 3
    assert k.shape == (len(example.KEY_NAMES), width)
    assert v.shape == (len(example.KEY_NAMES), 2)


def test_vectors_are_copies():
    q, _, _ = example.vectors(4)
    q[:] = 0
    assert example.raw_scores(4)[0, 0] == 4


@pytest.mark.parametrize("width", example.WIDTHS)
def test_raw_scores_grow_with_the_width(width):
    np.testing.assert_array_equal(
        example.raw_scores(width), example.raw_scores(4) * width / 4
    )


def test_each_query_teaches_its_case():
    raw = example.raw_scores(4)
    np.testing.assert_array_equal(raw[0], [4, 0, 2, -4])  # one dominant key
    np.testing.assert_array_equal(raw[1], [3, 1, 2, 2])  # K0 just ahead of a tie
    np.testing.assert_array_equal(raw[2], [-3, -1, 1, 3])  # evenly spaced
    np.testing.assert_array_equal(raw[3], [1, 1, 1, 1])  # all equal
    # All equal: uniform weights, ln 4 nats, at every width and scale.
    for width in example.WIDTHS:
        q, k, v = example.vectors(width)
        for scale in (1.0, None):
            _, w = attention(q[3:], k, v, scale=scale, return_weights=True)
            assert float(entropy(w[0])) == pytest.approx(np.log(4))


def test_near_tie_is_where_scaling_keeps_the_most_entropy():
    q, k, v = example.vectors(64)
    scaled = entropy(attention(q, k, v, return_weights=True)[1])
    raw = entropy(attention(q, k, v, scale=1.0, return_weights=True)[1])
    gains = (scaled - raw)[:3]
    assert gains.argmax() == 1
    assert float(entropy(softmax([3, 1, 2, 2]))) > float(
        entropy(softmax([4, 0, 2, -4]))
    )


# -- projections and head widths ------------------------------------------------


def test_projection_example_projects_each_token_row_by_row():
    p = example.projection_example()
    n, d_model = p["X"].shape
    assert (n, d_model) == (3, 4)
    for name in ("Q", "K", "V"):
        np.testing.assert_array_equal(p[name], p["X"] @ p[f"W_{name}"])
        # Row i of Q is token i's vector times W_Q: the rows of W_Q weighted
        # by the token's coordinates, as the formula page writes it out.
        for i in range(n):
            combination = sum(
                x * row for x, row in zip(p["X"][i], p[f"W_{name}"], strict=True)
            )
            np.testing.assert_array_equal(p[name][i], combination)
    np.testing.assert_array_equal(p["scores"], p["Q"] @ p["K"].T)
    # Integers a reader can check by hand, and three distinct projections.
    for a in p.values():
        np.testing.assert_array_equal(a, np.round(a))
    assert not np.array_equal(p["W_Q"], p["W_K"])
    assert not np.array_equal(p["W_K"], p["W_V"])
    assert not np.array_equal(p["Q"], p["K"])


def test_projection_example_returns_copies():
    p = example.projection_example()
    p["W_Q"][:] = 0
    p["X"][:] = 0
    again = example.projection_example()
    assert again["W_Q"].any()
    assert again["X"].any()


def test_gemma2_heads_are_not_an_even_split_of_the_model_width():
    # Gemma Team 2024, arXiv:2408.00118, Table 1: d_model, Num heads, Head size;
    # kv_heads from google/gemma_pytorch's num_key_value_heads.
    assert example.GEMMA2_SHAPES == {
        "Gemma 2 2B": {"d_model": 2304, "heads": 8, "kv_heads": 4, "head_width": 256},
        "Gemma 2 9B": {"d_model": 3584, "heads": 16, "kv_heads": 8, "head_width": 256},
        "Gemma 2 27B": {
            "d_model": 4608,
            "heads": 32,
            "kv_heads": 16,
            "head_width": 128,
        },
    }
    assert example.GEMMA2_ATTN_SOFTCAP == 50.0
    rows = {r["name"]: r for r in example.head_width_rows()}
    assert rows["Transformer"]["even_split"] == rows["Transformer"]["head_width"]
    assert rows["Transformer"]["concat_width"] == example.TRANSFORMER_D_MODEL
    expected = {
        "Gemma 2 2B": (288, 2048),
        "Gemma 2 9B": (224, 4096),
        "Gemma 2 27B": (144, 4096),
    }
    for name, (split, concat) in expected.items():
        r = rows[name]
        assert (r["even_split"], r["concat_width"]) == (split, concat)
        assert r["even_split"] != r["head_width"]
        assert r["concat_width"] != r["d_model"]


def test_gemma2_27b_divides_by_the_even_split_not_its_head_width():
    # google/gemma_pytorch, commit 014acb7, gemma/config.py, get_config_for_27b:
    # head_dim=128, query_pre_attn_scalar=144  # hidden_size / num_attention_heads
    assert example.GEMMA2_27B_QUERY_PRE_ATTN_SCALAR == 144
    shape = example.GEMMA2_SHAPES["Gemma 2 27B"]
    assert (
        example.head_width(shape["d_model"], shape["heads"])
        == example.GEMMA2_27B_QUERY_PRE_ATTN_SCALAR
    )
    assert example.scale_divisor(example.GEMMA2_27B_QUERY_PRE_ATTN_SCALAR) == 12.0
    assert example.scale_divisor(shape["head_width"]) == pytest.approx(
        11.3137, abs=1e-4
    )


def test_head_width_rows_checks_its_models():
    with pytest.raises(ValueError, match="divide"):
        example.head_width_rows({"odd": {"d_model": 10, "heads": 3, "head_width": 4}})
    with pytest.raises(ValueError, match="head_width"):
        example.head_width_rows({"bad": {"d_model": 8, "heads": 2, "head_width": 0}})
