"""Heatmaps of the matrices that attention computes, step by step."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
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
    hatched=None,
):
    """One annotated heatmap; ``-inf`` entries are drawn as hatched "−∞" cells.

    Cells marked in ``hatched`` are drawn hatched too, with their value: the
    weights of masked keys, which are exactly 0, look like the masked logits
    they come from rather than like a weight that merely rounds to 0.

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
    hatched : numpy.ndarray of bool, optional
        The cells, shaped like ``matrix``, to draw hatched with their value.

    Returns
    -------
    matplotlib.figure.Figure
    """
    matrix = np.asarray(matrix, dtype=float)
    finite = np.isfinite(matrix)
    hatched = ~finite if hatched is None else np.asarray(hatched, dtype=bool)
    if hatched.shape != matrix.shape:
        raise ValueError(
            f"hatched must have the shape of matrix {matrix.shape}, got {hatched.shape}"
        )
    hatched = hatched | ~finite
    shown = np.where(hatched, np.nan, matrix)
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
            if hatched[i, j]:
                ax.add_patch(_hatched_cell(i, j))
                label = fmt.format(value) if np.isfinite(value) else "−∞"
                ax.text(j, i, label, ha="center", va="center", color=DARK_INK)
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


#: Black, not the figures' near-black ink: against any background, black or
#: white then reaches at least 4.58:1, above WCAG's 4.5:1 for normal text,
#: so no cell needs a halo around its digits (a mid-grey cell did with
#: #1a1a1a, and its outlined digits looked unlike the others).
DARK_INK = "#000000"
TEXT_CONTRAST = 4.5  # WCAG AA for normal text


def _ink_on(background):
    """Text style for a cell: the better of white and black ink."""
    dark, light = (
        contrast_ratio(DARK_INK, background),
        contrast_ratio("white", background),
    )
    return {"color": "white" if light > dark else DARK_INK}


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
