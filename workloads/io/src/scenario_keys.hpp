#pragma once
// Internal to wl_io: what the training (scenario_io.cpp) and serving (serving_scenario_io.cpp) scenario decoders
// share: the re-homing of diagnostics onto the flags that gave the keys (their field tables: scenario_row.hpp).
#include <map>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::wl_io::scenario_keys {

/// Moves the diagnostics of keys that came from flags onto the flag ("--tp: error: ...").
Diagnostics rehome(const Diagnostics& raw, const std::string& pointer, const std::map<std::string, std::string>& origin);

}  // namespace gpuplan::wl_io::scenario_keys
