#pragma once
// Internal to gpuplan::model: one MoE layer on one GPU, priced the same way by training (train/layer_cost.cpp,
// train/moe_dispatch.cpp) and serving (serve/serving.cpp) from the layer's op graph (graph.hpp: router, routed
// experts, shared experts): the sharding arithmetic (attention TP, expert TP, EP, attention-DP with wide EP), the
// grouped expert GEMM, the dispatch/combine all-to-all, the load imbalance, and the terms --explain shows.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::model::detail {

/// How one MoE layer's routed experts sit on the GPUs for one pass (training forward/backward, prefill, decode).
/// `tokens` pass through this GPU's attention GEMMs (the attention-TP ranks share them); each expert's width is split
/// over `etp` GPUs and the experts over `ep`, so the EP × ETP group routes T·ep·etp/tp distinct tokens:
///  - training (Megatron-Core): T = b·s/cp, etp = tp unless parallel folding sets it, EP taken from the DP ranks;
///  - serving with attention TP and EP inside it (vLLM/SGLang --enable-expert-parallel): etp = tp/ep, so the group
///    routes the T tokens every TP rank holds;
///  - serving with attention-DP and wide EP (SGLang --enable-dp-attention, DeepSeek's deployment): tp = etp = 1, the
///    group routes T·ep tokens, T from each attention rank.
/// `imbalance` ι: the busiest EP rank's routed rows over the mean (1: uniform routing); every rank waits for it at
/// the combine. Below 1 only under an expert capacity below the balanced load (training's moe_capacity_factor < 1:
/// the dropped tokens' rows neither travel nor reach a GEMM).
struct MoeSharding {
  double tokens = 0;
  std::int64_t tp = 1, etp = 1, ep = 1;
  double imbalance = 1.0;
};

/// ceil(x) and at least 1: a count of whole things (tokens, experts touched, rows per expert) from an expectation; x
/// within 1e-9 above an integer counts as that integer. Training's and serving's MoE layers and serving's token counts.
inline std::int64_t at_least_one(double x) { return std::max<std::int64_t>(1, std::llround(std::ceil(x - 1e-9))); }

/// What one GPU's routed experts compute in one pass of one MoE layer.
struct MoeExpertWork {
  double group_tokens = 0;          ///< distinct tokens the EP × ETP group routes: T·ep·etp/tp
  double rows = 0;                  ///< token-expert rows this GPU's experts compute: group·k/ep × ι
  double local = 1;                 ///< routed experts on this GPU: E/ep
  double touched = 1;               ///< expected local experts with at least one row: local·(1 − (1 − k/E)^group)
  std::int64_t groups = 1;          ///< groups of the grouped GEMM: ⌈touched⌉
  std::int64_t rows_per_expert = 1;  ///< ⌈rows / touched⌉
  std::int64_t width = 1;           ///< each expert's width on this GPU: i_e/etp (at least 1)
  double imbalance = 1;
};
MoeExpertWork moe_expert_work(const MoeSharding& s, std::int64_t experts, std::int64_t top_k, std::int64_t width);

/// One grouped expert GEMM from `batched`, the gemm_cost of one group's shape {rows_per_expert, n, k} × `groups`:
/// scaled to the expected (fractional) touched experts, then the measured grouped-kernel law (moe_cost.hpp,
/// grouped_gemm). Pricing one expert's narrow GEMM and repeating it overstated 100 experts of 4×7168×256 on an H100
/// ×3 (issue #21).
OpCost moe_expert_gemm(OpCost batched, const MoeExpertWork& w, const Device& d);

/// The dispatch (or the combine) of `rows` token rows of `row_bytes` each that one GPU sends over the EP group `g`
/// through NCCL's all-to-all (collectives.cpp: (s−1)/n of the buffer over NVLink, (n−s)/n over the NIC); the busiest
/// rank (ι) sets the pace.
units::Seconds moe_all_to_all(double rows, double row_bytes, const CommGroup& g, double imbalance);

/// The terms of one MoE layer on one GPU for one pass, recorded as the pricer adds each op (forward + backward in
/// training). `imbalance` is what ι > 1 adds to the expert GEMMs and the all-to-alls (already inside them); it is
/// found by pricing the layer again at ι = 1, only when --explain asks.
struct MoeLayerTerms {
  enum Term : std::size_t { router, dispatch, expert_gemm, combine, shared, routing, host, kCount };
  std::array<units::Seconds, kCount> t{};
  units::Seconds imbalance{};
  MoeExpertWork work;
  void add(Term k, units::Seconds dt) { t[k] += dt; }
  [[nodiscard]] units::Seconds total() const;
};

/// The explain node of one MoE layer: router, dispatch, expert GEMMs, combine, shared experts, the routing and
/// host terms, and the imbalance, each with its value. `pass` names the pass ("training step, forward + backward",
/// "decode step"); `sharding` describes the layout; `imbalance_origin` says where ι came from.
Derivation explain_moe_terms(const std::string& id, const std::string& pass, const MoeLayerTerms& m,
                             const std::string& sharding, const Origin& imbalance_origin);

}  // namespace gpuplan::model::detail
