// Weights per GPU as a fold over the op graph (gpuplan/model/graph_weights.hpp).
#include "gpuplan/model/graph_weights.hpp"

#include <algorithm>

namespace gpuplan::model {

GraphWeights& GraphWeights::operator+=(const GraphWeights& o) {
  split += o.split;
  experts += o.experts;
  kv_heads += o.kv_heads;
  replicated += o.replicated;
  small += o.small;
  vocab += o.vocab;
  return *this;
}

GraphWeights GraphWeights::scaled(double n) const {
  return {split * n, experts * n, kv_heads * n, replicated * n, small * n, vocab * n};
}

namespace {

bool vocabulary_part(Part p) {
  return p == Part::embedding || p == Part::position_embedding || p == Part::lm_head;
}

/// Adds one weight tensor of op `o` to its class.
void add_tensor(const Op& o, const WeightTensor& w, GraphWeights& r) {
  const double n = double(w.elements);
  if (vocabulary_part(o.part)) {
    r.vocab += n;
    return;
  }
  switch (w.split) {
    case TpSplit::split: (o.part == Part::routed_experts ? r.experts : r.split) += n; break;
    case TpSplit::kv_heads: r.kv_heads += n; break;
    case TpSplit::replicated: r.replicated += n; break;
    case TpSplit::small: r.small += n; break;
  }
}

}  // namespace

GraphWeights graph_weights(const OpGraph& g) {
  GraphWeights r;
  for (const Op& o : g)
    for (std::uint8_t i = 0; i < o.weight_count; ++i)
      if (!o.weights[i].tied) add_tensor(o, o.weights[i], r);
  return r;
}

GraphWeights stage_head_weights(const OpGraph& head, bool first_stage, bool last_stage) {
  GraphWeights r;
  for (const Op& o : head) {
    const bool before = o.part == Part::embedding || o.part == Part::position_embedding;
    if (before ? !first_stage : !last_stage) continue;
    for (std::uint8_t i = 0; i < o.weight_count; ++i)
      if (!o.weights[i].tied || !first_stage) add_tensor(o, o.weights[i], r);
  }
  return r;
}

double weight_bytes_per_gpu(const GraphWeights& w, const WeightStorage& s) {
  const double t = double(std::max(1, s.tp)), edp = double(std::max(1, s.expert_dp));
  return (w.split / t + w.experts / (t * edp) + w.kv_heads * s.kv_share + w.replicated) * s.bytes +
         w.small * s.bytes16 + w.vocab / t * s.bytes16;
}

}  // namespace gpuplan::model
