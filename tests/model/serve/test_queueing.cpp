// The prefill queueing wait of the capacity planner (prefill_queue_wait, M/G/1 [MDc]) against a discrete-event
// reference: the Lindley recursion W(n+1) = max(0, W(n) + S(n) − A(n+1)) with Poisson arrivals, simulated here with a
// fixed seed (2,000,000 prompts). The Cramér–Lundberg tail is an asymptotic formula; at the 99th percentile it is
// within a few percent of the simulated queue, and the test holds it to 6%.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/model/serving.hpp"

using namespace gpuplan;
using units::Seconds;

namespace {
/// Empirical p-quantile of the waiting time of an M/G/1 queue with arrival rate rho/S and service S·L/E[L], L drawn
/// from `lengths`.
double simulated_wait(double rho, double service, double p, const model::LengthDist& lengths, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rho / service);
  std::vector<double> probs;
  for (const auto& pt : lengths.points) probs.push_back(pt.second);
  std::discrete_distribution<std::size_t> pick(probs.begin(), probs.end());
  const double mean_len = lengths.mean();
  const int n = 2000000;
  std::vector<double> w(n);
  double wait = 0;
  for (int i = 0; i < n; ++i) {
    w[i] = wait;
    const double s = service * double(lengths.points[pick(rng)].first) / mean_len;
    wait = std::max(0.0, wait + s - gap(rng));
  }
  const auto k = static_cast<std::size_t>(p * double(n));
  std::nth_element(w.begin(), w.begin() + static_cast<long>(k), w.end());
  return w[k];
}
}  // namespace

TEST_CASE("prefill queueing wait at p99: M/D/1 (fixed prompts) within 6% of a simulated queue") {
  const model::LengthDist fixed = model::LengthDist::fixed(2048);
  for (double rho : {0.3, 0.6, 0.85}) {
    CAPTURE(rho);
    const double model = model::prefill_queue_wait(rho, Seconds(0.1), 0.99, fixed).raw();
    const double sim = simulated_wait(rho, 0.1, 0.99, fixed, 42);
    CHECK(model == gptest::approx(sim).epsilon(0.06));
  }
}

TEST_CASE("prefill queueing wait at p99: M/G/1 (lognormal prompts, sd = mean) within 6% of a simulated queue") {
  const model::LengthDist logn = model::lognormal_lengths(2000.0, 2000.0);
  for (double rho : {0.3, 0.6, 0.85}) {
    CAPTURE(rho);
    const double model = model::prefill_queue_wait(rho, Seconds(0.1), 0.99, logn).raw();
    const double sim = simulated_wait(rho, 0.1, 0.99, logn, 7);
    CHECK(model == gptest::approx(sim).epsilon(0.06));
  }
}

TEST_CASE("prefill queueing wait: none without load, unbounded at saturation, longer with variable prompts") {
  const model::LengthDist fixed = model::LengthDist::fixed(1000);
  CHECK(model::prefill_queue_wait(0.0, Seconds(0.1), 0.99, fixed).raw() == 0.0);
  CHECK(model::prefill_queue_wait(1.0, Seconds(0.1), 0.99, fixed).raw() >= 1e29);
  // Below 1 − p of load, fewer than 1% of prompts wait at all: the percentile is the mean's (P-K), not the tail's.
  CHECK(model::prefill_queue_wait(0.005, Seconds(0.1), 0.99, fixed).raw() ==
        gptest::approx(0.1 * 0.005 / (2.0 * 0.995)).epsilon(1e-12));
  const model::LengthDist logn = model::lognormal_lengths(1000.0, 1000.0);
  for (double rho : {0.2, 0.5, 0.9})
    CHECK(model::prefill_queue_wait(rho, Seconds(0.1), 0.99, logn) >
          model::prefill_queue_wait(rho, Seconds(0.1), 0.99, fixed));
}
