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
