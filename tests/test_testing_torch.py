"""PyTorch's SDPA passes sdpa_ref.testing in float32, float16 and bfloat16.

Runs where torch imports (``nox -s parity`` installs the CPU build); skipped
with a reason elsewhere, unless REQUIRE_TORCH=1 makes a missing torch fail.
"""

import os

import numpy as np
import pytest

from sdpa_ref import testing

if os.environ.get("REQUIRE_TORCH") == "1":
    import torch
else:
    torch = pytest.importorskip(
        "torch",
        reason="torch is not installed; `nox -s parity` installs torch==2.13.0 (CPU)",
    )

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def sdpa_with_grads(q, k, v, grad_out, dtype, **kwargs):
    """Forward and autograd backward of torch's SDPA in ``dtype``."""
    tensors = [
        torch.from_numpy(np.asarray(a, np.float32)).to(dtype).requires_grad_()
        for a in (q, k, v)
    ]
    out = torch.nn.functional.scaled_dot_product_attention(
        *tensors, enable_gqa=True, **kwargs
    )
    out.backward(torch.from_numpy(np.asarray(grad_out, np.float32)).to(dtype))
    as_numpy = [t.detach().float().numpy() for t in (out, *(t.grad for t in tensors))]
    return as_numpy[0], tuple(as_numpy[1:])


@pytest.mark.parametrize("precision", sorted(DTYPES))
@pytest.mark.parametrize("is_causal", [False, True])
def test_torch_sdpa_passes_forward_and_backward(precision, is_causal):
    q, k, v = testing.demo_inputs(precision, shape=(2, 4, 48, 32))
    rng = np.random.default_rng(5)
    grad_out = rng.standard_normal((2, 4, 48, 32))
    grad_out = testing.rounding(precision)(grad_out)
    out, grads = sdpa_with_grads(
        q, k, v, grad_out, DTYPES[precision], is_causal=is_causal
    )
    if precision == "float16":
        out, grads = out.astype(np.float16), tuple(g.astype(np.float16) for g in grads)
    reports = testing.assert_attention_close(
        out,
        q,
        k,
        v,
        precision=precision if precision == "bfloat16" else None,
        grad_out=grad_out,
        grads=grads,
        is_causal=is_causal,
    )
    assert [r["name"] for r in reports] == ["out", "dq", "dk", "dv"]


@pytest.mark.parametrize("precision", sorted(DTYPES))
def test_torch_sdpa_with_the_wrong_scale_is_caught(precision):
    q, k, v = testing.demo_inputs(precision, shape=(1, 4, 32, 16))
    out, _ = sdpa_with_grads(
        q, k, v, np.zeros((1, 4, 32, 16)), DTYPES[precision], scale=1 / 16
    )
    if precision == "float16":
        out = out.astype(np.float16)
    with pytest.raises(AssertionError, match="out: worst element"):
        testing.assert_attention_close(
            out, q, k, v, precision=precision if precision == "bfloat16" else None
        )
