// The fused conv–batch-norm–ReLU training engine's roles per op (vision_kernels.hpp, FusedRole).
#include "vision_kernels.hpp"

namespace gpuplan::model::detail {

std::vector<FusedRole> fused_training_roles(const wl::VisionGraph& g) {
  std::vector<FusedRole> r(g.ops.size(), FusedRole::keep);
  auto gemm_conv = [&](std::size_t i) {
    return i < g.ops.size() && g.ops[i].kind == VisionOpKind::conv && g.ops[i].gemm() && !g.ops[i].transposed;
  };
  auto relu = [&](std::size_t i) {
    return i < g.ops.size() && g.ops[i].kind == VisionOpKind::activation && g.ops[i].act == wl::VisionAct::relu;
  };
  // A residual add the engine takes: followed by a ReLU (scale-bias-add-ReLU; the fused-ops API's activation is ReLU).
  auto fused_add = [&](std::size_t i) { return i < g.ops.size() && g.ops[i].kind == VisionOpKind::add && relu(i + 1); };
  auto batch_norm = [&](std::size_t i) {
    return i < g.ops.size() && g.ops[i].kind == VisionOpKind::norm && g.ops[i].norm == wl::VisionNorm::batch;
  };
  for (std::size_t i = 1; i < g.ops.size(); ++i) {
    const FusedRole prev = r[i - 1];
    if (batch_norm(i) && gemm_conv(i - 1)) {
      // Only where every consumer takes the raw map with the scale and bias: a ReLU, a fused block output, or (ResNet's
      // op order) the projection branch's conv-BN before that block output.
      if (relu(i + 1) || fused_add(i + 1) || (gemm_conv(i + 1) && batch_norm(i + 2) && fused_add(i + 3)))
        r[i] = FusedRole::bn_in_conv;
    } else if (relu(i) && prev == FusedRole::bn_in_conv) {
      r[i] = gemm_conv(i + 1) ? FusedRole::act_in_prologue : FusedRole::bn_act_apply;
    } else if (fused_add(i) && prev == FusedRole::bn_in_conv) {
      r[i] = FusedRole::block_output;
    } else if (relu(i) && prev == FusedRole::block_output) {
      r[i] = FusedRole::relu_in_mask;
    }
  }
  return r;
}

}  // namespace gpuplan::model::detail
