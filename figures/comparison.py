"""Unscaled against scaled attention for one query: weights and outputs."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Polygon

from .style import INK, KEY_COLORS, MUTED, PAGE_WIDTH, new_figure, styled


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Vertices of the convex hull of 2-D points, counter-clockwise."""
    pts = sorted(map(tuple, points))

    def turn(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    def half(seq):
        chain = []
        for p in seq:
            while len(chain) >= 2 and turn(chain[-2], chain[-1], p) <= 0:
                chain.pop()
            chain.append(p)
        return chain[:-1]

    return np.array(half(pts) + half(pts[::-1]))


@styled
def weights_figure(comparison, key_names):
    """Two bar charts, unscaled and scaled weights, one colour per key.

    Parameters
    ----------
    comparison : sdpa_ref.example.Comparison
    key_names : sequence of str

    Returns
    -------
    matplotlib.figure.Figure
    """
    c = comparison
    fig, axes = new_figure(PAGE_WIDTH, 5.4, nrows=2, sharey=True)
    panels = (
        ("Unscaled: softmax(q·k)", c.raw_scores, c.raw_weights, c.raw_entropy),
        (
            f"Scaled: softmax(q·k / √{c.width})",
            c.scaled_scores,
            c.scaled_weights,
            c.scaled_entropy,
        ),
    )
    x = np.arange(len(key_names))
    for ax, (title, scores, weights, h) in zip(axes, panels, strict=True):
        bars = ax.bar(x, weights, color=KEY_COLORS[: len(x)], width=0.7)
        ax.bar_label(bars, labels=[f"{w:.3f}" for w in weights], padding=2)
        ax.set_xticks(
            x,
            [
                f"{name}\n{s:g}".replace("-", "−")
                for name, s in zip(key_names, scores, strict=True)
            ],
        )
        ax.set_title(
            f"{title}\nentropy {h:.3f} of {c.max_entropy:.3f} nats", loc="left"
        )
        ax.set_ylim(0, 1.12)
        ax.set_xlabel("key, and its score")
    for ax in axes:
        ax.set_ylabel("attention weight")
    return fig


@styled
def mixture_figure(comparison, values, key_names):
    """The values as points in the plane and both outputs inside their hull.

    Parameters
    ----------
    comparison : sdpa_ref.example.Comparison
    values : numpy.ndarray, shape (n_keys, 2)
    key_names : sequence of str

    Returns
    -------
    matplotlib.figure.Figure
    """
    c = comparison
    fig, ax = new_figure(PAGE_WIDTH, 4.0)
    hull = convex_hull(values)
    ax.add_patch(Polygon(hull, closed=True, facecolor="#f0f0f0", edgecolor="#bdbdbd"))
    for j, (point, name) in enumerate(zip(values, key_names, strict=True)):
        ax.scatter(*point, s=70, color=KEY_COLORS[j], zorder=3)
        ax.annotate(
            f"v of {name}", point, xytext=(6, 6), textcoords="offset points", color=INK
        )
    ax.scatter(
        *c.raw_output,
        s=90,
        marker="s",
        facecolor="white",
        edgecolor=INK,
        linewidth=1.6,
        zorder=4,
        label="unscaled output",
    )
    ax.scatter(
        *c.scaled_output, s=80, marker="o", color=INK, zorder=4, label="scaled output"
    )
    if np.linalg.norm(c.scaled_output - c.raw_output) > 0.05:
        ax.annotate(
            "",
            xy=c.scaled_output,
            xytext=c.raw_output,
            arrowprops={"arrowstyle": "->", "color": MUTED, "lw": 1.2},
            zorder=3,
        )
    lo, hi = values.min(axis=0) - 1, values.max(axis=0) + 1
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_aspect("equal")
    ax.set_xlabel("value coordinate 1")
    ax.set_ylabel("value coordinate 2")
    ax.legend(loc="lower left")
    ax.set_title("Each output is a weighted average of the values", loc="left")
    return fig
