#pragma once
// Internal to serve/: what serving_memory.cpp (serving memory per GPU and the KV cache beside the weights) and
// serving_memory_explain.cpp (its --explain tree) share: the evaluation context, one layout's evaluation, the
// communicator count and the byte formatting of the derivations.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/graph_weights.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving_memory.hpp"

namespace gpuplan::model::serving_memory_internal {

using units::Bytes;
using units::format;

inline std::string gib(Bytes b) { return format(b, units::BytePrefix::binary); }
inline std::string both(Bytes b) { return fmt::format("{} ({})", format(b), gib(b)); }

/// One evaluation's inputs and what is derived from them once (serving_ctx).
struct Ctx {
  const wl::TransformerArch& a;
  const ParameterCounts& p;
  const hw::GpuSpec& gpu;
  const ServingMemoryPlan& plan;
  Bytes capacity{};
  double wq_bytes = 2.0;  ///< bytes per quantized weight
  double w16_bytes = 2.0;  ///< bytes per unquantized weight
  Bytes activations{};
  /// Each layer kind's weights by class, folded once from its op graph (graph_weights.hpp), and each layer's kind.
  std::array<GraphWeights, LayerKind::kCount> kinds{};
  std::vector<std::uint8_t> layer_kind;
  GraphWeights dense;  ///< a dense attention layer's (the explain tree's per-layer inputs)
  const OpGraph head;  ///< the embedding, final norm and LM head (build_head_graph)
};

/// NCCL communicators of one replica's GPU: TP and PP.
inline int communicators(int tp, int pp) { return (tp > 1 ? 1 : 0) + (pp > 1 ? 1 : 0); }

/// One TP × PP layout evaluated: its KV bytes per token, each stage's memory, the binding stage, the concurrency.
struct LayoutEval {
  KvTokenBytes token;
  std::vector<StageMemory> stages;
  int binding = 0;
  std::int64_t max_concurrency = 0;
  std::vector<std::string> layout_reasons;  ///< TP/PP do not fit the model
  std::vector<std::string> engine_reasons;  ///< the engine refuses or runs out of memory outside its fraction
};

/// The --explain tree of serving_memory (serving_memory_explain.cpp).
void explain_serving_memory(const Ctx& c, const LayoutEval& e, ServingMemory& r);

}  // namespace gpuplan::model::serving_memory_internal

namespace gpuplan::model {
namespace {  // the names both files use unqualified (only they include this header)

using units::Bytes;
using units::format;
using units::format_count;
using units::format_number;

using serving_memory_internal::both;
using serving_memory_internal::communicators;
using serving_memory_internal::Ctx;
using serving_memory_internal::explain_serving_memory;
using serving_memory_internal::gib;
using serving_memory_internal::LayoutEval;

}  // namespace
}  // namespace gpuplan::model
