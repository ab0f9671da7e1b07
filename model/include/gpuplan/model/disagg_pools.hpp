#pragma once
// Disaggregated prefill and decode pools on their own GPU types and of attention-DP groups (issue #21): a prefill
// pool on one GPU (e.g. H100) and a decode pool on another (H200, H20), each with its own node (TP domain, NIC),
// calibration and $/GPU-hour; the KV of every prompt crosses the scale-out fabric once between them; either pool may
// run attention-DP with wide EP (wide_ep.hpp), DeepSeek's deployment [DSV3 §3.4]. The colocated planner and the
// same-GPU pools stay in serving_plan.cpp; both price every pass with serving.cpp.
//  [DistServe] Zhong et al., OSDI'24: disaggregated prefill and decode, each pool sized for its own phase.
//  [Splitwise] Patel et al., ISCA'24, "Splitwise: Efficient Generative LLM Inference Using Phase Splitting": prefill
//              and decode on different GPU types (H100 prompt machines, A100 token machines), KV over InfiniBand.
#include <string>
#include <vector>

#include "gpuplan/model/serving.hpp"

namespace gpuplan::model {

/// Sizes the two pools for `lambda` requests/s: for each TP size of each pool (within its node's scale-up domain,
/// PP 1), groups of dp = perf.attention_dp ranks (MoE; 1 otherwise).
///  - prefill: one prompt of E[isl] alone on a rank, t_p = prefill_time on the prefill system; each rank an M/G/1
///    queue at ρ = λ/(n·dp)·t_p; the fewest groups n whose TTFT = t_p + W_p(ρ) + t_kv meets the target;
///  - KV transfer: the prefill GPU's shard of one sequence's KV (its TP share) over the slower of the two pools'
///    NICs (send/recv on each side's scale-out tier), t_kv;
///  - decode: the largest batch per rank within the ITL target (KV capacity per rank on the decode GPU at E[isl] +
///    E[osl]), λ_d = dp·B/(osl·ITL) per group, groups = ⌈λ/λ_d⌉;
///  - cost: each pool's GPUs × its own GPU's price; the pair meeting the SLA at the lowest cost (fewest GPUs when a
///    price is unknown) wins.
/// `sys` is the plan's system: a pool without its own (options.prefill_system / decode_system nullptr) runs on it.
/// nullopt with a note in `notes` when no pair fits or the KV cannot cross (no scale-out link in the data).
std::optional<DisaggregatedPlan> size_disaggregated_pools(const wl::TransformerArch& a, const ParameterCounts& params,
                                                          const ServingPerfPlan& perf, const Traffic& traffic,
                                                          const Sla& sla, const ServingSystem& sys,
                                                          const ServingPlanOptions& options, double lambda,
                                                          std::vector<std::string>& notes,
                                                          Explain explain = Explain::on);

/// "prefill 4 groups × DP 8 × TP 4 on h800 + decode 1 group × DP 80 × TP 4 on h800": the pools as front ends print them.
std::string pools_layout(const DisaggregatedPlan& d);

}  // namespace gpuplan::model
