// The capacity planner behind `gpuplan serve --rate`: replicas and GPUs over TP and batch, disaggregated
// prefill/decode pools (request lengths and queueing: queueing.cpp). Formulas and sources: serving.hpp.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/disagg_pools.hpp"
#include "gpuplan/model/wide_ep.hpp"
#include "serving_internal.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model {

using units::Seconds;

namespace {

std::vector<std::int64_t> batch_grid(std::int64_t max_b) {
  std::vector<std::int64_t> g;
  for (std::int64_t b = 1; b <= max_b;) {
    g.push_back(b);
    b = b < 8 ? b + 1 : b + std::max<std::int64_t>(1, b / 8);
  }
  if (g.empty() || g.back() != max_b) g.push_back(max_b);
  return g;
}

/// The most replicas a pool is sized to: past this (absurd rates, or a replica that serves almost nothing) the count
/// saturates and the layout misses its SLA, so that GPU counts (replicas × TP × PP, TP and PP ≤ 1024) stay in int64.
constexpr double kMaxReplicas = 1e12;

/// ⌈x⌉ replicas, at least 1; kMaxReplicas with `saturated` set when x is larger (or not a number).
std::int64_t replicas_for(double x, bool& saturated) {
  saturated = !(x <= kMaxReplicas);
  if (saturated) return static_cast<std::int64_t>(kMaxReplicas);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(x)));
}

bool tp_valid(const wl::TransformerArch& a, int tp) {
  if (a.heads % tp != 0) return false;
  if (!a.mla && a.kv_heads % tp != 0 && tp % a.kv_heads != 0) return false;
  if (a.intermediate > 0 && a.intermediate % tp != 0) return false;
  return true;
}

}  // namespace

namespace detail {
std::vector<std::int64_t> planner_batch_grid(std::int64_t max_b) { return batch_grid(max_b); }
std::int64_t planner_replicas_for(double x, bool& saturated) { return replicas_for(x, saturated); }
bool planner_tp_valid(const wl::TransformerArch& a, int tp) { return tp_valid(a, tp); }
}  // namespace detail

namespace {

/// The traffic as the planner reads it: the length distributions, their means and percentile, and the rate.
struct Demand {
  LengthDist in_d;
  LengthDist out_d;
  std::int64_t isl = 1;      // mean prompt tokens
  std::int64_t osl = 1;      // mean output tokens
  std::int64_t ctx_avg = 1;  // time-average context of a decoding sequence
  std::int64_t isl_p = 1;    // prompt tokens at the SLA percentile
  bool dist = false;         // lengths given as distributions
  bool closed = false;       // a closed loop of users (traffic.concurrency) rather than a rate
  double users = 0.0;
  double lambda = 0.0;  // the open loop's rate
};

Demand demand_of(const Traffic& traffic, const Sla& sla) {
  Demand dm;
  dm.in_d = traffic.input ? *traffic.input : LengthDist::fixed(traffic.input_tokens);
  dm.out_d = traffic.output ? *traffic.output : LengthDist::fixed(traffic.output_tokens);
  const LengthDist& in_d = dm.in_d;
  const LengthDist& out_d = dm.out_d;
  dm.isl = std::max<std::int64_t>(1, std::llround(in_d.mean()));
  dm.osl = std::max<std::int64_t>(1, std::llround(out_d.mean()));
  // Time-average context of a decoding sequence: E[isl] + E[osl²] / (2·E[osl]) (isl and osl independent).
  dm.ctx_avg =
      std::max<std::int64_t>(1, std::llround(in_d.mean() + out_d.mean_square() / (2.0 * std::max(1.0, out_d.mean()))));
  dm.isl_p = std::max<std::int64_t>(1, in_d.quantile(sla.percentile));
  dm.dist = traffic.input.has_value() || traffic.output.has_value();
  dm.closed = traffic.concurrency.has_value();
  dm.users = dm.closed ? double(std::max<std::int64_t>(1, *traffic.concurrency)) : 0.0;
  dm.lambda = std::max(1e-12, traffic.requests_per_s);
  return dm;
}

/// plan_serving's inputs and what it derives once from them.
struct Planner {
  const wl::TransformerArch& a;
  const ParameterCounts& params;
  const ServingPerfPlan& perf;
  const Traffic& traffic;
  const Sla& sla;
  const ServingSystem& sys;
  const ServingPlanOptions& options;
  const hw::GpuSpec& gpu;
  std::optional<units::UsdPerSecond> price;
  int domain;  // the most GPUs one scale-up domain holds (TP's ceiling)
  Demand dm;
};

/// One candidate: TP × PP at batch B (of the memory's cap): its steady state, the replicas the traffic needs, the
/// queueing and iteration waits in its TTFT, its cost, and the SLA's verdict.
ServingCandidate evaluate_candidate(const Planner& q, int tp, std::int64_t B, std::int64_t cap,
                                    const ServingPerfPlan& pp_plan) {
  using units::format;
  ServingCandidate c;
  c.tp = tp;
  c.pp = pp_plan.pp;
  c.batch = B;
  c.max_batch_memory = cap;
  c.state = steady_state(q.a, pp_plan, B, q.dm.isl, q.dm.osl, q.sys, Explain::off, q.dm.ctx_avg);
  c.itl = c.state.iteration;
  // Attention-DP (wide_ep.hpp): the unit is the group of dp ranks, each at batch B, all at the same step time.
  c.dp = std::max(1, pp_plan.attention_dp);
  const double lam_r = c.state.requests_per_s * double(c.dp);
  Seconds ttft_own = c.state.ttft;
  if (q.dm.dist && q.dm.isl_p != q.dm.isl) {
    // The prompt at the SLA percentile: its own prefill, or its chunks riding on iterations.
    const std::int64_t room = pp_plan.max_batched_tokens > 0
                                  ? std::max<std::int64_t>(1, pp_plan.max_batched_tokens - B / std::max(1, pp_plan.pp))
                                  : q.dm.isl_p;
    const double chunks = std::ceil(double(q.dm.isl_p) / double(std::min(q.dm.isl_p, room)));
    ttft_own = std::max(prefill_time(q.a, pp_plan, 1, q.dm.isl_p, q.sys), c.state.iteration * chunks);
  }
  // Closed loop: each user's cycle is its request's latency (the wait for the running iteration included: the engine
  // starts its next step at once, so the next request lands in one) plus the think time, so the rate is N / cycle;
  // every request in flight has a batch slot (replicas are sized for it), so no request queues for one.
  const double lam =
      q.dm.closed
          ? q.dm.users /
                (c.state.ttft + c.state.iteration_residual + c.itl * double(q.dm.osl - 1) + q.traffic.think_time).raw()
          : q.dm.lambda;
  c.requests_per_s = lam;
  bool too_many = false;
  c.replicas = replicas_for(lam / lam_r - 1e-9, too_many);
  // The prompt queue: a prompt waits for the prefill work of the prompts ahead of it. Under continuous batching
  // that work rides on the iterations, so one prompt's service time is what its prefill adds to them: the share of
  // the replica's time that goes to prefill, (iteration − decode-only iteration) / iteration, per prompt served,
  // S = share / λ_r. Then ρ = λ/replicas · S = (λ/replicas)/λ_r · share < 1 whenever the replicas keep up: the queue
  // is stable exactly when the steady state is. (Before 2026-11-26 S was one prompt's prefill alone on the replica,
  // which batched prefill beats: DeepSeek-V3 on 16 H200s at 20 req/s had ρ = 1.5 at a batch whose steady state
  // served 20.07 req/s, and printed an unbounded TTFT.)
  const double share =
      c.state.iteration > Seconds(0)
          ? std::clamp(((c.state.iteration - c.state.itl_decode_only) / c.state.iteration).raw(), 0.0, 1.0)
          : 0.0;
  c.prefill_service = lam_r > 0 ? Seconds(share / lam_r) : c.state.prefill;
  double rho = lam / double(c.replicas) * c.prefill_service.raw();
  while (!q.dm.closed && rho >= 1.0 && !too_many) {  // only at the rounding edge of replicas_for
    c.replicas = replicas_for(double(c.replicas + 1) - 1e-9, too_many);
    rho = lam / double(c.replicas) * c.prefill_service.raw();
  }
  c.queue_rho = q.dm.closed ? 0.0 : rho;
  c.queue_wait = q.dm.closed ? Seconds(0) : prefill_queue_wait(rho, c.prefill_service, q.sla.percentile, q.dm.in_d);
  // A prompt joins the batch only between forward passes: it first waits for the running iteration to end. (The
  // closed loop's next request also lands in a running iteration: the engine starts the next step at once.)
  c.iteration_wait = c.state.iteration_residual;
  c.ttft = ttft_own + c.iteration_wait + c.queue_wait;
  c.replica_requests_per_s = lam_r;
  c.gpus = c.replicas * tp * pp_plan.pp * c.dp;
  if (q.price) {
    c.cost_rate = *q.price * double(c.gpus);
    c.cost_per_mtok_usd = c.cost_rate.raw() / (lam * double(q.dm.osl)) * 1e6;
  }
  c.meets_sla = true;
  if (q.sla.itl && c.itl > *q.sla.itl) {
    c.meets_sla = false;
    c.misses.push_back(fmt::format("ITL {} > {}", format(c.itl), format(*q.sla.itl)));
  }
  if (q.sla.ttft && c.ttft > *q.sla.ttft) {
    c.meets_sla = false;
    c.misses.push_back(fmt::format("TTFT p{:g} {} > {}", q.sla.percentile * 100, format(c.ttft), format(*q.sla.ttft)));
  }
  if (too_many) {
    c.meets_sla = false;
    c.misses.push_back(fmt::format("needs more than {:g} replicas for {:.3g} req/s ({:.3g} req/s per replica)",
                                   kMaxReplicas, lam, lam_r));
  }
  return c;
}

/// Violation score for "best achievable" when nothing meets the SLA.
double violation(const Sla& sla, const ServingCandidate& c) {
  double v = 0;
  if (sla.itl) v = std::max(v, (c.itl / *sla.itl).raw());
  if (sla.ttft) v = std::max(v, (c.ttft / *sla.ttft).raw());
  return v;
}

/// The better of two candidates: meeting the SLA, then fewer GPUs, then lower latency; else the smaller violation.
bool better(const Sla& sla, std::int64_t osl, const ServingCandidate& x, const ServingCandidate& y) {
  if (x.meets_sla != y.meets_sla) return x.meets_sla;
  if (x.meets_sla) {
    if (x.gpus != y.gpus) return x.gpus < y.gpus;
    return x.ttft + x.itl * double(osl) < y.ttft + y.itl * double(osl);
  }
  return violation(sla, x) < violation(sla, y);
}

/// Every TP × PP layout (PP only while no TP size fits, unless the options list PP sizes) at every batch its memory
/// allows: r.per_tp gets each layout's best candidate, r.best the best of all, `frontier_points` the best layout's
/// (TTFT, GPUs, batch) points; returns whether any layout fits.
bool search_layouts(const Planner& q, ServingPlanResult& r, std::vector<TtftFrontierPoint>& frontier_points) {
  bool any_fit = false;
  const std::vector<int> pps = q.options.pp_options.empty() ? std::vector<int>{1, 2, 4, 8, 16} : q.options.pp_options;
  for (int pp : pps) {
    if (any_fit && q.options.pp_options.empty()) break;  // automatic: PP only while no TP size fits
    for (int tp : q.options.tp_options) {
      if (tp < 1 || tp > q.domain || !tp_valid(q.a, tp)) continue;
      if (pp < 1 || pp > q.a.layers) continue;
      if (pp > 1 && q.options.pp_options.empty() && tp != q.options.tp_options.back()) continue;
      if (pp > 1) {
        // Stages on different nodes need a scale-out link: without one in the data the stage-to-stage sends cost +inf
        // (collective_cost's "not possible"), and the candidate would report an infinite ITL.
        const CommGroup pair = training_comm_group(2, tp, q.sys);
        if (pair.size > pair.scale_up_size && !pair.scale_out) {
          r.notes.push_back(fmt::format("TP {} PP {}: the pipeline stages span nodes and {} has no scale-out link in "
                                        "the data", tp, pp,
                                        q.sys.node != nullptr ? q.sys.node->info.id : q.gpu.info.id));
          continue;
        }
      }
      ServingMemoryPlan mp = q.options.memory;
      mp.tp = tp;
      mp.pp = pp;
      mp.expert_dp = q.a.moe ? std::max(1, q.perf.attention_dp) : 1;
      mp.context = q.dm.isl + q.dm.osl;
      mp.concurrency = 1;
      mp.gpus.reset();
      mp.kv = q.perf.kv;
      mp.weights = q.perf.weights;
      const ServingMemory mem = serving_memory(q.a, q.params, q.gpu, mp, Explain::off);
      if (r.kv_bytes_per_token.raw() == 0) r.kv_bytes_per_token = mem.kv_bytes_per_token;
      const std::int64_t cap = std::min(mem.max_concurrency, q.perf.max_batch);
      if (cap < 1) {
        r.notes.push_back(fmt::format("TP {} PP {}: the weights and one sequence of {} tokens do not fit", tp, pp,
                                      q.dm.isl + q.dm.osl));
        continue;
      }
      any_fit = true;
      ServingPerfPlan p = q.perf;
      p.tp = tp;
      p.pp = pp;
      if (q.a.moe && p.ep > tp) p.ep = tp;
      std::optional<ServingCandidate> best_tp;
      std::vector<TtftFrontierPoint> points;
      for (std::int64_t B : batch_grid(cap)) {
        ServingCandidate c = evaluate_candidate(q, tp, B, cap, p);
        if ((!q.sla.itl || c.itl <= *q.sla.itl) && c.replicas < static_cast<std::int64_t>(kMaxReplicas))
          points.push_back({c.ttft, c.gpus, c.batch});
        if (!best_tp || better(q.sla, q.dm.osl, c, *best_tp)) best_tp = c;
      }
      if (best_tp) {
        r.per_tp.push_back(*best_tp);
        if (!r.best || better(q.sla, q.dm.osl, *best_tp, *r.best)) {
          r.best = best_tp;
          frontier_points = std::move(points);
        }
      }
    }
  }
  return any_fit;
}

/// The verdict and what the planner says about it: the length distribution, the TTFT–GPU frontier of the best layout
/// (and a note when the TTFT target binds steeply), the prompt's own prefill against the target, the reasons.
void summarise(const Planner& q, bool any_fit, std::vector<TtftFrontierPoint>& frontier_points, ServingPlanResult& r) {
  using units::format;
  if (q.dm.dist)
    r.notes.push_back(fmt::format("request lengths: mean {} in / {} out; the prompt at p{:g} has {} tokens; decoding "
                                  "sequences hold {} tokens on time average (E[isl] + E[osl²]/2E[osl])",
                                  q.dm.isl, q.dm.osl, q.sla.percentile * 100, q.dm.isl_p, q.dm.ctx_avg));
  r.feasible = r.best && r.best->meets_sla;
  // Where the steady state stops describing the answer (#28): a prompt's own prefill taking most of the TTFT target
  // leaves the queue almost no room, so the replica count climbs steeply as the target tightens (small batches,
  // many replicas) - the cliff a planner should see coming.
  // The best layout's TTFT–GPU frontier: sorted by TTFT, each point kept when it needs fewer GPUs than every point of
  // a smaller TTFT (the fewest GPUs for a target between its TTFT and the next one's).
  std::sort(frontier_points.begin(), frontier_points.end(),
            [](const TtftFrontierPoint& x, const TtftFrontierPoint& y) {
              return x.ttft != y.ttft ? x.ttft < y.ttft : x.gpus < y.gpus;
            });
  for (const TtftFrontierPoint& f : frontier_points)
    if (r.ttft_frontier.empty() || f.gpus < r.ttft_frontier.back().gpus) r.ttft_frontier.push_back(f);
  // The TTFT target binds steeply when a looser one would save a third of the GPUs or more: say so, with the steps.
  if (q.sla.ttft && r.best && r.ttft_frontier.size() >= 2 &&
      2 * r.best->gpus >= 3 * r.ttft_frontier.back().gpus) {
    // The steps where the GPU count falls by a quarter or more (and the plan's own), up to eight.
    std::string steps;
    std::int64_t shown = 0, last_gpus = 0;
    for (std::size_t i = 0; i < r.ttft_frontier.size() && shown < 8; ++i) {
      const TtftFrontierPoint& f = r.ttft_frontier[i];
      const bool last = i + 1 == r.ttft_frontier.size();
      const bool own = f.gpus == r.best->gpus;
      if (shown > 0 && !last && !own && double(f.gpus) > 0.75 * double(last_gpus)) continue;
      steps += fmt::format("{}{}: {} GPUs (batch {}{})", shown > 0 ? "; " : "", format(f.ttft), f.gpus, f.batch,
                           own ? ", this plan" : "");
      last_gpus = f.gpus;
      ++shown;
    }
    r.notes.push_back(fmt::format(
        "GPUs against the TTFT target at TP {} × PP {} (the fewest GPUs for a p{:g} TTFT target of at least): {}. A tighter "
        "target forces a smaller batch per replica — the prompts' prefill then rides on fewer, shorter iterations and "
        "waits less — and each replica serves fewer requests per second, so the GPU count climbs steeply as the target "
        "nears the prompt's own prefill; replicas are sized for throughput (⌈λ/λ_r⌉), not added to cut queueing",
        r.best->tp, r.best->pp, q.sla.percentile * 100, steps));
  }
  if (q.sla.ttft && r.best) {
    const Seconds own = r.best->ttft - r.best->queue_wait - r.best->iteration_wait;
    const char* advice =
        "consider disaggregated prefill (--disaggregated), a larger TP for prefill, or prefix caching (--prefix-tokens)";
    if (own > *q.sla.ttft)
      r.notes.push_back(fmt::format("the prompt's own prefill at the best layout ({}, its chunks riding on the "
                                    "iterations) exceeds the TTFT target ({}) before any queueing; {}",
                                    format(own), format(*q.sla.ttft), advice));
    else if (own > *q.sla.ttft * 0.5)
      r.notes.push_back(fmt::format(
          "the prompt's own prefill ({}) is {:.0f}% of the TTFT target ({}): little room is left for queueing, so the "
          "GPU count rises steeply as the target tightens; {}",
          format(own), 100.0 * (own / *q.sla.ttft).raw(), format(*q.sla.ttft), advice));
  }
  if (!any_fit)
    r.reasons.push_back(fmt::format("the model does not fit on up to {} GPUs per replica with {} tokens of context",
                                    q.domain * 16, q.dm.isl + q.dm.osl));
  else if (!r.feasible && r.best)
    for (const auto& m : r.best->misses) r.reasons.push_back("best achievable misses: " + m);
}

/// Disaggregated prefill and decode pools [DistServe]: each pool picks its own TP (the fewest GPUs for its job),
/// the KV of each prompt crosses the scale-out fabric once, each TP rank sending its shard to its decode peer.
/// `lambda` is the rate the pools serve.
std::optional<DisaggregatedPlan> size_disaggregated(const Planner& q, double lambda, ServingPlanResult& r) {
  std::optional<DisaggregatedPlan> best_dp;
  const int node_gpus = q.sys.node != nullptr ? q.sys.node->gpus : 1;
  const CommGroup xfer = training_comm_group(2, node_gpus, q.sys);
  // The pools sit on different nodes: with no scale-out link in the data the KV cannot move (its transfer time
  // would be infinite); say so instead of reporting an infinite TTFT.
  const bool no_link = xfer.size > xfer.scale_up_size && !xfer.scale_out;
  if (no_link)
    r.notes.push_back(fmt::format("disaggregated prefill/decode not sized: {} has no scale-out link in the data to "
                                  "carry the KV cache from the prefill to the decode pool",
                                  q.sys.node != nullptr ? q.sys.node->info.id : q.gpu.info.id));
  for (const ServingCandidate& pre : no_link ? std::vector<ServingCandidate>{} : r.per_tp) {
    ServingPerfPlan pp_plan = q.perf;
    pp_plan.tp = pre.tp;
    pp_plan.pp = pre.pp;
    if (q.a.moe && pp_plan.ep > pre.tp) pp_plan.ep = pre.tp;
    const Seconds prefill = prefill_time(q.a, pp_plan, 1, q.dm.isl, q.sys);
    ServingMemoryPlan mp = q.options.memory;
    mp.tp = pre.tp;
    mp.pp = pre.pp;
    mp.context = q.dm.isl;
    mp.kv = q.perf.kv;
    mp.weights = q.perf.weights;
    const ServingMemory mem = serving_memory(q.a, q.params, q.gpu, mp, Explain::off);
    const Seconds transfer = collective_time(Collective::send_recv, mem.kv_bytes_per_sequence_per_gpu, xfer);
    // Prefill pool: the fewest replicas whose queueing keeps TTFT within the target.
    // From the fewest that keep up (ρ < 1), at most a million more; TTFT is "unbounded" (the queue's 1e30 s) until
    // a count keeps up, so a pool that cannot is never reported with the TTFT of an empty queue.
    bool pre_saturated = false;
    std::int64_t n_pre = replicas_for(lambda * prefill.raw(), pre_saturated);
    Seconds ttft = prefill + prefill_queue_wait(1.0, prefill, q.sla.percentile, q.dm.in_d) + transfer;
    const std::int64_t first = n_pre;
    for (std::int64_t n = first; n < first + 1000000 && !pre_saturated; ++n) {
      const double rho = lambda / double(n) * prefill.raw();
      if (rho >= 1.0) continue;
      n_pre = n;
      ttft = prefill + prefill_queue_wait(rho, prefill, q.sla.percentile, q.dm.in_d) + transfer;
      if (!q.sla.ttft || ttft <= *q.sla.ttft || rho < 1e-3) break;
    }
    if (pre_saturated)
      r.notes.push_back(fmt::format("disaggregated: a TP {} prefill pool would need more than {:g} replicas for {:.3g} "
                                    "req/s",
                                    pre.tp, kMaxReplicas, lambda));
    for (const ServingCandidate& dec : r.per_tp) {
      ServingPerfPlan dp_plan = q.perf;
      dp_plan.tp = dec.tp;
      dp_plan.pp = dec.pp;
      if (q.a.moe && dp_plan.ep > dec.tp) dp_plan.ep = dec.tp;
      // Decode pool: the largest batch within the ITL target (no prefill mixed in).
      const std::int64_t cap = std::min(dec.max_batch_memory, q.perf.max_batch);
      std::int64_t best_b = 1;
      Seconds best_itl = decode_step_time(q.a, dp_plan, 1, q.dm.isl + q.dm.osl / 2, q.sys);
      for (std::int64_t B : batch_grid(cap)) {
        const Seconds itl = decode_step_time(q.a, dp_plan, B, q.dm.isl + q.dm.osl / 2, q.sys);
        if (q.sla.itl && itl > *q.sla.itl) break;
        best_b = B;
        best_itl = itl;
      }
      const double lam_d = double(best_b) / (double(q.dm.osl) * best_itl.raw());
      bool dec_saturated = false;
      const std::int64_t n_dec = replicas_for(lambda / lam_d - 1e-9, dec_saturated);
      DisaggregatedPlan d;
      d.prefill_tp = pre.tp;
      d.decode_tp = dec.tp;
      d.prefill_gpus = n_pre * pre.tp * pre.pp;
      d.decode_gpus = n_dec * dec.tp * dec.pp;
      d.gpus = d.prefill_gpus + d.decode_gpus;
      d.decode_batch = best_b;
      d.kv_transfer = transfer;
      d.ttft = ttft;
      d.itl = best_itl;
      d.transfer_tier = xfer.scale_out ? xfer.scale_out->name : xfer.scale_up.name;
      if (q.price) d.cost_per_mtok_usd = (*q.price * double(d.gpus)).raw() / (lambda * double(q.dm.osl)) * 1e6;
      d.meets_sla = (!q.sla.ttft || d.ttft <= *q.sla.ttft) && (!q.sla.itl || d.itl <= *q.sla.itl) && !pre_saturated &&
                    !dec_saturated;
      const bool take = !best_dp || (d.meets_sla != best_dp->meets_sla ? d.meets_sla
                                     : d.gpus != best_dp->gpus       ? d.gpus < best_dp->gpus
                                                                     : d.ttft + d.itl < best_dp->ttft + best_dp->itl);
      if (take) best_dp = d;
    }
  }
  return best_dp;
}

/// The --explain tree of the best layout: the replica count and GPUs for the traffic, with its steady state.
Derivation explain_plan(const Planner& q, double lambda, const ServingCandidate& b) {
  using units::format;
  ServingPerfPlan p = q.perf;
  p.tp = b.tp;
  p.pp = b.pp;
  SteadyState st = steady_state(q.a, p, b.batch, q.dm.isl, q.dm.osl, q.sys, Explain::on);
  return {
      "serving.plan",
      "Replicas and GPUs for the traffic",
      "λ_r = B / (osl · ITL) ; replicas = ⌈λ / λ_r⌉ ; GPUs = replicas · TP · PP ; TTFT_p = TTFT + R + W_p(ρ = "
      "λ/replicas · S) ; S = (1 − ITL_decode-only / ITL) / λ_r ; R = E[I²] / (2·E[I]) ; $/Mtok = GPUs · price / (λ · "
      "osl) · 10⁶",
      {q.dm.closed
           ? DerivationInput{"λ", units::format_number(b.requests_per_s, 4) + " req/s",
                             fmt::format("N / (TTFT + R + (osl − 1)·ITL + Z), N = {} users, Z = {}",
                                         *q.traffic.concurrency, format(q.traffic.think_time)),
                             Origin::user("--concurrency, --think-time-s")}
           : DerivationInput{"λ", units::format_number(lambda, 4) + " req/s", "request rate", Origin::user("--rate")},
       {"isl/osl", fmt::format("{}/{}", q.dm.isl, q.dm.osl), "tokens in/out",
        Origin::user("--input-tokens/--output-tokens")},
       {"B", std::to_string(b.batch),
        fmt::format("concurrent sequences per replica (KV capacity {})", b.max_batch_memory), Origin::derived()},
       {"λ_r", units::format_number(b.replica_requests_per_s, 4) + " req/s", "one replica at B", Origin::derived()},
       {"price",
        q.price
            ? fmt::format("${:.2f}/GPU-h{}", units::to_usd_per_hour(*q.price),
                          q.sys.price ? std::string(" (as given)")
                                      : fmt::format(" ({}, {})", hw::to_string(q.gpu.price_kind), q.gpu.price_provider))
            : std::string("unknown"),
        "GPU price",
        q.sys.price ? Origin::user("--price") : Origin::datasheet(q.gpu.info.cite("/price_usd_per_hour"))}},
      fmt::format("{} = {} GPUs; TTFT p{:g} {}, ITL {}", replica_layout(b.replicas, b.tp, b.pp), b.gpus,
                  q.sla.percentile * 100, format(b.ttft), format(b.itl)),
      {fmt::format("queueing wait at the percentile {} (M/G/1: Pollaczek–Khinchine mean, Cramér–Lundberg tail) at ρ "
                   "= {:.3g}, S = {}: the prefill work a prompt adds to the iterations it rides on",
                   format(b.queue_wait), b.queue_rho, format(b.prefill_service)),
       fmt::format("wait for the running iteration R = E[I²] / (2·E[I]) = {}: a prompt joins the batch only at the "
                   "next step, after the rest of the iteration in progress (the mean residual of the iteration mix)",
                   format(b.iteration_wait))},
      {st.derivation}};
}

}  // namespace

ServingPlanResult plan_serving(const wl::TransformerArch& a, const ParameterCounts& params,
                               const ServingPerfPlan& perf, const Traffic& traffic, const Sla& sla,
                               const ServingSystem& sys, const ServingPlanOptions& options, Explain explain) {
  using units::format;
  const detail::GraphMemoScope graphs(a);  // the layer and head graphs of `a`: each built once here
  ServingPlanResult r;
  r.traffic = traffic;
  r.sla = sla;
  const hw::GpuSpec& gpu = *sys.gpu;
  const Planner q{a,
                  params,
                  perf,
                  traffic,
                  sla,
                  sys,
                  options,
                  gpu,
                  sys.price ? sys.price : gpu.price,
                  sys.node != nullptr ? std::max(sys.node->gpus, sys.node->scale_up.domain_gpus) : 1,
                  demand_of(traffic, sla)};
  const bool closed = q.dm.closed;
  double lambda = q.dm.lambda;
  std::vector<TtftFrontierPoint> frontier_points;  // the candidates (TTFT, GPUs, batch) of the best layout so far
  const bool any_fit = search_layouts(q, r, frontier_points);
  summarise(q, any_fit, frontier_points, r);
  if (a.moe && perf.attention_dp > 1) r.notes.push_back(wide_ep_plan_note(perf));

  if (closed && r.best) {
    lambda = r.best->requests_per_s;  // the pools below serve the rate the colocated layout reaches
    r.traffic.requests_per_s = lambda;
    r.notes.push_back(fmt::format("closed loop: {} users{}: λ = N / (TTFT + R + (osl − 1)·ITL + think time) = {} req/s at "
                                  "the chosen layout (interactive response-time law); no request waits for a batch "
                                  "slot",
                                  *traffic.concurrency,
                                  traffic.think_time.raw() > 0 ? ", think time " + format(traffic.think_time)
                                                               : std::string(),
                                  units::format_number(lambda, 4)));
  }
  // Pools on other GPU types or of wide-EP groups: disagg_pools.cpp; otherwise both pools on this system.
  if (options.disaggregated && r.best)
    r.disaggregated = options.prefill_system || options.decode_system || (a.moe && perf.attention_dp > 1) ||
                              options.prefill_attention_dp > 0 || options.decode_attention_dp > 0
                          ? size_disaggregated_pools(a, params, perf, traffic, sla, sys, options, lambda, r.notes, explain)
                          : size_disaggregated(q, lambda, r);

  if (explain == Explain::on && r.best) r.derivation = explain_plan(q, lambda, *r.best);
  return r;
}

std::string replica_layout(std::int64_t replicas, int tp, int pp) {
  return fmt::format("{} replicas × TP {} × PP {}", replicas, tp, pp);
}

}  // namespace gpuplan::model
