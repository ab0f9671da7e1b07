// Disaggregated prefill and decode pools on their own GPU types and of attention-DP groups (disagg_pools.hpp).
#include "gpuplan/model/disagg_pools.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/model/wide_ep.hpp"
#include "gpuplan/model/collective_time.hpp"
#include "serving_internal.hpp"

namespace gpuplan::model {

using units::Seconds;

namespace {

/// One pool's system and what the sizing reads off it.
struct Pool {
  const ServingSystem& sys;
  int domain = 1;  // TP's ceiling: the node's scale-up domain
  std::optional<units::UsdPerSecond> price;
};

Pool pool_of(const ServingSystem& s) {
  Pool p{s, s.node != nullptr ? std::max(s.node->gpus, s.node->scale_up.domain_gpus) : 1,
         s.price ? s.price : (s.gpu != nullptr ? s.gpu->price : std::nullopt)};
  return p;
}

/// The memory of one rank of a pool at TP `tp` holding sequences of `context` tokens (experts over dp·tp GPUs).
ServingMemory rank_memory(const wl::TransformerArch& a, const ParameterCounts& params, const ServingPerfPlan& perf,
                          const ServingPlanOptions& options, const Pool& pool, int tp, int dp, std::int64_t context) {
  ServingMemoryPlan mp = options.memory;
  mp.tp = tp;
  mp.pp = 1;
  mp.expert_dp = dp;
  mp.context = context;
  mp.concurrency = 1;
  mp.gpus.reset();
  mp.kv = perf.kv;
  mp.weights = perf.weights;
  return serving_memory(a, params, *pool.sys.gpu, mp, Explain::off);
}

/// TP sizes a pool tries: the options within its domain that split the model. (A wide EP that does not divide the
/// experts is taken at E/EP experts per GPU on average, as engines fill slots with redundant experts.)
std::vector<int> pool_tps(const wl::TransformerArch& a, const ServingPlanOptions& options, const Pool& pool) {
  std::vector<int> r;
  for (int tp : options.tp_options)
    if (tp >= 1 && tp <= pool.domain && detail::planner_tp_valid(a, tp)) r.push_back(tp);
  return r;
}

/// A pool's plan at TP `tp` (PP 1) with `dp` attention ranks; without attention-DP, EP stays inside the TP group.
ServingPerfPlan pool_plan(const wl::TransformerArch& a, const ServingPerfPlan& perf, int tp, int dp) {
  ServingPerfPlan p = perf;
  p.tp = tp;
  p.pp = 1;
  p.attention_dp = dp;
  if (a.moe && dp <= 1 && p.ep > tp) p.ep = tp;
  return p;
}

struct PrefillSide {
  int tp = 1;
  std::int64_t groups = 0;
  Seconds prefill{}, ttft_wait{};
  units::Bytes kv_shard{};
  bool saturated = false;
};

/// The fewest prefill groups whose queueing keeps t_p + W + t_kv within the TTFT target (from the fewest that keep
/// up; W is unbounded until a count does).
PrefillSide size_prefill(const ServingPerfPlan& plan, const wl::TransformerArch& a, std::int64_t isl, double lambda,
                         const Sla& sla, const LengthDist& in_d, const Pool& pool, int tp, int dp, Seconds kv) {
  PrefillSide p;
  p.tp = tp;
  p.prefill = prefill_time(a, plan, 1, isl, pool.sys);
  const double per_group = double(dp);
  p.groups = detail::planner_replicas_for(lambda * p.prefill.raw() / per_group, p.saturated);
  p.ttft_wait = prefill_queue_wait(1.0, p.prefill, sla.percentile, in_d);
  const std::int64_t first = p.groups;
  for (std::int64_t n = first; n < first + 1000000 && !p.saturated; ++n) {
    const double rho = lambda / (double(n) * per_group) * p.prefill.raw();
    if (rho >= 1.0) continue;
    p.groups = n;
    p.ttft_wait = prefill_queue_wait(rho, p.prefill, sla.percentile, in_d);
    if (!sla.ttft || p.prefill + p.ttft_wait + kv <= *sla.ttft || rho < 1e-3) break;
  }
  return p;
}

struct DecodeSide {
  int tp = 1;
  std::int64_t batch = 1, groups = 0;
  Seconds itl{};
  bool saturated = false;
};

/// The largest batch per rank within the ITL target (at most the rank's KV capacity), and the groups for λ.
std::optional<DecodeSide> size_decode(const ServingPerfPlan& plan, const wl::TransformerArch& a, std::int64_t cap,
                                      std::int64_t isl, std::int64_t osl, double lambda, const Sla& sla,
                                      const Pool& pool, int tp, int dp) {
  if (cap < 1) return std::nullopt;
  DecodeSide d;
  d.tp = tp;
  d.itl = decode_step_time(a, plan, 1, isl + osl / 2, pool.sys);
  for (std::int64_t B : detail::planner_batch_grid(cap)) {
    const Seconds itl = decode_step_time(a, plan, B, isl + osl / 2, pool.sys);
    if (sla.itl && itl > *sla.itl) break;
    d.batch = B;
    d.itl = itl;
  }
  const double lam_d = double(dp) * double(d.batch) / (double(osl) * d.itl.raw());
  d.groups = detail::planner_replicas_for(lambda / lam_d - 1e-9, d.saturated);
  return d;
}

std::string gpu_id(const Pool& p) { return p.sys.gpu != nullptr ? p.sys.gpu->info.id : std::string(); }

}  // namespace

std::optional<DisaggregatedPlan> size_disaggregated_pools(const wl::TransformerArch& a, const ParameterCounts& params,
                                                          const ServingPerfPlan& perf, const Traffic& traffic,
                                                          const Sla& sla, const ServingSystem& sys,
                                                          const ServingPlanOptions& options, double lambda,
                                                          std::vector<std::string>& notes, Explain explain) {
  using units::format;
  const Pool pre = pool_of(options.prefill_system != nullptr ? *options.prefill_system : sys);
  const Pool dec = pool_of(options.decode_system != nullptr ? *options.decode_system : sys);
  const LengthDist in_d = traffic.input ? *traffic.input : LengthDist::fixed(traffic.input_tokens);
  const LengthDist out_d = traffic.output ? *traffic.output : LengthDist::fixed(traffic.output_tokens);
  const std::int64_t isl = std::max<std::int64_t>(1, std::llround(in_d.mean()));
  const std::int64_t osl = std::max<std::int64_t>(1, std::llround(out_d.mean()));
  const int dp_pre = a.moe ? std::max(1, options.prefill_attention_dp > 0 ? options.prefill_attention_dp : perf.attention_dp) : 1;
  const int dp_dec = a.moe ? std::max(1, options.decode_attention_dp > 0 ? options.decode_attention_dp : perf.attention_dp) : 1;
  // The KV leaves a prefill node and enters a decode node: each side's NIC (send/recv over its scale-out tier).
  const CommGroup x_pre = training_comm_group(2, pre.sys.node != nullptr ? pre.sys.node->gpus : 1, pre.sys);
  const CommGroup x_dec = training_comm_group(2, dec.sys.node != nullptr ? dec.sys.node->gpus : 1, dec.sys);
  for (const CommGroup* x : {&x_pre, &x_dec})
    if (x->size > x->scale_up_size && !x->scale_out) {
      notes.push_back(fmt::format("disaggregated pools not sized: a pool's node has no scale-out link in the data to "
                                  "carry the KV cache between the pools ({} → {})", gpu_id(pre), gpu_id(dec)));
      return std::nullopt;
    }
  std::optional<DisaggregatedPlan> best;
  for (int tp_p : pool_tps(a, options, pre)) {
    const ServingPerfPlan pp_plan = pool_plan(a, perf, tp_p, dp_pre);
    const ServingMemory mem_p = rank_memory(a, params, perf, options, pre, tp_p, dp_pre, isl);
    if (mem_p.max_concurrency < 1) continue;
    const units::Bytes shard = mem_p.kv_bytes_per_sequence_per_gpu;
    const Seconds kv = std::max(collective_time(Collective::send_recv, shard, x_pre),
                                collective_time(Collective::send_recv, shard, x_dec));
    const PrefillSide P = size_prefill(pp_plan, a, isl, lambda, sla, in_d, pre, tp_p, dp_pre, kv);
    for (int tp_d : pool_tps(a, options, dec)) {
      const ServingPerfPlan dp_plan = pool_plan(a, perf, tp_d, dp_dec);
      const ServingMemory mem_d = rank_memory(a, params, perf, options, dec, tp_d, dp_dec, isl + osl);
      const auto D = size_decode(dp_plan, a, std::min(mem_d.max_concurrency, perf.max_batch), isl, osl, lambda, sla,
                                 dec, tp_d, dp_dec);
      if (!D) continue;
      DisaggregatedPlan d;
      d.prefill_tp = tp_p;
      d.decode_tp = tp_d;
      d.prefill_dp = dp_pre;
      d.decode_dp = dp_dec;
      d.prefill_gpu = gpu_id(pre);
      d.decode_gpu = gpu_id(dec);
      d.prefill_gpus = P.groups * tp_p * dp_pre;
      d.decode_gpus = D->groups * tp_d * dp_dec;
      d.gpus = d.prefill_gpus + d.decode_gpus;
      d.decode_batch = D->batch;
      d.kv_transfer = kv;
      d.kv_per_sequence = shard;
      d.ttft = P.prefill + P.ttft_wait + kv;
      d.itl = D->itl;
      const CommGroup& slow = collective_time(Collective::send_recv, shard, x_pre) >= collective_time(Collective::send_recv, shard, x_dec) ? x_pre : x_dec;
      d.transfer_tier = slow.scale_out ? slow.scale_out->name : slow.scale_up.name;
      if (pre.price) d.prefill_cost_rate = *pre.price * double(d.prefill_gpus);
      if (dec.price) d.decode_cost_rate = *dec.price * double(d.decode_gpus);
      const bool priced = pre.price.has_value() && dec.price.has_value();
      if (priced) d.cost_per_mtok_usd = (d.prefill_cost_rate + d.decode_cost_rate).raw() / (lambda * double(osl)) * 1e6;
      d.meets_sla = (!sla.ttft || d.ttft <= *sla.ttft) && (!sla.itl || d.itl <= *sla.itl) && !P.saturated &&
                    !D->saturated;
      auto cost = [&](const DisaggregatedPlan& x) { return priced ? x.cost_per_mtok_usd : double(x.gpus); };
      const bool take = !best || (d.meets_sla != best->meets_sla ? d.meets_sla
                                  : cost(d) != cost(*best)       ? cost(d) < cost(*best)
                                                                 : d.ttft + d.itl < best->ttft + best->itl);
      if (take) best = d;
    }
  }
  if (!best) {
    notes.push_back(fmt::format("disaggregated pools not sized: no TP size of the {} prefill and {} decode pools holds "
                                "the weights and one sequence",
                                gpu_id(pre), gpu_id(dec)));
    return best;
  }
  if (explain == Explain::on) {
    DisaggregatedPlan& d = *best;
    auto usd_h = [](units::UsdPerSecond r) { return fmt::format("${:.2f}/h", units::to_usd_per_hour(r)); };
    d.derivation = {
        "serving.disaggregated_pools",
        "Disaggregated prefill and decode pools, each on its own GPU",
        "TTFT = t_prefill(isl) + W_p(ρ = λ/(n_p·dp)·t_prefill) + t_kv ; t_kv = KV shard / min(NIC_prefill, NIC_decode) "
        "; λ_d = dp·B/(osl·ITL) ; n_d = ⌈λ/λ_d⌉ ; $/h = GPUs_p·price_p + GPUs_d·price_d",
        {{"λ", units::format_number(lambda, 4) + " req/s", "request rate the pools serve", Origin::user("--rate")},
         {"prefill", fmt::format("{} GPUs of {} (TP {}, DP {})", d.prefill_gpus, d.prefill_gpu, d.prefill_tp, dp_pre),
          pre.price ? usd_h(d.prefill_cost_rate) : std::string("price unknown"),
          Origin::user("--prefill-gpu")},
         {"decode", fmt::format("{} GPUs of {} (TP {}, DP {}), batch {} per rank", d.decode_gpus, d.decode_gpu,
                                d.decode_tp, dp_dec, d.decode_batch),
          dec.price ? usd_h(d.decode_cost_rate) : std::string("price unknown"), Origin::user("--decode-gpu")},
         {"KV shard", format(d.kv_per_sequence), "one sequence's KV on one prefill GPU (its TP share)",
          Origin::derived("serving_memory")},
         {"t_kv", format(d.kv_transfer), "over " + d.transfer_tier + " (the slower of the two pools' NICs)",
          Origin::derived("collectives.cpp send/recv")}},
        fmt::format("TTFT {}, ITL {}, {} GPUs{}", format(d.ttft), format(d.itl), d.gpus,
                    d.cost_per_mtok_usd > 0 ? fmt::format(", ${:.3g}/Mtok", d.cost_per_mtok_usd) : std::string()),
        {"each prefill rank an M/G/1 queue of its share of the prompts; PP 1 in both pools; the KV moves once per "
         "request, not overlapped with the prefill's last layers"},
        {}};
    if (dp_pre > 1 || dp_dec > 1) {
      ServingPerfPlan shown = perf;
      shown.attention_dp = std::max(dp_pre, dp_dec);
      d.derivation.notes.push_back(wide_ep_plan_note(shown));
    }
  }
  return best;
}

std::string pools_layout(const DisaggregatedPlan& d) {
  auto one = [](const char* what, std::int64_t gpus, int tp, int dp, const std::string& gpu) {
    const std::int64_t per = std::int64_t(std::max(1, tp)) * std::max(1, dp);
    const std::int64_t n = per > 0 ? gpus / per : 0;
    return dp > 1 ? fmt::format("{} {} on {}", what, group_layout(n, dp, tp, 1), gpu)
                  : fmt::format("{} {} on {}", what, replica_layout(n, tp, 1), gpu);
  };
  return one("prefill", d.prefill_gpus, d.prefill_tp, d.prefill_dp, d.prefill_gpu) + " + " +
         one("decode", d.decode_gpus, d.decode_tp, d.decode_dp, d.decode_gpu);
}

}  // namespace gpuplan::model
