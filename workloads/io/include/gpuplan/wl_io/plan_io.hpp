#pragma once
// Budget plans (`gpuplan report PLAN.json`, docs/report.md): training runs and serving deployments to cost on
// several hardware options. Decoded strictly — unknown keys with "did you mean", wrong types, missing keys, all at
// once with file and JSON pointer. Each item's `scenario` is a training or serving scenario object (the keys of
// docs/scenario.md) without the hardware keys, which the options supply.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

namespace gpuplan::wl_io {

struct PlanOption {
  std::string id, name;  ///< name defaults to the id
  std::string gpu, node, cluster;
  std::optional<double> price_usd_per_gpu_hour;  ///< default: the GPU file's indicative price
  std::optional<long long> max_gpus;
  std::string pointer;  ///< "/options/0"
};

struct PlanTrainingItem {
  std::string id, name;
  TrainingScenario scenario;
  std::vector<std::string> scenario_keys;  ///< keys the scenario gives: those layout dimensions stay fixed
  json_io::Json scenario_json;             ///< as written (to print the equivalent `gpuplan train` command)
  double tokens = 0;
  double deadline_days = 0;
  std::vector<long long> gpus;  ///< GPU counts to search (default 8..16384, doubling)
  std::string pointer;          ///< "/training/0"
};

struct PlanServingItem {
  std::string id, name;
  ServingScenario scenario;
  json_io::Json scenario_json;  ///< as written (to print the equivalent `gpuplan serve` command)
  std::string pointer;  ///< "/serving/0"
};

struct Plan {
  std::string description;
  std::vector<PlanOption> options;
  std::vector<PlanTrainingItem> training;
  std::vector<PlanServingItem> serving;
};

const json_io::FieldTable& plan_fields();
const json_io::FieldTable& plan_option_fields();
const json_io::FieldTable& plan_training_fields();
const json_io::FieldTable& plan_serving_fields();

/// The GPU counts a training item searches when it gives no `gpus`.
inline constexpr const char* kDefaultPlanGpus = "8..16384";

Result<Plan> decode_plan(const json_io::Json& j, const std::string& file);

}  // namespace gpuplan::wl_io
