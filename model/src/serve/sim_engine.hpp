#pragma once
// The engine of one serving replica as the request-level simulators step it (internal to the model library):
// vLLM v1's scheduler over iterations priced by forward_cost (simulate.hpp for the sources). `simulate_serving` runs one
// replica; `simulate_fleet` (autoscale.hpp) runs many, each this same engine, so the scheduler is written once.
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpuplan/model/simulate.hpp"

namespace gpuplan::model::sim {

/// `x` rounded to `bits` significant bits (exact below 2^bits; bits = 0: exact).
std::int64_t round_bits(double x, int bits);

/// Latency percentiles of a sample held whole (nearest rank); sorts `v`.
LatencyStats stats_of(std::vector<double>& v);

/// Token gaps are too many to keep (osl per request): a log histogram, 0.1% wide buckets from 1 µs, the mean exact.
struct GapHistogram {
  static constexpr double lo = 1e-6, ratio = 1.001;
  std::vector<std::int64_t> counts = std::vector<std::int64_t>(24000, 0);
  double sum = 0, max = 0;
  std::int64_t n = 0;
  void add(double x, std::int64_t k);
  /// The gap bucket `i` stands for: its geometric middle, at most the largest gap seen.
  [[nodiscard]] double value(std::size_t i) const;
  /// The non-empty buckets (the gap each stands for; its count), ascending.
  [[nodiscard]] std::vector<std::pair<double, std::int64_t>> buckets() const;
  [[nodiscard]] LatencyStats stats() const;
};

/// One request as the engine tracks it.
struct Req {
  std::int64_t input = 0, output = 0;
  std::int64_t computed = 0;   ///< tokens whose KV is held (vLLM num_computed_tokens)
  std::int64_t generated = 0;  ///< output tokens emitted
  std::int64_t blocks = 0;     ///< KV blocks this request holds (beyond the shared prefix)
  std::int64_t hit = 0;        ///< prompt tokens the prefix cache holds for it on (re)admission
  double arrival = 0, first = -1, last = 0;  ///< first: the first token's time (−1: none yet); last: the latest token's
  bool started = false;        ///< scheduled at least once (its queueing time is counted)
};

/// The requests of `requests` as the engine tracks them: lengths at least 1, the prefix-cache hit of each prompt by the
/// planner's rule (cached_prompt_tokens).
std::vector<Req> make_requests(const ServingPerfPlan& plan, const std::vector<SimRequest>& requests);

/// Iteration costs memoised on the batch shape (SimOptions::cost_bits): one memo for all replicas of one engine.
class CostMemo {
 public:
  CostMemo(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ServingSystem& sys, int bits);
  double operator()(const IterationShape& it);
  [[nodiscard]] std::int64_t evaluations() const { return evaluations_; }

 private:
  struct Key {
    std::int64_t decodes, ctx, chunks, tokens, work, emit;
    bool operator==(const Key& o) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  const wl::TransformerArch* arch_;
  const ServingPerfPlan* plan_;
  const ServingSystem* sys_;
  int bits_;
  std::int64_t evaluations_ = 0;
  std::unordered_map<Key, double, KeyHash> memo_;
};

/// The engine's limits, the same for every replica.
struct EngineLimits {
  std::int64_t block_size = 16;
  std::int64_t budget = 0;         ///< token budget per step (max_batched_tokens; huge when 0 = unlimited)
  std::size_t max_seqs = 1;        ///< max_num_seqs
  std::int64_t shared = 0;         ///< shared-prefix tokens held once (whole blocks)
  std::int64_t shared_blocks = 0;  ///< their blocks
  std::int64_t total_blocks = 0;   ///< the replica's KV blocks
  [[nodiscard]] std::int64_t blocks_for(std::int64_t tokens) const {
    const std::int64_t own = tokens > shared ? tokens - shared : 0;
    return (own + block_size - 1) / block_size;
  }
  /// A request that can never run here (prompt + output over the KV cache beyond the shared prefix): vLLM refuses it.
  [[nodiscard]] bool refuses(const Req& r) const { return blocks_for(r.input + r.output) > total_blocks - shared_blocks; }
};
EngineLimits engine_limits(const ServingPerfPlan& plan, const SimOptions& opt);

/// What the steps of one or more replicas add up to.
struct Tally {
  GapHistogram gaps;
  std::int64_t out_tokens = 0, in_tokens = 0, preemptions = 0, iterations = 0, completed = 0;
  double busy_s = 0, kv_area = 0, run_area = 0, kv_peak = 0;
  std::vector<double> ttft, e2e, tpot;  ///< in the order the requests reach them
  std::vector<double> queue;            ///< arrival to the first step that schedules the request
};

/// The time series of SimOptions::series_interval_s: one sample per interval boundary that a step's end passes.
struct SeriesSampler {
  double interval = 0, start = 0, next = 0;
  std::int64_t tokens_at = 0;
  SeriesSampler(double interval_s, double start_s) : interval(interval_s), start(start_s), next(start_s + interval_s) {}
  void at(double now, std::int64_t running, std::int64_t waiting, double kv_utilisation, std::int64_t out_tokens,
          std::vector<SimSeriesPoint>& series);
};

/// Static batching [static] (simulate.hpp, Batching::static_) of `rq` from its first arrival: batches of up to `batch`
/// requests, a partial one once its oldest request has waited `timeout_s`, each run to its longest output. Fills `t`,
/// the batch counters and the series of `res`; counts in `rejected` the requests whose padded sequence alone is over
/// the KV cache. Returns the time the last batch ends.
double run_static(std::vector<Req>& rq, const EngineLimits& lim, std::int64_t batch, double timeout_s, CostMemo& cost,
                  SeriesSampler* series, Tally& t, SimResult& res, std::int64_t& rejected);

/// One replica's engine [vLLM-v1]: a step is scheduled and priced at its start (begin_step) and its tokens emitted at
/// its end (finish_step), so that a request routed to the replica while a step runs waits for the next one.
class ReplicaEngine {
 public:
  explicit ReplicaEngine(const EngineLimits& lim) : lim_(&lim), free_blocks_(lim.total_blocks - lim.shared_blocks) {}
  void enqueue(std::size_t id) { waiting_.push_back(id); }
  /// Schedules one step at `now` and prices it; false (nothing scheduled) when no request is waiting or running.
  bool begin_step(std::vector<Req>& rq, double now, CostMemo& cost, Tally& t);
  /// Emits the tokens of the step begun last, at its end; returns the requests it completed.
  std::int64_t finish_step(std::vector<Req>& rq, Tally& t);
  [[nodiscard]] bool idle() const { return running_.empty() && waiting_.empty(); }
  [[nodiscard]] bool in_step() const { return in_step_; }
  [[nodiscard]] double step_end() const { return end_; }
  [[nodiscard]] std::size_t running() const { return running_.size(); }
  [[nodiscard]] std::size_t waiting() const { return waiting_.size(); }
  [[nodiscard]] std::int64_t used_blocks() const { return lim_->total_blocks - free_blocks_; }

 private:
  const EngineLimits* lim_;
  std::int64_t free_blocks_;
  std::vector<std::size_t> running_, next_running_;
  std::deque<std::size_t> waiting_;
  std::vector<std::pair<std::size_t, std::int64_t>> scheduled_;
  double prev_end_ = -1, end_ = 0, step_dt_ = 0;
  bool in_step_ = false;
};

}  // namespace gpuplan::model::sim
