"""The argument checks and mods that several functions now share."""

from __future__ import annotations

import numpy as np
import pytest

from sdpa_ref import mods
from sdpa_ref._checks import (
    nonnegative_float,
    quantile_levels,
    real_matrices,
    require_within,
)


def test_require_within_names_the_first_entry_outside_the_range() -> None:
    require_within(np.array([0, 3, 4]), 4, str)
    with pytest.raises(ValueError, match=r"^1$"):
        require_within(np.array([1, 5, -1]), 4, str)
    with pytest.raises(ValueError, match=r"^0$"):
        require_within(np.array([-1, 5]), 4, str)


def test_require_within_takes_one_bound_per_entry() -> None:
    require_within(np.array([2, 1]), np.array([2, 1]), str)
    with pytest.raises(ValueError, match=r"^entry 1 past 0$"):
        require_within(
            np.array([2, 1]), np.array([3, 0]), lambda i: f"entry {i} past 0"
        )


def test_real_matrices_converts_to_float64_and_formats_its_message() -> None:
    q, k, v = real_matrices([[1, 2]], [[3, 4]], [[5]], "{q} {k} {v}")
    assert all(x.dtype == np.float64 and x.ndim == 2 for x in (q, k, v))
    with pytest.raises(ValueError, match=r"^\(1, 1, 2\), \(1, 2\) and \(1, 1\)$"):
        real_matrices(np.ones((1, 1, 2)), [[3, 4]], [[5]], "{q}, {k} and {v}")
    with pytest.raises(ValueError, match="k must have at least 2 dimension"):
        real_matrices([[1, 2]], [3, 4], [[5]], "{q} {k} {v}")


@pytest.mark.parametrize("value", [-1, -0.5, np.inf, np.nan])
def test_nonnegative_float_refuses(value: float) -> None:
    with pytest.raises(ValueError, match=r"^std must be finite and nonnegative, got"):
        nonnegative_float(value, "std")


def test_nonnegative_float_returns_a_float() -> None:
    assert nonnegative_float(0, "std") == 0.0
    assert type(nonnegative_float(np.float32(2.5), "std")) is float


def test_quantile_levels() -> None:
    levels = quantile_levels((0, 0.5, 1))
    assert levels.dtype == np.float64
    assert levels.tolist() == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match=r"quantiles must lie in \[0, 1\]"):
        quantile_levels([0.5, 1.5])


def test_combined_masks_keep_pytorchs_names() -> None:
    both = mods.and_masks(mods.causal())
    either = mods.or_masks(mods.causal())
    assert (both.__name__, either.__name__) == ("and_mask", "or_mask")
    assert mods.create_mask(mods.and_masks(), None, None, 1, 2).all()
    assert not mods.create_mask(mods.or_masks(), None, None, 1, 2).any()
    with pytest.raises(TypeError, match=r"^or_masks takes mask mods; argument 1 is 3$"):
        mods.or_masks(mods.causal(), 3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mod", "text"),
    [
        (mods.alibi([0.5, 0.25]), "alibi(<(2,) slopes>)"),
        (
            mods.relative_position_bias([1.0, 2.0, 3.0]),
            "relative_position_bias(<(3,) table>)",
        ),
    ],
)
def test_learned_biases_have_slope_one_and_their_own_repr(
    mod: mods.ScoreMod, text: str
) -> None:
    assert repr(mod) == text
    grids = mods.index_grids((1, 2), np.arange(3), np.arange(4))
    score = np.zeros((1, 2, 3, 4))
    assert mod.derivative(score, *grids).tolist() == [[[[1.0]]]]  # type: ignore[attr-defined]
