#pragma once
// Every number says where it came from (DESIGN.md §2.4, §6): an Estimate carries its value and a derivation tree of
// {id, title, formula, substituted inputs with units and origin, result, notes, children}. The CLI's --explain and the
// GUI's explain tree render the same tree. Sweeps switch derivations off with Explain::off; the formulas are shared.
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

struct Derivation {
  std::string id;       ///< stable key ("params.attention")
  std::string title;    ///< "Attention parameters per layer"
  std::string formula;  ///< "h·(n_q + 2·n_kv)·d + n_q·d·h"
  std::vector<DerivationInput> inputs;
  std::string result;   ///< formatted result with unit
  std::vector<std::string> notes;
  std::vector<Derivation> children;

  [[nodiscard]] bool empty() const { return id.empty() && title.empty() && children.empty(); }
  /// Depth-first search by id; nullptr if absent.
  [[nodiscard]] const Derivation* find(const std::string& wanted_id) const;
};

/// Whether formulas should build their derivation (off in inner loops of searches and sweeps).
enum class Explain { off, on };

template <class Q>
struct Estimate {
  Q value{};
  Derivation derivation;
};

}  // namespace gpuplan
