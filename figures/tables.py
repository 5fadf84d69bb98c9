"""Markdown tables built from sdpa_ref's numbers, shown with IPython."""

from __future__ import annotations

import numpy as np
from IPython.display import Markdown


def _number(x, fmt="{:.3f}"):
    if isinstance(x, str):
        return x
    if np.isneginf(x):
        return "−∞"
    return fmt.format(x).replace("-", "−")


def markdown_table(header, rows, align=None):
    """A Markdown table; numbers are formatted by the caller or with 3 decimals.

    Examples
    --------
    >>> print(markdown_table(["a", "b"], [["x", 0.5]]))
    | a | b |
    | :-- | --: |
    | x | 0.500 |
    """
    align = align or [":--"] + ["--:"] * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(_number(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def vector(values, fmt="{:g}"):
    """A vector as ``[a, b, c]`` with typographic minus signs.

    Examples
    --------
    >>> vector([4.0, 0.0, -4.0])
    '[4, 0, −4]'
    """
    return "[" + ", ".join(_number(float(v), fmt) for v in values) + "]"


def comparison_table(comparison, key_names):
    """Unscaled against scaled for one query: scores, weights, entropy, output.

    Parameters
    ----------
    comparison : sdpa_ref.example.Comparison
    key_names : sequence of str
    """
    c = comparison
    header = ["", "unscaled", f"scaled by 1/√{c.width}"]
    rows = [
        ["scores", vector(c.raw_scores), vector(c.scaled_scores)],
        *[
            [f"weight of {name}", c.raw_weights[j], c.scaled_weights[j]]
            for j, name in enumerate(key_names)
        ],
        ["largest weight", c.raw_top_weight, c.scaled_top_weight],
        [
            f"entropy (nats, at most {c.max_entropy:.3f})",
            c.raw_entropy,
            c.scaled_entropy,
        ],
        [
            "output (value mixture)",
            vector(c.raw_output, "{:.3f}"),
            vector(c.scaled_output, "{:.3f}"),
        ],
    ]
    return markdown_table(header, rows)


def matrix_table(matrix, row_labels, col_labels, fmt="{:g}", corner=""):
    """A matrix with labelled rows and columns."""
    rows = [
        [label, *(_number(float(x), fmt) for x in row)]
        for label, row in zip(row_labels, np.asarray(matrix), strict=True)
    ]
    return markdown_table([corner, *col_labels], rows)


def show(markdown_text):
    """Wrap Markdown for display in an executed page."""
    return Markdown(markdown_text)


def inline(text):
    """Markdown for ``{glue:md}``: a short phrase such as a vector."""
    return Markdown(text)


def human_bytes(n):
    """Bytes in binary units, for tables of memory.

    Examples
    --------
    >>> human_bytes(4 * 2**20)
    '4 MiB'
    >>> human_bytes(1536)
    '1.5 KiB'
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.4g} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def human_count(n):
    """A large count with a short suffix: 1.34e8 becomes '134.2 M'.

    Examples
    --------
    >>> human_count(134217728)
    '134.2 M'
    """
    for unit, size in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:g}"


def shape_table(shape_rows):
    r"""Matrices with their symbolic shapes (typeset as math) and concrete ones.

    Parameters
    ----------
    shape_rows : list of (str, str, tuple)
        As returned by :func:`sdpa_ref.example.shape_rows`.

    Examples
    --------
    >>> print(shape_table([("Q", "n_q × d_k", (2, 4))]).splitlines()[-1])
    | Q | $n_q \times d_k$ | 2 × 4 |
    """
    rows = [
        [name, "$" + symbolic.replace("×", r"\times") + "$", " × ".join(map(str, dims))]
        for name, symbolic, dims in shape_rows
    ]
    return markdown_table(
        ["matrix", "shape", "in the example below"], rows, align=[":--", ":--", ":--"]
    )


def coordinate_labels(n):
    """Column labels ``coordinate 1`` to ``coordinate n``.

    Examples
    --------
    >>> coordinate_labels(2)
    ['coordinate 1', 'coordinate 2']
    """
    return [f"coordinate {i}" for i in range(1, n + 1)]
