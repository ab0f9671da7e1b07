#pragma once
// Internal to wl_io: what the training (scenario_io.cpp) and serving (serving_scenario_io.cpp) scenario decoders
// share: the constructor of an optional key of their field tables, and the re-homing of diagnostics onto the flags
// that gave the keys.
#include <map>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::wl_io::scenario_keys {

/// An optional key of a scenario's field table: its type, doc, range (min = max = 0: none) and allowed strings.
json_io::FieldSpec f(std::string key, json_io::FieldType t, std::string doc, double min = 0, double max = 0,
                     std::vector<std::string> choices = {});
/// Moves the diagnostics of keys that came from flags onto the flag ("--tp: error: ...").
Diagnostics rehome(const Diagnostics& raw, const std::string& pointer, const std::map<std::string, std::string>& origin);

}  // namespace gpuplan::wl_io::scenario_keys
