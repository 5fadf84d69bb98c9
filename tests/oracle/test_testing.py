"""FlashAttention's rule as sdpa_ref.testing applies it, and the page's exhibits."""

import numpy as np
import pytest

import sdpa_ref
from sdpa_ref import kernels, testing

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
    out = kernels.online_softmax_kernel(q, k, v, is_causal=is_causal)
    verdict = testing.assert_attention_close(out, q, k, v, is_causal=is_causal)
    assert verdict[0].rule == ("flash" if dtype == np.float16 else "bound")
    (flash,) = testing.check_attention(out, q, k, v, rule="flash", is_causal=is_causal)
    assert flash.kernel_error <= 2 * flash.naive_error


# The float16 softmax bug is float16's: in float32, exp overflows only past 88.7.
BROKEN_CASES = [
    (dtype, bug)
    for dtype in (np.float16, np.float32)
    for bug in sorted(kernels.BROKEN_KERNELS)
    if not (bug == "float16 softmax without the max" and dtype == np.float32)
]


@pytest.mark.parametrize(("dtype", "bug"), BROKEN_CASES)
def test_every_broken_kernel_is_caught(dtype, bug):
    # Logits of a few units: float16's exp overflows past 11.09.
    q, k, v = inputs(dtype, logit_scale=6.0)
    is_causal = bug in CAUSAL
    out = kernels.BROKEN_KERNELS[bug](q, k, v, is_causal=is_causal)
    with pytest.raises(AssertionError, match=r"out: [\d,]+ of [\d,]+ elements"):
        testing.assert_attention_close(out, q, k, v, is_causal=is_causal)


def test_failure_message_names_the_element_and_the_errors():
    q, k, v = inputs(np.float32)
    out = kernels.online_softmax_kernel(q, k, v)
    out[1, 2, 7, 3] += 0.5
    with pytest.raises(AssertionError) as info:
        testing.assert_attention_close(out, q, k, v)
    message = str(info.value)
    assert "out: 1 of 5,120 elements (0.0195%) exceed their bound" in message
    assert "in batch entry 1, head 2, query row 7" in message
    assert "Worst at batch 1, head 2, query 7, column 3:" in message
    assert f"kernel {float(out[1, 2, 7, 3])!r}" in message


def test_a_fixed_tolerance_fails_across_precisions():
    """No fixed tolerance separates the example kernels; the rule almost does."""
    rows = kernels.tolerance_table()
    for tol in kernels.FIXED_TOLERANCES:
        wrong = [r["kernel"] for r in rows if r["fixed"][tol] == r["broken"]]
        assert wrong, tol
    loose, tight = kernels.FIXED_TOLERANCES
    bf16 = next(r for r in rows if r["precision"] == "bfloat16")
    assert bf16["kernel"] == "correct"
    assert bf16["fixed"][loose]
    assert not bf16["fixed"][tight]
    # The rule's only wrong verdicts: the two bfloat16 bugs with small logits,
    # whose errors exceed twice the naive error but hide under atol.
    missed = [r for r in rows if r["flash"] == r["broken"]]
    assert [(r["kernel"], r["precision"], r["logit_scale"]) for r in missed] == [
        ("wrong scale", "bfloat16", 0.01),
        ("online softmax that forgets to rescale", "bfloat16", 0.01),
    ]
    for r in missed:
        # They would fail on twice the naive error alone: atol, the larger
        # term of the bound, is what lets them through.
        assert 2 * r["naive_error"] < r["kernel_error"] <= r["bound"]
        assert r["atol"] > 2 * r["naive_error"]


SMALL_LOGIT_BUGS = ["wrong scale", "online softmax that forgets to rescale"]


@pytest.mark.parametrize("bug", SMALL_LOGIT_BUGS)
def test_small_logit_bugs_are_caught_at_logit_scale_one_or_in_float32(bug):
    """The page's advice: test at several logit scales, and in float32."""
    from sdpa_ref.precision import to_bfloat16

    kernel = kernels.BROKEN_KERNELS[bug]
    q, k, v = kernels.demo_inputs("bfloat16", logit_scale=0.01)
    (small,) = testing.check_attention(
        to_bfloat16(kernel(q, k, v)), q, k, v, precision="bfloat16"
    )
    assert small.passed
    q, k, v = kernels.demo_inputs("bfloat16", logit_scale=1.0)
    (large,) = testing.check_attention(
        to_bfloat16(kernel(q, k, v)), q, k, v, precision="bfloat16"
    )
    assert not large.passed
    assert large.kernel_error > 10 * large.bound
    q, k, v = kernels.demo_inputs("float32", logit_scale=0.01)
    (f32,) = testing.check_attention(kernel(q, k, v), q, k, v, rule="flash")
    assert not f32.passed
    assert f32.kernel_error > 1e4 * f32.bound  # "four orders of magnitude"
    (bound,) = testing.check_attention(kernel(q, k, v), q, k, v)
    assert not bound.passed


# hopper/test_flash_attn.py:255, out_ref in the kernel's dtype (float16 here).
def test_atol_is_flash_attention_noise_of_the_reference_in_the_kernel_dtype():
    q, k, v = kernels.demo_inputs("float16")
    out = kernels.online_softmax_kernel(q, k, v)
    (report,) = testing.check_attention(out, q, k, v)
    reference = sdpa_ref.attention(*(a.astype(np.float64) for a in (q, k, v)))
    x = reference.astype(np.float16).astype(np.float32)
    point3 = np.float32(0.3)
    step1 = (x + point3).astype(np.float16).astype(np.float32)
    step2 = (step1 - point3).astype(np.float16).astype(np.float32)
    noise = (step2 - x).astype(np.float16)
    assert report.atol == 2 * float(np.abs(noise).max()) == 2.0**-10
    assert report.atol == testing.flash_atol(reference, "float16")
    assert report.bound == 2 * report.naive_error + report.atol


def test_an_explicit_atol_and_factor_replace_the_defaults():
    q, k, v = inputs(np.float32, shape=(1, 2, 12, 8), h_kv=1)
    grad_out = np.ones((1, 2, 12, 8))
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    g = sdpa_ref.attention_backward(q64, k64, v64, grad_out, softcap=3.0)
    for rule in ("flash", "bound"):
        verdict = testing.check_attention(
            kernels.online_softmax_kernel(q, k, v),
            q,
            k,
            v,
            grad_out=grad_out,
            grads=g[:3],
            atol=0.5,
            factor=7.0,
            rule=rule,
            softcap=3.0,
        )
        assert [(c.atol, c.factor) for c in verdict] == [(0.5, 7.0)] * 4


# hopper/test_flash_attn.py:256 (rtol) and 343-348 (+3e-4 on gradients).
@pytest.mark.parametrize(
    ("softcap", "factor", "extra"), [(None, 2.0, 0.0), (3.0, 3.0, 3e-4)]
)
def test_softcap_raises_the_factor_and_the_gradient_atol(softcap, factor, extra):
    q, k, v = inputs(np.float16, logit_scale=3.0, shape=(1, 2, 12, 8), h_kv=1)
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    grad_out = testing.rounding("float16")(
        np.random.default_rng(SEED).standard_normal((1, 2, 12, 8))
    )
    options = {} if softcap is None else {"softcap": softcap}
    good = sdpa_ref.attention_backward(q64, k64, v64, grad_out, **options)
    out = sdpa_ref.attention(q64, k64, v64, **options).astype(np.float16)
    grads = tuple(a.astype(np.float16) for a in good[:3])
    verdict = testing.assert_attention_close(
        out, q, k, v, grad_out=grad_out, grads=grads, **options
    )
    assert {c.factor for c in verdict} == {factor}
    assert verdict[0].atol == testing.flash_atol(out.astype(np.float64), "float16")
    for report, grad in zip(verdict[1:], good[:3], strict=True):
        assert report.atol == testing.flash_atol(grad, "float16") + extra


def test_llama4_chunked_mask_is_chunk_and_causal():
    """create_chunked_attention_mask (llama-models 408c5771, models/llama4/model.py)."""
    n, size = 11, 4
    rows, cols = np.arange(n)[:, None], np.arange(n)[None, :]
    block_pos = np.abs(cols // size - rows // size)
    token_pos = cols - rows
    llama4 = (block_pos == 0) & (token_pos <= 0)
    q = k = v = np.zeros((n, 2))
    _, w = sdpa_ref.attention(q, k, v, chunk=size, is_causal=True, return_weights=True)
    np.testing.assert_array_equal(w > 0, llama4)


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
        ({"layout": "bsdh"}, ValueError, "layout must be one of"),
        ({"rule": "strict"}, ValueError, "rule must be"),
        ({"lse_base": 1}, ValueError, "lse_base must be"),
        ({"grads": {"dx": 1}}, ValueError, "grads has unknown names"),
        ({"grads": 3}, TypeError, "grads must be a Gradients"),
    ],
)
def test_helper_arguments(args, error, match):
    q, k, v = inputs(np.float32)
    with pytest.raises(error, match=match):
        testing.assert_attention_close(q, q, k, v, **args)


def test_mixed_dtypes_are_refused():
    q, k, v = inputs(np.float32)
    with pytest.raises(TypeError, match="must share one floating dtype"):
        testing.assert_attention_close(q, q, k.astype(np.float16), v)


def test_a_correct_backward_passes_and_a_broken_one_fails():
    from sdpa_ref import attention_backward

    q, k, v = inputs(np.float32, shape=(1, 2, 12, 8), h_kv=1)
    grad_out = np.random.default_rng(SEED).standard_normal((1, 2, 12, 8))
    grad_out = grad_out.astype(np.float32)
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    good = attention_backward(q64, k64, v64, grad_out, is_causal=True)
    grads = tuple(g.astype(np.float32) for g in good[:3])
    out = kernels.online_softmax_kernel(q, k, v, is_causal=True)
    testing.assert_attention_close(
        out, q, k, v, grad_out=grad_out, grads=grads, is_causal=True
    )
    # The gradients of a different grad_out: every gradient is wrong.
    wrong = attention_backward(q64, k64, v64, grad_out * 1.01, is_causal=True)
    with pytest.raises(AssertionError, match=r"dq: [\d,]+ of"):
        testing.assert_attention_close(
            out,
            q,
            k,
            v,
            grad_out=grad_out,
            grads=(wrong.dq, good.dk, good.dv),
            is_causal=True,
        )


HELPERS = [testing.assert_attention_close, testing.check_attention]


@pytest.mark.parametrize("fn", HELPERS, ids=lambda f: f.__name__)
def test_the_helpers_list_every_option_typed_and_keyword_only(fn):
    """The shared Options, one by one; only empty_rows defaults differently."""
    import dataclasses
    import inspect

    from sdpa_ref._options import OPTION_NAMES, Options

    parameters = inspect.signature(fn).parameters
    defaults = {f.name: f.default for f in dataclasses.fields(Options)}
    defaults["empty_rows"] = "zero"  # what FlashAttention and PyTorch 2.5+ give
    for name in OPTION_NAMES:
        p = parameters[name]
        assert p.kind is p.KEYWORD_ONLY, name
        assert p.default == defaults[name], name
        assert p.annotation is not p.empty, name
    listed = [n for n in parameters if n in OPTION_NAMES]
    assert listed == list(OPTION_NAMES)
    assert "**" not in str(inspect.signature(fn))


@pytest.mark.parametrize("fn", HELPERS, ids=lambda f: f.__name__)
def test_a_misspelt_option_gets_a_suggestion(fn):
    q = k = v = np.eye(3)
    with pytest.raises(TypeError, match="did you mean 'is_causal'"):
        fn(q, q, k, v, is_casual=True)
    with pytest.raises(TypeError, match=r"flash_options\(causal=\.\.\.\)"):
        fn(q, q, k, v, causal=True)


def test_the_float32_bound_loosens_as_the_problem_grows():
    """The testing page: at its own size the float32 bound catches both
    small-logit bugs; at 1,024 keys of width 64 it is over ten times looser
    and lets both through, while FlashAttention's rule still fails them."""
    rows = {(r["keys"], r["kernel"]): r for r in kernels.bound_growth()}
    (small, _), (large, _) = kernels.GROWTH_SIZES
    bugs = ("wrong scale", "online softmax that forgets to rescale")
    assert rows[small, "correct"]["passed"]
    assert rows[large, "correct"]["passed"]
    for bug in bugs:
        assert not rows[small, bug]["passed"]
        assert rows[large, bug]["passed"]
        assert not rows[large, bug]["flash_passed"]
    assert rows[large, "correct"]["bound"] > 10 * rows[small, "correct"]["bound"]
