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


def _groups(values, size=4):
    """A vector as strings in groups of ``size``, for a readable wrapped table."""
    labels = [number(v, "{:g}") for v in values]
    return [" ".join(labels[i : i + size]) for i in range(0, len(labels), size)]


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
    _, _, values = example.vectors(example.BASE_WIDTH)
    states, vectors = {}, {}
    for width in example.WIDTHS:
        q, k, _ = example.vectors(width)
        vectors[str(width)] = {
            "queries": [_groups(row) for row in q],
            "keys": [_groups(row) for row in k],
        }
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
        "value_groups": [_groups(v) for v in values],
        "hull": [[float(x) for x in p] for p in hull],
        "bounds": [
            float(values[:, 0].min() - 1),
            float(values[:, 0].max() + 1),
            float(values[:, 1].min() - 1),
            float(values[:, 1].max() + 1),
        ],
        "vectors": vectors,
        "states": states,
    }


def widget_json(data=None):
    """The data as compact, key-sorted JSON that is safe inside ``<script>``."""
    text = json.dumps(
        data or widget_data(), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return text.replace("</", "<\\/")


def root_html(data=None):
    """The figure's root element: its data, and a note for readers without scripts."""
    label = html.escape("Interactive comparison of unscaled and scaled attention")
    return (
        f'<div class="sdpa-widget" data-figure="{FIGURE_ID}" role="group" '
        f'aria-label="{label}">'
        '<script type="application/json" class="sdpa-widget-data">'
        f"{widget_json(data)}</script></div>"
    )


def root(data=None):
    """The root element for display in an executed page."""
    return HTML(root_html(data))
