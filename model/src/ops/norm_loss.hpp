#pragma once
// The norm and loss kernels of a training step, as ops, by implementation: a layer's norm (one fused kernel each way;
// PyTorch's eager LayerNorm at its measured rate; RMSNorm written as PyTorch ops, priced op by op) and the LM loss's
// cross-entropy (the HBM bytes per logit of each kernel: FlashAttention's xentropy, PyTorch eager, Megatron-Core's
// unfused and jit-fused losses, one fused pass). layer_cost.cpp places the norms in the layer's forward and backward;
// step_terms.cpp places the loss beside the LM head.
#include <cstdint>
#include <string>

#include "gpuplan/model/ops.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model::detail {

/// How a layer's norm runs: one fused kernel each way (Megatron-Core / Transformer Engine, torch's fused RMSNorm and
/// LayerNorm) at the streaming rate; PyTorch's eager LayerNorm kernels at their measured rate; RMSNorm written as
/// PyTorch ops (wl::NormKernel::composite, an RMSNorm model), each op a kernel.
enum class NormImpl { fused, eager_layernorm, composite };
NormImpl norm_impl(const wl::TransformerArch& a, const wl::TrainingPlan& plan);

/// One norm's forward and backward kernels; `priced` false when the norm has no elements (nothing to add).
struct NormCost {
  OpCost fwd, bwd;
  bool priced = false;
};
/// One norm over `elems` elements (the tokens on this GPU × the normalised width `row`: h for a layer's norm,
/// head_dim for a q/k norm) of `a_b` bytes, forward and backward. A fused norm kernel is the one kernel serving
/// prices too (ops.hpp norm_cost: 2·a_b bytes per element forward, twice that backward, and a fixed cost that grows
/// with the row inside a CUDA graph); the eager LayerNorm runs it at its measured rate; the composite form prices
/// each PyTorch op. `names`: whether to name the ops (from `name`; the search's sums need no names).
NormCost training_norm_cost(const std::string& name, bool names, NormImpl impl, double elems, std::int64_t row,
                            double a_b, const Device& d);

/// HBM bytes per logit of the LM loss's cross-entropy, forward and backward, for the plan's kernels.
struct LossBytes {
  double forward = 0, backward = 0;
  std::string kernel;  ///< the implementation, for display
};
LossBytes loss_bytes_per_logit(const wl::TrainingPlan& plan);

/// The cross-entropy over `logits` logits (the tokens × the vocabulary shard) of the plan's kernel, forward and
/// backward: its bytes per logit (loss_bytes_per_logit) and 5 + 3 FLOPs per logit. `names`: name the ops.
struct LossCost {
  OpCost fwd, bwd;
};
LossCost cross_entropy_cost(const wl::TrainingPlan& plan, double logits, bool names, const Device& d);

}  // namespace gpuplan::model::detail
