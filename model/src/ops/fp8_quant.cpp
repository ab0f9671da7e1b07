// The quantisation kernels of FP8 / FP4 training GEMMs (fp8_quant.hpp).
#include "fp8_quant.hpp"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "moe_cost.hpp"

namespace gpuplan::model::detail {

OpCost cast_at_rate(const std::string& op, double bytes, double elems, double rate, const Device& d) {
  OpCost c = streaming_cost(op, OpClass::elementwise, units::bytes(bytes), units::flop(elems), d);
  const Seconds fixed = kernel_fixed(d, OpClass::elementwise);
  c.time = (c.time - fixed) / rate + fixed;
  return c;
}

bool fp8_stored_weights(const wl::TrainingPlan& plan) {
  return plan.precision.compute == hw::Precision::fp8 &&
         (plan.precision.fp8_params || (plan.lora.on() && plan.lora.base == wl::LoraBase::fp8));
}

bool lora_base_dequantised(const wl::TrainingPlan& plan) {
  return plan.lora.on() && plan.lora.base != wl::LoraBase::same;
}

Seconds weight_quantisation_time(double weights, double shard, const wl::TrainingPlan& plan, const Device& d) {
  const auto& pr = plan.precision;
  if (!quantised_gemms(plan) || plan.fp8_weight_copies != wl::Fp8WeightCopies::cached || plan.lora.on() ||
      plan.zero == wl::ZeroStage::parameters || !(weights > 0.0))
    return Seconds(0);
  const bool any_layout = d.gpu != nullptr && fp8_any_layout(*d.gpu);
  const bool mx = pr.recipe == wl::QuantRecipe::mxfp8;
  Seconds t{};
  auto pass = [&](double elems, double bytes, double rate) { t += cast_at_rate("", elems * bytes, elems, rate, d).time; };
  if (!fp8_stored_weights(plan)) {
    const QuantPasses qp = te_quant_passes(pr.recipe, any_layout, true, OperandSource{});
    for (int i = 0; i < qp.n; ++i) {
      const QuantPass& p = qp.pass[static_cast<std::size_t>(i)];
      pass(p.bytes > 0 ? weights : 1.0, p.bytes > 0 ? p.bytes : 8.0, p.rate);
    }
    return t;
  }
  const double master = pr.master_bytes > 0 ? pr.master_bytes : 2.0;
  const double copy = mx ? 2.0 * (1.0 + 1.0 / 32.0) : 1.0;
  if (pr.recipe == wl::QuantRecipe::tensorwise) pass(shard, master, kAmaxRate);
  pass(shard, master + copy, mx ? kMxQuantiseRate : kCastRate);
  const bool per_tensor = pr.recipe == wl::QuantRecipe::delayed || pr.recipe == wl::QuantRecipe::tensorwise;
  if (per_tensor && !any_layout) pass(weights, 2.0, kFp8TransposeRate);
  if (mx) pass(weights, 2.0 * copy, 1.0);
  return t;
}

GemmQuantOps::GemmQuantOps(const wl::TransformerArch& a, const wl::TrainingPlan& training_plan, const Device& device,
                           bool keep_op_names)
    : plan(training_plan), d(device), keep_ops(keep_op_names), gated(a.mlp == wl::MlpKind::gated),
      any_layout(device.gpu != nullptr && fp8_any_layout(*device.gpu)), per_axis(one_layout_blockwise(training_plan)),
      fp8_stored(fp8_stored_weights(training_plan)), dequant(lora_base_dequantised(training_plan)),
      t(training_plan.par.tp), e(training_plan.precision.activation_bytes) {}

QuantOps GemmQuantOps::gemm_operands(const std::string& name, LinearKind kind, double m, double k, double n,
                                     double batch, bool norm_input, bool replicated) const {
  // FP8/FP4 GEMMs take quantised operands: the input X in the forward and the output gradient dY in the backward,
  // each by the recipe's kernels (quant_recipe.hpp te_quant_passes: amax, cast or cast-transpose, transpose, MXFP8's
  // two-axis quantise). Weights are cast once per step and cached across micro-batches (not counted) unless the plan
  // makes its copies per micro-batch.
  QuantOps out;
  const QuantBytes q = quant_bytes(plan.precision.recipe, any_layout);
  const double elems_f = m * k * batch, elems_b = m * n * batch;
  if (per_axis) {
    per_axis_casts(name, kind, elems_f, elems_b, out);
  } else {
    // A grouped expert GEMM's operands are quantised expert by expert (moe_cost.hpp te_grouped_quant_kernels).
    const bool grouped = kind == LinearKind::expert_in || kind == LinearKind::expert_out;
    const std::int64_t kernels = grouped ? te_grouped_quant_kernels(plan.precision.recipe, std::llround(batch)) : 1;
    te_casts(name, kind, q.name, elems_f, elems_b, norm_input, kernels, replicated, out);
    if (plan.precision.recipe == wl::QuantRecipe::mxfp8) mx_swizzles(name, elems_f, k * n * batch, elems_b, out);
  }
  weight_copies_per_microbatch(name, q, k * n * batch, out);
  return out;
}

// Transformer Engine's quantisation kernels of a GEMM's input X (x elements as the GEMM reads it) and output
// gradient dY (dy), each pass at its measured rate (quant_recipe.hpp te_quant_passes). Under sequence parallelism
// a column-parallel layer's X and a row-parallel layer's dY are quantised on this GPU's 1/tp shard before their
// all-gather; the QKV projection's and a dense fc1's X is the norm's output (LayerNormLinear). Each pass is `kernels`
// kernels over the same bytes (one per local expert of a grouped GEMM: split_into_kernels).
void GemmQuantOps::te_casts(const std::string& name, LinearKind kind, const char* recipe, double x, double dy,
                            bool norm_input, std::int64_t kernels, bool replicated, QuantOps& out) const {
  const bool sp = plan.par.sequence_parallel && t > 1;
  const bool column = !replicated && (kind == LinearKind::qkv || kind == LinearKind::mlp_in);
  const bool row = kind == LinearKind::attention_out || kind == LinearKind::mlp_out;
  const OperandSource src_x{norm_input, sp && column}, src_dy{false, sp && row};
  for (const bool is_x : {true, false}) {
    const double whole = is_x ? x : dy, shard = (is_x ? src_x : src_dy).gathered ? whole / double(t) : whole;
    const QuantPasses qp = te_quant_passes(plan.precision.recipe, any_layout, is_x, is_x ? src_x : src_dy);
    for (int i = 0; i < qp.n; ++i) {
      const QuantPass& p = qp.pass[static_cast<std::size_t>(i)];
      const double elems = p.gathered_tensor ? whole : shard;
      const std::string op =
          keep_ops ? fmt::format("{} {}{}{}{}", name, is_x ? "" : "grad ", recipe, p.what,
                                 kernels > 1 ? fmt::format(" (x{} experts)", kernels) : std::string())
                   : "";
      const double bytes = p.bytes > 0 ? elems * p.bytes : 8.0 * double(kernels);
      OpCost c = split_into_kernels(cast_at_rate(op, bytes, p.bytes > 0 ? elems : 1.0, p.rate, d), kernels, d);
      if (!p.backward) out.input_cast_fwd += c.time;
      out.add(!p.backward, std::move(c));
    }
  }
}

// MXFP8: both operands' E8M0 scales swizzled before each of the three GEMMs (quant_recipe.hpp
// kMxSwizzleBytesPerElement): X and W for the forward, dY and W for dgrad, X and dY for wgrad.
void GemmQuantOps::mx_swizzles(const std::string& name, double x, double w, double dy, QuantOps& out) const {
  const std::pair<const char*, double> ops[] = {
      {" mxfp8 scale swizzle X", x},        {" mxfp8 scale swizzle W", w},
      {" mxfp8 scale swizzle dgrad dY", dy}, {" mxfp8 scale swizzle dgrad W", w},
      {" mxfp8 scale swizzle wgrad X", x},  {" mxfp8 scale swizzle wgrad dY", dy}};
  for (std::size_t i = 0; i < 6; ++i)
    out.add(i < 2, cast_at_rate(named(name, ops[i].first), ops[i].second * kMxSwizzleBytesPerElement,
                                ops[i].second / 32.0, 1.0, d));
}

// DeepSeek's framework (one_layout_blockwise, quant_recipe.hpp): a GEMM's operands quantised per axis, each pass
// reading its source and writing FP8 with a scale per 1×128 tile (kBlockAxisBytes): the input X (m × k) row-wise
// before the forward GEMM and column-wise (cast-transpose) before the wgrad GEMM; the output gradient dY (m × n)
// row-wise for dgrad and column-wise for wgrad. The routed experts' input arrives as the FP8 rows DeepEP
// dispatched (its tokens were quantised before the dispatch, on the dispatch's SMs), so it has no forward cast and
// its column-wise pass reads FP8; the second linear of a gated MLP or expert reads the SwiGLU kernel's FP8 output
// (the cast is fused into the activation: activation_out_bytes), so it has no forward cast either.
void GemmQuantOps::per_axis_casts(const std::string& name, LinearKind kind, double x, double dy,
                                  QuantOps& out) const {
  const bool fp8_rows = kind == LinearKind::expert_in && plan.ep_dispatch == wl::EpDispatch::deepep;
  const bool after_glu = gated && (kind == LinearKind::expert_out || kind == LinearKind::mlp_out);
  // Each pass at the measured rate of a 1×128 cast kernel (kBlockRowCastRate, kBlockColCastRate).
  auto cast = [&](bool forward, const char* what, double elems, double source_bytes, double rate) {
    OpCost c = cast_at_rate(named(name, what), elems * (source_bytes + kBlockAxisBytes), elems, rate, d);
    if (forward) out.input_cast_fwd = c.time;
    out.add(forward, std::move(c));
  };
  if (!fp8_rows && !after_glu) cast(true, " fp8 1x128 cast", x, e, kBlockRowCastRate);
  cast(false, " grad fp8 1x128 cast (dgrad)", dy, e, kBlockRowCastRate);
  cast(false, " grad fp8 cast-transpose (wgrad)", dy, e, kBlockColCastRate);
  cast(false, " input fp8 cast-transpose (wgrad)", x, fp8_rows ? kBlockAxisBytes : e, kBlockColCastRate);
  // The row-wise scales transposed into the GEMM's layout before each non-grouped GEMM that reads them (the forward
  // and the dgrad): the profile runs one `utils::transpose` kernel before each of its 16 `fp8_ptp128c` GEMMs per
  // MoE layer (125 µs in all, 2-13 µs each), none before the grouped expert GEMMs (their scales come with DeepEP's
  // rows) or the wgrad GEMMs (the column-wise pass writes their layout); DeepGEMM's SM90 GEMMs take the LHS scales
  // MN-major and TMA-aligned (deepseek-ai/DeepGEMM, deep_gemm/utils/layout.py get_mn_major_tma_aligned_tensor). One
  // fp32 per 128 elements read and written: launch-bound at these sizes.
  if (kind == LinearKind::expert_in || kind == LinearKind::expert_out) return;
  auto scales = [&](bool forward, const char* what, double elems) {
    OpCost c = streaming_cost(named(name, what), OpClass::elementwise, units::bytes(elems / 128.0 * 4.0 * 2.0),
                              units::flop(0), d);
    if (forward) out.input_cast_fwd += c.time;
    out.add(forward, std::move(c));
  };
  scales(true, " fp8 scale transpose (GEMM layout)", x);
  scales(false, " grad fp8 scale transpose (GEMM layout, dgrad)", dy);
}

// Fp8WeightCopies::per_microbatch (wl/training.hpp): the weight copies Transformer Engine would cache are made in
// every micro-batch. An FP8-stored weight (FP8 parameters, a LoRA FP8 base) feeds the forward GEMM as it is; on a
// GPU whose FP8 GEMMs need the TN layout the backward transposes it (read 1 B, write 1 B per weight;
// Float8Tensor.transpose_2d). A 16-bit weight is quantised in the forward: read 2 B, write the recipe's copies.
// With cached copies both happen once per step and are not counted. Fp8WeightCopies::cached_one_layout
// (DeepSeek-V3's framework) keeps one FP8 copy and transposes it in every micro-batch, 16-bit weight or not: the
// same transpose (deepseek-ai/profile-data train.json: cuda::batched_transpose over each weight's 128x128 tiles).
void GemmQuantOps::weight_copies_per_microbatch(const std::string& name, const QuantBytes& q, double w,
                                                QuantOps& out) const {
  const bool one_layout = plan.fp8_weight_copies == wl::Fp8WeightCopies::cached_one_layout;
  if (plan.fp8_weight_copies != wl::Fp8WeightCopies::per_microbatch && !one_layout) return;
  const bool per_tensor =
      plan.precision.recipe == wl::QuantRecipe::delayed || plan.precision.recipe == wl::QuantRecipe::tensorwise;
  if (fp8_stored || (one_layout && !dequant)) {
    if (any_layout && per_tensor) return;
    out.add(false, streaming_cost(named(name, " weight transpose"), OpClass::elementwise, units::bytes(2.0 * w),
                                  units::flop(w), d));
    return;
  }
  if (dequant) return;  // int8 / NF4 bases are dequantised each pass (layer_cost.cpp)
  out.add(true, streaming_cost(named(name, " weight cast"), OpClass::elementwise, units::bytes(w * (2.0 + q.weight_cache)),
                               units::flop(w), d));
}

}  // namespace gpuplan::model::detail
