"""The interactive scaled-against-unscaled figure: its data and its markup.

Every state the reader can reach (each query at each head width) is computed
here by sdpa_ref at build time and written into the page as JSON, numbers and
their display strings both. The figure itself, in its starting state, is
written into the page here too, so it takes its place before any script runs
and the page never jumps. The browser script only updates it: it does no
arithmetic on the data and no rounding, so the figure cannot disagree with the
reference package or with the static figure next to it.
"""

from __future__ import annotations

import html
import json
import math

import numpy as np
from IPython.display import HTML

from sdpa_ref import example

from .comparison import convex_hull
from .style import KEY_COLORS
from .tables import markdown_table, number, vector

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
    raw_top, scaled_top = number(c.raw_top_weight), number(c.scaled_top_weight)
    if raw_top == scaled_top:
        top = f"the top weight stays at {scaled_top}"
    else:
        top = f"the top weight goes from {raw_top} to {scaled_top}"
    return (
        f"{query_name} at dₖ = {c.width}: dividing by √{c.width} {change} "
        f"(at most {number(c.max_entropy)}), and {top}."
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
    hull = convex_hull(values)
    outputs = [
        side["output"]
        for state in states.values()
        for side in (state["raw"], state["scaled"])
    ]
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
        "plane": plane_geometry(values, outputs),
    }


def widget_json(data=None):
    """The data as compact, key-sorted JSON that is safe inside ``<script>``."""
    text = json.dumps(
        data or widget_data(), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return text.replace("</", "<\\/")


def root_html(data=None):
    """The figure's root element: its data, and the figure in its first state.

    The note in ``<noscript>`` names, for readers without scripts (and so on
    paper printed without them), the state that the static figures below
    show; with scripts it is never rendered, and the figure names its own.
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
        f"{widget_json(data)}</script>{figure_html(data)}</div>"
        f'<noscript><p class="sdpa-w-static-note">{note}</p></noscript>'
    )


def vectors_markdown(data=None):
    """The fixed vectors in the figure's first state, as Markdown.

    For the page without scripts: the rows of the interactive figure's table.
    """
    data = data or widget_data()
    start = data["default"]
    query, width = start["query"], start["width"]
    n = data["repeats"][str(width)]
    times = f"× {n}" if n > 1 else "once"
    pat = data["patterns"]
    rows = [[data["queries"][query], pat["queries"][query], times, str(width)]]
    rows += [
        [k, p, times, str(width)]
        for k, p in zip(data["keys"], pat["keys"], strict=True)
    ]
    rows += [
        [f"v of {k}", p, "once", str(len(p.split()))]
        for k, p in zip(data["keys"], pat["values"], strict=True)
    ]
    lead = (
        f"The fixed vectors at dₖ = {width}: query {data['queries'][query]}, the "
        f"four keys and their values (the figure's other queries and widths "
        "use the same keys and values)."
    )
    header = ["vector", f"width-{data['base_width']} pattern", "repeated", "width"]
    return (
        lead + "\n\n" + markdown_table(header, rows, align=[":--", ":--", "--:", "--:"])
    )


def root(data=None):
    """The root element for display in an executed page."""
    return HTML(root_html(data))


# -- the figure's markup --------------------------------------------------------
#: The value plane: pixels per unit, and its margins for the axes' labels.
PLANE_UNIT, PLANE_LEFT, PLANE_TOP, PLANE_RIGHT, PLANE_BOTTOM = 22, 34, 8, 8, 34
#: A value's label: font size, and the room a character takes, in plane units.
LABEL_SIZE, LABEL_CHAR = 10, 6.0


def _label_ring(side, above, below, over, under):
    """A value's label spots at one distance from its dot.

    Each is (dx, dy, anchor) to the label's baseline: beside the dot above it
    (right, left), beside it below (right, left), then centred over and under it.
    """
    return (
        (side, above, "start"),
        (-side, above, "end"),
        (side, below, "start"),
        (-side, below, "end"),
        (0, over, "middle"),
        (0, under, "middle"),
    )


#: Where a value's label may sit, in order of preference: (dx, dy, anchor)
#: from the value's dot, to its baseline; the farther ring keeps clear of an
#: output sitting on the dot itself (a saturated softmax).
LABEL_SPOTS = _label_ring(9, -9, 17, -11, 21) + _label_ring(15, -13, 24, -16, 26)


def _overlap(a, b):
    """Area shared by two boxes (x0, y0, x1, y1)."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(w, 0) * max(h, 0)


def plane_geometry(values, outputs):
    """The value plane's size and where each value's label goes.

    A label sits beside its dot where no output of any state ever lands, and
    inside the plane: an output mark drawn over "v of K3" would hide it.

    Examples
    --------
    >>> g = widget_data()["plane"]
    >>> g["width"], g["height"], len(g["labels"])
    (176.0, 154.0, 4)
    """
    values = np.asarray(values, dtype=float)
    b0, b1 = values[:, 0].min() - 1, values[:, 0].max() + 1
    b2, b3 = values[:, 1].min() - 1, values[:, 1].max() + 1

    def px(v):
        return (
            PLANE_LEFT + (v[0] - b0) * PLANE_UNIT,
            PLANE_TOP + (b3 - v[1]) * PLANE_UNIT,
        )

    width, height = (b1 - b0) * PLANE_UNIT, (b3 - b2) * PLANE_UNIT
    inside = (PLANE_LEFT, PLANE_TOP, PLANE_LEFT + width, PLANE_TOP + height)
    # An output's mark (a 22-unit square or a circle of radius 8, stroked 2
    # wide), and a value's dot, with a unit to spare.
    taken = [(x - 13, y - 13, x + 13, y + 13) for x, y in map(px, outputs)]
    taken += [(x - 7, y - 7, x + 7, y + 7) for x, y in map(px, values)]
    labels = []
    for j, v in enumerate(values):
        cx, cy = px(v)
        text_width = LABEL_CHAR * len(f"v of K{j}")
        best = None
        for dx, dy, anchor in LABEL_SPOTS:
            x, y = cx + dx, cy + dy
            x0 = {"start": x, "end": x - text_width, "middle": x - text_width / 2}[
                anchor
            ]
            # The text's box: ascent above the baseline, descent below.
            box = (x0, y - LABEL_SIZE * 0.95, x0 + text_width, y + LABEL_SIZE * 0.3)
            outside = text_width * LABEL_SIZE - _overlap(box, inside)
            cost = sum(_overlap(box, other) for other in taken) + 10 * outside
            if best is None or cost < best[0]:
                best = (cost, [float(round(x, 1)), float(round(y, 1)), anchor], box)
            if cost == 0:
                break
        labels.append(best[1])
        taken.append(best[2])
    return {
        "unit": PLANE_UNIT,
        "left": PLANE_LEFT,
        "top": PLANE_TOP,
        "width": float(width),
        "height": float(height),
        "right": PLANE_RIGHT,
        "bottom": PLANE_BOTTOM,
        "labels": labels,
    }


def tag(name, attrs=None, *children):
    """An HTML element; text children are escaped, ``Markup`` ones are not."""
    attrs = "".join(
        f" {k}" if v is True else f' {k}="{html.escape(str(v), quote=True)}"'
        for k, v in (attrs or {}).items()
        if v is not None and v is not False
    )
    inner = "".join(
        c if isinstance(c, Markup) else html.escape(str(c)) for c in children
    )
    return Markup(f"<{name}{attrs}>{inner}</{name}>")


class Markup(str):
    """HTML that is already safe."""


DK = Markup('<span class="sdpa-w-dk"><i>d</i><sub>k</sub></span>')


def _radios(uid, name, legend, options, checked):
    spans = []
    for value, label in options:
        ident = f"{uid}-{name}-{value}"
        spans.append(
            tag(
                "span",
                {"class": "sdpa-w-option"},
                Markup(
                    f'<input type="radio" name="{uid}-{name}" id="{ident}" '
                    f'value="{value}"{" checked" if value == checked else ""}>'
                ),
                tag("label", {"for": ident}, label),
            )
        )
    return tag(
        "fieldset", {"class": "sdpa-w-choice"}, tag("legend", {}, *legend), *spans
    )


def _panel(side, title, formula, data, state_side):
    columns = []
    for j, key in enumerate(data["keys"]):
        weight = state_side["weights"][j]
        columns.append(
            tag(
                "span",
                {"class": "sdpa-w-col"},
                tag("span", {"class": "sdpa-w-value"}, state_side["weight_labels"][j]),
                tag(
                    "span",
                    {"class": "sdpa-w-track"},
                    tag(
                        "span", {"class": "sdpa-w-bar", "style": _bar(weight, data, j)}
                    ),
                ),
                tag("span", {"class": "sdpa-w-key"}, key),
            )
        )
    weights = ", ".join(
        f"{k} {w}"
        for k, w in zip(data["keys"], state_side["weight_labels"], strict=True)
    )
    return tag(
        "section",
        {"class": "sdpa-w-panel", "data-side": side},
        tag(
            "p",
            {"class": "sdpa-w-title"},
            tag("strong", {}, title),
            " ",
            tag("span", {"class": "sdpa-w-formula"}, formula),
            tag("span", {"class": "sdpa-w-scores"}, _scores(state_side)),
        ),
        tag(
            "span",
            {
                "class": "sdpa-w-bars",
                "role": "img",
                "aria-label": f"Weights: {weights}",
            },
            *columns,
        ),
        tag("p", {"class": "sdpa-w-stats"}, _stats(state_side, data)),
    )


def _bar(weight, data, j):
    return f"height:{100 * weight:.2f}%;background:{data['colors'][j]}"


def _scores(side):
    return " · scores [" + ", ".join(side["score_labels"]) + "]"


def _stats(side, data):
    return (
        f"Entropy {side['entropy']} of at most {data['max_entropy']} nats · "
        f"top weight {side['top']}"
    )


def _outputs(state):
    return (
        f"Outputs: unscaled {state['raw']['output_label']}, scaled "
        f"{state['scaled']['output_label']}. Each is a weighted average of the "
        "values, inside their hull."
    )


def _plane_label(state):
    return (
        "Values of the four keys, with the unscaled output at "
        f"{state['raw']['output_label']} and the scaled output at "
        f"{state['scaled']['output_label']}"
    )


def _plane(data, state):
    g, b = data["plane"], data["bounds"]

    def px(v):
        return (
            g["left"] + (v[0] - b[0]) * g["unit"],
            g["top"] + (b[3] - v[1]) * g["unit"],
        )

    def n(x):
        return f"{x:g}"

    size = (g["left"] + g["width"] + g["right"], g["top"] + g["height"] + g["bottom"])
    left, top, w, h = g["left"], g["top"], g["width"], g["height"]
    axes = [f'<path d="M{n(left)} {n(top)}V{n(top + h)}H{n(left + w)}"/>']
    x = math.ceil(b[0])
    while x <= b[1]:
        cx, cy = px((x, b[2]))
        axes.append(f'<path d="M{n(cx)} {n(cy)}v4"/>')
        axes.append(
            f'<text x="{n(cx)}" y="{n(cy + 14)}" text-anchor="middle">'
            f"{str(x).replace('-', '−')}</text>"
        )
        x += 2
    y = math.ceil(b[2] / 2) * 2
    while y <= b[3]:
        cx, cy = px((b[0], y))
        axes.append(f'<path d="M{n(cx)} {n(cy)}h-4"/>')
        axes.append(
            f'<text x="{n(cx - 6)}" y="{n(cy + 3.5)}" text-anchor="end">'
            f"{str(y).replace('-', '−')}</text>"
        )
        y += 2
    axes.append(
        f'<text x="{n(left + w / 2)}" y="{n(size[1] - 3)}" text-anchor="middle">'
        "value coordinate 1</text>"
    )
    axes.append(
        f'<text transform="translate(10 {n(top + h / 2)}) rotate(-90)" '
        'text-anchor="middle">value coordinate 2</text>'
    )
    hull = " ".join(f"{n(px(v)[0])},{n(px(v)[1])}" for v in data["hull"])
    dots = []
    for j, v in enumerate(data["values"]):
        cx, cy = px(v)
        lx, ly, anchor = g["labels"][j]
        dots.append(
            f'<circle cx="{n(cx)}" cy="{n(cy)}" r="5.5" fill="{data["colors"][j]}" '
            'class="sdpa-w-value-dot"/>'
            f'<text x="{n(lx)}" y="{n(ly)}" class="sdpa-w-vlabel" '
            f'text-anchor="{anchor}">v of {data["keys"][j]}</text>'
        )
    rx, ry = px(state["raw"]["output"])
    sx, sy = px(state["scaled"]["output"])
    return Markup(
        f'<svg viewBox="0 0 {n(size[0])} {n(size[1])}" class="sdpa-w-plane" role="img" '
        f'aria-label="{html.escape(_plane_label(state), quote=True)}">'
        f'<g class="sdpa-w-axes">{"".join(axes)}</g>'
        f'<polygon class="sdpa-w-hull" points="{hull}"/>{"".join(dots)}'
        f'<rect width="22" height="22" class="sdpa-w-out-raw" x="{rx - 11:.2f}" '
        f'y="{ry - 11:.2f}"/><circle r="8" class="sdpa-w-out-scaled" cx="{sx:.2f}" '
        f'cy="{sy:.2f}"/></svg>'
    )


def vectors_caption(data, width):
    """The fixed-vectors table's caption at one head width."""
    n = data["repeats"][str(width)]
    return Markup(
        f"The fixed vectors at {DK} = {width}: each query and key repeats its "
        f"width-{data['base_width']} pattern {f'{n} times' if n > 1 else 'once'}. "
        "Values stay 2-wide at every width."
    )


def vectors_table(data, query, width):
    """The fixed vectors as an HTML table: the query, the keys and the values.

    Each query and key is its width-4 pattern repeated, so the table shows
    the pattern and the count: the same few rows at any width.
    """
    n = data["repeats"][str(width)]
    times = f"× {n}" if n > 1 else "once"
    pat = data["patterns"]
    rows = [(data["queries"][query], pat["queries"][query], times, str(width))]
    rows += [
        (k, p, times, str(width))
        for k, p in zip(data["keys"], pat["keys"], strict=True)
    ]
    rows += [
        (f"v of {k}", p, "once", str(len(p.split())))
        for k, p in zip(data["keys"], pat["values"], strict=True)
    ]
    head = ["vector", f"width-{data['base_width']} pattern", "repeated", "width"]
    return tag(
        "table",
        {"class": "sdpa-w-vectors"},
        tag("caption", {}, vectors_caption(data, width)),
        tag(
            "thead",
            {},
            tag("tr", {}, *(tag("th", {"scope": "col"}, c) for c in head)),
        ),
        tag(
            "tbody",
            {},
            *(
                tag(
                    "tr",
                    {},
                    tag("th", {"scope": "row"}, name),
                    tag("td", {"class": "sdpa-w-pattern"}, pattern),
                    tag("td", {}, repeat),
                    tag("td", {}, wide),
                )
                for name, pattern, repeat, wide in rows
            ),
        ),
    )


def figure_html(data, uid="sdpa-w0"):
    """The figure in its starting state, as the script will find it."""
    start = data["default"]
    query, width = start["query"], start["width"]
    state = data["states"][f"{query}/{width}"]
    controls = tag(
        "div",
        {"class": "sdpa-w-controls"},
        _radios(uid, "q", ["Query"], list(enumerate(data["queries"])), query),
        _radios(
            uid,
            "dk",
            ["Head width ", DK],
            [
                (w, Markup(f'<span class="sdpa-w-sr">{DK} = </span>{w}'))
                for w in data["widths"]
            ],
            width,
        ),
    )
    panels = tag(
        "div",
        {"class": "sdpa-w-panels"},
        _panel("raw", "Unscaled", "softmax(q·k)", data, state["raw"]),
        _panel(
            "scaled",
            "Scaled",
            f"softmax(q·k / {state['scale_label']})",
            data,
            state["scaled"],
        ),
    )
    legend = Markup(
        '<p class="sdpa-w-legend"><span class="sdpa-w-key-raw" aria-hidden="true">'
        '</span> unscaled output <span class="sdpa-w-key-scaled" aria-hidden="true">'
        "</span> scaled output</p>"
    )
    mixture = tag(
        "figure",
        {"class": "sdpa-w-mixture"},
        _plane(data, state),
        tag(
            "figcaption",
            {},
            legend,
            tag("p", {"class": "sdpa-w-outputs"}, _outputs(state)),
        ),
    )
    printed = tag(
        "p",
        {"class": "sdpa-w-state"},
        tag("span", {}, f"Shown: query {data['queries'][query]} at head width "),
        DK,
        tag("span", {}, f" = {width}."),
    )
    live = tag("p", {"class": "sdpa-w-live", "aria-live": "polite"}, state["summary"])
    table = tag(
        "div",
        {
            "class": "sdpa-w-table",
            "tabindex": "0",
            "role": "group",
            "aria-label": "The fixed vectors",
        },
        vectors_table(data, query, width),
    )
    return Markup(printed + controls + panels + mixture + live + table)
