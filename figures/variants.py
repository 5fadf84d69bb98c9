"""Figures and tables for the variants page: scale choices and linear attention."""

from __future__ import annotations

import numpy as np

from .style import MUTED, PAGE_WIDTH, SERIES_COLORS, new_figure, plain_log_ticks, styled
from .tables import markdown_table, number

#: Legend text for each of :data:`sdpa_ref.variants.SCALE_CHOICES`, the labels
#: of :data:`sdpa_ref.scales.TABLE`.
SCALE_LABELS = {
    "none": "none",
    "1/√d_k": r"$1/\sqrt{d_k}$",
    "1/d_k": r"$1/d_k$ (μP)",
    "QK-norm": "QK-norm: gain × cosine",
    "RMSNorm + 1/√d_k": r"QK-norm: RMSNorm, then $1/\sqrt{d_k}$",
}


@styled
def scale_choices_figure(widths, panels, ceilings, labels=None):
    """Entropy against head width under each scale choice, one panel per source.

    Parameters
    ----------
    widths : dict of str to sequence of int
        Panel title to the widths it was computed at.
    panels : dict of str to dict of str to numpy.ndarray
        Panel title to the result of :func:`sdpa_ref.variants.scale_choice_entropies`.
    ceilings : dict of str to float
        Panel title to ``ln n_k``.
    labels : dict of str to str, optional
        Legend text for each choice; :data:`SCALE_LABELS` by default.

    Returns
    -------
    matplotlib.figure.Figure
        The legend sits below both panels, where it can cover no line.
    """
    labels = labels or SCALE_LABELS
    fig, axes = new_figure(PAGE_WIDTH, 3.0 * len(panels) + 1.0, nrows=len(panels))
    styles = ("-", "--", "-.", ":", (0, (6, 1.5, 1, 1.5, 1, 1.5)))
    markers = ("o", "s", "^", "D", "v")
    for ax, (title, entropies) in zip(np.atleast_1d(axes), panels.items(), strict=True):
        for i, (choice, h) in enumerate(entropies.items()):
            ax.plot(
                widths[title],
                h,
                linestyle=styles[i],
                marker=markers[i],
                color=SERIES_COLORS[i],
                linewidth=1.8,
                markersize=5,
                label=labels.get(choice, choice),
            )
        ax.axhline(ceilings[title], color=MUTED, linewidth=0.8, linestyle=":")
        ax.set_xscale("log", base=2)
        plain_log_ticks(ax, "x")
        ax.set_ylim(-0.05, ceilings[title] * 1.12)
        ax.set_xlabel(r"head width $d_k$")
        ax.set_ylabel("entropy of the weights (nats)")
        ax.set_title(title, loc="left")
    handles, names = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncols=2)
    return fig


@styled
def linear_error_figure(feature_counts, errors, elu_error, standard_errors=None):
    """Error of linear attention against the number of random features.

    Parameters
    ----------
    feature_counts : sequence of int
    errors : numpy.ndarray
        Mean largest absolute output error for each count.
    elu_error : float
        The error of the ``elu + 1`` feature map, drawn as a reference line.
    standard_errors : numpy.ndarray, optional
        The standard error of each mean; drawn as bars of two standard errors
        either side, so that a reader sees how far the means could move
        under other draws.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = new_figure(PAGE_WIDTH, 3.3)
    bars = None if standard_errors is None else 2 * np.asarray(standard_errors)
    ax.errorbar(
        feature_counts,
        errors,
        yerr=bars,
        fmt="o-",
        color=SERIES_COLORS[0],
        linewidth=2,
        elinewidth=1.2,
        capsize=3,
        label="positive random features",
    )
    ax.axhline(
        elu_error,
        color=SERIES_COLORS[1],
        linestyle="--",
        linewidth=1.5,
        label="elu(x) + 1 features",
    )
    ax.set_xscale("log", base=2)
    plain_log_ticks(ax, "x")
    top = np.max(np.asarray(errors) + (0 if bars is None else bars))
    ax.set_ylim(0, max(elu_error, float(top)) * 1.15)
    ax.set_xlabel("number of features m")
    ax.set_ylabel("largest output error")
    # Below the curve, where it falls away: the dashed line runs along the top.
    ax.legend(loc="lower left")
    return fig


def random_feature_markdown(by_query, query_names, feature_count):
    """Per query: longest ``q' + k'``, Lemma 2's factor, and the measured error.

    Parameters
    ----------
    by_query : dict
        The result of :func:`sdpa_ref.variants.random_feature_error_by_query`.
    query_names : sequence of str
    feature_count : int
        The number of features the errors were measured with.

    Examples
    --------
    >>> r = {"norm_sq": [3.0], "mse_factor": [19.09], "output_error": [0.04]}
    >>> print(random_feature_markdown(r, ["Q3"], 4096).splitlines()[-1])
    | Q3 | 3 | 19.1 | 0.040 |
    """
    header = [
        "query",
        r"largest $\lVert q' + k' \rVert^2$",
        r"$e^{\lVert q' + k' \rVert^2} - 1$",
        f"output error, m = {feature_count:,}",
    ]
    rows = [
        [
            name,
            number(float(n), "{:g}"),
            number(float(f), "{:,.3g}" if f < 1000 else "{:,.0f}"),
            float(e),
        ]
        for name, n, f, e in zip(
            query_names,
            by_query["norm_sq"],
            by_query["mse_factor"],
            by_query["output_error"],
            strict=True,
        )
    ]
    return markdown_table(header, rows)
