// The serving simulator's samples (SimOptions::keep_samples: the distributions the GUI draws) and the simulated
// replica's KV pool (model::sim_kv_pool, shared by `gpuplan simulate` and the GUI). Percentiles are recomputed here at
// nearest rank from the samples; the pool is held against the memory model's capacity and the KV format's bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/sim_kv.hpp"
#include "gpuplan/model/simulate.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

model::ServingSystem h100_node() { return test::node_system("dgx-h100"); }

double nearest_rank(const std::vector<double>& sorted, double p) {
  return sorted[std::size_t(std::ceil(p * double(sorted.size()))) - 1];
}

/// |a / b − 1|
double rel(double a, double b) { return std::abs(a / b - 1.0); }

}  // namespace

TEST_CASE("keep_samples: the samples behind TTFT, E2E, TPOT and ITL give back the simulator's own percentiles") {
  model::ServingPerfPlan p;
  model::ArrivalSpec a;
  a.rate_per_s = 12;
  a.count = 600;
  a.input = {model::LengthSampler::Kind::lognormal, 1000, 700};
  a.output = {model::LengthSampler::Kind::uniform, 50, 400};
  a.seed = 7;
  const auto reqs = model::generate_requests(a);
  model::SimOptions o;
  o.block_size = 16;
  o.kv_blocks = 6000;  // 96K tokens: tight enough to preempt now and then
  const auto plain = model::simulate_serving(arch("llama-3.1-8b"), p, h100_node(), reqs, o);
  o.keep_samples = true;
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100_node(), reqs, o);
  REQUIRE(r.completed == a.count);
  // Keeping the samples changes nothing else.
  CHECK(plain.samples.ttft.empty());
  CHECK(plain.samples.itl.empty());
  CHECK(r.ttft.p99 == plain.ttft.p99);
  CHECK(r.itl.p50 == plain.itl.p50);
  CHECK(r.iterations == plain.iterations);
  CHECK(r.preemptions == plain.preemptions);

  const auto& s = r.samples;
  REQUIRE(s.ttft.size() == std::size_t(r.completed));
  REQUIRE(s.e2e.size() == std::size_t(r.completed));
  REQUIRE(s.tpot.size() == std::size_t(r.tpot.samples));
  for (const auto* v : {&s.ttft, &s.e2e, &s.tpot}) CHECK(std::is_sorted(v->begin(), v->end()));
  double sum = 0;
  for (double x : s.ttft) sum += x;
  CHECK(rel(sum / double(s.ttft.size()), r.ttft.mean) < 1e-12);
  CHECK(nearest_rank(s.ttft, 0.50) == r.ttft.p50);
  CHECK(nearest_rank(s.ttft, 0.90) == r.ttft.p90);
  CHECK(nearest_rank(s.ttft, 0.99) == r.ttft.p99);
  CHECK(s.ttft.back() == r.ttft.max);
  CHECK(nearest_rank(s.e2e, 0.99) == r.e2e.p99);
  CHECK(nearest_rank(s.tpot, 0.50) == r.tpot.p50);
  bool dominated = true;  // rank by rank, E2E ≥ TTFT (each request's E2E is at least its TTFT)
  for (std::size_t i = 0; i < s.e2e.size(); ++i) dominated = dominated && s.e2e[i] >= s.ttft[i];
  CHECK(dominated);

  // ITL: the histogram's buckets, ascending, every gap counted once; their cumulative counts give the percentiles.
  std::int64_t n = 0;
  double weighted = 0;
  for (std::size_t i = 0; i < s.itl.size(); ++i) {
    CHECK(s.itl[i].second > 0);
    if (i > 0) CHECK(s.itl[i].first > s.itl[i - 1].first);
    n += s.itl[i].second;
    weighted += s.itl[i].first * double(s.itl[i].second);
  }
  REQUIRE(n == r.itl.samples);
  // Σ (output − 1) gaps over the completed requests, counted from the workload itself.
  std::int64_t gaps = 0;
  for (const auto& q : reqs) gaps += q.output_tokens - 1;
  CHECK(n == gaps);
  // Buckets are 0.1% wide: the bucket-weighted mean is the exact mean within that.
  CHECK(rel(weighted / double(n), r.itl.mean) < 1e-3);
  auto bucket_rank = [&](double q) {
    const auto want = std::int64_t(std::ceil(q * double(n)));
    std::int64_t seen = 0;
    for (const auto& b : s.itl) {
      seen += b.second;
      if (seen >= want) return b.first;
    }
    return s.itl.back().first;
  };
  CHECK(bucket_rank(0.50) == r.itl.p50);
  CHECK(bucket_rank(0.90) == r.itl.p90);
  CHECK(bucket_rank(0.99) == r.itl.p99);
}

TEST_CASE("sim_kv_pool: the memory model's KV tokens in whole blocks at the requests' mean length, and fp8 KV holds twice") {
  const auto& a = arch("llama-3.1-8b");
  const auto params = model::parameter_counts(a, Explain::off);
  const auto sys = h100_node();
  // Two request shapes: a mean of (1000 + 3000)/2 + (200 + 600)/2 = 2400 tokens.
  const std::vector<model::SimRequest> reqs = {{0.0, 1000, 200}, {1.0, 3000, 600}};
  model::ServingPerfPlan perf;
  const auto pool = model::sim_kv_pool(a, params, *sys.gpu, model::ServingMemoryPlan{}, perf, reqs);
  REQUIRE(pool.fits);
  model::ServingMemoryPlan mp;
  mp.context = 2400;
  const auto mem = model::serving_memory(a, params, *sys.gpu, mp, Explain::off);
  REQUIRE(mem.ok);
  CHECK(pool.block_size == mem.plan.block_size);
  CHECK(pool.blocks * pool.block_size <= mem.kv_token_capacity);
  CHECK((pool.blocks + 1) * pool.block_size > mem.kv_token_capacity);
  // 8B in bf16 on an 80 GB H100 leaves tens of GB: 128 KiB of KV per token (32 layers × 8 KV heads × 128 × 2 × 2 B)
  // puts the pool between 100K and 600K tokens.
  CHECK(pool.blocks * pool.block_size > 100'000);
  CHECK(pool.blocks * pool.block_size < 600'000);
  // An fp8 KV cache halves the bytes per token: the same pool holds twice the blocks (to the block's rounding).
  model::ServingPerfPlan fp8 = perf;
  fp8.kv = model::default_kv_quant(model::StoreDtype::fp8);
  const auto pool8 = model::sim_kv_pool(a, params, *sys.gpu, model::ServingMemoryPlan{}, fp8, reqs);
  REQUIRE(pool8.fits);
  CHECK(rel(double(pool8.blocks), 2.0 * double(pool.blocks)) < 0.01);
  // 405B in bf16 (810 GB of weights) does not fit on one GPU: no block.
  const auto& big = arch("llama-3.1-405b");
  const auto none = model::sim_kv_pool(big, model::parameter_counts(big, Explain::off), *sys.gpu,
                                       model::ServingMemoryPlan{}, perf, reqs);
  CHECK_FALSE(none.fits);
  CHECK(none.blocks == 0);
}
