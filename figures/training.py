"""Figures of the training experiment: loss, entropy and gradient, per scale."""

from __future__ import annotations

import numpy as np

from .style import (
    INK,
    MUTED,
    PAGE_WIDTH,
    SCALED_COLOR,
    SERIES_COLORS,
    UNSCALED_COLOR,
    new_figure,
    plain_log_ticks,
    styled,
)
from .tables import markdown_table

#: One colour and line style per scale, so that the lines differ without colour.
SCALE_STYLE = {
    "sqrt": {"color": SCALED_COLOR, "linestyle": "-", "marker": "o"},
    "none": {"color": UNSCALED_COLOR, "linestyle": "--", "marker": "s"},
    "linear": {"color": SERIES_COLORS[2], "linestyle": "-.", "marker": "^"},
}
#: How each scale is named in legends and tables.
SCALE_LABEL = {"sqrt": "1/√d_k", "none": "unscaled", "linear": "1/d_k"}


def _legend_top(fig, ax):
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        loc="outside upper center",
        ncols=len(labels),
        handlelength=2.6,
    )


def _setting_title(result, name):
    setting = result["settings"][name]
    return f"{name}: learning rate {setting.lr:g}, init gain {setting.gain:g}"


def _curves(result, setting, field, ylabel, *, log_y=False, ceiling=None):
    runs = result["runs"][setting]
    widths = result["widths"]
    steps = np.arange(1, result["steps"] + 1)
    fig, axes = new_figure(PAGE_WIDTH, 1.9 * len(widths) + 0.6, nrows=len(widths))
    axes = np.atleast_1d(axes)
    for ax, d_k in zip(axes, widths, strict=True):
        for scale in result["scales"]:
            values = runs[scale][d_k][field]
            style = SCALE_STYLE[scale]
            ax.fill_between(
                steps,
                values.min(axis=0),
                values.max(axis=0),
                color=style["color"],
                alpha=0.18,
                linewidth=0,
            )
            ax.plot(
                steps,
                np.median(values, axis=0),
                color=style["color"],
                linestyle=style["linestyle"],
                linewidth=1.6,
                label=SCALE_LABEL[scale],
            )
        if ceiling is not None:
            ax.axhline(ceiling, color=MUTED, linestyle=":", linewidth=1.2)
        if log_y:
            ax.set_yscale("log")
            plain_log_ticks(ax, "y")
        ax.set_ylabel(ylabel)
        ax.set_title(f"$d_k$ = {d_k}", loc="left")
        ax.set_xlim(steps[0], steps[-1])
    axes[-1].set_xlabel("Adam step")
    _legend_top(fig, axes[0])
    return fig


@styled
def loss_figure(result, setting="main"):
    """Training loss against step, one panel per width, median and range over seeds.

    Parameters
    ----------
    result : dict
        :func:`sdpa_ref.training.run_experiment`'s result.
    setting : str
        Which setting's runs to draw.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _curves(result, setting, "loss", "loss (nats)", log_y=True)


@styled
def entropy_figure(result, setting="main", ceiling=None):
    """Mean attention entropy against step, one panel per width.

    ``ceiling`` draws a dotted line at ``ln n_pairs``, the entropy of
    uniform weights.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _curves(result, setting, "entropy", "entropy (nats)", ceiling=ceiling)


@styled
def init_gradient_figure(result, settings=("main", "larger init")):
    """|∇W_Q| at step 1, relative to the 1/√d_k arm's, against the prediction.

    Markers are the seeds (each divided by the same seed's 1/√d_k arm);
    solid lines the random rows' prediction, dotted lines the saturation
    page's one fixed row. One panel per setting, stacked.

    Returns
    -------
    matplotlib.figure.Figure
    """
    widths = np.array(result["widths"])
    fig, axes = new_figure(PAGE_WIDTH, 2.5 * len(settings) + 0.8, nrows=len(settings))
    axes = np.atleast_1d(axes)
    for ax, setting in zip(axes, settings, strict=True):
        runs = result["runs"][setting]
        for scale in result["scales"]:
            style = SCALE_STYLE[scale]
            measured = np.array(
                [
                    runs[scale][d]["grad_norm_q"][:, 0]
                    / runs["sqrt"][d]["grad_norm_q"][:, 0]
                    for d in widths
                ]
            )
            for seed_values in measured.T:
                ax.plot(
                    widths,
                    seed_values,
                    linestyle="none",
                    marker=style["marker"],
                    color=style["color"],
                    markersize=5,
                    alpha=0.8,
                )
            ax.plot(
                widths,
                result["prediction"]["random"][setting][scale],
                color=style["color"],
                linestyle="-",
                linewidth=1.4,
                label=SCALE_LABEL[scale],
            )
            ax.plot(
                widths,
                result["prediction"]["page"][setting][scale],
                color=style["color"],
                linestyle=":",
                linewidth=1.4,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_ticks(ax, "x")
        ax.set_xticks(widths)
        ax.set_xlabel("head width $d_k$")
        ax.set_ylabel("|∇W_Q| / the 1/√d_k arm's")
        ax.set_title(_setting_title(result, setting), loc="left")
        # The fixed row's prediction for the unscaled arm falls to 1e-30 and
        # below; the panel stops where the measured values could still show.
        ax.set_ylim(1e-9, 30)
        plain_log_ticks(ax, "y")
    axes[0].plot([], [], color=INK, linestyle=":", label="one fixed row")
    _legend_top(fig, axes[0])
    return fig


@styled
def final_loss_figure(result):
    """Final loss against d_k per scale, one panel per setting; bars span the seeds.

    Returns
    -------
    matplotlib.figure.Figure
    """
    names = list(result["settings"])
    fig, axes = new_figure(
        PAGE_WIDTH, 2.0 * len(names) + 0.6, nrows=len(names), sharex=True, sharey=True
    )
    axes = np.atleast_1d(axes)
    widths = np.array(result["widths"])
    offsets = dict(zip(result["scales"], (0.94, 1.0, 1.06), strict=False))
    for ax, name in zip(axes, names, strict=True):
        for scale in result["scales"]:
            rows = [
                r
                for r in result["summary"]
                if r["setting"] == name and r["scale"] == scale
            ]
            mean = np.array([r["loss"] for r in rows])
            low = mean - np.array([r["loss_min"] for r in rows])
            high = np.array([r["loss_max"] for r in rows]) - mean
            style = SCALE_STYLE[scale]
            ax.errorbar(
                widths * offsets[scale],
                mean,
                yerr=[low, high],
                color=style["color"],
                linestyle=style["linestyle"],
                marker=style["marker"],
                markersize=5,
                capsize=3,
                linewidth=1.4,
                label=SCALE_LABEL[scale],
            )
        ax.set_yscale("log")
        plain_log_ticks(ax, "y")
        ax.set_ylabel("final loss (nats)")
        ax.set_title(_setting_title(result, name), loc="left")
    axes[-1].set_xscale("log", base=2)
    plain_log_ticks(axes[-1], "x")
    axes[-1].set_xticks(widths)
    axes[-1].set_xlabel("head width $d_k$")
    _legend_top(fig, axes[0])
    return fig


def summary_markdown(summary):
    """Final loss and accuracy per arm: one row per setting and width.

    Each cell is the mean over seeds of the loss (nats) and, in brackets,
    the accuracy in per cent.

    Examples
    --------
    >>> rows = [{"setting": "main", "d_k": 16, "scale": "sqrt", "loss": 0.1234,
    ...          "accuracy": 0.987}]
    >>> print(summary_markdown(rows))
    | setting | d_k | 1/√d_k: loss (accuracy) |
    | :-- | --: | --: |
    | main | 16 | 0.123 (98.7 %) |
    """
    scales = list(dict.fromkeys(r["scale"] for r in summary))
    cells = {}
    for r in summary:
        cells.setdefault((r["setting"], r["d_k"]), {})[r["scale"]] = (
            f"{r['loss']:.3f} ({100 * r['accuracy']:.1f} %)"
        )
    header = ["setting", "d_k", *(f"{SCALE_LABEL[s]}: loss (accuracy)" for s in scales)]
    body = [
        [name, str(d_k), *(row[s] for s in scales)]
        for (name, d_k), row in cells.items()
    ]
    return markdown_table(header, body)
