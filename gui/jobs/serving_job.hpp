#pragma once
// One serving evaluation: a model on a GPU at a TP size with weight and KV formats, prompt and output lengths and an
// operating batch. Curves come from the model (prefill_time, decode_step_time, steady_state, serving_memory,
// kv_cache_size), one call per point, on a worker thread.
//
// The request is resolved by the application layer's app::resolve_serving (the code behind `gpuplan serve`): memory
// plan, precision, calibration and per-kernel overheads are exactly what the CLI would use.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app_data.hpp"
#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/compression.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/app/studies.hpp"

namespace gpuplan::gui {

struct ServingRequest {
  std::string model = "llama-3.1-70b";
  std::string gpu = "h100-sxm5-80gb";
  int tp = 8;
  std::string weight_dtype = "bf16";
  std::string kv_dtype = "bf16";
  std::int64_t prompt_tokens = 2048;
  std::int64_t output_tokens = 512;
  std::int64_t batch = 64;  ///< the operating point shown in the summary and the explain tree
  bool calibration = true;
  // The capacity planner (plan_serving, as `gpuplan serve --rate`): the operating rate and the SLA. The planner
  // chooses TP (≤ the scale-up domain) and the batch per replica; the sweep runs it at rates around `rate`.
  double rate = 10;      ///< requests/s at the operating point
  double ttft_ms = 0;    ///< SLA on TTFT at p99, 0 = none
  double itl_ms = 0;     ///< SLA on ITL, 0 = none
  bool capacity = true;  ///< run the planner sweep
};

// The studies (capacity vs rate, latency vs batch, KV vs context) are the application layer's (app/studies.hpp).
using CapacityPoint = app::CapacityPoint;
using ServingBatchPoint = app::BatchPoint;
using ServingContextPoint = app::ContextPoint;

struct ServingResult {
  Diagnostics diags;
  bool valid = false;
  std::string model_name, gpu_name;
  int tp = 1;
  std::int64_t prompt_tokens = 0, output_tokens = 0, batch = 0;
  // The operating point (steady_state at `batch`) and the memory at prompt + output.
  double ttft_s = 0, itl_s = 0, output_tokens_per_s = 0, requests_per_s = 0;
  double kv_bytes_per_token = 0, weights_total_bytes = 0, weights_per_gpu_bytes = 0, kv_pool_per_gpu_bytes = 0;
  double capacity_per_gpu_bytes = 0;
  std::int64_t max_concurrency = 0;
  bool memory_ok = true;
  std::vector<std::string> reasons, notes;
  std::vector<ServingBatchPoint> batches;
  std::vector<ServingContextPoint> contexts;
  std::vector<Derivation> derivations;  ///< steady state, memory, the planner at the operating rate
  // The capacity planner: at the operating rate (with what it was resolved from, for the Markdown report), and swept.
  double rate = 0;
  json_io::Json scenario;  ///< the planner's request as the serving scenario JSON of `gpuplan serve --scenario`
  std::optional<app::ResolvedServing> planner;
  std::optional<model::ServingPlanResult> plan;
  std::vector<CapacityPoint> capacity;
  // One engine iteration at the operating point, kernel by kernel (model::serving_timeline, as `gpuplan serve
  // --timeline`): the batch's decode step at prompt + output/2 and one prompt's prefill.
  model::StepTimeline decode_timeline, prefill_timeline;
  // The compression choices of `gpuplan compress` (model::default_compression_variants) on this replica at the
  // operating batch (model::compression_study; choices the model cannot take are listed in compression_refused).
  std::optional<model::CompressionStudy> compression;
  std::vector<std::string> compression_refused;
};

ServingResult evaluate_serving(const AppData& data, const ServingRequest& req);

/// The request's model, GPU, TP, weight and KV formats and lengths as the serving scenario `gpuplan serve` resolves,
/// the formats typed as the scenario decoder types them; a format the model does not read is an error at its label.
std::optional<wl_io::ServingScenario> serving_scenario(const ServingRequest& req, Diagnostics& diags);

}  // namespace gpuplan::gui
