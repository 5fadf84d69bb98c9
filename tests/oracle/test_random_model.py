"""The square-root factor's random model, and what breaks it."""

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref.random_model import dot_product_mean, dot_product_std, sample_dot_products

N = 40_000


@pytest.mark.slow
@pytest.mark.parametrize("d_k", [1, 4, 64, 512])
def test_standard_model_has_std_sqrt_dk(d_k):
    assert dot_product_std(d_k) == pytest.approx(np.sqrt(d_k))
    samples = sample_dot_products(d_k, N)
    # Relative standard error of a sample std of q·k is sqrt(2 / N) here.
    assert samples.std() == pytest.approx(np.sqrt(d_k), rel=5 * np.sqrt(2 / N))
    assert abs(samples.mean()) < 5 * np.sqrt(d_k / N)


@pytest.mark.slow
def test_scaled_scores_have_unit_std_at_every_width():
    for d_k in (4, 64, 512):
        scaled = sample_dot_products(d_k, N) / np.sqrt(d_k)
        assert scaled.std() == pytest.approx(1.0, rel=0.04)


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [
        {"mean": 0.5},
        {"std": np.linspace(0.2, 2.0, 64)},
        {"correlation": 0.3},
        {"mean": 0.3, "std": 1.5, "correlation": 0.2},
    ],
)
def test_monte_carlo_agrees_with_the_exact_formula(model):
    samples = sample_dot_products(64, N, **model)
    assert samples.std() == pytest.approx(dot_product_std(64, **model), rel=0.05)
    assert samples.mean() == pytest.approx(
        dot_product_mean(64, **model), abs=0.2 + 0.05 * samples.std()
    )


@pytest.mark.slow
def test_correlated_coordinates_grow_like_dk():
    rho = 0.5
    for d in (64, 256, 1024):
        exact = np.sqrt(d + d * (d - 1) * rho**2)  # -> rho * d for large d
        assert dot_product_std(d, correlation=rho) == pytest.approx(exact)
    ratio = dot_product_std(4096, correlation=rho) / dot_product_std(
        1024, correlation=rho
    )
    assert ratio == pytest.approx(4.0, rel=5e-3)  # d, not sqrt(d): x4 per x4 width


def test_unequal_variances_change_the_std():
    std = np.r_[np.full(32, 0.5), np.full(32, 1.5)]  # mean variance 1.25
    expected = np.sqrt((std**4).sum())
    assert dot_product_std(64, std=std) == pytest.approx(expected)
    assert dot_product_std(64, std=std) > np.sqrt(64)


def test_nonzero_mean_shifts_every_score():
    assert dot_product_mean(64, mean=0.5) == pytest.approx(16.0)
    assert dot_product_std(64, mean=0.5) == pytest.approx(np.sqrt(64 * 1.5))


def test_samples_repeat_with_the_seed_and_differ_without_it():
    a = sample_dot_products(16, 100)
    np.testing.assert_array_equal(a, sample_dot_products(16, 100))
    assert not np.array_equal(a, sample_dot_products(16, 100, seed=1))


@pytest.mark.slow
def test_measured_score_std_tracks_sqrt_dk():
    widths = [4, 16, 64, 256, 512]
    measured = sdpa_ref.random_model.measured_score_std(widths, 20_000)
    np.testing.assert_allclose(measured, np.sqrt(widths), rtol=0.04)


def test_key_std_defaults_to_the_query_profile():
    std = np.linspace(0.5, 1.5, 32)
    assert dot_product_std(32, std=std, key_std=std) == dot_product_std(32, std=std)
    np.testing.assert_array_equal(
        sample_dot_products(32, 500, std=std, key_std=std),
        sample_dot_products(32, 500, std=std),
    )


def test_separate_key_variances_give_the_trace_formula():
    a = np.linspace(0.2, 1.8, 16)  # variances of q's coordinates
    b = a[::-1]  # keys vary most where queries vary least
    exact = dot_product_std(16, std=np.sqrt(a), key_std=np.sqrt(b))
    assert exact == pytest.approx(np.sqrt(a @ b))
    samples = sample_dot_products(16, N, std=np.sqrt(a), key_std=np.sqrt(b))
    assert samples.std() == pytest.approx(exact, rel=0.03)


def test_unequal_variance_model_uses_the_variance_profile():
    std = sdpa_ref.random_model.BROKEN_MODELS["variances spread from 0.1 to 1.9"]["std"]
    np.testing.assert_allclose(std(8) ** 2, np.linspace(0.1, 1.9, 8))
