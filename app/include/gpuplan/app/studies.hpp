#pragma once
// The studies a front end runs around one scenario: strong scaling of a training plan over DP, serving latency and
// throughput vs batch, KV cache vs context, and the capacity planner's answer vs request rate. Plain values out; the
// GUI charts them (Training and Serving tabs), any front end may print them. Every number comes from the model.
#include <cstdint>
#include <string>
#include <vector>

#include "gpuplan/app/resolve.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::app {

struct ScalingSample {
  long long gpus = 0;
  int dp = 0;
  bool feasible = false, fits = false;
  double step_time_s = 0, time_to_train_s = 0;  ///< time to train: the token budget, else one step
  double ideal_time_s = 0, efficiency = 0;
  double mfu = 0;
};
struct ScalingSeries {
  std::string gpu_name;
  bool time_to_train = false;  ///< false: the y values are step times (no token budget)
  std::vector<ScalingSample> samples;
};

/// Strong scaling of `plan` on `sys`: DP doubled from 1 up to 4× the plan's (at least 128), the global batch kept
/// (layouts it does not divide are skipped), at most 131072 GPUs; the last 14 points, each with its efficiency
/// against the first that fits (model::strong_scaling).
ScalingSeries strong_scaling_study(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                   const model::TrainingSystem& sys, const std::string& gpu_name);

struct BatchPoint {
  std::int64_t batch = 0;
  double ttft_s = 0;   ///< steady state: the prompt's prefill chunks riding on iterations, no queueing
  double itl_s = 0;    ///< steady state: mean iteration (decode + piggybacked prefill)
  double itl_decode_only_s = 0;  ///< an iteration without prefill work (the ITL floor)
  double output_tokens_per_s = 0;
  bool fits = true;    ///< batch ≤ the KV capacity at prompt + output
};

/// TTFT, ITL and throughput vs batch (1, 2, 4, … 1024) under continuous batching (model::steady_state); `fits` says
/// whether the batch is within `max_concurrency` (the KV capacity at prompt + output).
std::vector<BatchPoint> batch_study(const wl::TransformerArch& arch, const model::ServingPerfPlan& perf,
                                    const model::ServingSystem& sys, std::int64_t prompt_tokens,
                                    std::int64_t output_tokens, std::int64_t max_concurrency);

struct ContextPoint {
  std::int64_t context = 0;
  double kv_per_sequence_bytes = 0;          ///< whole model, one sequence
  double kv_per_sequence_per_gpu_bytes = 0;  ///< on one GPU of the TP group, block-rounded
  std::int64_t max_concurrency = 0;          ///< sequences one replica holds at this context
};

/// KV cache per sequence and the sequences one replica holds vs context (1024, 2048, … up to the model's maximum
/// position, 131072 when it has none), with `memory`'s engine knobs (model::serving_memory).
std::vector<ContextPoint> context_study(const wl::TransformerArch& arch, const model::ParameterCounts& params,
                                        const hw::GpuSpec& gpu, const model::ServingMemoryPlan& memory);

/// The capacity planner's answer at one request rate (the cheapest layout that meets the SLA, else the best
/// achievable, as `gpuplan serve --rate` prints it).
struct CapacityPoint {
  double rate = 0;
  bool meets_sla = false;
  int tp = 1, pp = 1;
  std::int64_t batch = 0, replicas = 0, gpus = 0;
  double ttft_s = 0, itl_s = 0;
  double cost_per_mtok_usd = 0;  ///< 0 when the GPU has no price
};

/// The planner (model::plan_serving with `rs`'s options) at 1/64 … 64 × `rate` (factors of 2); rates where it finds
/// no layout at all are left out.
std::vector<CapacityPoint> capacity_study(const ResolvedServing& rs, double rate);

}  // namespace gpuplan::app
