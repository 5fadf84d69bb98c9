"""The figures layer: builders return Figures, SVG output repeats byte for byte."""

import re

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

import sdpa_ref
from figures import comparison, formulas, scaling, similarity, steps, style, tables
from sdpa_ref import example

contrast = style.contrast_ratio


def all_figures():
    c = example.compare(0, 4)
    _, _, values = example.vectors(4)
    widths = np.array(sdpa_ref.random_model.SIMULATED_WIDTHS[:5])
    model = sdpa_ref.random_model.model_sweep(widths, {"text": {}}, 500)["text"]
    sweep = sdpa_ref.random_model.model_sweep(
        widths, sdpa_ref.random_model.BROKEN_MODELS, 500
    )
    spreads = np.linspace(0, 10, 11)
    angles = np.linspace(0, 180, 7)
    q, k, v = example.vectors(4)
    masked = sdpa_ref.steps.attention_steps(q, k, v, is_causal=True)["masked"]
    return {
        "weights": comparison.weights_figure(c, example.KEY_NAMES),
        "mixture": comparison.mixture_figure(c, values, example.KEY_NAMES),
        "angle": similarity.score_vs_angle_figure(
            angles,
            {"unit": sdpa_ref.similarity.score_from_angle(np.radians(angles), 1, 1)},
        ),
        "std": scaling.std_vs_width_figure(
            widths,
            model["measured_std"],
            model["measured_scaled_std"],
            model["exact_std"],
            16,
        ),
        "broken": scaling.broken_models_figure(
            widths, sweep, {name: name for name in sdpa_ref.random_model.BROKEN_MODELS}
        ),
        "saturation": scaling.saturation_figure(
            spreads,
            sdpa_ref.spread.saturation(
                sdpa_ref.random_model.standard_score_row(8), spreads, 64
            ),
            64,
        ),
        "entropy": scaling.entropy_vs_divisor_figure(
            np.array([0.5, 1, 2]),
            [sdpa_ref.spread.temperature_sweep([1, 0], [0.5, 1, 2])[1]],
            ["row"],
            np.log(2),
            {"t = 1": 1.0},
        ),
        "heatmap": steps.heatmap_figure(
            masked,
            "masked",
            row_labels=example.QUERY_NAMES,
            col_labels=example.KEY_NAMES,
        ),
    }


@pytest.fixture(scope="module")
def figures_by_name():
    return all_figures()


def test_every_builder_returns_a_figure(figures_by_name):
    assert len(figures_by_name) == 8
    for fig in figures_by_name.values():
        assert isinstance(fig, Figure)


@pytest.mark.slow
def test_svg_is_byte_identical_across_rebuilds():
    first = {name: style.svg_bytes(fig) for name, fig in all_figures().items()}
    second = {name: style.svg_bytes(fig) for name, fig in all_figures().items()}
    for name, svg in first.items():
        assert svg == second[name], name


@pytest.mark.slow
def test_svg_has_no_date_and_uses_the_salt(figures_by_name):
    svg = style.svg_bytes(figures_by_name["weights"]).decode()
    assert "<dc:date>" not in svg
    assert "Matplotlib v" not in svg  # no Creator with a version in it
    assert svg.startswith("<?xml")


@pytest.mark.slow
def test_weights_figure_labels_bars_with_their_weights(figures_by_name):
    svg = style.svg_bytes(figures_by_name["weights"]).decode()
    texts = [t.get_text() for ax in figures_by_name["weights"].axes for t in ax.texts]
    assert "0.867" in texts
    assert "0.657" in texts
    assert "entropy 0.444 of 1.386 nats" in figures_by_name["weights"].axes[
        0
    ].get_title(loc="left")
    assert len(svg) > 5_000


def test_heatmaps_mark_minus_inf_and_label_their_axes(figures_by_name):
    ax = figures_by_name["heatmap"].axes[0]
    assert sum(t.get_text() == "−∞" for t in ax.texts) == 6
    assert ax.get_xlabel() == "rows = queries, columns = keys"


@pytest.mark.parametrize("value", np.linspace(0, 1, 41))
def test_heatmap_text_keeps_contrast_on_every_cell(value):
    from matplotlib import colormaps

    cell = colormaps[style.HEATMAP_CMAP](value)
    ink = steps._ink_on(cell)
    if contrast(ink["color"], cell) < 4.5:
        # The halo becomes the text's background: it must contrast instead.
        (halo,) = ink["path_effects"]
        assert contrast(ink["color"], halo._gc["foreground"]) >= 4.5
    else:
        assert "path_effects" not in ink


@pytest.mark.parametrize(
    "color", [*style.KEY_COLORS, style.UNSCALED_COLOR, style.SCALED_COLOR]
)
@pytest.mark.parametrize(
    "background",
    # white figure cards; Furo's light panel grey; its dark background and panel
    ["#ffffff", "#f8f9fb", "#131416", "#1a1c1e"],
)
def test_palette_has_graphics_contrast_on_every_background(color, background):
    assert contrast(color, background) >= 3.0


def test_key_colors_are_distinct():
    rgbs = [to_rgb(c) for c in style.KEY_COLORS]
    assert len(set(rgbs)) == len(rgbs)


def test_comparison_table_holds_the_worked_numbers():
    text = tables.comparison_table(example.compare(0, 4), example.KEY_NAMES)
    for number in (
        "0.867",
        "0.657",
        "0.444",
        "0.888",
        "[4, 0, 2, −4]",
        "[2, 0, 1, −2]",
    ):
        assert number in text


def test_formulas_carry_the_computed_values():
    c = example.compare(0, 4)
    latex = formulas.softmax_row(c.scaled_scores, c.scaled_weights)
    assert latex.endswith(r"\left[0.657,\ 0.089,\ 0.242,\ 0.012\right]")
    assert "0.888" in formulas.entropy_sum(c.scaled_weights, c.scaled_entropy)


def test_hull_of_the_values_is_their_quadrilateral():
    _, _, values = example.vectors(4)
    hull = comparison.convex_hull(values)
    assert len(hull) == 4
    assert {tuple(p) for p in hull} == {tuple(p) for p in values}


def test_figures_never_import_pyplot():
    import figures

    source = "".join(
        p.read_text()
        for p in __import__("pathlib").Path(figures.__file__).parent.glob("*.py")
    )
    assert not re.search(
        r"import matplotlib\.pyplot|from matplotlib import pyplot", source
    )


def test_markdown_tables_escape_pipes_so_columns_hold():
    text = tables.markdown_table(["n", "max |a − b|"], [["1", "|x|"]])
    for line in text.splitlines():
        assert line.replace("\\|", "").count("|") == 3


@pytest.mark.slow
def test_svg_compaction_draws_the_same_paths_and_text():
    import io

    import matplotlib as mpl

    from figures import _svg

    path = re.compile(r'<path (?:[^>]*? )?d="([^"]+)"')
    text = re.compile(r"<(?:text|tspan)\b[^>]*>([^<]*)(?=<)")
    # Fresh figures for each side: a second save of one Figure re-runs its
    # constrained layout, which moves the axes a little.
    for fig, twin in zip(all_figures().values(), all_figures().values(), strict=True):
        raw = io.BytesIO()
        with mpl.rc_context(style.RC):
            twin.savefig(raw, format="svg", metadata={"Date": None, "Creator": None})
        before, after = raw.getvalue().decode(), style.svg_bytes(fig).decode()
        drawn = [_svg.points(d) for d in path.findall(before)]
        kept = [_svg.points(d) for d in path.findall(after)]
        assert len(kept) == len(drawn)
        for a, b in zip(kept, drawn, strict=True):
            assert len(a) == len(b)
            assert np.allclose(a, b, atol=0.051), (a[:3], b[:3])
        # Every glyph is still drawn, in order (spaces aside).
        glyphs = ["".join("".join(text.findall(s)).split()) for s in (after, before)]
        assert glyphs[0] == glyphs[1]
        assert len(after) < len(before)
