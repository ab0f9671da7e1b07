// The MoE token dispatch and combine of one micro-batch through one MoE layer on an expert-parallel group
// (training_core.hpp: moe_dispatch): NCCL's all-to-all, or DeepSeek-V3's node-deduplicating kernels (DeepEP).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "moe_layer.hpp"
#include "training_core.hpp"

namespace gpuplan::model::detail {

double moe_node_limit(const wl::TransformerArch& a, int nodes) {
  if (nodes <= 1 || !a.moe) return double(std::max(1, nodes));
  const auto& m = *a.moe;
  const double k = double(m.experts_per_token);
  double limit = std::min(double(nodes), k);
  if (m.group_limited()) {
    // Group-limited routing (DeepSeek-V3 §2.1.2, "node-limited routing": each token is sent to at most M nodes, the
    // experts of the M groups with the highest affinity). The groups bound the nodes when they sit on whole nodes
    // (G a multiple of the nodes: G/N groups per node) or split evenly over nodes (N a multiple of G: each group on
    // N/G nodes); otherwise a group's experts can sit anywhere and nothing is bounded.
    const std::int64_t G = m.router_groups, g = m.router_group_topk;
    if (G % nodes == 0) limit = std::min(limit, double(g));
    else if (nodes % G == 0) limit = std::min(limit, double(g) * double(nodes / G));
  }
  return std::max(1.0, limit);
}

double moe_remote_nodes(const wl::TransformerArch& a, int nodes) {
  if (nodes <= 1 || !a.moe) return 0.0;
  // Uniform (balanced) routing: the k experts of a token fall uniformly on the M nodes its router allows, so it
  // reaches M·(1 − (1 − 1/M)^k) distinct nodes, each of them its own node with probability 1/N.
  const double M = moe_node_limit(a, nodes), k = double(a.moe->experts_per_token);
  const double distinct = M * (1.0 - std::pow(1.0 - 1.0 / M, k));
  return distinct * (double(nodes) - 1.0) / double(nodes);
}

MoeDispatch moe_dispatch(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& g) {
  MoeDispatch r;
  if (!a.moe || g.size <= 1) return r;
  // Tokens per EP rank: the micro-batch's (s/cp)·b, × etp/tp under parallel folding (the unique tokens of the etp
  // sequence shards an expert-TP group holds; etp = tp without folding, the factor 1).
  const double T = double(plan.micro_batch) * double(plan.seq_len) / double(std::max(1, plan.par.cp)) *
                   (double(plan.par.expert_tp()) / double(std::max(1, plan.par.tp)));
  const double k = double(a.moe->experts_per_token), h = double(a.hidden);
  const double ab = plan.precision.activation_bytes;
  const double n = double(g.size), s = double(std::max(1, g.scale_up_size));
  const int nodes = g.domains();
  r.imbalance = std::max(1.0, plan.moe_imbalance);
  if (plan.ep_dispatch == wl::EpDispatch::all_to_all) {
    // One copy per (token, expert), T·k·h·a_b bytes each way, as NCCL's all-to-all (moe_layer.hpp moe_all_to_all,
    // the same as serving's: (s−1)/n of the buffer over NVLink, (n−s)/n over the NIC, the slower tier sets the time).
    const units::Bytes buf = units::bytes(T * k * h * ab);
    r.dispatch_bytes = r.combine_bytes = buf;
    r.dispatch = r.combine = moe_all_to_all(T * k, h * ab, g, r.imbalance);
    r.ib_copies = k * (n - s) / n;
    r.nvlink_copies = k * (s - 1.0) / n;
    return r;
  }
  // DeepSeek-V3's kernels (§3.2.2; DeepEP normal kernels): a token goes once over InfiniBand to each distinct remote
  // node among its experts' nodes (to the GPU of the same rail), which forwards it over NVLink to the GPUs that hold
  // its experts there; IB and NVLink transfers run at the same time (the slower sets the time). §3.3.2: the dispatch
  // moves FP8 activations (1 B plus one fp32 scale per 128-element tile) when the GEMMs are FP8; the combine stays
  // BF16 (the activation dtype).
  r.node_limit = moe_node_limit(a, nodes);
  r.ib_copies = moe_remote_nodes(a, nodes);
  r.nvlink_copies = k * (s - 1.0) / s;
  const double b_dispatch = plan.precision.compute == hw::Precision::fp8 ? 1.0 + 4.0 / 128.0 : ab;
  auto one = [&](double bytes_per_elem) {
    const double row = h * bytes_per_elem;
    units::Seconds t_out{}, t_up{};
    if (nodes > 1 && g.scale_out) t_out = units::bytes(T * r.ib_copies * row) / (g.scale_out->uni_per_gpu * g.scale_out->p2p_eta());
    if (s > 1) t_up = units::bytes(T * r.nvlink_copies * row) / (g.scale_up.uni_per_gpu * g.scale_up.p2p_eta());
    units::Seconds alpha = s > 1 ? g.scale_up.latency : units::Seconds(0);
    if (nodes > 1 && g.scale_out) alpha = std::max(alpha, g.scale_out->latency);
    return g.call_latency + alpha + std::max(t_out, t_up) * r.imbalance;
  };
  r.dispatch = one(b_dispatch);
  r.combine = one(ab);
  r.dispatch_bytes = units::bytes(T * (r.ib_copies + r.nvlink_copies) * h * b_dispatch);
  r.combine_bytes = units::bytes(T * (r.ib_copies + r.nvlink_copies) * h * ab);
  return r;
}

}  // namespace gpuplan::model::detail
