"""The verdicts of sdpa_ref.testing: right in every dtype, and they name the bug.

A blocked FlashAttention-style kernel in NumPy (sdpa_ref.kernels), correct or
with one planted bug, is judged in float16, bfloat16, float32 and float64,
with its log-sum-exp and every gradient.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sdpa_ref import Gradients, attention, attention_backward, kernels, testing
from sdpa_ref.precision import to_bfloat16

PRECISIONS = ("float16", "bfloat16", "float32", "float64")
SEED = 16


def cast(arrays, precision):
    """Arrays as a kernel of ``precision`` receives them."""
    if precision == "bfloat16":
        return [to_bfloat16(np.asarray(a, np.float32)) for a in arrays]
    return [np.asarray(a).astype(precision) for a in arrays]


def run_kernel(q, k, v, grad_out, precision, options, bug=None, backward_bug=None):
    """The blocked kernel's out, lse and gradients, as a kernel test holds them."""
    out, lse = kernels.blocked_attention(
        q, k, v, precision=precision, bug=bug, **options
    )
    grads = kernels.blocked_attention_backward(
        q, k, v, out, lse, grad_out, precision=precision, bug=backward_bug, **options
    )
    return out, lse, grads


def judge(q, k, v, grad_out, precision, options, out, lse, grads, **extra):
    sdpa_options = {k_: v_ for k_, v_ in options.items() if k_ != "block_size"}
    return testing.check_attention(
        out,
        q,
        k,
        v,
        lse=lse,
        grad_out=grad_out,
        grads=grads,
        precision=precision,
        **sdpa_options,
        **extra,
    )


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
def test_correct_blocked_kernels_pass_in_every_precision(precision):
    """No false failure: 40 random problems with every option, block sizes 1 to 64.

    Block size 1 is recursive summation, the order with the largest error bound.
    """
    rng = np.random.default_rng([SEED, PRECISIONS.index(precision)])
    failures = []
    for case in range(int(os.environ.get("VERDICT_CASES", "40"))):
        (q, k, v, grad_out), options = kernels.random_problem(rng, precision)
        out, lse, grads = run_kernel(q, k, v, grad_out, precision, options)
        verdict = judge(q, k, v, grad_out, precision, options, out, lse, grads)
        assert {c.name for c in verdict} >= {"out", "lse", "dq", "dk", "dv"}
        if not verdict.passed:
            failures.append(f"case {case} {sorted(options)}:\n{verdict.message}")
    assert not failures, "\n\n".join(failures)


def bug_case(bug, precision):
    """Inputs and options on which ``bug`` changes what the kernel returns."""
    rng = np.random.default_rng(SEED)
    b, h, h_kv, n_q, n_k, d = 2, 4, 2, 48, 64, 16
    sigma = 4.0 if bug == "no_max" else 1.0
    q = rng.standard_normal((b, h, n_q, d)) * sigma
    k, v = (rng.standard_normal((b, h_kv, n_k, d)) for _ in range(2))
    grad_out = rng.standard_normal((b, h, n_q, d))
    options = {
        "window_off_by_one": {"window": (8, 0), "align": "bottom_right"},
        "causal_alignment": {"is_causal": True, "align": "bottom_right"},
        "softcap_after_mask": {"softcap": 3.0, "is_causal": True},
        "dropout_no_rescale": {
            "dropout_p": 0.2,
            "dropout_mask": rng.random((b, h, n_q, n_k)) > 0.2,
        },
        "dsink_sign": {"sink_logits": np.array([0.5, -1.0, 2.0, 0.0])},
    }.get(bug, {})
    return cast((q, k, v, grad_out), precision), options


#: What each planted bug breaks, in the precisions where it changes the output.
BUG_BREAKS = {
    "window_off_by_one": {"out", "lse", "dq", "dk", "dv"},
    "causal_alignment": {"out", "lse", "dq", "dk", "dv"},
    "gqa_head_order": {"out", "lse", "dq", "dk", "dv"},
    "scale": {"out", "lse", "dq", "dk", "dv"},
    "no_rescale": {"out", "lse"},
    "no_max": {"out", "lse"},
    "lse_log2": {"lse"},
    "lse_no_max": {"lse"},
    "softcap_after_mask": {"out", "lse", "dv"},
    "dropout_no_rescale": {"out", "dq", "dk", "dv"},
    "no_delta": {"dq", "dk"},
    "dk_no_scale": {"dk"},
    "dsink_sign": {"dsink_logits"},
}
FORWARD_BUGS = {
    "window_off_by_one",
    "causal_alignment",
    "gqa_head_order",
    "scale",
    "no_rescale",
    "no_max",
    "lse_log2",
    "lse_no_max",
    "softcap_after_mask",
    "dropout_no_rescale",
}


def test_every_planted_bug_is_listed():
    assert set(BUG_BREAKS) == set(kernels.PLANTED_BUGS)
    assert len(BUG_BREAKS) >= 12


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("bug", sorted(BUG_BREAKS))
def test_every_planted_bug_is_caught(bug, precision):
    """Each bug fails exactly the arrays it breaks; the rest still pass.

    Skipping the row maximum only matters where exp overflows: in float16,
    past a logit of 11.09. In the other precisions that kernel is correct.
    """
    (q, k, v, grad_out), options = bug_case(bug, precision)
    forward_bug = bug if bug in FORWARD_BUGS else None
    backward_bug = bug if bug in FORWARD_BUGS - {"lse_log2", "lse_no_max"} else None
    if bug not in FORWARD_BUGS:
        backward_bug = bug
    out, lse = kernels.blocked_attention(
        q, k, v, precision=precision, bug=forward_bug, **options
    )
    # The backward gets the correct forward's out and lse, so that the
    # gradients show the backward's own bug.
    good_out, good_lse = kernels.blocked_attention(
        q, k, v, precision=precision, **options
    )
    grads = kernels.blocked_attention_backward(
        q,
        k,
        v,
        good_out,
        good_lse,
        grad_out,
        precision=precision,
        bug=backward_bug,
        **options,
    )
    verdict = judge(
        q, k, v, grad_out, precision, options, out, lse, grads, diagnose=False
    )
    failed = {c.name for c in verdict if not c.passed}
    expected = set() if bug == "no_max" and precision != "float16" else BUG_BREAKS[bug]
    assert failed == expected, verdict.message


def slip_case(slip):  # noqa: PLR0911 (one case per slip)
    """A kernel with one convention slip, and how the test calls the helper."""
    rng = np.random.default_rng(SEED)
    q, k, v = (
        rng.standard_normal((1, 2, n, 16)).astype(np.float32) for n in (24, 40, 40)
    )
    if slip == "align":
        out, lse = kernels.blocked_attention(q, k, v, is_causal=True, align="top_left")
        return (out, q, k, v), {"lse": lse, "is_causal": True, "align": "bottom_right"}
    if slip == "layout":
        # FlashAttention's (batch, seqlen, heads, dim) arrays, read as such by the
        # kernel, but checked without layout="bshd".
        q, k, v = (np.swapaxes(a, 1, 2) for a in (q, k[:, :, :24], v[:, :, :24]))
        out, _ = kernels.blocked_attention(*(np.swapaxes(a, 1, 2) for a in (q, k, v)))
        return (np.swapaxes(out, 1, 2), q, k, v), {}
    if slip == "scale":
        out, lse = kernels.blocked_attention(q, k, v, bug="scale")
        return (out, q, k, v), {"lse": lse}
    if slip == "bfloat16":
        q, k, v = cast((q, k, v), "bfloat16")
        out, lse = kernels.blocked_attention(q, k, v, precision="bfloat16")
        return (out, q, k, v), {"lse": lse}
    if slip == "lse_base":
        out, lse = kernels.blocked_attention(q, k, v, bug="lse_log2")
        return (out, q, k, v), {"lse": lse}
    if slip == "window":
        options = {"window": (4, 0), "align": "bottom_right"}
        out, lse = kernels.blocked_attention(
            q, k, v, bug="window_off_by_one", **options
        )
        return (out, q, k, v), {"lse": lse, **options}
    assert slip == "causal"
    out, lse = kernels.blocked_attention(
        q, k, v, window=(None, 1), align="bottom_right"
    )
    return (out, q, k, v), {"lse": lse, "is_causal": True, "align": "bottom_right"}


SLIPS = {
    "align": "passes with align='top_left' instead of 'bottom_right': it aligns its "
    "causal mask (and window) to the top left",
    "layout": "passes with layout='bshd': it reads its arrays as (batch, seqlen, "
    "heads, dim)",
    "scale": "passes with scale=1/d = 0.0625: it divides the scores by d = 16",
    "bfloat16": "passes with precision='bfloat16': it computes in bfloat16",
    "lse_base": "lse passes with lse_base=2: it stores the log-sum-exp in base 2",
    "window": "passes with window=(5, 0): its window's left bound is off by one",
    "causal": "passes with window=(None, 1), is_causal=False: its causal mask is off "
    "by one",
}


@pytest.mark.parametrize("slip", sorted(SLIPS))
def test_the_message_names_the_slip(slip):
    args, kwargs = slip_case(slip)
    with pytest.raises(AssertionError) as info:
        testing.assert_attention_close(*args, **kwargs)
    assert SLIPS[slip] in str(info.value)


def test_no_slip_is_named_when_none_explains_the_failure():
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 2, 8, 4)).astype(np.float32) for _ in range(3))
    verdict = testing.check_attention(-attention(q, k, v).astype(np.float32), q, k, v)
    assert verdict.slip.startswith("No common convention slip explains it; tried ")
    assert testing.check_attention(q, q, k, v, diagnose=False).slip is None


def test_a_window_off_by_one_is_located_by_its_query_rows():
    """Only the rows whose window reaches key 0 can see the extra key."""
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((2, 3, 64, 8)).astype(np.float32) for _ in range(3))
    options = {"window": (16, 0)}
    out, _ = kernels.blocked_attention(q, k, v, bug="window_off_by_one", **options)
    (check,) = testing.check_attention(out, q, k, v, diagnose=False, **options)
    # Row i sees keys i-16..i; the bug adds key i-17, which exists for i >= 17.
    assert check.where == "batch entries 0-1, heads 0-2, query rows 17-63"
    in_those_rows = 2 * 3 * 47 * 8
    assert 0.99 * in_those_rows < check.failing <= in_those_rows
    assert f"{check.failing:,} of 3,072 elements (" in check.message


def test_the_worst_element_is_printed_to_every_digit():
    """In float32 two values can agree to six digits; repr tells them apart."""
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 1, 4, 4)).astype(np.float32) for _ in range(3))
    reference = attention(q, k, v)
    out = reference.astype(np.float32)
    out[0, 0, 2, 1] = np.float32(reference[0, 0, 2, 1] + 4e-7)
    (check,) = testing.check_attention(out, q, k, v, rule="flash", diagnose=False)
    assert not check.passed
    kernel, reference = check.kernel_value, check.reference_value
    assert f"{kernel:.6g}" == f"{reference:.6g}"  # what the old message printed
    assert f"kernel {kernel!r}, reference {reference!r}" in check.message
    assert repr(kernel) != repr(reference)


@pytest.mark.parametrize("form", ["Gradients", "mapping", "tuple"])
def test_grads_come_as_gradients_a_mapping_or_a_tuple(form):
    rng = np.random.default_rng(SEED)
    q, k, v, g = (rng.standard_normal((1, 2, 6, 4)) for _ in range(4))
    sink = np.array([0.3, -0.2])
    bias = rng.standard_normal((6, 6))
    good = attention_backward(q, k, v, g, sink_logits=sink, mask=bias)
    grads = {
        "Gradients": good,
        "mapping": good._asdict(),
        "tuple": tuple(good),
    }[form]
    out = attention(q, k, v, sink_logits=sink, mask=bias)
    verdict = testing.assert_attention_close(
        out, q, k, v, grad_out=g, grads=grads, sink_logits=sink, mask=bias
    )
    assert [c.name for c in verdict] == [
        "out",
        "dq",
        "dk",
        "dv",
        "dmask",
        "dsink_logits",
    ]
    only_dk = testing.assert_attention_close(
        out, q, k, v, grad_out=g, grads={"dk": good.dk}, sink_logits=sink, mask=bias
    )
    assert [c.name for c in only_dk] == ["out", "dk"]
    assert isinstance(good, Gradients)


def test_a_wrong_dmask_and_dsink_fail():
    rng = np.random.default_rng(SEED)
    q, k, v, g = (rng.standard_normal((1, 2, 6, 4)) for _ in range(4))
    sink, bias = np.array([0.3, -0.2]), rng.standard_normal((6, 6))
    good = attention_backward(q, k, v, g, sink_logits=sink, mask=bias)
    out = attention(q, k, v, sink_logits=sink, mask=bias)
    bad = good._replace(dmask=good.dmask.T, dsink_logits=-good.dsink_logits)
    verdict = testing.check_attention(
        out, q, k, v, grad_out=g, grads=bad, sink_logits=sink, mask=bias
    )
    assert [c.name for c in verdict if not c.passed] == ["dmask", "dsink_logits"]
    with pytest.raises(ValueError, match="no float mask"):
        testing.check_attention(out, q, k, v, grad_out=g, grads={"dmask": bias})
    with pytest.raises(ValueError, match="no sink_logits"):
        testing.check_attention(out, q, k, v, grad_out=g, grads={"dsink_logits": sink})


def test_lse_rows_that_are_empty_or_padded():
    """An empty row passes with -inf or +inf; padded rows are not judged."""
    q = k = v = np.ones((2, 1, 3, 2))
    keep = np.array([[True, True, True], [True, True, True], [False, False, False]])
    out, lse = attention(q, k, v, mask=keep, empty_rows="zero", return_lse=True)
    assert np.isneginf(lse[..., 2]).all()
    for value in (-np.inf, np.inf):
        marked = lse.copy()
        marked[..., 2] = value
        assert testing.check_attention(out, q, k, v, lse=marked, mask=keep).passed
    marked[..., 2] = 0.0
    verdict = testing.check_attention(out, q, k, v, lse=marked, mask=keep)
    assert verdict[1].where == "batch entries 0-1, head 0, query row 2"
    lengths = np.array([3, 1])
    out, lse = attention(q, k, v, q_lengths=lengths, return_lse=True)
    junk = np.where(np.isneginf(lse), 7.0, lse)
    assert testing.check_attention(out, q, k, v, lse=junk, q_lengths=lengths).passed


def test_an_lse_of_the_wrong_shape_is_refused():
    q = k = v = np.ones((1, 2, 3, 2))
    out = attention(q, k, v)
    with pytest.raises(ValueError, match=r"lse has shape \(1, 3, 2\)"):
        testing.check_attention(out, q, k, v, lse=np.zeros((1, 3, 2)))


def test_both_layouts_give_one_verdict_reported_in_the_callers_layout():
    rng = np.random.default_rng(SEED)
    (q, k, v, g), options = (
        cast([rng.standard_normal((2, 4, 20, 8)) for _ in range(4)], "float32"),
        {"is_causal": True},
    )
    out, lse, grads = run_kernel(q, k, v, g, "float32", options)
    out[1, 3, 5, 2] += 0.25
    heads_first = judge(q, k, v, g, "float32", options, out, lse, grads, diagnose=False)
    seq_first = judge(
        *(np.swapaxes(a, 1, 2) for a in (q, k, v, g)),
        "float32",
        options,
        np.swapaxes(out, 1, 2),
        lse,
        {n: np.swapaxes(a, 1, 2) for n, a in grads.items()},
        layout="bshd",
        diagnose=False,
    )
    assert [c.passed for c in heads_first] == [c.passed for c in seq_first]
    assert heads_first[0].worst == (1, 3, 5, 2)
    assert seq_first[0].worst == (1, 5, 3, 2)
    assert "Worst at batch 1, query 5, head 3, column 2" in seq_first[0].message
    assert heads_first[0].where == seq_first[0].where


def test_the_bound_is_the_kernels_plus_the_references_own():
    """A float64 kernel is judged against a float64 reference: both round."""
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.standard_normal((1, 2, 16, 8)) for _ in range(3))
    out = attention(q, k, v)
    (f64,) = testing.check_attention(out, q, k, v)
    (f32,) = testing.check_attention(
        out.astype(np.float32), *(a.astype(np.float32) for a in (q, k, v))
    )
    assert f64.passed
    assert f64.kernel_error == 0.0
    assert 0 < f64.bound < 1e-12 < f32.bound < 1e-3


def test_the_tiled_path_and_the_pieces_give_the_same_verdicts(monkeypatch):
    """Above a size threshold the reference runs tiled and the naive emulation in
    pieces; the verdicts and bounds do not change."""
    rng = np.random.default_rng(SEED)
    for precision in ("bfloat16", "float32"):
        (q, k, v, g), options = (
            cast(
                [
                    rng.standard_normal((2, 4, 40, 8)),
                    rng.standard_normal((2, 2, 56, 8)),
                    rng.standard_normal((2, 2, 56, 8)),
                    rng.standard_normal((2, 4, 40, 8)),
                ],
                precision,
            ),
            {"is_causal": True, "sink_logits": np.array([0.1, 0.2, 0.3, 0.4])},
        )
        out, lse, grads = run_kernel(q, k, v, g, precision, options)
        whole = judge(q, k, v, g, precision, options, out, lse, grads)
        with monkeypatch.context() as patch:
            patch.setattr(testing, "TILED_ABOVE_BYTES", 1024)
            patch.setattr(testing, "_NAIVE_CHUNK_ELEMENTS", 1024)
            pieces = judge(q, k, v, g, precision, options, out, lse, grads)
        for a, b in zip(whole, pieces, strict=True):
            assert a.passed == b.passed
            np.testing.assert_allclose(a.bound, b.bound, rtol=1e-9)
            np.testing.assert_allclose(a.kernel_error, b.kernel_error, rtol=1e-6)


@pytest.mark.slow
def test_pytest_shows_the_failure_without_sdpa_refs_frames(tmp_path):
    test = tmp_path / "test_kernel.py"
    test.write_text(
        textwrap.dedent(
            """
            import numpy as np
            from sdpa_ref.testing import assert_attention_close

            def test_kernel():
                q = k = v = np.eye(2, dtype=np.float32)
                assert_attention_close(q, q, k, v)
            """
        )
    )
    env = os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(test)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 1, result.stdout
    assert "out: 4 of 4 elements" in result.stdout
    assert "sdpa_ref/" not in result.stdout  # no frame of sdpa_ref's, wrapper included
    assert "assert_attention_close(q, q, k, v)" in result.stdout
