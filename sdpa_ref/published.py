"""Every published number the site quotes, each defined once, with its source.

Model configurations, GPU figures, numbers printed in papers and READMEs, and
the defaults of other libraries: each constant below is quoted, not computed,
and :data:`SOURCES` maps its name to the citation key(s) of its source in the
site's bibliography (``docs/references.bib`` and ``docs/bib/*.bib``).

The subject modules that the pages and figures read (:mod:`sdpa_ref.cost`,
:mod:`sdpa_ref.example`, :mod:`sdpa_ref.flash`, :mod:`sdpa_ref.kernels`,
:mod:`sdpa_ref.masks`, :mod:`sdpa_ref.testing`, :mod:`sdpa_ref.training` and
:mod:`sdpa_ref.variants`) take their values from here under the same names,
so ``sdpa_ref.flash.A100_HBM_GB`` is this module's ``A100_HBM_GB``. Each
constant's source is quoted once, in the ``#:`` comment beside its name in
the subject module, which the API pages render. The project's own choices
(seeds, widths, block sizes, thresholds) stay in the modules that make them.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------
# Model configurations.

TRANSFORMER_D_MODEL = 512

TRANSFORMER_HEADS = 8

OLMO_2_7B = {"layers": 32, "heads": 32, "context": 4096}

OLMO_2_7B_HIDDEN = 4096

OLMO_2_7B_KV = {
    "layers": OLMO_2_7B["layers"],
    "kv_heads": OLMO_2_7B["heads"],
    "head_dim": OLMO_2_7B_HIDDEN // OLMO_2_7B["heads"],
}

MISTRAL_7B_KV = {"layers": 32, "kv_heads": 8, "head_dim": 128, "window": 4096}

MISTRAL_7B_WINDOW = MISTRAL_7B_KV["window"]

MODEL_SHAPES = {
    "Llama 2 7B (multi-head)": {
        "layers": 32,
        "q_heads": 32,
        "kv_heads": 32,
        "head_dim": 128,
    },
    "Mistral 7B (grouped-query)": {
        "layers": MISTRAL_7B_KV["layers"],
        "q_heads": 32,
        "kv_heads": MISTRAL_7B_KV["kv_heads"],
        "head_dim": MISTRAL_7B_KV["head_dim"],
    },
    "Falcon 7B (multi-query)": {
        "layers": 32,
        "q_heads": 71,
        "kv_heads": 1,
        "head_dim": 64,
    },
}

GEMMA2_SHAPES = {
    "Gemma 2 2B": {"d_model": 2304, "heads": 8, "kv_heads": 4, "head_width": 256},
    "Gemma 2 9B": {"d_model": 3584, "heads": 16, "kv_heads": 8, "head_width": 256},
    "Gemma 2 27B": {"d_model": 4608, "heads": 32, "kv_heads": 16, "head_width": 128},
}

GEMMA2_ATTN_SOFTCAP = 50.0

GEMMA2_27B_QUERY_PRE_ATTN_SCALAR = 144

# ---------------------------------------------------------------------------
# The A100 GPU.

A100_HBM_GB = (40, 80)
A100_SMS = 108
A100_SRAM_KB = 192
A100_SHARED_MEMORY_MAX_KB = 164
A100_HBM_TBPS = (1.5, 2.0)
A100_MATMUL_TFLOPS = 312
A100_NON_MATMUL_TFLOPS = 19.5

# ---------------------------------------------------------------------------
# The FlashAttention papers, their code and their README.

FLOPS_UTILISATION = {"flash": (25, 40), "flash2": (50, 73)}

FA3_FP8_ERROR_REDUCTION = 2.6

FLASH2_A100_BLOCKS = {
    32: (128, 128),
    64: (128, 128),
    96: (128, 64),
    128: (128, 64),
    192: (128, 64),
    256: (128, 64),
}

FIGURE_2 = {
    "setting": {"seq_len": 1024, "head_dim": 64, "heads": 16, "batch": 64},
    "standard": {"gflops": 66.6, "hbm_gb": 35.3, "runtime_ms": 35.1},
    "flash": {"gflops": 75.2, "hbm_gb": 4.4, "runtime_ms": 11.7},
}

FIGURE_2_ARXIV_V2 = {
    "setting": FIGURE_2["setting"],
    "standard": {"gflops": 66.6, "hbm_gb": 40.3, "runtime_ms": 41.7},
    "flash": {"gflops": 75.2, "hbm_gb": 4.4, "runtime_ms": 7.3},
}

FIGURE_2_RECOUNT_GFLOPS = {"standard": 825, "flash": 963}

CAUSAL_SKIP_SPEEDUP = (1.7, 1.8)

BACKWARD_MATMULS = {"standard": 4, "flash": 5}

PAPER_MAX_MEMORY_SAVING = 20

README_MEMORY_SAVINGS = {2048: 10, 4096: 20}

README_SETTING = {"batch": 8, "head_dim": 64, "heads": 12}

# ---------------------------------------------------------------------------
# Other libraries' defaults and conventions.

SOFTCAP_GRAD_ATOL = 3e-4

EXP_ULPS = 20

TORCH_ASSERT_CLOSE_DEFAULTS = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
}

TUTORIAL_FILL_EXPONENT = 9

TUTORIAL_FILL = -(10.0**TUTORIAL_FILL_EXPONENT)

D2L_FILL_EXPONENT = 6

ADAM = {"beta1": 0.9, "beta2": 0.999, "eps": 1e-8}

# ---------------------------------------------------------------------------

SOURCES = {
    "TRANSFORMER_D_MODEL": ("vaswani2017attention",),
    "TRANSFORMER_HEADS": ("vaswani2017attention",),
    "OLMO_2_7B": ("olmo2_7b_card",),
    "OLMO_2_7B_HIDDEN": ("olmo2_7b_card",),
    "OLMO_2_7B_KV": ("olmo2_7b_card", "hf_transformers_5230"),
    "MISTRAL_7B_KV": ("jiang2023mistral",),
    "MISTRAL_7B_WINDOW": ("jiang2023mistral",),
    "MODEL_SHAPES": (
        "touvron2023llama",
        "touvron2023llama2",
        "jiang2023mistral",
        "hf_transformers_5230",
    ),
    "GEMMA2_SHAPES": ("gemma2024gemma2", "gemma_pytorch"),
    "GEMMA2_ATTN_SOFTCAP": ("gemma_pytorch",),
    "GEMMA2_27B_QUERY_PRE_ATTN_SCALAR": ("gemma_pytorch",),
    "A100_HBM_GB": ("dao2022flashattention",),
    "A100_SMS": ("dao2022flashattention",),
    "A100_SRAM_KB": ("dao2022flashattention",),
    "A100_SHARED_MEMORY_MAX_KB": ("nvidia_ampere_tuning",),
    "A100_HBM_TBPS": ("dao2022flashattention",),
    "A100_MATMUL_TFLOPS": ("dao2024flashattention2",),
    "A100_NON_MATMUL_TFLOPS": ("dao2024flashattention2",),
    "FLOPS_UTILISATION": ("dao2024flashattention2",),
    "FA3_FP8_ERROR_REDUCTION": ("shah2024flashattention3",),
    "FLASH2_A100_BLOCKS": ("flashattention_src_v283",),
    "FIGURE_2": ("dao2022flashattention",),
    "FIGURE_2_ARXIV_V2": ("dao2022flashattention_v2",),
    "FIGURE_2_RECOUNT_GFLOPS": ("flashattention_issue741",),
    "CAUSAL_SKIP_SPEEDUP": ("dao2024flashattention2",),
    "BACKWARD_MATMULS": ("dao2024flashattention2",),
    "PAPER_MAX_MEMORY_SAVING": ("dao2022flashattention",),
    "README_MEMORY_SAVINGS": ("flashattention_repo", "flashattention_readme_2022"),
    "README_SETTING": ("flashattention_readme_2022",),
    "SOFTCAP_GRAD_ATOL": ("flashattention_testing",),
    "EXP_ULPS": ("pytorch_cpu_exp",),
    "TORCH_ASSERT_CLOSE_DEFAULTS": ("pytorch_assert_close",),
    "TUTORIAL_FILL_EXPONENT": ("rush2018annotated",),
    "TUTORIAL_FILL": ("rush2018annotated",),
    "D2L_FILL_EXPONENT": ("zhang2023dive",),
    "ADAM": ("kingma2015adam",),
}

__all__ = ["SOURCES", *SOURCES]  # noqa: PLE0604 (the names SOURCES lists)
