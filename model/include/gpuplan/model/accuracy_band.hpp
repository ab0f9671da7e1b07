#pragma once
// Error bands: how far measured values may fall from the model's predictions in a regime, from the validation
// residuals (`gpuplan validate`). A band is the [p10, p90] of measured/predicted *time* that a case from a source the
// bands have not seen should expect (a one-way random-effects prediction interval over the regime's sources); a
// throughput's band is the inverse. Pure: the CLI loads the residuals (data/accuracy/bands.json) and passes them in.
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
  /// The unit that leave-one-source-out leaves out and that the bands weight equally: the publication, or our own
  /// measurement campaign on one GPU (empty: the source). A 357-row sweep of one paper is one source, not 357.
  std::string group;
  std::string dev_case;  ///< the dev-set case the row comes from (empty: the id); a sweep is one dev case of many rows
  const std::string& group_key() const { return group.empty() ? source : group; }
  const std::string& dev_case_key() const { return dev_case.empty() ? id : dev_case; }
};

struct Band {
  double p10 = 1, p50 = 1, p90 = 1;  ///< quantiles of measured/predicted time
  int cases = 0;                     ///< cases the band pools
  int sources = 0;                   ///< distinct sources (groups) among them
  std::string regime;                ///< the regime it pools, as text ("train Hopper dense <=256 GPUs")
  int level = 0;                     ///< 0 the full regime; each level up drops the finest remaining field
  std::string fallback;              ///< why a coarser regime was used ("" at level 0)
};

/// The fewest cases a regime needs before its own band is used; thinner regimes pool up to the coarser one.
inline constexpr int kMinBandCases = 5;
/// ... and the fewest sources: between-source spread cannot be estimated from one or two.
inline constexpr int kMinBandSources = 3;

/// GPU generation from a GPU spec's family ("Blackwell Ultra" → "Blackwell"; Ada, Volta, AMD → "other").
std::string generation_of(const std::string& gpu_family);
/// Scale bucket: within one node (`gpus_per_node`), ≤ 256, ≤ 2048, more.
std::string scale_bucket(long long gpus, long long gpus_per_node);
std::string to_string(const Regime& r);

/// Linear-interpolation quantile (Hyndman & Fan type 7, numpy's default) of `v` at q ∈ [0, 1]; v non-empty.
double quantile(std::vector<double> v, double q);

/// One-sided 90% quantile of Student's t with `df` degrees of freedom (df ≥ 1): the standard table to 30, then the
/// Cornish–Fisher series z + (z³ + z)/(4·df) around the normal z = 1.2816 (within 2e-4 of the exact value at df ≥ 30).
double student_t90(int df);

/// The band of a regime: a prediction interval for one more case from a source not yet seen, on log(ratio).
/// Each source s (BandCase::group_key) of the pool contributes its mean log ratio m_s; with k sources,
///   μ = mean of the m_s (every source weighs the same, however many rows it has),
///   τ² = sample variance of the m_s (between sources), σ_w² = mean over sources of the variance within each,
///   [p10, p90] = exp(μ ∓ t_{0.9, k−1} · √(τ²·(1 + 1/k) + σ_w²)), p50 = exp(μ)
/// (the prediction interval of a one-way random-effects model: Higgins, Thompson & Spiegelhalter, "A re-evaluation of
/// random-effects meta-analysis", J. R. Stat. Soc. A 172 (2009) 137–159, which uses k−2 degrees of freedom where the
/// source means carry their own standard errors; here the within-source spread enters as σ_w² and t has k−1).
/// With one source only, τ² = 0 and t has n−1 degrees of freedom.
/// Fallback hierarchy: the full regime; without scale; without generation (kind and dense/MoE); without dense/MoE (the
/// kind only); all cases.
/// The first level with at least kMinBandCases cases from kMinBandSources sources is used. `exclude_group` drops the
/// cases of one source (leave one source out). nullopt when no case is left at any level.
std::optional<Band> band_for(const std::vector<BandCase>& cases, const Regime& r, const std::string& exclude_group = "");

/// Leave-one-source-out coverage of the p10–p90 bands: each case against the band built without its own source.
struct BandCoverage {
  int cases = 0, inside = 0;    ///< cases with a LOSO band, and those whose measured value fell inside it
  int sources = 0;              ///< LOSO folds (sources) with a case
  double source_mean = 0;       ///< mean over the folds of the fraction of the fold's cases inside (folds weigh alike)
  int dev_cases = 0;            ///< dev-set cases (a sweep of rows is one)
  double dev_case_mean = 0;     ///< mean over dev cases of the fraction of their rows inside
  double fraction() const { return cases > 0 ? double(inside) / double(cases) : 0.0; }  ///< pooled over rows
};
/// Coverage over the cases of `kind` ("" all) and, when `group` is given, of that one source only.
BandCoverage loso_coverage(const std::vector<BandCase>& cases, const std::string& kind = "",
                           const std::string& group = "");

}  // namespace gpuplan::model
