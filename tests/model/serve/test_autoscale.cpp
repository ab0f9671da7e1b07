// A fleet of serving replicas under an autoscaling policy (model/include/gpuplan/model/autoscale.hpp): hand-computed
// cases — a fixed fleet never scales and pays replicas × GPUs × hours; a step in load starts replicas that serve only
// after the cold start, and GPU-hours are the integral of the replicas paid; an idle fleet drains to its minimum at the
// first evaluation; a fleet of one equals simulate_serving; the SLA counts; the rate curves and their arrivals
// (issue #28, deliverable 3).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/autoscale.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/simulate.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

model::ServingSystem h100() { return test::node_system("dgx-h100"); }

model::FleetOptions fleet(std::int64_t initial, std::int64_t min, std::int64_t max) {
  model::FleetOptions o;
  o.sim.kv_blocks = 100000;
  o.sim.block_size = 16;
  o.sim.cost_bits = 0;
  o.gpus_per_replica = 4;
  o.policy.metric = model::AutoscalePolicy::Metric::queue;
  o.policy.initial_replicas = initial;
  o.policy.min_replicas = min;
  o.policy.max_replicas = max;
  o.policy.target = 1;
  o.policy.scale_up_at = 1;
  o.policy.scale_down_at = 0;  // never below: no scale-down unless a case sets it
  o.policy.interval_s = 10;
  o.policy.cold_start_s = 100;
  o.policy.up_cooldown_s = 0;
  o.policy.down_cooldown_s = 0;
  return o;
}

bool rel_close(double a, double b, double tol) { return std::abs(a - b) <= tol * std::abs(b); }

}  // namespace

TEST_CASE("a fixed fleet never scales and pays replicas × GPUs × hours") {
  model::FleetOptions o = fleet(3, 1, 8);
  o.policy.enabled = false;
  o.policy.scale_down_at = 0.5;  // would drain an idle fleet if the policy ran
  o.horizon_s = 3600;
  std::vector<model::SimRequest> reqs;
  for (int i = 0; i < 50; ++i) reqs.push_back({1.0 + 10.0 * i, 256, 16});
  const auto r = model::simulate_fleet(arch("llama-3.1-8b"), {}, h100(), reqs, o);
  CHECK(r.completed == 50);
  CHECK(r.scale_ups == 0);
  CHECK(r.scale_downs == 0);
  CHECK(r.replicas_started == 0);
  CHECK(r.peak_replicas == 3);
  CHECK(r.end_s == 3600);
  CHECK(rel_close(r.gpu_hours, 3.0 * 4.0 * 1.0, 1e-12));  // 3 replicas × 4 GPUs × 1 hour
}

TEST_CASE("a step in load starts replicas that serve only after the cold start, and GPU-hours integrate the replicas") {
  // 10 long requests at t = 5 s on one replica; the first evaluation (t = 10 s) sees 10 requests per ready replica, so
  // desired = ⌈1 × 10 / 1⌉ = 10, clamped to max 3: two replicas start at 10 s and are ready at 10 + 100 = 110 s.
  model::FleetOptions o = fleet(1, 1, 3);
  o.horizon_s = 1000;
  o.series_interval_s = 10;
  const model::ServingPerfPlan p;
  std::vector<model::SimRequest> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back({5.0, 512, 2000});
  reqs.push_back({50.0, 512, 4});   // before the new replicas are ready: on replica 0, idle again by then
  reqs.push_back({120.0, 512, 4});  // after: on a fresh, empty replica
  const auto r = model::simulate_fleet(arch("llama-3.1-8b"), p, h100(), reqs, o);
  CHECK(r.completed == 12);
  CHECK(r.scale_ups == 1);
  CHECK(r.replicas_started == 2);
  CHECK(r.peak_replicas == 3);
  // Replicas paid: 1 over [0, 10), 3 over [10, 1000] (no scale-down: scale_down_at = 0).
  CHECK(rel_close(r.replica_hours, (1.0 * 10 + 3.0 * 990) / 3600.0, 1e-12));
  CHECK(rel_close(r.gpu_hours, 4.0 * (1.0 * 10 + 3.0 * 990) / 3600.0, 1e-12));
  // The series: at 100 s one ready and two starting; at 120 s three ready.
  REQUIRE(r.series.size() == 100);
  CHECK(r.series[0].ready == 1);
  CHECK(r.series[1].t_s == 10);
  CHECK(r.series[10].ready == 1);
  CHECK(r.series[10].starting == 2);
  CHECK(r.series[12].ready == 3);
  CHECK(r.series[12].starting == 0);
  // The requests at 50 s and 120 s each find an idle replica: TTFT = their prompt's pass alone.
  const double pass =
      model::forward_cost(arch("llama-3.1-8b"), p, model::ForwardBatch{0, 1, 0, 1.0, 512, 0, true}, h100(), Explain::off)
          .total.raw();
  CHECK(rel_close(r.series[5].ttft_p, pass, 1e-12));
  CHECK(rel_close(r.series[12].ttft_p, pass, 1e-12));
  CHECK(!r.notes.empty());  // it wanted 10 replicas, max is 3
}

TEST_CASE("an idle fleet drains to its minimum at the first evaluation") {
  model::FleetOptions o = fleet(3, 1, 3);
  o.policy.scale_down_at = 0.5;
  o.horizon_s = 600;
  const auto r = model::simulate_fleet(arch("llama-3.1-8b"), {}, h100(), {{0.0, 128, 4}}, o);
  CHECK(r.scale_downs == 1);
  CHECK(r.scale_ups == 0);
  // 3 replicas over [0, 10), then 1 (the two idle ones released at once, the busy one kept).
  CHECK(rel_close(r.replica_hours, (3.0 * 10 + 1.0 * 590) / 3600.0, 1e-12));

  // With a 100 s scale-down window the first evaluation at 10 s may still act (no earlier event), but only to the most
  // replicas recommended in the window: here always the minimum.
  o.policy.down_cooldown_s = 100;
  const auto w = model::simulate_fleet(arch("llama-3.1-8b"), {}, h100(), {{0.0, 128, 4}}, o);
  CHECK(rel_close(w.replica_hours, r.replica_hours, 1e-12));
}

TEST_CASE("a fleet of one replica is simulate_serving") {
  model::ArrivalSpec a;
  a.rate_per_s = 8;
  a.count = 3000;
  a.input = {model::LengthSampler::Kind::lognormal, 1024, 512};
  a.output = {model::LengthSampler::Kind::lognormal, 128, 64};
  const auto reqs = model::generate_requests(a);
  model::FleetOptions o = fleet(1, 1, 1);
  o.policy.enabled = false;
  o.sim.kv_blocks = 4000;  // tight enough to preempt at times
  o.sim.cost_bits = 8;
  const model::ServingPerfPlan p;
  const auto f = model::simulate_fleet(arch("llama-3.1-8b"), p, h100(), reqs, o);
  const auto s = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), reqs, o.sim);
  CHECK(f.completed == s.completed);
  CHECK(f.iterations == s.iterations);
  CHECK(f.preemptions == s.preemptions);
  CHECK(f.ttft.p99 == s.ttft.p99);
  CHECK(f.e2e.p50 == s.e2e.p50);
  CHECK(f.itl.p90 == s.itl.p90);
}

TEST_CASE("the SLA: requests missing a target and minutes over 1 − percentile") {
  // One replica, requests 60 s apart (one per minute), each alone: TTFT = its prompt pass. A TTFT target just under
  // the pass misses every request and every minute; just over, none.
  const model::ServingPerfPlan p;
  const double pass =
      model::forward_cost(arch("llama-3.1-8b"), p, model::ForwardBatch{0, 1, 0, 1.0, 512, 0, true}, h100(), Explain::off)
          .total.raw();
  std::vector<model::SimRequest> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back({1.0 + 60.0 * i, 512, 2});
  model::FleetOptions o = fleet(1, 1, 1);
  o.policy.enabled = false;
  o.sla.ttft_s = pass * 0.999;
  auto r = model::simulate_fleet(arch("llama-3.1-8b"), p, h100(), reqs, o);
  CHECK(r.missed_ttft == 5);
  CHECK(r.missed_any == 5);
  CHECK(r.minutes == 5);
  CHECK(r.minutes_in_violation == 5);
  o.sla.ttft_s = pass * 1.001;
  r = model::simulate_fleet(arch("llama-3.1-8b"), p, h100(), reqs, o);
  CHECK(r.missed_any == 0);
  CHECK(r.minutes_in_violation == 0);
}

TEST_CASE("rate curves: the diurnal raised cosine, points joined linearly, arrivals by thinning") {
  model::RateCurve d;
  d.peak_per_s = 50;
  d.trough_per_s = 10;
  d.peak_hour = 14;
  CHECK(d.rate_at(14 * 3600.0) == gptest::approx(50));
  CHECK(d.rate_at(2 * 3600.0) == gptest::approx(10));
  CHECK(d.rate_at(8 * 3600.0) == gptest::approx(30));  // 6 h from the peak: cos(π/2) = 0, the middle
  model::RateCurve pts;
  pts.kind = model::RateCurve::Kind::points;
  pts.points = {{0, 10}, {2, 30}, {4, 30}};
  CHECK(pts.rate_at(3600.0) == gptest::approx(20));
  CHECK(pts.rate_at(3 * 3600.0) == gptest::approx(30));
  CHECK(pts.rate_at(10 * 3600.0) == gptest::approx(30));  // flat after the last point
  // Arrivals: the diurnal mean is (50 + 10)/2 = 30 req/s over a day: 2,592,000 expected, σ = √N ≈ 1610.
  const model::LengthSampler fixed{model::LengthSampler::Kind::fixed, 100, 100};
  const auto reqs = model::generate_curve_requests(d, 86400, fixed, fixed, 7);
  CHECK(std::abs(double(reqs.size()) - 2592000.0) < 5 * 1610.0);
  // In the hour around the peak, about 50 × 3600 ≈ 179,500 (the cosine's mean over ±0.5 h is 0.9986 of the peak).
  std::int64_t near = 0;
  for (const auto& q : reqs) near += (q.arrival_s >= 13.5 * 3600 && q.arrival_s < 14.5 * 3600) ? 1 : 0;
  const double expect = 3600.0 * (10 + 40 * 0.5 * (1 + std::sin(3.141592653589793 / 24) / (3.141592653589793 / 24)));
  CHECK(std::abs(double(near) - expect) < 5 * std::sqrt(expect));
  CHECK(std::is_sorted(reqs.begin(), reqs.end(),
                       [](const model::SimRequest& a, const model::SimRequest& b) { return a.arrival_s < b.arrival_s; }));
  const auto again = model::generate_curve_requests(d, 86400, fixed, fixed, 7);
  CHECK(again.size() == reqs.size());
  CHECK(again.back().arrival_s == reqs.back().arrival_s);
}
