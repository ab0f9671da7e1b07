// Synthetic workloads for the serving simulator: arrival gaps (exponential, Gamma) and request lengths (fixed,
// uniform, lognormal), from a seeded generator written out here so that a seed means the same requests everywhere.
#include <algorithm>
#include <cmath>

#include "gpuplan/model/autoscale.hpp"
#include "gpuplan/model/simulate.hpp"

namespace gpuplan::model {
namespace {

/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA'14): a 64-bit state
/// advanced by the golden-ratio increment and mixed; plenty for workload sampling.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1): 53 random bits, never 0.
  double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {  // Box–Muller, one of the pair
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// Gamma(shape k, scale 1): Marsaglia & Tsang, ACM TOMS 26(3), 2000; k < 1 by Gamma(k + 1)·U^(1/k).
  double gamma(double k) {
    if (k < 1.0) return gamma(k + 1.0) * std::pow(uniform(), 1.0 / k);
    const double d = k - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x = 0, v = 0;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0.0);
      v = v * v * v;
      const double u = uniform();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }
};

std::int64_t sample(const LengthSampler& l, Rng& r) {
  switch (l.kind) {
    case LengthSampler::Kind::fixed: return std::max<std::int64_t>(1, std::llround(l.a));
    case LengthSampler::Kind::uniform: {
      const auto lo = std::llround(l.a), hi = std::max(lo, std::llround(l.b));
      const auto v = lo + std::int64_t(r.uniform() * double(hi - lo + 1));
      return std::max<std::int64_t>(1, std::min<std::int64_t>(v, hi));
    }
    case LengthSampler::Kind::lognormal: {
      // Mean m and standard deviation s of the lengths: σ² = ln(1 + s²/m²), μ = ln m − σ²/2.
      const double s2 = std::log(1.0 + (l.b * l.b) / (l.a * l.a));
      const double mu = std::log(l.a) - 0.5 * s2;
      return std::max<std::int64_t>(1, std::llround(std::exp(mu + std::sqrt(s2) * r.normal())));
    }
  }
  return 1;
}

}  // namespace

double LengthSampler::mean() const {
  switch (kind) {
    case Kind::fixed: return a;
    case Kind::uniform: return 0.5 * (a + b);
    case Kind::lognormal: return a;
  }
  return a;
}

std::vector<SimRequest> generate_requests(const ArrivalSpec& spec) {
  std::vector<SimRequest> out;
  if (spec.count <= 0 || !(spec.rate_per_s > 0)) return out;
  out.reserve(std::size_t(spec.count));
  // Separate streams for gaps and lengths, so changing the arrival process keeps the lengths.
  Rng gaps{spec.seed * 0x2545F4914F6CDD1DULL + 1};
  Rng lengths{spec.seed * 0x9E3779B97F4A7C15ULL + 7};
  // Gamma gaps with mean 1/λ and coefficient of variation cv: shape k = 1/cv², scale 1/(λ·k).
  const double k = 1.0 / (spec.cv * spec.cv);
  double t = 0;
  for (std::int64_t i = 0; i < spec.count; ++i) {
    const double gap = spec.kind == ArrivalSpec::Kind::poisson ? -std::log(gaps.uniform()) / spec.rate_per_s
                                                               : gaps.gamma(k) / (spec.rate_per_s * k);
    t += gap;
    SimRequest r;
    r.arrival_s = t;
    r.input_tokens = sample(spec.input, lengths);
    r.output_tokens = sample(spec.output, lengths);
    out.push_back(r);
  }
  return out;
}

double RateCurve::rate_at(double t_s) const {
  const double h = t_s / 3600.0;
  if (kind == Kind::diurnal)
    return trough_per_s + (peak_per_s - trough_per_s) * 0.5 * (1.0 + std::cos(6.283185307179586 * (h - peak_hour) / 24.0));
  if (points.empty()) return 0;
  if (h <= points.front().first) return points.front().second;
  if (h >= points.back().first) return points.back().second;
  const auto it = std::upper_bound(points.begin(), points.end(), h,
                                   [](double x, const std::pair<double, double>& p) { return x < p.first; });
  const auto& b = *it;
  const auto& a = *(it - 1);
  return b.first > a.first ? a.second + (b.second - a.second) * (h - a.first) / (b.first - a.first) : b.second;
}

double RateCurve::max_rate() const {
  if (kind == Kind::diurnal) return std::max(peak_per_s, trough_per_s);
  double m = 0;
  for (const auto& p : points) m = std::max(m, p.second);
  return m;
}

std::vector<SimRequest> generate_curve_requests(const RateCurve& curve, double duration_s, const LengthSampler& input,
                                                const LengthSampler& output, std::uint64_t seed) {
  std::vector<SimRequest> out;
  const double lmax = curve.max_rate();
  if (!(lmax > 0) || !(duration_s > 0)) return out;
  out.reserve(std::size_t(std::min(1e8, 1.05 * lmax * duration_s)));
  Rng gaps{seed * 0x2545F4914F6CDD1DULL + 1};
  Rng lengths{seed * 0x9E3779B97F4A7C15ULL + 7};
  Rng keep{seed * 0xD1342543DE82EF95ULL + 13};
  double t = 0;
  for (;;) {
    t += -std::log(gaps.uniform()) / lmax;
    if (t >= duration_s) break;
    if (keep.uniform() * lmax > curve.rate_at(t)) continue;
    SimRequest r;
    r.arrival_s = t;
    r.input_tokens = sample(input, lengths);
    r.output_tokens = sample(output, lengths);
    out.push_back(r);
  }
  return out;
}

}  // namespace gpuplan::model
