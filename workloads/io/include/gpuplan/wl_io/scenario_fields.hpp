#pragma once
// Scenario field tables (issue #20): one row per scenario key, carrying what the reader checks (the key's JSON type,
// range, choices and reference text: a json_io::FieldSpec) and what the front ends show of it (the CLI flags, the GUI
// label, a one-line help and the default when the key is absent). The scenario reader, `gpuplan train`'s options and
// its overlay over a scenario file, the GUI's labels and tooltips and the field reference are all generated from it,
// so a key is declared once. The data-file tables (GPU, node, model, ...) have no flags or labels and stay
// json_io::FieldTables.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::wl_io {

struct ScenarioField {
  json_io::FieldSpec spec;         ///< key, JSON type, range, choices, reference text (`doc`)
  std::vector<std::string> flags;  ///< gpuplan's CLI flags that set the key, the primary first ("--model", "-m")
  std::string label;               ///< GUI label ("Micro-batch")
  std::string help;                ///< one line: the flag's --help and the GUI tooltip
  std::string default_text;        ///< what an absent key means ("1", "true", "micro_batch × dp"); empty: not set
  bool switch_flag = false;         ///< the flag takes no value and sets the key true (--disaggregated)
  bool planner_only = false;        ///< serving: only the capacity planner reads it (simulate etc. leave the flag out)
  /// Choices that are another framework's spelling of a choice listed before them ("adam", Megatron-LM's adamw): the
  /// reader takes them, a picker offers only the canonical ones.
  std::vector<std::string> spellings;

  [[nodiscard]] const std::string& key() const { return spec.key; }
  /// The primary flag ("--micro-batch"), or empty when no flag sets the key.
  [[nodiscard]] std::string flag() const { return flags.empty() ? std::string() : flags.front(); }
  /// The help with the default: "tensor parallel (default: 1)".
  [[nodiscard]] std::string help_with_default() const;
  /// A GUI tooltip: the help with the default, then the scenario key and the flag.
  [[nodiscard]] std::string tooltip() const;
  /// The choices a picker offers: the spec's choices in table order, without the other frameworks' spellings.
  [[nodiscard]] std::vector<std::string> picker_choices() const;
};
using ScenarioFieldTable = std::vector<ScenarioField>;

/// The training scenario's keys (`gpuplan train` and its --scenario files, a plan's training[].scenario).
const ScenarioFieldTable& training_fields();

/// The serving scenario's keys (`gpuplan serve`, simulate, compress, autoscale's serving and kv's memory subset, their
/// --scenario files, a plan's serving[].scenario).
const ScenarioFieldTable& serving_fields();

/// The autoscale scenario file (`gpuplan autoscale --scenario`): its top level (description, serving, load, autoscale,
/// e2e_ms; `serving` is a serving scenario), the load over the day and the autoscaling policy.
const ScenarioFieldTable& autoscale_fields();
const ScenarioFieldTable& autoscale_load_fields();
const ScenarioFieldTable& autoscale_policy_fields();
/// The reader's table of the file's top level, its load and autoscale objects nested.
const json_io::FieldTable& autoscale_file_specs();

/// `gpuplan simulate`'s own options (no scenario file holds them): the arrivals, the request lengths and the batching
/// policy; the GUI's simulation panel. The trace, length and seed rows are the autoscale load's.
const ScenarioFieldTable& simulate_fields();

/// The field of `key` in `table`, or nullptr.
const ScenarioField* find_field(const ScenarioFieldTable& table, std::string_view key);

/// The GUI label of a training key; the key itself for one the table does not have (a loaded file's unknown key).
std::string training_key_label(std::string_view key);

/// The GUI label of a serving key; the key itself for one the table does not have.
std::string serving_key_label(std::string_view key);

/// The GUI label of `key` in `table`; the key itself for one the table does not have.
std::string key_label(const ScenarioFieldTable& table, std::string_view key);

/// Where a key that no file gave is named in a diagnostic: its primary flag, else the key with '-' for '_' as a flag
/// ("--moe-a2a-backend": an engine's spelling that the commands accept too).
std::string flag_of_key(const ScenarioFieldTable& table, const std::string& key);

/// The reader's table (ObjectReader's FieldTable): the rows' specs in table order.
json_io::FieldTable field_specs(const ScenarioFieldTable& table);

/// The Markdown field reference of a scenario table: key, type, range, flags, GUI label, default, meaning.
std::string scenario_field_reference_markdown(const std::string& title, const ScenarioFieldTable& table);

/// docs/scenario.md's table of a scenario kind, one row per key in table order: the key, its type (a string's choices,
/// a list's items, a number's range), its flags ("—": none), its default, and its meaning: `meanings[key]` (the page's
/// own prose, a Markdown cell as written) or, for a key without one, the field's reference text.
std::string scenario_doc_table_markdown(const ScenarioFieldTable& table,
                                        const std::map<std::string, std::string>& meanings);

}  // namespace gpuplan::wl_io
