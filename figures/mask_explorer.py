"""The mask explorer: the masks page's figure, its data and its markup.

A reader composes ``sdpa_ref.attention``'s mask options (``is_causal``,
``align``, ``window``, ``sink_tokens``, ``chunk``) for ``n_q`` queries and
``n_k`` keys, and sees the grid of allowed (query, key) pairs. Unlike the
other figures, the browser computes this one: its script evaluates the rules
of :mod:`sdpa_ref.mods` (``sliding_window`` and ``chunked``, aligned by
``align_offset``), a few comparisons per cell, because the controls reach
nearly a hundred million states. The tests compare it with
``sdpa_ref.attention`` itself on thousands of random states.

What the script cannot derive is written here, at build time, into the
page's JSON: the limits of the controls, the starting state, and the
messages ``sdpa_ref`` raises for an invalid combination. Each kind of
message is captured by calling ``sdpa_ref`` with one invalid combination of
that kind, then turned into a template whose blanks the script fills
(:func:`error_templates`); the tests check the filled templates against
every invalid combination the controls reach.
The figure is also drawn here, in its starting state, so it takes its place
before any script runs; the no-JavaScript fallback draws the two causal
alignments the page explains.
"""

from __future__ import annotations

import html
import json

import numpy as np
from IPython.display import HTML

import sdpa_ref

from .widget import Markup, tag

FIGURE_ID = "mask-explorer"
#: The largest n_q, n_k, window bound, sink count and chunk the controls offer.
LIMIT = 16
#: The starting state: three new tokens after three cached ones, decoding.
DEFAULT = {
    "n_q": 3,
    "n_k": 6,
    "is_causal": True,
    "align": "bottom_right",
    "window": None,
    "sink_tokens": 0,
    "chunk": None,
}
OPTION_KEYS = ("is_causal", "align", "window", "sink_tokens", "chunk")
#: Where the page defines the empty-row conventions.
EMPTY_ROWS_LINK = "#empty-rows"
#: The notes beside the calls and under the grid; {n_q} and {n_k} are filled
#: in by the script. What FlashAttention offers is as the flash and testing
#: pages say (sdpa_ref.kernels.OPTION_NAMES).
TEXTS = {
    "sdpa": "q has n_q rows; k and v have n_k rows.",
    "sdpa_raises": "This call raises the ValueError shown with the grid.",
    "raises": "sdpa_ref raises ValueError: ",
    "refused": "sdpa_ref refuses these options: there is no mask to show or translate.",
    "flash_layout": (
        "q, k, v as (batch, seqlen, nheads, headdim); −1 is an unbounded side, "
        "as attention_ref and FlashAttention-3 read window_size."
    ),
    # FlashAttention-2's mha_fwd (csrc/flash_attn/flash_api.cpp at v2.8.3)
    # sets a bound of seqlen_k or more to -1, then -1 to seqlen_k when the
    # other side is bounded; the script shows this note only in the states
    # where that gives another mask (its fa2 function).
    "flash_fa2": (
        "FlashAttention-2's kernel reads this window_size differently: it "
        "replaces a bound of {n_k} or more by −1, and −1 by {n_k} when the other "
        "side is bounded, and here that allows other pairs than the grid shows."
    ),
    "pairs": "Allowed pairs of {n_q} queries and {n_k} keys: ",
    "flash_chunk": (
        "attention_chunk is FlashAttention-3's; FlashAttention-2's flash_attn_func "
        "has none."
    ),
    "flash_sink": (
        "No flash_attn_func equivalent: sink_token_length exists only in "
        "FlashAttention's test reference, attention_ref."
    ),
    "flash_top_left": (
        "No flash_attn_func equivalent: FlashAttention aligns every mask to the "
        "bottom right, and no window_size shifted by n_k − n_q gives this "
        "top-left mask (a side would need a negative bound, or chunks would "
        "shift)."
    ),
    "flash_shifted": (
        "FlashAttention aligns to the bottom right, so this top-left mask is its "
        "window shifted by n_k − n_q = {n_k} − {n_q}."
    ),
    "flex_none": "Every pair is allowed: flex_attention needs no mask_mod.",
    "flex_use": (
        "For flex_attention(q, k, v, block_mask=create_block_mask(mask_mod, None, "
        "None, {n_q}, {n_k}))."
    ),
    "empty": [
        " no key. Such a row returns, by the ",
        "conventions below",
        ": zero, an output of 0 (FlashAttention); nan, NaN; uniform, the mean of "
        "all {n_k} values; unmask, attention over all {n_k} keys. sdpa_ref "
        'raises unless given empty_rows="zero" or "nan".',
    ],
}

#: Probe values for capturing sdpa_ref's messages: chosen so that each value's
#: text occurs in the message only where the value is printed.
_PROBES = {
    "causal_right": {"is_causal": True, "window": (11, 13)},
    "sink_without_left": {"sink_tokens": 7, "window": (None, 9)},
}


# -- the mask, as sdpa_ref computes it --------------------------------------------
def options(state):
    """``sdpa_ref.attention``'s keyword options for a state (defaults left out).

    Examples
    --------
    >>> options({**DEFAULT, "window": [2, None]})
    {'is_causal': True, 'align': 'bottom_right', 'window': (2, None)}
    """
    out = {}
    if state["is_causal"]:
        out["is_causal"] = True
    if state["align"] != "top_left":
        out["align"] = state["align"]
    if state["window"] is not None:
        out["window"] = tuple(state["window"])
    if state["sink_tokens"]:
        out["sink_tokens"] = state["sink_tokens"]
    if state["chunk"] is not None:
        out["chunk"] = state["chunk"]
    return out


def allowed_mask(state):
    """The (n_q, n_k) pairs ``sdpa_ref.attention`` lets attend, or its ValueError.

    With equal scores each allowed key gets weight 1/count > 0 and each
    forbidden one exactly 0, so the weights show the mask that attention
    applied, through every one of its code paths.

    Examples
    --------
    >>> allowed_mask(DEFAULT).astype(int)
    array([[1, 1, 1, 1, 0, 0],
           [1, 1, 1, 1, 1, 0],
           [1, 1, 1, 1, 1, 1]])
    """
    q = np.zeros((state["n_q"], 1))
    k, v = np.zeros((state["n_k"], 1)), np.ones((state["n_k"], 1))
    _, weights = sdpa_ref.attention(
        q, k, v, return_weights=True, empty_rows="zero", **options(state)
    )
    return weights > 0


def error_text(state):
    """The message sdpa_ref raises for ``state``'s options, or None if valid.

    Examples
    --------
    >>> print(error_text({**DEFAULT, "sink_tokens": 1}))
    sink_tokens=1 exempts keys from the window's left bound, but there is none
    (window = None); pass window=(left, right)
    """
    try:
        allowed_mask(state)
    except ValueError as exc:
        return str(exc)
    return None


# -- the messages, captured from sdpa_ref ---------------------------------------------
def _py(value):
    """A value as Python's repr prints it inside sdpa_ref's messages."""
    if isinstance(value, tuple | list):
        return f"({', '.join(_py(v) for v in value)})"
    return repr(value)


def error_templates():
    """sdpa_ref's messages for the two invalid combinations, with blanks.

    Each is captured by calling ``sdpa_ref.attention`` with a probe state;
    the probe's values become the blanks ``{window}``, ``{left}`` and
    ``{sink_tokens}``, which :func:`fill` (and the page's script) fill in
    the way Python prints them.

    Examples
    --------
    >>> print(error_templates()["sink_without_left"])
    sink_tokens={sink_tokens} exempts keys from the window's left bound, but there
    is none (window = {window}); pass window=(left, right)
    """
    templates = {}
    for name, probe in _PROBES.items():
        state = {**DEFAULT, "is_causal": False, **probe}
        message = error_text(state)
        template = message.replace(_py(probe["window"]), "{window}", 1)
        if name == "causal_right":
            template = template.replace(
                f"window=({_py(probe['window'][0])}, ", "window=({left}, ", 1
            )
        else:
            template = template.replace(
                f"sink_tokens={probe['sink_tokens']}", "sink_tokens={sink_tokens}", 1
            )
        if fill(template, state) != message:
            raise ValueError(f"sdpa_ref's message changed shape: {message!r}")
        templates[name] = template
    return templates


def fill(template, state):
    """A template of :func:`error_templates` filled for ``state``."""
    window = state["window"]
    return (
        template.replace("{window}", _py(None if window is None else tuple(window)))
        .replace("{left}", _py(None if window is None else window[0]))
        .replace("{sink_tokens}", str(state["sink_tokens"]))
    )


# -- the data and the markup -------------------------------------------------------
def explorer_data():
    """What the script needs and cannot derive, as JSON-ready Python data.

    Examples
    --------
    >>> data = explorer_data()
    >>> data["limit"], sorted(data["errors"])
    (16, ['causal_right', 'sink_without_left'])
    """
    return {
        "limit": LIMIT,
        "default": dict(DEFAULT),
        "errors": error_templates(),
        "empty_rows_link": EMPTY_ROWS_LINK,
        "texts": TEXTS,
    }


def state_of(state):
    """A state as the root's ``data-state`` carries it: the options and the grid."""
    out = {key: state[key] for key in ("n_q", "n_k", *OPTION_KEYS)}
    out["window"] = None if state["window"] is None else list(state["window"])
    message = error_text(state)
    if message is None:
        out["allowed"] = allowed_mask(state).tolist()
    else:
        out["error"] = message
    return out


def state_json(state):
    """:func:`state_of` as compact JSON."""
    return json.dumps(state_of(state), separators=(",", ":"), allow_nan=False)


def data_json(data=None):
    """The data as compact, key-sorted JSON that is safe inside ``<script>``."""
    text = json.dumps(
        data or explorer_data(), sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    return text.replace("</", "<\\/")


#: The grid's cell pitch and margins, in SVG units, and its scale on screen
#: (the script uses the same).
CELL, GAP, MARGIN_LEFT, MARGIN_TOP, SCALE = 18, 2, 28, 16, 1.3


def grid_svg(allowed, label):
    """The grid of allowed pairs as an SVG: rows are queries, columns keys.

    Examples
    --------
    >>> svg = grid_svg(np.array([[True, False]]), "one query")
    >>> svg.count('class="me-on"'), svg.count('class="me-off"')
    (1, 1)
    """
    allowed = np.asarray(allowed, dtype=bool)
    n_q, n_k = allowed.shape
    pitch = CELL + GAP
    width, height = MARGIN_LEFT + n_k * pitch, MARGIN_TOP + n_q * pitch
    empty = ~allowed.any(axis=1)
    parts = [
        f'<text x="{MARGIN_LEFT + j * pitch + CELL / 2:g}" y="11" '
        f'text-anchor="middle">k{j}</text>'
        for j in range(n_k)
    ]
    for i in range(n_q):
        y = MARGIN_TOP + i * pitch
        cls = ' class="me-empty"' if empty[i] else ""
        parts.append(
            f'<text{cls} x="{MARGIN_LEFT - 4}" y="{y + 13}" '
            f'text-anchor="end">q{i}</text>'
        )
        for j in range(n_k):
            on = "me-on" if allowed[i, j] else "me-off"
            parts.append(
                f'<rect class="{on}" x="{MARGIN_LEFT + j * pitch}" y="{y}" '
                f'width="{CELL}" height="{CELL}" rx="2"/>'
            )
    return Markup(
        f'<svg class="me-grid" viewBox="0 0 {width} {height}" '
        f'width="{width * SCALE:g}" height="{height * SCALE:g}" role="img" '
        f'aria-label="{html.escape(label, quote=True)}">'
        f"{''.join(parts)}</svg>"
    )


def grid_label(state, allowed):
    """The grid in words, for a screen reader: each query's allowed keys."""
    rows = []
    for i, row in enumerate(np.asarray(allowed, dtype=bool)):
        keys = np.flatnonzero(row)
        if keys.size == 0:
            rows.append(f"q{i} none")
        elif keys.size == keys[-1] - keys[0] + 1:
            span = f"k{keys[0]}" + (f"–k{keys[-1]}" if keys.size > 1 else "")
            rows.append(f"q{i} {span}")
        else:
            rows.append(f"q{i} " + " ".join(f"k{j}" for j in keys))
    return (
        f"Allowed pairs of {state['n_q']} queries and {state['n_k']} keys: "
        + "; ".join(rows)
    )


def _number(uid, name, label, value, low):
    ident = f"{uid}-{name}"
    return tag(
        "span",
        {"class": "me-field"},
        tag("label", {"for": ident}, label),
        Markup(
            f'<input type="number" id="{ident}" name="{name}" min="{low}" '
            f'max="{LIMIT}" step="1" value="{value}" inputmode="numeric">'
        ),
    )


def _select(uid, name, label, value, choices):
    ident = f"{uid}-{name}"
    opts = "".join(
        f'<option value="{v}"{" selected" if v == value else ""}>{text}</option>'
        for v, text in choices
    )
    return tag(
        "span",
        {"class": "me-field"},
        tag("label", {"for": ident}, label),
        Markup(f'<select id="{ident}" name="{name}">{opts}</select>'),
    )


def _check(uid, name, label, checked):
    ident = f"{uid}-{name}"
    return tag(
        "span",
        {"class": "me-field me-check"},
        Markup(
            f'<input type="checkbox" id="{ident}" name="{name}"'
            f"{' checked' if checked else ''}>"
        ),
        tag("label", {"for": ident}, label),
    )


def controls_html(state, uid="me0"):
    """The form: every option as a real control, in sdpa_ref's names."""
    bound = [("none", "unbounded")] + [(str(n), str(n)) for n in range(LIMIT + 1)]
    window = state["window"] or [None, None]
    sides = [
        _select(
            uid,
            side,
            label,
            "none" if value is None else str(value),
            bound,
        )
        for side, label, value in (
            ("left", "left", window[0]),
            ("right", "right", window[1]),
        )
    ]
    aligns = []
    for value, label in (("top_left", "top-left"), ("bottom_right", "bottom-right")):
        ident = f"{uid}-align-{value}"
        aligns.append(
            tag(
                "span",
                {"class": "me-field me-check"},
                Markup(
                    f'<input type="radio" id="{ident}" name="align" value="{value}"'
                    f"{' checked' if state['align'] == value else ''}>"
                ),
                tag("label", {"for": ident}, label),
            )
        )
    chunks = [("none", "none")] + [(str(n), str(n)) for n in range(1, LIMIT + 1)]
    return tag(
        "form",
        {"class": "me-form", "aria-label": "Mask options"},
        tag(
            "fieldset",
            {},
            tag("legend", {}, "Sizes"),
            _number(uid, "n_q", "n_q", state["n_q"], 1),
            _number(uid, "n_k", "n_k", state["n_k"], 1),
        ),
        tag(
            "fieldset",
            {},
            tag("legend", {}, "Causal"),
            _check(uid, "is_causal", "is_causal", state["is_causal"]),
        ),
        tag("fieldset", {}, tag("legend", {}, "align"), *aligns),
        tag(
            "fieldset",
            {},
            tag("legend", {}, "window"),
            _check(uid, "window", "on", state["window"] is not None),
            *sides,
        ),
        tag(
            "fieldset",
            {},
            tag("legend", {}, "More"),
            _number(uid, "sink_tokens", "sink_tokens", state["sink_tokens"], 0),
            _select(
                uid,
                "chunk",
                "chunk",
                "none" if state["chunk"] is None else str(state["chunk"]),
                chunks,
            ),
        ),
    )


def root_html(data=None):
    """The figure's root: its data, the form, and the grid in its first state.

    The calls and the notes beside the grid are written by the script, which
    runs before the first paint (the root is hidden without scripts).
    """
    data = data or explorer_data()
    state = data["default"]
    allowed = allowed_mask(state)
    label = "Mask explorer: compose the mask options and see the allowed pairs"
    calls = tag(
        "div",
        {"class": "me-calls"},
        *(
            tag(
                "div",
                {"class": "me-call"},
                tag("p", {"class": "me-call-name"}, name),
                Markup(
                    f'<div class="highlight"><pre class="me-{key}"></pre></div>'
                    f'<p class="me-note me-{key}-note"></p>'
                ),
            )
            for key, name in (
                ("sdpa", "sdpa_ref"),
                ("flash", "FlashAttention"),
                ("flex", "FlexAttention"),
            )
        ),
    )
    return (
        f'<div class="me-fig" data-figure="{FIGURE_ID}" role="group" '
        f'aria-label="{label}" data-state="{html.escape(state_json(state))}">'
        '<script type="application/json" class="me-data">'
        f"{data_json(data)}</script>"
        + controls_html(state)
        + tag(
            "div",
            {"class": "me-body"},
            tag(
                "div",
                {"class": "me-left"},
                grid_svg(allowed, grid_label(state, allowed)),
                tag("p", {"class": "me-status", "aria-live": "polite"}, ""),
            ),
            calls,
        )
        + "</div>"
    )


def root(data=None):
    """The root element for display in an executed page."""
    return HTML(root_html(data))


def fallback_html():
    """Without scripts: the page's two causal alignments, drawn from sdpa_ref."""
    figures = []
    for align, name in (("top_left", "top-left"), ("bottom_right", "bottom-right")):
        state = {**DEFAULT, "align": align}
        allowed = allowed_mask(state)
        figures.append(
            tag(
                "figure",
                {"class": "me-static"},
                grid_svg(allowed, grid_label(state, allowed)),
                tag(
                    "figcaption",
                    {},
                    f'is_causal=True, align="{align}": {name}, '
                    f"{state['n_q']} queries by {state['n_k']} keys",
                ),
            )
        )
    return Markup(f'<div class="me-statics">{"".join(figures)}</div>')


def fallback():
    """The fallback for display in an executed page."""
    return HTML(fallback_html())
