"""The one place for the figures' look: palette, type, sizes and SVG output.

The palette is Okabe and Ito's, told apart under the common colour-vision
deficiencies, limited to the four hues with at least 3:1 contrast against
white (WCAG's bar for graphics). Figures are written as SVG with a fixed hash
salt and no date, so two builds give the same bytes.
"""

from __future__ import annotations

import functools
import io

import matplotlib as mpl
from IPython.display import SVG
from matplotlib.figure import Figure

#: One colour per key, the same in every figure and in the interactive one.
KEY_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")
#: Unscaled against scaled, wherever the two are drawn as series.
UNSCALED_COLOR = "#D55E00"
SCALED_COLOR = "#0072B2"
#: Neutral ink for axes, text and reference lines.
INK = "#1a1a1a"
MUTED = "#595959"  # 7:1 on white
#: Series colours for figures whose lines are not keys.
SERIES_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#1a1a1a")
#: A sequential colour map that stays readable in grey and for colour-blind readers.
HEATMAP_CMAP = "cividis"

RC = {
    "svg.hashsalt": "sdpa-ref",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "axes.edgecolor": MUTED,
    "axes.labelcolor": INK,
    "axes.titlecolor": INK,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": MUTED,
    "ytick.color": MUTED,
    "xtick.labelcolor": INK,
    "ytick.labelcolor": INK,
    "legend.frameon": False,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "path.simplify": True,
}


def styled(builder):
    """Run a figure builder inside the house style.

    Fonts, colours and sizes are read when each artist is created, so the
    whole builder, not only the save, must see the style.
    """

    @functools.wraps(builder)
    def wrapper(*args, **kwargs):
        with mpl.rc_context(RC):
            return builder(*args, **kwargs)

    return wrapper


def new_figure(
    width: float = 7.0, height: float = 3.0, **subplots
) -> tuple[Figure, object]:
    """A white, constrained-layout figure with the house style, and its axes.

    No pyplot: the figure belongs to no global state and needs no backend.
    """
    with mpl.rc_context(RC):
        fig = Figure(figsize=(width, height), layout="constrained")
        axes = fig.subplots(**subplots) if subplots else fig.add_subplot()
    return fig, axes


def svg_bytes(fig: Figure) -> bytes:
    """The figure as SVG; the same figure always gives the same bytes."""
    buffer = io.BytesIO()
    with mpl.rc_context(RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return buffer.getvalue()


def svg(fig: Figure):
    """The figure as an IPython SVG object, for ``glue`` and page output."""
    return SVG(svg_bytes(fig))
