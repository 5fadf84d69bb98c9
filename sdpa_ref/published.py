"""Every published number the site quotes, each defined once, with its source.

Model configurations, GPU figures, numbers printed in papers and READMEs, and
the defaults of other libraries: each constant below is quoted from its
source, or derived from quoted numbers by the arithmetic its comment shows
(a head width as model width over heads, say), and :data:`SOURCES` maps its
name to the citation key(s) of its source in the site's bibliography
(``docs/references.bib`` and ``docs/bib/*.bib``).

Each constant's source is quoted once, in the comment beside its value
(its entry in the API reference). The subject modules that the
pages and figures read (:mod:`sdpa_ref.cost`, :mod:`sdpa_ref.example`,
:mod:`sdpa_ref.flash`, :mod:`sdpa_ref.kernels`, :mod:`sdpa_ref.masks`,
:mod:`sdpa_ref.testing`, :mod:`sdpa_ref.training` and
:mod:`sdpa_ref.variants`) import their values from here under the same
names, so ``sdpa_ref.flash.A100_HBM_GB`` is this module's ``A100_HBM_GB``.
The project's own choices (seeds, widths, block sizes, thresholds) stay in
the modules that make them.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------
# Model configurations.

#: Model width ``d_model`` of the original Transformer's base model; every
#: sub-layer and embedding outputs vectors of this width (Vaswani et al. 2017,
#: "Attention Is All You Need", arXiv:1706.03762, Sections 3.1 and 3.3, and
#: Table 3, row "base").
TRANSFORMER_D_MODEL = 512

#: Number of attention heads ``h`` of the same base model ("we employ h = 8
#: parallel attention layers, or heads", Section 3.2.2 of the same paper).
TRANSFORMER_HEADS = 8

#: Attention shape of OLMo 2 7B from its model card (allenai/OLMo-2-1124-7B
#: on Hugging Face, README.md at revision 83f13fa9): 32 layers, 32 attention
#: heads, context length 4096.
OLMO_2_7B = {"layers": 32, "heads": 32, "context": 4096}

#: OLMo 2 7B's hidden size (model card of allenai/OLMo-2-1124-7B), which its
#: 32 attention heads split into heads of width 4096 / 32 = 128.
OLMO_2_7B_HIDDEN = 4096

#: Key/value shape of OLMo 2 7B, from the layers and heads of
#: :data:`OLMO_2_7B`, each head with its own keys and values
#: (multi-head attention: transformers' Olmo2Config defaults its key/value
#: heads to its attention heads), of width hidden size / heads.
OLMO_2_7B_KV = {
    "layers": OLMO_2_7B["layers"],
    "kv_heads": OLMO_2_7B["heads"],
    "head_dim": OLMO_2_7B_HIDDEN // OLMO_2_7B["heads"],
}

#: Key/value shape of Mistral 7B v0.1, the model of Jiang et al. (2023),
#: Table 1: 32 layers, 8 key/value heads shared by its 32 query heads, head
#: width 128, and ``window_size`` W = 4096. The paper's text counts W
#: positions back (position i attends to positions i - W to i),
#: ``window=(W, 0)`` in :func:`sdpa_ref.attention`'s terms; its Figure 1's
#: caption, its W-slot rolling-buffer cache and Hugging Face's mask keep W
#: keys, the query's own included, ``window=(W - 1, 0)``. The variants page
#: (:ref:`rolling-buffer`) weighs the two readings. Mistral 7B v0.2 and later
#: have no sliding window.
MISTRAL_7B_KV = {"layers": 32, "kv_heads": 8, "head_dim": 128, "window": 4096}

#: Mistral 7B v0.1's sliding window W, ``window_size`` in Table 1 of Jiang et
#: al. (2023): :data:`MISTRAL_7B_KV`'s ``"window"``. Its
#: rolling buffer cache keeps the keys and values of only this many
#: positions, so past it the cache stops growing.
MISTRAL_7B_WINDOW = MISTRAL_7B_KV["window"]

#: Attention shapes of three published decoder models, as layers, query heads,
#: key/value heads and head width.
#:
#: - Llama 2 7B keeps the architecture of LLaMA 7B (Touvron et al. 2023b,
#:   arXiv:2307.09288, Section 2.2; its Table 1 marks GQA for 34B and 70B
#:   only), whose Table 2 (Touvron et al. 2023a, arXiv:2302.13971) gives
#:   dimension 4096, 32 heads, 32 layers: heads of width 4096 / 32 = 128.
#: - Mistral 7B: :data:`MISTRAL_7B_KV` (Table 1 of Jiang et
#:   al., 2023, arXiv:2310.06825: n_layers 32, head_dim 128, n_kv_heads 8),
#:   with its n_heads 32.
#: - Falcon 7B: transformers' ``FalconConfig`` (release 5.23.0), documented
#:   as the configuration of checkpoint tiiuae/falcon-7b: num_hidden_layers
#:   32, num_attention_heads 71, hidden_size 4544 (heads of width
#:   4544 / 71 = 64), multi_query True.
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

#: Model width, number of query heads and head width ("Head size") of the
#: three Gemma 2 models, from Table 1 of Gemma Team (2024), "Gemma 2:
#: Improving Open Language Models at a Practical Size", arXiv:2408.00118. In
#: none of them do the heads' widths add up to d_model (heads x head width is
#: 2048 for the 2B model, 4096 for the 9B and 4096 for the 27B): the heads'
#: width is chosen on its own.
#: ``kv_heads``, the key/value heads of their grouped-query attention, is
#: ``num_key_value_heads`` of Google's reference implementation
#: (google/gemma_pytorch, gemma/config.py: get_config_for_2b_v2, _9b, _27b).
GEMMA2_SHAPES = {
    "Gemma 2 2B": {"d_model": 2304, "heads": 8, "kv_heads": 4, "head_width": 256},
    "Gemma 2 9B": {"d_model": 3584, "heads": 16, "kv_heads": 8, "head_width": 256},
    "Gemma 2 27B": {"d_model": 4608, "heads": 32, "kv_heads": 16, "head_width": 128},
}

#: The cap of Gemma 2's attention logits. Every Gemma 2 model replaces its
#: scaled scores ``s`` by ``50 · tanh(s / 50)`` before the softmax
#: (``attn_logit_softcapping=50.0`` in google/gemma_pytorch's gemma/config.py,
#: applied in gemma/model.py's GemmaAttention).
GEMMA2_ATTN_SOFTCAP = 50.0

#: The number whose square root Gemma 2 27B divides its scores by, in place
#: of its head width of 128: ``query_pre_attn_scalar=144``, commented
#: "hidden_size / num_attention_heads", in Google's reference implementation
#: (google/gemma_pytorch, commit 014acb7, gemma/config.py,
#: ``get_config_for_27b``). Its gemma/model.py multiplies the queries by
#: ``query_pre_attn_scalar**-0.5`` when that is set, and by
#: ``head_dim**-0.5`` otherwise, as for the 2B and 9B models.
GEMMA2_27B_QUERY_PRE_ATTN_SCALAR = 144

# ---------------------------------------------------------------------------
# The A100 GPU.

#: The A100 GPU as Dao et al. (2022, arXiv 2205.14135, Section 2.1) describe
#: it: "40-80GB of high bandwidth memory (HBM) ... and 192KB of on-chip SRAM
#: per each of 108 streaming multiprocessors".
A100_HBM_GB = (40, 80)
#: The A100's streaming multiprocessors, 108, from the same sentence.
A100_SMS = 108
#: The A100's SRAM per streaming multiprocessor as the paper writes it, "192KB".
A100_SRAM_KB = 192
#: The most of those 192 KB per streaming multiprocessor that can be configured
#: as shared memory on an A100: "The NVIDIA A100 GPU supports shared memory
#: capacity of 0, 8, 16, 32, 64, 100, 132 or 164 KB per SM" (NVIDIA Ampere GPU
#: Architecture Tuning Guide, Section 1.4.2.3, where 192 KB is the combined
#: capacity of the L1 cache, texture cache and shared memory). One thread
#: block gets 1 KB less, as the same section goes on: "CUDA reserves 1 KB of
#: shared memory per thread block. Hence, the A100 GPU enables a single thread
#: block to address up to 163 KB of shared memory". FlashAttention-2 v2.8.3
#: reads both limits, ``cudaDevAttrMaxSharedMemoryPerMultiprocessor`` and
#: ``cudaDevAttrMaxSharedMemoryPerBlockOptin``, in
#: ``flash_fwd_launch_template.h``.
A100_SHARED_MEMORY_MAX_KB = 164
#: The A100's HBM bandwidth in TB/s (10¹² bytes a second), from the same
#: sentence of Dao et al. (2022, Section 2.1): "40-80GB of high bandwidth
#: memory (HBM) with bandwidth 1.5-2.0TB/s".
A100_HBM_TBPS = (1.5, 2.0)
#: The A100's peak throughput for 16-bit matrix products, in TFLOPs/s (10¹²
#: FLOPs a second): "the A100 GPU has a max theoretical throughput of 312
#: TFLOPs/s of FP16/BF16 matmul, but only 19.5 TFLOPs/s of non-matmul FP32"
#: (Dao 2024, arXiv 2307.08691, Section 3.1).
A100_MATMUL_TFLOPS = 312
#: The A100's peak for FP32 arithmetic other than matrix products, in TFLOPs/s,
#: from
#: the sentence quoted under :data:`A100_MATMUL_TFLOPS`; the next sentence
#: draws the ratio, "each non-matmul FLOP is 16x more expensive than a matmul
#: FLOP".
A100_NON_MATMUL_TFLOPS = 19.5

# ---------------------------------------------------------------------------
# The FlashAttention papers, their code and their README.

#: The on-chip memory ``M`` that the FlashAttention paper's prose assumes, in
#: KB: "For typical values of d (64-128) and M (around 100KB)" (Dao et al.
#: 2022, arXiv 2205.14135, Section 3.2). The block sizes of its Algorithm 1
#: make sense only with ``M`` counted in elements (numbers stored), not bytes,
#: as the flash page explains.
FLASH_PAPER_SRAM_KB = 100

#: Share of the A100's theoretical maximum FLOPs/s that each version reaches,
#: in per cent, as Dao (2024) reports it in the abstract of FlashAttention-2:
#: FlashAttention is "reaching only 25-40% of the theoretical maximum
#: FLOPs/s", FlashAttention-2 "reaching 50-73% of the theoretical maximum
#: FLOPs/s on A100". Quoted, not computed.
FLOPS_UTILISATION = {"flash": (25, 40), "flash2": (50, 73)}

#: How much lower the numerical error of FlashAttention-3's FP8 path is than a
#: baseline FP8 attention's, as the abstract of Shah et al. (2024, arXiv
#: 2407.08608) reports it: "FP8 FlashAttention-3 achieves 2.6x lower
#: numerical error than a baseline FP8 attention", with block quantization
#: and incoherent processing. The abstract states it without a setting: it is
#: the paper's measurement against that baseline, not a general statement
#: about the error of FP8 attention, and this entry does not restate the
#: experiment's inputs. Quoted, not computed.
FA3_FP8_ERROR_REDUCTION = 2.6

#: The block sizes of FlashAttention-2's unsplit forward kernel on an A100, by
#: head dimension: ``(B_r, B_c)``, queries by keys per thread block.
#:
#: From ``csrc/flash_attn/src/flash_fwd_launch_template.h`` at release v2.8.3
#: (commit 060c9188), without dropout: ``run_mha_fwd_hdim32`` to
#: ``run_mha_fwd_hdim256`` launch ``Flash_fwd_kernel_traits<Headdim, kBlockM,
#: kBlockN, ...>``, with ``kBlockM`` the query rows of one thread block (the
#: grid has ``ceil(seqlen_q / kBlockM)`` of them per head and batch entry).
#: For an A100
#: (compute capability 8.0, not the "sm86 or sm89" branches) that is 128 x 128
#: for head dimensions 32 and 64, and 128 x 64 for 96 to 256 ("For A100, we
#: want to run with 128 x 64", at 256). The comment at 64 says why the query
#: block is not larger: "Using block size (256 x 64) is 85% slower for
#: seqlen=2k, because of register spilling". A head width is rounded up to
#: the next key of this table (``static_switch.h``, ``HEADDIM_SWITCH``).
#: The split-KV kernel, which runs in some calls in place of this one (among
#: them decoding from a paged cache or while appending keys; the flash page's
#: :ref:`split-kv` section says more), has other blocks: 64 query rows, and
#: 256, 128 or 64 keys for head dimensions up to 64, up to 128 and above
#: (``run_mha_fwd_splitkv_dispatch`` in the same file).
FLASH2_A100_BLOCKS = {
    32: (128, 128),
    64: (128, 128),
    96: (128, 64),
    128: (128, 64),
    192: (128, 64),
    256: (128, 64),
}

#: Figure 2 (left) of Dao et al. (2022), as printed in the NeurIPS 2022 version.
#:
#: Forward plus backward pass of attention with sequence length 1024, head
#: dimension 64, 16 heads and batch size 64, with a key-padding mask and no
#: dropout, on an A100 GPU. Quoted, not computed. Its FLOP row "might have
#: been off by some factor", its author wrote later: see
#: :data:`FIGURE_2_RECOUNT_GFLOPS`.
#: arXiv's version 2 printed other traffic and runtimes for the figure:
#: :data:`FIGURE_2_ARXIV_V2`.
FIGURE_2 = {
    "setting": {"seq_len": 1024, "head_dim": 64, "heads": 16, "batch": 64},
    "standard": {"gflops": 66.6, "hbm_gb": 35.3, "runtime_ms": 35.1},
    "flash": {"gflops": 75.2, "hbm_gb": 4.4, "runtime_ms": 11.7},
}

#: Figure 2 (left) as arXiv's version 2 (2205.14135v2, June 2022) printed it,
#: for "GPT-2 medium" with the same sizes and no mask or dropout named: the
#: same GFLOPs, other HBM traffic and runtimes. Quoted, not computed.
FIGURE_2_ARXIV_V2 = {
    "setting": FIGURE_2["setting"],
    "standard": {"gflops": 66.6, "hbm_gb": 40.3, "runtime_ms": 41.7},
    "flash": {"gflops": 75.2, "hbm_gb": 4.4, "runtime_ms": 7.3},
}

#: Tri Dao's recount of Figure 2's FLOPs, in GFLOPs, matrix products only.
#:
#: From his replies of 2023-12-28 in Dao-AILab/flash-attention issue 741: the
#: figure's FLOP numbers "might have been off by some factor" while "the ratio
#: between the two columns should still be around the same"; counting only
#: the matrix products, the forward pass is 275 GFLOPs, the backward pass 2x
#: that for standard attention and 2.5x for FlashAttention, so "the left
#: column FLOPs should be 825 GFLOPs and the right column should be 963
#: GFLOPs". Quoted; :func:`sdpa_ref.flash.figure_2_matmul_flops` recomputes them
#: as 824.6 and 962.1 (the author rounded the forward pass to 275 first).
FIGURE_2_RECOUNT_GFLOPS = {"standard": 825, "flash": 963}

#: The speedup that skipping fully masked blocks brings causal attention.
#:
#: Compared with attention without a mask, as FlashAttention-2's paper
#: states it, "around 1.7-1.8× speedup compared to attention without the
#: causal mask" (Dao 2024, Section 3.1.1, "Causal masking"). Quoted, not
#: computed.
CAUSAL_SKIP_SPEEDUP = (1.7, 1.8)

#: Matrix products in the backward pass, each as large as a forward one.
#:
#: The standard backward computes ``dV = Pᵀ dO``, ``dP = dO Vᵀ``,
#: ``dQ = dS K`` and ``dK = dSᵀ Q`` (Dao 2024, Section 2.2); FlashAttention
#: first recomputes ``S = Q Kᵀ``, "5 matmuls in the backward pass, due to
#: recomputation" (Dao 2024, Section 4.1).
BACKWARD_MATMULS = {"standard": 4, "flash": 5}

#: "FlashAttention is up to 20x more memory efficient than exact attention
#: baselines" (Dao et al. 2022, Section 4.3, Figure 3 right: attention memory
#: on one A100 with 40 GB of HBM, with dropout and a padding mask).
PAPER_MAX_MEMORY_SAVING = 20

#: Memory savings of FlashAttention over PyTorch's standard attention by
#: sequence length, from the memory benchmark of the flash-attention README
#: ("We see 10X memory savings at sequence length 2K, and 20X at 4K"), a
#: sentence the README has kept from May 2022 to release v2.8.3, with the same
#: graph (assets/flashattn_memory.jpg, unchanged since commit 67c37795).
#: Quoted, not computed.
README_MEMORY_SAVINGS = {2048: 10, 4096: 20}

#: The benchmark setting that the README of May 2022 (commit dc6d1300) gives
#: for its speedup graphs, "similar to BERT-base": batch size 8, head
#: dimension 64, 12 attention heads, sequence lengths up to 4096 on an A100.
#: Neither README states a setting for the memory graph of
#: :data:`README_MEMORY_SAVINGS`: in 2022 it sat beside those speedup graphs,
#: and the README of v2.8.3 shows the same graph under the setting of its newer
#: speed benchmarks (head dimension 64 or 128, hidden dimension 2048, batch
#: size 16k / seqlen). That this was also the memory graph's setting is an
#: inference.
README_SETTING = {"batch": 8, "head_dim": 64, "heads": 12}

# ---------------------------------------------------------------------------
# Other libraries' defaults and conventions.

#: FlashAttention-3's tests' absolute tolerance on the output, ``fwd_atol =
#: factor * (out_ref + offset - offset - out_ref).abs().max()``: twice the
#: rounding noise of adding and subtracting 0.3 in the output's dtype
#: (Dao-AILab/flash-attention at commit 0251105a, hopper/test_flash_attn.py,
#: line 255). :func:`sdpa_ref.testing.flash_atol` computes it.
FLASH_TEST_FWD_ATOL = {"factor": 2.0, "offset": 0.3}

#: The same tests' relative factor, ``rtol``. A kernel's error against the
#: reference (computed in float32 and returned in the kernel's dtype) may be
#: this many times the error of the same attention computed naively in the
#: kernel's dtype (``out_pt``), 2, or 3 with soft-capping (lines 215-243 and
#: 256).
FLASH_TEST_RTOL = {"default": 2.0, "softcap": 3.0}

#: FlashAttention-3's tests add this to each gradient's absolute tolerance
#: with soft-capping, where they also raise the relative factor from 2 to 3
#: (Dao-AILab/flash-attention at commit 0251105a, hopper/test_flash_attn.py,
#: lines 343-348 and 256).
SOFTCAP_GRAD_ATOL = 3e-4

#: The accuracy, in units in the last place, of the ``exp`` that PyTorch's CPU
#: flash-attention kernel computes the softmax's exponentials with:
#: ``exp_u20``, "A faster version of exp with ULP=20" (pytorch/pytorch,
#: aten/src/ATen/cpu/vec/vec512/vec512_float.h at commit 0243643e, called from
#: aten/src/ATen/native/cpu/FlashAttentionKernel.cpp at commit 008ec6b1). The
#: source vouches for that one function. :mod:`sdpa_ref.testing` allows this
#: many units to a kernel's ``exp``, ``exp2``, ``log`` and ``tanh``: the
#: project's choice, which a kernel built on coarser approximations (a GPU's
#: approximate ``tanh``, say) can exceed while right to its own accuracy.
EXP_ULPS = 20

#: ``torch.testing.assert_close``'s default ``(rtol, atol)`` per dtype:
#: ``_DTYPE_PRECISIONS`` in torch/testing/_comparison.py (torch 2.13.0).
TORCH_ASSERT_CLOSE_DEFAULTS = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
}

#: The power of ten in :data:`TUTORIAL_FILL`.
TUTORIAL_FILL_EXPONENT = 9

#: The large negative number the Annotated Transformer (Rush, 2018) writes
#: into masked logits: ``scores.masked_fill(mask == 0, -1e9)``.
TUTORIAL_FILL = -(10.0**TUTORIAL_FILL_EXPONENT)

#: The power of ten in the fill of Dive into Deep Learning's ``masked_softmax``
#: (Zhang et al., d2l-en release v1.0.3, Section 11.3.2): "On the last axis,
#: replace masked elements with a very large negative value, whose
#: exponentiation outputs 0", ``_sequence_mask(..., value=-1e6)``. In float32
#: and bfloat16 a row with no valid key gets -1e6 everywhere, and equal
#: weights, as with :data:`TUTORIAL_FILL`; in float16 the fill is stored as
#: -inf and the row comes out NaN, as the masks page shows.
D2L_FILL_EXPONENT = 6

#: Adam's defaults, as Kingma and Ba give them in their Algorithm 1. "Good
#: default settings for the tested machine learning problems are α = 0.001,
#: β1 = 0.9, β2 = 0.999 and ϵ = 10⁻⁸". The training experiment
#: (:mod:`sdpa_ref.training`) keeps the betas and epsilon in every run, and
#: takes this learning rate for its main setting.
ADAM = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}

# ---------------------------------------------------------------------------

#: The citation key(s) of each constant's source, by the constant's name, in
#: the site's bibliography. Each constant's entry here cites them, as the pages
#: do where they quote the number.
#:
#: :meta hide-value:
SOURCES = {
    "TRANSFORMER_D_MODEL": ("vaswani2017attention",),
    "TRANSFORMER_HEADS": ("vaswani2017attention",),
    "OLMO_2_7B": ("olmo2_7b_card",),
    "OLMO_2_7B_HIDDEN": ("olmo2_7b_card",),
    "OLMO_2_7B_KV": ("olmo2_7b_card", "hf_transformers_5230"),
    "MISTRAL_7B_KV": (
        "jiang2023mistral",
        "hf_transformers_5230",
        "mistral_7b_v02_card",
        "mistral_7b_v03_card",
    ),
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
    "FLASH_PAPER_SRAM_KB": ("dao2022flashattention",),
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
    "FLASH_TEST_FWD_ATOL": ("flashattention_testing",),
    "FLASH_TEST_RTOL": ("flashattention_testing",),
    "SOFTCAP_GRAD_ATOL": ("flashattention_testing",),
    "EXP_ULPS": ("pytorch_cpu_exp",),
    "TORCH_ASSERT_CLOSE_DEFAULTS": ("pytorch_assert_close",),
    "TUTORIAL_FILL_EXPONENT": ("rush2018annotated",),
    "TUTORIAL_FILL": ("rush2018annotated",),
    "D2L_FILL_EXPONENT": ("zhang2023dive",),
    "ADAM": ("kingma2015adam",),
}

__all__ = [*SOURCES, "SOURCES"]  # noqa: PLE0604 (the names SOURCES lists)
