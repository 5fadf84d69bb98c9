"""Heatmaps of the matrices that attention computes, step by step."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps, patheffects
from matplotlib.colors import Normalize
from matplotlib.patches import Rectangle

from .style import HEATMAP_CMAP, contrast_ratio, new_figure, styled


@styled
def heatmap_figure(
    matrix,
    title,
    *,
    row_labels,
    col_labels,
    axis_note="rows = queries, columns = keys",
    fmt="{:.2f}",
    width=3.6,
):
    """One annotated heatmap; ``-inf`` entries are drawn as hatched "−∞" cells.

    Parameters
    ----------
    matrix : numpy.ndarray, shape (rows, columns)
    title : str
    row_labels, col_labels : sequence of str
    axis_note : str
        What the rows and columns are, shown under the matrix.
    fmt : str
        Format of each cell's number.
    width : float
        Figure width in inches.

    Returns
    -------
    matplotlib.figure.Figure
    """
    matrix = np.asarray(matrix, dtype=float)
    finite = np.isfinite(matrix)
    shown = np.where(finite, matrix, np.nan)
    lo, hi = np.nanmin(shown), np.nanmax(shown)
    norm = Normalize(lo, hi if hi > lo else lo + 1)
    cmap = colormaps[HEATMAP_CMAP]
    rows, cols = matrix.shape
    fig, ax = new_figure(width, 0.45 * rows + 1.6)
    ax.imshow(np.ma.masked_invalid(shown), cmap=HEATMAP_CMAP, norm=norm, aspect="auto")
    ax.set_facecolor("#e6e6e6")
    for i in range(rows):
        for j in range(cols):
            value = matrix[i, j]
            if not np.isfinite(value):
                ax.add_patch(_hatched_cell(i, j))
                ax.text(j, i, "−∞", ha="center", va="center", color="#1a1a1a")
                continue
            ax.text(
                j,
                i,
                fmt.format(value).replace("-", "−"),
                ha="center",
                va="center",
                **_ink_on(cmap(norm(value))),
            )
    ax.set_xticks(range(cols), col_labels)
    ax.set_yticks(range(rows), row_labels)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_title(title, loc="left")
    ax.set_xlabel(axis_note)
    return fig


DARK_INK = "#1a1a1a"
TEXT_CONTRAST = 4.5  # WCAG AA for normal text


def _ink_on(background):
    """Text style for a cell: the better of white and dark ink.

    Mid-grey cells (luminance near 0.18) reach 4.5:1 with neither, so there
    the text gets a thin halo of the other ink, which then is its background.
    """
    dark, light = (
        contrast_ratio(DARK_INK, background),
        contrast_ratio("white", background),
    )
    color, halo = ("white", DARK_INK) if light > dark else (DARK_INK, "white")
    style = {"color": color}
    if max(dark, light) < TEXT_CONTRAST:
        style["path_effects"] = [patheffects.withStroke(linewidth=2.5, foreground=halo)]
    return style


def _hatched_cell(i, j):
    return Rectangle(
        (j - 0.5, i - 0.5),
        1,
        1,
        facecolor="#e6e6e6",
        edgecolor="#9a9a9a",
        hatch="///",
        linewidth=0,
    )
