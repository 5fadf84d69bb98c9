"""Figures and tables of the training experiment, per scale."""

from __future__ import annotations

import numpy as np

from sdpa_ref.training import measured_grad_ratios

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
SCALE_LABEL = {"sqrt": r"$1/\sqrt{d_k}$", "none": "unscaled", "linear": r"$1/d_k$"}
#: The same in the tables, as the site's headings write it (typeset math in
#: every cell would add kilobytes of markup per row).
SCALE_TEXT = {"sqrt": "1/√dₖ", "none": "unscaled", "linear": "1/dₖ"}
#: The control arm: unscaled, with W_Q and W_K started d_k^(-1/4) times smaller.
CONTROL = ("matched init", "none")
CONTROL_STYLE = {"color": SERIES_COLORS[3], "linestyle": ":", "marker": "D"}
CONTROL_LABEL = "unscaled, matched init"
#: The baselines' lines: (key of sdpa_ref.training.baselines, label, line style).
BASELINE_LINES = (
    ("chance_loss", "chance", (0, (1, 1))),
    ("blind_loss", "query-blind", (0, (5, 2, 1, 2))),
)


def _style(setting, scale):
    return CONTROL_STYLE if (setting, scale) == CONTROL else SCALE_STYLE[scale]


def _label(setting, scale, names=SCALE_LABEL):
    return CONTROL_LABEL if (setting, scale) == CONTROL else names[scale]


def _legend_top(fig, ax, ncols=3):
    handles, labels = ax.get_legend_handles_labels()
    # The arms first, then the grey reference lines.
    last = {label for _, label, _ in BASELINE_LINES}
    order = sorted(range(len(labels)), key=lambda i: labels[i] in last)
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    fig.legend(
        handles,
        labels,
        loc="outside upper center",
        ncols=min(ncols, len(labels)),
        handlelength=2.6,
    )


def _setting_title(result, name):
    setting = result["settings"][name]
    return f"{name}: learning rate {setting.lr:g}, init gain {setting.gain:g}"


def _draw_baselines(ax, baselines):
    for key, label, dashes in BASELINE_LINES if baselines else ():
        ax.axhline(
            baselines[key], color=MUTED, linestyle=dashes, linewidth=1.1, label=label
        )


def _curves(
    result, setting, field, ylabel, *, log_y=False, ceiling=None, baselines=None
):
    widths = result["widths"]
    steps = np.arange(1, result["steps"] + 1)
    series = [(setting, scale) for scale in result["scales"]]
    if setting == "main" and CONTROL[0] in result["runs"]:
        series.append(CONTROL)
    fig, axes = new_figure(PAGE_WIDTH, 1.9 * len(widths) + 0.9, nrows=len(widths))
    axes = np.atleast_1d(axes)
    for ax, d_k in zip(axes, widths, strict=True):
        for name, scale in series:
            values = result["runs"][name][scale][d_k][field]
            style = _style(name, scale)
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
                label=_label(name, scale),
            )
        if ceiling is not None:
            ax.axhline(ceiling, color=MUTED, linestyle=":", linewidth=1.2)
        _draw_baselines(ax, baselines)
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
def loss_figure(result, setting="main", baselines=None):
    """Training loss against step, one panel per width, median and range over seeds.

    Parameters
    ----------
    result : dict
        :func:`sdpa_ref.training.run_experiment`'s result.
    setting : str
        Which setting's runs to draw; the main setting's panels also draw
        the control arm, if the result has it.
    baselines : dict, optional
        :func:`sdpa_ref.training.baselines`; draws the chance and
        query-blind losses as grey lines.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _curves(
        result, setting, "loss", "loss (nats)", log_y=True, baselines=baselines
    )


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
    solid lines the root-mean-square prediction over random rows, dotted
    lines the saturation page's one fixed row. One panel per setting,
    stacked.

    Returns
    -------
    matplotlib.figure.Figure
    """
    widths = np.array(result["widths"])
    fig, axes = new_figure(PAGE_WIDTH, 2.5 * len(settings) + 0.8, nrows=len(settings))
    axes = np.atleast_1d(axes)
    for ax, setting in zip(axes, settings, strict=True):
        for scale in result["scales"]:
            style = SCALE_STYLE[scale]
            for seed_values in measured_grad_ratios(result, setting, scale).T:
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
                result["prediction"]["rms"][setting][scale],
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
        ax.set_ylabel(r"$|\nabla W_Q|$ / the $1/\sqrt{d_k}$ arm's")
        ax.set_title(_setting_title(result, setting), loc="left")
        # The fixed row's prediction for the unscaled arm falls to 1e-30 and
        # below; the panel stops where the measured values could still show.
        ax.set_ylim(1e-9, 30)
        plain_log_ticks(ax, "y")
    axes[0].plot([], [], color=INK, linestyle=":", label="one fixed row")
    _legend_top(fig, axes[0], ncols=4)
    return fig


@styled
def final_loss_figure(
    result, settings=("main", "larger init", "smaller lr"), baselines=None
):
    """Final loss against d_k per scale, one panel per setting; bars span the seeds.

    The main setting's panel also draws the control arm, if the result has
    it; ``baselines`` (:func:`sdpa_ref.training.baselines`) adds the chance
    and query-blind losses as grey lines.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(
        PAGE_WIDTH,
        2.0 * len(settings) + 0.9,
        nrows=len(settings),
        sharex=True,
        sharey=True,
    )
    axes = np.atleast_1d(axes)
    widths = np.array(result["widths"])
    offsets = dict(zip(result["scales"], (0.94, 1.0, 1.06), strict=False))
    for ax, name in zip(axes, settings, strict=True):
        series = [(name, scale) for scale in result["scales"]]
        if name == "main" and CONTROL[0] in result["runs"]:
            series.append(CONTROL)
        for setting, scale in series:
            rows = [
                r
                for r in result["summary"]
                if r["setting"] == setting and r["scale"] == scale
            ]
            mean = np.array([r["loss"] for r in rows])
            low = mean - np.array([r["loss_min"] for r in rows])
            high = np.array([r["loss_max"] for r in rows]) - mean
            style = _style(setting, scale)
            offset = 1.12 if (setting, scale) == CONTROL else offsets[scale]
            ax.errorbar(
                widths * offset,
                mean,
                yerr=[low, high],
                color=style["color"],
                linestyle=style["linestyle"],
                marker=style["marker"],
                markersize=5,
                capsize=3,
                linewidth=1.4,
                label=_label(setting, scale),
            )
        _draw_baselines(ax, baselines)
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


def _mean_range(mean, low, high, fmt):
    return f"{fmt.format(mean)} ({fmt.format(low)}–{fmt.format(high)})"


def summary_markdown(summary):
    r"""Final loss and accuracy per arm: mean over seeds, and the seeds' range.

    One row per setting, scale and width, in the summary's order; the
    control arm is named as in the figures.

    Examples
    --------
    >>> rows = [{"setting": "main", "d_k": 16, "scale": "sqrt", "loss": 0.1234,
    ...          "loss_min": 0.1, "loss_max": 0.15, "accuracy": 0.987,
    ...          "accuracy_min": 0.98, "accuracy_max": 0.99}]
    >>> print(summary_markdown(rows))
    | setting | arm | dₖ | loss, nats: mean (range) | accuracy, %: mean (range) |
    | :-- | :-- | --: | --: | --: |
    | main | 1/√dₖ | 16 | 0.123 (0.100–0.150) | 98.7 (98.0–99.0) |
    """
    header = [
        "setting",
        "arm",
        "dₖ",
        "loss, nats: mean (range)",
        "accuracy, %: mean (range)",
    ]
    body = []
    for r in summary:
        name = r["setting"]
        label = SCALE_TEXT[r["scale"]]
        if (name, r["scale"]) == CONTROL:
            name, label = "main", CONTROL_LABEL
        loss = _mean_range(r["loss"], r["loss_min"], r["loss_max"], "{:.3f}")
        acc = _mean_range(
            100 * r["accuracy"],
            100 * r["accuracy_min"],
            100 * r["accuracy_max"],
            "{:.1f}",
        )
        body.append([name, label, str(r["d_k"]), loss, acc])
    return markdown_table(header, body, align=[":--", ":--", "--:", "--:", "--:"])


def grad_ratio_markdown(
    result, settings=("main", "larger init"), scales=("none", "linear")
):
    """Measured |∇W_Q| ratios at step 1 against the three ways to average rows.

    Examples
    --------
    >>> from sdpa_ref import training
    >>> small = training.run_experiment(widths=(16,), seeds=(0,), steps=1,
    ...     settings={"main": training.Setting()})
    >>> print(grad_ratio_markdown(small, settings=("main",), scales=("none",)))
    | setting | arm | dₖ | measured (seeds) | RMS ‖J‖_F | RMS ‖J‖₂ | mean ‖J‖₂ |
    | :-- | :-- | --: | --: | --: | --: | --: |
    | main | unscaled | 16 | 2.80 (2.80–2.80) | 2.85 | 3.30 | 2.51 |
    """
    header = [
        "setting",
        "arm",
        "dₖ",
        "measured (seeds)",
        "RMS ‖J‖_F",
        "RMS ‖J‖₂",
        "mean ‖J‖₂",
    ]
    methods = ("rms", "rms-spectral", "mean-spectral")
    body = []
    for name in settings:
        for scale in scales:
            measured = measured_grad_ratios(result, name, scale)
            fmt = "{:.2f}" if scale == "none" else "{:.3f}"
            for i, d_k in enumerate(result["widths"]):
                m = measured[i]
                cells = [
                    fmt.format(result["prediction"][method][name][scale][i])
                    for method in methods
                ]
                body.append(
                    [
                        name,
                        SCALE_TEXT[scale],
                        str(d_k),
                        _mean_range(m.mean(), m.min(), m.max(), fmt),
                        *cells,
                    ]
                )
    return markdown_table(header, body, align=[":--", ":--", *["--:"] * 5])


def score_step_markdown(summary, setting="main"):
    r"""How far the first Adam step moved the scores: mean (range) over seeds.

    One row per arm of ``setting`` (and the control arm, for the main
    setting), one column per width.

    Examples
    --------
    >>> rows = [{"setting": "main", "scale": "sqrt", "d_k": 16,
    ...          "score_step": 0.4, "score_step_min": 0.38, "score_step_max": 0.41}]
    >>> print(score_step_markdown(rows))
    | arm | dₖ = 16 |
    | :-- | --: |
    | 1/√dₖ | 0.40 (0.38–0.41) |
    """
    widths = list(dict.fromkeys(r["d_k"] for r in summary))
    cells = {}
    for r in summary:
        key = (r["setting"], r["scale"])
        if r["setting"] != setting and key != CONTROL:
            continue
        cell = _mean_range(
            r["score_step"], r["score_step_min"], r["score_step_max"], "{:.2f}"
        )
        cells.setdefault(_label(*key, names=SCALE_TEXT), {})[r["d_k"]] = cell
    header = ["arm", *(f"dₖ = {d}" for d in widths)]
    body = [[label, *(row.get(d, "") for d in widths)] for label, row in cells.items()]
    return markdown_table(header, body, align=[":--", *["--:"] * len(widths)])
