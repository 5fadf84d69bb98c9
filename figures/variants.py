"""Figures for the variants page: scale choices and linear attention."""

from __future__ import annotations

import numpy as np

from .style import MUTED, SERIES_COLORS, new_figure, styled


@styled
def scale_choices_figure(widths, panels, ceilings):
    """Entropy against head width under each scale choice, one panel per source.

    Parameters
    ----------
    widths : dict of str to sequence of int
        Panel title to the widths it was computed at.
    panels : dict of str to dict of str to numpy.ndarray
        Panel title to the result of :func:`sdpa_ref.variants.scale_choice_entropies`.
    ceilings : dict of str to float
        Panel title to ``ln n_k``.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(7.0, 3.4, ncols=len(panels), sharey=False)
    styles = ("-", "--", "-.", ":")
    markers = ("o", "s", "^", "D")
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
                label=choice,
            )
        ax.axhline(ceilings[title], color=MUTED, linewidth=0.8, linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.05, ceilings[title] * 1.12)
        ax.set_xlabel(r"head width $d_k$")
        ax.set_ylabel("entropy of the weights (nats)")
        ax.set_title(title, loc="left")
    np.atleast_1d(axes)[0].legend(loc="lower left", fontsize=8.5)
    return fig


@styled
def linear_error_figure(feature_counts, errors, elu_error):
    """Error of linear attention against the number of random features.

    Parameters
    ----------
    feature_counts : sequence of int
    errors : numpy.ndarray
        Mean largest absolute output error for each count.
    elu_error : float
        The error of the ``elu + 1`` feature map, drawn as a reference line.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = new_figure(6.0, 3.3)
    ax.plot(
        feature_counts,
        errors,
        "o-",
        color=SERIES_COLORS[0],
        linewidth=2,
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
    ax.set_ylim(0, max(elu_error, float(np.max(errors))) * 1.15)
    ax.set_xlabel("number of features m")
    ax.set_ylabel("largest output error")
    ax.legend(loc="upper right", fontsize=9)
    return fig
