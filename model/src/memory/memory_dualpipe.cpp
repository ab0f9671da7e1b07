// DualPipe's activation memory per device and its copies of each stage (DeepSeek-V3 arXiv:2412.19437 §3.2.1, Table 2;
// deepseek-ai/DualPipe).

#include <algorithm>

#include "memory_core.hpp"

namespace gpuplan::model::detail {

namespace {

/// Bytes per token one micro-batch of `layers` layers (`moe` of them MoE, `kinds` by cost kind) keeps.
double stored_bytes(const Ctx& c, const LayerSums& sums, std::int64_t layers, std::int64_t moe,
                    const std::array<std::int64_t, LayerKind::kCount>& kinds) {
  if (!sums.by_kind)
    return double(layers - moe) * stored_per_token(c, sums.dense) + double(moe) * stored_per_token(c, sums.moe);
  double b = 0.0;
  for (std::size_t k = 0; k < kinds.size(); ++k)
    if (kinds[k] > 0) b += double(kinds[k]) * stored_per_token(c, sums.kind[k]);
  return b;
}

}  // namespace

double dualpipe_layer_factor(const Ctx& c, const LayerSums& sums, const StageShape& shape, int p) {
  // DualPipe.step on rank i (h = min(i, PP−1−i), "half_rank"): step 1 runs 2(PP/2 − h − 1) forward chunks of phase
  // 0 (the device's shallower stage: stage i on the first half of the ranks, stage PP−1−i's mirror on the second),
  // step 2 h + 1 pairs of phase-0 and phase-1 forwards, step 3 trades one phase-1 backward for one phase-1 forward,
  // and step 4's first overlapped pair adds a phase-0 forward while a phase-1 backward still holds its inputs:
  // PP − h micro-batches of the shallower stage and h + 1 of the deeper one, PP + 1 in all.
  const int h = std::min(shape.index, p - 1 - shape.index);
  const double all = stored_bytes(c, sums, shape.layers, shape.moe_layers, shape.kind_layers);
  if (all <= 0.0) return double(p + 1) / 2.0;
  const double deep = stored_bytes(c, sums, shape.deep_layers, shape.deep_moe_layers, shape.deep_kind_layers);
  const double shallow = all - deep;
  return (double(p - h) * shallow + double(h + 1) * deep) / all;
}

int stage_copies(const wl::TrainingPlan& plan) { return plan.dualpipe() ? 2 : 1; }

}  // namespace gpuplan::model::detail
