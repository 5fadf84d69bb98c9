"""Measured peak memory of dense against tiled attention."""

from __future__ import annotations

import numpy as np

from .style import MUTED, SCALED_COLOR, UNSCALED_COLOR, new_figure, styled


@styled
def peak_memory_figure(rows):
    """Peak bytes against sequence length, log-log, with n² and n guides.

    Parameters
    ----------
    rows : list of dict
        The result of :func:`sdpa_ref.flash.memory_sweep`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    n = np.array([r["n"] for r in rows])
    dense = np.array([r["dense_bytes"] for r in rows]) / 2**20
    tiled = np.array([r["tiled_bytes"] for r in rows]) / 2**20
    fig, ax = new_figure(6.4, 3.6)
    ax.plot(n, dense, "o-", color=UNSCALED_COLOR, linewidth=2, label="dense attention")
    ax.plot(n, tiled, "s-", color=SCALED_COLOR, linewidth=2, label="tiled attention")
    # Guides through the last point of each: slope 2 and slope 1.
    ax.plot(
        n,
        dense[-1] * (n / n[-1]) ** 2,
        ":",
        color=MUTED,
        linewidth=1.2,
        label="slope 2, grows like n²",
    )
    ax.plot(
        n,
        tiled[-1] * (n / n[-1]),
        "--",
        color=MUTED,
        linewidth=1,
        label="slope 1, grows like n",
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("peak memory allocated (MiB)")
    ax.legend(loc="upper left", fontsize=9)
    return fig
