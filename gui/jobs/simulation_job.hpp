#pragma once
// One serving simulation (issue #28, deliverable 5): the serving page's replica (model, GPU, TP, weight and KV
// formats, prompt and output tokens) under synthetic open-loop arrivals at a chosen rate, simulated request by request
// by model::simulate_serving (vLLM v1's scheduler over iterations priced by forward_cost), on a worker thread.
//
// The replica resolves as the serving page's does (app::resolve_serving, the code behind `gpuplan serve` and
// `gpuplan simulate`); the KV pool is model::sim_kv_pool, as `gpuplan simulate` sizes it. The same request gives
// the numbers of `gpuplan simulate -m M --gpu G --tp T --input-tokens I --output-tokens O --rate R --requests N
// --seed S [--arrival gamma --cv C]`.
#include <cstdint>
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/model/simulate.hpp"
#include "serving_job.hpp"

namespace gpuplan::gui {

/// The request count is bounded so that the rate slider stays live (docs/gui.md: the recompute time).
constexpr std::int64_t kMaxSimulatedRequests = 20000;

struct SimulationRequest {
  ServingRequest serving;  ///< the replica; its batch, rate and SLA are the planner's and play no part here
  double rate = 5;         ///< requests/s
  bool gamma = false;      ///< Gamma gaps (bursty when cv > 1) instead of Poisson
  double cv = 2;           ///< coefficient of variation of the Gamma gaps
  std::int64_t requests = 2000;
  std::uint64_t seed = 1;
  /// Time-series samples over the arrivals' expected span (count / rate); the series runs on while the backlog drains.
  int series_points = 120;
  /// The batching policy the charts and the table show (issue #27 d4); the other one is simulated too, on the same
  /// requests and KV memory, for the comparison line (`gpuplan simulate --batching static --static-batch B
  /// --batch-timeout-s T`).
  model::Batching batching = model::Batching::continuous;
  std::int64_t static_batch = 32;
  double static_timeout_s = 0.5;
};

struct SimulationResult {
  Diagnostics diags;
  bool valid = false;
  SimulationRequest request;
  std::string model_name, gpu_name;
  // The engine as simulated.
  std::int64_t max_batched_tokens = 0, max_seqs = 0, kv_blocks = 0, block_size = 0;
  double series_interval_s = 0;
  model::SimResult sim;        ///< with samples (SimOptions::keep_samples)
  model::SimResult other;      ///< the other batching policy on the same requests and KV blocks (no samples)
  double simulate_ms = 0;      ///< wall time of generate_requests + sim_kv_pool + simulate_serving on the worker
  double total_ms = 0;         ///< the whole job, resolution included
};

/// The arrivals of `req` as the model generates them (seeded: the same request gives the same arrivals).
model::ArrivalSpec arrival_spec(const SimulationRequest& req);

SimulationResult evaluate_simulation(const AppData& data, const SimulationRequest& req);

}  // namespace gpuplan::gui
