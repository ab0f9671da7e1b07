// The queueing side of serving (serving.hpp): request-length distributions (fixed, log-normal; mean, second moment,
// quantiles) and the wait before a prompt's prefill starts at a percentile (M/G/1). The capacity planner
// (serving_plan.cpp) prices its candidates' TTFT with them.
#include <algorithm>
#include <cmath>

#include "gpuplan/model/serving.hpp"

namespace gpuplan::model {

using units::Seconds;

LengthDist LengthDist::fixed(std::int64_t tokens) { return LengthDist{{{std::max<std::int64_t>(1, tokens), 1.0}}}; }

double LengthDist::mean() const {
  double m = 0;
  for (const auto& [v, p] : points) m += double(v) * p;
  return m;
}

double LengthDist::mean_square() const {
  double m = 0;
  for (const auto& [v, p] : points) m += double(v) * double(v) * p;
  return m;
}

std::int64_t LengthDist::quantile(double q) const {
  double acc = 0;
  for (const auto& [v, p] : points) {
    acc += p;
    if (acc >= q - 1e-12) return v;
  }
  return points.empty() ? 1 : points.back().first;
}

LengthDist lognormal_lengths(double mean, double sd, int n) {
  n = std::max(1, n);
  const double s2 = std::log(1.0 + (sd * sd) / (mean * mean));
  const double mu = std::log(mean) - 0.5 * s2, s = std::sqrt(s2);
  // Inverse normal CDF by bisection on erfc (n is small; no tables needed).
  auto inv_norm = [](double p) {
    double lo = -10, hi = 10;
    for (int i = 0; i < 100; ++i) {
      const double mid = 0.5 * (lo + hi);
      (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
  };
  LengthDist d;
  for (int i = 0; i < n; ++i) {
    const double p = (double(i) + 0.5) / double(n);
    const auto v = std::max<std::int64_t>(1, std::llround(std::exp(mu + s * inv_norm(p))));
    if (!d.points.empty() && d.points.back().first == v) d.points.back().second += 1.0 / double(n);
    else d.points.emplace_back(v, 1.0 / double(n));
  }
  return d;
}

/// Queueing wait before a prompt's prefill starts, at a percentile [MDc]: M/G/1 with service times S·r, r = L / E[L]
/// over the prompt-length distribution (prefill time ∝ prompt tokens; fixed lengths: M/D/1). Mean: Pollaczek–
/// Khinchine, S·ρ·E[r²] / (2(1 − ρ)). Tail: P(W > t) ≈ ρ·e^(−θt) with θ the Cramér–Lundberg decay rate, the positive
/// root of λ·(E[e^(θS·r)] − 1) = θ, i.e. ρ·(E[e^(x·r)] − 1) = x with x = θS, and the Cramér–Lundberg constant
/// C = (1 − ρ) / (ρ·E[r·e^(x·r)] − 1) (M/M/1: C = ρ), capped at 1.
Seconds prefill_queue_wait(double rho, Seconds service, double percentile, const LengthDist& lengths) {
  if (rho <= 0) return Seconds(0);
  if (rho >= 1.0) return Seconds(1e30);
  const double mean_len = lengths.mean();
  double er2 = 1.0, rmax = 1.0;
  if (mean_len > 0 && !lengths.points.empty()) {
    er2 = lengths.mean_square() / (mean_len * mean_len);
    rmax = double(lengths.points.back().first) / mean_len;
  }
  const Seconds mean = service * (rho * er2 / (2.0 * (1.0 - rho)));
  const double p = std::clamp(percentile, 0.0, 0.999999);
  if (!(rho > 1.0 - p)) return mean;
  const bool fixed = mean_len <= 0 || lengths.points.empty();
  auto f = [&](double x) {
    if (fixed) return rho * std::expm1(x) - x;
    double m = 0;
    for (const auto& [len, prob] : lengths.points) m += prob * std::expm1(x * double(len) / mean_len);
    return rho * m - x;
  };
  auto r_exp = [&](double x) {  // E[r·e^(x·r)]
    if (fixed) return std::exp(x);
    double m = 0;
    for (const auto& [len, prob] : lengths.points) {
      const double r = double(len) / mean_len;
      m += prob * r * std::exp(x * r);
    }
    return m;
  };
  // f(0) = 0, f'(0) = ρ − 1 < 0, f convex: one positive root. Bracket it (x·r_max stays below exp's range), bisect.
  const double x_cap = 600.0 / std::max(1.0, rmax);
  double lo = 0.0, hi = std::min(1.0, x_cap);
  while (f(hi) < 0 && hi < x_cap) hi = std::min(2.0 * hi, x_cap);
  if (f(hi) < 0) return mean;  // no root below the cap: the tail decays faster than we can represent; the mean rules
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (f(mid) < 0 ? lo : hi) = mid;
  }
  const double x = hi;
  const double denom = rho * r_exp(x) - 1.0;
  const double c = denom > 0 ? std::min(1.0, (1.0 - rho) / denom) : 1.0;
  if (!(c > 1.0 - p)) return mean;
  const Seconds tail = service * (std::log(c / (1.0 - p)) / x);
  return std::max(mean, tail);
}

}  // namespace gpuplan::model
