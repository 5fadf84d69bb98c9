"""sdpa_ref: a small float64 reference for scaled dot-product attention.

Every number on the site is computed here. The package depends on NumPy only,
and is meant to be read: each function is short, checks its input, and has a
worked number in its docstring.
"""

from . import example, flash, masks, mods, precision, testing, training, variants
from .backward import Gradients, attention_backward, tiled_attention_backward
from .core import attention, causal_mask, naive_softmax, softmax, tiled_attention
from .cost import attention_macs, cost_table, kv_cache_bytes, score_bytes
from .random_model import (
    BROKEN_MODELS,
    SEED,
    SIMULATED_WIDTHS,
    dot_product_mean,
    dot_product_std,
    measured_score_std,
    model_sweep,
    sample_dot_products,
    score_std,
    standard_score_row,
)
from .similarity import cosine_similarity, score_from_angle, similarity_parts
from .spread import (
    entropy,
    max_entropy,
    saturation,
    shifted_weights,
    softmax_jacobian,
    softmax_jacobian_norm,
    temperature_sweep,
    weight_ratio,
)
from .steps import attention_steps, overflow_threshold

__all__ = [
    "BROKEN_MODELS",
    "SEED",
    "SIMULATED_WIDTHS",
    "Gradients",
    "attention",
    "attention_backward",
    "attention_macs",
    "attention_steps",
    "causal_mask",
    "cosine_similarity",
    "cost_table",
    "dot_product_mean",
    "dot_product_std",
    "entropy",
    "example",
    "flash",
    "kv_cache_bytes",
    "masks",
    "max_entropy",
    "measured_score_std",
    "model_sweep",
    "mods",
    "naive_softmax",
    "overflow_threshold",
    "precision",
    "sample_dot_products",
    "saturation",
    "score_bytes",
    "score_from_angle",
    "score_std",
    "shifted_weights",
    "similarity_parts",
    "softmax",
    "softmax_jacobian",
    "softmax_jacobian_norm",
    "standard_score_row",
    "temperature_sweep",
    "testing",
    "tiled_attention",
    "tiled_attention_backward",
    "training",
    "variants",
    "weight_ratio",
]

__version__ = "0.1.0"
