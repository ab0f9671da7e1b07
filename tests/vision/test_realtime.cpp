// Real-time pipeline schedules (model/realtime.hpp): hand-computable cases — serialisation on one engine, overlap on
// two, dependencies and slack, the shared-memory fluid model, temporal reuse — and the Monte-Carlo P99 against the
// analytic quantiles of known distributions.
#include <doctest/doctest.h>

#include <cmath>

#include "gpuplan/model/realtime.hpp"

using namespace gpuplan;
using model::RtJitter;
using model::RtPipeline;
using model::RtStage;

namespace {
RtStage stage(const char* id, const char* engine, double ms, std::vector<std::size_t> deps = {}) {
  RtStage s;
  s.id = id;
  s.engine = engine;
  s.mean = units::milliseconds(ms);
  s.deps = std::move(deps);
  return s;
}
RtPipeline pipe(std::vector<RtStage> st, double deadline_ms = 33.3) {
  RtPipeline p;
  p.stages = std::move(st);
  p.deadline = units::milliseconds(deadline_ms);
  p.period = units::milliseconds(1000.0 / 30);
  return p;
}
bool near(double a, double b, double rel) { return std::abs(a - b) <= rel * std::abs(b); }
double ms(units::Seconds s) { return s.raw() * 1e3; }
}  // namespace

TEST_CASE("two stages on one engine serialise: 5 ms then 3 ms end at 8 ms, in file order") {
  const auto r = model::rt_schedule(pipe({stage("a", "gpu", 5), stage("b", "gpu", 3)}), {}, Explain::off);
  CHECK(near(r.frame0[0].finish_s, 0.005, 1e-12));
  CHECK(near(r.frame0[1].start_s, 0.005, 1e-12));
  CHECK(near(ms(r.latency_mean_frame0), 8, 1e-12));
  REQUIRE(r.critical_path.size() == 2);
  CHECK(r.critical_path[0] == 0);
  CHECK(r.critical_path[1] == 1);
}

TEST_CASE("the same two stages on the GPU and a DLA overlap: the frame takes the longer, 5 ms") {
  const auto r = model::rt_schedule(pipe({stage("a", "gpu", 5), stage("b", "dla0", 3)}), {}, Explain::off);
  CHECK(r.frame0[1].start_s == 0.0);
  CHECK(near(ms(r.latency_mean_frame0), 5, 1e-12));
  REQUIRE(r.critical_path.size() == 1);
  CHECK(r.critical_path[0] == 0);
}

TEST_CASE("dependencies, slack and the verdicts: gpu 5 → cpu 2 beside a 4 ms DLA stage is 7 ms, 3 ms slack of 10") {
  auto p = pipe({stage("a", "gpu", 5), stage("b", "dla0", 4), stage("c", "cpu0", 2, {0, 1})}, 10);
  const auto r = model::rt_schedule(p, {}, Explain::on);
  CHECK(near(r.frame0[2].start_s, 0.005, 1e-12));
  CHECK(near(ms(r.latency_mean_frame0), 7, 1e-12));
  CHECK(near(ms(r.slack_mean), 3, 1e-9));
  CHECK(r.meets_mean);
  CHECK(r.meets_p);  // no jitter: P99 = the mean
  CHECK(near(ms(r.latency_p), 7, 1e-9));
  REQUIRE(r.critical_path.size() == 2);
  CHECK(r.critical_path[0] == 0);  // a bounds c, not b
  CHECK(r.derivation.find("rt.latency") != nullptr);
  // With a 6 ms deadline the same frame misses by 1 ms.
  p.deadline = units::milliseconds(6);
  const auto m = model::rt_schedule(p, {}, Explain::off);
  CHECK_FALSE(m.meets_mean);
  CHECK(near(ms(m.slack_mean), -1, 1e-9));
  CHECK(m.miss_rate == 1.0);
}

TEST_CASE("an engine busier than the frame period cannot keep up, and temporal reuse divides its load") {
  auto p = pipe({stage("a", "gpu", 20), stage("b", "gpu", 20)});
  CHECK_FALSE(model::rt_schedule(p, {}, Explain::off).keeps_up);  // 40 ms per 33.3 ms period
  p.stages[1].every = 2;                                           // 20 + 20/2 = 30 ms
  const auto r = model::rt_schedule(p, {}, Explain::off);
  CHECK(r.keeps_up);
  CHECK(near(r.engines[0].busy_per_frame.raw(), 0.030, 1e-12));
}

TEST_CASE("shared memory: two 100 GB/s stages on 100 GB/s run at half speed, on 200 GB/s at full") {
  auto p = pipe({stage("a", "gpu", 10), stage("b", "dla0", 10)});
  p.stages[0].dram_bytes = units::bytes(1e9);  // 1 GB in 10 ms: 100 GB/s
  p.stages[1].dram_bytes = units::bytes(1e9);
  p.shared_bandwidth = units::gb_per_s(100);
  CHECK(near(ms(model::rt_schedule(p, {}, Explain::off).latency_mean_frame0), 20, 1e-9));
  p.shared_bandwidth = units::gb_per_s(200);
  CHECK(near(ms(model::rt_schedule(p, {}, Explain::off).latency_mean_frame0), 10, 1e-9));
  // Unequal: b (5 ms, 0.5 GB) runs at half speed for 10 ms; a has 5 ms of work left, alone at full speed: 15 ms.
  p.shared_bandwidth = units::gb_per_s(100);
  p.stages[1].mean = units::milliseconds(5);
  p.stages[1].dram_bytes = units::bytes(0.5e9);
  const auto r = model::rt_schedule(p, {}, Explain::off);
  CHECK(near(r.frame0[1].finish_s, 0.010, 1e-9));
  CHECK(near(r.frame0[0].finish_s, 0.015, 1e-9));
  // A discrete GPU (no shared memory) overlaps them fully.
  p.shared_bandwidth.reset();
  CHECK(near(ms(model::rt_schedule(p, {}, Explain::off).latency_mean_frame0), 10, 1e-9));
}

TEST_CASE("temporal reuse: a 30 ms stage every third frame gives P99 31 ms, a mean over frames of 11 ms") {
  auto p = pipe({stage("lidar", "cpu1", 30), stage("plan", "cpu0", 1, {0})}, 20);
  p.stages[0].every = 3;
  model::RtOptions o;
  o.frames = 3000;
  const auto r = model::rt_schedule(p, o, Explain::off);
  CHECK(near(ms(r.latency_mean_frame0), 31, 1e-9));  // frame 0 runs everything
  CHECK(near(ms(r.latency_p), 31, 1e-9));
  CHECK(near(ms(r.latency_mc_mean), (31.0 + 1 + 1) / 3, 1e-9));
  CHECK(near(r.miss_rate, 1.0 / 3, 1e-9));
}

TEST_CASE("P99 of one lognormal stage, mean 10 ms, CV 0.2: the analytic 15.54 ms, and the Monte-Carlo within 1.5%") {
  // σ² = ln(1.04) = 0.039221, σ = 0.198042, μ = ln(0.010) − σ²/2; z_0.99 = 2.326348:
  // P99 = 10 ms · exp(−0.019610 + 0.460715) = 10 ms · 1.554392 = 15.544 ms.
  CHECK(near(model::rt_quantile(RtJitter::lognormal, 0.010, 0.2, 0.99), 0.0155439, 1e-4));
  auto p = pipe({stage("a", "gpu", 10)});
  p.stages[0].jitter = RtJitter::lognormal;
  p.stages[0].cv = 0.2;
  const auto r = model::rt_schedule(p, {}, Explain::off);
  CHECK(near(ms(r.latency_p), 15.544, 0.015));
  CHECK(near(ms(r.latency_mc_mean), 10, 0.01));
  // The mean meets a 14 ms deadline; P99 does not.
  p.deadline = units::milliseconds(14);
  const auto d = model::rt_schedule(p, {}, Explain::off);
  CHECK(d.meets_mean);
  CHECK_FALSE(d.meets_p);
  CHECK(d.miss_rate > 0.01);
}

TEST_CASE("P99 of two parallel normal stages is the max's: Φ(z)² = 0.99, z = 2.5758, mean 10 CV 0.1 → 12.58 ms") {
  CHECK(near(model::rt_quantile(RtJitter::normal, 0.010, 0.1, 0.99), 0.0123263, 1e-4));
  auto p = pipe({stage("a", "gpu", 10), stage("b", "dla0", 10)});
  for (auto& s : p.stages) {
    s.jitter = RtJitter::normal;
    s.cv = 0.1;
  }
  model::RtOptions o;
  o.frames = 40000;
  const auto r = model::rt_schedule(p, o, Explain::off);
  CHECK(near(ms(r.latency_p), 12.576, 0.01));
  // Above each stage's own P99 (12.33 ms): not "the slowest stage's P99".
  CHECK(ms(r.latency_p) > 12.4);
}

TEST_CASE("the Monte-Carlo is the same for the same seed and differs for another") {
  auto p = pipe({stage("a", "gpu", 10), stage("b", "cpu0", 3, {0})});
  p.stages[0].jitter = p.stages[1].jitter = RtJitter::lognormal;
  p.stages[0].cv = p.stages[1].cv = 0.3;
  model::RtOptions o;
  o.frames = 2000;
  const auto a = model::rt_schedule(p, o, Explain::off);
  const auto b = model::rt_schedule(p, o, Explain::off);
  CHECK(a.latency_p.raw() == b.latency_p.raw());
  o.seed = 2;
  CHECK(model::rt_schedule(p, o, Explain::off).latency_p.raw() != a.latency_p.raw());
}

TEST_CASE("backbone sharing: B = 48.75, ΣH = 6.75 GFLOPs over 3 heads is 153 separate and 55.5 shared") {
  const auto o = Origin::user("test");
  CHECK(near(model::backbone_sharing_flops(units::flop(48.75e9), units::flop(6.75e9), 3, false, o).value.raw(), 153e9,
             1e-12));
  const auto s = model::backbone_sharing_flops(units::flop(48.75e9), units::flop(6.75e9), 3, true, o);
  CHECK(near(s.value.raw(), 55.5e9, 1e-12));
  CHECK(s.derivation.formula == "F = B + ΣH");
}
