"""sdpa_ref.training: deterministic, gradients right, and the numbers it reports."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sdpa_ref
from sdpa_ref import training

TINY = training.Setting(
    d_model=4, task=training.Task(n_pairs=3, n_keys=5, n_values=4, batch=2)
)


def tiny_problem(d_k, n_models=2, seed=0):
    """Stacked parameters and one batch of a tiny model, for gradient checks."""
    params, batches = [], []
    for m in range(n_models):
        shared, per_width, data = training._generators(seed + m)
        params.append(training.init_params(d_k, (shared, per_width), TINY))
        batches.append(training.sample_batch(data, TINY.task))
    stacked = {n: np.stack([p[n] for p in params]) for n in training.PARAMETERS}
    batch = [np.stack([b[i] for b in batches]) for i in range(4)]
    return stacked, batch


@pytest.mark.parametrize("scale", training.SCALES)
def test_gradients_match_central_differences(scale):
    params, batch = tiny_problem(d_k=3)
    _, grads, _ = training.gradients(params, batch, scale)
    eps = 1e-6
    for name in training.PARAMETERS:
        numeric = np.zeros_like(params[name])
        for index in np.ndindex(params[name].shape):
            original = params[name][index]
            params[name][index] = original + eps
            up = training.gradients(params, batch, scale)[0].sum()
            params[name][index] = original - eps
            down = training.gradients(params, batch, scale)[0].sum()
            params[name][index] = original
            numeric[index] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("scale", training.SCALES)
def test_attention_gradients_are_attention_backwards(scale):
    params, batch = tiny_problem(d_k=6)
    _, grads, stats = training.gradients(params, batch, scale)
    assert stats["scale"] == training.scale_factor(scale, 6)
    reference = sdpa_ref.attention_backward(
        stats["q"], stats["k"], stats["v"], stats["d_out"], scale=stats["scale"]
    )
    for field in ("dq", "dk", "dv"):
        np.testing.assert_array_equal(
            getattr(stats["attention"], field), getattr(reference, field)
        )
    # W_Q's gradient is the query embeddings times attention_backward's dq.
    keys, _, asked, _ = batch
    query = params["key_embedding"][
        np.arange(2)[:, None], np.take_along_axis(keys, asked[..., None], -1)[..., 0]
    ]
    np.testing.assert_allclose(
        grads["w_q"], np.swapaxes(query, 1, 2) @ reference.dq[:, :, 0, :], rtol=1e-12
    )


def test_same_arguments_give_identical_histories():
    first = training.train(16, "none", seed=3, steps=8)
    second = training.train(16, "none", seed=3, steps=8)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    other_seed = training.train(16, "none", seed=4, steps=8)
    assert not np.array_equal(first.loss, other_seed.loss)


def test_training_side_by_side_gives_each_models_own_numbers():
    setting = training.Setting()
    together = training._train_side_by_side(
        64, "sqrt", [(0, setting), (1, setting), (0, training.Setting(lr=1e-3))], 6
    )
    alone = [
        training.train(64, "sqrt", seed=0, steps=6),
        training.train(64, "sqrt", seed=1, steps=6),
        training.train(64, "sqrt", seed=0, steps=6, setting=training.Setting(lr=1e-3)),
    ]
    for a, b in zip(together, alone, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12)


def test_history_has_one_entry_per_step_and_sane_values():
    h = training.train(16, "sqrt", seed=0, steps=5)
    assert h._fields == ("loss", "accuracy", "entropy", "grad_norm_q")
    assert all(a.shape == (5,) for a in h)
    assert np.all((h.accuracy >= 0) & (h.accuracy <= 1))
    assert np.all((h.entropy >= 0) & (h.entropy <= np.log(8) + 1e-12))
    # At initialisation the model knows nothing: the loss is near ln 16.
    assert abs(h.loss[0] - np.log(16)) < 1.0


def test_arms_of_one_seed_share_their_batches_and_fixed_weights():
    a = training._generators(5)
    b = training._generators(5)
    pa = training.init_params(16, a[:2])
    pb = training.init_params(256, b[:2])
    for name in ("key_embedding", "value_embedding", "w_v", "w_out"):
        np.testing.assert_array_equal(pa[name], pb[name])


def test_init_entropy_orders_the_scales_at_a_wide_head():
    entropies = {
        s: training.train(256, s, seed=0, steps=1).entropy[0] for s in training.SCALES
    }
    assert entropies["none"] < 0.5 < entropies["sqrt"] < entropies["linear"]
    assert entropies["linear"] == pytest.approx(np.log(8), abs=0.05)


def test_a_short_run_learns_the_task():
    h = training.train(16, "sqrt", seed=0, steps=120)
    assert h.loss[-20:].mean() < 0.5
    assert h.loss[:5].mean() > 2.0
    assert h.accuracy[-20:].mean() > 0.85


@settings(max_examples=15, deadline=None)
@given(
    d_k=st.sampled_from([4, 16, 64, 256]),
    scale=st.sampled_from(training.SCALES),
    gain=st.sampled_from([0.5, 1.0, 2.0]),
)
def test_init_score_std_matches_the_initialised_model(d_k, scale, gain):
    """The random model's spread of the scores, against the model's own."""
    setting = training.Setting(gain=gain)
    spreads = []
    for seed in range(4):
        shared, per_width, data = training._generators(seed)
        p = training.init_params(d_k, (shared, per_width), setting)
        keys, values, asked, _ = training.sample_batch(data, setting.task, steps=8)
        pairs = p["key_embedding"][keys] + p["value_embedding"][values]
        query = p["key_embedding"][np.take_along_axis(keys, asked[..., None], -1)]
        scores = np.einsum("sbqd,sbnd->sbqn", query @ p["w_q"], pairs @ p["w_k"])
        spreads.append(scores.std() * training.scale_factor(scale, d_k))
    predicted = training.init_score_std(d_k, scale, setting)
    assert np.mean(spreads) == pytest.approx(predicted, rel=0.3)


@given(d_k=st.integers(1, 4096))
def test_scale_factors_are_the_three_divisors(d_k):
    assert training.scale_factor("sqrt", d_k) == pytest.approx(d_k**-0.5)
    assert training.scale_factor("none", d_k) == 1.0
    assert training.scale_factor("linear", d_k) == pytest.approx(1 / d_k)


@given(seed=st.integers(0, 2**32 - 1))
def test_batches_ask_for_a_key_of_the_sequence(seed):
    keys, values, asked, target = training.sample_batch(np.random.default_rng(seed))
    assert all(len(set(row)) == len(row) for row in keys.tolist())
    np.testing.assert_array_equal(values[np.arange(len(asked)), asked], target)


def test_predicted_ratio_is_one_for_sqrt_and_falls_for_the_others():
    for rows in ("random", "page"):
        assert training.predicted_grad_ratio(64, "sqrt", rows=rows) == 1.0
        linear = [
            training.predicted_grad_ratio(d, "linear", rows=rows) for d in (16, 64, 256)
        ]
        assert linear[0] > linear[1] > linear[2]
    page = [
        training.predicted_grad_ratio(d, "none", rows="page") for d in (16, 64, 256)
    ]
    assert page[0] > page[1] > page[2] > 0
    # Averaged over rows, near-ties keep the unscaled gradient from vanishing.
    assert training.predicted_grad_ratio(256, "none") > 1.0


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="scale must be one of"):
        training.train(16, "cube", seed=0, steps=1)
    with pytest.raises(ValueError, match="steps must be at least 1"):
        training.train(16, "sqrt", seed=0, steps=0)
    with pytest.raises(ValueError, match="rows must be"):
        training.predicted_grad_ratio(16, "sqrt", rows="all")


def test_run_experiment_on_a_small_grid():
    result = training.run_experiment(
        widths=(4, 8),
        scales=("sqrt", "none"),
        seeds=(0, 1),
        steps=3,
        settings={"a": training.Setting(), "b": training.Setting(gain=2.0)},
    )
    assert result["runs"]["b"]["none"][8]["loss"].shape == (2, 3)
    assert len(result["summary"]) == 2 * 2 * 2
    row = result["summary"][0]
    assert row["loss_min"] <= row["loss"] <= row["loss_max"]
    assert result["prediction"]["page"]["a"]["sqrt"].tolist() == [1.0, 1.0]
    assert result["seconds"] > 0
    assert result["n_runs"] == 2 * 2 * 2 * 2
    # The same arm and seed alone gives the same numbers.
    alone = training.train(
        8, "none", seed=1, steps=3, setting=training.Setting(gain=2.0)
    )
    np.testing.assert_allclose(result["runs"]["b"]["none"][8]["loss"][1], alone.loss)


@pytest.fixture(scope="module")
def small_result():
    return training.run_experiment(
        widths=(4, 16),
        seeds=(0, 1),
        steps=4,
        settings={
            "main": training.Setting(),
            "larger init": training.Setting(gain=2.0),
        },
    )


def test_training_figures_fit_the_page_and_repeat_byte_for_byte(small_result):
    from matplotlib.figure import Figure

    from figures import style
    from figures import training as figs

    builders = {
        "loss": lambda: figs.loss_figure(small_result),
        "entropy": lambda: figs.entropy_figure(small_result, ceiling=np.log(8)),
        "gradient": lambda: figs.init_gradient_figure(small_result),
        "final": lambda: figs.final_loss_figure(small_result),
    }
    panels = {"loss": 2, "entropy": 2, "gradient": 2, "final": 2}
    for name, build in builders.items():
        fig = build()
        assert isinstance(fig, Figure)
        assert fig.get_figwidth() <= style.PAGE_WIDTH
        assert len(fig.axes) == panels[name], name
        for ax in fig.axes:
            assert ax.get_ylabel()
        assert style.svg_bytes(fig) == style.svg_bytes(build()), name


def test_entropy_figure_draws_the_ceiling_and_a_band_per_scale(small_result):
    from figures import training as figs

    fig = figs.entropy_figure(small_result, ceiling=np.log(8))
    top = fig.axes[0]
    assert any(np.allclose(line.get_ydata(), np.log(8)) for line in top.get_lines())
    assert len(top.collections) == len(training.SCALES)  # the seeds' ranges


def test_summary_table_has_a_row_per_setting_and_width(small_result):
    from figures import training as figs

    text = figs.summary_markdown(small_result["summary"])
    lines = text.splitlines()
    assert len(lines) == 2 + 2 * 2
    assert lines[0].count("loss (accuracy)") == 3
    first = small_result["summary"][0]
    assert f"{first['loss']:.3f}" in lines[2]
