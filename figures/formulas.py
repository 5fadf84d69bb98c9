"""LaTeX for formulas that carry the computed numbers."""

from __future__ import annotations

from IPython.display import Math


def _row(values, fmt):
    return r"\left[" + ",\\ ".join(fmt.format(float(v)) for v in values) + r"\right]"


def softmax_row(scores, weights, *, score_fmt="{:g}", weight_fmt="{:.3f}"):
    r"""``softmax([scores]) = [weights]`` as LaTeX.

    Examples
    --------
    >>> softmax_row([2, 0], [0.881, 0.119])
    '\\operatorname{softmax}\\left[2,\\ 0\\right] = \\left[0.881,\\ 0.119\\right]'
    """
    return (
        r"\operatorname{softmax}"
        + _row(scores, score_fmt)
        + " = "
        + _row(weights, weight_fmt)
    )


def scaled_row(raw, scaled, d_k):
    r"""``[raw] / sqrt(d_k) = [scaled]`` as LaTeX.

    Examples
    --------
    >>> scaled_row([4, 0], [2, 0], 4)
    '\\frac{\\left[4,\\ 0\\right]}{\\sqrt{4}} = \\left[2,\\ 0\\right]'
    """
    return (
        r"\frac{"
        + _row(raw, "{:g}")
        + r"}{\sqrt{"
        + f"{d_k}"
        + "}} = "
        + _row(scaled, "{:g}")
    )


def entropy_sum(weights, value):
    r"""``H(w) = -sum w ln w = value`` written out term by term, as LaTeX."""
    terms = " ".join(
        f"- {w:.3f}\\ln {w:.3f}" if w > 0 else "- 0"
        for w in (float(x) for x in weights)
    )
    return f"H(w) = {terms} = {value:.3f}\\ \\text{{nats}}"


def math(latex):
    """Wrap LaTeX for ``glue`` and ``{glue:math}``."""
    return Math(latex)


def dot_product_terms(q, k, total):
    r"""``q·k = q_1 k_1 + ... = total``, every coordinate product written out.

    The total is passed in, computed by sdpa_ref; this only typesets it.

    Examples
    --------
    >>> dot_product_terms([2, -1], [1, 3], -1.0)
    'q\\cdot k = (2)(1) + (-1)(3) = -1'
    """
    terms = " + ".join(
        f"({float(a):g})({float(b):g})" for a, b in zip(q, k, strict=True)
    )
    return rf"q\cdot k = {terms} = {float(total):g}"


def softmax_fraction(scores, j, weight, *, name="s"):
    r"""One softmax weight written out as a fraction of exponentials, as LaTeX.

    ``softmax(s)_j = e^{s_j} / (e^{s_0} + ... + e^{s_{n-1}}) = weight``, with
    every exponent filled in and ``j`` counted from 0, like the keys K0, K1.
    The weight is computed by sdpa_ref and passed in; this only typesets it.

    Examples
    --------
    >>> softmax_fraction([2, 0], 0, 0.881)
    '\\operatorname{softmax}(s)_{0} = \\frac{e^{2}}{e^{2} + e^{0}} = 0.881'
    """
    exps = " + ".join(f"e^{{{float(s):g}}}" for s in scores)
    top = f"e^{{{float(scores[j]):g}}}"
    return (
        rf"\operatorname{{softmax}}({name})_{{{j}}} = "
        rf"\frac{{{top}}}{{{exps}}} = {float(weight):.3f}"
    )


def value_mixture(weights, values, output, *, fmt="{:.3f}"):
    r"""``output = w_1 v_1 + ... + w_n v_n`` for one query, as aligned LaTeX.

    Each value row is written as a bracketed vector and multiplied by its
    weight, one term per line so that the block fits a phone screen, and the
    output reads as a weighted mixture of value rows. The output is computed
    by sdpa_ref and passed in; this only typesets it.

    Examples
    --------
    >>> print(value_mixture([0.25, 0.75], [[4, 0], [0, 4]], [1, 3], fmt="{:g}"))
    \begin{aligned}\text{output} &= 0.25\left[4,\ 0\right] \\
    &+ 0.75\left[0,\ 4\right] \\
    &= \left[1,\ 3\right]\end{aligned}
    """
    terms = [
        fmt.format(float(w)) + _row(v, "{:g}")
        for w, v in zip(weights, values, strict=True)
    ]
    lines = [r"\text{output} &= " + terms[0]]
    lines += ["&+ " + term for term in terms[1:]]
    lines.append("&= " + _row(output, fmt))
    return r"\begin{aligned}" + " \\\\\n".join(lines) + r"\end{aligned}"
