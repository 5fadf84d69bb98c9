"""The interactive figure's data: every state, straight from sdpa_ref."""

import json
from pathlib import Path

import pytest

import figures
from figures import widget
from sdpa_ref import example

STATIC = Path(figures.__file__).parent / "static"


@pytest.fixture(scope="module")
def data():
    return widget.widget_data()


def test_one_state_per_query_and_width(data):
    assert len(data["states"]) == len(example.QUERY_NAMES) * len(example.WIDTHS)
    assert data["widths"] == list(example.WIDTHS)
    assert data["queries"] == list(example.QUERY_NAMES)


@pytest.mark.parametrize("width", example.WIDTHS)
@pytest.mark.parametrize("query", range(len(example.QUERY_NAMES)))
def test_state_matches_sdpa_ref(data, query, width):
    c = example.compare(query, width)
    state = data["states"][f"{query}/{width}"]
    assert state["raw"]["weights"] == c.raw_weights.tolist()
    assert state["scaled"]["weights"] == c.scaled_weights.tolist()
    assert state["raw"]["weight_labels"] == [f"{w:.3f}" for w in c.raw_weights]
    assert state["scaled"]["entropy"] == f"{c.scaled_entropy:.3f}"
    assert state["raw"]["output"] == c.raw_output.tolist()
    assert f"√{width}" in state["summary"]


def test_vectors_are_their_width_4_pattern_and_its_repeat_count(data):
    assert data["patterns"]["queries"][0] == "2 2 −1 3"
    assert len(data["patterns"]["keys"]) == 4
    assert data["repeats"] == {str(w): w // 4 for w in example.WIDTHS}
    for width in example.WIDTHS:
        q, k, _ = example.vectors(width)
        n = data["repeats"][str(width)]
        for row, pattern in zip(q, data["patterns"]["queries"], strict=True):
            assert widget._text(row) == " ".join([pattern] * n)
        for row, pattern in zip(k, data["patterns"]["keys"], strict=True):
            assert widget._text(row) == " ".join([pattern] * n)


def test_a_vector_that_does_not_repeat_is_refused():
    import numpy as np

    with pytest.raises(ValueError, match="do not repeat"):
        widget._repeats(np.arange(8.0).reshape(1, 8), 4)


def test_colors_are_the_figures_palette(data):
    assert tuple(data["colors"]) == figures.style.KEY_COLORS


def test_json_is_deterministic_and_safe_in_a_script_tag(data):
    text = widget.widget_json(data)
    assert text == widget.widget_json(widget.widget_data())
    assert "</" not in text
    assert json.loads(text.replace("<\\/", "</")) == data


def test_root_carries_the_figure_name_and_its_data():
    html = widget.root_html()
    assert 'data-figure="scaled-vs-unscaled"' in html
    assert '<script type="application/json" class="sdpa-widget-data">' in html


def test_renderer_stays_small():
    # Unminified and commented; the plane's axes and the pattern table took
    # it past 15 KiB. It loads on the landing page only.
    size = sum(p.stat().st_size for p in STATIC.glob("sdpa-widget.*"))
    assert size < 18 * 1024, f"widget JS + CSS is {size} bytes"


def test_renderer_loads_nothing_from_elsewhere():
    for path in STATIC.glob("sdpa-widget.*"):
        text = path.read_text()
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text
        assert "import(" not in text
