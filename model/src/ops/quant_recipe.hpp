#pragma once
// Low-precision GEMM recipes (wl::QuantRecipe): the bytes of the quantisation pass that feeds each fp8 / fp4 GEMM
// operand and of the cached quantised weights, from Transformer Engine's recipes as Megatron-Core runs them
// (transformer_engine/common/recipe: DelayedScaling, Float8CurrentScaling, MXFP8BlockScaling, Float8BlockScaling,
// NVFP4BlockScaling). One place for these numbers: layer_cost.cpp (time) and memory.cpp (weight caches) read them.
#include <array>

#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::model::detail {

struct QuantBytes {
  /// HBM bytes per activation (or gradient) element of the pass that quantises a GEMM operand: read the 16-bit
  /// tensor and write it twice, row-wise for this GEMM and column-wise (the transpose) for the backward's, each with
  /// its scales; plus an amax read of the tensor first where the recipe scales by the tensor's current amax.
  double cast = 0.0;
  /// Bytes per GEMM weight of the quantised copies cached across micro-batches (row- and column-wise, with scales).
  double weight_cache = 0.0;
  const char* name = "fp8";
};

/// Per recipe (a = 2 B 16-bit input):
///  - delayed: 2 + 1 + 1 (the amax comes from the history, fused into the cast); cache 1 + 1;
///  - tensorwise: + 2 for the amax pass; cache 1 + 1;
///  - mxfp8: 2 + 2·(1 + 1/32) (an E8M0 scale per 32 elements each way: the column-wise copy is re-quantised along
///    the other axis, not transposed); cache 2·(1 + 1/32);
///  - blockwise: 2 + 2·(1 + 4/128) (an fp32 scale per 1×128 tile each way); weights in 128×128 blocks: cache 2·1;
///  - nvfp4: 2 (amax for the per-tensor fp32 scale) + 2 + 2·(1/2 + 1/16) (E2M1 data, an E4M3 scale per 16); cache
///    2·(1/2 + 1/16).
///  On a GPU whose FP8 GEMMs take either operand layout (fp8_any_layout), the per-tensor recipes (delayed,
///  tensorwise) write no transpose: the column-wise copy is the row-wise data read the other way, so the cast writes
///  1 B, not 2, and the cache holds 1 B per weight. The block-scaled recipes still quantise each axis separately.
inline QuantBytes quant_bytes(wl::QuantRecipe r, bool any_layout) {
  const double copies = any_layout ? 1.0 : 2.0;
  switch (r) {
    case wl::QuantRecipe::delayed: return {2.0 + copies, copies, "fp8"};
    case wl::QuantRecipe::tensorwise: return {4.0 + copies, copies, "fp8 tensorwise"};
    case wl::QuantRecipe::mxfp8: return {2.0 + 2.0 * (1.0 + 1.0 / 32.0), 2.0 * (1.0 + 1.0 / 32.0), "mxfp8"};
    case wl::QuantRecipe::blockwise: return {2.0 + 2.0 * (1.0 + 4.0 / 128.0), 2.0, "fp8 blockwise"};
    case wl::QuantRecipe::nvfp4: return {4.0 + 2.0 * (0.5 + 1.0 / 16.0), 2.0 * (0.5 + 1.0 / 16.0), "nvfp4"};
  }
  return {4.0, 2.0, "fp8"};
}

/// Where a GEMM operand of Transformer Engine's Linear / LayerNormLinear comes from, for its quantisation kernels.
struct OperandSource {
  /// Written by the RMSNorm / LayerNorm of a LayerNormLinear (Megatron-Core's QKV projection and a dense MLP's fc1):
  /// under delayed scaling the norm kernel writes the FP8 copy itself, under current scaling it writes 16-bit and
  /// the amax in the same kernel (TE 2.7 pytorch/csrc/extensions/normalization.cpp rmsnorm_fwd / layernorm_fwd:
  /// fused for Float8Quantizer, create_hp_tensor_with_amax + quantize_with_amax for Float8CurrentScalingQuantizer,
  /// unfused — a separate quantise — for MXFP8 unless NVTE_NORM_FWD_USE_CUDNN).
  bool norm_output = false;
  /// All-gathered over the TP group under sequence parallelism (a column-parallel layer's input, a row-parallel
  /// layer's output gradient): quantised on this GPU's 1/tp shard before the gather. The per-tensor recipes gather
  /// the row-wise FP8 copy only and build the transpose of the gathered tensor where the GEMM needs it (TE 2.7
  /// module/linear.py: "All-gather is not supported with FP8 column-wise data", then update_usage(columnwise_usage)
  /// before the wgrad GEMM; module/base.py grad_output_preprocess); MXFP8 gathers both copies.
  bool gathered = false;
};

/// One kernel of an operand's quantisation: its op-name suffix, HBM bytes per element of the tensor it runs over (the
/// 1/tp shard, or the gathered tensor when `gathered_tensor`), the measured fraction of the copy rate it reaches, and
/// whether it runs in the backward (the output gradient dY's, and the transpose of a gathered X, built after its
/// re-gather for the wgrad GEMM) or the forward. A pass with 0 bytes is a launch-only kernel (current scaling's scale from amax).
struct QuantPass {
  const char* what = "";
  double bytes = 0.0;
  double rate = 1.0;
  bool gathered_tensor = false;
  bool backward = false;
};
struct QuantPasses {
  std::array<QuantPass, 4> pass{};
  int n = 0;
  void add(const QuantPass& q) { pass[static_cast<std::size_t>(n++)] = q; }
};

/// Transformer Engine's FP8 quantisation kernels as fractions of the copy rate (the cast pricer shared with the
/// blockwise casts below: the bandwidth part of a streaming op divided by the rate, its fixed cost kept). Measured on
/// our H200 (2026-11-29, issue #24; scripts/measure/fp8_te_casts.py, Triton kernels moving TE's bytes;
/// data/validation/measured/h200-sxm-141gb/fp8_te_casts.json): geometric means over five Llama-3-70B / 8B operand
/// shapes of 134-1879 MB (the sixth fits the L2), against torch's copy on the same GPU — amax 0.916 (0.905-0.925),
/// row-wise cast 1.005 (0.994-1.015: taken as 1), cast-transpose 0.861 (0.841-0.877), FP8 transpose 0.800
/// (0.769-0.821). MXFP8's two-axis quantise: TE's kernel on a B200 as published (ROCm/TransformerEngine PR #598,
/// CAST_ONLY BF16 8192×8192, 52.34 µs: 5.21 TB/s = 0.757 of the B200 streaming rate, 7.7 TB/s × 0.893); its row-wise
/// 34.84 µs (0.849) matches our Triton row-wise kernel (0.832), where our own two-axis kernel reaches only 0.472.
/// Other GPUs: the same fractions (an assumption).
inline constexpr double kAmaxRate = 0.916;
inline constexpr double kCastRate = 1.0;
inline constexpr double kCastTransposeRate = 0.861;
inline constexpr double kFp8TransposeRate = 0.800;
inline constexpr double kMxQuantiseRate = 0.757;

/// The kernels Transformer Engine (2.7, the 25.09 containers; TE 1.x's fused cast-transpose is the same traffic)
/// runs per GEMM operand under the per-tensor recipes and MXFP8 — `x` true for the input X (forward; its column-wise
/// copy feeds the wgrad GEMM), false for the output gradient dY (backward; row-wise for dgrad, column-wise for
/// wgrad). a = 2 B 16-bit source, c = the copies a GEMM needs (1 where FP8 GEMMs read either layout, else 2).
///  - delayed: the cast(-transpose), 2 + c B, its amax taken in the same kernel from the history (TE's cast kernels
///    update amax atomically); a norm's output is cast by the norm itself, and only its transpose (1 + 1 B, Hopper)
///    is left (TE common/normalization/rmsnorm/rmsnorm_api.cpp: nvte_transpose after the fused kernel);
///  - tensorwise (Float8CurrentScalingQuantizer::quantize_impl, pytorch/csrc/quantizer.cpp): nvte_compute_amax (read
///    2 B; for a norm's output the norm computed it), nvte_compute_scale_from_amax (one launch), then the cast;
///  - gathered (sequence parallel) per-tensor operands: the row-wise cast (2 + 1 B) of the shard, and where the GEMMs
///    need the TN layout, the transpose of the gathered FP8 tensor (1 + 1 B) in the backward;
///  - mxfp8: one kernel writes both copies with an E8M0 scale per 32 elements, 2 + 2·(1 + 1/32) B, norm output or not.
///  Other recipes (TE's blockwise, NVFP4): one pass of quant_bytes' cast bytes at the streaming rate.
inline QuantPasses te_quant_passes(wl::QuantRecipe r, bool any_layout, bool x, OperandSource src) {
  QuantPasses q;
  const bool bwd = !x;
  if (r == wl::QuantRecipe::mxfp8) {
    q.add({" quantise (row + column)", 2.0 + 2.0 * (1.0 + 1.0 / 32.0), kMxQuantiseRate, false, bwd});
    return q;
  }
  if (r != wl::QuantRecipe::delayed && r != wl::QuantRecipe::tensorwise) {
    q.add({" cast", quant_bytes(r, any_layout).cast, 1.0, false, bwd});
    return q;
  }
  const bool current = r == wl::QuantRecipe::tensorwise;
  if (current && !src.norm_output) q.add({" amax", 2.0, kAmaxRate, false, bwd});
  if (current) q.add({" scale from amax", 0.0, 1.0, false, bwd});
  const bool in_norm = !current && src.norm_output;  // delayed scaling: the norm wrote the row-wise FP8 copy
  if (src.gathered || in_norm) {
    if (!in_norm) q.add({" cast", 3.0, kCastRate, false, bwd});
    // The gathered tensor is transposed in the backward, after its re-gather; a norm's FP8 output right after the norm.
    if (!any_layout) q.add({" transpose", 2.0, kFp8TransposeRate, src.gathered, bwd || src.gathered});
    return q;
  }
  q.add({any_layout ? " cast" : " cast-transpose", any_layout ? 3.0 : 4.0, any_layout ? kCastRate : kCastTransposeRate,
         false, bwd});
  return q;
}

/// MXFP8 GEMMs read their E8M0 scales in the tensor cores' swizzled layout: Transformer Engine 2.7 swizzles both
/// operands' scales in a kernel of its own before every GEMM (pytorch/csrc/extensions/gemm.cpp general_gemm →
/// swizzle_scaling_factors, pytorch/csrc/util.cpp; nvte_swizzle_scaling_factors): read and write 1 B per 32 elements
/// of each operand, weights included (not cached across micro-batches in 2.7).
inline constexpr double kMxSwizzleBytesPerElement = 2.0 / 32.0;

/// Whether Transformer Engine runs the GPU's FP8 GEMMs in any operand layout, so a per-tensor-scaled FP8 tensor needs
/// no transposed copy for the backward: compute capability 10.x and 11.x (datacenter Blackwell's tcgen05 MMA reads
/// FP8 operands K- or MN-major; Hopper's wgmma needs K-major FP8 operands, the "TN" layout) and 13.0 on; not 12.x
/// (consumer Blackwell), where cuBLASLt keeps the TN restriction. Transformer Engine's
/// nvte_is_non_tn_fp8_gemm_supported (transformer_engine/common/transformer_engine.cpp) and the quantizer that
/// skips the transpose when it holds (pytorch/csrc/quantizer.cpp, Float8Quantizer::create_tensor).
inline bool fp8_any_layout(const hw::GpuSpec& gpu) {
  if (!gpu.compute_capability) return false;
  const int cc = *gpu.compute_capability;
  return (cc >= 100 && cc < 120) || cc >= 130;
}

/// Block-scaled FP8 GEMMs (the blockwise recipe: 1×128 activation tiles and 128×128 weight blocks, an fp32 scale
/// each, DeepSeek-V3 §3.3.2) take this many times the time of per-tensor FP8 GEMMs with split accumulation: the
/// scales are applied to the partial sums of every 128-deep K block in the main loop, where a per-tensor GEMM scales
/// once in its epilogue. Measured on our H100 (data/validation/measured/h100-sxm5-80gb/fp8_blockwise_gemm.json,
/// scripts/measure/fp8_blockwise_gemm.py): torch._scaled_mm (cuBLASLt) blockwise against tensorwise with
/// use_fast_accum off over 22 DeepSeek-V3-shaped forward, dgrad and wgrad GEMMs (MLA, shared and routed expert, o
/// projection; 4096–32768 × 512–24576 × 512–16384): geometric mean 1.109 (1.03–1.24; 1.096 on an H200). Applied to
/// compute-bound GEMMs on every GPU (an assumption beyond Hopper).
inline constexpr double kBlockScaledGemmTime = 1.109;

/// Bytes written per element by one axis of a block-scaled FP8 quantisation: the FP8 value and an fp32 scale per
/// 1×128 tile (DeepSeek-V3 §3.3.2).
inline constexpr double kBlockAxisBytes = 1.0 + 4.0 / 128.0;

/// Bytes per element that a tensor-parallel all-gather moves when it gathers a quantised GEMM operand (sequence
/// parallelism): Transformer Engine quantises the 1/tp shard and gathers the quantised data with its scales
/// (NVIDIA/TransformerEngine v2.7 fedd9ddc, transformer_engine/pytorch/distributed.py gather_along_first_dim:
/// _all_gather_fp8 gathers the row-wise FP8 data only, "Assume scaling factors are identical across ranks";
/// _all_gather_mxfp8 and _all_gather_fp8_blockwise gather each usage the quantizer asks for, data and scales; v2.9
/// 70f53666 _all_gather_nvfp4 alike), and pytorch/module/linear.py and layernorm_linear.py set the usages:
///  - input: a column-parallel layer's input in the forward, row-wise only (set_usage(rowwise=True, columnwise=False)
///    before the gather);
///  - grad: a row-parallel layer's output gradient in the backward (base.py grad_output_preprocess), with the usages
///    set in linear.py's backward, row-wise and column-wise; the per-tensor recipes gather the row-wise data only
///    ("All-gather is not supported with FP8 column-wise data") and transpose after the gather;
///  - regather: the column-parallel input again for the wgrad GEMM (linear.py backward, backward_input_needs_gather),
///    column-wise, or for the per-tensor recipes the row-wise data, transposed after.
/// The reduce-scatters (a row-parallel layer's output, a column-parallel layer's input gradient) reduce 16-bit GEMM
/// outputs and stay 16-bit. Per recipe: delayed and current scaling 1 B each; MXFP8 1 + 1/32 (an E8M0 scale per 32)
/// per usage; TE's blockwise 1 + 4/128 per usage; NVFP4 1/2 + 1/16 per usage. TorchTitan's float8 (torchao
/// tensorwise) gathers FP8 for TP as well (pytorch/torchtitan docs/float8.md: "float8 all-gather ... for TP (by
/// default for Float8Linear)"), taken as the per-tensor row.
struct TpGatherBytes {
  double input = 0.0, grad = 0.0, regather = 0.0;
};
inline TpGatherBytes tp_gather_bytes(wl::QuantRecipe r) {
  const double mx = 1.0 + 1.0 / 32.0, fp4 = 0.5 + 1.0 / 16.0;
  switch (r) {
    case wl::QuantRecipe::delayed:
    case wl::QuantRecipe::tensorwise: return {1.0, 1.0, 1.0};
    case wl::QuantRecipe::mxfp8: return {mx, 2.0 * mx, mx};
    case wl::QuantRecipe::blockwise: return {kBlockAxisBytes, 2.0 * kBlockAxisBytes, kBlockAxisBytes};
    case wl::QuantRecipe::nvfp4: return {fp4, 2.0 * fp4, fp4};
  }
  return {1.0, 1.0, 1.0};
}

/// Whether the recipe all-reduces each gathered operand's amax over the TP group before it quantises the shard, so
/// that every rank's shard has the same scale: current scaling and NVFP4 (TE v2.7 linear.py and layernorm_linear.py
/// _customize_quantizers_float8_current_scaling, v2.9 _customize_quantizers_nvfp4: with_amax_reduction on the
/// column-parallel input's and the row-parallel output gradient's quantizer, amax_reduction_group = tp_group, under
/// sequence parallelism). One fp32 per all-reduce. Delayed scaling reduces its amax history once per forward and
/// backward over the whole amax group instead, not per operand.
inline bool tp_amax_reduction(wl::QuantRecipe r) {
  return r == wl::QuantRecipe::tensorwise || r == wl::QuantRecipe::nvfp4;
}

/// The HBM rate of a 1×128-tile FP8 cast kernel as a fraction of the streaming (copy) rate, row-wise and as a
/// column-wise cast-transpose: measured on our H200 (2026-11-29, issue #21; scripts/measure/fp8_block_cast.py, a
/// Triton kernel written there; data/validation/measured/h200-sxm-141gb/fp8_block_cast.json): over six DeepSeek-V3
/// operand shapes (4096-32768 rows × 2048-16384 columns) the row-wise cast reaches 0.84-0.94 of torch's copy on the
/// same GPU (geometric mean 0.905), the cast-transpose 0.84-0.91 (0.872). Other GPUs: the same fractions (an
/// assumption). DeepSeek's own cast kernels (its H800 profile) reach less; they are not public, so not measured.
inline constexpr double kBlockRowCastRate = 0.905;
inline constexpr double kBlockColCastRate = 0.872;

/// DeepSeek-V3's framework as its published profile shows it (deepseek-ai/profile-data train.json, 449602428a1b; the
/// kernel table in docs/deepseek-v3-profile.md): the blockwise recipe with one FP8 layout of each weight cached
/// (Fp8WeightCopies::cached_one_layout: the NT-only GEMMs of DeepGEMM). It quantises each GEMM operand per axis in
/// a pass of its own, when the GEMM that reads that axis runs: the input row-wise (`per_token_cast_to_fp8`, 1×128
/// tiles) before the forward GEMM, and column-wise (`per_channel_cast_and_transpose`) again before the wgrad GEMM;
/// the output gradient row-wise for dgrad and column-wise for wgrad — each pass reads its source, where Transformer
/// Engine's blockwise quantiser reads once and writes both layouts (quant_bytes). Only this framework keeps one FP8
/// layout, so the plan's `fp8_weight_copies cached_one_layout` with `fp8_recipe blockwise` names it.
inline bool one_layout_blockwise(const wl::TrainingPlan& plan) {
  return plan.precision.compute == hw::Precision::fp8 && plan.precision.recipe == wl::QuantRecipe::blockwise &&
         plan.fp8_weight_copies == wl::Fp8WeightCopies::cached_one_layout;
}

/// Whether the plan's GEMMs take quantised operands (fp8 or fp4).
inline bool quantised_gemms(const wl::TrainingPlan& plan) {
  return plan.precision.compute == hw::Precision::fp8 || plan.precision.compute == hw::Precision::fp4;
}

/// Whether the TP all-gathers of the attention and dense MLP linears move quantised operands (tp_gather_bytes):
/// quantised GEMMs under sequence parallelism with TP > 1, in Transformer Engine's recipes (DeepSeek's framework,
/// one_layout_blockwise, runs no TP).
inline bool quantised_tp_gathers(const wl::TrainingPlan& plan) {
  return quantised_gemms(plan) && plan.par.sequence_parallel && plan.par.tp > 1 && !one_layout_blockwise(plan);
}

}  // namespace gpuplan::model::detail
