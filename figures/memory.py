"""Memory and memory traffic: the measured peak-memory figure and two tables."""

from __future__ import annotations

import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from .style import MUTED, PAGE_WIDTH, SCALED_COLOR, UNSCALED_COLOR, new_figure, styled

#: How far each slope guide sits from its line (a factor, so a fixed gap on
#: the log axis): far enough to be seen, near enough to be compared.
GUIDE_OFFSET = 2.0


@styled
def peak_memory_figure(rows):
    """Peak bytes against sequence length, log-log, with n² and n guides.

    The dense line gets a dotted slope-2 guide drawn just above it, the tiled
    line a dashed slope-1 guide just below it (each through its line's last
    point, moved by :data:`GUIDE_OFFSET`), so that neither guide hides under
    the data it is compared with.

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
    fig, ax = new_figure(PAGE_WIDTH, 3.4)
    ax.plot(n, dense, "o-", color=UNSCALED_COLOR, linewidth=2, label="dense attention")
    ax.plot(n, tiled, "s-", color=SCALED_COLOR, linewidth=2, label="tiled attention")
    ax.plot(
        n,
        GUIDE_OFFSET * dense[-1] * (n / n[-1]) ** 2,
        ":",
        color=MUTED,
        linewidth=1.6,
        label="guide of slope 2 (grows like n²)",
    )
    ax.plot(
        n,
        tiled[-1] / GUIDE_OFFSET * (n / n[-1]),
        "--",
        color=MUTED,
        linewidth=1.3,
        label="guide of slope 1 (grows like n)",
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(n))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("peak memory allocated (MiB)")
    ax.legend(loc="upper left")
    return fig
