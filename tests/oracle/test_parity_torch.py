"""sdpa_ref against PyTorch's scaled_dot_product_attention, in float64.

Runs where torch imports (``nox -s parity`` installs the CPU build); skipped
with a reason elsewhere, unless REQUIRE_TORCH=1 makes a missing torch fail.
"""

import numpy as np
import pytest

from sdpa_ref import attention, causal_mask, tiled_attention
from tests.torch_needed import torch  # skips this module without torch

# Needs torch==2.13.0: `pytest -m torch` runs the parity tests alone.
pytestmark = pytest.mark.torch

CASES = 40
FNS = pytest.mark.parametrize(
    "fn", [attention, tiled_attention], ids=["dense", "tiled"]
)


def torch_sdpa(q, k, v, **kwargs):
    t = {
        name: torch.from_numpy(np.ascontiguousarray(a))
        for name, a in (("q", q), ("k", k), ("v", v))
    }
    if isinstance(kwargs.get("attn_mask"), np.ndarray):
        kwargs["attn_mask"] = torch.from_numpy(kwargs["attn_mask"])
    out = torch.nn.functional.scaled_dot_product_attention(
        t["q"], t["k"], t["v"], **kwargs
    )
    return out.numpy()


def random_case(seed):
    rng = np.random.default_rng(seed)
    batch = int(rng.integers(1, 3))
    h_kv = int(rng.integers(1, 4))
    h_q = h_kv * int(rng.integers(1, 4))
    n_q, n_k = (int(n) for n in rng.integers(1, 40, size=2))
    d_k, d_v = (int(n) for n in rng.integers(1, 33, size=2))
    q = rng.normal(size=(batch, h_q, n_q, d_k))
    k = rng.normal(size=(batch, h_kv, n_k, d_k))
    v = rng.normal(size=(batch, h_kv, n_k, d_v))
    return rng, q, k, v


@FNS
@pytest.mark.parametrize("seed", range(CASES))
def test_random_shapes_gqa_and_scale(fn, seed):
    rng, q, k, v = random_case(seed)
    scale = float(rng.uniform(0.05, 2.0)) if seed % 2 else None
    expected = torch_sdpa(q, k, v, scale=scale, enable_gqa=True)
    np.testing.assert_allclose(fn(q, k, v, scale=scale), expected, rtol=0, atol=1e-12)


@FNS
@pytest.mark.parametrize("seed", range(CASES))
def test_masks_and_empty_rows(fn, seed):
    rng, q, k, v = random_case(1000 + seed)
    n_q, n_k = q.shape[-2], k.shape[-2]
    if seed % 2:
        mask = rng.random((n_q, n_k)) < 0.5  # some rows end up fully masked
    else:
        mask = np.where(
            rng.random((n_q, n_k)) < 0.5, rng.normal(size=(n_q, n_k)), -np.inf
        )
    expected = torch_sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
    got = fn(q, k, v, mask=mask, empty_rows="zero")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@FNS
@pytest.mark.parametrize("seed", range(10))
def test_is_causal(fn, seed):
    _, q, k, v = random_case(2000 + seed)
    expected = torch_sdpa(q, k, v, is_causal=True, enable_gqa=True)
    got = fn(q, k, v, is_causal=True, empty_rows="zero")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)


@FNS
def test_bottom_right_causal_mask(fn):
    _, q, k, v = random_case(3000)
    mask = causal_mask(q.shape[-2], k.shape[-2], align="bottom_right")
    expected = torch_sdpa(q, k, v, attn_mask=mask, enable_gqa=True)
    got = fn(q, k, v, mask=mask, empty_rows="zero")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
