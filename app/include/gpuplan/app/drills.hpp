#pragma once
// Interview drills (data/drills/*.json) and the textbook's worked examples (data/validation/textbook_cases.json):
// a question is data — its inputs, the kind of model computation that answers it, the unit and a tolerance. The
// answer is always computed by the model (evaluate_kind), with its derivation tree, never stored as the truth: the
// stated answer a drill carries is what the textbook says, and tests check that the model reproduces it.
// `gpuplan validate` (textbook cases), `gpuplan drill` and the GUI's drills page all go through evaluate_kind.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/app/answer_check.hpp"
#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::app {

/// What a computation needs besides its inputs: the model library (inputs name models) and, for the serving-memory
/// kinds, the hardware database (inputs name a GPU). `origin` is the citation each input's origin records.
struct DrillContext {
  const wl_io::ModelLibrary* lib = nullptr;
  const hw::HardwareDb* db = nullptr;
  std::string origin;
};

struct KindAnswer {
  double value = 0;  ///< in the dimension's base unit (B, s, FLOP/B, FLOP/s, FLOP, 1)
  Dimension dim = Dimension::count;
  Derivation derivation;
};

/// The field tables of a drill file, of one drill, and of one kind's inputs (nullptr for an unknown kind), for the
/// decoder and the generated field reference (`gpuplan schema`).
const json_io::FieldTable& drill_file_fields();
const json_io::FieldTable& drill_fields();
const json_io::FieldTable* drill_kind_inputs(const std::string& kind);

/// The computation kinds, in documentation order.
std::vector<std::string> drill_kinds();
/// The dimension a kind answers in; nullopt for an unknown kind.
std::optional<Dimension> kind_dimension(const std::string& kind);

/// Runs one computation. `inputs` is checked against the kind's input table (unknown keys with "did you mean",
/// missing or out-of-range values, unknown model or GPU names), all reported in `diags` at `file` + `pointer`.
std::optional<KindAnswer> evaluate_kind(const std::string& kind, const json_io::Json& inputs, const DrillContext& ctx,
                                        const std::string& file, const std::string& pointer, Diagnostics& diags);

struct Drill {
  std::string id, topic, question, source, kind, unit, note;
  json_io::Json inputs;
  double rel_tolerance = 0;
  std::string tolerance_why;  ///< why rel_tolerance is wider than 1% (the source's own rounding); required then
  std::optional<double> stated_answer;        ///< what the source states, in `unit`
  std::optional<double> common_wrong_answer;  ///< the common wrong answer the source names, in `unit`
  std::string common_wrong_why;
  std::string model_differs;  ///< why the model's answer differs from the stated one (empty: it agrees)
  std::string pointer;        ///< of the drill in its file ("/drills/3")
};

struct DrillSet {
  std::string file;  ///< as shown in messages
  std::string source_file;
  std::vector<Drill> drills;
  [[nodiscard]] const Drill* find(const std::string& id) const;
  /// Topics in order of first appearance.
  [[nodiscard]] std::vector<std::string> topics() const;
};

/// Decodes a drill file: every problem at once with file and JSON pointer (unknown keys, missing fields, a unit that
/// does not measure what the kind computes, duplicate ids, inputs the kind does not take — via evaluate_kind's
/// checks when `ctx` has a library).
Result<DrillSet> decode_drills(const json_io::Json& j, const std::string& file, const DrillContext& ctx);
/// Reads and decodes `path`; messages name `shown` (e.g. "data/drills/textbook.json").
Result<DrillSet> load_drills(const std::string& path, const std::string& shown, const DrillContext& ctx);

struct DrillAnswer {
  double value = 0;  ///< in the drill's unit
  Derivation derivation;
};
/// The model's answer to a drill, in the drill's unit.
Result<DrillAnswer> answer_drill(const DrillSet& set, const Drill& d, const DrillContext& ctx);

/// The unit of a drill (decode_drills guarantees it exists).
const AnswerUnit& drill_unit(const Drill& d);

}  // namespace gpuplan::app
