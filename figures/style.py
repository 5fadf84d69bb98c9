"""The one place for the figures' look: palette, type, sizes and SVG output.

The palette is Okabe and Ito's, told apart under the common colour-vision
deficiencies, limited to the four hues that can reach 3:1 contrast (WCAG's bar
for graphics) against white, Furo's light panel grey and its dark background;
the reddish purple is darkened a little (#CC79A7 to #BF5F99) to get there.
Figures are written as SVG with a fixed hash salt and no date, so two builds
give the same bytes, and compacted (:mod:`figures._svg`): text as text in an
embedded subset of the font it was measured in, coordinates to a tenth of a
point. A figure's file stays under :data:`MAX_SVG_BYTES`; a long series is
thinned to what the figure can show (:func:`thin`, :func:`thin_band`), or a
dense area drawn as one raster inside the SVG (``rasterized=True``, at
:data:`RASTER_DPI`), with text and axes still vectors.
"""

from __future__ import annotations

import functools
import io

import matplotlib as mpl
import numpy as np
from IPython.display import SVG
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ._svg import compact

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
#: A colour and a line style per scale of the scores (divided by √d_k, not
#: divided, divided by d_k), so that the lines differ without colour too.
SCALE_LINES = {
    "sqrt": {"color": SCALED_COLOR, "linestyle": "-"},
    "none": {"color": UNSCALED_COLOR, "linestyle": "--"},
    "linear": {"color": SERIES_COLORS[2], "linestyle": "-."},
}
#: A sequential colour map that stays readable in grey and for colour-blind readers.
HEATMAP_CMAP = "cividis"

#: The widest a figure is drawn, in inches. A 390 px phone shows a figure at
#: about 350 CSS px, so one drawn 4.8 in (460 px) wide shrinks to 0.76 of its
#: size there, and type of MIN_FONT_PT still renders at 9 CSS px.
PAGE_WIDTH = 4.8
#: The smallest type in any figure, in points. Matplotlib's super- and
#: subscripts are smaller again, so tick labels avoid them (:func:`plain_log_ticks`).
MIN_FONT_PT = 9.0
#: The most an SVG figure may weigh, in bytes (a page's budget is 400 kB with
#: its text, styles, scripts, fonts and every figure).
MAX_SVG_BYTES = 60_000
#: Resolution of what a figure draws as a raster (``rasterized=True``): twice
#: the CSS pixels of a figure shown at its full 4.8 in, for phones' screens.
RASTER_DPI = 192
#: Samples a series needs at most: two (the low and the high) per CSS pixel of
#: a figure shown at its full width.
RESOLVABLE_POINTS = 2 * round(PAGE_WIDTH * 96)

RC = {
    "svg.hashsalt": "sdpa-ref",
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
    "savefig.dpi": RASTER_DPI,
    "path.simplify": True,
    # Text is written as text and its font embedded (figures._svg.compact).
    "svg.fonttype": "none",
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


def log_axis(ax, axis: str = "x", base: float = 2) -> None:
    """Put ``axis`` of ``ax`` on a log scale, its ticks labelled as plain numbers.

    See :func:`plain_log_ticks`.
    """
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=base)
    plain_log_ticks(ax, axis)


def note(ax, text, xy, offset, **kwargs):
    """Write ``text`` ``offset`` points away from the point ``xy``.

    The text stands on that spot (``va="bottom"``) unless ``kwargs``, passed
    on to ``ax.annotate``, say otherwise.
    """
    return ax.annotate(
        text,
        xy,
        xytext=offset,
        textcoords="offset points",
        **{"va": "bottom", **kwargs},
    )


def _buckets(n: int, points: int) -> list[np.ndarray]:
    return np.array_split(np.arange(n), max(1, points // 2))


def thin(x, y, points: int = RESOLVABLE_POINTS):
    """A long series cut to ``points`` samples that draw the same line.

    The samples fall in ``points // 2`` runs of neighbours, each about a CSS
    pixel wide at most, and each run keeps its lowest and its highest sample,
    in their order: every peak and trough the full series shows is still
    drawn. A series already short enough is returned unchanged.

    Examples
    --------
    >>> x = np.arange(10_000)
    >>> y = np.sin(x / 500) + (x == 7_777)   # one spike
    >>> tx, ty = thin(x, y, points=200)
    >>> len(tx) <= 200, float(ty.max()) == float(y.max())
    (True, True)
    """
    x, y = np.asarray(x), np.asarray(y)
    if len(x) <= points:
        return x, y
    keep = []
    for run in _buckets(len(x), points):
        lo, hi = run[np.argmin(y[run])], run[np.argmax(y[run])]
        keep += sorted({lo, hi})
    keep = np.array(sorted(set(keep) | {0, len(x) - 1}))
    return x[keep], y[keep]


def thin_band(x, low, high, points: int = RESOLVABLE_POINTS):
    """A band (for ``fill_between``) cut to at most ``points`` samples.

    Each run of neighbours keeps the least of ``low`` and the most of
    ``high``, at the run's ends, so the thinned band covers the full one.

    Examples
    --------
    >>> x = np.arange(5_000)
    >>> tx, lo, hi = thin_band(x, -np.abs(np.sin(x)), np.abs(np.cos(x)), points=100)
    >>> len(tx) <= 100, float(lo.min()) <= -0.99, float(hi.max()) >= 0.99
    (True, True, True)
    """
    x, low, high = np.asarray(x), np.asarray(low), np.asarray(high)
    if len(x) <= points:
        return x, low, high
    xs, lows, highs = [], [], []
    for run in _buckets(len(x), points):
        xs += [x[run[0]], x[run[-1]]]
        lows += [low[run].min()] * 2
        highs += [high[run].max()] * 2
    return np.array(xs), np.array(lows), np.array(highs)


def svg_bytes(fig: Figure) -> bytes:
    """The figure as SVG; the same figure always gives the same bytes.

    The SVG is compacted by :func:`figures._svg.compact`: it draws the same,
    with text as text in an embedded subset of its font, coordinates to a
    tenth of a point (a twentieth of a CSS pixel at full size), repeated
    styles as classes. That takes 40 to 60 per cent off a figure.
    """
    buffer = io.BytesIO()
    with mpl.rc_context(RC):
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    return compact(buffer.getvalue().decode("utf-8")).encode("utf-8")


def svg(fig: Figure):
    """The figure as an IPython SVG object, for ``glue`` and page output."""
    return SVG(svg_bytes(fig))
