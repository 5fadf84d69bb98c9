import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import softmax
from sdpa_ref.spread import softmax_jacobian, softmax_jacobian_norm

SEED = 3


def test_jacobian_matches_finite_differences():
    s = np.array([0.3, -1.2, 2.0, 0.1])
    w = softmax(s)
    eps = 1e-6
    numeric = np.stack(
        [(softmax(s + eps * e) - softmax(s - eps * e)) / (2 * eps) for e in np.eye(4)],
        axis=1,
    )
    np.testing.assert_allclose(softmax_jacobian(w), numeric, atol=1e-9)


def test_jacobian_norm_is_at_most_one_half_and_vanishes_when_saturated():
    rng = np.random.default_rng(SEED)
    w = softmax(rng.normal(size=(200, 5)) * 3)
    norms = softmax_jacobian_norm(w)
    assert (norms <= sdpa_ref.spread.JACOBIAN_NORM_CAP + 1e-12).all()
    assert softmax_jacobian_norm([0.5, 0.5]) == pytest.approx(0.5)
    # 2 e^-40 (1 - e^-40): accurate even though 1 - w_0 rounds to 0.
    assert softmax_jacobian_norm(softmax([40.0, 0.0])) == pytest.approx(
        2 * np.exp(-40), rel=1e-12
    )


def test_saturation_scaled_stays_below_unscaled():
    spreads = np.linspace(0, 10, 21)
    curves = sdpa_ref.spread.saturation([4, 0, 2, -4], spreads, d_k=64)
    assert (curves["top_weight_scaled"] <= curves["top_weight_raw"] + 1e-15).all()
    assert curves["top_weight_raw"][0] == pytest.approx(0.25)
    assert curves["top_weight_raw"][-1] > 0.999999
    # At spread 10 the runner-up trails by 20: norm about 2 e^-20.
    assert curves["jacobian_norm_raw"][-1] == pytest.approx(2 * np.exp(-20), rel=1e-6)
    # The norm peaks at a moderate spread; past the raw row's peak the scaled
    # row, whose spread is 8 times smaller, passes back more gradient.
    past_peak = spreads >= 2
    assert curves["jacobian_norm_raw"].argmax() < past_peak.argmax()
    scaled, raw = curves["jacobian_norm_scaled"], curves["jacobian_norm_raw"]
    assert (scaled[past_peak] > raw[past_peak]).all()


def test_attention_macs_and_bytes():
    assert sdpa_ref.cost.attention_macs(3, 5, 4, 2) == 3 * 5 * (4 + 2)
    assert sdpa_ref.cost.attention_macs(8, 8, 64, 64, heads=12) == 12 * 64 * 128
    assert sdpa_ref.cost.score_bytes(1024, 1024, heads=8, itemsize=2) == 16 * 2**20
    # Cost is quadratic in sequence length.
    assert sdpa_ref.cost.attention_macs(
        2048, 2048, 64, 64
    ) == 4 * sdpa_ref.cost.attention_macs(1024, 1024, 64, 64)


def test_kv_cache_shrinks_by_the_group_factor():
    mha = sdpa_ref.cost.kv_cache_bytes(8192, layers=32, kv_heads=32, head_dim=128)
    gqa = sdpa_ref.cost.kv_cache_bytes(8192, layers=32, kv_heads=8, head_dim=128)
    mqa = sdpa_ref.cost.kv_cache_bytes(8192, layers=32, kv_heads=1, head_dim=128)
    assert mha == 4 * gqa == 32 * mqa == 4 * 2**30


def test_model_score_bytes_multiplies_one_head_by_layers_and_heads():
    one = sdpa_ref.cost.score_bytes(2048, 2048, itemsize=2)
    assert sdpa_ref.cost.model_score_bytes(2048, layers=3, heads=5) == 15 * one
