"""The dot product against the angle between q and k, for a few norms."""

from __future__ import annotations

import numpy as np

from .style import MUTED, PAGE_WIDTH, SERIES_COLORS, new_figure, styled


@styled
def score_vs_angle_figure(angles_deg, curves):
    """Score ``‖q‖‖k‖ cos(angle)`` against the angle, one line per norm pair.

    Parameters
    ----------
    angles_deg : numpy.ndarray
        Angles in degrees.
    curves : dict of str to numpy.ndarray
        Label (for example ``"‖q‖ = 2, ‖k‖ = 1"``) to scores at each angle.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, ax = new_figure(PAGE_WIDTH, 3.4)
    styles = ("-", "--", "-.", ":")
    for i, (label, scores) in enumerate(curves.items()):
        ax.plot(
            angles_deg,
            scores,
            color=SERIES_COLORS[i % len(SERIES_COLORS)],
            linestyle=styles[i % len(styles)],
            linewidth=2,
            label=label,
        )
    ax.axhline(0, color=MUTED, linewidth=0.8)
    ax.set_xticks(np.arange(0, 181, 30))
    ax.set_xlabel("angle between q and k (degrees)")
    ax.set_ylabel("dot product q·k")
    ax.legend(loc="upper right")
    return fig
