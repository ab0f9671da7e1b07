#pragma once
// The flags of a scenario field table (gpuplan/wl_io/scenario_fields.hpp) as CLI11 options: one option per key that
// has a flag, of the key's JSON type, so that CLI11 converts and refuses a value as it did for the hand-declared
// options; the given values then go into the scenario object at their keys, each remembering its flag (the reader
// reports a bad value against the flag: "--tp: error: ...").
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpuplan/wl_io/scenario_fields.hpp"

namespace gpuplan::cli {

class ScenarioFlags {
 public:
  ScenarioFlags() = default;
  ScenarioFlags(const ScenarioFlags&) = delete;  // CLI11 keeps pointers to the values
  ScenarioFlags& operator=(const ScenarioFlags&) = delete;

  using Own = std::map<std::string, std::function<void(const wl_io::ScenarioField&)>>;
  using Keep = std::function<bool(const wl_io::ScenarioField&)>;
  /// Adds an option for every field of `table` that has flags (and that `keep`, if given, keeps), in table order,
  /// with the field's help and default. A key in `own` is the command's to declare: `own` is called with the field at
  /// that place instead.
  void add(CLI::App& cmd, const wl_io::ScenarioFieldTable& table, const Own& own = {}, const Keep& keep = {});
  /// Adds the option of one field with the command's own help ("--ttft-ms" of autoscale: the SLA of each request).
  void add_field(CLI::App& cmd, const wl_io::ScenarioField& f, const std::string& help);
  /// True when the flag of `key` was given.
  [[nodiscard]] bool given(const std::string& key) const;
  /// The value of a given string flag, as typed.
  [[nodiscard]] std::optional<std::string> text(const std::string& key) const;
  /// The value of a given number / integer flag.
  [[nodiscard]] std::optional<double> number(const std::string& key) const;
  [[nodiscard]] std::optional<long long> integer(const std::string& key) const;
  /// Removes the values of a given string-list flag and returns them, one word per value (the option splits at commas):
  /// for a flag that another reader is to read instead (Megatron-LM's --recompute-modules, which shares gpuplan's
  /// spelling). Empty when the flag was not given.
  std::vector<std::string> take_list(const std::string& key);
  /// Writes every given value into `j` at its key and the flag it came from into `origin`.
  void overlay(nlohmann::json& j, std::map<std::string, std::string>& origin) const;

 private:
  struct Value {
    const wl_io::ScenarioField* field = nullptr;
    std::optional<long long> integer;
    std::optional<double> number;
    std::optional<bool> boolean;
    std::optional<std::string> text;
    std::vector<std::string> list;  ///< string lists (comma-separated or repeated); empty: not given
    bool on = false;                ///< a switch (a flag without a value) given
  };
  std::map<std::string, Value> values_;  // a map's nodes stay put: the options point into them
};

}  // namespace gpuplan::cli
