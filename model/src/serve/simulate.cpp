// The request-level serving simulator (simulate.hpp): vLLM v1's scheduler (sim_engine.hpp) over iterations priced by
// forward_cost, one replica.
#include "gpuplan/model/simulate.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

#include "sim_engine.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model {

Estimate<units::Seconds> static_batch_fill_wait(double rate_per_s, std::int64_t batch, const Origin& origin,
                                                Explain explain) {
  Estimate<units::Seconds> e;
  const double b = double(std::max<std::int64_t>(1, batch));
  e.value = units::Seconds(rate_per_s > 0 ? (b - 1.0) / (2.0 * rate_per_s) : 0.0);
  if (explain == Explain::on)
    e.derivation = {"static.fill_wait",
                    "Static batching: mean wait for the batch to fill",
                    "t_wait = (B − 1) / (2λ)  (the i-th of B evenly spaced arrivals waits (B − 1 − i)/λ)",
                    {{"B", fmt::format("{:g}", b), "requests per batch", origin},
                     {"λ", fmt::format("{:g} requests/s", rate_per_s), "arrival rate (evenly spaced)", origin}},
                    units::format(e.value),
                    {"before any service: the batch's prefill and decode come on top, and a batch that cannot start "
                     "because the previous one still runs waits longer"},
                    {}};
  return e;
}

const char* to_string(Batching b) { return b == Batching::static_ ? "static" : "continuous"; }

ForwardBatch iteration_batch(const IterationShape& it) {
  ForwardBatch fb;
  fb.decode_seqs = double(it.decodes);
  fb.queries_per_seq = 1;
  fb.decode_context =
      it.decodes > 0 ? std::max<std::int64_t>(0, std::llround(it.decode_context_sum / double(it.decodes))) : 0;
  if (it.chunks > 0 && it.chunk_tokens > 0) {
    const double mean = it.chunk_tokens / double(it.chunks);
    fb.prefill_tokens = std::max<std::int64_t>(1, std::llround(mean));
    fb.prefill_seqs = it.chunk_tokens / double(fb.prefill_tokens);
    // Σ s·(past + s/2) = n·s̄·(past + s̄/2) with n·s̄ = Σ s.
    const double past = it.chunk_work / it.chunk_tokens - 0.5 * double(fb.prefill_tokens);
    fb.prefill_past = std::max<std::int64_t>(0, std::llround(past));
    fb.prefill_emits_token = it.emitting_chunks > 0;
  } else {
    fb.prefill_emits_token = false;
  }
  return fb;
}

SimResult simulate_serving(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ServingSystem& sys,
                           const std::vector<SimRequest>& requests, const SimOptions& opt) {
  const detail::GraphMemoScope graphs(arch);  // the layer and head graphs of `arch`: each built once here
  SimResult res;
  res.requests = std::int64_t(requests.size());
  if (requests.empty()) return res;
  const sim::EngineLimits lim = sim::engine_limits(plan, opt);
  if (lim.total_blocks - lim.shared_blocks <= 0) {
    res.notes.push_back("the KV cache holds no block beyond the shared prefix: nothing can run");
    return res;
  }
  std::vector<sim::Req> rq = sim::make_requests(plan, requests);
  sim::CostMemo cost(arch, plan, sys, opt.cost_bits);
  sim::Tally t;
  t.ttft.reserve(rq.size());
  t.e2e.reserve(rq.size());
  t.tpot.reserve(rq.size());
  std::int64_t rejected = 0;
  double now = rq.front().arrival;
  const double start = now;
  sim::SeriesSampler series(opt.series_interval_s, start);
  if (opt.batching == Batching::static_) {
    const std::int64_t b = opt.static_batch > 0 ? opt.static_batch : std::max<std::int64_t>(1, plan.max_batch);
    now = sim::run_static(rq, lim, b, std::max(0.0, opt.static_timeout_s), cost,
                          opt.series_interval_s > 0 ? &series : nullptr, t, res, rejected);
  } else {
    sim::ReplicaEngine eng(lim);
    std::size_t next_arrival = 0;
    const double total_blocks_d = double(lim.total_blocks);
    while (t.completed + rejected < res.requests) {
      while (next_arrival < rq.size() && rq[next_arrival].arrival <= now) {
        if (lim.refuses(rq[next_arrival]))
          ++rejected;  // longer than the whole KV cache: vLLM refuses it
        else
          eng.enqueue(next_arrival);
        ++next_arrival;
      }
      if (eng.idle()) {
        if (next_arrival >= rq.size()) break;
        now = std::max(now, rq[next_arrival].arrival);
        continue;
      }
      if (!eng.begin_step(rq, now, cost, t)) continue;
      eng.finish_step(rq, t);
      now = eng.step_end();
      series.at(now, std::int64_t(eng.running()), std::int64_t(eng.waiting()),
                double(eng.used_blocks()) / total_blocks_d, t.out_tokens, res.series);
    }
  }

  res.completed = t.completed;
  res.preemptions = t.preemptions;
  res.iterations = t.iterations;
  res.busy_s = t.busy_s;
  res.cost_evaluations = cost.evaluations();
  res.kv_utilisation_peak = t.kv_peak;
  res.duration_s = now - start;
  res.ttft = sim::stats_of(t.ttft);
  res.e2e = sim::stats_of(t.e2e);
  res.tpot = sim::stats_of(t.tpot);
  res.queue = sim::stats_of(t.queue);
  res.itl = t.gaps.stats();
  if (opt.keep_samples) {
    res.samples.ttft = std::move(t.ttft);
    res.samples.e2e = std::move(t.e2e);
    res.samples.tpot = std::move(t.tpot);
    res.samples.itl = t.gaps.buckets();
  }
  if (res.duration_s > 0) {
    res.output_tokens_per_s = double(t.out_tokens) / res.duration_s;
    res.input_tokens_per_s = double(t.in_tokens) / res.duration_s;
    res.requests_per_s = double(res.completed) / res.duration_s;
    res.kv_utilisation_mean = t.kv_area / res.duration_s;
    res.mean_running = t.run_area / std::max(1e-30, res.busy_s);
  }
  if (rejected > 0 && opt.batching == Batching::static_)
    res.notes.push_back(fmt::format("{} requests need more KV than the replica holds (prompt + output over {} blocks "
                                    "of {} tokens) and were refused",
                                    rejected, lim.total_blocks, lim.block_size));
  else if (rejected > 0)
    res.notes.push_back(fmt::format("{} requests need more KV than the replica holds (prompt + output over {} blocks "
                                    "of {} tokens) and were refused",
                                    rejected, lim.total_blocks - lim.shared_blocks, lim.block_size));
  if (res.preemptions > 0)
    res.notes.push_back(fmt::format("{} preemptions by recompute: the KV blocks ran out and the newest running request "
                                    "gave its blocks back (vLLM v1)",
                                    res.preemptions));
  return res;
}

}  // namespace gpuplan::model
