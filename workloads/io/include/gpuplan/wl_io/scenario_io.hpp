#pragma once
// Training scenarios: a JSON object with the keys of `gpuplan train`'s flags (docs/scenario.md), decoded with the
// same strict field table whether it comes from --scenario FILE.json, from flags, or both (flags override the file).
#include <map>
#include <optional>
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::wl_io {

struct TrainingScenario {
  std::string model;
  std::string gpu, node, cluster;
  std::optional<long long> gpus;
  wl::TrainingPlan plan;
  bool dp_given = false;  ///< false: dp = gpus / (tp·pp·cp), filled in by resolve
  std::optional<double> price_usd_per_hour;
};

const json_io::FieldTable& training_scenario_fields();

/// Decodes a scenario object. `origin_of_key` maps keys that came from flags to the flag name, so that a bad flag
/// value is reported as "--tp: error: ..." and a bad file value as "file.json: /tp: error: ...".
Result<TrainingScenario> decode_training_scenario(const json_io::Json& j, const std::string& file,
                                                  const std::map<std::string, std::string>& origin_of_key = {});

}  // namespace gpuplan::wl_io
