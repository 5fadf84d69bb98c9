import numpy as np
import pytest

from sdpa_ref import softmax
from sdpa_ref.core import naive_softmax


def test_known_row():
    e = np.exp([2.0, 0.0, 1.0, -2.0])
    np.testing.assert_allclose(softmax([2, 0, 1, -2]), e / e.sum(), rtol=1e-15)


def test_axis_zero_normalises_columns():
    x = np.array([[1.0, 5.0], [3.0, 5.0]])
    w = softmax(x, axis=0)
    np.testing.assert_allclose(w.sum(axis=0), [1.0, 1.0])
    np.testing.assert_allclose(w[:, 1], [0.5, 0.5])


def test_minus_inf_entries_get_zero_weight():
    w = softmax([0.0, -np.inf, 0.0])
    np.testing.assert_array_equal(w, [0.5, 0.0, 0.5])


def test_precision_of_float32_input_is_kept():
    w = softmax(np.array([1.0, 2.0], dtype=np.float32))
    assert w.dtype == np.float32


def test_huge_logits_that_overflow_naively_stay_finite():
    x = np.array([1000.0, 999.0, -1000.0])
    w = softmax(x)
    assert np.isfinite(w).all()
    np.testing.assert_allclose(
        w[:2], [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1))]
    )
    assert np.isnan(naive_softmax(x)).any()


def test_naive_softmax_overflows_float16_past_about_11():
    assert np.isfinite(naive_softmax(np.array([11.0, 0.0], dtype=np.float16))).all()
    assert np.isnan(naive_softmax(np.array([11.2, 0.0], dtype=np.float16))).any()


@pytest.mark.parametrize(
    ("x", "match"),
    [
        ([0.0, np.nan], "NaN at index"),
        ([0.0, np.inf], r"\+inf"),
        ([[0.0, 1.0], [-np.inf, -np.inf]], r"no finite entry .* index \(1, 0\)"),
        (np.zeros((2, 0)), "no entries along axis"),
        (3.0, "at least 1 dimension"),
    ],
)
def test_rejected_values(x, match):
    with pytest.raises(ValueError, match=match):
        softmax(x)


@pytest.mark.parametrize(
    ("x", "match"),
    [
        ([1 + 2j, 0], "complex"),
        (["a", "b"], "dtype <U1"),
        ([True, False], "dtype bool"),
        ([[1.0, 2.0], [3.0]], "real numeric array"),
    ],
)
def test_rejected_kinds(x, match):
    with pytest.raises(TypeError, match=match):
        softmax(x)
