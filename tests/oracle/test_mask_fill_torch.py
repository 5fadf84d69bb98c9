"""precision.min_fill_* against what PyTorch does with an added finfo.min mask.

transformers 5.23.0's eager attention adds a mask of 0 and
torch.finfo(dtype).min to the scores in the model's dtype and takes the
softmax in float32; this checks the NumPy model of it against torch 2.13.0.
Skipped where torch does not import, unless REQUIRE_TORCH=1.
"""

import numpy as np
import pytest

from sdpa_ref import precision
from tests.torch_needed import torch  # skips this module without torch

# Needs torch==2.13.0: `pytest -m torch` runs the parity tests alone.
pytestmark = pytest.mark.torch

TYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.mark.parametrize("dtype", list(TYPES))
def test_logits_and_weights_match_torch(dtype):
    rng = np.random.default_rng(4)
    rows = np.concatenate(
        [
            rng.uniform(-15.9, 15.9, (4, 6)),  # stays even
            rng.uniform(-64, 64, (4, 6)),  # mixed
            rng.uniform(-80, -16, (4, 6)),  # all overflow in float16
            np.full((1, 6), 16.0),
            np.full((1, 6), -16.0),
        ]
    )
    kind = TYPES[dtype]
    scores = torch.from_numpy(rows).to(kind)
    mask = torch.full_like(scores, torch.finfo(kind).min)
    logits = scores + mask
    weights = torch.softmax(logits, dim=-1, dtype=torch.float32)
    np.testing.assert_array_equal(
        precision.min_fill_logits(rows, dtype), logits.double().numpy()
    )
    # float32 arithmetic in a different order: equal to float32's rounding.
    np.testing.assert_allclose(
        precision.min_fill_weights(rows, dtype), weights.double().numpy(), rtol=1e-6
    )
    assert np.array_equal(
        np.isnan(precision.min_fill_weights(rows, dtype)), weights.isnan().numpy()
    )
