"""Figures for the square-root factor: the random model, its limits, saturation."""

from __future__ import annotations

import numpy as np
from matplotlib.transforms import offset_copy

from .style import (
    INK,
    MUTED,
    PAGE_WIDTH,
    SCALE_LINES,
    SCALED_COLOR,
    SERIES_COLORS,
    UNSCALED_COLOR,
    log_axis,
    new_figure,
    note,
    styled,
)


@styled
def std_vs_width_figure(
    widths, measured_std, measured_scaled_std, model_std, highlight=None
):
    """Measured standard deviation of q·k against ``sqrt(d_k)``, log-log.

    Parameters
    ----------
    widths : numpy.ndarray
    measured_std : numpy.ndarray
        Monte Carlo standard deviations of ``q·k``, one per width.
    measured_scaled_std : numpy.ndarray
        The same for ``q·k / sqrt(d_k)``.
    model_std : numpy.ndarray
        The random model's ``sqrt(d_k)``.
    highlight : int, optional
        A width to label with its measured value.

    Returns
    -------
    matplotlib.figure.Figure
    """
    widths = np.asarray(widths)
    fig, axes = new_figure(PAGE_WIDTH, 6.0, nrows=2)
    raw_ax, scaled_ax = axes
    raw_ax.plot(
        widths,
        np.sqrt(widths),
        color=MUTED,
        linewidth=1.5,
        label=r"$\sqrt{d_k}$ (theory)",
    )
    raw_ax.plot(
        widths,
        measured_std,
        "o",
        color=UNSCALED_COLOR,
        markersize=6,
        label="measured, raw q·k",
    )
    log_axis(raw_ax, "x")
    log_axis(raw_ax, "y")
    raw_ax.set_xlabel(r"head width $d_k$")
    raw_ax.set_ylabel("standard deviation of q·k")
    raw_ax.set_title(r"Raw scores spread like $\sqrt{d_k}$", loc="left")
    raw_ax.legend(loc="upper left")
    if highlight is not None:
        i = int(np.flatnonzero(widths == highlight)[0])
        raw_ax.annotate(
            f"$d_k$ = {highlight}: {measured_std[i]:.1f}",
            (widths[i], measured_std[i]),
            xytext=(0.97, 0.12),
            textcoords="axes fraction",
            ha="right",
            color=INK,
            arrowprops={"arrowstyle": "-", "color": MUTED},
        )
    scaled_ax.axhline(1.0, color=MUTED, linewidth=1.5, label="1 (theory)")
    scaled_ax.plot(
        widths,
        measured_scaled_std,
        "o",
        color=SCALED_COLOR,
        markersize=6,
        label=r"measured, $q\cdot k / \sqrt{d_k}$",
    )
    log_axis(scaled_ax, "x")
    scaled_ax.set_ylim(0.8, 1.2)
    scaled_ax.set_xlabel(r"head width $d_k$")
    scaled_ax.set_ylabel(r"standard deviation of $q\cdot k / \sqrt{d_k}$")
    scaled_ax.set_title("Scaled scores stay near 1", loc="left")
    scaled_ax.legend(loc="upper left")
    return fig


@styled
def broken_models_figure(widths, sweep, labels):
    """Standard deviation of q·k against width when the model's assumptions break.

    Parameters
    ----------
    widths : numpy.ndarray
    sweep : dict
        The result of :func:`sdpa_ref.random_model.model_sweep`.
    labels : dict of str to str
        Model name to legend label.

    Returns
    -------
    matplotlib.figure.Figure
    """
    widths = np.asarray(widths)
    fig, ax = new_figure(PAGE_WIDTH, 3.8)
    markers = ("o", "s", "^", "D")
    for i, (name, stats) in enumerate(sweep.items()):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        ax.plot(widths, stats["exact_std"], color=color, linewidth=1.5)
        ax.plot(
            widths,
            stats["measured_std"],
            markers[i % len(markers)],
            color=color,
            markersize=5,
            label=labels[name],
        )
    ax.plot(widths, widths, color=MUTED, linestyle=":", linewidth=1)
    # Written along the reference line, just over its middle, between the
    # legend (upper left) and the curves (lower right). The angle is the
    # line's own on screen (transform_rotates_text), whatever the layout.
    middle = float(np.sqrt(widths[0] * widths[-1]))
    ax.text(
        middle,
        middle,
        r"slope 1: grows like $d_k$",
        transform=offset_copy(ax.transData, fig=fig, x=-1.5, y=1.5, units="points"),
        rotation=45,
        transform_rotates_text=True,
        rotation_mode="anchor",
        ha="center",
        va="bottom",
        color=MUTED,
    )
    log_axis(ax, "x")
    log_axis(ax, "y")
    ax.set_xlabel(r"head width $d_k$")
    ax.set_ylabel("standard deviation of q·k")
    ax.legend(loc="upper left")
    return fig


@styled
def saturation_figure(spreads, curves, d_k, highlight=None, cap=None):
    """Top weight and softmax Jacobian norm against the raw scores' standard deviation.

    Parameters
    ----------
    spreads : numpy.ndarray
        Standard deviation of the raw score row: the multiplier of a row of
        standard deviation 1.
    curves : dict
        The result of :func:`sdpa_ref.spread.saturation`.
    d_k : int
        The width whose square root divides the scaled row.
    highlight : float, optional
        A standard deviation to mark with a vertical line in both panels,
        labelled with ``d_k``: the one the random model predicts at that width.
    cap : float, optional
        The largest possible Jacobian norm, drawn as a horizontal line.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, (top_ax, jac_ax) = new_figure(PAGE_WIDTH, 6.2, nrows=2)
    for ax, key, ylabel in (
        (top_ax, "top_weight", "largest weight in the row"),
        (jac_ax, "jacobian_norm", "spectral norm of the softmax Jacobian"),
    ):
        if highlight is not None:
            ax.axvline(highlight, color=MUTED, linewidth=0.8, linestyle=":")
        ax.plot(
            spreads,
            curves[f"{key}_raw"],
            **SCALE_LINES["none"],
            linewidth=2,
            label="unscaled",
        )
        ax.plot(
            spreads,
            curves[f"{key}_scaled"],
            **SCALE_LINES["sqrt"],
            linewidth=2,
            label=f"scaled by 1/√{d_k}",
        )
        ax.set_xlabel("standard deviation of the raw scores")
        ax.set_ylabel(ylabel)
    top_ax.set_ylim(0, 1.02)
    top_ax.legend(loc="center left", bbox_to_anchor=(0.1, 0.72))
    jac_ax.set_yscale("log")
    jac_ax.set_ylim(1e-12, 8)
    if cap is not None:
        jac_ax.axhline(cap, color=MUTED, linewidth=1, linestyle="-.")
        note(
            jac_ax,
            f"largest possible: {cap:g}",
            (spreads[-1], cap),
            (0, 3),
            ha="right",
            color=MUTED,
        )
    if highlight is not None:
        for ax, y in ((top_ax, 0.03), (jac_ax, 1e-3)):
            note(ax, f"$d_k$ = {d_k}", (highlight, y), (-3, 0), ha="right", color=INK)
    top_ax.set_title("Softmax concentrates ...", loc="left")
    jac_ax.set_title("... and passes back less gradient", loc="left")
    return fig


@styled
def entropy_vs_divisor_figure(divisors, entropies, labels, ceiling, marks):
    """Entropy of softmax(scores / τ) against the temperature τ, one line per row.

    Parameters
    ----------
    divisors : numpy.ndarray
    entropies : sequence of numpy.ndarray
        One array per score row.
    labels : sequence of str
    ceiling : float
        ``ln n_k``, drawn as a reference line.
    marks : dict of str to float
        Divisors to mark, label to value (for example unscaled at 1). Each
        label is written above the plot, centred on its line, so labels of
        nearby divisors do not run into each other or into the curves.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = new_figure(PAGE_WIDTH, 3.6)
    styles = ("-", "--", "-.", ":")
    for i, (h, label) in enumerate(zip(entropies, labels, strict=True)):
        ax.plot(
            divisors,
            h,
            color=SERIES_COLORS[i % len(SERIES_COLORS)],
            linestyle=styles[i % len(styles)],
            linewidth=2,
            label=label,
        )
    ax.axhline(ceiling, color=MUTED, linewidth=1, linestyle=":")
    note(
        ax,
        f"ceiling $\\ln n_k$ = {ceiling:.3f} nats",
        (divisors[0], ceiling),
        (2, 4),
        ha="left",
        color=MUTED,
    )
    for label, t in marks.items():
        ax.axvline(t, color=MUTED, linewidth=0.8)
        note(
            ax,
            label,
            (t, 1.0),
            (0, 3),
            xycoords=("data", "axes fraction"),
            ha="center",
            color=INK,
        )
    log_axis(ax, "x")
    ax.set_ylim(0, ceiling * 1.12)
    ax.set_xlabel("temperature τ, the divisor of the scores")
    ax.set_ylabel("entropy of the weights (nats)")
    ax.legend(loc="lower right")
    return fig
