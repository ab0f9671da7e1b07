// The engine of one serving replica (sim_engine.hpp): vLLM v1's scheduler, one step at a time.
#include "sim_engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpuplan::model::sim {

std::int64_t round_bits(double x, int bits) {
  const auto v = std::int64_t(std::llround(std::max(0.0, x)));
  if (bits <= 0 || v < (std::int64_t(1) << bits)) return v;
  int shift = 0;
  while ((v >> shift) >= (std::int64_t(1) << bits)) ++shift;
  const std::int64_t half = std::int64_t(1) << (shift - 1);
  return ((v + half) >> shift) << shift;
}

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

void GapHistogram::add(double x, std::int64_t k) {
  if (k <= 0) return;
  const double b = x <= lo ? 0.0 : std::log(x / lo) / std::log(ratio);
  const auto i = std::min<std::size_t>(counts.size() - 1, std::size_t(b));
  counts[i] += k;
  sum += x * double(k);
  n += k;
  max = std::max(max, x);
}

double GapHistogram::value(std::size_t i) const { return std::min(max, lo * std::pow(ratio, double(i) + 0.5)); }

std::vector<std::pair<double, std::int64_t>> GapHistogram::buckets() const {
  std::vector<std::pair<double, std::int64_t>> out;
  for (std::size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0) out.emplace_back(value(i), counts[i]);
  return out;
}

LatencyStats GapHistogram::stats() const {
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

std::vector<Req> make_requests(const ServingPerfPlan& plan, const std::vector<SimRequest>& requests) {
  std::vector<Req> rq(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    Req& r = rq[i];
    r.input = std::max<std::int64_t>(1, requests[i].input_tokens);
    r.output = std::max<std::int64_t>(1, requests[i].output_tokens);
    r.arrival = requests[i].arrival_s;
    // The prompt's cached tokens: the planner's rule (the shared prefix and the hit rate's whole blocks).
    r.hit = cached_prompt_tokens(plan, r.input);
  }
  return rq;
}

CostMemo::CostMemo(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ServingSystem& sys, int bits)
    : arch_(&arch), plan_(&plan), sys_(&sys), bits_(bits) {
  memo_.reserve(4096);
}

std::size_t CostMemo::KeyHash::operator()(const Key& k) const {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::int64_t v : {k.decodes, k.ctx, k.chunks, k.tokens, k.work, k.emit}) {
    h ^= std::uint64_t(v) + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h *= 1099511628211ULL;
  }
  return std::size_t(h);
}

double CostMemo::operator()(const IterationShape& it) {
  const double ctx = it.decodes > 0 ? it.decode_context_sum / double(it.decodes) : 0.0;
  const double span = it.chunk_tokens > 0 ? it.chunk_work / it.chunk_tokens : 0.0;
  const Key key{it.decodes,     round_bits(ctx, bits_), it.chunks, round_bits(it.chunk_tokens, bits_),
                round_bits(span, bits_), it.emitting_chunks > 0 ? 1 : 0};
  auto found = memo_.find(key);
  if (found != memo_.end()) return found->second;
  // Priced at the rounded shape, so that equal keys mean equal costs.
  IterationShape q = it;
  q.decode_context_sum = double(key.ctx) * double(it.decodes);
  q.chunk_tokens = double(key.tokens);
  q.chunk_work = double(key.work) * double(key.tokens);
  const double t = forward_cost(*arch_, *plan_, iteration_batch(q), *sys_, Explain::off).total.raw();
  ++evaluations_;
  memo_.emplace(key, t);
  return t;
}

EngineLimits engine_limits(const ServingPerfPlan& plan, const SimOptions& opt) {
  EngineLimits l;
  l.block_size = std::max<std::int64_t>(1, opt.block_size);
  l.budget = plan.max_batched_tokens > 0 ? plan.max_batched_tokens : std::numeric_limits<std::int64_t>::max() / 4;
  l.max_seqs = std::size_t(std::max<std::int64_t>(1, plan.max_batch));
  l.shared = std::max<std::int64_t>(0, plan.cached_prefix_tokens) / l.block_size * l.block_size;
  l.shared_blocks = l.shared / l.block_size;
  l.total_blocks = std::max<std::int64_t>(0, opt.kv_blocks);
  return l;
}

void SeriesSampler::at(double now, std::int64_t running, std::int64_t waiting, double kv_utilisation,
                       std::int64_t out_tokens, std::vector<SimSeriesPoint>& series) {
  if (interval <= 0) return;
  while (now >= next) {
    series.push_back({next - start, running, waiting, kv_utilisation, double(out_tokens - tokens_at) / interval});
    tokens_at = out_tokens;
    next += interval;
  }
}

bool ReplicaEngine::begin_step(std::vector<Req>& rq, double now, CostMemo& cost, Tally& t) {
  const EngineLimits& L = *lim_;
  for (;;) {
    if (idle()) return false;
    std::int64_t budget = L.budget;
    bool preempted = false;
    scheduled_.clear();
    for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
      const std::size_t id = running_[i];
      Req& r = rq[id];
      const std::int64_t n = std::min(r.input + r.generated - r.computed, budget);
      if (n <= 0) continue;
      const std::int64_t need = L.blocks_for(r.computed + n) - r.blocks;
      bool self = false;
      while (need > free_blocks_) {
        const std::size_t victim = running_.back();
        running_.pop_back();
        Req& v = rq[victim];
        free_blocks_ += v.blocks;
        v.blocks = 0;
        v.computed = 0;
        waiting_.push_front(victim);
        ++t.preemptions;
        preempted = true;
        if (victim == id) {
          self = true;
          break;
        }
      }
      if (self) break;
      free_blocks_ -= need;
      r.blocks += need;
      scheduled_.emplace_back(id, n);
      budget -= n;
    }
    if (!preempted) {
      while (!waiting_.empty() && budget > 0 && running_.size() < L.max_seqs) {
        const std::size_t id = waiting_.front();
        Req& r = rq[id];
        const std::int64_t computed = std::max(r.computed, r.hit);
        const std::int64_t n = std::min(r.input + r.generated - computed, budget);
        const std::int64_t need = L.blocks_for(computed + n) - r.blocks;
        if (need > free_blocks_) break;
        waiting_.pop_front();
        if (!r.started) {
          r.started = true;
          t.queue.push_back(now - r.arrival);
        }
        r.computed = computed;
        free_blocks_ -= need;
        r.blocks += need;
        running_.push_back(id);
        scheduled_.emplace_back(id, n);
        budget -= n;
      }
    }
    if (!scheduled_.empty()) break;  // else everything was preempted: admit again
  }

  // ---- price the step ----
  IterationShape shape;
  for (const auto& s : scheduled_) {
    const Req& r = rq[s.first];
    const std::int64_t n = s.second;
    if (n == 1 && r.computed >= r.input) {
      ++shape.decodes;
      shape.decode_context_sum += double(r.computed);
    } else {
      ++shape.chunks;
      shape.chunk_tokens += double(n);
      shape.chunk_work += double(n) * (double(r.computed) + 0.5 * double(n));
      if (r.computed + n == r.input + r.generated) ++shape.emitting_chunks;
      t.in_tokens += n;
    }
  }
  const double dt = cost(shape);
  const double total = double(L.total_blocks);
  const double used = double(L.total_blocks - free_blocks_);
  t.kv_area += used / total * dt;
  t.kv_peak = std::max(t.kv_peak, used / total);
  t.run_area += double(running_.size()) * dt;
  t.busy_s += dt;
  ++t.iterations;
  step_dt_ = dt;
  end_ = now + dt;
  in_step_ = true;
  return true;
}

std::int64_t ReplicaEngine::finish_step(std::vector<Req>& rq, Tally& t) {
  in_step_ = false;
  const double end = end_;
  std::int64_t same_gap = 0;  // decodes whose previous token came at the previous step's end: one gap, counted once
  std::int64_t finished = 0;
  for (const auto& s : scheduled_) {
    Req& r = rq[s.first];
    r.computed += s.second;
    if (r.computed < r.input + r.generated) continue;  // a prompt chunk that does not end it
    ++r.generated;
    ++t.out_tokens;
    if (r.first < 0) {
      r.first = end;
      t.ttft.push_back(end - r.arrival);
    } else if (r.last == prev_end_) {
      ++same_gap;
    } else {
      t.gaps.add(end - r.last, 1);
    }
    r.last = end;
    if (r.generated >= r.output) {
      ++finished;
      free_blocks_ += r.blocks;
      r.blocks = 0;
      t.e2e.push_back(end - r.arrival);
      if (r.output > 1) t.tpot.push_back((end - r.first) / double(r.output - 1));
      ++t.completed;
    }
  }
  t.gaps.add(step_dt_, same_gap);
  if (finished > 0) {
    next_running_.clear();
    for (std::size_t id : running_)
      if (rq[id].generated < rq[id].output) next_running_.push_back(id);
    running_.swap(next_running_);
  }
  prev_end_ = end;
  return finished;
}

}  // namespace gpuplan::model::sim
