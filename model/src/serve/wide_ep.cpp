// Attention-DP with wide EP in serving (wide_ep.hpp): the all-to-all arithmetic, the DP-rank imbalance bound, the
// explain node, the layout text. The forward pass itself is serving.cpp's pricer (attention on the rank's batch, the
// MoE layer at the group's tokens through moe_layer.hpp).
#include "gpuplan/model/wide_ep.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collectives.hpp"
#include "serving_internal.hpp"

namespace gpuplan::model {

namespace {

/// Φ⁻¹(p) for 0 < p < 1 by bisection on Φ(x) = erfc(−x/√2)/2 (exact to 1e-12; called once per explain).
double normal_quantile(double p) {
  double lo = -10.0, hi = 10.0;
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

WideEpAllToAll wide_ep_all_to_all(double tokens_per_rank, std::int64_t top_k, std::int64_t hidden, int tp,
                                  double dispatch_element_bytes, double combine_element_bytes, const CommGroup& group) {
  WideEpAllToAll r;
  r.rows = std::max(0.0, tokens_per_rank) * double(std::max<std::int64_t>(1, top_k)) / double(std::max(1, tp));
  r.dispatch = units::bytes(r.rows * double(hidden) * dispatch_element_bytes);
  r.combine = units::bytes(r.rows * double(hidden) * combine_element_bytes);
  const double n = double(std::max(1, group.size));
  const double s = double(std::clamp(group.scale_up_size, 1, std::max(1, group.size)));
  r.nvlink_share = (s - 1.0) / n;
  r.nic_share = (n - s) / n;
  auto t = [&](units::Bytes b) {
    if (group.size <= 1 || b.raw() <= 0) return units::Seconds(0);
    return collective_cost(Collective::all_to_all, b, group, CollectiveAlgorithm::automatic, Explain::off).time;
  };
  r.dispatch_time = t(r.dispatch);
  r.combine_time = t(r.combine);
  return r;
}

double dp_rank_imbalance(int dp, double batch_per_rank, double cv) {
  if (dp <= 1 || !(cv > 0) || !(batch_per_rank > 0)) return 1.0;
  const double n = double(dp);
  const double z = normal_quantile((n - 0.375) / (n + 0.25));  // Blom's expected largest of n standard normals
  return 1.0 + cv * z / std::sqrt(batch_per_rank);
}

Derivation explain_wide_ep(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                           const CommGroup& ep_group, const ForwardCost& fc) {
  using units::format;
  const int dp = std::max(1, plan.attention_dp), tp = std::max(1, plan.tp), ep = serving_ep(plan);
  const std::int64_t k = a.moe ? a.moe->experts_per_token : 1;
  const double T = fb.decode_seqs * double(fb.queries_per_seq) + fb.prefill_seqs * double(fb.prefill_tokens);
  const double e = plan.activation_bytes;
  const WideEpAllToAll x = wide_ep_all_to_all(T, k, a.hidden, tp, e, e, ep_group);
  // The time as the pass prices it: the plan's dispatcher (ops/moe_a2a.hpp; NCCL's all-to-all by default).
  const detail::A2aCost c =
      detail::moe_a2a(detail::serving_a2a_input(a, plan, fb, T / double(tp), x.rows, false, ep_group), ep_group);
  const detail::A2aKernel kern = detail::serving_a2a_kernel(plan, fb);
  const double moe_layers = double(a.moe_layer_count()) / double(std::max(1, plan.pp));
  const double B = std::max(1.0, fb.decode_seqs + fb.prefill_seqs);
  Derivation r{
      "serving.wide_ep",
      "Attention-DP with wide EP: one rank's pass in a group of dp × tp GPUs",
      "EP = dp·tp ; tokens routed = T·dp ; rows sent per GPU = T·k/tp ; bytes = rows·h·e ; NVLink share (s−1)/n, NIC "
      "share (n−s)/n ; t_step = attention(rank's own batch and KV) + Σ MoE layers(T·dp tokens over EP) + TP comm",
      {{"dp", std::to_string(dp), "attention data-parallel ranks, each its own batch and KV cache",
        Origin::user("--attention-dp")},
       {"tp", std::to_string(tp), "attention TP inside a rank", Origin::user("--tp")},
       {"EP", std::to_string(ep), "experts spread over every GPU of the group, each expert whole (expert TP 1)",
        Origin::derived("dp·tp")},
       {"T", units::format_number(T, 4), "tokens of this rank's forward pass", Origin::derived()},
       {"T·dp", units::format_number(T * double(dp), 4), "tokens the EP group routes per MoE layer",
        Origin::derived()},
       {"rows", units::format_number(x.rows, 4), fmt::format("token-expert rows one GPU sends (k = {})", k),
        Origin::derived("T·k/tp")},
       {"dispatch", format(x.dispatch), fmt::format("per GPU per MoE layer at {} B/element (the combine the same)", e),
        Origin::derived("rows·h·e")},
       {"tiers", fmt::format("{:.3g} NVLink ({}), {:.3g} NIC ({})", x.nvlink_share, ep_group.scale_up.name,
                             x.nic_share, ep_group.scale_out ? ep_group.scale_out->name : std::string("none")),
        fmt::format("{} GPUs per scale-up domain of the {}", ep_group.scale_up_size, ep_group.size),
        Origin::derived("resolve_group")},
       {"t_a2a", format(c.dispatch + c.combine),
        fmt::format("dispatch {} + combine {} per MoE layer ({}; the slower tier sets the pace)", format(c.dispatch),
                    format(c.combine), detail::to_string(kern)),
        Origin::derived(kern == detail::A2aKernel::nccl ? "collectives.cpp" : "ops/moe_a2a.hpp")}},
      fmt::format("{} per pass of one rank ({} GPU{}): attention {}, the MoE all-to-alls {} ({:g} MoE layers per stage)",
                  format(fc.total), tp, tp == 1 ? "" : "s", format(fc.attention),
                  format((c.dispatch + c.combine) * std::max(0.0, moe_layers)),
                  moe_layers),
      {},
      {}};
  r.notes.push_back(fmt::format(
      "assumption: balanced ranks — every rank holds the same batch at the same mean context. Every MoE layer's "
      "all-to-all waits for the slowest rank; with KV lengths of coefficient of variation c the slowest of {} ranks "
      "holds ≈ 1 + c·z/√B of the mean KV (dp_rank_imbalance): {:.3g} at c = 0.5, {:.3g} at c = 1 for B = {:g}. It "
      "matters for the attention share of the step at small per-rank batches and long, uneven contexts; the engines' "
      "DP load balancers (SGLang's round-robin or shortest-queue, DeepSeek's decode load balancer) aim to keep it "
      "near 1",
      dp, dp_rank_imbalance(dp, B, 0.5), dp_rank_imbalance(dp, B, 1.0), B));
  r.notes.push_back(
      "assumption: no redundant experts (DeepSeek's EPLB adds 32 in prefill, SGLang's --ep-num-redundant-experts): "
      "each GPU holds E/EP routed experts; the dense FFN layers, the shared experts and the LM head run at the "
      "attention TP on the rank's tokens ([DSV3] runs the dense MLPs at TP1, SGLang --moe-dense-tp-size 1)");
  r.notes.push_back(fmt::format(
      "all-to-all: {} (--moe-a2a-backend, --deepep-mode; ops/moe_a2a.hpp), {}", detail::to_string(kern),
      plan.two_batch_overlap ? "each half-batch's beside the other half's compute (two-batch overlap: serving.tbo)"
                             : "in series with the compute (no two-batch overlap: --enable-two-batch-overlap hides it "
                               "behind the other micro-batch's compute)"));
  return r;
}

std::string group_layout(std::int64_t groups, int dp, int tp, int pp) {
  return fmt::format("{} groups × DP {} × TP {} × PP {} (EP {})", groups, dp, tp, pp, std::int64_t(dp) * tp);
}

std::string wide_ep_plan_note(const ServingPerfPlan& plan) {
  const int dp = std::max(1, plan.attention_dp);
  return fmt::format(
      "attention-DP {} with wide EP {}: a replica is a group of {} ranks × TP × PP GPUs, each rank at the batch shown "
      "with its own KV cache (capacity per rank: 1/(tp·{}) of the routed experts and 1/tp of the rest on each GPU); "
      "λ_group = {}·B/(osl·ITL), groups = ⌈λ/λ_group⌉; the group's prompt queue is taken as one server of {}× a "
      "rank's rate (optimistic against {} separate queues at light load); ranks balanced (serving.wide_ep)",
      dp, serving_ep(plan), dp, dp, dp, dp, dp);
}

}  // namespace gpuplan::model
