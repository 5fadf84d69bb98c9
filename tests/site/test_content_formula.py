"""The claims of the formula, similarity and landing pages, each computed."""

import re
from pathlib import Path

import numpy as np
import pytest

import sdpa_ref
from figures import formulas, tables
from sdpa_ref import example
from sdpa_ref.similarity import distance_decomposition

DOCS = Path(__file__).parents[2] / "docs"
RNG = np.random.default_rng(20260129)


# -- heads and head width -----------------------------------------------------


def test_original_transformer_head_width_is_64_and_divisor_8():
    # Vaswani et al. 2017, Section 3.2.2: d_k = d_v = d_model / h = 64.
    d_k = example.head_width(example.TRANSFORMER_D_MODEL, example.TRANSFORMER_HEADS)
    assert (example.TRANSFORMER_D_MODEL, example.TRANSFORMER_HEADS) == (512, 8)
    assert d_k == 64
    assert example.scale_divisor(d_k) == 8.0


@pytest.mark.parametrize(("heads", "width"), [(1, 512), (4, 128), (16, 32), (32, 16)])
def test_head_width_matches_table_3_rows_a(heads, width):
    # Table 3, rows (A): h and d_k vary together at d_model = 512.
    assert example.head_width(512, heads) == width


def test_head_width_rejects_uneven_splits_and_bad_input():
    with pytest.raises(ValueError, match="divide"):
        example.head_width(512, 3)
    with pytest.raises(ValueError, match="at least 1"):
        example.head_width(512, 0)
    with pytest.raises(TypeError):
        example.head_width(512.0, 8)
    with pytest.raises(TypeError):
        example.scale_divisor(True)


# -- the cross-attention example --------------------------------------------


def test_cross_attention_sizes_all_differ_and_values_are_not_an_identity():
    q, k, v = example.cross_attention_vectors()
    n_q, d_k = q.shape
    n_k, d_v = v.shape
    assert k.shape == (n_k, d_k)
    assert n_q != n_k
    assert d_v not in {n_k, d_k}
    # Not unit vectors: some value row has more than one nonzero coordinate.
    assert np.count_nonzero(v, axis=1).max() > 1


def test_cross_attention_output_is_a_mixture_of_value_rows():
    q, k, v = example.cross_attention_vectors()
    steps = sdpa_ref.steps.attention_steps(q, k, v)
    np.testing.assert_allclose(steps["output"], steps["weights"] @ v)
    assert steps["output"].shape == (q.shape[0], v.shape[1])
    # Each output row lies strictly inside the span of several value rows:
    # no weight is 0 or 1, so no output simply copies one value.
    assert np.all((steps["weights"] > 0.01) & (steps["weights"] < 0.99))


def test_dropping_a_key_keeps_the_output_shape():
    q, k, v = example.cross_attention_vectors()
    assert (
        sdpa_ref.attention(q, k[:2], v[:2]).shape == sdpa_ref.attention(q, k, v).shape
    )


# -- softmax and temperature --------------------------------------------------


def test_softmax_is_the_fraction_of_exponentials():
    s = np.array([2.0, 0.0, 1.0, -2.0])
    np.testing.assert_allclose(sdpa_ref.softmax(s), np.exp(s) / np.exp(s).sum())


def test_softmax_ignores_a_shift_of_the_row():
    s = RNG.normal(size=(5, 7))
    np.testing.assert_allclose(sdpa_ref.softmax(s + 100.0), sdpa_ref.softmax(s))


def test_scaled_attention_is_softmax_at_temperature_sqrt_dk():
    q, k, v = example.vectors(16)
    _, w = sdpa_ref.attention(q, k, v, return_weights=True)
    tau = example.scale_divisor(16)
    np.testing.assert_allclose(w, sdpa_ref.softmax(q @ k.T / tau))


def test_higher_temperature_is_flatter_and_keeps_the_order():
    weights, entropies = sdpa_ref.spread.temperature_sweep(
        [4, 0, 2, -4], [0.5, 1, 2, 8]
    )
    assert np.all(np.diff(entropies) > 0)
    assert np.all(np.diff(weights[:, 0]) < 0)  # K0, the top key, loses weight
    for row in weights:
        assert list(np.argsort(row)) == list(np.argsort(weights[0]))


def test_softmax_fraction_typesets_the_computed_weight():
    c = example.compare(0, 4)
    latex = formulas.softmax_fraction(c.scaled_scores, 0, c.scaled_weights[0])
    assert latex.endswith("= 0.657")
    assert latex.count("e^{") == 5


def test_value_mixture_typesets_one_term_per_value_row():
    q, k, v = example.cross_attention_vectors()
    steps = sdpa_ref.steps.attention_steps(q, k, v)
    latex = formulas.value_mixture(steps["weights"][0], v, steps["output"][0])
    assert latex.count(r"\left[") == v.shape[0] + 1
    assert latex.startswith(r"\begin{aligned}")


# -- the distance identity ----------------------------------------------------


@pytest.mark.parametrize("d", [1, 4, 64])
def test_distance_identity_holds_for_random_vectors(d):
    q = RNG.normal(size=d)
    k = RNG.normal(size=(6, d))
    parts = distance_decomposition(q, k)
    np.testing.assert_allclose(
        parts["neg_half_sq_distance"],
        parts["dot"] - parts["half_sq_norm_q"] - parts["half_sq_norm_k"],
    )
    np.testing.assert_allclose(parts["dot"], k @ q)
    np.testing.assert_allclose(
        parts["neg_half_sq_distance"], -0.5 * np.linalg.norm(q - k, axis=1) ** 2
    )


def test_dot_product_attention_is_distance_attention_plus_a_key_bias():
    q = RNG.normal(size=8)
    k = RNG.normal(size=(5, 8)) * RNG.uniform(0.5, 3.0, size=(5, 1))
    parts = distance_decomposition(q, k)
    dot_weights = sdpa_ref.softmax(parts["dot"])
    # The query term is a shift of the whole row: the softmax drops it.
    np.testing.assert_allclose(
        dot_weights,
        sdpa_ref.softmax(parts["neg_half_sq_distance"] + parts["half_sq_norm_k"]),
    )
    # Without the key bias the weights differ, because the keys' lengths differ.
    assert not np.allclose(dot_weights, sdpa_ref.softmax(parts["neg_half_sq_distance"]))


def test_equal_key_lengths_make_distance_and_dot_attention_agree():
    q, k, _ = example.vectors(4)
    parts = distance_decomposition(q[0], k)
    assert np.ptp(parts["half_sq_norm_k"]) == 0
    np.testing.assert_allclose(
        sdpa_ref.softmax(parts["dot"]),
        sdpa_ref.softmax(parts["neg_half_sq_distance"]),
    )


def test_a_longer_query_is_a_lower_temperature():
    raw = example.raw_scores(4)[0]
    np.testing.assert_allclose(
        sdpa_ref.softmax(2 * raw), sdpa_ref.spread.temperature_sweep(raw, [0.5])[0][0]
    )


def test_doubling_k2_ties_it_with_k0_for_dot_but_not_for_distance():
    q, k, _ = example.vectors(4)
    k[2] = 2 * k[2]
    parts = distance_decomposition(q[0], k)
    assert parts["dot"][0] == parts["dot"][2]
    assert parts["neg_half_sq_distance"][0] > parts["neg_half_sq_distance"][2]


def test_distance_decomposition_checks_shapes():
    with pytest.raises(ValueError, match="same width"):
        distance_decomposition([1.0, 2.0], [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="one vector"):
        distance_decomposition([[1.0, 2.0]], [1.0, 2.0])


# -- the authored queries ---------------------------------------------------------


def test_q1_near_tie_is_k2_and_k3_exactly_and_k0_one_ahead():
    raw = example.raw_scores(4)[1]
    assert raw[2] == raw[3]
    assert raw[0] - raw[2] == 1
    assert raw.argmax() == 0
    assert raw[1] < raw[2]


def test_k2_and_k3_are_perpendicular_but_equally_close_to_q1():
    q, k, _ = example.vectors(4)
    assert float(sdpa_ref.similarity.cosine_similarity(k[2], k[3])) == 0.0
    assert float(sdpa_ref.similarity.cosine_similarity(q[1], k[2])) == pytest.approx(
        float(sdpa_ref.similarity.cosine_similarity(q[1], k[3]))
    )


def test_scaled_weights_one_step_up_equal_unscaled_at_the_start():
    start, step_up = example.WIDTHS[:2]
    np.testing.assert_allclose(
        example.compare(0, step_up).scaled_weights,
        example.compare(0, start).raw_weights,
    )
    assert step_up / start == example.scale_divisor(step_up)


# -- the pages ------------------------------------------------------------------


@pytest.mark.parametrize(
    "label",
    [
        "softmax-definition",
        "logits-and-temperature",
        "heads-and-width",
        "where-qkv-come-from",
    ],
)
def test_formula_page_defines_each_term_under_its_label(label):
    text = (DOCS / "formula.md").read_text()
    assert f"({label})=\n\n## " in text


def test_similarity_page_does_not_claim_the_old_near_tie():
    text = (DOCS / "similarity.md").read_text()
    assert "near-tie between K0" not in text
    assert "K2 and K3 tie exactly" in text


def test_landing_map_follows_the_sidebar_and_speaks_to_the_reader():
    text = (DOCS / "index.md").read_text()
    assert "beyond the text" not in text.lower()
    map_section = text.split("## A map of this site", 1)[1].split("\n## ", 1)[0]
    groups = re.findall(r"^### (.+)$", map_section, re.M)
    assert groups == [
        "How attention computes",
        "Attention in real kernels",
        "Changing the recipe",
        "Reference",
    ]
    pages = re.findall(r"^\[[^\]]+\]\(([\w-]+)\.md\)$", map_section, re.M)
    sidebar = [
        line
        for block in re.findall(r"```\{toctree\}\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line and not line.startswith(":")
    ]
    assert pages == sidebar
    assert sidebar[:5] == ["formula", "similarity", "scaling", "training", "steps"]


# -- the landing page's output sentence ------------------------------------------


def test_flatter_weights_move_the_output_from_k0s_value_towards_the_mean():
    c = example.compare(0, 4)
    _, _, v = example.vectors(4)
    mean = example.compare(3, 4).raw_output  # Q3's even weights
    np.testing.assert_allclose(mean, v.mean(axis=0))
    np.testing.assert_array_equal(mean, [0.0, 0.25])
    np.testing.assert_array_equal(v[0], [3.0, 1.0])
    raw, scaled = c.raw_output, c.scaled_output
    assert np.linalg.norm(raw - v[0]) < np.linalg.norm(scaled - v[0])
    assert np.linalg.norm(scaled - mean) < np.linalg.norm(raw - mean)
    assert [f"{x:.2f}" for x in raw] == ["2.70", "0.68"]
    assert [f"{x:.2f}" for x in scaled] == ["2.09", "0.43"]


def test_fallback_alt_text_k3_gains_only_slightly():
    c = example.compare(0, 4)
    assert f"{c.raw_weights[3]:.3f}" == "0.000"
    assert f"{c.scaled_weights[3]:.3f}" == "0.012"
    gains = c.scaled_weights - c.raw_weights
    assert gains[1] > 0.07
    assert gains[2] > 0.1
    assert gains[3] < 0.012


def test_cross_mixture_from_rounded_weights_can_miss_the_last_digit():
    q, k, v = example.cross_attention_vectors()
    steps = sdpa_ref.steps.attention_steps(q, k, v)
    w, out = steps["weights"][0], steps["output"][0]
    assert f"{out[0]:.3f}" == "1.376"
    assert f"{w.round(3) @ v[:, 0]:.3f}" == "1.375"


def test_landing_map_lists_the_kv_cache_under_masks():
    text = (DOCS / "index.md").read_text()
    entry = text.split("[Masks and their conventions](masks.md)", 1)[1].split("\n\n")[0]
    assert "key-value cache" in entry


# -- reading order and the landing page's prose ------------------------------------

SIDEBAR = [
    "formula",
    "similarity",
    "scaling",
    "training",
    "steps",
    "masks",
    "precision",
    "cost",
    "flash",
    "testing",
    "variants",
]


def _read_next(page):
    text = (DOCS / f"{page}.md").read_text()
    return text.split("\n## What to read next\n", 1)[1]


@pytest.mark.parametrize("page", ["index", "formula", "similarity", "scaling", "steps"])
def test_what_to_read_next_leads_to_the_next_page_of_the_sidebar(page):
    order = ["index", *SIDEBAR]
    following = order[order.index(page) + 1]
    links = re.findall(r"\]\(([\w-]+)\.md[#)]", _read_next(page))
    assert links, page
    assert links[0] == following, (page, links)
    # Links further on go forward through the sidebar, never back.
    pages = [link for link in links if link in SIDEBAR]
    positions = [SIDEBAR.index(link) for link in pages]
    assert positions == sorted(positions), (page, pages)


def test_landing_read_next_is_prose_not_a_broken_definition_list():
    section = _read_next("index").split("```{toctree}", 1)[0]
    assert not re.search(r"^: ", section, re.M)
    assert "[References](references.md)" in section


def test_landing_counts_the_things_it_lists():
    text = (DOCS / "index.md").read_text()
    paragraph = text.split("things are worth noticing.", 1)
    assert paragraph[0].rstrip().endswith("Four")
    # The four: order kept, weights less extreme, entropy up, output moved.
    body = paragraph[1].split("\n\n", 1)[0]
    for claim in ("did not change", "less", "entropy", "output"):
        assert claim in body


# -- the similarity page's angle figure ------------------------------------------


def test_longer_vectors_score_higher_below_90_degrees_and_lower_past_it():
    below, above = np.radians([60.0]), np.radians([120.0])
    short, long = (1, 1), (3, 2)
    assert sdpa_ref.similarity.score_from_angle(
        below, *long
    ) > sdpa_ref.similarity.score_from_angle(below, *short)
    assert sdpa_ref.similarity.score_from_angle(
        above, *long
    ) < sdpa_ref.similarity.score_from_angle(above, *short)
    # What grows is the magnitude, on both sides of the right angle.
    angles = np.radians(np.linspace(0, 180, 19))
    assert np.all(
        np.abs(sdpa_ref.similarity.score_from_angle(angles, *long))
        >= np.abs(sdpa_ref.similarity.score_from_angle(angles, *short))
    )
    text = (DOCS / "similarity.md").read_text()
    assert "scores\nhigher when the vectors are longer" not in text
    assert "lower past it" in text


# -- item 6 and 7: what the divisor sets, and the head width as a choice ----------


def test_formula_page_sources_the_step_size_and_the_decoupled_head_width():
    text = (DOCS / "formula.md").read_text()
    temperature = text.split("(logits-and-temperature)=", 1)[1].split("\n## ", 2)[1]
    # Tensor Programs V and μP are explained once, on the training page.
    assert "yang2022tensor" not in temperature
    assert "(training.md#a-smaller-learning-rate)" in temperature
    assert "yang2022tensor" in (DOCS / "training.md").read_text()
    # The divisor follows the head width in the formula, not in every model.
    assert "not tuned by hand, although some models choose it" in temperature
    assert "[Gemma 2 27B](#heads-and-width)" in temperature
    heads = text.split("(heads-and-width)=", 1)[1].split("\n## ", 2)[1]
    assert "{cite:p}`gemma2024gemma2` (Table 1)" in heads
    assert "`query_pre_attn_scalar`" in heads
    assert "{cite:p}`gemma_pytorch`" in heads
    assert "gemma27 = head_rows[3]" in heads
    assert example.head_width_rows()[3]["name"] == "Gemma 2 27B"
    # The page glues row 2 as "its 9B model".
    assert example.head_width_rows()[2]["name"] == "Gemma 2 9B"
    assert "gemma9 = head_rows[2]" in heads
    assert "choice" in heads
    assert "{cite:p}`pytorch_attention_api`" in heads


def test_row_mixture_writes_the_projected_query_as_weighted_rows():
    p = example.projection_example()
    text = tables.row_mixture(p["X"][0], p["W_Q"], p["Q"][0])
    assert text == "1·[1, 0] + 0·[0, 1] + 1·[1, 1] + 0·[0, −1] = [2, 1]"


# -- the batch-and-heads layout against PyTorch -------------------------------------


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip(
        "torch",
        reason="torch is not installed; `nox -s parity` installs torch==2.13.0 (CPU)",
    )


def _page_layout(X, W_Q, W_K, W_V, W_O, heads, **options):
    """The formula page's split, attention and concatenation, as its doctest."""
    B, n, _ = X.shape
    d_k, d_v = W_Q.shape[1] // heads, W_V.shape[1] // heads

    def split(t, width):
        return t.reshape(B, n, heads, width).transpose(0, 2, 1, 3)

    out = sdpa_ref.attention(
        split(X @ W_Q, d_k), split(X @ W_K, d_k), split(X @ W_V, d_v), **options
    )
    return out.transpose(0, 2, 1, 3).reshape(B, n, heads * d_v) @ W_O


def _torch_multihead(torch, B, n, d_model, heads):
    """Random X and W_Q, W_K, W_V, W_O, and torch's MultiheadAttention with them.

    Batch first, in float64, without biases.
    """
    X = RNG.normal(size=(B, n, d_model))
    W_Q, W_K, W_V, W_O = RNG.normal(size=(4, d_model, d_model))
    mha = torch.nn.MultiheadAttention(
        d_model, heads, bias=False, batch_first=True, dtype=torch.float64
    )
    with torch.no_grad():
        mha.in_proj_weight.copy_(
            torch.from_numpy(np.concatenate([W_Q.T, W_K.T, W_V.T]))
        )
        mha.out_proj.weight.copy_(torch.from_numpy(W_O.T))
    return X, (W_Q, W_K, W_V, W_O), mha


@pytest.mark.torch
def test_page_layout_is_torch_multihead_attention(torch):
    n, heads = 6, 2
    X, weights, mha = _torch_multihead(torch, 2, n, 8, heads)
    with torch.no_grad():
        x = torch.from_numpy(X)
        causal = torch.ones(n, n, dtype=torch.bool).triu(1)  # True = masked, in MHA
        ours = _page_layout(X, *weights, heads, is_causal=True)
        theirs, _ = mha(x, x, x, attn_mask=causal, need_weights=False)
    np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.torch
def test_sdpa_masks_scale_and_dropout_read_as_the_page_says(torch):
    F = torch.nn.functional
    q, k, v = (RNG.normal(size=(2, 3, n, 4)) for n in (5, 7, 7))
    allowed = RNG.random((5, 7)) < 0.6
    allowed[:, 0] = True  # every query keeps a key
    t = {name: torch.from_numpy(a) for name, a in (("q", q), ("k", k), ("v", v))}
    additive = np.where(allowed, 0.0, -np.inf)
    ours = sdpa_ref.attention(q, k, v, mask=allowed)
    np.testing.assert_allclose(ours, sdpa_ref.attention(q, k, v, mask=additive))
    for mask in (allowed, additive):  # True = may attend; floats are added
        theirs = F.scaled_dot_product_attention(
            t["q"], t["k"], t["v"], attn_mask=torch.from_numpy(mask)
        )
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-12, atol=1e-12)
    # scale=None is 1/sqrt(E); scale=1.0 is unscaled, in both.
    for scale in (None, 1.0, 1 / np.sqrt(q.shape[-1])):
        theirs = F.scaled_dot_product_attention(t["q"], t["k"], t["v"], scale=scale)
        np.testing.assert_allclose(
            sdpa_ref.attention(q, k, v, scale=scale), theirs.numpy(), rtol=1e-12
        )
    # dropout_p is applied whenever it is above 0, outside training too.
    with torch.no_grad():
        dropped = F.scaled_dot_product_attention(t["q"], t["k"], t["v"], dropout_p=0.5)
    assert not np.allclose(dropped.numpy(), sdpa_ref.attention(q, k, v))


@pytest.mark.torch
def test_multihead_key_padding_mask_marks_padding_with_true(torch):
    heads = 2
    X, weights, mha = _torch_multihead(torch, 2, 4, 8, heads)
    padding = np.array([[False, False, False, True], [False, False, True, True]])
    with torch.no_grad():
        x = torch.from_numpy(X)
        theirs, _ = mha(x, x, x, key_padding_mask=torch.from_numpy(padding))
    # The same pairs in SDPA's (and sdpa_ref's) convention: True = may attend.
    allowed = ~padding[:, None, None, :]
    ours = _page_layout(X, *weights, heads, mask=allowed)
    np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_every_head_at_once_keeps_d_v_apart_from_d_k():
    """The doctest concatenates h·d_v wide and sizes W_O as h·d_v × d_model,
    with d_v ≠ d_k, so that a slip between the two would fail it."""
    text = (DOCS / "formula.md").read_text()
    block = text.split("(heads-at-once)=", 1)[1].split("```python\n", 1)[1]
    block = block.split("```", 1)[0]
    assert ">>> d_k, d_v = 4, 3" in block
    assert "concat.reshape(B, n, h * d_v)" in block
    assert ">>> W_O = rng.normal(size=(h * d_v, d_model))" in block
    assert "h * d_k)" not in block.split("W_V")[1]
