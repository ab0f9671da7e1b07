#pragma once
// Resolution of a decoded training or serving scenario into model, plan and hardware — shared by the CLI's `train`,
// `validate`, `serve` and `report` and the GUI's jobs, so that every front end runs exactly what the user would run.
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "gpuplan/app/hardware_setup.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/search.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

namespace gpuplan::app {

struct ResolvedTraining {
  wl::TransformerArch arch;
  wl::TrainingPlan plan;
  model::TrainingSystem sys;
  model::Feasibility pre;  ///< layout problems found while resolving (e.g. GPUs not divisible)
};

/// `where(key)` names the flag or file pointer of a key for diagnostics.
std::optional<ResolvedTraining> resolve_training(wl_io::TrainingScenario s, bool global_batch_given,
                                                 const hw::HardwareDb& db, const wl_io::ModelLibrary& lib,
                                                 const std::function<std::string(const std::string&)>& where,
                                                 Diagnostics& diags);

/// The layout search space of `train --search` and `report`: the layout dimensions a scenario gives (`given(key)`:
/// tp, pp, dp, cp, ep, virtual_stages, schedule, micro_batch, sequence_parallel, recompute, zero, offload) stay fixed
/// at the base plan's values; the others are searched, over the GPU counts `gpus`.
model::SearchSpace fixed_search_space(const std::function<bool(const std::string&)>& given, const wl::TrainingPlan& base,
                                      const wl::TransformerArch& arch, std::vector<long long> gpus);

/// A serving scenario resolved against the model library and the hardware: what `gpuplan serve` evaluates (one
/// replica, or the capacity planner with a rate) and what `gpuplan report` plans per hardware option.
struct ResolvedServing {
  wl::TransformerArch arch;
  model::ParameterCounts params;
  model::ServingSystem sys;
  model::ServingMemoryPlan memory;  ///< the engine's memory knobs (tp/pp/context set per try by the planner)
  model::ServingPerfPlan perf;
  std::int64_t input_tokens = 1024, output_tokens = 256;  ///< the means when distributions are given
  std::optional<model::LengthDist> input_dist, output_dist;
  std::optional<double> rate;       ///< requests/s: the capacity planner
  std::optional<long long> concurrency;  ///< closed-loop users: the capacity planner (instead of a rate)
  double think_time_s = 0;               ///< closed loop: pause between a response and the next request
  /// The capacity planner runs (a rate or a concurrency is given).
  [[nodiscard]] bool planner() const { return rate.has_value() || concurrency.has_value(); }
  model::Sla sla;
  double percentile = 99.0;         ///< the SLA percentile as given (percent)
  std::optional<long long> batch;
  bool tp_given = false, pp_given = false, disaggregated = false;
  /// Disaggregated pools on their own GPU types (--prefill-gpu / --decode-gpu): each its GPU, node, calibration and
  /// price; absent: the pool runs on `sys`.
  std::optional<model::ServingSystem> prefill_sys, decode_sys;
  int prefill_attention_dp = 0, decode_attention_dp = 0;  ///< each pool's attention-DP ranks (0: perf's)
  std::optional<model::Speculation> speculation;
  std::optional<double> draft_ms;
  std::optional<wl::TransformerArch> draft;  ///< the draft model, when one is named

  /// The traffic of the planner (needs `rate`).
  [[nodiscard]] model::Traffic traffic() const;
  /// The planner's search options: the TP / PP sizes the scenario fixes, pools, memory knobs.
  [[nodiscard]] model::ServingPlanOptions plan_options() const;
};

/// Resolves a serving scenario: model, hardware (GPU h100-sxm5-80gb when no gpu, node or cluster is given),
/// calibration profile (unless `no_calibration`), memory plan, precision, overheads, SLA, length distributions,
/// speculative decoding. Every problem is a diagnostic at `where(key)`; nullopt after an error.
std::optional<ResolvedServing> resolve_serving(const wl_io::ServingScenario& s, const std::string& data_dir,
                                               bool no_calibration, const hw::HardwareDb& db,
                                               const wl_io::ModelLibrary& lib,
                                               const std::function<std::string(const std::string&)>& where,
                                               Diagnostics& diags);

}  // namespace gpuplan::app
