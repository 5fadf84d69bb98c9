"""Pieces that the oracle's Hypothesis strategies share.

Each piece draws in a fixed order, so a strategy built from them generates the
same examples, case for case, as one that writes the same draws out in full.
"""

import numpy as np
from hypothesis import strategies as st


def gqa_sizes(draw, *, b, h_kv, groups, n_q, n_k, d):
    """A seeded generator, then b, h_kv, h, n_q, n_k, d.

    Each size is drawn from 1 up to the maximum given for it; h is h_kv times a
    group size drawn from 1 up to ``groups``.
    """
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    b, h_kv = draw(st.integers(1, b)), draw(st.integers(1, h_kv))
    h = h_kv * draw(st.integers(1, groups))
    n_q, n_k, d = (draw(st.integers(1, n)) for n in (n_q, n_k, d))
    return rng, (b, h_kv, h, n_q, n_k, d)


def optional(draw, choices):
    """The named choices, each in turn taken or not on a drawn coin.

    A taken choice that is a strategy gives a value drawn from it; any other
    is called for its value (a generator's draw, say).
    """
    taken = {}
    for name, choice in choices.items():
        if draw(st.booleans()):
            is_strategy = isinstance(choice, st.SearchStrategy)
            taken[name] = draw(choice) if is_strategy else choice()
    return taken


def sdpa_options(draw, rng, sizes, *, softcap_top, scales=None):
    """sdpa_ref options with empty_rows='zero', drawn from every family.

    An alignment; a window (with sink tokens when its left side is bounded)
    or is_causal; then, each on a coin, a chunk, a soft-cap from 0.5 to
    ``softcap_top``, a scale drawn from ``scales`` (when given), sink logits
    and per-sequence query and key lengths.
    """
    b, _, h, n_q, n_k, _ = sizes
    options = {
        "align": draw(st.sampled_from(["top_left", "bottom_right"])),
        "empty_rows": "zero",
    }
    if draw(st.booleans()):
        left = draw(st.one_of(st.none(), st.integers(0, 6)))
        options["window"] = (left, draw(st.one_of(st.none(), st.integers(0, 6))))
        if left is not None:
            options["sink_tokens"] = draw(st.integers(0, 3))
    else:
        options["is_causal"] = draw(st.booleans())
    choices = {"chunk": st.integers(1, 5), "softcap": st.floats(0.5, softcap_top)}
    if scales is not None:
        choices["scale"] = scales
    choices["sink_logits"] = lambda: rng.normal(size=h)
    choices["q_lengths"] = lambda: rng.integers(0, n_q + 1, size=b)
    choices["k_lengths"] = lambda: rng.integers(0, n_k + 1, size=b)
    return options | optional(draw, choices)


def gaussian_inputs(rng, q_shape, k_shape):
    """q and k with standard deviation 2, and v one wider than k."""
    q = rng.normal(size=q_shape) * 2
    k = rng.normal(size=k_shape) * 2
    v = rng.normal(size=(*k_shape[:-1], k_shape[-1] + 1))
    return q, k, v
