"""The one table of scale choices, and the modules that spell it their way."""

import numpy as np
import pytest

from sdpa_ref import example, scales, training, variants

#: Each entry's two spellings, in the table's order.
SPELLINGS = [
    ("none", "none"),
    ("sqrt", "1/√d_k"),
    ("linear", "1/d_k"),
    ("cosine", "QK-norm"),
    ("rmsnorm", "RMSNorm + 1/√d_k"),
]


def test_the_table_spells_each_choice_twice():
    assert list(zip(scales.NAMES, scales.LABELS, strict=True)) == SPELLINGS
    assert scales.FIXED == ("none", "sqrt", "linear")
    for name, label in SPELLINGS:
        assert scales.lookup(name) is scales.lookup(label)


def test_the_modules_spellings_come_from_the_table():
    assert training.SCALES == ("sqrt", "none", "linear")
    assert variants.SCALE_CHOICES == scales.LABELS
    assert variants.QK_NORM_GAIN == scales.QK_NORM_GAIN == 4.0
    assert variants.scaled_scores is scales.scaled_scores
    # Documented once, in sdpa_ref.scales; the variants page's example
    # still calls scaled_scores through sdpa_ref.variants.
    assert not {"scale_factor"} & set(training.__all__)
    assert not {"scaled_scores", "rms_normalise"} & set(variants.__all__)


@pytest.mark.parametrize(
    ("name", "label", "factor"),
    [("none", "none", 1.0), ("sqrt", "1/√d_k", 0.125), ("linear", "1/d_k", 1 / 64)],
)
def test_the_factor_at_width_64(name, label, factor):
    assert scales.scale_factor(name, 64) == factor
    assert scales.scale_factor(label, 64) == factor


def test_the_factors_at_other_widths():
    assert scales.scale_factor("sqrt", 256) == 0.0625
    assert scales.scale_factor("linear", 5) == 0.2
    assert scales.scale_factor("sqrt", 2) == 1 / np.sqrt(2)


@pytest.mark.parametrize("scale", ["cosine", "QK-norm", "rmsnorm", "RMSNorm + 1/√d_k"])
def test_qk_norm_has_no_single_factor(scale):
    with pytest.raises(ValueError, match="normalises q and k"):
        scales.scale_factor(scale, 64)
    with pytest.raises(ValueError, match="normalises q and k"):
        training.train(16, scale, seed=0, steps=1)


#: Width 4: q·k = [8, 2], |q| = 2, |k| = [4, √2], so cos(q, k) = [1, 1/√2].
Q = np.array([[1.0, 1.0, 1.0, 1.0]])
K = np.array([[2.0, 2.0, 2.0, 2.0], [1.0, 1.0, 0.0, 0.0]])
BY_HAND = {
    "none": [[8.0, 2.0]],
    "sqrt": [[4.0, 1.0]],
    "linear": [[2.0, 0.5]],
    "cosine": [[4.0, 2.0 * np.sqrt(2.0)]],  # the gain, 4, times the cosine
    "rmsnorm": [[2.0, np.sqrt(2.0)]],  # √d_k = 2 times the cosine
}


@pytest.mark.parametrize(("name", "label"), SPELLINGS)
def test_each_choice_scores_as_worked_by_hand(name, label):
    by_name = scales.scaled_scores(Q, K, name)
    np.testing.assert_allclose(by_name, BY_HAND[name], rtol=1e-15)
    np.testing.assert_array_equal(scales.scaled_scores(Q, K, label), by_name)


@pytest.mark.parametrize(("name", "label"), SPELLINGS)
def test_both_spellings_give_the_same_bits(name, label):
    rng = np.random.default_rng(11)
    q, k = rng.normal(size=(3, 2, 5, 9)), rng.normal(size=(3, 2, 7, 9))
    by_name = scales.scaled_scores(q, k, name, gain=2.5)
    assert by_name.shape == (3, 2, 5, 7)
    np.testing.assert_array_equal(scales.scaled_scores(q, k, label, gain=2.5), by_name)
    # A batch scores as its slices do.
    np.testing.assert_array_equal(
        by_name[1, 0], scales.scaled_scores(q[1, 0], k[1, 0], name, gain=2.5)
    )


@pytest.mark.parametrize("name", scales.FIXED)
def test_fixed_scores_are_the_factor_times_q_dot_k(name):
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(4, 64)), rng.normal(size=(6, 64))
    expected = scales.scale_factor(name, 64) * (q @ k.T)
    np.testing.assert_array_equal(scales.scaled_scores(q, k, name), expected)


def test_the_gain_moves_only_the_cosine_form():
    rng = np.random.default_rng(4)
    q, k = rng.normal(size=(2, 16)), rng.normal(size=(3, 16))
    cos = scales.unit_normalise(q) @ scales.unit_normalise(k).T
    np.testing.assert_allclose(
        scales.scaled_scores(q, k, "QK-norm", gain=2.5), 2.5 * cos
    )
    for name in ("none", "sqrt", "linear", "rmsnorm"):
        np.testing.assert_array_equal(
            scales.scaled_scores(q, k, name, gain=2.5), scales.scaled_scores(q, k, name)
        )
    np.testing.assert_allclose(scales.scaled_scores(q, k, "rmsnorm"), 4.0 * cos)


def test_an_unknown_scale_lists_both_spellings():
    message = (
        r"scale must be one of \('none', 'sqrt', 'linear', 'cosine', 'rmsnorm'\) "
        r"or their labels \('none', '1/√d_k', '1/d_k', 'QK-norm', "
        r"'RMSNorm \+ 1/√d_k'\), got 'half'"
    )
    with pytest.raises(ValueError, match=message):
        scales.scaled_scores(Q, K, "half")
    with pytest.raises(ValueError, match=message):
        scales.scale_factor("half", 64)
    with pytest.raises(ValueError, match="got None"):
        scales.lookup(None)
    with pytest.raises(ValueError, match="d_k must be at least 1"):
        scales.scale_factor("sqrt", 0)


def test_training_takes_either_spelling_of_its_scales():
    a = training.train(16, "sqrt", seed=0, steps=2)
    b = training.train(16, "1/√d_k", seed=0, steps=2)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_the_variants_entropies_take_either_spelling():
    q, k, _ = example.vectors(16)
    for name, label in SPELLINGS:
        np.testing.assert_array_equal(
            variants.scaled_scores(q[:1], k, name),
            variants.scaled_scores(q[:1], k, label),
        )


@pytest.mark.parametrize("normalise", [scales.unit_normalise, scales.rms_normalise])
def test_a_zero_vector_is_refused_not_turned_into_nan(normalise):
    x = np.ones((2, 3, 4))
    x[1, 2] = 0.0
    with pytest.raises(
        ValueError,
        match=r"x of shape \(2, 3, 4\) has a zero vector at \(1, 2\)",
    ):
        normalise(x)
    with pytest.raises(ValueError, match="zero vector"):
        scales.scaled_scores(np.zeros((1, 4)), np.ones((2, 4)), "QK-norm")


@pytest.mark.parametrize("size", [1e-200, 1e-160, 1e160, 1e200])
def test_huge_and_tiny_vectors_normalise_like_ordinary_ones(size):
    """Both normalisations ignore a vector's scale, also where squaring it would
    overflow or underflow in float64."""
    x = np.array([[3.0, 4.0], [1.0, 1.0]])
    np.testing.assert_allclose(
        scales.unit_normalise(size * x), scales.unit_normalise(x), rtol=1e-15
    )
    np.testing.assert_allclose(
        scales.rms_normalise(size * x), scales.rms_normalise(x), rtol=1e-15
    )


def test_a_vector_that_is_not_finite_is_refused():
    with pytest.raises(ValueError, match="x"):
        scales.unit_normalise(np.array([[np.inf, 1.0]]))


def test_scaled_scores_names_the_argument_it_refuses():
    with pytest.raises(
        ValueError, match=r"^k of shape \(2, 4\) has a zero vector at \(1,\)"
    ):
        scales.scaled_scores(
            np.ones((1, 4)), np.array([[1.0] * 4, [0.0] * 4]), "QK-norm"
        )
    with pytest.raises(ValueError, match=r"^q contains nan at index \(0, 1\)"):
        scales.scaled_scores(np.array([[1.0, np.nan]]), np.ones((1, 2)), "rmsnorm")
    with pytest.raises(
        ValueError, match=r"same width d_k, got shapes \(1, 2\) and \(1, 3\)"
    ):
        scales.scaled_scores(np.ones((1, 2)), np.ones((1, 3)), "sqrt")
    with pytest.raises(ValueError, match="no entries"):
        scales.unit_normalise(np.ones((2, 0)))
