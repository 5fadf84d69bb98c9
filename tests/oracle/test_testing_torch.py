"""PyTorch's SDPA passes sdpa_ref.testing in float32, float16 and bfloat16.

Runs where torch imports (``nox -s parity`` installs the CPU build); skipped
with a reason elsewhere, unless REQUIRE_TORCH=1 makes a missing torch fail.
"""

import math

import numpy as np
import pytest

import sdpa_ref
import sdpa_ref.precision
from sdpa_ref import kernels, testing
from tests.torch_needed import torch  # skips this module without torch

# Needs torch==2.13.0: `pytest -m torch` runs the parity tests alone.
pytestmark = pytest.mark.torch

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def sdpa_with_grads(q, k, v, grad_out, dtype, **kwargs):
    """Forward and autograd backward of torch's SDPA in ``dtype``: the tensors."""
    tensors = [
        torch.from_numpy(np.asarray(a, np.float32)).to(dtype).requires_grad_()
        for a in (q, k, v)
    ]
    out = torch.nn.functional.scaled_dot_product_attention(
        *tensors, enable_gqa=True, **kwargs
    )
    t_grad = torch.from_numpy(np.asarray(grad_out, np.float32)).to(dtype)
    out.backward(t_grad)
    return tensors, out, t_grad


@pytest.mark.parametrize("precision", sorted(DTYPES))
@pytest.mark.parametrize("is_causal", [False, True])
def test_torch_sdpa_passes_forward_and_backward(precision, is_causal):
    """torch tensors go in as they are: bfloat16, requires_grad and all."""
    q, k, v = kernels.demo_inputs(precision, shape=(2, 4, 48, 32))
    grad_out = np.random.default_rng(5).standard_normal((2, 4, 48, 32))
    (tq, tk, tv), out, t_grad = sdpa_with_grads(
        q, k, v, grad_out, DTYPES[precision], is_causal=is_causal
    )
    verdict = testing.assert_attention_close(
        out,
        tq,
        tk,
        tv,
        grad_out=t_grad,
        grads=(tq.grad, tk.grad, tv.grad),
        is_causal=is_causal,
    )
    assert [c.name for c in verdict] == ["out", "dq", "dk", "dv"]
    assert verdict.precision == precision


@pytest.mark.parametrize("precision", sorted(DTYPES))
def test_torch_sdpa_with_the_wrong_scale_is_caught_and_named(precision):
    q, k, v = kernels.demo_inputs(precision, shape=(1, 4, 32, 16))
    (tq, tk, tv), out, _ = sdpa_with_grads(
        q, k, v, np.zeros((1, 4, 32, 16)), DTYPES[precision], scale=1 / 16
    )
    with pytest.raises(AssertionError, match=r"out: [\d,]+ of 2,048 elements") as info:
        testing.assert_attention_close(out, tq, tk, tv)
    assert "passes with scale=1/d = 0.0625" in str(info.value)


# -- FlashAttention's own formulas, in torch --------------------------------


def attention_ref(q, k, v, *, causal, softcap, learnable_sink, dropout_mask, p):
    """flash_attn/utils/testing.py:228-360 (commit 0251105a), low-precision path.

    ``upcast=False, reorder_ops=True``: FlashAttention's ``out_pt``. Layout
    ``(batch, seqlen, nheads, headdim)``. Without padding masks, ``qv``,
    descaling, sink tokens or chunks; ``causal`` is the bottom-right window
    ``(None, 0)`` of construct_local_mask (testing.py:159-192).
    """
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    k = k.repeat_interleave(q.shape[2] // k.shape[2], dim=2)  # 286
    v = v.repeat_interleave(q.shape[2] // v.shape[2], dim=2)  # 287
    softmax_scale = 1.0 / math.sqrt(q.shape[-1])  # 290
    scores = torch.einsum("bthd,bshd->bhts", q, k * softmax_scale)  # 294
    if softcap > 0:
        scores = torch.tanh(scores / softcap) * softcap  # 298
    local_mask = None
    if causal:
        row_idx = torch.arange(seqlen_q)[:, None]
        col_idx = torch.arange(seqlen_k)
        local_mask = col_idx > row_idx + seqlen_k - seqlen_q  # 186
        scores.masked_fill_(local_mask, float("-inf"))  # 325
    if learnable_sink is None:
        attention = torch.softmax(scores, dim=-1).to(v.dtype)  # 329
    else:  # 331-337
        scores_fp32 = scores.to(torch.float32)
        logits_max = torch.amax(scores_fp32, dim=-1, keepdim=True)
        learnable_sink = learnable_sink[:, None, None]
        logits_or_sinks_max = torch.maximum(learnable_sink, logits_max)
        unnormalized_scores = torch.exp(scores_fp32 - logits_or_sinks_max)
        normalizer = unnormalized_scores.sum(dim=-1, keepdim=True) + torch.exp(
            learnable_sink - logits_or_sinks_max
        )
        attention = (unnormalized_scores / normalizer).to(v.dtype)
    if local_mask is not None:  # 347
        empty = torch.all(local_mask, dim=-1, keepdim=True)
        attention = attention.masked_fill(empty, 0.0)
    dropout_scaling = 1.0 / (1 - p)  # 348
    attention_drop = attention  # 351-354
    if dropout_mask is not None:
        attention_drop = attention.masked_fill(~dropout_mask, 0.0)
    return torch.einsum("bhts,bshd->bthd", attention_drop, v * dropout_scaling)  # 357


OPTIONS = {
    "none": {},
    "causal": {"is_causal": True, "align": "bottom_right"},
    "softcap": {"softcap": 5.0},
    "sink": {"sink_logits": np.array([0.5, -1.0, 2.0, 0.0])},
    "dropout": {"dropout_p": 0.25},
}


@pytest.mark.parametrize("precision", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_naive_attention_is_attention_ref_without_upcast(precision, name):
    """naive_attention emulates out_pt = attention_ref(upcast=False, reorder_ops=True).

    (hopper/test_flash_attn.py:228-243.) On torch's CPU build the forward and
    the autograd backward agree bit for bit in bfloat16 and to about one
    rounding in float16; in float32 they agree to a few units in the last
    place, and their largest errors against float64 to a factor of two.
    """
    dtype = DTYPES[precision]
    q, k, v = kernels.demo_inputs(precision, shape=(2, 4, 24, 16))
    options = dict(OPTIONS[name])
    rng = np.random.default_rng(3)
    keep = None
    if name == "dropout":
        keep = rng.random((2, 4, 24, 24)) > options["dropout_p"]
        options["dropout_mask"] = keep
    grad_out = testing.rounding(precision)(rng.standard_normal((2, 4, 24, 16)))

    def flash_layout(a):
        t = torch.from_numpy(np.asarray(a, np.float32)).to(dtype)
        return t.permute(0, 2, 1, 3).contiguous().requires_grad_()

    tq, tk, tv = (flash_layout(a) for a in (q, k, v))
    sink = options.get("sink_logits")
    out_pt = attention_ref(
        tq,
        tk,
        tv,
        causal=name == "causal",
        softcap=options.get("softcap", 0.0),
        learnable_sink=None if sink is None else torch.tensor(sink).float(),
        dropout_mask=None if keep is None else torch.from_numpy(keep),
        p=options.get("dropout_p", 0.0),
    )
    torch_grads = torch.autograd.grad(out_pt, (tq, tk, tv), flash_layout(grad_out))

    def heads_first(t):
        return t.detach().double().permute(0, 2, 1, 3).numpy()

    q64, k64, v64 = (np.asarray(a, np.float64) for a in (q, k, v))
    ours = [testing.naive_attention(q64, k64, v64, precision, **options)]
    ours += testing.naive_attention_backward(
        q64, k64, v64, grad_out, precision, **options
    )
    theirs = [heads_first(t) for t in (out_pt, *torch_grads)]
    exact = [sdpa_ref.attention(q64, k64, v64, **options)]
    exact += sdpa_ref.attention_backward(q64, k64, v64, grad_out, **options)[:3]
    u = sdpa_ref.precision.unit_roundoff(precision)
    for mine, torch_value, truth in zip(ours, theirs, exact, strict=True):
        scale = np.abs(truth).max()
        err_mine = np.abs(mine - truth).max()
        err_torch = np.abs(torch_value - truth).max()
        if precision == "bfloat16":
            np.testing.assert_array_equal(mine, torch_value)
        elif precision == "float16":
            assert np.abs(mine - torch_value).max() <= 2 * u * scale
            assert abs(err_mine - err_torch) <= 0.05 * err_torch
        else:  # a few float32 roundings, in another order than torch's
            assert np.abs(mine - torch_value).max() <= 8 * u * scale
            assert 0.5 * err_torch <= err_mine <= 2 * err_torch


@pytest.mark.parametrize("precision", sorted(DTYPES))
@pytest.mark.parametrize("logit_scale", [0.01, 1.0, 4.0])
def test_flash_atol_is_flashattention_formula_in_torch(precision, logit_scale):
    """fwd_atol = 2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max() (hopper l. 255).

    out_ref is in the kernel's dtype. A CUDA kernel of torch computes each
    step in float32 and rounds it to that dtype; on the CPU, torch rounds 0.3
    to the dtype first, which gives the same value on these inputs.
    """
    dtype = DTYPES[precision]
    q, k, v = kernels.demo_inputs(precision, logit_scale)
    reference = sdpa_ref.attention(*(np.asarray(a, np.float64) for a in (q, k, v)))
    out_ref = torch.from_numpy(reference).to(dtype)
    x = out_ref.float()
    step1 = (x + 0.3).to(dtype).float()
    step2 = (step1 - 0.3).to(dtype).float()
    cuda_style = 2 * (step2 - x).to(dtype).abs().max().item()
    literal_cpu = 2 * (out_ref + 0.3 - 0.3 - out_ref).abs().max().item()
    assert testing.flash_atol(reference, precision) == cuda_style == literal_cpu


@pytest.mark.parametrize("precision", sorted(DTYPES))
def test_flash_atol_matches_cuda_style_arithmetic_on_random_values(precision):
    dtype = DTYPES[precision]
    rng = np.random.default_rng(0)
    for scale in (0.01, 0.1, 1.0, 3.0, 100.0):
        values = rng.standard_normal(200) * scale
        x = torch.from_numpy(values).to(dtype).float()
        step1 = (x + 0.3).to(dtype).float()
        step2 = (step1 - 0.3).to(dtype).float()
        expected = 2 * (step2 - x).to(dtype).abs().max().item()
        assert testing.flash_atol(values, precision) == expected


def test_assert_close_defaults_are_torch_s():
    from torch.testing._comparison import _DTYPE_PRECISIONS

    for name, rtol_atol in kernels.TORCH_ASSERT_CLOSE_DEFAULTS.items():
        assert _DTYPE_PRECISIONS[DTYPES[name]] == rtol_atol
