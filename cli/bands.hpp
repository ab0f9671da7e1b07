#pragma once
// Error bands at the edge: the validation residuals become data/accuracy/bands.json (`gpuplan validate
// --write-bands`), which train and serve load and hand to model::band_for (the pure part, model/accuracy_band.hpp).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/model/accuracy_band.hpp"
#include "validate.hpp"

namespace gpuplan::cli {

/// measured/predicted *time* of a validated case (a throughput's predicted/measured); nullopt for metrics that are not
/// a time or a rate (memory) or a case without a prediction.
std::optional<double> time_ratio_of(const CaseResult& c);
/// The same ratio for any priced case with a time or rate metric, band case or not (a case kept out of the bands
/// with `not_in_bands` still has one).
std::optional<double> measured_over_predicted_time(const CaseResult& c);

/// The leave-one-source-out unit of a case: our own measurements are one campaign per GPU ("gpuplan measurement,
/// <gpu>": one host, one software stack, one method); a published case's is its publication, the source text before
/// the first ", " (the repository, paper or document; what follows names a table or row of it).
std::string loso_group(const CaseResult& c);

/// The band cases of validated sets (cases with a regime and a time ratio).
void append_band_cases(const ValidationSummary& v, std::vector<model::BandCase>& out);

/// The band file: the cases (id, source, regime, ratio), then each regime's band and the LOSO coverage (derived from
/// the cases, for readers), then `generated` (date and commit, not compared by the staleness check).
nlohmann::ordered_json bands_json(const std::vector<model::BandCase>& cases, const std::string& date,
                                  const std::string& commit);

/// The cases of a band file; diagnostics name the file and JSON pointer.
std::optional<std::vector<model::BandCase>> read_band_cases(const std::string& path, const std::string& shown,
                                                            Diagnostics& diags);

/// Differences between the committed cases and those computed now (missing, new, regime or ratio moved beyond a
/// relative 1e-6); empty when the file is current.
std::vector<std::string> band_differences(const std::vector<model::BandCase>& committed,
                                          const std::vector<model::BandCase>& now);

/// Loads <data>/accuracy/bands.json for train and serve: nullopt with no diagnostic when the file is absent (no band
/// is shown, and the output says so), nullopt with diagnostics when it is malformed.
std::optional<std::vector<model::BandCase>> load_bands(const std::string& data_dir, Diagnostics& diags);

/// The Markdown section of docs/accuracy.md: per-regime bands and the LOSO coverage.
std::string render_bands_markdown(const std::vector<model::BandCase>& cases);

/// Issue #24's yardstick: a family (GPU generation × dense/MoE) of at least kFamilyMinCases priced cases meets it when
/// its median |error| is at most kFamilyMaxMedianAbs and its median signed speed error within ±kFamilyMaxMedianSigned.
inline constexpr int kFamilyMinCases = 5;
inline constexpr double kFamilyMaxMedianAbs = 0.10;
inline constexpr double kFamilyMaxMedianSigned = 0.07;

struct FamilyStats {
  std::string family;      ///< "Hopper dense", or with the scale: "Hopper dense, <=256 GPUs"
  bool by_scale = false;   ///< a scale row inside its family
  int cases = 0;
  int out_of_bands = 0;    ///< of which kept out of the error bands (`not_in_bands`)
  double median_speed_error = 0;  ///< median signed error, positive where the model is optimistic (a rate over
                                  ///< or a time under the measured one); |signed| = |error|
  double median_abs_error = 0;    ///< median |error| as the set reports it
  double within_10 = 0;           ///< share with |error| ≤ 10%
  bool judged = false;            ///< at least kFamilyMinCases cases
  bool meets = false;
};

/// The priced cases of `s` with a regime and a time or rate metric, by family and by family × scale (sorted:
/// generation, dense before MoE, each family before its scale rows).
std::vector<FamilyStats> family_stats(const ValidationSummary& s);
/// The Markdown table of family_stats with the verdicts ("" for a set of fewer than two families).
std::string render_families_markdown(const ValidationSummary& s);
/// family_stats as JSON (meets_target null for a family of fewer than kFamilyMinCases cases; empty for a set of fewer
/// than two families).
nlohmann::ordered_json families_json(const ValidationSummary& s);

}  // namespace gpuplan::cli
