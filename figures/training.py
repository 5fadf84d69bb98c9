"""Figures and tables of the training experiment, per scale."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import NullLocator

from sdpa_ref.training import WINDOW, measured_grad_ratios, window_means

from .style import (
    MIN_FONT_PT,
    MUTED,
    PAGE_WIDTH,
    SCALE_LINES,
    SERIES_COLORS,
    log_axis,
    new_figure,
    note,
    styled,
)
from .tables import markdown_table, number

#: One colour, line style and marker per scale, so that the lines differ without colour.
SCALE_STYLE = {
    scale: {**SCALE_LINES[scale], "marker": marker}
    for scale, marker in (("sqrt", "o"), ("none", "s"), ("linear", "^"))
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
#: The baselines' lines on a loss axis: (key of
#: sdpa_ref.training.baselines, label, line style).
BASELINE_LINES = (
    ("chance_loss", "chance", (0, (1, 1))),
    ("blind_loss", "query-blind", (0, (5, 2, 1, 2))),
)
#: The same on an accuracy axis: the query-blind line is the cap that no
#: model ignoring the query can pass.
ACCURACY_LINES = (
    ("chance_accuracy", "chance", (0, (1, 1))),
    ("blind_accuracy", "query-blind", (0, (5, 2, 1, 2))),
)


def _style(setting, scale):
    return CONTROL_STYLE if (setting, scale) == CONTROL else SCALE_STYLE[scale]


def _label(setting, scale, names=SCALE_LABEL):
    return CONTROL_LABEL if (setting, scale) == CONTROL else names[scale]


def _legend_top(fig, ax, ncols=3):
    handles, labels = ax.get_legend_handles_labels()
    # The arms first, then the grey reference lines.
    last = {
        label for lines in (BASELINE_LINES, ACCURACY_LINES) for _, label, _ in lines
    }
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
    return f"learning rate {result['settings'][name].lr:g}"


def _draw_references(ax, baselines, lines, factor=1.0):
    for key, label, dashes in lines if baselines else ():
        ax.axhline(
            factor * baselines[key],
            color=MUTED,
            linestyle=dashes,
            linewidth=1.1,
            label=label,
        )


def _series(result, setting):
    series = [(setting, scale) for scale in result["runs"][setting]]
    if setting == "main" and CONTROL[0] in result["runs"]:
        series.append(CONTROL)
    return series


def _curves(
    result,
    setting,
    field,
    ylabel,
    *,
    first=None,
    window=WINDOW,
    factor=1.0,
    references=(),
    reference_lines=(),
    center=np.median,
    yticks=None,
):
    """One panel per width: the median (or ``center``) over seeds, and their range.

    With ``window``, each seed's series is first averaged over windows of
    that many steps, drawn at the windows' middles; ``first`` keeps only the
    first steps.
    """
    widths = result["widths"]
    n_steps = result["steps"] if first is None else min(first, result["steps"])
    steps = np.arange(1, n_steps + 1, dtype=float)
    if window > 1:
        steps = window_means(steps, window)
    fig, axes = new_figure(
        PAGE_WIDTH, 1.5 * len(widths) + 0.9, nrows=len(widths), sharex=True
    )
    axes = np.atleast_1d(axes)
    for ax, d_k in zip(axes, widths, strict=True):
        for name, scale in _series(result, setting):
            values = factor * result["runs"][name][scale][d_k][field][:, :n_steps]
            if window > 1:
                values = window_means(values, window)
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
                center(values, axis=0),
                color=style["color"],
                linestyle=style["linestyle"],
                linewidth=1.6,
                label=_label(name, scale),
            )
        _draw_references(ax, references, reference_lines, factor)
        if yticks is not None:
            ax.set_yticks(yticks)
        ax.set_ylabel(ylabel)
        ax.set_title(f"$d_k$ = {d_k}", loc="left")
        ax.set_xlim(0, n_steps)
    axes[-1].set_xlabel(
        "Adam step" if window == 1 else f"Adam step (mean over {window} steps)"
    )
    _legend_top(fig, axes[0])
    return fig


@styled
def accuracy_figure(result, setting="main", baselines=None, window=WINDOW):
    """Accuracy against step, one panel per width, median and range over seeds.

    Each seed's accuracy is averaged over windows of
    :data:`sdpa_ref.training.WINDOW` steps first.

    Parameters
    ----------
    result : dict
        :func:`sdpa_ref.training.run_experiment`'s result.
    setting : str
        Which setting's runs to draw; the main setting's panels also draw
        the control arm, if the result has it.
    baselines : dict, optional
        :func:`sdpa_ref.training.baselines`; draws chance and the
        query-blind cap as grey lines.

    Returns
    -------
    matplotlib.figure.Figure
    """
    return _curves(
        result,
        setting,
        "accuracy",
        "accuracy (%)",
        window=window,
        factor=100.0,
        yticks=[0, 50, 100],
        references=baselines,
        reference_lines=ACCURACY_LINES,
    )


@styled
def wrong_key_figure(result, setting="main", first=20):
    """Share of rows one-hot on a wrong key over the first steps, per width.

    One line per arm (the control's too, for the main setting): the share
    of the batch's rows whose top weight is at least
    :data:`sdpa_ref.training.ONE_HOT` and lands on a pair the query did not
    ask for, step by step, mean over seeds (each step's batch holds only 16
    rows per seed), with the seeds' range as a band.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = _curves(
        result,
        setting,
        "wrong_one_hot",
        "wrong one-hot (%)",
        first=first,
        window=1,
        factor=100.0,
        center=np.mean,
        yticks=[0, 50, 100],
    )
    for ax in fig.axes:
        ax.set_ylim(0, 100)
        ax.set_xticks(np.arange(5, first + 1, 5))
        ax.set_xlim(0.5, first + 0.5)
    return fig


#: Line styles of the long run's widths, narrowest first.
LONG_RUN_STYLES = ("-", "--", ":")


@styled
def long_run_figure(result, baselines=None, window=WINDOW):
    """The long run's accuracy at every width, past the grid's last step.

    One line per width (:func:`sdpa_ref.training.run_experiment`'s
    ``long``), averaged over windows of ``window`` steps, in the colour of
    its scale, told apart by line style; a dotted vertical line marks the
    grid's last step. ``baselines`` adds chance and the query-blind cap.

    Returns
    -------
    matplotlib.figure.Figure
    """
    long = result["long"]
    run = long["run"]
    color = _style(run.setting, run.scale)["color"]
    steps = window_means(np.arange(1, long["steps"] + 1, dtype=float), window)
    fig, ax = new_figure(PAGE_WIDTH, 2.9)
    for (d_k, arrays), dashes in zip(
        long["runs"].items(), LONG_RUN_STYLES, strict=False
    ):
        ax.plot(
            steps,
            100 * window_means(arrays["accuracy"], window),
            color=color,
            linestyle=dashes,
            linewidth=1.6,
            label=f"$d_k$ = {d_k}",
        )
    _draw_references(ax, baselines, ACCURACY_LINES, 100.0)
    ax.axvline(result["steps"], color=MUTED, linestyle=(0, (1, 2)), linewidth=1.1)
    note(
        ax,
        f"budget ends,\nstep {result['steps']}",
        (result["steps"], 31),
        (4, 0),
        color=MUTED,
        fontsize=MIN_FONT_PT,
    )
    ax.set_xlim(0, long["steps"])
    ax.set_ylim(0, 105)
    ax.set_yticks([0, 50, 100])
    ax.set_ylabel("accuracy (%)")
    ax.set_xlabel(f"Adam step (mean over {window} steps)")
    ax.set_title(
        f"{_label(run.setting, run.scale, SCALE_TEXT)}, seed {run.seed}, "
        f"{_setting_title(result, run.setting)}",
        loc="left",
    )
    _legend_top(fig, ax)
    return fig


def _final(ax, result, setting, field, factor):
    widths = np.array(result["widths"])
    offsets = {"sqrt": 0.94, "none": 1.0, "linear": 1.06}
    for name, scale in _series(result, setting):
        rows = [
            r for r in result["summary"] if r["setting"] == name and r["scale"] == scale
        ]
        mean = factor * np.array([r[field] for r in rows])
        low = mean - factor * np.array([r[f"{field}_min"] for r in rows])
        high = factor * np.array([r[f"{field}_max"] for r in rows]) - mean
        style = _style(name, scale)
        offset = 1.12 if (name, scale) == CONTROL else offsets[scale]
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
            label=_label(name, scale),
        )


#: The lead figure's panels: (setting, field), top to bottom.
FINAL_PANELS = (("main", "accuracy"), ("main", "loss"), ("smaller lr", "accuracy"))


@styled
def final_figure(result, panels=FINAL_PANELS, baselines=None):
    """Final accuracy or loss against d_k, mean over seeds; bars span the seeds.

    One panel per ``(setting, field)``, stacked, titled with the setting's
    learning rate where the setting changes; the main setting's panels also
    draw the control arm, if the result has it. ``baselines``
    (:func:`sdpa_ref.training.baselines`) adds chance and the query-blind
    line: the cap on accuracy, the floor on loss. The legend lists the arms
    of the first panel and of any later panel's that it lacks.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = new_figure(
        PAGE_WIDTH, 1.9 * len(panels) + 0.9, nrows=len(panels), sharex=True
    )
    axes = np.atleast_1d(axes)
    widths = np.array(result["widths"])
    previous = None
    for ax, (setting, field) in zip(axes, panels, strict=True):
        if setting != previous:
            ax.set_title(_setting_title(result, setting), loc="left")
        previous = setting
        if field == "accuracy":
            _final(ax, result, setting, field, 100.0)
            _draw_references(ax, baselines, ACCURACY_LINES, 100.0)
            ax.set_ylabel("accuracy (%)")
            ax.set_ylim(0, 105)
            ax.set_yticks([0, 50, 100])
        else:
            _final(ax, result, setting, field, 1.0)
            _draw_references(ax, baselines, BASELINE_LINES)
            log_axis(ax, "y", base=10)
            # Unlabelled minor ticks would add weight, not information.
            ax.yaxis.set_minor_locator(NullLocator())
            ax.set_ylabel("loss (nats)")
    log_axis(axes[-1], "x")
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


def grad_ratio_markdown(result, setting="main", scales=("none", "linear")):
    """Measured |∇W_Q| ratios at step 1 against four ways to predict them.

    The columns are :func:`sdpa_ref.training.predicted_grad_ratio`'s
    methods: the root mean square over random rows of the Frobenius norm
    (``"rms"``) and of the spectral norm, the plain mean of the spectral
    norm, and the saturation page's one fixed row (``"page"``).

    Examples
    --------
    >>> from sdpa_ref import training
    >>> small = training.run_experiment(widths=(16,), seeds=(0,), steps=1,
    ...     settings={"main": training.Setting()})
    >>> print(grad_ratio_markdown(small, scales=("none",)))
    | arm | dₖ | measured | Frobenius RMS | spectral RMS | spectral mean | fixed row |
    | :-- | --: | --: | --: | --: | --: | --: |
    | unscaled | 16 | 3.65 (3.65–3.65) | 2.85 | 3.30 | 2.51 | 8.6e−02 |
    """
    header = [
        "arm",
        "dₖ",
        "measured",
        "Frobenius RMS",
        "spectral RMS",
        "spectral mean",
        "fixed row",
    ]
    methods = ("rms", "rms-spectral", "mean-spectral")
    prediction = result["prediction"]
    body = []
    for scale in scales:
        measured = measured_grad_ratios(result, setting, scale)
        fmt = "{:.2f}" if scale == "none" else "{:.3f}"
        for i, d_k in enumerate(result["widths"]):
            m = measured[i]
            cells = [
                fmt.format(prediction[method][setting][scale][i]) for method in methods
            ]
            fixed = prediction["page"][setting][scale][i]
            body.append(
                [
                    SCALE_TEXT[scale],
                    str(d_k),
                    _mean_range(m.mean(), m.min(), m.max(), fmt),
                    *cells,
                    number(fixed, "{:.1e}"),
                ]
            )
    return markdown_table(header, body, align=[":--", *["--:"] * 6])


def score_step_markdown(summary):
    r"""How far the first Adam step moved the scores: mean (range) over seeds.

    One row per setting and arm, in the summary's order (the control arm
    named as in the figures), one column per width.

    Examples
    --------
    >>> rows = [{"setting": "main", "scale": "sqrt", "d_k": 16,
    ...          "score_step": 0.4, "score_step_min": 0.38, "score_step_max": 0.41}]
    >>> print(score_step_markdown(rows))
    | setting | arm | dₖ = 16 |
    | :-- | :-- | --: |
    | main | 1/√dₖ | 0.40 (0.38–0.41) |
    """
    widths = list(dict.fromkeys(r["d_k"] for r in summary))
    cells = {}
    for r in summary:
        key = (r["setting"], r["scale"])
        name = "main" if key == CONTROL else r["setting"]
        label = (name, _label(*key, names=SCALE_TEXT))
        cells.setdefault(label, {})[r["d_k"]] = _mean_range(
            r["score_step"], r["score_step_min"], r["score_step_max"], "{:.2f}"
        )
    header = ["setting", "arm", *(f"dₖ = {d}" for d in widths)]
    body = [[*label, *(row.get(d, "") for d in widths)] for label, row in cells.items()]
    return markdown_table(header, body, align=[":--", ":--", *["--:"] * len(widths)])
