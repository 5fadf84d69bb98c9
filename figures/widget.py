"""Data for the interactive scaled-against-unscaled figure, and its root element.

Every state the reader can reach (each query at each head width) is computed
here by sdpa_ref at build time and written into the page as JSON, numbers and
their display strings both. The browser script only draws: it does no
arithmetic on the data and no rounding, so the figure cannot disagree with the
reference package or with the static figure next to it.
"""

from __future__ import annotations

import html
import json

import numpy as np
from IPython.display import HTML

from sdpa_ref import example

from .comparison import _hull
from .style import KEY_COLORS
from .tables import number, vector

FIGURE_ID = "scaled-vs-unscaled"


def _side(scores, weights, entropy, top, output):
    return {
        "scores": [float(s) for s in scores],
        "score_labels": [number(s, "{:g}") for s in scores],
        "weights": [float(w) for w in weights],
        "weight_labels": [number(w) for w in weights],
        "entropy": number(entropy),
        "top": number(top),
        "output": [float(o) for o in output],
        "output_label": vector(output, "{:.2f}"),
    }


def _summary(c, query_name):
    raw, scaled = number(c.raw_entropy), number(c.scaled_entropy)
    if raw == scaled:
        change = f"leaves the entropy at {scaled} nats"
    else:
        change = f"raises the entropy from {raw} to {scaled} nats"
    return (
        f"{query_name} at dₖ = {c.width}: dividing by √{c.width} {change} "
        f"(at most {number(c.max_entropy)}), and the top weight goes from "
        f"{number(c.raw_top_weight)} to {number(c.scaled_top_weight)}."
    )


def _text(values):
    """A short vector as space-separated numbers, in the site's number style."""
    return " ".join(number(v, "{:g}") for v in values)


def _repeats(rows, base):
    """How often each row repeats the width-``base`` pattern ``rows[:, :base]``.

    The table shows the pattern and this count instead of every coordinate
    (64 copies of four numbers at d_k = 256); the check keeps that honest.
    """
    width = rows.shape[1]
    pattern = rows[:, :base]
    if width % base or not np.array_equal(rows, np.tile(pattern, width // base)):
        raise ValueError(f"the width-{width} vectors do not repeat a width-{base} one")
    return width // base


def widget_data():
    """Every state of the figure, as JSON-ready Python data.

    Examples
    --------
    >>> data = widget_data()
    >>> data["states"]["0/4"]["raw"]["weight_labels"][0]
    '0.867'
    >>> data["states"]["0/4"]["scaled"]["entropy"]
    '0.888'
    """
    base = example.BASE_WIDTH
    base_q, base_k, values = example.vectors(base)
    states, repeats = {}, {}
    for width in example.WIDTHS:
        q, k, _ = example.vectors(width)
        repeats[str(width)] = _repeats(np.vstack([q, k]), base)
        for i, name in enumerate(example.QUERY_NAMES):
            c = example.compare(i, width)
            states[f"{i}/{width}"] = {
                "raw": _side(
                    c.raw_scores,
                    c.raw_weights,
                    c.raw_entropy,
                    c.raw_top_weight,
                    c.raw_output,
                ),
                "scaled": _side(
                    c.scaled_scores,
                    c.scaled_weights,
                    c.scaled_entropy,
                    c.scaled_top_weight,
                    c.scaled_output,
                ),
                "scale_label": f"√{width}",
                "summary": _summary(c, name),
            }
    hull = _hull(values)
    return {
        "queries": list(example.QUERY_NAMES),
        "keys": list(example.KEY_NAMES),
        "widths": list(example.WIDTHS),
        "colors": list(KEY_COLORS),
        "max_entropy": number(example.compare(0, example.BASE_WIDTH).max_entropy),
        "default": {"query": 0, "width": example.BASE_WIDTH},
        "values": [[float(x) for x in v] for v in values],
        "value_labels": [vector(v, "{:g}") for v in values],
        "patterns": {
            "queries": [_text(row) for row in base_q],
            "keys": [_text(row) for row in base_k],
            "values": [_text(row) for row in values],
        },
        "base_width": base,
        "repeats": repeats,
        "hull": [[float(x) for x in p] for p in hull],
        "bounds": [
            float(values[:, 0].min() - 1),
            float(values[:, 0].max() + 1),
            float(values[:, 1].min() - 1),
            float(values[:, 1].max() + 1),
        ],
        "states": states,
    }


def widget_json(data=None):
    """The data as compact, key-sorted JSON that is safe inside ``<script>``."""
    text = json.dumps(
        data or widget_data(), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return text.replace("</", "<\\/")


def root_html(data=None):
    """The figure's root element: its data, and a note for readers without scripts.

    The note sits in ``<noscript>``: without JavaScript (and so on paper
    printed without it) it names the state that the static figure below shows;
    with JavaScript it is never rendered and the figure names its own state.
    """
    data = data or widget_data()
    label = html.escape("Interactive comparison of unscaled and scaled attention")
    start = data["default"]
    note = html.escape(
        f"Shown: query {data['queries'][start['query']]} at head width "
        f"dₖ = {start['width']}. With JavaScript, an interactive figure here "
        "offers every query and head width."
    )
    return (
        f'<div class="sdpa-widget" data-figure="{FIGURE_ID}" role="group" '
        f'aria-label="{label}">'
        '<script type="application/json" class="sdpa-widget-data">'
        f"{widget_json(data)}</script></div>"
        f'<noscript><p class="sdpa-w-static-note">{note}</p></noscript>'
    )


def root(data=None):
    """The root element for display in an executed page."""
    return HTML(root_html(data))
