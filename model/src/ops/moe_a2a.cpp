// The MoE dispatch and combine by dispatcher, and compute/communication overlap (moe_a2a.hpp).
#include "moe_a2a.hpp"

#include <algorithm>
#include <cmath>

#include "moe_layer.hpp"

namespace gpuplan::model::detail {

const char* to_string(A2aKernel k) {
  switch (k) {
    case A2aKernel::nccl: return "NCCL all-to-all";
    case A2aKernel::deepep_normal: return "DeepEP normal";
    case A2aKernel::deepep_low_latency: return "DeepEP low-latency";
  }
  return "?";
}

double expected_distinct(double bins, double draws) {
  if (!(bins > 1.0)) return bins > 0 ? 1.0 : 0.0;
  return bins * (1.0 - std::pow(1.0 - 1.0 / bins, std::max(0.0, draws)));
}

double moe_node_limit(const wl::TransformerArch& a, int nodes) {
  if (nodes <= 1 || !a.moe) return double(std::max(1, nodes));
  const auto& m = *a.moe;
  const double k = double(m.experts_per_token);
  double limit = std::min(double(nodes), k);
  if (m.group_limited()) {
    // Group-limited routing ([DSV3] §2.1.2, "node-limited routing": each token is sent to at most M nodes, the
    // experts of the M groups with the highest affinity). The groups bound the nodes when they sit on whole nodes
    // (G a multiple of the nodes: G/N groups per node) or split evenly over nodes (N a multiple of G: each group on
    // N/G nodes); otherwise a group's experts can sit anywhere and nothing is bounded.
    const std::int64_t G = m.router_groups, g = m.router_group_topk;
    if (G % nodes == 0) limit = std::min(limit, double(g));
    else if (nodes % G == 0) limit = std::min(limit, double(g) * double(nodes / G));
  }
  return std::max(1.0, limit);
}

A2aCost moe_a2a(const A2aInput& in, const CommGroup& g) {
  A2aCost r;
  if (g.size <= 1) return r;
  const double iota = in.imbalance > 0.0 ? in.imbalance : 1.0, h = in.hidden, k = std::max(1.0, in.top_k);
  const double n = double(g.size), s = double(std::clamp(g.scale_up_size, 1, g.size));
  const int nodes = g.domains();
  if (in.kernel == A2aKernel::nccl) {
    // One copy per (token, expert) row as NCCL's all-to-all (collectives.cpp: (s−1)/n of the buffer over NVLink,
    // (n−s)/n over the NIC, the slower tier sets the time).
    r.dispatch = moe_all_to_all(in.rows, h * in.dispatch_bytes, g, iota);
    r.combine = moe_all_to_all(in.rows, h * in.combine_bytes, g, iota);
    r.dispatch_sent = units::bytes(in.rows * h * in.dispatch_bytes);
    r.combine_sent = units::bytes(in.rows * h * in.combine_bytes);
    const double per_token = in.tokens > 0 ? in.rows / in.tokens : k;
    r.nic_copies = per_token * (n - s) / n;
    r.nvlink_copies = per_token * (s - 1.0) / n;
    return r;
  }
  if (in.kernel == A2aKernel::deepep_normal) {
    r.node_limit = nodes > 1 ? std::min(double(nodes), in.node_limit > 0 ? in.node_limit : double(nodes)) : 1.0;
    r.distinct_nodes = expected_distinct(r.node_limit, k);
    r.nic_copies = nodes > 1 ? r.distinct_nodes * (double(nodes) - 1.0) / double(nodes) : 0.0;
    // On each node it reaches, a token's k/D experts fall on distinct GPUs of the s; the GPU it arrived at (the
    // same-rail GPU, or its own inside one node) keeps its copy.
    r.nvlink_copies = r.distinct_nodes * (s - 1.0) * (1.0 - std::pow(1.0 - 1.0 / s, k / r.distinct_nodes));
  } else {
    r.nic_copies = k * (n - s) / n;
    r.nvlink_copies = k * (s - 1.0) / n;
  }
  auto one = [&](double bytes_per_elem) {
    const double row = h * bytes_per_elem;
    units::Seconds t_nic{}, t_nvl{};
    if (nodes > 1 && g.scale_out)
      t_nic = units::bytes(in.tokens * r.nic_copies * row) / (g.scale_out->uni_per_gpu * g.scale_out->p2p_eta());
    if (s > 1) t_nvl = units::bytes(in.tokens * r.nvlink_copies * row) / (g.scale_up.uni_per_gpu * g.scale_up.p2p_eta());
    units::Seconds alpha = s > 1 ? g.scale_up.latency : units::Seconds(0);
    if (nodes > 1 && g.scale_out) alpha = std::max(alpha, g.scale_out->latency);
    return g.call_latency + alpha + std::max(t_nic, t_nvl) * iota;
  };
  r.dispatch = one(in.dispatch_bytes);
  r.combine = one(in.combine_bytes);
  r.dispatch_sent = units::bytes(in.tokens * (r.nic_copies + r.nvlink_copies) * h * in.dispatch_bytes);
  r.combine_sent = units::bytes(in.tokens * (r.nic_copies + r.nvlink_copies) * h * in.combine_bytes);
  return r;
}

double a2a_sm_share(A2aKernel k, int gpu_sms, double nccl_share) {
  switch (k) {
    case A2aKernel::deepep_normal: return gpu_sms > 0 ? std::min(1.0, 20.0 / double(gpu_sms)) : nccl_share;
    case A2aKernel::deepep_low_latency: return 0.0;
    case A2aKernel::nccl: break;
  }
  return nccl_share;
}

units::Seconds overlap_exposed(units::Seconds comm, units::Seconds window, double sm_share) {
  if (!(comm > units::Seconds(0))) return units::Seconds(0);
  const units::Seconds left = std::max(units::Seconds(0), comm - std::max(units::Seconds(0), window));
  return left + (comm - left) * std::clamp(sm_share, 0.0, 1.0);
}

}  // namespace gpuplan::model::detail
