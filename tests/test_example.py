"""The authored vectors behind the worked example and the figure."""

import numpy as np
import pytest

from sdpa_ref import attention, entropy, example, softmax


def test_widths_include_4_and_two_larger_up_to_256():
    assert 4 in example.WIDTHS
    assert len([w for w in example.WIDTHS if w > 4]) >= 2
    assert max(example.WIDTHS) >= 256


@pytest.mark.parametrize("width", example.WIDTHS)
def test_shapes(width):
    q, k, v = example.vectors(width)
    assert q.shape == (len(example.QUERY_NAMES), width)
    assert q.shape[0] >= 3
    assert k.shape == (len(example.KEY_NAMES), width)
    assert v.shape == (len(example.KEY_NAMES), 2)


def test_vectors_are_copies():
    q, _, _ = example.vectors(4)
    q[:] = 0
    assert example.raw_scores(4)[0, 0] == 4


@pytest.mark.parametrize("width", example.WIDTHS)
def test_raw_scores_grow_with_the_width(width):
    np.testing.assert_array_equal(
        example.raw_scores(width), example.raw_scores(4) * width / 4
    )


def test_each_query_teaches_its_case():
    raw = example.raw_scores(4)
    np.testing.assert_array_equal(raw[0], [4, 0, 2, -4])  # one dominant key
    np.testing.assert_array_equal(raw[1], [3, 1, 2, 2])  # K0 just ahead of a tie
    np.testing.assert_array_equal(raw[2], [-3, -1, 1, 3])  # evenly spaced
    np.testing.assert_array_equal(raw[3], [1, 1, 1, 1])  # all equal
    # All equal: uniform weights, ln 4 nats, at every width and scale.
    for width in example.WIDTHS:
        q, k, v = example.vectors(width)
        for scale in (1.0, None):
            _, w = attention(q[3:], k, v, scale=scale, return_weights=True)
            assert float(entropy(w[0])) == pytest.approx(np.log(4))


def test_near_tie_is_where_scaling_keeps_the_most_entropy():
    q, k, v = example.vectors(64)
    scaled = entropy(attention(q, k, v, return_weights=True)[1])
    raw = entropy(attention(q, k, v, scale=1.0, return_weights=True)[1])
    gains = (scaled - raw)[:3]
    assert gains.argmax() == 1
    assert float(entropy(softmax([3, 1, 2, 2]))) > float(
        entropy(softmax([4, 0, 2, -4]))
    )
