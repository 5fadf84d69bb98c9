"""sdpa_ref: a small float64 reference for scaled dot-product attention.

Every number on the site is computed here. The package depends on NumPy only,
and is meant to be read: each function is short, checks its input, and has a
worked number in its docstring.
"""

from . import example
from .core import attention, causal_mask, naive_softmax, softmax, tiled_attention
from .cost import attention_macs, kv_cache_bytes, score_bytes
from .random_model import (
    SEED,
    dot_product_mean,
    dot_product_std,
    measured_score_std,
    sample_dot_products,
    score_std,
)
from .spread import (
    entropy,
    max_entropy,
    saturation,
    softmax_jacobian,
    softmax_jacobian_norm,
)

__all__ = [
    "SEED",
    "attention",
    "attention_macs",
    "causal_mask",
    "dot_product_mean",
    "dot_product_std",
    "entropy",
    "example",
    "kv_cache_bytes",
    "max_entropy",
    "measured_score_std",
    "naive_softmax",
    "sample_dot_products",
    "saturation",
    "score_bytes",
    "score_std",
    "softmax",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "tiled_attention",
]

__version__ = "0.1.0"
