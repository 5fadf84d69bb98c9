"""The one precision registry agrees with NumPy's own description of its types."""

import numpy as np
import pytest

from sdpa_ref import precision, testing
from sdpa_ref._arrays import FORMATS, PRECISIONS


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_a_numpy_format_is_numpy_s(name):
    info = np.finfo(np.dtype(name))
    assert FORMATS[name].bits == info.nmant + 1
    assert FORMATS[name].min_exponent == info.minexp
    assert testing.UNIT_ROUNDOFF[name] == info.eps / 2
    assert precision.smallest_normal(name) == info.smallest_normal


def test_bfloat16_is_float32_cut_to_8_bits():
    assert FORMATS["bfloat16"].bits == 8
    assert FORMATS["bfloat16"].min_exponent == FORMATS["float32"].min_exponent
    assert testing.UNIT_ROUNDOFF["bfloat16"] == 2.0**-8
    assert PRECISIONS == ("float16", "bfloat16", "float32", "float64")


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_the_ulp_is_numpy_s_spacing_normal_and_subnormal(name):
    dtype = np.dtype(name)
    info = np.finfo(dtype)
    x = np.array([1.0, 3.0, 1000.0, info.smallest_normal, info.smallest_subnormal])
    assert np.array_equal(testing._ulp(x, name), np.spacing(x.astype(dtype)))
