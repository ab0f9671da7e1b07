#pragma once
// Sweeps (`gpuplan train --sweep`, `gpuplan serve --sweep`): one or more scenario keys varied over ranges or lists,
// every point of the grid evaluated by the command's own code, one row per point with stable column names (the
// swept keys as given, then the command's result keys with their unit suffixes). CSV or JSON; a progress line on
// stderr when it is a terminal.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::cli {

struct SweepAxis {
  std::string key;                    ///< a scenario key ("gpus", "price_usd_per_hour")
  std::vector<nlohmann::json> values;  ///< typed as the key's field
};

/// "key=a..b" (a, 2a, 4a, … ≤ b), "key=a..b:step" (a, a+step, … ≤ b) or "key=v1,v2,v3". The key must be one of
/// `table`'s; values are typed by its field (integer, number, string, boolean) and checked by the decoder later.
/// Diagnostics at "--sweep".
std::optional<SweepAxis> parse_sweep(const std::string& spec, const json_io::FieldTable& table, Diagnostics& diags);

/// A result column: its stable key and the JSON pointer of the value in the command's JSON output.
struct SweepColumn {
  std::string key;
  std::string pointer;
};

/// Evaluates the grid (the first axis varies slowest): `eval` gets the scenario object of one point and returns the
/// command's JSON output for it, or nullopt after an error diagnostic (the sweep stops; exit 2). Rows: the swept
/// values, then `columns` (null / empty when absent). `feasible_pointer` says whether a point is feasible (exit 3
/// when none is).
int run_sweep(const std::vector<SweepAxis>& axes, const nlohmann::json& base,
              const std::function<std::optional<nlohmann::ordered_json>(const nlohmann::json&, Diagnostics&)>& eval,
              const std::vector<SweepColumn>& columns, Format format);

}  // namespace gpuplan::cli
