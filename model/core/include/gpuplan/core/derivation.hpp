#pragma once
// Every number says where it came from (DESIGN.md §2.4, §6): an Estimate carries its value and a derivation tree of
// {id, title, formula, substituted inputs with units and origin, result, notes, children}. The CLI's --explain and the
// GUI's explain tree render the same tree. Sweeps switch derivations off with Explain::off; the formulas are shared.
// A node keeps its number with its unit (value, unit) as the arithmetic produced it; the renderers format it
// (result_text). tests/model/test_explain_values.cpp walks every tree and checks each number against the quantity it
// explains.
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace gpuplan {

/// Where an input came from.
enum class OriginKind { datasheet, model_config, calibration, measurement, user, assumption, derived, constant };

struct Origin {
  OriginKind kind = OriginKind::derived;
  std::string ref;  ///< "data/hardware/gpus/h100-sxm5-80gb.json#/dense_peak/bf16_TFLOPs", "--seq", a citation...

  static Origin datasheet(std::string r) { return {OriginKind::datasheet, std::move(r)}; }
  static Origin model_config(std::string r) { return {OriginKind::model_config, std::move(r)}; }
  static Origin calibration(std::string r) { return {OriginKind::calibration, std::move(r)}; }
  /// A published or our own benchmark measurement used as a built-in default (not a calibration profile).
  static Origin measurement(std::string r) { return {OriginKind::measurement, std::move(r)}; }
  static Origin user(std::string r) { return {OriginKind::user, std::move(r)}; }
  static Origin assumption(std::string r) { return {OriginKind::assumption, std::move(r)}; }
  static Origin derived(std::string r = {}) { return {OriginKind::derived, std::move(r)}; }
  static Origin constant(std::string r) { return {OriginKind::constant, std::move(r)}; }
};

std::string to_string(OriginKind k);

struct DerivationInput {
  std::string symbol;  ///< as used in the formula ("h", "L", "BW_hbm")
  std::string value;   ///< formatted with its unit ("8192", "3.35 TB/s")
  std::string meaning;  ///< "hidden size"
  Origin origin;
};

/// The unit of a node's value. Bytes come in two renderings (decimal "GB", binary "GiB"); the value is bytes either way.
enum class Unit { none, number, count, bytes, bytes_binary, seconds, flop };

/// The unit's name as JSON and docs/formulas.md write it ("bytes", "seconds", "FLOP", "count", "number"; "" for none).
const char* to_string(Unit u);

/// How a node's value relates to its children's values (what the explain-tree test checks besides the value itself).
enum class Fold {
  none,  ///< the children explain parts or inputs of the value, not an arithmetic decomposition
  sum,   ///< value = Σ children's values
};

struct Derivation {
  std::string id;       ///< stable key ("params.attention")
  std::string title;    ///< "Attention parameters per layer"
  std::string formula;  ///< "h·(n_q + 2·n_kv)·d + n_q·d·h"
  std::vector<DerivationInput> inputs;
  std::string result;   ///< the result as text when it says more than one number; else empty and rendered from value
  std::vector<std::string> notes;
  std::vector<Derivation> children;
  /// The node's number in its unit's base (bytes, seconds, FLOP), kept as the arithmetic produced it; NaN when the
  /// node carries no single number (a verdict, a list of layouts).
  double value = std::numeric_limits<double>::quiet_NaN();
  Unit unit = Unit::none;
  Fold fold = Fold::none;

  [[nodiscard]] bool empty() const { return id.empty() && title.empty() && children.empty(); }
  [[nodiscard]] bool has_value() const { return value == value; }
  /// Keeps `v` in unit `u` (and how it folds its children); returns *this.
  Derivation& set(double v, Unit u, Fold f = Fold::none) {
    value = v;
    unit = u;
    fold = f;
    return *this;
  }
  /// The text the renderers show: `result` when given, else the value formatted in its unit (format_value).
  [[nodiscard]] std::string result_text() const;
  /// Depth-first search by id; nullptr if absent.
  [[nodiscard]] const Derivation* find(const std::string& wanted_id) const;
};

/// `v` formatted as the renderers show a value of unit `u` (units::format's 3 significant digits; counts with thousands
/// separators; plain numbers with 4 digits).
std::string format_value(double v, Unit u);

/// Whether formulas should build their derivation (off in inner loops of searches and sweeps).
enum class Explain { off, on };

/// Records a formula's terms as the arithmetic computes them:
///   Terms tr(explain, d);
///   const double p_gpu = tr.let("memory.p_gpu", "Parameters per GPU", "P_dense/t + P_experts/(t·ep)",
///                               p_dense / t + p_expert / te, Unit::count);
/// `let` returns its value unchanged; when explaining it appends the child {id, title, formula, value, unit} to `d`
/// (add inputs and notes to last()). With Explain::off it records nothing and copies no string, so a search's inner
/// loop pays one branch.
class Terms {
 public:
  Terms() = default;  ///< records nothing
  Terms(Explain e, Derivation& into) : into_(e == Explain::on ? &into : nullptr) {}
  [[nodiscard]] bool on() const { return into_ != nullptr; }
  double let(const char* id, const char* title, const char* formula, double v, Unit u, Fold f = Fold::none) {
    if (into_ != nullptr) record(id, title, formula, v, u, f);
    return v;
  }
  /// The node `let` appended last (nullptr when off or before the first let).
  [[nodiscard]] Derivation* last() const {
    return into_ == nullptr || into_->children.empty() ? nullptr : &into_->children.back();
  }

 private:
  void record(const char* id, const char* title, const char* formula, double v, Unit u, Fold f);
  Derivation* into_ = nullptr;
};

template <class Q>
struct Estimate {
  Q value{};
  Derivation derivation;
};

}  // namespace gpuplan
