"""sdpa_ref: a small float64 reference for scaled dot-product attention.

Every number on the site is computed here. The package depends on NumPy only,
and is meant to be read: each function is short, checks its input, and has a
worked number in its docstring.

The top level is the oracle that kernel developers test against (attention,
dense and tiled, forward and backward, over padded or packed batches and
over a paged KV cache, with :mod:`sdpa_ref.testing` and FlexAttention's
mask and score mods in :mod:`sdpa_ref.mods`) and the core of the text: the softmax, the
causal mask, the worked example, the random model that gives the 1/√d_k and
the spread of the weights that it protects. The site's other computations
live in their subject modules, imported as modules: ``sdpa_ref.cost``,
``sdpa_ref.flash``, ``sdpa_ref.flex``, ``sdpa_ref.masks``, ``sdpa_ref.precision``,
``sdpa_ref.scales``, ``sdpa_ref.similarity``, ``sdpa_ref.steps``,
``sdpa_ref.training`` and ``sdpa_ref.variants``.
"""

# The subject modules are imported so that ``sdpa_ref.cost.cost_table`` works
# after ``import sdpa_ref``; they stay out of __all__.
from . import (  # noqa: F401
    cost,
    example,
    flash,
    flex,
    kvcache,
    masks,
    mods,
    precision,
    random_model,
    scales,
    similarity,
    spread,
    steps,
    testing,
    training,
    variants,
    varlen,
)
from .backward import Gradients, attention_backward, tiled_attention_backward
from .core import attention, causal_mask, softmax, tiled_attention
from .kvcache import attention_with_kvcache

__all__ = [
    "Gradients",
    "attention",
    "attention_backward",
    "attention_with_kvcache",
    "causal_mask",
    "example",
    "mods",
    "random_model",
    "softmax",
    "spread",
    "testing",
    "tiled_attention",
    "tiled_attention_backward",
]

__version__ = "0.1.0"
