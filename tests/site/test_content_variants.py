"""The variants page's claims: Lemma 2, rescaled inputs, QK-norm, its figures."""

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from figures import variants as variant_figures
from sdpa_ref import example, scales, variants

DOCS = Path(__file__).parents[2] / "docs"
COUNTS = [16, 64, 256, 1024, 4096, 16384]


def test_lemma_2_matches_the_spread_of_the_estimator():
    """Relative MSE of one positive feature is exp(|x+y|²) - 1 (Performer, Lemma 2)."""
    x, y = np.array([0.6, -0.2, 0.3]), np.array([0.1, 0.5, -0.4])
    w = np.random.default_rng(7).standard_normal((400_000, 3))
    # One feature per draw: each row of w is an independent estimate.
    estimates = np.exp(w @ x - x @ x / 2) * np.exp(w @ y - y @ y / 2)
    relative_mse = np.mean((estimates / np.exp(x @ y) - 1) ** 2)
    assert relative_mse == pytest.approx(
        variants.positive_feature_relative_mse(x, y, 1), rel=0.03
    )
    assert variants.positive_feature_relative_mse(x, y, 50) == pytest.approx(
        variants.positive_feature_relative_mse(x, y, 1) / 50
    )


def test_quarter_root_inputs_make_the_kernel_the_scaled_softmax_kernel():
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(3, 16)), rng.normal(size=(5, 16))
    qs, ks = variants.softmax_kernel_inputs(q, k)
    np.testing.assert_allclose(np.exp(qs @ ks.T), np.exp(q @ k.T / 4.0))


def test_error_is_smallest_for_the_shortest_query():
    q, k, v = example.vectors(4)
    r = variants.random_feature_error_by_query(q, k, v, 4096)
    np.testing.assert_allclose(r["mse_factor"], np.expm1(r["norm_sq"]))
    assert np.argmin(r["norm_sq"]) == np.argmin(r["output_error"]) == 3
    assert np.argmax(r["norm_sq"]) == 0
    # "serves short vectors well and long ones badly"
    assert r["output_error"][0] > 3 * r["output_error"][3]
    # Same draws as the figure: the mean of the largest error over queries is
    # at least the largest of the per-query means.
    overall = variants.linear_attention_errors(q, k, v, [4096])["random_features"]
    assert overall[0] >= r["output_error"].max() - 1e-12


@pytest.mark.slow
def test_the_linear_figure_alt_text_holds():
    """Falls at every step to under a quarter of its start, with short error
    bars; the elu line lies above every point."""
    errs = variants.linear_attention_errors(*example.vectors(4), COUNTS)
    rf, se = errs["random_features"], errs["random_features_se"]
    assert rf[-1] < rf[0] / 4
    assert (np.diff(rf) < 0).all()
    # The bars, two standard errors each way, are under half the smallest step.
    assert 2 * se.max() < 0.5 * (-np.diff(rf)).min()
    assert errs["elu"] > (rf + 2 * se).max()


def test_ten_draws_made_a_flat_step_that_two_hundred_remove():
    """The page once averaged 10 draws: 256 and 1,024 features tied, by chance."""
    q, k, v = example.vectors(4)
    few = variants.linear_attention_errors(q, k, v, [256, 1024], repeats=10)
    assert abs(np.diff(few["random_features"])[0]) < few["random_features_se"].min()
    many = variants.linear_attention_errors(q, k, v, [256, 1024])
    assert variants.RANDOM_FEATURE_DRAWS >= 100
    gap = -np.diff(many["random_features"])[0]
    assert gap > 4 * many["random_features_se"].max()
    with pytest.raises(ValueError, match="at least 2"):
        variants.linear_attention_errors(q, k, v, [16], repeats=1)


def test_lemma_2s_factor_orders_the_queries_but_not_the_size_of_their_errors():
    q, k, v = example.vectors(4)
    r = variants.random_feature_error_by_query(q, k, v, 4096)
    order = np.argsort(r["mse_factor"])
    assert (np.diff(r["output_error"][order[[0, -1]]]) > 0).all()
    factor_growth = r["mse_factor"].max() / r["mse_factor"].min()
    error_growth = r["output_error"].max() / r["output_error"].min()
    assert factor_growth > 1e4  # "orders of magnitude"
    assert 2 < error_growth < 10  # "a small multiple"
    # Positive features make the output a weighted average of the values:
    # its error is bounded by their spread, whatever the kernel estimates.
    assert (r["output_error"] <= np.ptp(v, axis=0).max()).all()


def _drawn(fig):
    """Lay the figure out as it will be saved, so that pixel boxes are final."""
    FigureCanvasAgg(fig).draw()
    return fig


def _pixel_box(artist, fig):
    return artist.get_window_extent(fig.canvas.get_renderer())


@pytest.mark.slow
def test_the_linear_legend_covers_neither_the_elu_line_nor_the_points():
    errs = variants.linear_attention_errors(*example.vectors(4), COUNTS)
    fig = _drawn(
        variant_figures.linear_error_figure(
            COUNTS, errs["random_features"], errs["elu"], errs["random_features_se"]
        )
    )
    ax = fig.axes[0]
    box = _pixel_box(ax.get_legend(), fig)
    _, elu_y = ax.transData.transform((COUNTS[0], errs["elu"]))
    assert not box.y0 <= elu_y <= box.y1
    points = ax.transData.transform(np.column_stack([COUNTS, errs["random_features"]]))
    assert not any(box.contains(px, py) for px, py in points)


def test_the_scale_legend_sits_outside_both_panels():
    widths = {"a": example.WIDTHS}
    panels = {"a": variants.scale_choice_entropies(example.WIDTHS, "example")}
    fig = _drawn(variant_figures.scale_choices_figure(widths, panels, {"a": np.log(4)}))
    legend = _pixel_box(fig.legends[0], fig)
    for ax in fig.axes:
        assert not legend.overlaps(_pixel_box(ax, fig))
    assert len(fig.legends[0].get_texts()) == len(variants.SCALE_CHOICES)


def test_every_scale_choice_has_its_legend_text():
    assert tuple(variant_figures.SCALE_LABELS) == variants.SCALE_CHOICES


def test_two_kinds_of_qk_norm_behave_as_the_page_says():
    ex = variants.scale_choice_entropies(example.WIDTHS, "example")
    rms = ex["RMSNorm + 1/√d_k"]
    assert (np.diff(rms) < 0).all()  # still sharpens with width
    assert (rms >= ex["1/√d_k"]).all()  # but more slowly
    np.testing.assert_allclose(ex["QK-norm"], ex["QK-norm"][0])  # cosine: flat
    # The lines meet where √d_k equals the gain.
    meet = list(example.WIDTHS).index(int(variants.QK_NORM_GAIN**2))
    assert rms[meet] == pytest.approx(ex["QK-norm"][meet])
    rnd = variants.scale_choice_entropies([4, 64, 1024], "random")
    np.testing.assert_allclose(rnd["RMSNorm + 1/√d_k"], rnd["1/√d_k"], atol=0.1)
    assert rnd["QK-norm"][-1] > 0.99 * np.log(8)


def test_rms_normalised_scores_are_root_d_times_the_cosine():
    rng = np.random.default_rng(5)
    q, k = rng.normal(size=(2, 9)), rng.normal(size=(3, 9))
    np.testing.assert_allclose(
        np.linalg.norm(scales.rms_normalise(q), axis=-1), np.sqrt(9)
    )
    cos = (q / np.linalg.norm(q, axis=-1, keepdims=True)) @ (
        k / np.linalg.norm(k, axis=-1, keepdims=True)
    ).T
    np.testing.assert_allclose(
        variants.scaled_scores(q, k, "RMSNorm + 1/√d_k"), 3.0 * cos
    )


def test_the_per_query_table_has_one_row_per_query():
    r = variants.random_feature_error_by_query(*example.vectors(4), 256, repeats=2)
    table = variant_figures.random_feature_markdown(r, example.QUERY_NAMES, 256)
    rows = table.splitlines()[2:]
    assert [row.split("|")[1].strip() for row in rows] == list(example.QUERY_NAMES)


def test_every_citation_on_the_page_has_an_entry():
    page = (DOCS / "variants.md").read_text()
    cited = set(re.findall(r"\{cite:[pt]\}`([^`]+)`", page))
    cited = {key.strip() for group in cited for key in group.split(",")}
    bib = "\n".join(
        p.read_text() for p in [DOCS / "references.bib", *DOCS.glob("bib/*.bib")]
    )
    entries = set(re.findall(r"@\w+\{([^,\s]+),", bib))
    assert cited <= entries, cited - entries
    assert {
        "henry2020query",
        "dehghani2023scaling",
        "olmo2024olmo2",
        "yang2022tensor",
    } <= cited


def test_window_reach_is_where_stacked_window_masks_stop_reaching():
    """After L layers a token sees L * left positions back, and no further."""
    from sdpa_ref import masks

    n = 40
    for left, layers in [(2, 1), (2, 4), (4, 3), (1, 7)]:
        step = masks.sliding_window_mask(n, left).astype(int)
        reach = np.linalg.matrix_power(step, layers) > 0
        last = n - 1
        farthest = last - np.flatnonzero(reach[last]).min()
        assert farthest == variants.window_reach(left, layers)
    # Mistral 7B's paper: W x k tokens, "approximately 131K" at W = 4096, k = 32.
    assert variants.window_reach(4096, 32) == 131_072
    with pytest.raises(ValueError, match="left must be at least 1"):
        variants.window_reach(0, 3)


def test_model_shapes_are_the_published_ones():
    shapes = variants.MODEL_SHAPES
    assert list(shapes) == [
        "Llama 2 7B (multi-head)",
        "Mistral 7B (grouped-query)",
        "Falcon 7B (multi-query)",
    ]
    # Mistral 7B, Table 1; Falcon 7B, 4544 wide over 71 heads.
    assert shapes["Mistral 7B (grouped-query)"] == {
        "layers": 32,
        "q_heads": 32,
        "kv_heads": 8,
        "head_dim": 128,
    }
    assert shapes["Falcon 7B (multi-query)"]["head_dim"] * 71 == 4544
    assert variants.MISTRAL_7B_WINDOW == 4096


def test_the_page_says_what_the_window_loses_and_where_the_cache_stops():
    page = (DOCS / "variants.md").read_text()
    assert "and so is the loss" not in page
    assert "{glue:text}`mistral_reach:,.0f`" in page
    assert "rolling buffer cache" in page
    assert "(rolling-buffer)=" in page
    # One window convention, FlashAttention's (left, right), stated once.
    assert "w - 1" not in page
    assert "window=(W, 0)" in page
    assert "window=(W - 1, 0)" in page
    # The table's three-decimal errors and the prose agree.
    assert "q3_output_error:.3f" in page
    assert "q0_output_error:.3f" in page
    # The q·k argument is Tensor Programs V's, the d_k / 8 the README's.
    assert "Their README's\n  example" in page
    for key in (
        "touvron2023llama",
        "touvron2023llama2",
        "jiang2023mistral",
        "hf_transformers_5230",
        "mistral_7b_v02_card",
        "mistral_7b_v03_card",
        "mistral_reference_code",
        "xformers_local_attention",
        "choromanski2021rethinking",
    ):
        assert re.search(rf"\{{cite:[pt]\}}`([^`]*,)?{key}(,[^`]*)?`", page), key


def test_variant_bib_entries_render_without_raw_latex():
    bib = (DOCS / "bib" / "variants.bib").read_text()
    assert "\\texttt" not in bib
    assert "{{mup}:" in bib
