"""The one place for the figures' look: palette, type, sizes and SVG output.

The palette is Okabe and Ito's, told apart under the common colour-vision
deficiencies, limited to the four hues that can reach 3:1 contrast (WCAG's bar
for graphics) against white, Furo's light panel grey and its dark background;
the reddish purple is darkened a little (#CC79A7 to #BF5F99) to get there.
Figures are written as SVG with a fixed hash salt and no date, so two builds
give the same bytes.
"""

from __future__ import annotations

import functools
import io
import math
import re

import matplotlib as mpl
from IPython.display import SVG
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

#: One colour per key, the same in every figure and in the interactive one.
KEY_COLORS = ("#0072B2", "#D55E00", "#009E73", "#BF5F99")
#: Unscaled against scaled, wherever the two are drawn as series.
UNSCALED_COLOR = "#D55E00"
SCALED_COLOR = "#0072B2"
#: Neutral ink for axes, text and reference lines.
INK = "#1a1a1a"
MUTED = "#595959"  # 7:1 on white
#: Series colours for figures whose lines are not keys.
SERIES_COLORS = ("#0072B2", "#D55E00", "#009E73", "#BF5F99", "#1a1a1a")
#: A sequential colour map that stays readable in grey and for colour-blind readers.
HEATMAP_CMAP = "cividis"

#: The widest a figure is drawn, in inches. A 390 px phone shows a figure at
#: about 350 CSS px, so one drawn 4.8 in (460 px) wide shrinks to 0.76 of its
#: size there, and type of MIN_FONT_PT still renders at 9 CSS px.
PAGE_WIDTH = 4.8
#: The smallest type in any figure, in points. Matplotlib's super- and
#: subscripts are smaller again, so tick labels avoid them (:func:`plain_log_ticks`).
MIN_FONT_PT = 9.0

RC = {
    "svg.hashsalt": "sdpa-ref",
    "svg.fonttype": "path",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "xtick.labelsize": MIN_FONT_PT,
    "ytick.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT,
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


def relative_luminance(color):
    """WCAG relative luminance of a colour."""
    channels = [
        c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
        for c in to_rgb(color)
    ]
    return 0.2126 * channels[0] + 0.7152 * channels[1] + 0.0722 * channels[2]


def contrast_ratio(a, b):
    """WCAG contrast ratio of two colours, from 1 to 21.

    Examples
    --------
    >>> round(contrast_ratio("#000000", "#ffffff"), 1)
    21.0
    """
    hi, lo = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


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
    width: float = PAGE_WIDTH, height: float = 3.0, **subplots
) -> tuple[Figure, object]:
    """A constrained-layout figure and its axes, for builders wrapped in :func:`styled`.

    No pyplot: the figure belongs to no global state and needs no backend.
    A figure is at most :data:`PAGE_WIDTH` wide, so its type stays readable on
    a phone; two panels go one above the other rather than side by side.

    Examples
    --------
    >>> new_figure(7.0)
    Traceback (most recent call last):
    ...
    ValueError: a figure is at most PAGE_WIDTH = 4.8 in wide, got width=7.0
    """
    if width > PAGE_WIDTH:
        raise ValueError(
            f"a figure is at most PAGE_WIDTH = {PAGE_WIDTH} in wide, got width={width}"
        )
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, (fig.subplots(**subplots) if subplots else fig.add_subplot())


def plain_log_ticks(ax, axis: str = "x") -> None:
    """Label a base-2 log axis 1, 4, 16, … rather than 2⁰, 2², 2⁴, ….

    Matplotlib draws an exponent at 0.7 of the label's size, too small to read
    on a phone; a plain number is also the quicker read.
    """
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


_LONG_DECIMAL = re.compile(rb"-?\d+\.\d{3,}")
_BETWEEN_TAGS = re.compile(rb">\s+<")


def _short(match: re.Match) -> bytes:
    value = float(match.group(0))
    # Coordinates (points) keep a hundredth of a point; small numbers, such as
    # the scale factors that place glyphs, keep four significant digits.
    if abs(value) >= 1:
        text = f"{value:.2f}"
    elif abs(value) < 1e-6:
        text = "0"
    else:
        text = f"{value:.{min(6, 3 - math.floor(math.log10(abs(value))))}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text).encode()


def svg_bytes(fig: Figure) -> bytes:
    """The figure as SVG; the same figure always gives the same bytes.

    Coordinates are in points, so two decimals (a hundredth of a point) lose
    nothing visible, while small numbers such as glyph scale factors keep four
    significant digits. With the whitespace between tags dropped, that takes
    about 15 per cent off every figure and keeps pages inside their budget.
    """
    buffer = io.BytesIO()
    with mpl.rc_context(RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = _LONG_DECIMAL.sub(_short, buffer.getvalue())
    return _BETWEEN_TAGS.sub(b"><", svg)


def svg(fig: Figure):
    """The figure as an IPython SVG object, for ``glue`` and page output."""
    return SVG(svg_bytes(fig))
