"""The flash page's new numbers: loop orders, causal tiles, split-KV, FLOP units."""

import re
from pathlib import Path

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import cost, flash

DOCS = Path(__file__).parents[2] / "docs"


def simulate_flash2_algorithm_1(n, d, block_rows, block_cols):
    """Numbers FlashAttention-2's Algorithm 1 reads or writes, loop by loop."""
    total = 0
    for i in range(0, n, block_rows):
        rows = min(block_rows, n - i)
        total += rows * d  # load Q_i
        for j in range(0, n, block_cols):
            total += 2 * min(block_cols, n - j) * d  # load K_j, V_j
        total += rows * d + rows  # write O_i and L_i, once
    return total


def simulate_flash1_algorithm_1(n, d, block_rows, block_cols):
    """Numbers FlashAttention's Algorithm 1 reads or writes, loop by loop."""
    total = n * d + 2 * n  # line 2: O, l, m initialised in HBM
    for j in range(0, n, block_cols):
        total += 2 * min(block_cols, n - j) * d  # line 6: K_j, V_j
        for i in range(0, n, block_rows):
            rows = min(block_rows, n - i)
            total += 2 * rows * d + 2 * rows  # line 8: Q_i, O_i, l_i, m_i
            total += rows * d + 2 * rows  # lines 12-13: O_i, l_i, m_i
    return total


@pytest.mark.parametrize(
    ("n", "d", "block_rows", "block_cols"),
    [(1000, 64, 128, 64), (4096, 64, 384, 64), (777, 32, 50, 96), (5, 3, 8, 8)],
)
def test_both_counts_walk_their_algorithms(n, d, block_rows, block_cols):
    assert flash.flash2_traffic(n, d, block_rows) == simulate_flash2_algorithm_1(
        n, d, block_rows, block_cols
    )
    assert flash.flash1_traffic(n, d, block_cols) == simulate_flash1_algorithm_1(
        n, d, block_rows, block_cols
    )


def test_the_same_tiles_flash2_moves_about_two_thirds_of_flash1():
    # Same passes, 2Nd per pass against 3Nd + 4N: the ratio tends to 2d/(3d + 4).
    m, d = 98_304, 64
    t = flash.hbm_traffic(1 << 20, d, m)
    assert t["flash2"] < t["flash"]
    assert t["flash2"] / t["flash"] == pytest.approx(2 * d / (3 * d + 4), rel=1e-3)
    assert t["leading_ratio2"] == m / (2 * d * d) == 1.5 * t["leading_ratio"]
    # The limit of standard / FlashAttention-2 is 2 B / d, a little above M / 2d².
    cols, _ = flash.block_sizes(d, m)
    assert t["ratio2"] == pytest.approx(2 * cols / d, rel=1e-3)


def test_flash2_kernel_blocks_are_the_launch_templates_on_an_a100():
    # flash_fwd_launch_template.h (v2.8.3): 128 query rows for every width,
    # 128 keys up to width 64 and 64 above; widths round up to a compiled one.
    assert {d: b[0] for d, b in flash.FLASH2_A100_BLOCKS.items()} == dict.fromkeys(
        (32, 64, 96, 128, 192, 256), 128
    )
    assert flash.flash2_kernel_blocks(1) == flash.flash2_kernel_blocks(32) == (128, 128)
    assert flash.flash2_kernel_blocks(65) == flash.FLASH2_A100_BLOCKS[96] == (128, 64)
    assert flash.flash2_kernel_blocks(256) == (128, 64)
    with pytest.raises(ValueError, match="head dimensions up to 256, got d=257"):
        flash.flash2_kernel_blocks(257)


def test_the_kernels_blocks_move_more_than_flashattentions_on_paper():
    # At 32,768 tokens and d = 64: 128-row blocks make 256 passes over K and
    # V, about 1.9 times Algorithm 1's traffic and 4 times less than standard.
    m = flash.sram_elements(flash.A100_SRAM_BYTES, 2)
    t = flash.hbm_traffic(32768, 64, m)
    assert t["kernel_passes"] == 256
    assert t["flash2_kernel"] == simulate_flash2_algorithm_1(32768, 64, 128, 128)
    assert t["flash2_kernel"] == 1_077_968_896
    assert 1.9 < t["flash2_kernel_share"] < 1.95
    assert t["flash2_share"] < 1 < t["flash2_kernel_share"]
    assert 3.98 < t["ratio2_kernel"] < t["leading_ratio2_kernel"] == 4.0
    # The limit is 2 B_r / d: it halves when d doubles.
    wide = flash.hbm_traffic(1 << 20, 128, m)
    assert wide["ratio2_kernel"] == pytest.approx(2 * 128 / 128, rel=1e-3)


def test_widths_without_a_kernel_have_no_kernel_count():
    t = flash.hbm_traffic(1 << 16, 512, 1 << 20)
    assert t["flash"] > 0
    kernel_keys = [k for k in t if "kernel" in k]
    assert len(kernel_keys) == 7
    assert all(t[k] is None for k in kernel_keys)


def test_arithmetic_intensity_is_the_roofline_of_both_counts():
    a = flash.arithmetic_intensity(4096, 64)
    t = flash.hbm_traffic(4096, 64, 98_304)
    assert a["flops"] == 4 * 4096**2 * 64
    assert a["standard_bytes"] == 2 * t["standard"]
    assert a["kernel_bytes"] == 2 * t["flash2_kernel"]
    assert a["ridge"] == (312 / 2.0, 312 / 1.5)
    for ridge, shortfall in zip(a["ridge"], a["standard_shortfall"], strict=True):
        assert shortfall == pytest.approx(ridge / a["standard_intensity"])
    # For long sequences standard attention tends to d / 2 FLOPs per byte in
    # 16-bit numbers, the kernel to B_r: the first far below the ridge, the
    # second near it.
    long = flash.arithmetic_intensity(1 << 20, 64)
    assert long["standard_intensity"] == pytest.approx(64 / 2, rel=1e-3)
    assert long["kernel_intensity"] == pytest.approx(128, rel=1e-2)
    assert (
        long["standard_intensity"] * 4 < a["ridge"][0] < long["kernel_intensity"] * 1.25
    )
    # One decoding step reads each cached key and value once: 1 FLOP a byte.
    assert a["decode_intensity"] == pytest.approx(
        4 * 4096 * 64 / (2 * (2 * 4096 * 64 + 2 * 64))
    )
    assert 0.99 < a["decode_intensity"] < 1
    # Twice the bytes a number, half the intensity.
    wide = flash.arithmetic_intensity(4096, 64, itemsize=4)
    assert wide["standard_intensity"] == pytest.approx(a["standard_intensity"] / 2)


def test_quoted_a100_throughputs_are_sixteen_to_one():
    assert flash.A100_MATMUL_TFLOPS / flash.A100_NON_MATMUL_TFLOPS == 16
    low, high = flash.FLOPS_UTILISATION["flash"]
    assert (low, high) == (25, 40)
    assert flash.FLOPS_UTILISATION["flash2"] == (50, 73)


def causal_tiles_from_the_mask(n, rows, cols):
    mask = sdpa_ref.causal_mask(n, n)
    counts = {"skipped": 0, "masked": 0, "full": 0}
    for i in range(0, n, rows):
        for j in range(0, n, cols):
            tile = mask[i : i + rows, j : j + cols]
            key = "skipped" if not tile.any() else "full" if tile.all() else "masked"
            counts[key] += 1
    return counts


@pytest.mark.parametrize(
    ("n", "rows", "cols"), [(512, 128, 128), (300, 64, 32), (100, 7, 13), (9, 16, 4)]
)
def test_causal_tiles_agree_with_the_mask(n, rows, cols):
    c = flash.causal_blocks(n, rows, cols)
    assert {k: c[k] for k in ("skipped", "masked", "full")} == (
        causal_tiles_from_the_mask(n, rows, cols)
    )
    assert c["skipped"] + c["masked"] + c["full"] == c["blocks"]


def test_causal_skipping_tends_to_half_the_tiles():
    fractions = [
        flash.causal_blocks(n, 128, 128)["computed_fraction"]
        for n in (1024, 4096, 16384, 65536)
    ]
    assert fractions == sorted(fractions, reverse=True)
    assert fractions[0] == (8 + 1) / (2 * 8)  # (T + 1) / 2T tiles, T = 8
    assert 0.5 < fractions[-1] < 0.502


@pytest.mark.parametrize("num_splits", [1, 2, 3, 7])
def test_split_kv_equals_dense_attention(num_splits):
    rng = np.random.default_rng(11)
    q, k = rng.normal(size=(2, 3, 5, 8)), rng.normal(size=(2, 3, 20, 8))
    v = rng.normal(size=(2, 3, 20, 4))
    out, lse, splits = flash.split_kv_attention(q, k, v, num_splits)
    dense, dense_lse = sdpa_ref.attention(q, k, v, return_lse=True)
    np.testing.assert_allclose(out, dense, atol=1e-14)
    np.testing.assert_allclose(lse, dense_lse, atol=1e-13)
    assert len(splits) == num_splits
    assert splits[0]["first_key"] == 0
    assert splits[-1]["last_key"] == 19
    np.testing.assert_allclose(sum(s["weight"] for s in splits), 1.0, atol=1e-14)


def test_a_split_that_sees_no_key_has_lse_minus_inf_and_weight_zero():
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=shape) for shape in ((4, 3), (6, 3), (6, 2)))
    mask = sdpa_ref.causal_mask(4, 6)  # query 0 sees key 0 only
    mask[3] = False  # query 3 sees nothing at all
    out, lse, splits = flash.split_kv_attention(q, k, v, 2, mask=mask)
    assert np.isneginf(splits[1]["lse"][0])
    assert splits[1]["weight"][0] == 0.0
    assert np.isneginf(lse[3])
    assert (out[3] == 0.0).all()
    dense = sdpa_ref.attention(q, k, v, mask=mask, empty_rows="zero")
    np.testing.assert_allclose(out, dense, atol=1e-14)


def test_split_kv_rejects_bad_arguments():
    q = k = v = np.ones((2, 3))
    with pytest.raises(ValueError, match="num_splits must be at most"):
        flash.split_kv_attention(q, k, v, 3)
    with pytest.raises(TypeError, match="mask must be boolean"):
        flash.split_kv_attention(q, k, v, 1, mask=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="does not broadcast"):
        flash.split_kv_attention(q, k, v, 1, mask=np.ones((3, 3), bool))


def test_flops_are_two_per_multiply_add():
    assert cost.FLOPS_PER_MULTIPLY_ADD == 2
    assert sdpa_ref.cost.attention_flops(3, 5, 4, 2, heads=2) == 2 * 2 * 3 * 5 * 6
    rows = sdpa_ref.cost.cost_table([128, 256])
    assert all(r["flops"] == 2 * r["macs"] for r in rows)


def test_figure_2_recount_matches_its_authors_numbers():
    f = flash.figure_2_matmul_flops()
    assert f["forward"] * 1e9 == 2**38  # 4 N² d FLOPs for 16 x 64 heads
    for name, quoted in flash.FIGURE_2_RECOUNT_GFLOPS.items():
        assert abs(f[name] - quoted) < 1  # 824.6 and 962.1 against 825 and 963
    assert f["ratio"] == pytest.approx(7 / 6)
    # The printed figure's ratio is near it; its absolute GFLOPs are not.
    assert flash.figure_2_ratios()["extra_flops"] == pytest.approx(75.2 / 66.6)
    assert f["standard"] / flash.FIGURE_2["standard"]["gflops"] > 12


def page(name):
    return (DOCS / name).read_text()


def test_the_flash_page_teaches_what_issue_15_asked_for():
    text = page("flash.md")
    assert "(split-kv)=\n\n## " in text
    assert "{cite:p}`flashdecoding2023`" in text
    assert "{cite:p}`flashattention_issue741`" in text
    assert "{cite:p}`flashattention_splitkv`" in text
    assert "online_softmax.root()" in text  # the stepper took the tiling figure's place
    assert "causal_blocks" in text
    assert "leading_ratio2" in text
    assert r"\text{FA-2:}&\quad 2Nd + N + 2Nd\,T_r" in text
    # FlashAttention-2's causal skipping is cited to its section.
    assert "Section 3.1.1" in text


def test_units_are_stated_once_on_the_cost_page_and_linked_from_flash():
    cost_page, flash_page = page("cost.md"), page("flash.md")
    assert "(flops)=" in cost_page
    assert "(flops)=" not in flash_page
    assert "{ref}`flops`" in flash_page or "<flops>`" in flash_page


def what_to_read_next(text):
    section = text.split("\n## What to read next\n", 1)[1]
    return re.findall(r"\]\(([a-z-]+)\.md\)", section)[0]


def test_reading_order_follows_the_sidebar():
    assert what_to_read_next(page("cost.md")) == "flash"
    assert what_to_read_next(page("flash.md")) == "testing"


def test_bib_entries_name_their_sources_exactly():
    bib = (DOCS / "bib" / "flash.bib").read_text()
    assert "issues/741" in bib
    assert "c6a608850f946ebd28d2d21f52c9471513428079" in bib  # the blog post
    assert "0251105a2fb19d2957484b7f023cd8c115286ced" in bib  # the kernel code


@pytest.mark.slow
def test_the_tiling_figure_is_small_steady_and_readable_on_a_phone():
    from matplotlib.colors import to_rgb

    from figures import style, tiling

    svg = style.svg_bytes(tiling.tiling_figure())
    assert svg == style.svg_bytes(tiling.tiling_figure())  # byte for byte
    assert len(svg) <= 60_000
    text = svg.decode()
    width_pt = float(re.search(r'<svg[^>]*\swidth="([\d.]+)pt"', text).group(1))
    assert width_pt <= style.PAGE_WIDTH * 72 + 1e-9
    # Labels stay text (figures._svg): each <text> has a class whose rule sets
    # its size in points, and none is a mathtext run of <tspan>s, so there are
    # no smaller sub- or superscripts (see the phone test).
    size = {c: float(px) for c, px in re.findall(r"\.(t\d+)\{font:([\d.]+)px ", text)}
    labels = re.findall(r"<text( class=\"(t\d+)\")?[^>]*>", text)
    assert len(labels) >= 15
    assert all(cls for _, cls in labels)
    assert "<tspan" not in text
    assert min(size[cls] for _, cls in labels) >= style.MIN_FONT_PT
    fig = tiling.tiling_figure()
    fills = {p.get_facecolor()[:3] for p in fig.axes[0].patches if p.get_fill()}
    palette = {tuple(round(c, 6) for c in to_rgb(k)) for k in style.KEY_COLORS}
    assert palette <= {tuple(round(c, 6) for c in f) for f in fills}


def test_the_tiling_figure_rejects_a_block_outside_the_matrix():
    from figures import tiling

    with pytest.raises(ValueError, match="query_block and key_block"):
        tiling.tiling_figure(blocks=4, key_block=4)
