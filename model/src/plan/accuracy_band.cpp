#include "gpuplan/model/accuracy_band.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>

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
/// The regime at a fallback level: level 1 drops scale, 2 generation, 3 arch, 4 kind. Dense/MoE is kept longer than
/// the generation: the MoE cases' residuals (wide-EP all-to-alls, routing, grouped GEMMs) are not a dense case's
/// error, and pooling them widened every thin dense regime's band (issue #24: the serving band of a dense model on an
/// Ampere or Blackwell GPU, which pooled to all serving cases, 0.81-1.70 before the wide-EP rows, 0.58-1.87 after).
Regime coarsen(Regime r, int level) {
  if (level >= 1) r.scale.clear();
  if (level >= 2) r.generation.clear();
  if (level >= 3) r.arch.clear();
  if (level >= 4) r.kind.clear();
  return r;
}
bool matches(const Regime& want, const Regime& have) {
  return (want.kind.empty() || want.kind == have.kind) && (want.generation.empty() || want.generation == have.generation) &&
         (want.arch.empty() || want.arch == have.arch) && (want.scale.empty() || want.scale == have.scale);
}
}  // namespace

double student_t90(int df) {
  // t_{0.90} for df = 1 … 30 (any statistics table, e.g. NIST/SEMATECH e-Handbook §1.3.6.7.2).
  static const double table[] = {3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415, 1.397, 1.383, 1.372,
                                 1.363, 1.356, 1.350, 1.345, 1.341, 1.337, 1.333, 1.330, 1.328, 1.325,
                                 1.323, 1.321, 1.319, 1.318, 1.316, 1.315, 1.314, 1.313, 1.311, 1.310};
  assert(df >= 1);
  if (df <= 30) return table[df - 1];
  const double z = 1.2815516;
  return z + (z * z * z + z) / (4.0 * double(df));
}

namespace {
/// The random-effects prediction interval of one pool (logs grouped by source); see band_for.
void fill_band(const std::map<std::string, std::vector<double>>& by, Band& b) {
  const double k = double(by.size());
  double mu = 0, within = 0;
  int n = 0;
  std::vector<double> means;
  for (const auto& kv : by) {
    double m = 0;
    for (double x : kv.second) m += x;
    m /= double(kv.second.size());
    double v = 0;
    for (double x : kv.second) v += (x - m) * (x - m);
    within += v / double(kv.second.size());
    means.push_back(m);
    mu += m;
    n += int(kv.second.size());
  }
  mu /= k;
  within /= k;
  double tau2 = 0;
  for (double m : means) tau2 += (m - mu) * (m - mu);
  double sd = 0, t = 0;
  if (by.size() > 1) {
    tau2 /= k - 1;
    sd = std::sqrt(tau2 * (1 + 1 / k) + within);
    t = student_t90(int(by.size()) - 1);
  } else {  // one source: the spread of its own rows, the mean's uncertainty from n rows
    sd = std::sqrt(within * double(n) / std::max(1.0, double(n - 1)) * (1 + 1.0 / double(n)));
    t = student_t90(std::max(1, n - 1));
  }
  b.p10 = std::exp(mu - t * sd);
  b.p50 = std::exp(mu);
  b.p90 = std::exp(mu + t * sd);
  b.cases = n;
  b.sources = int(by.size());
}
}  // namespace

std::optional<Band> band_for(const std::vector<BandCase>& cases, const Regime& r, const std::string& exclude_group) {
  std::map<std::string, std::vector<double>> by;  // source -> log ratios
  for (int level = 0; level <= 4; ++level) {
    const Regime want = coarsen(r, level);
    by.clear();
    int n = 0;
    for (const auto& c : cases)
      if ((exclude_group.empty() || c.group_key() != exclude_group) && matches(want, c.regime) && c.time_ratio > 0) {
        by[c.group_key()].push_back(std::log(c.time_ratio));
        ++n;
      }
    if ((n < kMinBandCases || int(by.size()) < kMinBandSources) && level < 4) continue;
    if (n == 0) return std::nullopt;
    Band b;
    fill_band(by, b);
    b.regime = to_string(want);
    b.level = level;
    if (level > 0)
      b.fallback = fmt::format("{} has fewer than {} cases or {} sources: pooled up to {}", to_string(r),
                               kMinBandCases, kMinBandSources, b.regime);
    return b;
  }
  return std::nullopt;
}

BandCoverage loso_coverage(const std::vector<BandCase>& cases, const std::string& kind, const std::string& group) {
  BandCoverage cov;
  std::map<std::string, std::pair<int, int>> folds, devs;  // key -> (cases, inside)
  for (const auto& c : cases) {
    if (!kind.empty() && c.regime.kind != kind) continue;
    if (!group.empty() && c.group_key() != group) continue;
    const auto b = band_for(cases, c.regime, c.group_key());
    if (!b) continue;
    // A hair of tolerance so that a case sitting exactly on a bound counts as inside on every compiler.
    const bool in = c.time_ratio >= b->p10 * (1 - 1e-12) && c.time_ratio <= b->p90 * (1 + 1e-12);
    ++cov.cases;
    cov.inside += in ? 1 : 0;
    for (auto* m : {&folds, &devs}) {
      auto& f = (*m)[m == &folds ? c.group_key() : c.dev_case_key()];
      ++f.first;
      f.second += in ? 1 : 0;
    }
  }
  auto mean_of = [](const std::map<std::string, std::pair<int, int>>& m) {
    double s = 0;
    for (const auto& kv : m) s += double(kv.second.second) / double(kv.second.first);
    return m.empty() ? 0.0 : s / double(m.size());
  };
  cov.sources = int(folds.size());
  cov.source_mean = mean_of(folds);
  cov.dev_cases = int(devs.size());
  cov.dev_case_mean = mean_of(devs);
  return cov;
}

}  // namespace gpuplan::model
