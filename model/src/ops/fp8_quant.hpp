#pragma once
// The FP8 / FP4 quantisation kernels around a training GEMM, as ops: Transformer Engine's per-operand passes (the
// per-tensor recipes and MXFP8, with MXFP8's scale swizzles), DeepSeek's per-axis 1×128 casts, and the per-micro-batch
// weight copies. The bytes and measured rates are quant_recipe.hpp's; every kernel is priced by one cast pricer
// (cast_at_rate). layer_cost.cpp places the ops in the layer's forward and backward.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"
#include "quant_recipe.hpp"

namespace gpuplan::model::detail {

using units::Seconds;

/// The cast pricer: a streaming kernel of `bytes` at `rate` of the streaming rate (quant_recipe.hpp), its fixed cost
/// kept. Shared by Transformer Engine's casts and DeepSeek's per-axis casts.
OpCost cast_at_rate(const std::string& op, double bytes, double elems, double rate, const Device& d);

/// Weights stored in FP8 (FP8 parameters, a LoRA FP8 base): under FP8 GEMMs Transformer Engine hands the FP8 data to
/// the GEMM as it is (the weight is already the quantised tensor: get_weight_workspace returns it), no dequantise.
bool fp8_stored_weights(const wl::TrainingPlan& plan);
/// A LoRA base stored in another format than the compute dtype (int8, NF4, fp8): dequantised before its GEMMs.
bool lora_base_dequantised(const wl::TrainingPlan& plan);

/// The quantisation of the FP8 / FP4 GEMM weights once per optimizer step, `weights` GEMM weights on this GPU of which
/// it updates `shard` (Fp8WeightCopies::cached: Transformer Engine quantises each weight in the step's first
/// micro-batch, is_first_microbatch, and keeps the copies; 0 under the other settings, whose copies layer_cost prices
/// per micro-batch, and without quantised GEMMs; 0 under ZeRO-3, whose frameworks quantise the gathered or sharded
/// weights in their own ways, not priced: torchao casts each shard before the FSDP all-gather in every pass):
///  - 16-bit working weights: the input recipe's passes over every weight (te_quant_passes: amax, cast or
///    cast-transpose, MXFP8's two-axis quantise), read 2 B;
///  - FP8 parameters (fp8_params, Megatron's --fp8-param-gather): the distributed optimizer writes the FP8 parameter
///    of its shard from the master copy (TE pytorch/tensor/utils.py cast_master_weights_to_fp8: current scaling
///    reads the shard's amax first), read master_bytes and write the copy (1 B, MXFP8 both axes); after the
///    parameter all-gather, Hopper's per-tensor weights are transposed once (1 + 1 B, kFp8TransposeRate) and MXFP8's
///    gathered copies are copied back into Transformer Engine's storage (Megatron-Core param_and_grad_buffer.py
///    reuse_grad_buf_for_mxfp8_param_ag: read and write both).
/// Each pass is one kernel of the cast pricer over all the bytes (the per-tensor launches are not counted).
Seconds weight_quantisation_time(double weights, double shard, const wl::TrainingPlan& plan, const Device& d);

/// One quantisation kernel and the pass it runs in.
struct QuantOp {
  bool forward = true;
  OpCost op;
};
/// The quantisation kernels of one GEMM's three passes, in the order the layer adds them (its sums' order), and the
/// forward time of the input's own cast (what an op-level recompute of the GEMM runs again).
struct QuantOps {
  std::array<QuantOp, 16> op{};
  std::size_t n = 0;
  Seconds input_cast_fwd{};
  void add(bool forward, OpCost c) { op[n++] = {forward, std::move(c)}; }
  [[nodiscard]] const QuantOp* begin() const { return op.data(); }
  [[nodiscard]] const QuantOp* end() const { return op.data() + n; }
};

/// The quantisation kernels of a layer's FP8 / FP4 GEMMs under the plan's recipe.
class GemmQuantOps {
 public:
  GemmQuantOps(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const Device& d, bool keep_ops);

  /// The kernels around the GEMM `name` (kind `kind`, X of m × k, W of k × n, dY of m × n, `batch` of them) whose
  /// input X is a LayerNormLinear's norm output when `norm_input`: its operands' quantisation (DeepSeek's per-axis
  /// casts, or Transformer Engine's passes and MXFP8's swizzles), then the weight copies made per micro-batch.
  /// `replicated`: a linear every TP rank holds whole and runs on its own rows (MLA's down-projections), so no
  /// sequence-parallel gather follows its input's quantisation.
  [[nodiscard]] QuantOps gemm_operands(const std::string& name, LinearKind kind, double m, double k, double n,
                                       double batch, bool norm_input, bool replicated = false) const;

 private:
  std::string named(const std::string& name, const char* suffix) const { return keep_ops ? name + suffix : ""; }
  void te_casts(const std::string& name, LinearKind kind, const char* recipe, double x, double dy, bool norm_input,
                std::int64_t kernels, bool replicated, QuantOps& out) const;
  void mx_swizzles(const std::string& name, double x, double w, double dy, QuantOps& out) const;
  void per_axis_casts(const std::string& name, LinearKind kind, double x, double dy, QuantOps& out) const;
  void weight_copies_per_microbatch(const std::string& name, const QuantBytes& q, double w, QuantOps& out) const;

  const wl::TrainingPlan& plan;
  const Device& d;
  const bool keep_ops;
  const bool gated;
  const bool any_layout;  // fp8_any_layout of the GPU
  const bool per_axis;    // DeepSeek's framework (one_layout_blockwise)
  const bool fp8_stored;
  const bool dequant;
  const std::int64_t t;
  const double e;  // activation bytes
};

}  // namespace gpuplan::model::detail
