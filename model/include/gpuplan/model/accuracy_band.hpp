#pragma once
// Error bands: how far measured values have fallen from the model's predictions in a regime, from the validation
// residuals (`gpuplan validate`). A band is the [p10, p90] of measured/predicted *time* over the cases of the regime;
// a throughput's band is the inverse. Pure: the CLI loads the residuals (data/accuracy/bands.json) and passes them in.
#include <optional>
#include <string>
#include <vector>

namespace gpuplan::model {

/// The coordinates of a case or a prediction. An empty field is unknown.
struct Regime {
  std::string kind;        ///< "train" or "serve"
  std::string generation;  ///< "Ampere", "Hopper", "Blackwell" or "other"
  std::string arch;        ///< "dense" or "moe"
  std::string scale;       ///< "1 node", "<=256 GPUs", "<=2048 GPUs", ">2048 GPUs"
};

/// One validation case's residual: measured/predicted time (> 0).
struct BandCase {
  std::string id, source;
  Regime regime;
  double time_ratio = 1;
};

struct Band {
  double p10 = 1, p50 = 1, p90 = 1;  ///< quantiles of measured/predicted time
  int cases = 0;                     ///< cases the band pools
  std::string regime;                ///< the regime it pools, as text ("train Hopper dense <=256 GPUs")
  int level = 0;                     ///< 0 the full regime; each level up drops the finest remaining field
  std::string fallback;              ///< why a coarser regime was used ("" at level 0)
};

/// The fewest cases a regime needs before its own band is used; thinner regimes pool up to the coarser one.
inline constexpr int kMinBandCases = 5;

/// GPU generation from a GPU spec's family ("Blackwell Ultra" → "Blackwell"; Ada, Volta, AMD → "other").
std::string generation_of(const std::string& gpu_family);
/// Scale bucket: within one node (`gpus_per_node`), ≤ 256, ≤ 2048, more.
std::string scale_bucket(long long gpus, long long gpus_per_node);
std::string to_string(const Regime& r);

/// Linear-interpolation quantile (Hyndman & Fan type 7, numpy's default) of `v` at q ∈ [0, 1]; v non-empty.
double quantile(std::vector<double> v, double q);

/// The band of a regime. Quantiles are taken on log(ratio) and mapped back (so they are the ratio's quantiles).
/// Fallback hierarchy: the full regime; without scale; without arch; without generation (the kind only); all cases.
/// The first level with at least kMinBandCases cases is used. `exclude_source` drops the cases of one source (leave
/// one source out). nullopt when no case is left at any level.
std::optional<Band> band_for(const std::vector<BandCase>& cases, const Regime& r, const std::string& exclude_source = "");

struct BandCoverage {
  int cases = 0, inside = 0;  ///< cases with a LOSO band, and those whose measured value fell inside it
  double fraction() const { return cases > 0 ? double(inside) / double(cases) : 0.0; }
};
/// Leave-one-source-out coverage: each case against the band built without its own source.
BandCoverage loso_coverage(const std::vector<BandCase>& cases, const std::string& kind = "");

}  // namespace gpuplan::model
