#include "gpuplan/model/accuracy_band.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include <fmt/format.h>

namespace gpuplan::model {

std::string generation_of(const std::string& family) {
  for (const char* g : {"Ampere", "Hopper", "Blackwell"})
    if (family.rfind(g, 0) == 0) return g;
  return "other";
}

std::string scale_bucket(long long gpus, long long gpus_per_node) {
  if (gpus <= std::max(1LL, gpus_per_node)) return "1 node";
  if (gpus <= 256) return "<=256 GPUs";
  if (gpus <= 2048) return "<=2048 GPUs";
  return ">2048 GPUs";
}

std::string to_string(const Regime& r) {
  std::string s;
  for (const auto* f : {&r.kind, &r.generation, &r.arch, &r.scale})
    if (!f->empty()) s += (s.empty() ? "" : " ") + *f;
  return s.empty() ? "all cases" : s;
}

double quantile(std::vector<double> v, double q) {
  assert(!v.empty());
  std::sort(v.begin(), v.end());
  const double h = q * double(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (h - double(lo)) * (v[hi] - v[lo]);
}

namespace {
/// The regime at a fallback level: level 1 drops scale, 2 arch, 3 generation, 4 kind.
Regime coarsen(Regime r, int level) {
  if (level >= 1) r.scale.clear();
  if (level >= 2) r.arch.clear();
  if (level >= 3) r.generation.clear();
  if (level >= 4) r.kind.clear();
  return r;
}
bool matches(const Regime& want, const Regime& have) {
  return (want.kind.empty() || want.kind == have.kind) && (want.generation.empty() || want.generation == have.generation) &&
         (want.arch.empty() || want.arch == have.arch) && (want.scale.empty() || want.scale == have.scale);
}
}  // namespace

std::optional<Band> band_for(const std::vector<BandCase>& cases, const Regime& r, const std::string& exclude_source) {
  std::vector<double> logs;
  for (int level = 0; level <= 4; ++level) {
    const Regime want = coarsen(r, level);
    logs.clear();
    for (const auto& c : cases)
      if ((exclude_source.empty() || c.source != exclude_source) && matches(want, c.regime) && c.time_ratio > 0)
        logs.push_back(std::log(c.time_ratio));
    if (int(logs.size()) < kMinBandCases && level < 4) continue;
    if (logs.empty()) return std::nullopt;
    Band b;
    b.p10 = std::exp(quantile(logs, 0.10));
    b.p50 = std::exp(quantile(logs, 0.50));
    b.p90 = std::exp(quantile(logs, 0.90));
    b.cases = int(logs.size());
    b.regime = to_string(want);
    b.level = level;
    if (level > 0)
      b.fallback = fmt::format("{} has fewer than {} cases: pooled up to {}", to_string(r), kMinBandCases, b.regime);
    return b;
  }
  return std::nullopt;
}

BandCoverage loso_coverage(const std::vector<BandCase>& cases, const std::string& kind) {
  BandCoverage cov;
  for (const auto& c : cases) {
    if (!kind.empty() && c.regime.kind != kind) continue;
    const auto b = band_for(cases, c.regime, c.source);
    if (!b) continue;
    ++cov.cases;
    // A hair of tolerance so that a case sitting exactly on a quantile counts as inside on every compiler.
    if (c.time_ratio >= b->p10 * (1 - 1e-12) && c.time_ratio <= b->p90 * (1 + 1e-12)) ++cov.inside;
  }
  return cov;
}

}  // namespace gpuplan::model
