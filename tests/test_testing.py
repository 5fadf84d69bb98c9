"""sdpa_ref.testing passes correct kernels and catches the broken ones."""

import numpy as np
import pytest

from sdpa_ref import testing

SEED = 11
CAUSAL = {"off-by-one causal mask"}


def inputs(dtype, *, logit_scale=1.0, shape=(2, 4, 40, 16), h_kv=2):
    rng = np.random.default_rng(SEED)
    b, h, n, d = shape
    q = rng.standard_normal((b, h, n, d)) * logit_scale
    k = rng.standard_normal((b, h_kv, n, d))
    v = rng.standard_normal((b, h_kv, n, d))
    return tuple(a.astype(dtype) for a in (q, k, v))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("is_causal", [False, True])
def test_the_correct_kernel_passes(dtype, is_causal):
    q, k, v = inputs(dtype, logit_scale=3.0)
    out = testing.online_softmax_kernel(q, k, v, is_causal=is_causal)
    reports = testing.assert_attention_close(out, q, k, v, is_causal=is_causal)
    assert reports[0]["kernel_error"] <= 2 * reports[0]["naive_error"]


# The float16 softmax bug is float16's: in float32, exp overflows only past 88.7.
BROKEN_CASES = [
    (dtype, bug)
    for dtype in (np.float16, np.float32)
    for bug in sorted(testing.BROKEN_KERNELS)
    if not (bug == "float16 softmax without the max" and dtype == np.float32)
]


@pytest.mark.parametrize(("dtype", "bug"), BROKEN_CASES)
def test_every_broken_kernel_is_caught(dtype, bug):
    # Logits of a few units: float16's exp overflows past 11.09.
    q, k, v = inputs(dtype, logit_scale=6.0)
    is_causal = bug in CAUSAL
    out = testing.BROKEN_KERNELS[bug](q, k, v, is_causal=is_causal)
    with pytest.raises(AssertionError, match=r"out: worst element at batch \d+, head"):
        testing.assert_attention_close(out, q, k, v, is_causal=is_causal)


def test_failure_message_names_the_element_and_the_errors():
    q, k, v = inputs(np.float32)
    out = testing.online_softmax_kernel(q, k, v)
    out[1, 2, 7, 3] += 0.5
    with pytest.raises(AssertionError) as info:
        testing.assert_attention_close(out, q, k, v)
    message = str(info.value)
    assert "batch 1, head 2, query 7, column 3" in message
    assert "Kernel error 0.5 > 2 x naive float32 error" in message
    assert "ratio to the naive error" in message


def test_a_fixed_tolerance_fails_across_precisions():
    """No fixed tolerance separates the example kernels; the rule does."""
    rows = testing.tolerance_table()
    for tol in testing.FIXED_TOLERANCES:
        wrong = [r["kernel"] for r in rows if r["fixed"][tol] == r["broken"]]
        assert wrong, tol
    assert all(r["flash"] != r["broken"] for r in rows)
    loose, tight = testing.FIXED_TOLERANCES
    bf16 = next(r for r in rows if r["precision"] == "bfloat16")
    assert bf16["fixed"][loose]
    assert not bf16["fixed"][tight]


def test_bfloat16_precision_needs_bfloat16_values():
    q, k, v = inputs(np.float32)
    with pytest.raises(ValueError, match="bfloat16 cannot represent"):
        testing.assert_attention_close(q, q, k, v, precision="bfloat16")
    with pytest.raises(ValueError, match="needs the inputs as float32"):
        testing.assert_attention_close(q, *inputs(np.float16), precision="bfloat16")


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ({"precision": "float8"}, ValueError, "precision must be one of"),
        ({"precision": "float16"}, ValueError, "does not match the inputs' dtype"),
        ({"grads": (1, 2, 3)}, ValueError, "grads need the grad_out"),
    ],
)
def test_helper_arguments(args, error, match):
    q, k, v = inputs(np.float32)
    with pytest.raises(error, match=match):
        testing.assert_attention_close(q, q, k, v, **args)


def test_mixed_dtypes_are_refused():
    q, k, v = inputs(np.float32)
    with pytest.raises(TypeError, match="must share one dtype"):
        testing.assert_attention_close(q, q, k.astype(np.float16), v)


def test_a_correct_backward_passes_and_a_broken_one_fails():
    from sdpa_ref import attention_backward

    q, k, v = inputs(np.float32, shape=(1, 2, 12, 8), h_kv=1)
    grad_out = np.random.default_rng(SEED).standard_normal((1, 2, 12, 8))
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    good = attention_backward(q64, k64, v64, grad_out, is_causal=True)
    grads = tuple(g.astype(np.float32) for g in good[:3])
    out = testing.online_softmax_kernel(q, k, v, is_causal=True)
    testing.assert_attention_close(
        out, q, k, v, grad_out=grad_out, grads=grads, is_causal=True
    )
    # A backward that forgets D = rowsum(dO * O) gets dq and dk wrong.
    p = good.dv  # unchanged
    wrong = attention_backward(q64, k64, v64, grad_out * 1.01, is_causal=True)
    with pytest.raises(AssertionError, match="dq: worst element"):
        testing.assert_attention_close(
            out,
            q,
            k,
            v,
            grad_out=grad_out,
            grads=(wrong.dq, good.dk, p),
            is_causal=True,
        )
