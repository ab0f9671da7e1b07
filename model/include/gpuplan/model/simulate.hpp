#pragma once
// A request-level discrete-event simulator of one serving replica (`gpuplan simulate`): requests arrive (Poisson,
// Gamma-bursty, or a replayed trace), a continuous-batching engine with vLLM v1's scheduler admits them into
// iterations under a token budget and a sequence cap, allocates their KV in blocks, preempts by recompute when
// blocks run out, and each iteration lasts what `forward_cost` (serving.hpp) says that batch costs. Pure: no IO.
//
// Sources:
//  [vLLM-v1] vllm-project/vllm, vllm/v1/core/sched/scheduler.py, Scheduler.schedule(): one token budget
//            (max_num_batched_tokens) per step; running requests first, in order (decodes and unfinished prompt
//            chunks), then waiting requests FCFS while the budget, max_num_seqs and free KV blocks allow, a prompt
//            chunked to what the budget leaves; when allocate_slots fails for a running request the scheduler pops
//            the last request of `running` (FCFS: the newest), frees its blocks, sets num_computed_tokens = 0 and
//            puts it back at the front of the waiting queue (recompute); a step that preempted admits nothing new.
//  [Orca], [Sarathi] as in serving.hpp.
//  [static]  request-level (static) batching as HF transformers' generate() and FasterTransformer serve a batch: the
//            prompts padded to the longest, every sequence of the batch decoded until the longest output is done, no
//            request joins a running batch (Yu et al., Orca, OSDI 2022 §2.2 and Fig. 3, the contrast Orca draws).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/model/serving.hpp"

namespace gpuplan::model {

/// One request of the workload.
struct SimRequest {
  double arrival_s = 0;            ///< seconds from the start
  std::int64_t input_tokens = 1;   ///< prompt
  std::int64_t output_tokens = 1;  ///< tokens to generate (≥ 1)
};

/// A length distribution to sample from.
struct LengthSampler {
  enum class Kind { fixed, uniform, lognormal };
  Kind kind = Kind::fixed;
  double a = 1;  ///< fixed: tokens; uniform: low; lognormal: mean
  double b = 1;  ///< uniform: high (inclusive); lognormal: standard deviation
  [[nodiscard]] double mean() const;
};

/// An open-loop arrival process: Poisson (exponential gaps) or Gamma gaps with coefficient of variation `cv`
/// (cv = 1 is Poisson; cv > 1 bursty, as BurstGPT fits its traces), `count` requests, lengths drawn independently.
struct ArrivalSpec {
  enum class Kind { poisson, gamma };
  Kind kind = Kind::poisson;
  double rate_per_s = 1.0;
  double cv = 1.0;
  std::int64_t count = 1000;
  LengthSampler input, output;
  std::uint64_t seed = 1;
};

/// The requests of `spec`, sorted by arrival; the same seed gives the same requests on every platform (the
/// generators are written out here, not taken from <random>'s implementation-defined distributions).
std::vector<SimRequest> generate_requests(const ArrivalSpec& spec);

/// How the engine forms its batches (issue #27 d4).
///  - continuous: vLLM v1's iteration-level scheduler [vLLM-v1] (requests join and leave at every step);
///  - static_: [static] a batch of up to B requests starts when B wait or when the oldest has waited the timeout
///    (timeout 0: whatever waits starts as soon as the engine is free); its KV holds B padded sequences of the batch's
///    longest prompt + longest output; one prefill pass over the padded prompts, then decode steps of all B until the
///    longest output ends; the batch's requests stream their own tokens (TTFT at the prefill's end, the last token at
///    the step that makes it) and the next batch starts only when the whole batch is done.
enum class Batching { continuous, static_ };
const char* to_string(Batching b);

struct SimOptions {
  std::int64_t kv_blocks = 0;    ///< KV blocks of the replica (kv_token_capacity / block_size)
  std::int64_t block_size = 16;  ///< tokens per block
  // A prompt's cached tokens on (re)admission: cached_prompt_tokens (serving.hpp) of the plan — its shared prefix,
  // whose blocks are held once for all requests, and its prefix_hit_rate in whole blocks of kv_block_tokens.
  double series_interval_s = 0;  ///< > 0: a time series sample every this many simulated seconds
  /// Iteration costs are memoised on the batch shape with its token counts, mean decode context and prefill span
  /// rounded to `cost_bits` significant bits (8: within 0.4%); 0 = exact (no rounding, slower).
  int cost_bits = 8;
  bool keep_samples = false;  ///< fill SimResult::samples (the distributions behind the percentiles)
  Batching batching = Batching::continuous;
  std::int64_t static_batch = 0;  ///< static_: requests per batch, B (0: the plan's max_batch, max_num_seqs)
  double static_timeout_s = 0;    ///< static_: a partial batch starts once its oldest request has waited this long
};

/// Percentiles of one latency (seconds).
struct LatencyStats {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  std::int64_t samples = 0;
};

struct SimSeriesPoint {
  double t_s = 0;
  std::int64_t running = 0, waiting = 0;
  double kv_utilisation = 0;  ///< blocks in use / blocks
  double tokens_per_s = 0;    ///< output tokens in the interval / interval
};

/// The samples behind the percentiles (SimOptions::keep_samples): each completed request's TTFT, E2E and TPOT in
/// seconds, sorted ascending, and the token gaps as the ITL histogram's non-empty buckets (the gap each bucket stands
/// for, the percentiles' value; its count), ascending.
struct SimSamples {
  std::vector<double> ttft, e2e, tpot;
  std::vector<std::pair<double, std::int64_t>> itl;
};

struct SimResult {
  std::int64_t requests = 0, completed = 0;
  double duration_s = 0;  ///< first arrival to last completion
  LatencyStats ttft, itl, e2e, tpot;  ///< itl: every gap between tokens; tpot: per request (E2E − TTFT)/(out − 1)
  double output_tokens_per_s = 0, input_tokens_per_s = 0, requests_per_s = 0;
  double kv_utilisation_mean = 0, kv_utilisation_peak = 0;  ///< time-weighted over iterations
  double mean_running = 0;                                  ///< time-weighted sequences per iteration
  std::int64_t preemptions = 0;
  std::int64_t iterations = 0;
  std::int64_t batches = 0;           ///< static batching: batches run (0 under continuous batching)
  double mean_batch = 0;              ///< static batching: requests per batch, mean
  double padding_fraction = 0;        ///< static batching: padded token slots / all token slots the batches computed
  LatencyStats queue;                 ///< time from arrival to the start of the request's first step
  std::int64_t cost_evaluations = 0;  ///< forward_cost calls (the rest came from the memo)
  double busy_s = 0;                  ///< time the engine ran iterations
  std::vector<SimSeriesPoint> series;
  std::vector<std::string> notes;
  SimSamples samples;  ///< empty unless SimOptions::keep_samples
};

/// One iteration as the scheduler builds it: decoding sequences with their summed context and prompt chunks.
struct IterationShape {
  std::int64_t decodes = 0;
  double decode_context_sum = 0;  ///< Σ tokens each decoding sequence holds before this step
  std::int64_t chunks = 0;
  double chunk_tokens = 0;        ///< Σ new prompt tokens
  double chunk_work = 0;          ///< Σ s·(past + s/2): the prefill attention span the chunks cover
  std::int64_t emitting_chunks = 0;
};

/// The ForwardBatch whose forward_cost prices `it`: decode_context = the mean context (decode attention reads are
/// linear in it), prefill_tokens = the mean chunk and prefill_seqs = Σ s / that (the GEMM tokens exactly), and
/// prefill_past chosen so that s̄·(past + s̄/2)·prefill_seqs = Σ s·(past + s/2) (the attention work exactly); the
/// LM head runs on the chunks when any of them ends a prompt.
ForwardBatch iteration_batch(const IterationShape& it);

/// Static batching's wait to fill a batch under evenly spaced arrivals: the i-th of B requests (i = 0 the first)
/// waits (B − 1 − i)/λ for the last, so the mean wait is (B − 1) / (2λ) — the floor of its queueing before any
/// service (the simulator's queue statistic reproduces it when the engine keeps up).
Estimate<units::Seconds> static_batch_fill_wait(double rate_per_s, std::int64_t batch, const Origin& origin,
                                                Explain explain = Explain::on);

/// Simulates one replica serving `requests` (sorted by arrival) under `plan`'s engine (max_batched_tokens: the
/// token budget, 0 = unlimited; max_batch: max_num_seqs) [vLLM-v1]. PP must be 1.
SimResult simulate_serving(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ServingSystem& sys,
                           const std::vector<SimRequest>& requests, const SimOptions& options);

}  // namespace gpuplan::model
