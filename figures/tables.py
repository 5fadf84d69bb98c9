"""Markdown tables built from sdpa_ref's numbers, shown with IPython."""

from __future__ import annotations

import numpy as np
from IPython.display import Markdown


def number(x, fmt="{:.3f}"):
    """A table cell: typographic minus, ``−∞`` for -inf, pipes escaped in labels."""
    if isinstance(x, str):
        return x.replace("|", "\\|")  # a bare pipe would split the column
    if np.isneginf(x):
        return "−∞"
    return fmt.format(x).replace("-", "−")


def markdown_table(header, rows, align=None):
    r"""A Markdown table; numbers are formatted by the caller or with 3 decimals.

    Examples
    --------
    >>> print(markdown_table(["a", "|b|"], [["x", 0.5]]))
    | a | \|b\| |
    | :-- | --: |
    | x | 0.500 |
    """
    align = align or [":--"] + ["--:"] * (len(header) - 1)
    header = [number(h) for h in header]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(number(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def records_markdown(records, columns, align=None):
    """A Markdown table with one row per record (a mapping).

    ``columns`` maps each column's heading to the record's key for it and how
    to write its value: a format string, or a function of the value.

    Examples
    --------
    >>> columns = {"n": ("n", "{:,}"), "x": ("x", str)}
    >>> print(records_markdown([{"n": 1024, "x": 0.5}], columns))
    | n | x |
    | :-- | --: |
    | 1,024 | 0.5 |
    """
    return markdown_table(
        list(columns),
        [
            [
                fmt(record[key]) if callable(fmt) else fmt.format(record[key])
                for key, fmt in columns.values()
            ]
            for record in records
        ],
        align,
    )


def vector(values, fmt="{:g}"):
    """A vector as ``[a, b, c]`` with typographic minus signs.

    Examples
    --------
    >>> vector([4.0, 0.0, -4.0])
    '[4, 0, −4]'
    """
    return "[" + ", ".join(number(float(v), fmt) for v in values) + "]"


def times_ten(x, digits=1):
    """A number as ``m × 10ⁿ``, with a real minus sign and a superscript power.

    Examples
    --------
    >>> times_ten(1.0141e31), times_ten(-6.6e-5)
    ('1.0 × 10³¹', '−6.6 × 10⁻⁵')
    """
    mantissa, exponent = f"{float(x):.{digits}e}".split("e")
    power = str(int(exponent)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{mantissa.replace('-', '−')} × 10{power}"


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
        [label, *(number(float(x), fmt) for x in row)]
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


def cost_markdown(rows):
    """The cost table of :func:`sdpa_ref.cost.cost_table`, 16-bit scores.

    Arithmetic in multiply-adds; FLOPs are twice as many, and a column of
    them would only push the table past a phone's width.

    Examples
    --------
    >>> from sdpa_ref.cost import cost_table
    >>> print(cost_markdown(cost_table([1024], itemsize=2)).splitlines()[-1])
    | 1,024 | 134.2 M | 2 MiB | 1× |
    """
    return records_markdown(
        rows,
        {
            "sequence length n": ("n", "{:,}"),
            "multiply-adds": ("macs", human_count),
            "scores of one head": ("score_bytes", human_bytes),
            "growth": ("macs_growth", "{:,.0f}×"),
        },
    )


def memory_markdown(rows):
    """The measured memory of :func:`sdpa_ref.flash.memory_sweep`."""
    return records_markdown(
        rows,
        {
            "n": ("n", "{:,}"),
            "dense attention": ("dense_bytes", human_bytes),
            "tiled attention": ("tiled_bytes", human_bytes),
            "one n × n float64 matrix": ("score_bytes", human_bytes),
            "dense / tiled": ("memory_ratio", "{:.1f}×"),
            "max |dense − tiled|": ("max_abs_diff", "{:.1e}"),
        },
    )


def online_trace_markdown(trace):
    """The steps of :func:`sdpa_ref.flash.online_softmax_trace`, one row per block."""
    return markdown_table(
        [
            "block",
            "keys",
            "block max",
            "m before",
            "m after",
            "rescale e^(m before − m after)",
            "running sum ℓ",
            "accumulator a",
        ],
        [
            [
                str(i),
                f"{s['first_key']}–{s['last_key']}",
                number(s["block_max"], "{:g}"),
                number(s["max_before"], "{:g}"),
                number(s["max_after"], "{:g}"),
                s["rescale"],
                s["sum"],
                vector(s["acc"], "{:.3f}"),
            ]
            for i, s in enumerate(trace, start=1)
        ],
    )


def traffic_markdown(rows):
    """HBM traffic of :func:`sdpa_ref.flash.hbm_traffic`, one row per N.

    Narrow, for phones: standard attention's count (Algorithm 0), in
    millions of numbers read or written, and that count divided by each of
    FlashAttention's Algorithm 1 (FA), FlashAttention-2's loop order given
    FA's block sizes, and FlashAttention-2 with the blocks its A100 kernels
    use.

    Examples
    --------
    >>> import sdpa_ref
    >>> table = traffic_markdown([sdpa_ref.flash.hbm_traffic(32768, 64, 98_304)])
    >>> print(table.splitlines()[0])
    | N | standard | ÷ FA | ÷ FA-2 loop order, FA's blocks | ÷ FA-2 kernel's blocks |
    >>> print(table.splitlines()[-1])
    | 32,768 | 4,303 | 7.7× | 11.8× | 4.0× |
    """

    def millions(count):
        return f"{count / 1e6:,.0f}" if count >= 1e8 else f"{count / 1e6:.1f}"

    return records_markdown(
        rows,
        {
            "N": ("n", "{:,}"),
            "standard": ("standard", millions),
            "÷ FA": ("ratio", "{:.1f}×"),
            "÷ FA-2 loop order, FA's blocks": ("ratio2", "{:.1f}×"),
            "÷ FA-2 kernel's blocks": ("ratio2_kernel", "{:.1f}×"),
        },
    )


def tradeoff_markdown(figure, recount):
    """The FlashAttention paper's Figure 2 (left), with its FLOPs recounted.

    Parameters
    ----------
    figure : dict
        :data:`sdpa_ref.published.FIGURE_2`.
    recount : dict
        :func:`sdpa_ref.flash.figure_2_matmul_flops`: ``standard`` and
        ``flash`` in GFLOPs.

    Examples
    --------
    >>> import sdpa_ref
    >>> table = tradeoff_markdown(
    ...     sdpa_ref.flash.FIGURE_2, sdpa_ref.flash.figure_2_matmul_flops()
    ... )
    >>> print(table.splitlines()[2])
    | GFLOPs, as printed | 66.6 | 75.2 |
    >>> print(table.splitlines()[3])
    | GFLOPs, matrix products (recount) | 824.6 | 962.1 |
    """
    std, flash = figure["standard"], figure["flash"]
    return markdown_table(
        ["", "standard attention", "FlashAttention"],
        [
            ["GFLOPs, as printed", f"{std['gflops']:g}", f"{flash['gflops']:g}"],
            [
                "GFLOPs, matrix products (recount)",
                f"{recount['standard']:.1f}",
                f"{recount['flash']:.1f}",
            ],
            *(
                [label, f"{std[key]:g}", f"{flash[key]:g}"]
                for label, key in (
                    ("HBM reads and writes (GB)", "hbm_gb"),
                    ("runtime (ms)", "runtime_ms"),
                )
            ),
        ],
    )


def outcomes_markdown(outcomes, pooled_rows, row_labels):
    """Each empty-row convention's outputs, per query, then pooled rows.

    ``pooled_rows`` maps a row label to a dict of pooled vectors, as
    :func:`sdpa_ref.masks.pooled_outputs` returns them.
    """
    names = list(outcomes)
    rows = [
        [label, *(vector(outcomes[name][i], "{:.2f}") for name in names)]
        for i, label in enumerate(row_labels)
    ]
    rows += [
        [label, *(vector(pooled[name], "{:.2f}") for name in names)]
        for label, pooled in pooled_rows.items()
    ]
    return markdown_table(["query", *names], rows, align=[":--"] * (len(names) + 1))


def precision_markdown(rows, dtypes):
    """Errors of :func:`sdpa_ref.precision.precision_sweep`; NaN reads "breaks"."""

    def cell(err):
        return "breaks (inf or NaN)" if np.isnan(err) else f"{err:.1e}"

    header = ["largest logit"]
    for dtype in dtypes:
        header += [f"{dtype}, naive", f"{dtype}, max subtracted"]
    body = [
        [
            f"{r['top']:g}",
            *(cell(r[(d, kind)]) for d in dtypes for kind in ("naive", "stable")),
        ]
        for r in rows
    ]
    return markdown_table(header, body)


def kv_markdown(rows):
    """KV-cache sizes of :func:`sdpa_ref.variants.kv_cache_table`."""
    return records_markdown(
        rows,
        {
            "model": ("model", str),
            "layers": ("layers", str),
            "query heads": ("q_heads", str),
            "key/value heads": ("kv_heads", str),
            "head width": ("head_dim", str),
            "KV cache per sequence": ("bytes", human_bytes),
            "vs. multi-head": ("vs_multi_head", "{:.3f}"),
        },
    )


def window_markdown(rows):
    """Pairs kept by a sliding window, from :func:`sdpa_ref.masks.window_pairs`."""
    return records_markdown(
        rows,
        {
            "n": ("n", "{:,}"),
            "causal pairs": ("causal", "{:,}"),
            "pairs in the window": ("window", "{:,}"),
            "fraction kept": ("fraction", "{:.4f}"),
        },
    )


def option_names_markdown(rows):
    """sdpa_ref's option names beside FlashAttention's and PyTorch's.

    ``rows`` (:data:`sdpa_ref.kernels.OPTION_NAMES`) hold Markdown cells, with
    every name in code formatting.

    Examples
    --------
    >>> print(option_names_markdown([("`scale`", "`softmax_scale`", "`scale`")]))
    | sdpa_ref | FlashAttention | PyTorch |
    | :-- | :-- | :-- |
    | `scale` | `softmax_scale` | `scale` |
    """
    return markdown_table(
        ["sdpa_ref", "FlashAttention", "PyTorch"],
        [list(row) for row in rows],
        align=[":--"] * 3,
    )


def kernel_verdicts_markdown(rows, tolerances):
    """Example kernels judged by FlashAttention's rule and by fixed tolerances.

    ``rows`` come from :func:`sdpa_ref.kernels.tolerance_table`; a ✗ marks a
    verdict that is wrong about the kernel.

    Examples
    --------
    >>> row = {"kernel": "correct", "broken": False, "precision": "float32",
    ...        "logit_scale": 1.0, "kernel_error": 2.6e-7, "naive_error": 2.7e-7,
    ...        "bound": 6.7e-7, "flash": True, "fixed": {0.001: True}}
    >>> print(kernel_verdicts_markdown([row], (0.001,)).splitlines()[-1])
    | correct | float32 | 1 | 2.6e−7 | 6.7e−7 | passes | passes |
    """

    def verdict(passed, broken):
        right = passed != broken
        return ("passes" if passed else "fails") + ("" if right else " ✗")

    def short(x):
        """``2.6e−7`` rather than ``2.6e-07``; ``∞`` for inf."""
        if np.isinf(x):
            return "∞"
        mantissa, _, exponent = f"{x:.2g}".partition("e")
        return mantissa + (f"e{int(exponent)}".replace("-", "−") if exponent else "")

    return markdown_table(
        [
            "kernel",
            "precision",
            "logit scale",
            "error vs float64",
            "bound of FlashAttention's rule",
            'FlashAttention\'s rule (`rule="flash"`)',
            *(f"fixed {tol:g}" for tol in tolerances),
        ],
        [
            [
                r["kernel"],
                r["precision"],
                f"{r['logit_scale']:g}",
                short(r["kernel_error"]),
                short(r["bound"]),
                verdict(r["flash"], r["broken"]),
                *(verdict(r["fixed"][tol], r["broken"]) for tol in tolerances),
            ]
            for r in rows
        ],
        align=[":--", ":--", "--:", "--:", "--:", ":--", *[":--"] * len(tolerances)],
    )


def head_width_markdown(rows):
    """Widths and heads of :func:`sdpa_ref.example.head_width_rows`, one model a column.

    Models run across, so that the table fits a phone: six short rows of
    numbers under the models' names.
    """
    quantities = [
        ("d_model", "d_model"),
        ("query heads h", "heads"),
        ("key/value heads", "kv_heads"),
        ("d_model / h", "even_split"),
        ("dₖ", "head_width"),
        ("h·dₖ", "concat_width"),
    ]
    return markdown_table(
        ["model", *(r["name"] for r in rows)],
        [[label, *(f"{r[key]:,}" for r in rows)] for label, key in quantities],
    )


def projection_markdown(example):
    """Tokens and their projections, from :func:`sdpa_ref.example.projection_example`.

    One row per token: its vector ``x`` (a row of ``X``) and the query, key
    and value projected from it, ``x W_Q``, ``x W_K`` and ``x W_V``.
    """
    return markdown_table(
        ["token", "x", "q", "k", "v"],
        [
            [str(i), *(vector(example[key][i]) for key in ("X", "Q", "K", "V"))]
            for i in range(len(example["X"]))
        ],
    )


def weights_markdown(example):
    """The projections of :func:`sdpa_ref.example.projection_example`, row by row.

    Row ``j`` of each matrix is what coordinate ``j`` of a token adds, times
    that coordinate, to the token's query, key or value.
    """
    return markdown_table(
        ["row", "W_Q", "W_K", "W_V"],
        [
            [
                f"row {j + 1}",
                *(vector(example[key][j]) for key in ("W_Q", "W_K", "W_V")),
            ]
            for j in range(len(example["W_Q"]))
        ],
    )


def row_mixture(x, matrix, result):
    """A vector times a matrix, as the matrix's rows weighted by the vector.

    ``x W = x_1 (row 1 of W) + x_2 (row 2 of W) + ... = result``, in plain
    text for ``{glue:md}``. The result is computed by sdpa_ref and passed in;
    this only writes it out.

    Examples
    --------
    >>> row_mixture([1, -2], [[1, 0], [0, 1]], [1, -2])
    '1·[1, 0] + (−2)·[0, 1] = [1, −2]'
    """
    terms = []
    for a, row in zip(x, matrix, strict=True):
        weight = number(float(a), "{:g}")
        weight = f"({weight})" if weight.startswith("−") else weight
        terms.append(f"{weight}·{vector(row)}")
    return " + ".join(terms) + f" = {vector(result)}"
