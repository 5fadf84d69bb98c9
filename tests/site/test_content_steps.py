"""The steps, masks and precision pages: their numbers and the claims they rest on."""

import re
from pathlib import Path

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import example, masks, precision, steps
from tests.site.page_text import assert_says

DOCS = Path(__file__).parents[2] / "docs"


def page(name):
    return (DOCS / f"{name}.md").read_text()


# -- sdpa_ref.steps ------------------------------------------------------------


def test_logits_are_scaled_scores_plus_the_additive_mask():
    s = sdpa_ref.steps.attention_steps(*example.vectors(4), is_causal=True)
    assert set(np.unique(s["mask"])) == {0.0, -np.inf}
    np.testing.assert_array_equal(s["mask"] == 0.0, s["allowed"])
    np.testing.assert_array_equal(s["masked"], s["scaled"] + s["mask"])
    np.testing.assert_allclose(s["weights"], sdpa_ref.softmax(s["masked"]))
    unmasked = sdpa_ref.steps.attention_steps(*example.vectors(4))
    np.testing.assert_array_equal(unmasked["masked"], unmasked["scaled"])


@pytest.mark.parametrize("itemsize", [2, 4])
def test_score_memory_multiplies_out_heads_layers_and_batch(itemsize):
    mem = steps.score_memory(1024, heads=8, layers=6, batch=3, itemsize=itemsize)
    head = sdpa_ref.cost.score_bytes(1024, 1024, itemsize=itemsize)
    assert mem == {
        "head": head,
        "layer": 8 * head,
        "model": 6 * 8 * head,
        "batch": 3 * 6 * 8 * head,
    }
    with pytest.raises(ValueError, match="heads"):
        steps.score_memory(1024, heads=0, layers=1)


def test_one_head_of_a_long_sequence_is_not_the_whole_model():
    mem = steps.score_memory(131072, heads=32, layers=32)
    assert mem["head"] == 32 * 2**30  # 32 GiB in 16-bit floats
    assert mem["model"] == 32 * 2**40  # 32 TiB for every head of every layer


@pytest.mark.parametrize(
    ("dtype", "threshold"),
    [("float16", 11.09), ("bfloat16", 88.72), ("float32", 88.72), ("float64", 709.78)],
)
def test_exp_overflows_early_only_in_float16(dtype, threshold):
    assert steps.overflow_threshold(dtype) == pytest.approx(threshold, abs=0.01)


# -- sdpa_ref.masks --------------------------------------------------------------


def test_unmask_lifts_only_the_empty_rows():
    mask = np.array([[True, False, False], [False, False, False], [False, True, True]])
    lifted = masks.unmask_empty_rows(mask)
    np.testing.assert_array_equal(lifted[[0, 2]], mask[[0, 2]])
    assert lifted[1].all()


def test_the_four_empty_row_answers():
    q, k = np.array([[0.0, 1.0], [2.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[1.0], [5.0]])
    mask = np.array([[False, False], [True, True]])
    out = masks.empty_row_outcomes(q, k, v, mask)
    assert list(out) == ["nan", "uniform", "unmask", "zero"]
    assert np.isnan(out["nan"][0, 0])
    assert out["uniform"][0, 0] == pytest.approx(3.0)  # the mean of the values
    weights = sdpa_ref.softmax(q[0] @ k.T / np.sqrt(2))
    assert out["unmask"][0, 0] == pytest.approx(weights @ v[:, 0])
    assert out["zero"][0, 0] == 0.0
    for name in out:  # the row with allowed keys is the same everywhere
        assert out[name][1, 0] == pytest.approx(out["zero"][1, 0])


def test_kv_cache_tokens_stop_at_the_window():
    assert masks.kv_cache_tokens(10) == 10
    assert masks.kv_cache_tokens(10, window=4) == 4
    assert masks.kv_cache_tokens(3, window=4) == 3
    with pytest.raises(ValueError, match="window"):
        masks.kv_cache_tokens(10, window=0)
    window = masks.MISTRAL_7B_KV["window"]
    shape = {k: masks.MISTRAL_7B_KV[k] for k in ("layers", "kv_heads", "head_dim")}
    long = sdpa_ref.cost.kv_cache_bytes(
        masks.kv_cache_tokens(2 * window, window=window), **shape
    )
    assert long == sdpa_ref.cost.kv_cache_bytes(window, **shape)


def test_model_shapes_for_the_kv_cache():
    assert masks.OLMO_2_7B_KV == {"layers": 32, "kv_heads": 32, "head_dim": 128}
    assert masks.MISTRAL_7B_KV["kv_heads"] * 4 == 32  # 4 query heads per kv head
    assert masks.MISTRAL_7B_KV["window"] == 4096


def test_tutorial_fill_is_minus_ten_to_the_ninth():
    assert masks.TUTORIAL_FILL == -1e9
    assert masks.TUTORIAL_FILL == -(10.0**masks.TUTORIAL_FILL_EXPONENT)
    assert masks.fill_text() == "\u221210\u2079"
    assert masks.fill_text(10) == "\u221210\u00b9\u2070"


def test_kv_cache_per_token_matches_the_formula():
    # 2 (keys and values) * layers * kv_heads * d_k * bytes
    assert sdpa_ref.cost.kv_cache_bytes(1, layers=32, kv_heads=32, head_dim=128) == (
        2 * 32 * 32 * 128 * 2
    )
    assert (
        sdpa_ref.cost.kv_cache_bytes(1, layers=32, kv_heads=8, head_dim=128) == 131072
    )


# -- sdpa_ref.precision -----------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "bits", "digits"),
    [("float16", 11, 3.31), ("bfloat16", 8, 2.41), ("float32", 24, 7.22)],
)
def test_significant_bits_and_decimal_digits(dtype, bits, digits):
    assert precision.significand_bits(dtype) == bits
    assert precision.decimal_digits(dtype) == pytest.approx(digits, abs=0.01)


@pytest.mark.parametrize(
    ("dtype", "bits"), [("float16", 11), ("bfloat16", 8), ("float32", 24)]
)
def test_unit_roundoff_is_two_to_minus_the_bits(dtype, bits):
    assert precision.unit_roundoff(dtype) == 2.0**-bits
    if dtype != "bfloat16":  # numpy's eps is the spacing at 1, twice u
        assert precision.unit_roundoff(dtype) == np.finfo(np.dtype(dtype)).eps / 2


def _round_to(x, dtype):
    if dtype == "bfloat16":
        return np.asarray(precision.to_bfloat16(np.float32(x)), dtype=np.float64)
    return np.asarray(x).astype(dtype).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_rounding_stays_within_u_only_in_the_normal_range(dtype):
    tiny = precision.smallest_normal(dtype)
    u = precision.unit_roundoff(dtype)
    if dtype != "bfloat16":
        assert tiny == float(np.finfo(np.dtype(dtype)).smallest_normal)
    rng = np.random.default_rng(3)
    # Numbers from a hundred times the smallest normal down into the subnormals.
    xs = tiny * 10.0 ** rng.uniform(-4 if dtype == "float16" else -2, 2, 4000)
    xs = xs[xs > 2 * tiny * 2.0 ** -precision.significand_bits(dtype)]
    actual = np.abs(_round_to(xs, dtype) - xs) / xs
    bounds = np.array([precision.relative_rounding_bound(x, dtype) for x in xs])
    assert (actual <= bounds * (1 + 1e-12)).all()
    normal = xs >= tiny
    assert (bounds[normal] <= u).all()
    assert (bounds[~normal] > u).all()
    # The bound is tight: some normal number comes within 10% of it.
    assert actual[normal].max() > 0.9 * u
    assert precision.relative_rounding_bound(2.0**-3, dtype) == u


def test_the_precision_pages_small_weight_is_subnormal_in_float16():
    w = float(np.exp(-12.0) / (1 + np.exp(-12.0)))
    assert w < precision.smallest_normal("float16")
    assert w > precision.smallest_normal("bfloat16")
    units = precision.relative_rounding_bound(w, "float16", in_units=True)
    assert 9.5 < units < 10.5
    assert precision.relative_rounding_bound(w, "bfloat16", in_units=True) <= 1
    with pytest.raises(ValueError, match="finite and not zero"):
        precision.relative_rounding_bound(0.0, "float16")


def test_pairwise_sum_of_ones_does_not_stall():
    for dtype, n in [("float16", 4096), ("bfloat16", 1024)]:
        row = precision.equal_row_weights(n, dtype)
        assert row["pairwise_sum"] == n
        assert row["in_type_sum"] < n
    # not a power of two: the pairwise partial sums are not all exact, but close
    row = precision.equal_row_weights(3000, "float16")
    assert abs(row["pairwise_sum"] - 3000) <= 4


def test_stable_error_in_units():
    sweep = precision.precision_sweep([5.0, 10.0, 12.0, 50.0, 100.0, 1000.0])
    assert precision.stable_error_in_units(sweep[:-1]) < 1
    assert precision.stable_error_in_units(sweep) == pytest.approx(
        sweep[-1][("bfloat16", "stable")] / 2.0**-8
    )


def test_bfloat16_has_two_to_three_decimal_digits():
    assert 2 < precision.decimal_digits("bfloat16") < 3


@pytest.mark.parametrize(("dtype", "stall"), [("float16", 2048.0), ("bfloat16", 256.0)])
def test_a_narrow_running_sum_stalls_and_float32_does_not(dtype, stall):
    n = 4 * int(stall)
    row = precision.equal_row_weights(n, dtype)
    assert row["in_type_sum"] == stall
    assert row["in_type"] == 1 / stall
    assert row["in_type_total"] == pytest.approx(n / stall)
    assert row["float32"] == pytest.approx(1 / n, rel=1e-2)


def test_short_rows_do_not_stall():
    row = precision.equal_row_weights(1024, "float16")
    assert row["in_type"] == row["exact"] == row["float32"]


def test_accumulate_is_validated():
    with pytest.raises(ValueError, match="accumulate must be one of"):
        precision.softmax_in([1.0, 0.0], "float16", accumulate="float16")


def test_sweep_default_is_the_worst_case_and_float32_accumulation_is_not():
    worst = precision.precision_sweep([1000.0])[0]
    kept = precision.precision_sweep([1000.0], accumulate="float32")[0]
    assert worst[("bfloat16", "stable")] == pytest.approx(0.231, abs=1e-3)
    assert kept[("bfloat16", "stable")] < 2**-9  # half a bfloat16 step at 0.73
    for dtype in precision.DTYPES:  # storing is not the problem: naive still breaks
        assert np.isnan(kept[(dtype, "naive")])


def test_max_subtracted_error_is_within_rounding_except_bf16_at_1000():
    sweep = precision.precision_sweep([5.0, 10.0, 12.0, 50.0, 100.0, 1000.0])
    unit = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24}
    for row in sweep:
        for dtype, u in unit.items():
            err = row[(dtype, "stable")]
            if dtype == "bfloat16" and row["top"] == 1000.0:
                assert err > 0.2
            else:
                assert err <= 2 * u


# -- the pages ------------------------------------------------------------------


def test_the_overflow_table_lives_on_the_precision_page_only():
    assert "(overflow-table)=\n## Where exp overflows" in page("precision")
    assert "threshold_table" not in page("steps")
    assert "<overflow-table>" in page("steps")
    # steps names only the float16 threshold, as a glued number
    assert 'overflow_threshold("float16")' in page("steps")
    assert "low in 16-bit floats" not in page("steps")  # bfloat16 is not low


def test_steps_names_the_logits_and_uses_them():
    text = page("steps")
    assert r"L = \frac{S}{\sqrt{d_k}} + M" in text
    assert r"A = \operatorname{softmax}(L)" in text
    assert r"\frac{e^{L_{ij}}}{\sum_{l} e^{L_{il}}}" in text
    assert "{ref}`logits <logits-and-temperature>`" in text
    assert "e^{S_{ij}}" not in text


def test_steps_leaves_the_whole_model_memory_to_the_cost_page():
    text = page("steps")
    for claim in ("no longer fits in memory", "more than a gpu", "fits in memory"):
        assert claim not in text.lower()
    assert "{ref}`one head and for a whole model <whole-model-scores>`" in text
    assert "Llama" not in text
    assert "score_memory(N_LONG" not in text


def test_steps_links_instead_of_repeating():
    text = page("steps")
    assert "<softmax-definition>" in text
    assert "<empty-rows>" in text
    mask_step = text.split("## 3. Mask", 1)[1].split("\n## ", 1)[0]
    assert "PyTorch" not in mask_step  # the empty-row conventions live on masks
    variants = text.split("## Variants that change the cost", 1)[1].split(
        "## Exercises"
    )[0]
    for name in (
        "FlashAttention",
        "Sparse attention",
        "Linear attention",
        "Multi-query",
    ):
        block = variants.split(name, 1)[1].split("\n\n", 1)[0]
        assert "(variants.md)" in block or "(flash.md)" in block, name
    assert r"\exp(q \cdot k / \sqrt{d_k})" in variants
    ex1 = text.split("**1.**", 1)[1].split("**2.**", 1)[0]
    assert "constant" not in ex1  # formula.md's exercise, not repeated here


def test_five_numpy_lines_are_the_five_steps():
    section = page("steps").split("## The five steps in NumPy", 1)[1].split("\n## ")[0]
    code = re.findall(r"^>>> (\w+) = ", section, re.M)
    assert code[-6:-1] == ["S", "L", "E", "A", "output"]
    assert "np.allclose(output, ref)" in section


def test_variants_say_what_flash_and_shared_heads_keep():
    variants = page("steps").split("## Variants that change the cost", 1)[1]
    flash = variants.split("FlashAttention\n:", 1)[1].split("\n\n", 1)[0]
    words = " ".join(flash.split())
    assert "every query-key pair" in words
    assert "skip the blocks in which every pair is masked" in words
    assert "Theorem 1" in flash
    assert "{cite:p}`dao2024flashattention2`" in flash
    shared = variants.split("Multi-query and grouped-query attention\n:", 1)[1]
    shared = shared.split("\n\n", 1)[0]
    assert "enable_gqa" in shared
    assert r"$\sqrt{d_k}$" in shared


@pytest.mark.torch
def test_each_grouped_query_head_keeps_the_scaled_softmax():
    torch = pytest.importorskip(
        "torch",
        reason="torch is not installed; `nox -s parity` installs torch==2.13.0 (CPU)",
    )
    rng = np.random.default_rng(11)
    q = rng.normal(size=(2, 6, 5, 4))  # 6 query heads
    k, v = rng.normal(size=(2, 2, 2, 7, 4))  # 2 key/value heads, 3 query heads each
    theirs = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), enable_gqa=True
    ).numpy()
    for head in range(6):
        shared = head // 3
        alone = sdpa_ref.softmax(q[:, head] @ k[:, shared].swapaxes(-1, -2) / 2.0)
        np.testing.assert_allclose(theirs[:, head], alone @ v[:, shared], rtol=1e-12)
    np.testing.assert_allclose(sdpa_ref.attention(q, k, v), theirs, rtol=1e-12)


def test_pytorch_empty_row_claims_name_the_backend_and_the_version():
    text = page("masks")
    zero = text.split("`zero`\n:", 1)[1].split("\n\n", 1)[0]
    assert_says(
        zero,
        present=[
            "math backend",
            "memory-efficient",
            "2.5",
            "pytorch_sdpa",
            "guessous2024safe_softmax",
            "pytorch_mps_empty_rows",  # other backends have differed
        ],
        absent=["{cite:p}`pytorch_sdpa,guessous2024safe_softmax`"],
    )
    assert "pytorch_v250_release" not in text


def test_kv_cache_is_defined_before_masks_uses_it():
    text = page("masks")
    label = text.index("(kv-cache)=")
    body = text.split("## What you will learn", 1)[1]
    first_use = text.index("KV cache", text.index("## What you will learn"))
    assert label < first_use
    assert "2 \\cdot \\text{layers}" in body
    assert "shazeer2019fast" in body


def test_masks_credits_the_deliberate_unmask_and_qualifies_the_zero_claim():
    assert_says(
        page("masks"),
        present=[
            "_unmask_unattended",
            "hf_transformers_masks",
            "4.46.3",
            "hf_masking_utils_4576",
            "loud",
            "b_O",  # "unchanged" only without an output bias
        ],
    )


def test_masks_sources_its_fill_and_its_model_shapes():
    text = page("masks")
    # model shapes come from OLMo 2's card; Llama's code may be named
    assert_says(
        text,
        present=[
            "rush2018annotated",
            "olmo2_7b_card",
            "jiang2023mistral",
            "pytorch_causal_bias",
            "causal_lower_right",
            "## Causal masks when $n_q \\neq n_k$",
        ],
        absent=["-1e+09", "fill:g", "Llama 2"],
    )
    # The explorer replaced the two static alignment heatmaps; the prose that
    # introduces it still says what top-left alignment hides from new tokens.
    intro = text.split("(mask-explorer)=", 1)[1].split("```{code-cell}", 1)[0]
    assert_says(
        intro,
        present=["none of them sees its own key"],
        absent=["including themselves"],
    )
    assert_says(text, present=["mask_explorer.root()"], absent=["fig-mask-top-left"])


def test_d2ls_fill_spreads_an_empty_row_evenly_too():
    q, k, v = np.zeros((1, 2)), np.ones((4, 2)), np.eye(4)
    fill = -(10.0**masks.D2L_FILL_EXPONENT)
    empty = masks.masked_fill_attention(q, k, v, np.zeros((1, 4), bool), fill=fill)
    np.testing.assert_allclose(empty, 0.25)
    # With one allowed key, the forbidden ones get nothing.
    one = np.array([[True, False, False, False]])
    np.testing.assert_allclose(
        masks.masked_fill_attention(q, k, v, one, fill=fill), v[:1]
    )


def test_masks_keeps_the_float16_detail_in_a_dropdown_and_says_what_to_do():
    text = page("masks")
    uniform = text.split("`uniform`\n:", 1)[1].split("`unmask`\n:", 1)[0]
    dropdown = uniform.split(":::{dropdown}", 1)[1].split(":::", 1)[0]
    assert "f16_moves_from" in dropdown
    assert "f16_overflows_from" in dropdown
    assert "f16_moves_from:g" not in uniform.split(":::{dropdown}", 1)[0]
    assert "zhang2023dive" in uniform
    assert "d2l_fill" in uniform
    assert "Our recommendation" in text
    assert "mask-aware" in text.split("Our recommendation", 1)[1]
    # Cross-attention: n_q != n_k, no causal mask to align.
    assert "cross-attention" in text
    assert "vaswani2017attention" in text
    # N3: the context length rests on the model card alone.
    assert "{glue:text}`kv_seq:,.0f` tokens {cite:p}`olmo2_7b_card`" in text


def test_precision_says_what_the_simulation_stands_for():
    assert_says(
        page("precision"),
        present=[
            "pessimistic model",
            "flashattention_src_v283",
            "at the end",
            "<softmax-definition>",
            # citations sit on the bit counts, not on the computed digit counts
            "f16_bits` significant\nbits {cite:p}`ieee754_2019`",
            "one-at-a-time",
            "acc_pairwise",
        ],
        absent=[
            "within the type's rounding error at every size",
            "about three decimal digits",
            "is a bound",
            "flashattention_repo",  # the README does not say it
            "scaling page",
        ],
    )


def test_cited_keys_exist():
    bib = (DOCS / "references.bib").read_text() + "".join(
        p.read_text() for p in (DOCS / "bib").glob("*.bib")
    )
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    for name in ("steps", "masks", "precision"):
        for group in re.findall(r"\{cite:[pt]\}`([^`]+)`", page(name)):
            for key in group.split(","):
                assert key.strip() in keys, (name, key)


# --- the heatmaps: masked weights hatched, one ink per cell ----------------------


def test_weights_heatmap_hatches_the_masked_keys_like_the_logits():
    from matplotlib.patches import Rectangle

    from figures import steps as step_figures

    q, k, v = example.vectors(example.BASE_WIDTH)
    s = sdpa_ref.steps.attention_steps(q, k, v, is_causal=True)
    np.testing.assert_array_equal(s["forbidden"], ~s["allowed"])
    labels = {"row_labels": example.QUERY_NAMES, "col_labels": example.KEY_NAMES}
    weights = step_figures.heatmap_figure(
        s["weights"], "A", fmt="{:.3f}", hatched=s["forbidden"], **labels
    ).axes[0]
    logits = step_figures.heatmap_figure(s["masked"], "L", fmt="{:g}", **labels).axes[0]
    for ax in (weights, logits):
        cells = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_hatch()]
        corners = {(round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in cells}
        assert corners == set(zip(*np.nonzero(s["forbidden"]), strict=True))
    texts = {
        (round(t.get_position()[1]), round(t.get_position()[0])): t
        for t in weights.texts
    }
    for i, j in zip(*np.nonzero(s["forbidden"]), strict=True):
        assert texts[i, j].get_text() == "0.000"
    with pytest.raises(ValueError, match="hatched must have the shape"):
        step_figures.heatmap_figure(
            s["weights"], "A", hatched=s["forbidden"][:2], **labels
        )


@pytest.mark.parametrize("value", np.linspace(0, 1, 101))
def test_heatmap_digits_need_no_halo_on_any_cell(value):
    """Black or white ink reaches 4.5:1 on every colour of the map, so every
    cell's digits are drawn the same way."""
    from matplotlib import colormaps

    from figures import steps as step_figures
    from figures.style import HEATMAP_CMAP, contrast_ratio

    cell = colormaps[HEATMAP_CMAP](value)
    ink = step_figures._ink_on(cell)
    assert set(ink) == {"color"}
    assert contrast_ratio(ink["color"], cell) >= 4.5
