// The request-level serving simulator (simulate.hpp): vLLM v1's scheduler over iterations priced by forward_cost.
#include "gpuplan/model/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>

namespace gpuplan::model {
namespace {

/// `x` rounded to `bits` significant bits (exact below 2^bits; bits = 0: exact).
std::int64_t round_bits(double x, int bits) {
  const auto v = std::int64_t(std::llround(std::max(0.0, x)));
  if (bits <= 0 || v < (std::int64_t(1) << bits)) return v;
  int shift = 0;
  while ((v >> shift) >= (std::int64_t(1) << bits)) ++shift;
  const std::int64_t half = std::int64_t(1) << (shift - 1);
  return ((v + half) >> shift) << shift;
}

struct CostKey {
  std::int64_t decodes, ctx, chunks, tokens, work, emit;
  bool operator==(const CostKey& o) const {
    return decodes == o.decodes && ctx == o.ctx && chunks == o.chunks && tokens == o.tokens && work == o.work &&
           emit == o.emit;
  }
};
struct CostKeyHash {
  std::size_t operator()(const CostKey& k) const {
    std::uint64_t h = 1469598103934665603ULL;
    for (std::int64_t v : {k.decodes, k.ctx, k.chunks, k.tokens, k.work, k.emit}) {
      h ^= std::uint64_t(v) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
      h *= 1099511628211ULL;
    }
    return std::size_t(h);
  }
};

/// Latency percentiles of a sample held whole (nearest rank); sorts `v`.
LatencyStats stats_of(std::vector<double>& v) {
  LatencyStats s;
  s.samples = std::int64_t(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(v.size());
  auto rank = [&](double p) { return v[std::size_t(std::max(0.0, std::ceil(p * double(v.size())) - 1.0))]; };
  s.p50 = rank(0.50);
  s.p90 = rank(0.90);
  s.p99 = rank(0.99);
  s.max = v.back();
  return s;
}

/// Token gaps are too many to keep (osl per request): a log histogram, 0.1% wide buckets from 1 µs, the mean exact.
struct GapHistogram {
  static constexpr double lo = 1e-6, ratio = 1.001;
  std::vector<std::int64_t> counts = std::vector<std::int64_t>(24000, 0);
  double sum = 0, max = 0;
  std::int64_t n = 0;
  void add(double x, std::int64_t k) {
    if (k <= 0) return;
    const double b = x <= lo ? 0.0 : std::log(x / lo) / std::log(ratio);
    const auto i = std::min<std::size_t>(counts.size() - 1, std::size_t(b));
    counts[i] += k;
    sum += x * double(k);
    n += k;
    max = std::max(max, x);
  }
  /// The gap bucket `i` stands for: its geometric middle, at most the largest gap seen.
  [[nodiscard]] double value(std::size_t i) const { return std::min(max, lo * std::pow(ratio, double(i) + 0.5)); }
  [[nodiscard]] std::vector<std::pair<double, std::int64_t>> buckets() const {
    std::vector<std::pair<double, std::int64_t>> out;
    for (std::size_t i = 0; i < counts.size(); ++i)
      if (counts[i] > 0) out.emplace_back(value(i), counts[i]);
    return out;
  }
  [[nodiscard]] LatencyStats stats() const {
    LatencyStats s;
    s.samples = n;
    if (n == 0) return s;
    s.mean = sum / double(n);
    s.max = max;
    auto rank = [&](double p) {
      const auto want = std::int64_t(std::ceil(p * double(n)));
      std::int64_t seen = 0;
      for (std::size_t i = 0; i < counts.size(); ++i) {
        seen += counts[i];
        if (seen >= want) return value(i);
      }
      return max;
    };
    s.p50 = rank(0.50);
    s.p90 = rank(0.90);
    s.p99 = rank(0.99);
    return s;
  }
};

struct Req {
  std::int64_t input = 0, output = 0;
  std::int64_t computed = 0;   ///< tokens whose KV is held (vLLM num_computed_tokens)
  std::int64_t generated = 0;  ///< output tokens emitted
  std::int64_t blocks = 0;     ///< KV blocks this request holds (beyond the shared prefix)
  std::int64_t hit = 0;        ///< prompt tokens the prefix cache holds for it on (re)admission
  double arrival = 0, first = -1, last = 0;
};

}  // namespace

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
  SimResult res;
  res.requests = std::int64_t(requests.size());
  if (requests.empty()) return res;
  const std::int64_t bs = std::max<std::int64_t>(1, opt.block_size);
  const std::int64_t budget0 =
      plan.max_batched_tokens > 0 ? plan.max_batched_tokens : std::numeric_limits<std::int64_t>::max() / 4;
  const auto max_seqs = std::size_t(std::max<std::int64_t>(1, plan.max_batch));
  const std::int64_t shared = std::max<std::int64_t>(0, plan.cached_prefix_tokens) / bs * bs;
  const std::int64_t shared_blocks = shared / bs;
  const std::int64_t total_blocks = std::max<std::int64_t>(0, opt.kv_blocks);
  std::int64_t free_blocks = total_blocks - shared_blocks;
  if (free_blocks <= 0) {
    res.notes.push_back("the KV cache holds no block beyond the shared prefix: nothing can run");
    return res;
  }

  std::vector<Req> rq(requests.size());
  std::int64_t rejected = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Req& r = rq[i];
    r.input = std::max<std::int64_t>(1, requests[i].input_tokens);
    r.output = std::max<std::int64_t>(1, requests[i].output_tokens);
    r.arrival = requests[i].arrival_s;
    // The prompt's cached tokens: the planner's rule (the shared prefix and the hit rate's whole blocks).
    r.hit = cached_prompt_tokens(plan, r.input);
  }

  auto blocks_for = [&](std::int64_t tokens) {
    const std::int64_t own = std::max<std::int64_t>(0, tokens - shared);
    return (own + bs - 1) / bs;
  };
  std::unordered_map<CostKey, double, CostKeyHash> memo;
  memo.reserve(4096);
  auto cost_of = [&](const IterationShape& it) {
    const int b = opt.cost_bits;
    const double ctx = it.decodes > 0 ? it.decode_context_sum / double(it.decodes) : 0.0;
    const double span = it.chunk_tokens > 0 ? it.chunk_work / it.chunk_tokens : 0.0;
    const CostKey key{it.decodes, round_bits(ctx, b), it.chunks, round_bits(it.chunk_tokens, b), round_bits(span, b),
                      it.emitting_chunks > 0 ? 1 : 0};
    auto found = memo.find(key);
    if (found != memo.end()) return found->second;
    // Priced at the rounded shape, so that equal keys mean equal costs.
    IterationShape q = it;
    q.decode_context_sum = double(key.ctx) * double(it.decodes);
    q.chunk_tokens = double(key.tokens);
    q.chunk_work = double(key.work) * double(key.tokens);
    const double t = forward_cost(arch, plan, iteration_batch(q), sys, Explain::off).total.raw();
    ++res.cost_evaluations;
    memo.emplace(key, t);
    return t;
  };

  std::vector<double> ttft, e2e, tpot;
  ttft.reserve(rq.size());
  e2e.reserve(rq.size());
  tpot.reserve(rq.size());
  GapHistogram gaps;
  std::vector<std::size_t> running, next_running;
  std::deque<std::size_t> waiting;
  std::vector<std::pair<std::size_t, std::int64_t>> scheduled;
  std::size_t next_arrival = 0;
  double now = rq.front().arrival, start = now, prev_end = -1;
  double kv_area = 0, run_area = 0;
  std::int64_t out_tokens = 0, in_tokens = 0, series_tokens = 0;
  double next_sample = opt.series_interval_s > 0 ? start + opt.series_interval_s : 0;
  const double total_blocks_d = double(total_blocks);

  while (res.completed + rejected < res.requests) {
    while (next_arrival < rq.size() && rq[next_arrival].arrival <= now) {
      Req& r = rq[next_arrival];
      if (blocks_for(r.input + r.output) > total_blocks - shared_blocks) {
        ++rejected;  // longer than the whole KV cache: vLLM refuses it
      } else {
        waiting.push_back(next_arrival);
      }
      ++next_arrival;
    }
    if (running.empty() && waiting.empty()) {
      if (next_arrival >= rq.size()) break;
      now = std::max(now, rq[next_arrival].arrival);
      continue;
    }

    // ---- schedule one step [vLLM-v1] ----
    std::int64_t budget = budget0;
    bool preempted = false;
    scheduled.clear();
    for (std::size_t i = 0; i < running.size() && budget > 0; ++i) {
      const std::size_t id = running[i];
      Req& r = rq[id];
      const std::int64_t n = std::min(r.input + r.generated - r.computed, budget);
      if (n <= 0) continue;
      const std::int64_t need = blocks_for(r.computed + n) - r.blocks;
      bool self = false;
      while (need > free_blocks) {
        const std::size_t victim = running.back();
        running.pop_back();
        Req& v = rq[victim];
        free_blocks += v.blocks;
        v.blocks = 0;
        v.computed = 0;
        waiting.push_front(victim);
        ++res.preemptions;
        preempted = true;
        if (victim == id) {
          self = true;
          break;
        }
      }
      if (self) break;
      free_blocks -= need;
      r.blocks += need;
      scheduled.emplace_back(id, n);
      budget -= n;
    }
    if (!preempted) {
      while (!waiting.empty() && budget > 0 && running.size() < max_seqs) {
        const std::size_t id = waiting.front();
        Req& r = rq[id];
        const std::int64_t computed = std::max(r.computed, r.hit);
        const std::int64_t n = std::min(r.input + r.generated - computed, budget);
        const std::int64_t need = blocks_for(computed + n) - r.blocks;
        if (need > free_blocks) break;
        waiting.pop_front();
        r.computed = computed;
        free_blocks -= need;
        r.blocks += need;
        running.push_back(id);
        scheduled.emplace_back(id, n);
        budget -= n;
      }
    }
    if (scheduled.empty()) continue;  // everything was preempted: admit again

    // ---- price the step ----
    IterationShape shape;
    for (const auto& [id, n] : scheduled) {
      const Req& r = rq[id];
      if (n == 1 && r.computed >= r.input) {
        ++shape.decodes;
        shape.decode_context_sum += double(r.computed);
      } else {
        ++shape.chunks;
        shape.chunk_tokens += double(n);
        shape.chunk_work += double(n) * (double(r.computed) + 0.5 * double(n));
        if (r.computed + n == r.input + r.generated) ++shape.emitting_chunks;
        in_tokens += n;
      }
    }
    const double dt = cost_of(shape);
    const double used = double(total_blocks - free_blocks);
    kv_area += used / total_blocks_d * dt;
    res.kv_utilisation_peak = std::max(res.kv_utilisation_peak, used / total_blocks_d);
    run_area += double(running.size()) * dt;
    res.busy_s += dt;
    ++res.iterations;
    const double end = now + dt;

    // ---- advance the requests ----
    std::int64_t same_gap = 0;  // decodes whose previous token came at the previous step's end: one gap, counted once
    bool finished_any = false;
    for (const auto& [id, n] : scheduled) {
      Req& r = rq[id];
      r.computed += n;
      if (r.computed < r.input + r.generated) continue;  // a prompt chunk that does not end it
      ++r.generated;
      ++out_tokens;
      ++series_tokens;
      if (r.first < 0) {
        r.first = end;
        ttft.push_back(end - r.arrival);
      } else if (r.last == prev_end) {
        ++same_gap;
      } else {
        gaps.add(end - r.last, 1);
      }
      r.last = end;
      if (r.generated >= r.output) {
        finished_any = true;
        free_blocks += r.blocks;
        r.blocks = 0;
        e2e.push_back(end - r.arrival);
        if (r.output > 1) tpot.push_back((end - r.first) / double(r.output - 1));
        ++res.completed;
      }
    }
    gaps.add(dt, same_gap);
    if (finished_any) {
      next_running.clear();
      for (std::size_t id : running)
        if (rq[id].generated < rq[id].output) next_running.push_back(id);
      running.swap(next_running);
    }
    prev_end = end;
    now = end;
    if (opt.series_interval_s > 0) {
      while (now >= next_sample) {
        res.series.push_back({next_sample - start, std::int64_t(running.size()), std::int64_t(waiting.size()),
                              double(total_blocks - free_blocks) / total_blocks_d,
                              double(series_tokens) / opt.series_interval_s});
        series_tokens = 0;
        next_sample += opt.series_interval_s;
      }
    }
  }

  res.duration_s = now - start;
  res.ttft = stats_of(ttft);
  res.e2e = stats_of(e2e);
  res.tpot = stats_of(tpot);
  res.itl = gaps.stats();
  if (opt.keep_samples) {
    res.samples.ttft = std::move(ttft);
    res.samples.e2e = std::move(e2e);
    res.samples.tpot = std::move(tpot);
    res.samples.itl = gaps.buckets();
  }
  if (res.duration_s > 0) {
    res.output_tokens_per_s = double(out_tokens) / res.duration_s;
    res.input_tokens_per_s = double(in_tokens) / res.duration_s;
    res.requests_per_s = double(res.completed) / res.duration_s;
    res.kv_utilisation_mean = kv_area / res.duration_s;
    res.mean_running = run_area / std::max(1e-30, res.busy_s);
  }
  if (rejected > 0)
    res.notes.push_back(fmt::format("{} requests need more KV than the replica holds (prompt + output over {} blocks "
                                    "of {} tokens) and were refused",
                                    rejected, total_blocks - shared_blocks, bs));
  if (res.preemptions > 0)
    res.notes.push_back(fmt::format("{} preemptions by recompute: the KV blocks ran out and the newest running request "
                                    "gave its blocks back (vLLM v1)",
                                    res.preemptions));
  return res;
}

}  // namespace gpuplan::model
