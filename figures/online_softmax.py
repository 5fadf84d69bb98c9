"""The online softmax stepped tile by tile: the flash page's figure, data and markup.

Both loop orders of :func:`sdpa_ref.flash.tiled_forward_trace`, on the problem
of :func:`sdpa_ref.flash.trace_problem`, are traced here at build time. Every
state the reader can reach (each order at each step) is written into the page
as JSON: the numbers as sdpa_ref returns them, their display strings, and
what each step draws. The figure itself is written into the page in its first
state, so it takes its place before any script runs. The browser script only
moves between the states: it does no arithmetic and no rounding, so the figure
cannot disagree with the trace.
"""

from __future__ import annotations

import html
import json

import numpy as np
from IPython.display import HTML

from sdpa_ref import flash

from .tables import markdown_table, number, times_ten, vector
from .widget import Markup, tag

FIGURE_ID = "online-softmax"
#: The loop orders as the figure names them.
ORDER_LABELS = {
    "flash2": "FlashAttention-2: queries outside",
    "flash": "FlashAttention: keys outside",
}
DEFAULT = {"order": "flash2", "step": 0}
#: What each array of the trace is called on the page (ℓ for the sum).
ARRAY_NAMES = {"Q": "Q", "K": "K", "V": "V", "O": "O", "l": "ℓ", "m": "m", "L": "L"}
#: The memory strip's groups, left to right: one box per block.
GROUPS = ("Q", "K", "V", "O")
SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def tile_name(array, block):
    """A block as the papers name it, counting from 1: ``("K", 0)`` is K₁."""
    return f"{ARRAY_NAMES[array]}{str(block + 1).translate(SUBSCRIPTS)}"


def _names(pairs):
    return ", ".join(tile_name(a, b) for a, b in pairs)


def _span(first, last, prefix):
    return f"{prefix}{first}–{prefix}{last}" if last > first else f"{prefix}{first}"


def score_label(x):
    """A score or a maximum: halves exactly, ``−∞`` before the first block."""
    return number(float(x), "{:g}")


def factor_label(x):
    """``exp(m_old − m_new)``: exactly 0 and 1 as such, else three decimals."""
    x = float(x)
    return "0" if x == 0 else "1" if x == 1 else number(x, "{:.3f}")


def _ln_label(x):
    return number(float(x), "{:.3f}")


def _vec(x):
    return vector(x, "{:.3f}")


def _json_float(x):
    """A float for JSON: None for −∞ (JSON has no infinities)."""
    x = float(x)
    return None if np.isneginf(x) else x


def _row_cells(state, r, factors, outputs):
    """The table's cells for query ``r``: m, factor, ℓ, a, O."""
    return [
        score_label(state["m"][r]),
        factor_label(factors[r]) if r in factors else "",
        _ln_label(state["l"][r]),
        _vec(state["acc"][r]),
        _vec(outputs[r]) if r in outputs else "",
    ]


def _row_summary(name, before, after, factor):
    if np.isneginf(before):
        return (
            f"{name} meets its first keys: m = {score_label(after)}, and the "
            "factor e^(−∞) = 0 has nothing yet to rescale."
        )
    if after > before:
        return (
            f"{name}’s maximum rises from {score_label(before)} to "
            f"{score_label(after)}, so its ℓ and a shrink by e^("
            f"{score_label(before)} − {score_label(after)}) = {factor_label(factor)}."
        )
    return f"{name}’s maximum stays at {score_label(after)}: factor 1."


def _and(items):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _first_keys(names, step):
    """The summary of a tile that brings its queries their first keys."""
    maxima = _and(
        f"{score_label(x)} for {name}"
        for x, name in zip(step["max_after"], names, strict=True)
    )
    return (
        f"These are their first keys: m = {maxima}; the factor e^(−∞) = 0 has "
        "nothing yet to rescale."
    )


def _memory_text(order, step, queries):
    if step is None:
        if order == "flash":
            return (
                "Before the loops: O = 0, ℓ = 0 and m = −∞ are written to HBM for "
                "every query. Nothing is on chip yet."
            )
        return (
            "Before the loops: nothing is on chip yet. Each block of queries will "
            "start with a = 0, ℓ = 0 and m = −∞ on chip."
        )
    first, last = step["queries"]
    rows = _span(first, last, queries)
    held = "O, ℓ, m" if order == "flash" else "a, ℓ, m"
    written = _names(step["writes"]) or "nothing"
    return (
        f"On chip: {_names(step['on_chip'][:3])}, and the running {held} of {rows}. "
        f"Read from HBM: {_names(step['reads'])}. Written to HBM: {written}."
    )


def _columns(order, step, trace):
    """Each memory box's flags: on chip, read and written at this step."""
    flags = []
    for group in GROUPS:
        blocks = trace["query_blocks" if group in "QO" else "key_blocks"]
        for b in range(len(blocks)):
            names = {group} if group != "O" else {"O", "l", "m", "L"}
            if step is None:
                chip = read = False
                write = order == "flash" and group == "O"
            else:
                chip = any(a in names and c == b for a, c in step["on_chip"])
                read = any(a in names and c == b for a, c in step["reads"])
                write = any(a in names and c == b for a, c in step["writes"])
            flags.append(
                "".join(
                    f for f, on in zip("crw", (chip, read, write), strict=True) if on
                )
            )
    return flags


def stepper_data():
    """Every state of the figure, as JSON-ready Python data.

    Examples
    --------
    >>> data = stepper_data()
    >>> len(data["orders"]["flash2"]["steps"]), data["default"]
    (7, {'order': 'flash2', 'step': 0})
    >>> data["orders"]["flash2"]["steps"][2]["rows"][0]
    ['3.5', '0.368', '1.509', '[−1.134, 0.699]', '']
    """
    shape = flash.TRACE_SHAPE
    q, k, v = flash.trace_problem()
    traces = {
        order: flash.tiled_forward_trace(
            q, k, v, shape["block_rows"], shape["block_cols"], order=order
        )
        for order in flash.LOOP_ORDERS
    }
    first = traces[DEFAULT["order"]]
    n_q, n_k = first["scores"].shape
    names = [f"q{r}" for r in range(n_q)]
    orders = {}
    for order, trace in traces.items():
        steps = [_view(order, trace, None, names)]
        steps += [_view(order, trace, t, names) for t in range(len(trace["steps"]))]
        orders[order] = {"label": ORDER_LABELS[order], "steps": steps}
    return {
        "queries": names,
        "n_keys": n_k,
        "query_blocks": [list(b) for b in first["query_blocks"]],
        "key_blocks": [list(b) for b in first["key_blocks"]],
        "scores": [[score_label(x) for x in row] for row in first["scores"]],
        "groups": {
            "Q": [tile_name("Q", b) for b in range(len(first["query_blocks"]))],
            "K": [tile_name("K", b) for b in range(len(first["key_blocks"]))],
            "V": [tile_name("V", b) for b in range(len(first["key_blocks"]))],
            "O": [tile_name("O", b) for b in range(len(first["query_blocks"]))],
        },
        "out_label": {"flash2": "O, L", "flash": "O, ℓ, m"},
        "default": dict(DEFAULT),
        "orders": orders,
    }


def _view(order, trace, t, names):
    """What the figure shows after tile ``t`` of ``trace`` (None: before any)."""
    steps = trace["steps"]
    step = None if t is None else steps[t]
    state = trace["initial"]["state"] if step is None else step["state"]
    n_q = len(names)
    done = steps[: 0 if t is None else t + 1]
    factors, outputs = {}, {}
    for s in done:
        if s["output"] is not None:
            outputs.update(zip(_rows(s), s["output"], strict=True))
    if step is not None:
        factors = dict(zip(_rows(step), step["rescale"], strict=True))
    reached = {r for s in done for r in _rows(s)}
    total = len(steps)
    if step is None:
        title = "Start"
        svg_label = "No tile yet: every block of Q, K, V and O is in HBM."
    else:
        qi, kj = step["query_block"], step["key_block"]
        title = f"{tile_name('Q', qi)} meets {tile_name('K', kj)}, {tile_name('V', kj)}"
        svg_label = (
            f"Tile {t + 1} of {total}: the scores of queries "
            f"{_span(*step['queries'], 'q')} and keys {_span(*step['keys'], 'k')}. "
            f"On chip: {_names(step['on_chip'][:3])}."
        )
    return {
        "count": f"Step {0 if t is None else t + 1} of {total}",
        "title": title,
        "memory": _memory_text(order, step, "q"),
        "columns": _columns(order, step, trace),
        **_grid_view(trace, t),
        "rows": [_row_cells(state, r, factors, outputs) for r in range(n_q)],
        "row_flags": [
            "now" if r in factors else "" if r in reached else "idle"
            for r in range(n_q)
        ],
        "summary": _summary(order, trace, t, names),
        "result": _result(trace, t, names),
        "svg_label": svg_label,
        "state": _state(order, trace, t, factors=factors, outputs=outputs),
    }


def _rows(step):
    """The queries of a step's tile."""
    first, last = step["queries"]
    return range(first, last + 1)


def _grid_view(trace, t):
    """The score grid's tiles (done, now or not yet) and its maxima's cells."""
    steps = trace["steps"][: 0 if t is None else t + 1]
    n_kb = len(trace["key_blocks"])
    tiles = [""] * (len(trace["query_blocks"]) * n_kb)
    seen = np.zeros(trace["scores"].shape, dtype=bool)
    for s in steps:
        tiles[s["query_block"] * n_kb + s["key_block"]] = "done"
        (r0, r1), (c0, c1) = s["queries"], s["keys"]
        seen[r0 : r1 + 1, c0 : c1 + 1] = True
    if steps:
        tiles[steps[-1]["query_block"] * n_kb + steps[-1]["key_block"]] = "now"
    state = steps[-1]["state"] if steps else trace["initial"]["state"]
    # The scores that set each reached query's running maximum.
    is_max = seen & (trace["scores"] == state["m"][:, None])
    return {"tiles": tiles, "max_cells": [int(x) for x in np.flatnonzero(is_max)]}


def _summary(order, trace, t, names):
    """The step in words, for the live region."""
    if t is None:
        return (
            "Before the first tile every query has m = −∞, ℓ = 0 and a = 0. "
            "Next brings in the first tile."
        )
    step, total = trace["steps"][t], len(trace["steps"])
    rows_named = _span(*step["queries"], "q")
    parts = [
        f"Tile {t + 1} of {total}: queries {rows_named} meet keys "
        f"{_span(*step['keys'], 'k')}."
    ]
    if np.isneginf(step["max_before"]).all():
        parts.append(_first_keys([names[r] for r in _rows(step)], step))
    else:
        parts += [
            _row_summary(names[r], before, after, factor)
            for r, before, after, factor in zip(
                _rows(step),
                step["max_before"],
                step["max_after"],
                step["rescale"],
                strict=True,
            )
        ]
    if step["output"] is not None:
        parts.append(
            f"{rows_named} have now seen every key: O = a/ℓ is "
            + ("final." if order == "flash" else "written to HBM, with L.")
        )
    if t == total - 1:
        parts.append(
            "Every tile is done: O = a/ℓ equals dense attention, largest "
            f"difference {_difference(trace['max_abs_diff'])}."
        )
    return " ".join(parts)


def _result(trace, t, names):
    """Below the table: dense attention's output, once every tile is done."""
    if t != len(trace["steps"]) - 1:
        return (
            "After the last tile, O = a/ℓ is compared with dense attention, "
            "softmax(S)V."
        )
    dense = ", ".join(
        f"{name} {_vec(row)}" for name, row in zip(names, trace["dense"], strict=True)
    )
    return (
        f"Dense attention, softmax(S)V, gives {dense}: the same as O = a/ℓ after "
        f"the last tile, the largest difference being "
        f"{_difference(trace['max_abs_diff'])}."
    )


def _difference(x):
    return "0" if x == 0 else times_ten(x)


def _state(order, trace, t, *, factors, outputs):
    """The figure's ``data-state``: what it shows, as numbers (see the module)."""
    step = None if t is None else trace["steps"][t]
    state = trace["initial"]["state"] if step is None else step["state"]
    n_q = len(state["m"])
    last = t is not None and t == len(trace["steps"]) - 1
    pairs = [] if step is None else step["on_chip"]
    return {
        "order": order,
        "step": 0 if t is None else t + 1,
        "steps": len(trace["steps"]),
        "tile": None if step is None else [step["query_block"], step["key_block"]],
        "on_chip": [[a, b] for a, b in pairs],
        "m": [_json_float(x) for x in state["m"]],
        "l": [float(x) for x in state["l"]],
        "acc": [[float(x) for x in row] for row in state["acc"]],
        "rescale": [float(factors[r]) if r in factors else None for r in range(n_q)],
        "output": [
            [float(x) for x in outputs[r]] if r in outputs else None for r in range(n_q)
        ],
        "max_abs_diff": trace["max_abs_diff"] if last else None,
    }


def stepper_json(data=None):
    """The data as compact, key-sorted JSON that is safe inside ``<script>``."""
    text = json.dumps(
        data or stepper_data(),
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    )
    return text.replace("</", "<\\/")


def state_json(state):
    """One state as the root's ``data-state`` carries it."""
    return json.dumps(state, sort_keys=True, separators=(",", ":"), allow_nan=False)


# -- the markup -----------------------------------------------------------------------
#: The drawing's size, and the memory strip's boxes: width, height, gaps.
WIDTH, BOX_W, BOX_H, BOX_GAP, GROUP_GAP, LEFT = 344, 22, 18, 3, 12, 44
HBM_Y, SRAM_Y = 15, 61
#: The score grid: cell size, gaps between blocks, top edge.
CELL_W, CELL_H, BLOCK_GAP, GRID_Y = 23, 17, 6, 112


def _n(x):
    return f"{x:g}"


def _arrow(x, *, down):
    """An arrow between an HBM box and its on-chip copy, centred on ``x``."""
    top, bottom = HBM_Y + BOX_H + 2, SRAM_Y - 2
    if down:
        return f"M{_n(x - 1.5)} {top}V{bottom - 6}h-3l4.5 6 4.5-6h-3V{top}z"
    return f"M{_n(x - 1.5)} {bottom}V{top + 6}h-3l4.5-6 4.5 6h-3V{bottom}z"


def _memory_svg(data, view, order):
    parts = [
        f'<rect class="os-panel" x="0.5" y="0.5" width="{WIDTH - 1}" '
        'height="38" rx="5"/>',
        f'<rect class="os-panel os-sram" x="0.5" y="{SRAM_Y - 4.5}" '
        f'width="{WIDTH - 1}" height="{BOX_H + 8}" rx="5"/>',
        '<text class="os-level" x="6" y="28">HBM</text>',
        f'<text class="os-level" x="6" y="{SRAM_Y + 13}">SRAM</text>',
    ]
    x = LEFT
    flags = iter(view["columns"])
    for group in GROUPS:
        names = data["groups"][group]
        span = len(names) * BOX_W + (len(names) - 1) * BOX_GAP
        label = data["out_label"][order] if group == "O" else group
        cls = ' class="os-out-label"' if group == "O" else ""
        parts.append(
            f'<text{cls} x="{_n(x + span / 2)}" y="11" text-anchor="middle">'
            f"{html.escape(label)}</text>"
        )
        for name in names:
            f = next(flags)
            cls = "os-col" + "".join(
                f" os-{word}"
                for flag, word in zip("crw", ("chip", "read", "write"), strict=True)
                if flag in f
            )
            cx = x + BOX_W / 2
            parts.append(
                f'<g class="{cls}">'
                f'<rect class="os-hbm" x="{_n(x)}" y="{HBM_Y}" width="{BOX_W}" '
                f'height="{BOX_H}"/>'
                f'<text x="{_n(cx)}" y="{HBM_Y + 13}" text-anchor="middle">'
                f"{name}</text>"
                f'<path class="os-down" d="{_arrow(cx - 5, down=True)}"/>'
                f'<path class="os-up" d="{_arrow(cx + 5, down=False)}"/>'
                f'<rect class="os-on" x="{_n(x)}" y="{SRAM_Y}" width="{BOX_W}" '
                f'height="{BOX_H}"/>'
                f'<text class="os-on-name" x="{_n(cx)}" y="{SRAM_Y + 13}" '
                f'text-anchor="middle">{name}</text></g>'
            )
            x += BOX_W + BOX_GAP
        x += GROUP_GAP - BOX_GAP
    return "".join(parts)


def _grid_x(c, block_cols):
    return LEFT + c * CELL_W + (c // block_cols) * BLOCK_GAP


def _grid_y(r, block_rows):
    return GRID_Y + r * CELL_H + (r // block_rows) * 4


def _grid_svg(data, view):
    block_rows = data["query_blocks"][0][1] + 1
    block_cols = data["key_blocks"][0][1] + 1
    parts = [
        f'<text class="os-level" x="6" y="{GRID_Y - 8}">S</text>',
    ]
    for j, (c0, c1) in enumerate(data["key_blocks"]):
        x0, x1 = _grid_x(c0, block_cols), _grid_x(c1, block_cols) + CELL_W
        parts.append(
            f'<text x="{_n((x0 + x1) / 2)}" y="{GRID_Y - 8}" text-anchor="middle">'
            f"{data['groups']['K'][j]}: {_span(c0, c1, 'k')}</text>"
        )
    for i, (r0, r1) in enumerate(data["query_blocks"]):
        y0, y1 = _grid_y(r0, block_rows), _grid_y(r1, block_rows) + CELL_H
        parts.append(
            f'<text x="6" y="{_n((y0 + y1) / 2 + 3.5)}">{data["groups"]["Q"][i]}</text>'
        )
        for j, (c0, c1) in enumerate(data["key_blocks"]):
            x0, x1 = _grid_x(c0, block_cols), _grid_x(c1, block_cols) + CELL_W
            state = view["tiles"][i * len(data["key_blocks"]) + j]
            cls = "os-tile" + (f" os-{state}" if state else "")
            parts.append(
                f'<rect class="{cls}" x="{_n(x0 - 1.5)}" y="{_n(y0 - 1.5)}" '
                f'width="{_n(x1 - x0 + 3)}" height="{_n(y1 - y0 + 3)}" rx="3"/>'
            )
    marked = set(view["max_cells"])
    for r, row in enumerate(data["scores"]):
        y = _grid_y(r, block_rows)
        parts.append(
            f'<text x="{LEFT - 6}" y="{_n(y + 12.5)}" text-anchor="end">'
            f"{data['queries'][r]}</text>"
        )
        for c, label in enumerate(row):
            cls = "os-s os-max" if r * data["n_keys"] + c in marked else "os-s"
            parts.append(
                f'<text class="{cls}" x="{_n(_grid_x(c, block_cols) + CELL_W / 2)}" '
                f'y="{_n(y + 12.5)}" text-anchor="middle">{label}</text>'
            )
    return "".join(parts)


def _svg(data, view, order):
    height = _grid_y(len(data["queries"]) - 1, data["query_blocks"][0][1] + 1)
    height += CELL_H + 4
    return Markup(
        f'<svg class="os-svg" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{html.escape(view["svg_label"], quote=True)}">'
        f"{_memory_svg(data, view, order)}{_grid_svg(data, view)}</svg>"
    )


def _table(data, view):
    head = [
        "query",
        "m",
        Markup('e<sup class="os-sup">m<sub>old</sub> − m<sub>new</sub></sup>'),
        "ℓ",
        "a",
        "O = a/ℓ",
    ]
    rows = []
    for r, name in enumerate(data["queries"]):
        flag = view["row_flags"][r]
        rows.append(
            tag(
                "tr",
                {"class": f"os-{flag}" if flag else None},
                tag("th", {"scope": "row"}, name),
                *(tag("td", {}, cell) for cell in view["rows"][r]),
            )
        )
    return tag(
        "div",
        {
            "class": "os-table",
            "tabindex": "0",
            "role": "group",
            "aria-label": "Running state of each query",
        },
        tag(
            "table",
            {},
            tag(
                "caption",
                {},
                "Each query’s running maximum m, the factor applied at this step, "
                "the sum ℓ and the accumulator a.",
            ),
            tag(
                "thead",
                {},
                tag("tr", {}, *(tag("th", {"scope": "col"}, h) for h in head)),
            ),
            tag("tbody", {}, *rows),
        ),
    )


LEGEND = Markup(
    '<p class="os-legend"><span class="os-key os-key-chip" aria-hidden="true"></span>'
    'on chip <span class="os-arrow-read" aria-hidden="true">↓</span> read from HBM '
    '<span class="os-arrow-write" aria-hidden="true">↑</span> written to HBM '
    '<span class="os-key os-key-now" aria-hidden="true"></span>this tile · '
    "<u>underlined</u>: each query’s running maximum m</p>"
)


def figure_html(data, uid="os0"):
    """The figure in its starting state, as the script will find it."""
    order = data["default"]["order"]
    view = data["orders"][order]["steps"][data["default"]["step"]]
    options = []
    for value, label in ORDER_LABELS.items():
        ident = f"{uid}-order-{value}"
        options.append(
            tag(
                "span",
                {"class": "os-option"},
                Markup(
                    f'<input type="radio" name="{uid}-order" id="{ident}" '
                    f'value="{value}"{" checked" if value == order else ""}>'
                ),
                tag("label", {"for": ident}, label),
            )
        )
    last = len(data["orders"][order]["steps"]) - 1
    step = data["default"]["step"]
    nav = tag(
        "div",
        {"class": "os-nav"},
        tag(
            "button",
            {
                "type": "button",
                "class": "os-back",
                "aria-label": "Back one tile",
                "aria-disabled": "true" if step == 0 else None,
            },
            "◀ Back",
        ),
        tag(
            "p",
            {"class": "os-title"},
            tag("strong", {"class": "os-count"}, view["count"]),
            tag("span", {"class": "os-name"}, view["title"]),
        ),
        tag(
            "button",
            {
                "type": "button",
                "class": "os-next",
                "aria-label": "Next tile",
                "aria-disabled": "true" if step == last else None,
            },
            "Next ▶",
        ),
    )
    controls = tag(
        "div",
        {"class": "os-controls"},
        tag(
            "fieldset",
            {"class": "os-order"},
            tag("legend", {}, "Loop order"),
            *options,
        ),
        nav,
    )
    return Markup(
        controls
        + _svg(data, view, order)
        + LEGEND
        + tag("p", {"class": "os-memory"}, view["memory"])
        + _table(data, view)
        + tag("p", {"class": "os-live", "aria-live": "polite"}, view["summary"])
        + tag("p", {"class": "os-result"}, view["result"])
    )


def root_html(data=None):
    """The figure's root element: its data, and the figure in its first state."""
    data = data or stepper_data()
    start = data["orders"][data["default"]["order"]]["steps"][data["default"]["step"]]
    label = "The online softmax, tile by tile, in either loop order"
    return (
        f'<div class="os-fig" data-figure="{FIGURE_ID}" role="group" '
        f'aria-label="{label}" data-state="{html.escape(state_json(start["state"]))}">'
        '<script type="application/json" class="os-data">'
        f"{stepper_json(data)}</script>{figure_html(data)}</div>"
    )


def root(data=None):
    """The root element for display in an executed page."""
    return HTML(root_html(data))


def fallback_markdown(order="flash2"):
    """Every step of one loop order as a Markdown table, for readers without scripts.

    One row per query of each tile: its maximum before and after the tile,
    the factor applied, and its sum and accumulator after; then the outputs
    against dense attention's.

    Examples
    --------
    >>> print(fallback_markdown().splitlines()[2])
    | Q₁ K₁ | q0 | −∞ → 2.5 | 0 | 1.260 | [−0.403, 1.747] |
    """
    shape = flash.TRACE_SHAPE
    trace = flash.tiled_forward_trace(
        *flash.trace_problem(), shape["block_rows"], shape["block_cols"], order=order
    )
    rows = []
    for step in trace["steps"]:
        first, _ = step["queries"]
        tile = (
            f"{tile_name('Q', step['query_block'])} {tile_name('K', step['key_block'])}"
        )
        for offset, before in enumerate(step["max_before"]):
            rows.append(
                [
                    tile if offset == 0 else "",
                    f"q{first + offset}",
                    f"{score_label(before)} → {score_label(step['max_after'][offset])}",
                    factor_label(step["rescale"][offset]),
                    _ln_label(step["sum"][offset]),
                    _vec(step["acc"][offset]),
                ]
            )
    table = markdown_table(
        ["tile", "query", "m", "e^(m_old − m_new)", "ℓ", "a"],
        rows,
        align=[":--", ":--", "--:", "--:", "--:", "--:"],
    )
    names = [f"q{r}" for r in range(len(trace["output"]))]
    result = _result(trace, len(trace["steps"]) - 1, names)
    return f"{table}\n\n{result}"
