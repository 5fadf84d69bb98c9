"""sdpa_ref against SciPy's independent softmax and entropy."""

import numpy as np
import pytest
from scipy import special, stats

from sdpa_ref import softmax
from sdpa_ref.spread import entropy

SEED = 11


@pytest.mark.parametrize("shape", [(4,), (3, 5), (2, 3, 7)])
@pytest.mark.parametrize("spread", [0.1, 3.0, 80.0])
def test_softmax_matches_scipy(shape, spread):
    x = np.random.default_rng(SEED).normal(size=shape) * spread
    for axis in range(-len(shape), 0):
        np.testing.assert_allclose(
            softmax(x, axis=axis),
            special.softmax(x, axis=axis),
            rtol=1e-13,
            atol=1e-300,
        )


@pytest.mark.parametrize("n", [2, 4, 17])
def test_entropy_matches_scipy_in_nats(n):
    w = special.softmax(np.random.default_rng(SEED).normal(size=(6, n)) * 4, axis=-1)
    np.testing.assert_allclose(entropy(w), stats.entropy(w, axis=-1), rtol=1e-12)


def test_entropy_zero_weights_match_scipy():
    w = np.array([0.5, 0.0, 0.5])
    assert float(entropy(w)) == pytest.approx(stats.entropy(w))
