"""Cost and FlashAttention pages: HBM counts, gradients, quoted numbers, figure."""

import re
from pathlib import Path

import numpy as np
import pytest

import sdpa_ref
from figures import memory, tables
from sdpa_ref import flash

DOCS = Path(__file__).parents[2] / "docs"


def simulate_algorithm_1(n, d, m):
    """Numbers read or written by Algorithm 1, walking its loops line by line."""
    cols, rows = flash.block_sizes(d, m)
    total = n * d + 2 * n  # line 2: O, l, m initialised in HBM
    for j in range(0, n, cols):
        kv_rows = min(cols, n - j)
        total += 2 * kv_rows * d  # line 6: K_j, V_j
        for i in range(0, n, rows):
            r = min(rows, n - i)
            total += 2 * r * d + 2 * r  # line 8: Q_i, O_i, l_i, m_i
            total += r * d  # line 12: O_i
            total += 2 * r  # line 13: l_i, m_i
    return total


@pytest.mark.parametrize(
    ("n", "d", "m"), [(2048, 64, 98_304), (1000, 64, 49_152), (900, 128, 98_304)]
)
def test_hbm_traffic_counts_every_line_of_algorithm_1(n, d, m):
    t = flash.hbm_traffic(n, d, m)
    assert t["flash"] == simulate_algorithm_1(n, d, m)
    # Algorithm 0: S and P written and read once each, Q, K, V read, O written.
    assert t["standard"] == 4 * n * n + 4 * n * d


def test_hbm_ratio_tends_to_m_over_three_d_squared():
    m, d = 98_304, 64
    ratios = [flash.hbm_traffic(n, d, m)["ratio"] for n in (2048, 8192, 1 << 20)]
    assert ratios == sorted(ratios)  # climbs with N
    assert (
        ratios[-1] < m / (3 * d * d) == flash.hbm_traffic(2048, d, m)["leading_ratio"]
    )
    # l and m add 4N per pass: the limit is 4 B_c / (3 d + 4).
    cols, _ = flash.block_sizes(d, m)
    assert ratios[-1] == pytest.approx(4 * cols / (3 * d + 4), rel=1e-3)


@pytest.mark.parametrize(("n", "d", "m"), [(1024, 64, 98_304), (64, 64, 32)])
def test_hbm_traffic_keeps_theorem_2s_range(n, d, m):
    with pytest.raises(ValueError, match="d <= M <= N d"):
        flash.hbm_traffic(n, d, m)


def test_blocks_fit_the_sram_and_a100_numbers():
    m16 = flash.sram_elements(flash.A100_SRAM_BYTES, 2)
    assert m16 == 2 * flash.sram_elements(flash.A100_SRAM_BYTES, 4) == 98_304
    for d in (32, 64, 128):
        cols, rows = flash.block_sizes(d, m16)
        assert rows == min(cols, d)
        assert 4 * (cols - 1) * d < m16 <= 4 * cols * d  # ceil(M / 4d)


def loss_grad_numeric(q, k, v, do, name, eps=1e-6):
    """Central differences of sum(dO * attention(q, k, v)) in one input."""
    args = {"q": q, "k": k, "v": v}
    x = args[name]
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[idx] += eps
        minus[idx] -= eps
        f_plus = (do * sdpa_ref.attention(**{**args, name: plus})).sum()
        f_minus = (do * sdpa_ref.attention(**{**args, name: minus})).sum()
        grad[idx] = (f_plus - f_minus) / (2 * eps)
    return grad


def test_dense_gradients_match_finite_differences():
    rng = np.random.default_rng(7)
    q, k = rng.normal(size=(3, 4)), rng.normal(size=(5, 4))
    v, do = rng.normal(size=(5, 2)), rng.normal(size=(3, 2))
    grads = sdpa_ref.attention_backward(q, k, v, do)
    for name in ("q", "k", "v"):
        np.testing.assert_allclose(
            getattr(grads, "d" + name), loss_grad_numeric(q, k, v, do, name), atol=1e-8
        )


# tiled == dense for any block size and options: tests/test_properties.py.


def test_gradient_check_keeps_n_numbers_instead_of_n_squared():
    c = flash.gradient_check(128, 16, 32)
    assert c["saved"] == 128
    assert c["weights"] == 128 * 128
    assert c["largest_block"] == 128 * 32
    assert c["max_abs_diff"] < 1e-12


def test_quoted_numbers_and_their_ratios():
    # The NeurIPS 2022 version, which the page cites; arXiv's v2 differs.
    assert flash.FIGURE_2["standard"] == {
        "gflops": 66.6,
        "hbm_gb": 35.3,
        "runtime_ms": 35.1,
    }
    assert flash.FIGURE_2["flash"] == {
        "gflops": 75.2,
        "hbm_gb": 4.4,
        "runtime_ms": 11.7,
    }
    r = flash.figure_2_ratios()
    assert r["extra_flops"] == pytest.approx(75.2 / 66.6)
    assert r["less_traffic"] == pytest.approx(35.3 / 4.4)
    assert r["speedup"] == pytest.approx(35.1 / 11.7)
    v2 = flash.figure_2_ratios(flash.FIGURE_2_ARXIV_V2)
    assert v2["less_traffic"] == pytest.approx(40.3 / 4.4)
    assert v2["speedup"] == pytest.approx(41.7 / 7.3)
    assert flash.README_MEMORY_SAVINGS == {2048: 10, 4096: 20}
    assert flash.A100_HBM_GB == (40, 80)
    assert flash.A100_SRAM_BYTES == 192 * 1024


def test_model_score_bytes_is_every_head_of_every_layer():
    shape = sdpa_ref.cost.OLMO_2_7B
    one = sdpa_ref.cost.score_bytes(4096, 4096, itemsize=2)
    whole = sdpa_ref.cost.model_score_bytes(
        4096, layers=shape["layers"], heads=shape["heads"]
    )
    assert whole == shape["layers"] * shape["heads"] * one == 32 * 2**30


def sweep_rows():
    n = np.array([256, 512, 1024, 2048, 4096])
    return [
        {"n": int(x), "dense_bytes": 8 * x * x + 2**19, "tiled_bytes": 3000 * x + 2**19}
        for x in n
    ]


def test_memory_figure_guides_sit_beside_their_lines_as_the_alt_text_says():
    fig = memory.peak_memory_figure(sweep_rows())
    dense, tiled, steep, shallow = fig.axes[0].get_lines()
    assert steep.get_linestyle() == ":"
    assert shallow.get_linestyle() == "--"
    assert (steep.get_ydata() > dense.get_ydata()).all()
    assert (shallow.get_ydata() < tiled.get_ydata()).all()
    alt = re.search(
        r"```\{glue:figure\} fig_peak_memory\n:alt: (.*)",
        (DOCS / "cost.md").read_text(),
    ).group(1)
    assert "dotted n-squared guide drawn just above" in alt
    assert "dashed n guide drawn just below" in alt


def test_tables_of_the_flash_page():
    rows = [flash.hbm_traffic(2048, 64, 98_304)]
    assert (
        tables.traffic_markdown(rows).splitlines()[-1]
        == "| 2,048 | 17.3 | 6.2× | 9.4× | 3.9× |"
    )
    table = tables.tradeoff_markdown(flash.FIGURE_2, flash.figure_2_matmul_flops())
    assert "| HBM reads and writes (GB) | 35.3 | 4.4 |" in table
    assert "| GFLOPs, as printed | 66.6 | 75.2 |" in table
    assert "| GFLOPs, matrix products (recount) | 824.6 | 962.1 |" in table


def test_the_cost_table_counts_multiply_adds_and_fits_a_phone():
    table = tables.cost_markdown(sdpa_ref.cost.cost_table([1024, 2048], itemsize=2))
    assert table.splitlines()[0].count("|") == 5  # four columns
    assert table.splitlines()[-1] == "| 2,048 | 536.9 M | 8 MiB | 4× |"


def test_online_softmax_lives_on_the_flash_page_only():
    cost, flash_page = (DOCS / "cost.md").read_text(), (DOCS / "flash.md").read_text()
    assert "(online-softmax)=" in flash_page
    assert "(online-softmax)=" not in cost
    assert "{ref}`online-softmax`" in cost
    assert "online_softmax_trace" not in cost
    assert "{cite:p}`milakov2018online`" in flash_page


def test_a100_memory_as_the_paper_and_nvidia_state_it():
    assert flash.A100_SRAM_KB == 192
    assert flash.A100_SRAM_BYTES == flash.A100_SRAM_KB * 1024
    # Configurable shared memory is at most 164 KB of the 192: M is an upper bound.
    assert flash.A100_SHARED_MEMORY_MAX_KB < flash.A100_SRAM_KB


def test_the_a100_sizes_are_stated_once_and_linked_from_the_cost_page():
    cost, flash_page = (DOCS / "cost.md").read_text(), (DOCS / "flash.md").read_text()
    assert "a100_hbm" not in cost
    assert "{ref}`FlashAttention page <gpu-memory>`" in cost
    assert "(gpu-memory)=" in flash_page
    assert "(whole-model-scores)=\n\n## " in cost


def test_the_flash_page_names_the_log_sum_exp_apart_from_the_logits():
    page = (DOCS / "flash.md").read_text()
    assert r"\mathrm{lse}_i = m_i + \log \ell_i" in page
    assert "L_i = m_i" not in page
    assert "{cite:p}`shah2024flashattention3`" in page
    # The README's memory savings sit beside the memory measurement.
    cost_page = (DOCS / "cost.md").read_text()
    assert "{cite:p}`flashattention_readme_2022`" in cost_page
    assert "flashattention_readme_2022" not in page
    assert "{cite:p}`nvidia_ampere_tuning`" in page
    bib = (DOCS / "bib" / "cost.bib").read_text()
    assert "dc6d1300880cbedaf19234fb3fe5b04372f9d0ff" in bib
    assert "83f13fa96922cf4c84d6bc8ec9d28c603b53f861" in bib
