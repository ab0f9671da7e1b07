#pragma once
// Attention data parallelism with wide expert parallelism in serving (issue #21): `dp` attention ranks of `tp` GPUs
// each run attention on their own batch and KV cache; the routed experts spread over all dp × tp GPUs (EP = dp·tp,
// every expert whole on one GPU); each MoE layer's dispatch and combine all-to-all span the group, over NVLink inside
// a node and the NICs (RDMA) across nodes. The per-step time of a rank is attention on its local batch plus the MoE
// layer at the group's tokens (serving.cpp prices both; moe_layer.hpp the MoE part), and the planner sizes the
// deployment in whole groups.
//
// How engines and DeepSeek run it (cited where used):
//  [SGL-DP]  SGLang --enable-dp-attention --dp N --tp M (attention TP M/N on each of N ranks; --ep M spreads the
//            experts over all M GPUs; --moe-a2a-backend deepep) — LMSYS blog 2025-05-05 "Deploying DeepSeek with PD
//            Disaggregation and Large-scale Expert Parallelism on 96 H100 GPUs" (DP attention, DP dense FFN with
//            --moe-dense-tp-size 1, DP LM head, DeepEP normal/low-latency dispatch, two-batch overlap).
//  [vLLM-DP] vLLM --data-parallel-size N --enable-expert-parallel (--tensor-parallel-size t): EP = N·t.
//  [DSV3]    DeepSeek-V3 Technical Report (arXiv 2412.19437) §3.4: prefill attention TP4 + SP with DP8, MoE EP32 over
//            4 nodes; decode attention TP4 + SP with DP80, MoE EP320 over 40 nodes; dense MLPs of the shallow layers at
//            TP1; all-to-all across nodes over IB, then forwarded inside the node over NVLink.
#include <cstdint>
#include <string>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::model {

/// One GPU's dispatch (and combine) of one MoE layer under attention-DP with wide EP. Each attention rank holds T
/// tokens over its tp GPUs (sequence parallel: T/tp each, [DSV3]); a GPU sends its T/tp tokens × k token-expert rows,
/// so the group routes T·dp tokens and every GPU receives (T·dp)·k/ep = T·k/tp rows on average. NCCL's all-to-all
/// (collectives.cpp) sends (s−1)/n of the buffer to the s − 1 peers of its scale-up domain and (n−s)/n over its NIC.
struct WideEpAllToAll {
  double rows = 0;                 ///< token-expert rows one GPU sends: T·k/tp
  units::Bytes dispatch{};         ///< rows × h × dispatch bytes per element
  units::Bytes combine{};          ///< rows × h × combine bytes per element
  double nvlink_share = 0;         ///< (s − 1)/n: rows to peers in the GPU's scale-up domain
  double nic_share = 0;            ///< (n − s)/n: rows over the NIC (0 inside one domain)
  units::Seconds dispatch_time{};  ///< the dispatch on `group` (collective_cost, NCCL all-to-all)
  units::Seconds combine_time{};
};
WideEpAllToAll wide_ep_all_to_all(double tokens_per_rank, std::int64_t top_k, std::int64_t hidden, int tp,
                                  double dispatch_element_bytes, double combine_element_bytes, const CommGroup& group);

/// The slowest of `dp` attention ranks over the mean when each holds `batch_per_rank` sequences whose KV lengths are
/// independent with coefficient of variation `cv`: 1 + cv·z_dp/√B (a rank's total KV is a sum of B lengths, normal
/// by the central limit theorem; z_dp = the expected largest of dp standard normals, Blom's Φ⁻¹((dp − 0.375)/(dp +
/// 0.25))). Every MoE layer's all-to-all waits for the slowest rank, so its attention sets the pace. 1 at dp 1 or
/// cv 0. E.g. dp 80, B 128, cv 1 (exponential lengths): 1 + 2.32/11.3 = 1.21.
double dp_rank_imbalance(int dp, double batch_per_rank, double cv);

/// The --explain node of attention-DP with wide EP for one forward pass of one rank (`fb`, priced as `fc`): the group,
/// the tokens it routes, one GPU's all-to-all bytes and their NVLink/NIC split, the per-step decomposition (attention
/// on the local batch + the MoE layer at the group's tokens) and the assumptions (balanced ranks, no redundant
/// experts, dense FFNs at the attention TP, NCCL's all-to-all without DeepEP's kernels or two-batch overlap).
Derivation explain_wide_ep(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                           const CommGroup& ep_group, const ForwardCost& fc);

/// "3 groups × DP 16 × TP 1 × PP 1 (EP 16)": a wide-EP deployment as the front ends print it (replica_layout's
/// counterpart; a group of dp × tp × pp GPUs is the planner's unit).
std::string group_layout(std::int64_t groups, int dp, int tp, int pp);

/// What the planner says about sizing in groups: each candidate is a group of dp ranks at batch B each (KV capacity
/// per rank), λ_group = dp·B/(osl·ITL), groups = ⌈λ/λ_group⌉, GPUs = groups·dp·tp·pp; the prompt queue is the group's
/// (its dp ranks as one server of dp times a rank's rate: optimistic against dp separate queues at light load).
std::string wide_ep_plan_note(const ServingPerfPlan& plan);

}  // namespace gpuplan::model
