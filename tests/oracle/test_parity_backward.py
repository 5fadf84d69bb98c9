"""Every option, forward and backward, against torch autograd in float64.

The reference is FlashAttention's ``attention_ref`` (flash_attn/utils/
testing.py at commit 0251105a) ported to torch float64 with autograd doing
the backward, plus two changes, each marked below: PyTorch's top-left
alignment as a second ``align``, and a softmax whose gradient stays finite
on a row with no allowed key. Runs where torch imports (``nox -s parity``
installs the CPU build); skipped with a reason elsewhere, unless
REQUIRE_TORCH=1 makes a missing torch fail.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdpa_ref import (
    attention,
    attention_backward,
    tiled_attention,
    tiled_attention_backward,
)
from tests.oracle.strategies import gaussian_inputs, gqa_sizes, sdpa_options
from tests.torch_needed import torch  # skips this module without torch

# Needs torch==2.13.0: `pytest -m torch` runs the parity tests alone.
pytestmark = pytest.mark.torch

ATOL = 1e-12


def local_mask(n_q, n_k, window, sink_tokens, offset):
    """construct_local_mask (testing.py:159-192), True = masked out.

    Change 1: ``offset`` replaces ``sk - sq`` so that top-left (offset 0,
    PyTorch's is_causal) can be tested too; FlashAttention only has
    bottom-right.
    """
    row = torch.arange(n_q).reshape(-1, 1)
    col = torch.arange(n_k)
    left, right = window
    masked = torch.zeros(1, 1, 1, 1, dtype=torch.bool)
    if right is not None:
        masked = masked | (col > row + offset + right)
    if left is not None:
        masked = masked | ((col < row + offset - left) & (col >= sink_tokens))
    return masked


def chunk_mask(n_q, n_k, chunk, offset):
    """construct_chunk_mask (testing.py:195-225), True = masked out."""
    row = torch.arange(n_q).reshape(-1, 1)
    col = torch.arange(n_k)
    limit = row + offset - (row + offset) % chunk
    return (col < limit) | (col >= limit + chunk)


def attention_ref(q, k, v, options):  # noqa: PLR0915 (a port, kept whole)
    """attention_ref (testing.py:228-360) in the (b, h, s, d) layout."""
    h, n_q, d = q.shape[1:]
    n_k = k.shape[-2]
    g = h // k.shape[1]
    k = k.repeat_interleave(g, dim=1)
    v = v.repeat_interleave(g, dim=1)
    scale = options.get("scale") or 1.0 / np.sqrt(d)
    scores = torch.einsum("bhtd,bhsd->bhts", q * scale, k)
    softcap = options.get("softcap")
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    q_lengths = options.get("q_lengths")
    k_lengths = options.get("k_lengths")
    sq = n_q if q_lengths is None else torch.from_numpy(q_lengths).reshape(-1, 1, 1, 1)
    sk = n_k if k_lengths is None else torch.from_numpy(k_lengths).reshape(-1, 1, 1, 1)
    offset = sk - sq if options.get("align") == "bottom_right" else 0
    masked = torch.zeros(1, 1, 1, 1, dtype=torch.bool)
    if k_lengths is not None:
        masked = masked | (torch.arange(n_k) >= sk)
    window = options.get("window") or (None, None)
    if options.get("is_causal"):
        window = (window[0], 0)
    if window != (None, None):
        masked = masked | local_mask(
            n_q, n_k, window, options.get("sink_tokens", 0), offset
        )
    if options.get("chunk"):
        masked = masked | chunk_mask(n_q, n_k, options["chunk"], offset)
    if q_lengths is not None:  # padded queries see nothing
        masked = masked | (torch.arange(n_q).reshape(-1, 1) >= sq)
    mask = options.get("mask")
    if mask is not None and mask.dtype == np.bool_:
        masked = masked | ~torch.from_numpy(mask)
    scores = scores.masked_fill(masked, float("-inf"))
    bias = options.get("_bias_tensor")
    if bias is not None:
        scores = scores + bias
    # Change 2: testing.py:331-337 (the learnable_sink branch) for every
    # row, with the max detached and an all -inf row shifted by 0, so that
    # a row with no allowed key gives 0 and a finite gradient, not NaN.
    row_max = scores.amax(dim=-1, keepdim=True).detach()
    sink = options.get("_sink_tensor")
    if sink is not None:
        row_max = torch.maximum(row_max, sink.detach().reshape(-1, 1, 1))
    row_max = torch.where(torch.isinf(row_max), 0.0, row_max)
    unnormalized = torch.exp(scores - row_max)
    normalizer = unnormalized.sum(dim=-1, keepdim=True)
    if sink is not None:
        normalizer = normalizer + torch.exp(sink.reshape(-1, 1, 1) - row_max)
    normalizer = torch.where(normalizer == 0, 1.0, normalizer)
    attn = unnormalized / normalizer
    dropout_p = options.get("dropout_p", 0.0)
    keep = options.get("dropout_mask")
    attn_drop = attn if keep is None else attn.masked_fill(~torch.from_numpy(keep), 0)
    out = torch.einsum("bhts,bhsd->bhtd", attn_drop, v * (1.0 / (1 - dropout_p)))
    if q_lengths is not None:  # testing.py:358-359
        out = out.masked_fill(torch.arange(n_q).reshape(-1, 1) >= sq, 0.0)
    return out


def torch_gradients(q, k, v, grad_out, options):
    tensors = [torch.from_numpy(a).requires_grad_() for a in (q, k, v)]
    extra = dict(options)
    leaves = list(tensors)
    mask = options.get("mask")
    if mask is not None and mask.dtype != np.bool_:
        extra["_bias_tensor"] = torch.from_numpy(mask).requires_grad_()
        leaves.append(extra["_bias_tensor"])
    if options.get("sink_logits") is not None:
        extra["_sink_tensor"] = torch.from_numpy(
            options["sink_logits"]
        ).requires_grad_()
        leaves.append(extra["_sink_tensor"])
    out = attention_ref(*tensors, extra)
    grads = torch.autograd.grad(
        out, leaves, torch.from_numpy(grad_out), allow_unused=True
    )
    grads = [None if g is None else g.numpy() for g in grads]
    result = {"out": out.detach().numpy(), "dq": grads[0], "dk": grads[1]}
    result["dv"] = grads[2]
    rest = grads[3:]
    if "_bias_tensor" in extra:
        result["dmask"] = rest.pop(0)
    if "_sink_tensor" in extra:
        result["dsink_logits"] = rest.pop(0)
    return result


@st.composite
def cases(draw):
    rng, sizes = gqa_sizes(draw, b=2, h_kv=2, groups=3, n_q=9, n_k=13, d=5)
    b, h_kv, h, n_q, n_k, d = sizes
    options = sdpa_options(draw, rng, sizes, softcap_top=10, scales=st.floats(0.1, 2))
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "float_row"]))
    if mask_kind == "bool":
        options["mask"] = rng.random((1, h, n_q, n_k)) < 0.7
    elif mask_kind == "float":
        options["mask"] = np.where(
            rng.random((n_q, n_k)) < 0.8, rng.normal(size=(n_q, n_k)), -np.inf
        )
    elif mask_kind == "float_row":  # one bias per key, broadcast over queries
        options["mask"] = rng.normal(size=(b, 1, 1, n_k))
    if draw(st.booleans()):
        options["dropout_p"] = draw(st.floats(0.01, 0.9))
        options["dropout_mask"] = rng.random((b, h, n_q, n_k)) > 0.3
    q, k, v = gaussian_inputs(rng, (b, h, n_q, d), (b, h_kv, n_k, d))
    grad_out = rng.normal(size=(b, h, n_q, d + 1))
    return q, k, v, grad_out, options


def check(got, expected):
    np.testing.assert_allclose(got.dq, expected["dq"], rtol=0, atol=ATOL)
    np.testing.assert_allclose(got.dk, expected["dk"], rtol=0, atol=ATOL)
    np.testing.assert_allclose(got.dv, expected["dv"], rtol=0, atol=ATOL)
    if "dmask" in expected:
        np.testing.assert_allclose(got.dmask, expected["dmask"], rtol=0, atol=ATOL)
    else:
        assert got.dmask is None
    if "dsink_logits" in expected:
        np.testing.assert_allclose(
            got.dsink_logits, expected["dsink_logits"], rtol=0, atol=ATOL
        )
    else:
        assert got.dsink_logits is None


@settings(max_examples=300)
@given(cases())
def test_dense_forward_and_backward_match_torch_autograd(case):
    q, k, v, grad_out, options = case
    expected = torch_gradients(q, k, v, grad_out, options)
    np.testing.assert_allclose(
        attention(q, k, v, **options), expected["out"], rtol=0, atol=ATOL
    )
    check(attention_backward(q, k, v, grad_out, **options), expected)


@settings(max_examples=200)
@given(cases(), st.integers(1, 14))
def test_tiled_forward_and_backward_match_torch_autograd(case, block):
    q, k, v, grad_out, options = case
    expected = torch_gradients(q, k, v, grad_out, options)
    out, lse = tiled_attention(q, k, v, block_size=block, return_lse=True, **options)
    np.testing.assert_allclose(out, expected["out"], rtol=0, atol=ATOL)
    got = tiled_attention_backward(
        q, k, v, out, grad_out, lse, block_size=block, **options
    )
    check(got, expected)


@pytest.mark.parametrize("lead", [(), (1,), (4,), (2, 1), (1, 4)])
def test_broadcast_inputs_get_gradients_of_their_own_shape(lead):
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 4, 3, 5))
    k, v = rng.normal(size=(*lead, 6, 5)), rng.normal(size=(*lead, 6, 2))
    grad_out = rng.normal(size=(2, 4, 3, 2))
    tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    out.backward(torch.from_numpy(grad_out))
    got = attention_backward(q, k, v, grad_out)
    assert got.dk.shape == k.shape
    np.testing.assert_allclose(got.dq, tq.grad.numpy(), rtol=0, atol=ATOL)
    np.testing.assert_allclose(got.dk, tk.grad.numpy(), rtol=0, atol=ATOL)
    np.testing.assert_allclose(got.dv, tv.grad.numpy(), rtol=0, atol=ATOL)


def test_torch_sdpa_with_gqa_and_is_causal():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 6, 7, 8))
    k, v = rng.normal(size=(2, 2, 9, 8)), rng.normal(size=(2, 2, 9, 3))
    grad_out = rng.normal(size=(2, 6, 7, 3))
    tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, is_causal=True, enable_gqa=True
    )
    out.backward(torch.from_numpy(grad_out))
    for got in (
        attention_backward(q, k, v, grad_out, is_causal=True),
        tiled_attention_backward(
            q,
            k,
            v,
            *tiled_attention(q, k, v, is_causal=True, return_lse=True)[:1],
            grad_out,
            tiled_attention(q, k, v, is_causal=True, return_lse=True)[1],
            block_size=4,
            is_causal=True,
        ),
    ):
        np.testing.assert_allclose(got.dq, tq.grad.numpy(), rtol=0, atol=ATOL)
        np.testing.assert_allclose(got.dk, tk.grad.numpy(), rtol=0, atol=ATOL)
        np.testing.assert_allclose(got.dv, tv.grad.numpy(), rtol=0, atol=ATOL)
