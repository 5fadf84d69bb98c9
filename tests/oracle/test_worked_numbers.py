"""The text's worked numbers, each computed by sdpa_ref."""

import math

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import example


def test_q0_at_width_4_scores_and_scaled_scores():
    raw_scores = example.raw_scores(4)[0]
    np.testing.assert_array_equal(raw_scores, [4, 0, 2, -4])
    np.testing.assert_array_equal(raw_scores / math.sqrt(4), [2, 0, 1, -2])


def test_top_weight_falls_from_0_867_to_0_657():
    q, k, v = example.vectors(4)
    _, raw_weights = sdpa_ref.attention(q[:1], k, v, scale=1.0, return_weights=True)
    _, scaled_weights = sdpa_ref.attention(q[:1], k, v, return_weights=True)
    assert raw_weights[0, 0] == pytest.approx(0.8665613, abs=1e-7)
    assert scaled_weights[0, 0] == pytest.approx(0.6572330, abs=1e-7)


def test_entropies_0_444_and_0_888_nats():
    raw = sdpa_ref.spread.entropy(sdpa_ref.softmax([4, 0, 2, -4]))
    scaled = sdpa_ref.spread.entropy(sdpa_ref.softmax([2, 0, 1, -2]))
    assert round(float(raw), 3) == 0.444
    assert round(float(scaled), 3) == 0.888


def test_uniform_over_four_keys_is_ln_4():
    assert float(sdpa_ref.spread.entropy(np.full(4, 0.25))) == pytest.approx(
        math.log(4)
    )
    assert round(sdpa_ref.spread.max_entropy(4), 3) == 1.386


def test_width_512_standard_deviation_is_about_22_6():
    assert round(sdpa_ref.random_model.score_std(512), 1) == 22.6
    assert sdpa_ref.random_model.dot_product_std(512) == pytest.approx(math.sqrt(512))


def test_value_mixtures_of_q0_are_weighted_averages():
    q, k, v = example.vectors(4)
    out, w = sdpa_ref.attention(q[:1], k, v, return_weights=True)
    np.testing.assert_allclose(out, w @ v)
    # The scaled output is pulled away from K0's value towards the others.
    raw_out = sdpa_ref.attention(q[:1], k, v, scale=1.0)
    assert np.linalg.norm(raw_out - v[0]) < np.linalg.norm(out - v[0])
