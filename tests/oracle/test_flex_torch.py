"""FlexAttention against sdpa_ref: the CPU forward, and autograd through mods.

Two checks, both run by ``nox -s parity`` (REQUIRE_TORCH=1):

- torch 2.13's ``flex_attention`` on the CPU, in float32 and float64, with
  the six mods of FlexAttention's documentation (causal, sliding window,
  prefix LM, document masking, ALiBi, soft-capping) and two compositions,
  written as FlexAttention's notebook and attention-gym write them
  (examples/flex_attn.ipynb and attn_gym/ at commit 7fdb85d0), against
  sdpa_ref given its own ready mods. Output and log-sum-exp must pass
  sdpa_ref.testing's verdict (its error bound in float32 and float64) and
  FlashAttention's rule: the kernel's error at most twice the error of the
  same computation done densely in the kernel's dtype, plus the rounding
  of one addition.
- torch autograd through a dense float64 emulation of attention with the
  same mods (FlexAttention's backward does not run on the CPU) against
  sdpa_ref's backward, dense and tiled, to 1e-12, parameters included.
"""

import math
import warnings

import numpy as np
import pytest

from sdpa_ref import (
    attention,
    attention_backward,
    mods,
    testing,
    tiled_attention,
    tiled_attention_backward,
)
from tests.torch_needed import torch  # skips this module without torch

# Needs torch==2.13.0: `pytest -m torch` runs the parity tests alone.
pytestmark = pytest.mark.torch

flex = pytest.importorskip("torch.nn.attention.flex_attention")

B, H, N, D = 2, 4, 64, 16
WINDOW, PREFIX, CAP = 5, 7, 1.5
SEED = 2412
DOC_LENGTHS = (20, 13, 31)  # two sequences, each packing three documents
SLOPES = 2.0 ** (-8.0 * (np.arange(H) + 1) / H)  # attention-gym's ALiBi slopes


def torch_cases():
    """(name, FlexAttention's mask_mod, its score_mod, sdpa_ref's options)."""
    ids = np.repeat(np.arange(3), DOC_LENGTHS)
    document_id = torch.from_numpy(ids)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def sliding_window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= WINDOW)

    def prefix_lm(b, h, q_idx, kv_idx):
        return (kv_idx < PREFIX) | (q_idx >= kv_idx)

    def document_causal(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (document_id[q_idx] == document_id[kv_idx])

    def document(b, h, q_idx, kv_idx):
        return document_id[q_idx] == document_id[kv_idx]

    def first_keys(b, h, q_idx, kv_idx):
        return kv_idx < 2

    def alibi(score, b, h, q_idx, kv_idx):
        scale = torch.exp2(-((h + 1) * 8.0 / H))
        return score + (kv_idx - q_idx) * scale

    def softcap(score, b, h, q_idx, kv_idx):
        return CAP * torch.tanh(score / CAP)

    window = mods.sliding_window(WINDOW)
    return [
        ("causal", causal, None, {"mask_mod": mods.causal()}),
        ("sliding window", sliding_window, None, {"mask_mod": window}),
        ("prefix LM", prefix_lm, None, {"mask_mod": mods.prefix_lm(PREFIX)}),
        (
            "document masking",
            document_causal,
            None,
            {"mask_mod": mods.document(ids, mods.causal())},
        ),
        (
            "ALiBi",
            causal,
            alibi,
            {"mask_mod": mods.causal(), "score_mod": mods.alibi(SLOPES)},
        ),
        ("softcap", None, softcap, {"score_mod": mods.softcap(CAP)}),
        (
            "documents and a window, soft-capped",
            flex.and_masks(sliding_window, document),
            softcap,
            {
                "mask_mod": mods.and_masks(window, mods.document(ids)),
                "softcap": CAP,
            },
        ),
        (
            "two global keys or a window, with ALiBi",
            flex.or_masks(first_keys, sliding_window),
            alibi,
            {
                "mask_mod": mods.or_masks(lambda b, h, q, kv: kv < 2, window),
                "score_mod": mods.alibi(SLOPES),
            },
        ),
    ]


def dense_torch(q, k, v, mask_mod, score_mod, *, scale_k=False):
    """Attention written out in torch, mods applied on broadcast index grids."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    if scale_k:  # attention_ref's reorder_ops: scale k, not q
        scores = q @ (k * scale).transpose(-1, -2)
    else:
        scores = (q * scale) @ k.transpose(-1, -2)
    b = torch.arange(q.shape[0]).view(-1, 1, 1, 1)
    h = torch.arange(q.shape[1]).view(1, -1, 1, 1)
    q_idx = torch.arange(q.shape[2]).view(1, 1, -1, 1)
    kv_idx = torch.arange(k.shape[2]).view(1, 1, 1, -1)
    if score_mod is not None:
        scores = score_mod(scores, b, h, q_idx, kv_idx)
    if mask_mod is not None:
        scores = scores.masked_fill(~mask_mod(b, h, q_idx, kv_idx), -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    return torch.softmax(scores, dim=-1) @ v, lse


def run_flex(q, k, v, mask_mod, score_mod):
    block_mask = None
    if mask_mod is not None:
        block_mask = flex.create_block_mask(mask_mod, B, H, N, N, device="cpu")
    with warnings.catch_warnings():  # "called without torch.compile": unfused
        warnings.simplefilter("ignore", UserWarning)
        out, aux = flex.flex_attention(
            q,
            k,
            v,
            score_mod=score_mod,
            block_mask=block_mask,
            return_aux=flex.AuxRequest(lse=True),
        )
    return out, aux.lse


def flash_rule(name, got, naive, reference, dtype, factor):
    """|got - ref| <= factor · |naive - ref| + 2 · |ref + 0.3 - 0.3 - ref|."""
    ref = torch.from_numpy(reference)
    rounded = ref.to(dtype)
    atol = 2 * (rounded + 0.3 - 0.3 - rounded).abs().max().item()
    error = (got.double() - ref).abs().max().item()
    naive_error = (naive.double() - ref).abs().max().item()
    assert error <= factor * naive_error + atol, (
        f"{name}: error {error:.3g} > {factor} x naive {naive_error:.3g} + {atol:.3g}"
    )
    return error, naive_error


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("case", range(8), ids=lambda i: f"mod{i}")
def test_flex_attention_forward_matches_sdpa_ref(dtype_name, case):
    name, mask_mod, score_mod, options = torch_cases()[case]
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(SEED + case)
    q, k, v = (torch.randn(B, H, N, D, generator=gen, dtype=dtype) for _ in range(3))
    q = q * 2  # logits of a few units, so the soft-cap and ALiBi both bite
    out, lse = run_flex(q, k, v, mask_mod, score_mod)
    assert out.dtype == dtype
    assert lse.dtype == dtype
    ref, ref_lse = attention(q, k, v, return_lse=True, **options)
    naive, naive_lse = dense_torch(q, k, v, mask_mod, score_mod, scale_k=True)
    factor = 3 if score_mod is not None else 2
    flash_rule(f"{name} out", out, naive, ref, dtype, factor)
    flash_rule(f"{name} lse", lse, naive_lse, ref_lse, dtype, factor)
    # The testing helper's verdict: in float32 and float64, a bound that
    # holds for any summation order, on the output and the log-sum-exp.
    verdict = testing.assert_attention_close(out, q, k, v, lse=lse, **options)
    assert [check.name for check in verdict] == ["out", "lse"]
    if dtype == torch.float64:
        np.testing.assert_allclose(out.numpy(), ref, atol=1e-13, err_msg=name)
        # FlexAttention's lse is the natural log, like sdpa_ref's.
        np.testing.assert_allclose(lse.numpy(), ref_lse, atol=1e-13, err_msg=name)
    tiled, tiled_lse = tiled_attention(
        q, k, v, block_size=16, return_lse=True, **options
    )
    np.testing.assert_allclose(tiled, ref, atol=1e-13)
    np.testing.assert_allclose(tiled_lse, ref_lse, atol=1e-13)


def test_built_in_options_are_the_mods_flex_attention_runs():
    """sdpa_ref's is_causal, window and softcap give FlexAttention's numbers."""
    cases = {name: (m, s) for name, m, s, _ in torch_cases()}
    gen = torch.Generator().manual_seed(SEED)
    q, k, v = (
        torch.randn(B, H, N, D, generator=gen, dtype=torch.float64) for _ in range(3)
    )
    for name, options in [
        ("causal", {"is_causal": True}),
        ("sliding window", {"window": (WINDOW, 0)}),
        ("softcap", {"softcap": CAP}),
    ]:
        out, lse = run_flex(q, k, v, *cases[name])
        ref, ref_lse = attention(q, k, v, return_lse=True, **options)
        np.testing.assert_allclose(out.numpy(), ref, atol=1e-13, err_msg=name)
        np.testing.assert_allclose(lse.numpy(), ref_lse, atol=1e-13, err_msg=name)


# -- gradients: torch autograd through the dense float64 emulation ------------------


def autograd_case(rng, score_mod_np, score_mod_t, mask_np, mask_t, params=()):
    q, k, v, d_out = (rng.standard_normal((2, 3, 12, 5)) for _ in range(4))
    q *= 2
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    out, _ = dense_torch(tq, tk, tv, mask_t, score_mod_t)
    out.backward(torch.from_numpy(d_out))
    options = {"mask_mod": mask_np, "score_mod": score_mod_np}
    dense = attention_backward(q, k, v, d_out, **options)
    ours, ours_lse = tiled_attention(q, k, v, block_size=5, return_lse=True, **options)
    tiled = tiled_attention_backward(
        q, k, v, ours, d_out, ours_lse, block_size=5, **options
    )
    for got in (dense, tiled):
        for name, want in zip(
            ("dq", "dk", "dv"), (tq.grad, tk.grad, tv.grad), strict=True
        ):
            np.testing.assert_allclose(
                getattr(got, name), want.numpy(), atol=1e-12, err_msg=name
            )
        for key, tensor in params:
            np.testing.assert_allclose(
                got.dscore_mod[key], tensor.grad.numpy(), atol=1e-12, err_msg=key
            )
    return dense


def test_softcap_gradients_match_autograd():
    rng = np.random.default_rng(SEED)

    def cap_t(score, b, h, q_idx, kv_idx):
        return CAP * torch.tanh(score / CAP)

    def causal_t(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    autograd_case(rng, mods.softcap(CAP), cap_t, mods.causal(), causal_t)
    # The same function as a user's mod, differentiated by complex steps.
    autograd_case(
        rng,
        lambda s, b, h, q_idx, kv_idx: CAP * np.tanh(s / CAP),
        cap_t,
        mods.causal(),
        causal_t,
    )


@pytest.mark.parametrize("absolute", [False, True])
def test_alibi_gradients_match_autograd_slopes_included(absolute):
    rng = np.random.default_rng(SEED)
    slopes = rng.uniform(0.05, 0.5, 3)
    t_slopes = torch.tensor(slopes, requires_grad=True)

    def alibi_t(score, b, h, q_idx, kv_idx):
        distance = kv_idx - (q_idx + 2)
        distance = -distance.abs() if absolute else distance
        return score + t_slopes[h] * distance

    def window_t(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx + 2) & (q_idx + 2 - kv_idx <= 6)

    autograd_case(
        rng,
        mods.alibi(slopes, offset=2, absolute=absolute),
        alibi_t,
        mods.sliding_window(6, 0, offset=2),
        window_t,
        params=[("slopes", t_slopes)],
    )


def test_relative_position_bias_gradients_match_autograd_table_included():
    rng = np.random.default_rng(SEED)
    table = rng.standard_normal((3, 9))  # R = 4
    t_table = torch.tensor(table, requires_grad=True)
    ids = np.repeat(np.arange(3), [5, 4, 3])
    t_ids = torch.from_numpy(ids)

    def bias_t(score, b, h, q_idx, kv_idx):
        column = (kv_idx - q_idx).clamp(-4, 4) + 4
        return score + t_table[h, column]

    def document_t(b, h, q_idx, kv_idx):
        return t_ids[q_idx] == t_ids[kv_idx]

    autograd_case(
        rng,
        mods.relative_position_bias(table),
        bias_t,
        mods.document(ids),
        document_t,
        params=[("table", t_table)],
    )


def test_a_users_nonlinear_mod_differentiates_by_complex_steps_to_autograd():
    rng = np.random.default_rng(SEED)

    def wobble_np(score, b, h, q_idx, kv_idx):
        return score + 0.4 * np.sin(score * (h + 1)) + 0.05 * (q_idx - kv_idx)

    def wobble_t(score, b, h, q_idx, kv_idx):
        # An index tensor times a Python float is float32 in torch: widen it.
        drift = 0.05 * (q_idx - kv_idx).to(score.dtype)
        return score + 0.4 * torch.sin(score * (h + 1)) + drift

    def prefix_t(b, h, q_idx, kv_idx):
        return (kv_idx < 3) | (q_idx >= kv_idx)

    autograd_case(rng, wobble_np, wobble_t, mods.prefix_lm(3), prefix_t)
