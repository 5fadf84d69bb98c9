"""torch tensors as a kernel test holds them: any dtype, requires_grad, views.

Runs where torch imports (``nox -s parity`` installs the CPU build); skipped
with a reason elsewhere, unless REQUIRE_TORCH=1 makes a missing torch fail.
"""

import subprocess
import sys

import numpy as np
import pytest

from sdpa_ref import (
    attention,
    attention_backward,
    causal_mask,
    softmax,
    tiled_attention,
    tiled_attention_backward,
)
from sdpa_ref._arrays import as_array, source_precision
from tests.torch_needed import torch  # skips this module without torch

# Needs torch==2.13.0: `pytest -m torch` runs the parity tests alone.
pytestmark = pytest.mark.torch

SHAPE_Q, SHAPE_KV = (2, 4, 6, 8), (2, 2, 9, 8)


def tensors(dtype, *, requires_grad=False, seed=3):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(shape, generator=gen, dtype=torch.float32)
        .to(dtype)
        .requires_grad_(requires_grad)
        for shape in (SHAPE_Q, SHAPE_KV, SHAPE_KV)
    ]


@pytest.mark.parametrize(
    ("dtype", "numpy_dtype", "precision"),
    [
        ("bfloat16", np.float32, "bfloat16"),
        ("float16", np.float16, "float16"),
        ("float32", np.float32, "float32"),
        ("float64", np.float64, "float64"),
    ],
)
def test_as_array_keeps_every_value(dtype, numpy_dtype, precision):
    (t, _, _) = tensors(getattr(torch, dtype), requires_grad=True)
    arr = as_array(t, "q")
    assert arr.dtype == numpy_dtype
    assert np.array_equal(arr, t.detach().double().numpy())  # exact, no rounding
    assert source_precision(t) == precision


def test_bfloat16_with_requires_grad_equals_its_float32_upcast():
    q, k, v = tensors(torch.bfloat16, requires_grad=True)
    upcast = [t.detach().float().numpy() for t in (q, k, v)]
    out, lse = attention(q, k, v, is_causal=True, return_lse=True)
    expected, expected_lse = attention(*upcast, is_causal=True, return_lse=True)
    assert out.dtype == np.float64
    assert isinstance(out, np.ndarray)
    assert np.array_equal(out, expected)
    assert np.array_equal(lse, expected_lse)
    assert q.grad is None  # nothing flowed back into the caller's graph


def test_every_oracle_function_takes_tensors():
    q, k, v = tensors(torch.float16, requires_grad=True)
    np_q, np_k, np_v = (t.detach().double().numpy() for t in (q, k, v))
    mask = torch.rand(2, 1, 6, 9, generator=torch.Generator().manual_seed(1)) > 0.3
    sinks = torch.tensor([0.1, -0.2, 0.3, 0.0], dtype=torch.bfloat16)
    lengths = torch.tensor([9, 5])
    options = {"mask": mask, "sink_logits": sinks, "k_lengths": lengths}
    np_options = {
        "mask": mask.numpy(),
        "sink_logits": sinks.float().numpy(),
        "k_lengths": lengths.numpy(),
    }
    d_out = torch.randn(2, 4, 6, 8, dtype=torch.bfloat16)
    np_d_out = d_out.float().numpy()

    assert np.array_equal(
        attention(q, k, v, **options), attention(np_q, np_k, np_v, **np_options)
    )
    out, lse = tiled_attention(q, k, v, return_lse=True, **options)
    np_out, np_lse = tiled_attention(np_q, np_k, np_v, return_lse=True, **np_options)
    assert np.array_equal(out, np_out)
    grads = attention_backward(q, k, v, d_out, **options)
    np_grads = attention_backward(np_q, np_k, np_v, np_d_out, **np_options)
    assert all(np.array_equal(a, b) for a, b in zip(grads, np_grads, strict=True))
    tiled = tiled_attention_backward(
        q, k, v, torch.from_numpy(out), d_out, torch.from_numpy(lse), **options
    )
    np_tiled = tiled_attention_backward(
        np_q, np_k, np_v, np_out, np_d_out, np_lse, **np_options
    )
    assert all(np.array_equal(a, b) for a, b in zip(tiled, np_tiled, strict=True))
    assert np.array_equal(
        softmax(torch.tensor([2.0, 0.0])), softmax(np.float32([2, 0]))
    )
    assert causal_mask(torch.tensor(2).item(), 3).shape == (2, 3)


def test_views_and_non_contiguous_tensors():
    q, k, v = tensors(torch.float32)
    q_view = q.transpose(1, 2)  # (B, S, H, D) view of a (B, H, S, D) tensor
    k_view, v_view = k.transpose(1, 2), v.transpose(1, 2)
    got = attention(q_view, k_view, v_view, layout="bshd")
    expected = attention(q.numpy(), k.numpy(), v.numpy())
    assert np.array_equal(got, np.swapaxes(expected, 1, 2))
    neg = torch.neg(q)._neg_view() if hasattr(torch.Tensor, "_neg_view") else q
    assert np.array_equal(as_array(neg, "q"), q.numpy())


def test_bshd_torch_layout_with_flash_attention_shapes():
    q, k, v = (t.transpose(1, 2).contiguous() for t in tensors(torch.float64))
    out, lse = attention(q, k, v, layout="bshd", return_lse=True)
    assert out.shape == (2, 6, 4, 8)  # (batch, seqlen, heads, dim)
    assert lse.shape == (2, 4, 6)  # (batch, heads, seqlen), as flash_attn_func


def test_meta_tensor_is_refused_by_name():
    meta = torch.empty(2, 3, device="meta")
    with pytest.raises(TypeError, match=r"k is a tensor on the 'meta' device"):
        attention(np.ones((2, 3)), meta, np.ones((2, 3)))


def test_sparse_tensor_is_read_densely():
    dense = torch.eye(3, dtype=torch.float64)
    assert np.array_equal(as_array(dense.to_sparse(), "q"), dense.numpy())


def test_a_tensor_nowhere_near_numpy_gets_a_type_error():
    with pytest.raises(TypeError, match="q must be real"):
        attention(torch.ones(2, 2, dtype=torch.complex64), np.ones((2, 2)), np.eye(2))


def test_importing_sdpa_ref_never_imports_torch():
    code = "import sys, sdpa_ref; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
