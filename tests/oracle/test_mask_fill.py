"""The masks page's float16 note: what adding finfo(dtype).min does to a row."""

import numpy as np
import pytest

from sdpa_ref import precision

FLOAT16 = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
ALL_FLOAT16 = np.concatenate([-FLOAT16[::-1], FLOAT16])  # every finite float16


def test_float16_regimes_are_sixteen_and_thirty_two():
    assert precision.min_fill_regimes("float16") == {
        "fill": -65504.0,
        "moves_from": 16.0,
        "step": 32.0,
        "overflows_from": -16.0,
    }


def test_scores_below_sixteen_in_size_leave_the_float16_fill_alone():
    small = ALL_FLOAT16[np.abs(ALL_FLOAT16) < 16]
    assert small.size > 30_000  # most float16 numbers, tiny ones included
    np.testing.assert_array_equal(precision.min_fill_logits(small, "float16"), -65504)


def test_scores_of_sixteen_and_more_move_the_logit_up_in_steps_of_thirty_two():
    # Up to 32736 the logit stays below -32768, where float16 numbers lie 32 apart.
    large = ALL_FLOAT16[(ALL_FLOAT16 >= 16) & (ALL_FLOAT16 <= 32736)]
    moved = precision.min_fill_logits(large, "float16") + 65504
    assert (moved >= 32).all()
    np.testing.assert_array_equal(moved % 32, 0)
    assert set(moved[large <= 48]) == {32.0}


def test_scores_of_minus_sixteen_and_less_overflow_to_minus_infinity():
    negative = ALL_FLOAT16[ALL_FLOAT16 <= -16]
    assert np.isneginf(precision.min_fill_logits(negative, "float16")).all()


def test_a_float16_row_stays_even_only_while_every_score_is_small():
    rng = np.random.default_rng(0)
    small = rng.uniform(-15.9, 15.9, size=(50, 7))
    weights = precision.min_fill_weights(small, "float16")
    assert (weights == weights[:, :1]).all()  # equal within every row
    np.testing.assert_allclose(weights, 1 / 7, rtol=1e-6)  # float32's 1/7
    # One score of 16 or more takes (almost) all the weight: e^32 to one.
    tilted = precision.min_fill_weights([20.0, 3.0, -2.0], "float16")
    assert tilted[0] > 1 - 1e-13
    # Scores of -16 or less drop out; the rest share the weight evenly.
    np.testing.assert_array_equal(
        precision.min_fill_weights([-16.0, 3.0, -2.0], "float16"), [0, 0.5, 0.5]
    )


def test_a_float16_row_of_scores_all_at_or_below_minus_sixteen_is_nan():
    assert np.isnan(precision.min_fill_weights([-16.0, -40.0, -1e4], "float16")).all()
    assert not np.isnan(precision.min_fill_weights([-16.0, -15.9], "float16")).any()


@pytest.mark.parametrize(("dtype", "at_least"), [("bfloat16", 1e35), ("float32", 1e30)])
def test_in_wider_types_no_realistic_score_moves_the_fill(dtype, at_least):
    regimes = precision.min_fill_regimes(dtype)
    assert regimes["moves_from"] > at_least
    assert regimes["overflows_from"] < -at_least
    scores = np.array([-1e4, -16.0, 0.0, 16.0, 1e4])
    np.testing.assert_array_equal(
        precision.min_fill_logits(scores, dtype), regimes["fill"]
    )
    np.testing.assert_allclose(
        precision.min_fill_weights(scores, dtype), 0.2, rtol=1e-6
    )


def test_an_unknown_dtype_is_named():
    with pytest.raises(ValueError, match="dtype must be one of"):
        precision.min_fill_logits([0.0], "float8")
