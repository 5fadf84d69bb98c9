"""The numbers and claims of the scaling page, checked against their definitions."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.backends.backend_agg import FigureCanvasAgg

import sdpa_ref
from figures import scaling
from sdpa_ref import random_model, spread

WIDE = 512

rows = st.lists(
    st.floats(-20, 20, allow_nan=False, allow_infinity=False), min_size=1, max_size=12
).map(np.array)


# --- the spread inside a row ---------------------------------------------------


def test_within_row_spread_of_the_nonzero_mean_model_at_width_512():
    model = sdpa_ref.random_model.BROKEN_MODELS["mean 0.5 instead of 0"]
    within = random_model.within_row_std(WIDE, **model)
    total = random_model.dot_product_std(WIDE, **model)
    assert f"{within:.1f}" == "25.3"
    assert f"{total:.1f}" == "27.7"
    # Closed forms: 1.25 d_k inside a row, 1.5 d_k over all pairs.
    assert within == pytest.approx(np.sqrt(1.25 * WIDE))
    assert total == pytest.approx(np.sqrt(1.5 * WIDE))


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [
        {"mean": 0.5},
        {"mean": 0.3, "correlation": 0.2},
        {"mean": 0.4, "std": np.linspace(0.5, 1.5, 16)},
        {
            "mean": 0.5,
            "std": random_model.variance_profile(16),
            "key_std": random_model.variance_profile(16, reverse=True),
        },
    ],
)
def test_within_row_spread_matches_simulated_rows(model):
    """Draw queries, give each a row of keys, average the rows' own variances."""
    d_k, n_rows, n_keys = 16, 2000, 400
    rng = np.random.default_rng(sdpa_ref.random_model.SEED)
    mean, rho = model.get("mean", 0.0), model.get("correlation", 0.0)
    std = np.broadcast_to(model.get("std", 1.0), (d_k,))
    key_std = np.broadcast_to(model.get("key_std", std), (d_k,))

    def draw(shape, scale):
        z = np.sqrt(1 - rho) * rng.standard_normal((*shape, d_k))
        z += np.sqrt(rho) * rng.standard_normal((*shape, 1))
        return mean + scale * z

    q = draw((n_rows,), std)
    k = draw((n_rows, n_keys), key_std)
    scores = np.einsum("rd,rkd->rk", q, k)
    within = np.sqrt(scores.var(axis=1, ddof=1).mean())
    total = scores.std()
    assert within == pytest.approx(random_model.within_row_std(d_k, **model), rel=0.03)
    assert total == pytest.approx(random_model.dot_product_std(d_k, **model), rel=0.05)


@given(
    d_k=st.integers(1, 12),
    mean=st.floats(-2, 2),
    correlation=st.floats(0, 1),
    scale=st.floats(0.1, 3),
)
def test_variance_over_all_pairs_is_within_rows_plus_the_row_shift(
    d_k, mean, correlation, scale
):
    kwargs = {"mean": mean, "std": scale, "correlation": correlation}
    corr = np.full((d_k, d_k), correlation)
    np.fill_diagonal(corr, 1.0)
    mu = np.full(d_k, mean)
    shift_variance = mu @ (scale**2 * corr) @ mu  # Var(q · mean)
    total = random_model.dot_product_std(d_k, **kwargs) ** 2
    within = random_model.within_row_std(d_k, **kwargs) ** 2
    assert total == pytest.approx(within + shift_variance, rel=1e-9, abs=1e-9)
    assert within <= total + 1e-9


def test_within_row_spread_equals_the_full_spread_without_a_mean():
    for model in ({}, {"correlation": 0.3}, {"std": random_model.variance_profile}):
        std = model.get("std")
        kwargs = dict(model, std=std(64)) if callable(std) else model
        assert random_model.within_row_std(64, **kwargs) == pytest.approx(
            random_model.dot_product_std(64, **kwargs)
        )


# --- unequal variances: shared profile or not ----------------------------------


def test_variance_profile_averages_one_and_reverses():
    v = random_model.variance_profile(WIDE) ** 2
    assert v.mean() == pytest.approx(1.0)
    assert v.min() == pytest.approx(0.1)
    assert v.max() == pytest.approx(1.9)
    np.testing.assert_allclose(
        random_model.variance_profile(WIDE, reverse=True) ** 2, v[::-1]
    )


def test_shared_profile_raises_the_spread_and_opposite_profiles_lower_it():
    a = random_model.variance_profile(WIDE) ** 2
    b = a[::-1]
    shared = random_model.dot_product_std(WIDE, std=np.sqrt(a))
    opposite = random_model.dot_product_std(WIDE, std=np.sqrt(a), key_std=np.sqrt(b))
    assert f"{shared:.1f}" == "25.5"
    assert f"{opposite:.1f}" == "19.3"
    assert opposite < sdpa_ref.random_model.score_std(WIDE) < shared
    # Var(q·k) = sum a_i b_i = d_k (1 + c), c the covariance of the two profiles.
    for x, y, std in ((a, a, shared), (a, b, opposite)):
        c = np.mean((x - x.mean()) * (y - y.mean()))
        assert std**2 == pytest.approx(WIDE * (1 + c))


def test_opposite_profiles_agree_with_simulation():
    model = {
        "std": random_model.variance_profile(64),
        "key_std": random_model.variance_profile(64, reverse=True),
    }
    samples = sdpa_ref.random_model.sample_dot_products(64, 40_000, **model)
    assert samples.std() == pytest.approx(
        random_model.dot_product_std(64, **model), rel=0.02
    )


def test_model_sweep_calls_a_key_std_given_as_a_function():
    models = {
        "opposite": {
            "std": random_model.variance_profile,
            "key_std": lambda d: random_model.variance_profile(d, reverse=True),
        }
    }
    sweep = random_model.model_sweep([64, WIDE], models, 2000)["opposite"]
    assert sweep["exact_std"][1] == pytest.approx(19.3188, abs=1e-3)
    np.testing.assert_allclose(sweep["measured_std"], sweep["exact_std"], rtol=0.06)


# --- how far out the largest score of a row sits --------------------------------


def test_expected_max_matches_known_small_cases():
    # E[max of 2 standard normals] = 1/sqrt(pi); of 3, 3 / (2 sqrt(pi)).
    assert random_model.expected_max_score(2, n_rows=400_000) == pytest.approx(
        1 / np.sqrt(np.pi), abs=0.005
    )
    assert random_model.expected_max_score(3, n_rows=400_000) == pytest.approx(
        1.5 / np.sqrt(np.pi), abs=0.005
    )
    assert random_model.expected_max_score(1, n_rows=100_000) == pytest.approx(
        0.0, abs=0.01
    )


def test_row_of_1024_keys_peaks_about_three_standard_deviations_out():
    m = random_model.expected_max_score(1024)
    assert f"{m:.1f}" == "3.2"
    # Reference value of E[max] for 1024 standard normals is about 3.25.
    assert m == pytest.approx(3.25, abs=0.02)
    assert f"{random_model.max_score_bound(1024):.2f}" == "3.72"
    raw = random_model.expected_max_score(
        1024, std=sdpa_ref.random_model.score_std(WIDE)
    )
    assert raw == pytest.approx(m * np.sqrt(WIDE))


@pytest.mark.parametrize("n_keys", [1, 2, 8, 64, 1024, 8192])
def test_the_bound_holds_and_is_sqrt_2_ln_n(n_keys):
    bound = random_model.max_score_bound(n_keys)
    assert bound == pytest.approx(np.sqrt(2 * np.log(n_keys)))
    # Sampling noise of the mean is at most 1 / sqrt(2000), about 0.02.
    assert random_model.expected_max_score(n_keys, n_rows=2000) <= bound + 0.1


@pytest.mark.slow
def test_expected_max_agrees_with_rows_drawn_from_the_full_model():
    """Rows q·k_j of the model, in units of sqrt(d_k), peak where iid normals do."""
    d_k, n_keys, n_rows = 64, 256, 1500
    rng = np.random.default_rng(1)
    q = rng.standard_normal((n_rows, d_k))
    k = rng.standard_normal((n_rows, n_keys, d_k))
    peaks = np.einsum("rd,rkd->rk", q, k).max(axis=1) / np.sqrt(d_k)
    assert peaks.mean() == pytest.approx(
        random_model.expected_max_score(n_keys), abs=0.05
    )


def test_expected_max_is_seeded():
    a = random_model.expected_max_score(64, n_rows=500)
    assert a == random_model.expected_max_score(64, n_rows=500)
    assert a != random_model.expected_max_score(64, n_rows=500, seed=1)


# --- the softmax Jacobian and its ceiling ----------------------------------------


def test_jacobian_norm_cap_is_one_half_and_is_reached():
    assert spread.JACOBIAN_NORM_CAP == 0.5
    assert sdpa_ref.spread.softmax_jacobian_norm([0.5, 0.5]) == pytest.approx(0.5)
    assert sdpa_ref.spread.softmax_jacobian_norm([0.5, 0.5, 0.0, 0.0]) == pytest.approx(
        0.5
    )


@given(rows)
def test_jacobian_norm_never_exceeds_the_cap(scores):
    w = sdpa_ref.softmax(scores)
    norm = sdpa_ref.spread.softmax_jacobian_norm(w)
    assert norm >= -1e-15
    assert norm <= spread.JACOBIAN_NORM_CAP + 1e-12
    # The spectral norm is the largest singular value.
    jac = sdpa_ref.spread.softmax_jacobian(w)
    assert norm == pytest.approx(np.linalg.norm(jac, 2), abs=1e-12)


@given(rows)
def test_jacobian_is_w_i_times_delta_minus_w_j(scores):
    w = sdpa_ref.softmax(scores)
    expected = w[:, None] * (np.eye(w.size) - w[None, :])
    np.testing.assert_allclose(
        sdpa_ref.spread.softmax_jacobian(w), expected, atol=1e-15
    )
    eps = 1e-6
    numeric = np.stack(
        [
            (sdpa_ref.softmax(scores + eps * e) - sdpa_ref.softmax(scores - eps * e))
            / (2 * eps)
            for e in np.eye(scores.size)
        ],
        axis=1,
    )
    np.testing.assert_allclose(sdpa_ref.spread.softmax_jacobian(w), numeric, atol=1e-7)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 100])
def test_uniform_weights_have_norm_one_over_n_for_n_above_one(n):
    norm = sdpa_ref.spread.softmax_jacobian_norm(np.full(n, 1 / n))
    assert norm == pytest.approx(0.0 if n == 1 else 1 / n, abs=1e-15)


# --- the entropy never falls as the temperature rises ----------------------------


@given(rows, st.floats(0, 5))
def test_entropy_slope_is_minus_beta_times_variance_and_never_positive(scores, beta):
    slope = spread.entropy_slope(scores, beta)
    assert slope <= 0.0
    w = sdpa_ref.softmax(beta * scores)
    variance = w @ (scores - w @ scores) ** 2
    assert slope == pytest.approx(-beta * variance, rel=1e-9, abs=1e-12)


@pytest.mark.slow
@given(rows, st.floats(0.05, 3))
def test_entropy_slope_matches_finite_differences(scores, beta):
    h = 1e-5

    def entropy_at(b):
        return sdpa_ref.spread.entropy(sdpa_ref.softmax(b * scores))

    numeric = (entropy_at(beta + h) - entropy_at(beta - h)) / (2 * h)
    assert spread.entropy_slope(scores, beta) == pytest.approx(
        numeric, rel=1e-3, abs=1e-5
    )


def test_entropy_slope_of_the_page_exercise():
    slopes = spread.entropy_slope([4, 0, 2, -4], [1.0, 0.5])
    np.testing.assert_array_equal(slopes.round(3), [-0.651, -1.143])
    assert spread.entropy_slope([1, 1, 1], 2.0) == 0.0


def test_entropy_slope_rejects_bad_input():
    with pytest.raises(ValueError, match="must be finite"):
        spread.entropy_slope([1.0, np.nan], 1.0)
    with pytest.raises(ValueError, match="1-D"):
        spread.entropy_slope([[1.0, 2.0]], 1.0)


# --- the page's figures show what their captions say -----------------------------


def _text_boxes(fig, texts):
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in texts]


def test_entropy_figure_mark_labels_do_not_overlap():
    divisors = np.logspace(-2, 4, 25, base=2)
    entropies = [sdpa_ref.spread.temperature_sweep([4, 0, 2, -4], divisors)[1]]
    marks = {"unscaled\nτ = 1": 1.0, "scaled\nτ = √4": 2.0}
    fig = scaling.entropy_vs_divisor_figure(
        divisors, entropies, ["Q0"], np.log(4), marks
    )
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text() in marks]
    assert len(labels) == 2
    a, b = _text_boxes(fig, labels)
    assert not a.overlaps(b)
    # Both sit above the plotting area, clear of the curves.
    top = ax.get_window_extent().y1
    assert a.y0 >= top
    assert b.y0 >= top


def test_saturation_figure_names_the_norm_and_marks_the_width_and_the_cap():
    spreads = np.linspace(0, 30, 31)
    curves = sdpa_ref.spread.saturation(
        sdpa_ref.random_model.standard_score_row(8), spreads, WIDE
    )
    fig = scaling.saturation_figure(
        spreads,
        curves,
        WIDE,
        highlight=sdpa_ref.random_model.score_std(WIDE),
        cap=spread.JACOBIAN_NORM_CAP,
    )
    top_ax, jac_ax = fig.axes
    assert jac_ax.get_ylabel() == "spectral norm of the softmax Jacobian"
    assert [t.get_text() for t in top_ax.texts] == ["$d_k$ = 512"]
    assert sorted(t.get_text() for t in jac_ax.texts) == [
        "$d_k$ = 512",
        "largest possible: 0.5",
    ]
    cap_lines = [
        line for line in jac_ax.get_lines() if np.allclose(line.get_ydata(), 0.5)
    ]
    assert len(cap_lines) == 1
    for ax in (top_ax, jac_ax):
        verticals = [
            line
            for line in ax.get_lines()
            if np.allclose(line.get_xdata(), sdpa_ref.random_model.score_std(WIDE))
        ]
        assert len(verticals) == 1
    assert curves["jacobian_norm_scaled"].max() < 0.5


def test_broken_models_figure_has_two_shifts_and_one_slope_change():
    widths = np.array(sdpa_ref.random_model.SIMULATED_WIDTHS[2:])
    sweep = sdpa_ref.random_model.model_sweep(
        widths, sdpa_ref.random_model.BROKEN_MODELS, 200
    )
    names = list(sdpa_ref.random_model.BROKEN_MODELS)
    base = sweep[names[0]]["exact_std"]
    log_slope = {
        name: np.diff(np.log2(sweep[name]["exact_std"])) / np.diff(np.log2(widths))
        for name in names
    }
    np.testing.assert_allclose(log_slope[names[0]], 0.5)
    # A nonzero mean: the same factor at every width.
    np.testing.assert_allclose(sweep[names[1]]["exact_std"] / base, np.sqrt(1.5))
    # Unequal variances: a nearly constant factor above 1.
    ratio = sweep[names[2]]["exact_std"] / base
    assert (ratio > 1).all()
    assert np.ptp(ratio) < 0.08
    # Correlation: the slope climbs from about 1/2 towards 1.
    assert log_slope[names[3]][0] < 0.7
    assert log_slope[names[3]][-1] > 0.99


@pytest.mark.slow
def test_broken_models_slope_label_runs_along_its_line_clear_of_the_legend():
    widths = np.array(sdpa_ref.random_model.SIMULATED_WIDTHS[2:])
    sweep = sdpa_ref.random_model.model_sweep(
        widths, sdpa_ref.random_model.BROKEN_MODELS, 200
    )
    fig = scaling.broken_models_figure(
        widths, sweep, {name: name for name in sdpa_ref.random_model.BROKEN_MODELS}
    )
    ax = fig.axes[0]
    (label,) = [t for t in ax.texts if t.get_text().startswith("slope 1")]
    entries = ax.get_legend().get_texts()
    box, *entry_boxes = _text_boxes(fig, [label, *entries])
    assert not any(box.overlaps(entry) for entry in entry_boxes)
    assert ax.get_window_extent().contains(box.x0, box.y0)
    assert ax.get_window_extent().contains(box.x1, box.y1)
    # The text follows the dotted line y = d_k as drawn, whatever the layout.
    (x0, y0), (x1, y1) = ax.transData.transform([(widths[0],) * 2, (widths[-1],) * 2])
    line_angle = np.degrees(np.arctan2(y1 - y0, x1 - x0))
    assert label.get_rotation() == pytest.approx(line_angle, abs=1.0)


# --- one stretched row against many -------------------------------------------


def test_standard_score_rows_are_standardised_and_start_with_the_figure_row():
    rows = random_model.standard_score_rows(8, 500)
    assert rows.shape == (500, 8)
    np.testing.assert_allclose(rows.mean(axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(rows.std(axis=1), 1)
    np.testing.assert_array_equal(rows[0], sdpa_ref.random_model.standard_score_row(8))
    np.testing.assert_array_equal(rows, random_model.standard_score_rows(8, 500))
    with pytest.raises(ValueError, match="at least 2"):
        random_model.standard_score_rows(1, 10)


def test_top_gap_is_the_lead_of_the_largest_score():
    assert spread.top_gap([4, 0, 2, -4]) == 2.0
    np.testing.assert_array_equal(spread.top_gap([[1, 3, 2], [5, 5, 0]]), [1.0, 0.0])
    with pytest.raises(ValueError, match="at least two"):
        spread.top_gap([1.0])


def test_the_figure_row_saturates_more_than_the_median_row_at_width_512():
    """The page's numbers: the seeded row against 20,000 seeded rows."""
    row = sdpa_ref.random_model.standard_score_row(8)
    sd = sdpa_ref.random_model.score_std(WIDE)
    one = sdpa_ref.spread.saturation(row, [sd], WIDE)
    assert f"{one['rest_weight_raw'][0]:.1e}" == "1.1e-10"
    assert f"{one['top_weight_scaled'][0]:.3f}" == "0.518"
    assert f"{spread.top_gap(row):.2f}" == "1.01"
    q = spread.saturation_quantiles(
        random_model.standard_score_rows(8, 20_000), sd, WIDE
    )
    assert [f"{x:.1e}" for x in q["rest_weight_raw"]] == [
        "7.9e-10",
        "7.9e-06",
        "5.5e-03",
    ]
    assert [f"{x:.3f}" for x in q["top_weight_scaled"]] == ["0.312", "0.373", "0.456"]
    assert f"{q['top_gap'][1]:.2f}" == "0.52"
    # The figure's row is in the upper quarter of gaps, and saturates more.
    assert spread.top_gap(row) > q["top_gap"][2]
    assert one["rest_weight_raw"][0] < q["rest_weight_raw"][0]


def test_saturation_quantiles_agree_with_saturation_row_by_row():
    rows = random_model.standard_score_rows(5, 40, seed=3)
    per_row = [sdpa_ref.spread.saturation(r, [7.0], 64) for r in rows]
    levels = (0.0, 0.3, 0.5, 1.0)
    q = spread.saturation_quantiles(rows, 7.0, 64, levels)
    for name in ("top_weight_raw", "rest_weight_raw", "jacobian_norm_scaled"):
        values = np.array([c[name][0] for c in per_row])
        np.testing.assert_allclose(q[name], np.quantile(values, levels))
    with pytest.raises(ValueError, match="dimension"):
        spread.saturation_quantiles([1.0, 2.0], 1.0, 4)
    with pytest.raises(ValueError, match="2-D"):
        spread.saturation_quantiles(np.ones((2, 2, 2)), 1.0, 4)
    with pytest.raises(ValueError, match="quantiles"):
        spread.saturation_quantiles(rows, 1.0, 4, [1.5])


# --- unequal variances: the factor barely depends on the width -----------------


def test_unequal_variance_factor_changes_a_little_with_the_width():
    def factor(d_k):
        return random_model.dot_product_std(
            d_k, std=random_model.variance_profile(d_k)
        ) / np.sqrt(d_k)

    assert [f"{factor(d):.3f}" for d in (4, 16, WIDE)] == ["1.204", "1.143", "1.127"]
    # sqrt(1 + population variance of linspace(0.1, 1.9, d)).
    for d in (4, 16, WIDE):
        assert factor(d) == pytest.approx(np.sqrt(1 + np.var(np.linspace(0.1, 1.9, d))))
    # A profile with the same spread of variances at every width: exactly constant.
    pattern = np.sqrt([0.1, 0.7, 1.3, 1.9])
    fixed = [
        random_model.dot_product_std(d, std=np.tile(pattern, d // 4)) / np.sqrt(d)
        for d in (4, 16, WIDE)
    ]
    np.testing.assert_allclose(fixed, fixed[0])


def test_jacobian_ceiling_is_reached_only_with_two_even_keys():
    assert sdpa_ref.spread.softmax_jacobian_norm([0.5, 0.5, 0.0]) == pytest.approx(0.5)
    assert sdpa_ref.spread.softmax_jacobian_norm([0.5, 0.499, 0.001]) < 0.5
    # Finite scores over three keys: close to the ceiling, never on it.
    w = sdpa_ref.softmax([30.0, 30.0, 0.0])
    assert 0.5 - 1e-12 < sdpa_ref.spread.softmax_jacobian_norm(w) < 0.5


# --- the gap that saturates a row ------------------------------------------------


def test_row_top_matches_the_rows_drawn_by_hand():
    rng = np.random.default_rng(random_model.SEED)
    rows = 3.0 * rng.standard_normal((500, 40))
    got = random_model.row_top(40, std=3.0, n_rows=500, quantiles=[0.1, 0.5, 0.9])
    weights = sdpa_ref.softmax(rows)
    np.testing.assert_allclose(
        got["gap"], np.quantile(spread.top_gap(rows), [0.1, 0.5, 0.9])
    )
    np.testing.assert_allclose(
        got["top_weight"], np.quantile(weights.max(axis=1), [0.1, 0.5, 0.9])
    )


def test_row_top_of_two_keys_is_a_half_normal_gap():
    """Two independent N(0, 1) scores differ by |N(0, 2)|: median √2 · 0.674."""
    got = random_model.row_top(2, n_rows=200_000, quantiles=[0.5])
    assert got["gap"][0] == pytest.approx(np.sqrt(2) * 0.6744897501960817, rel=0.01)
    assert got["top_weight"][0] == pytest.approx(
        1 / (1 + np.exp(-got["gap"][0])), rel=1e-3
    )
    with pytest.raises(ValueError, match="at least 2"):
        random_model.row_top(1)


def test_the_typical_wide_row_saturates_by_its_top_gap():
    """The scaling page: at width 512, rows of 1024 keys lead by a few units,
    enough for the unscaled softmax to give the top key almost everything."""
    wide = random_model.row_top(1024, std=random_model.score_std(WIDE))
    assert 3 < wide["gap"][1] < random_model.score_std(WIDE)
    assert wide["top_weight"][1] > 0.95
