// The request-level serving simulator (model/include/gpuplan/model/simulate.hpp): the iteration's equivalent forward
// pass computed by hand, a lone request's TTFT and E2E summed from forward_cost by hand, chunked prefill equal to the
// planner's prefill_time, vLLM v1's preemption by recompute counted by hand on a tiny KV cache, the arrival and
// length generators' moments, determinism, and the agreement with the steady-state planner (issue #28, deliverable 2).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/simulate.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

model::ServingSystem h100() { return test::node_system("dgx-h100"); }

double fwd(const model::ServingPerfPlan& p, const model::ForwardBatch& b) {
  return model::forward_cost(arch("llama-3.1-8b"), p, b, h100(), Explain::off).total.raw();
}

model::SimOptions exact(std::int64_t blocks) {
  model::SimOptions o;
  o.kv_blocks = blocks;
  o.block_size = 16;
  o.cost_bits = 0;  // no rounding of the batch shape: costs exactly as forward_cost prices them
  return o;
}

}  // namespace

TEST_CASE("an iteration's chunks price as one pass with the same tokens and the same attention work") {
  // Two chunks: 100 new tokens from position 0, and 300 after 500 cached; 3 decodes holding 1000, 2000, 3000.
  model::IterationShape it;
  it.decodes = 3;
  it.decode_context_sum = 6000;
  it.chunks = 2;
  it.chunk_tokens = 400;
  it.chunk_work = 100 * (0 + 50) + 300 * (500 + 150);  // 200,000
  it.emitting_chunks = 1;
  const model::ForwardBatch fb = model::iteration_batch(it);
  CHECK(fb.decode_seqs == 3);
  CHECK(fb.decode_context == 2000);   // the mean context
  CHECK(fb.prefill_tokens == 200);    // the mean chunk
  CHECK(fb.prefill_seqs == gptest::approx(2.0));
  CHECK(fb.prefill_past == 400);      // 200,000 / 400 − 200/2
  CHECK(fb.prefill_emits_token);
}

TEST_CASE("a lone request's TTFT is its prompt's pass and its E2E adds one decode per later token") {
  model::ServingPerfPlan p;
  const std::int64_t isl = 512, osl = 8;
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), {{0.0, isl, osl}}, exact(100000));
  REQUIRE(r.completed == 1);
  const double ttft = fwd(p, model::ForwardBatch{0, 1, 0, 1.0, isl, 0, true});
  double e2e = ttft;
  // The k-th later token: one decoding sequence holding isl + k − 1 tokens.
  for (std::int64_t k = 1; k < osl; ++k) e2e += fwd(p, model::ForwardBatch{1, 1, isl + k - 1, 0, 0, 0, false});
  CHECK(r.ttft.p50 == gptest::approx(ttft).epsilon(1e-12));
  CHECK(r.e2e.p50 == gptest::approx(e2e).epsilon(1e-12));
  CHECK(r.itl.samples == osl - 1);
  CHECK(r.preemptions == 0);
  CHECK(r.iterations == osl);
}

TEST_CASE("a prompt longer than the token budget prefills in chunks, as the planner's prefill_time prices it") {
  model::ServingPerfPlan p;
  p.max_batched_tokens = 2048;
  const std::int64_t isl = 5000;  // chunks of 2048, 2048, 904
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), {{0.0, isl, 1}}, exact(100000));
  REQUIRE(r.completed == 1);
  const double planner = model::prefill_time(arch("llama-3.1-8b"), p, 1, isl, h100()).raw();
  CHECK(r.ttft.p50 == gptest::approx(planner).epsilon(1e-9));
  CHECK(r.iterations == 3);
}

TEST_CASE("when KV blocks run out the newest running request is preempted and recomputed (vLLM v1)") {
  // 10 blocks of 16 tokens. A and B (64 in, 64 out) arrive together and are admitted with 4 blocks each; their 65th
  // tokens take a 5th block each (0 free); A's 81st token needs a 6th: B, the newest, gives its 5 back and waits.
  // B cannot return while A runs (its recompute of 64 + 17 tokens needs 6 blocks, 4 are free); after A finishes it
  // is admitted again and finishes within 8 blocks. One preemption, both complete.
  model::ServingPerfPlan p;
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), {{0.0, 64, 64}, {0.0, 64, 64}}, exact(10));
  CHECK(r.completed == 2);
  CHECK(r.preemptions == 1);
  CHECK(r.kv_utilisation_peak == gptest::approx(1.0));
  // A never waited: 64 iterations (a prefill, 63 decodes). B ran 17 tokens beside A, then waited for A's end, then
  // recomputed its 81 tokens in one pass and decoded 47 more: 64 + 48 iterations of about one decode step each.
  CHECK(r.e2e.max / r.e2e.p50 == gptest::approx(112.0 / 64.0).epsilon(0.05));
}

TEST_CASE("a request longer than the whole KV cache is refused with a note, never looped on") {
  model::ServingPerfPlan p;
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), {{0.0, 4000, 100}, {1.0, 100, 10}}, exact(100));
  CHECK(r.completed == 1);
  REQUIRE(!r.notes.empty());
  CHECK(r.notes.front().find("1 requests need more KV") != std::string::npos);
}

TEST_CASE("Poisson and Gamma arrivals have the rate and the burstiness asked for, lengths their means") {
  model::ArrivalSpec a;
  a.rate_per_s = 20;
  a.count = 200000;
  a.input = {model::LengthSampler::Kind::lognormal, 1000, 600};
  a.output = {model::LengthSampler::Kind::uniform, 100, 300};
  auto moments = [](const std::vector<model::SimRequest>& rs) {
    double s = 0, s2 = 0, prev = 0;
    for (const auto& r : rs) {
      const double g = r.arrival_s - prev;
      prev = r.arrival_s;
      s += g;
      s2 += g * g;
    }
    const double n = double(rs.size()), mean = s / n;
    return std::pair{mean, std::sqrt(s2 / n - mean * mean) / mean};
  };
  const auto poisson = model::generate_requests(a);
  const auto [mp, cvp] = moments(poisson);
  CHECK(mp == gptest::approx(1.0 / 20).epsilon(0.01));
  CHECK(cvp == gptest::approx(1.0).epsilon(0.02));
  double in = 0, out = 0;
  for (const auto& r : poisson) {
    in += double(r.input_tokens);
    out += double(r.output_tokens);
    CHECK_MESSAGE((r.output_tokens >= 100 && r.output_tokens <= 300), "uniform out of range");
  }
  CHECK(in / double(a.count) == gptest::approx(1000).epsilon(0.01));
  CHECK(out / double(a.count) == gptest::approx(200).epsilon(0.01));
  a.kind = model::ArrivalSpec::Kind::gamma;
  a.cv = 3.0;
  const auto [mg, cvg] = moments(model::generate_requests(a));
  CHECK(mg == gptest::approx(1.0 / 20).epsilon(0.02));
  CHECK(cvg == gptest::approx(3.0).epsilon(0.05));
  // The same seed gives the same requests; another seed others.
  const auto again = model::generate_requests(a);
  CHECK(again.back().arrival_s == model::generate_requests(a).back().arrival_s);
  a.seed = 2;
  CHECK(model::generate_requests(a).back().arrival_s != again.back().arrival_s);
}

namespace {

struct Agreement {
  double planner_ttft = 0, planner_itl = 0, planner_iteration_wait = 0, planner_rho = 0, sim_ttft_p50 = 0,
         sim_ttft_mean = 0, sim_itl_mean = 0, sim_iteration = 0;
};

/// The planner at `rate` with the TTFT percentile at the median, and the simulator under Poisson arrivals of fixed
/// lengths at the same rate on one replica of the planner's TP (KV blocks from the same memory model).
Agreement agree(const std::string& id, int tp, std::int64_t isl, std::int64_t osl, double rate,
                double prefix_hit_rate = 0.0) {
  const auto& a = arch(id);
  const auto params = model::parameter_counts(a, Explain::off);
  model::ServingPerfPlan p;
  p.tp = tp;
  p.prefix_hit_rate = prefix_hit_rate;
  model::Traffic tr;
  tr.requests_per_s = rate;
  tr.input_tokens = isl;
  tr.output_tokens = osl;
  model::Sla sla;
  sla.percentile = 0.5;
  model::ServingPlanOptions opt;
  opt.tp_options = {tp};
  const auto plan = model::plan_serving(a, params, p, tr, sla, h100(), opt, Explain::off);
  REQUIRE(plan.best.has_value());
  REQUIRE(plan.best->replicas == 1);
  model::ServingMemoryPlan mp;
  mp.tp = tp;
  mp.context = isl + osl;
  const auto mem = model::serving_memory(a, params, *h100().gpu, mp, Explain::off);
  model::ArrivalSpec spec;
  spec.rate_per_s = rate;
  spec.count = 20000;
  spec.input = {model::LengthSampler::Kind::fixed, double(isl), double(isl)};
  spec.output = {model::LengthSampler::Kind::fixed, double(osl), double(osl)};
  model::SimOptions so;
  REQUIRE(mem.plan.block_size == p.kv_block_tokens);  // the planner's and the simulator's hits in the same blocks
  so.block_size = mem.plan.block_size;
  so.kv_blocks = mem.kv_token_capacity / mem.plan.block_size;
  const auto r = model::simulate_serving(a, p, h100(), model::generate_requests(spec), so);
  REQUIRE(r.completed == spec.count);
  CHECK(r.preemptions == 0);
  return {plan.best->ttft.raw(), plan.best->itl.raw(), plan.best->iteration_wait.raw(), plan.best->queue_rho,
          r.ttft.p50, r.ttft.mean, r.itl.mean, r.busy_s / double(r.iterations)};
}

}  // namespace

/// |simulated / planned − 1| (doctest's Approx adds 1 to the scale: at 0.04 s and epsilon 0.1 it would accept 0.1 s).
double off(double simulated, double planned) { return std::abs(simulated / planned - 1.0); }

// Issue #28 deliverable 2. Where the planner's steady state holds (Poisson arrivals, moderate load, fixed lengths) its
// TTFT and mean ITL agree with the simulation within 10%. At p50 with the prompt queue's load ρ ≤ 0.5 the planner's
// TTFT is a mean (the Pollaczek–Khinchine mean wait is its floor at every percentile, and R is the mean residual), so
// it is held against the simulated mean. Measured with the built-in defaults, simulated against planned, TTFT mean:
// −2.2%, −3.8%, −0.5%, +6.8%, −0.6%; ITL: −2.0%, +2.3%, +0.1%, +0.9%, +7.1%. Without the wait for the running
// iteration R (before 2026-11-27) the TTFT was +19%, +8%, +17%, +37% and +17% off: the last two cases are the ones
// that showed it (short prompts at a high rate; long prompts, whose prefill iterations are long).
TEST_CASE("the planner's TTFT and mean ITL agree with the simulator within 10% in steady state") {
  struct Case {
    const char* model;
    int tp;
    std::int64_t isl, osl;
    double rate;
  };
  for (const Case& c : {Case{"llama-3.1-8b", 1, 1024, 256, 10.0}, Case{"llama-3.1-8b", 1, 2048, 512, 3.0},
                        Case{"llama-3.1-70b", 4, 1024, 256, 3.0}, Case{"llama-3.1-8b", 1, 512, 256, 20.0}}) {
    INFO(c.model << " TP " << c.tp << " " << c.isl << "/" << c.osl << " at " << c.rate << " req/s");
    const Agreement g = agree(c.model, c.tp, c.isl, c.osl, c.rate);
    INFO("planner TTFT " << g.planner_ttft << " s (R " << g.planner_iteration_wait << " s), simulated mean "
                         << g.sim_ttft_mean << " s, p50 " << g.sim_ttft_p50 << " s; ITL " << g.planner_itl
                         << " s, simulated " << g.sim_itl_mean << " s");
    REQUIRE(g.planner_rho <= 0.5);  // the planner's p50 is its mean wait
    CHECK(off(g.sim_ttft_mean, g.planner_ttft) < 0.10);
    CHECK(off(g.sim_itl_mean, g.planner_itl) < 0.10);
    // The planner's ITL is the mean iteration; the simulated engine's mean iteration is the same quantity.
    CHECK(off(g.sim_iteration, g.planner_itl) < 0.05);
    // The median: below the mean (the waits are skewed), within 30% of the planner's figure.
    CHECK(g.sim_ttft_p50 < g.sim_ttft_mean);
    CHECK(off(g.sim_ttft_p50, g.planner_ttft) < 0.30);
  }
}

// Long prompts at a low rate, 4096/128 on Llama 3.1 8B at 4 req/s: the planner's mean ITL is its mean iteration
// (decode-only step + the share of iterations that carry a prompt's chunk × what the chunk adds), and the simulator's
// mean iteration agrees with it (built-in defaults, 2026-11-29: planner 11.7 ms at batch 6, simulated 11.8 ms over
// 416,670 iterations): the planner does not leave the prefill interleaving out. What differs is the simulator's mean
// ITL, 13.0 ms: every token gap counted once, so an iteration weighs as many times as it has decoding sequences, and
// under Poisson arrivals the iterations that carry a 4096-token prefill (~90 ms longer) come in bursts, when more
// sequences are decoding (gap p50 7.9 ms, p99 99 ms). The per-kernel-class graph costs (#27) made the decode steps
// cheaper and so the prefill iterations' weight larger: 7.1% -> 11.1%. A token-weighted mean needs the covariance of
// the batch with the prefill iterations (a queueing result the planner does not have); until it has one, the ITL bar
// stays an expected failure here and the iteration is held to the simulator's.
TEST_CASE("long prompts at a low rate: the planner's mean ITL within 10% of the simulator's token-weighted one (not met)" *
          doctest::should_fail()) {
  const Agreement g = agree("llama-3.1-8b", 1, 4096, 128, 4.0);
  INFO("planner ITL " << g.planner_itl << " s, simulated " << g.sim_itl_mean << " s, simulated mean iteration "
                      << g.sim_iteration << " s");
  REQUIRE(g.planner_rho <= 0.5);
  CHECK(off(g.sim_itl_mean, g.planner_itl) < 0.10);
}

TEST_CASE("long prompts at a low rate: the planner's mean iteration within 3% of the simulator's") {
  const Agreement g = agree("llama-3.1-8b", 1, 4096, 128, 4.0);
  INFO("planner ITL " << g.planner_itl << " s, simulated mean iteration " << g.sim_iteration << " s");
  CHECK(off(g.sim_iteration, g.planner_itl) < 0.03);
  CHECK(off(g.sim_ttft_mean, g.planner_ttft) < 0.10);
}

// A prompt arrives while an iteration runs and joins the batch only at the next step (vLLM schedules between forward
// passes), so it first waits out the running iteration: on average R = E[I²] / (2·E[I]) ≥ half a mean iteration.
// Until 2026-11-27 the planner left this out; it shows most when a prompt's own prefill is short against an
// iteration: 512-token prompts on Llama 3.1 8B at 20 req/s, simulated mean 30.1 ms against the planner's 22.0 ms.
TEST_CASE("short prompts: the planner's TTFT holds the wait for the running iteration to end") {
  const Agreement g = agree("llama-3.1-8b", 1, 512, 256, 20.0);
  CHECK(off(g.sim_ttft_mean, g.planner_ttft) < 0.10);
  // Without the term the planner misses by more than the agreement test's 10%: the test above would fail.
  const double without = g.planner_ttft - g.planner_iteration_wait;
  CHECK(off(g.sim_ttft_mean, without) > 0.10);
  // The term: at least half a mean iteration, and here (one iteration in five carries a prompt) under one.
  CHECK(g.planner_iteration_wait >= 0.5 * g.planner_itl);
  CHECK(g.planner_iteration_wait < g.planner_itl);
}

// Issue #28 deliverable 4: prefix caching saves time. A hit rate h finds ⌊h·(prompt − shared prefix) / block⌋ whole
// blocks of each prompt in the prefix cache; they are not computed again, the new tokens attend to them.
TEST_CASE("the prefix-cache hit rate: cached tokens in whole blocks, the same rule in the planner and the simulator") {
  model::ServingPerfPlan p;
  CHECK(model::cached_prompt_tokens(p, 2048) == 0);
  p.prefix_hit_rate = 0.5;
  CHECK(model::cached_prompt_tokens(p, 2048) == 1024);
  p.prefix_hit_rate = 0.3;  // 614.4 tokens: 38 blocks of 16
  CHECK(model::cached_prompt_tokens(p, 2048) == 608);
  p.prefix_hit_rate = 0.5;
  p.cached_prefix_tokens = 1488;  // a shared prefix of 93 blocks, then half of the other 560 tokens: 17 blocks
  CHECK(model::cached_prompt_tokens(p, 2048) == 1488 + 272);
  const model::ForwardBatch fb = model::prompt_pass(p, 2048);
  CHECK(fb.prefill_tokens == 288);
  CHECK(fb.prefill_past == 1760);
  p.prefix_hit_rate = 0.999;  // never the whole prompt: its last token gives the first output token
  p.cached_prefix_tokens = 0;
  CHECK(model::cached_prompt_tokens(p, 16) == 0);
  CHECK(model::cached_prompt_tokens(p, 17) == 16);
  // The simulator admits a prompt with the same cached tokens: a lone 2048-token prompt at h = 0.5 is one pass of
  // 1024 new tokens after 1024 cached.
  p.prefix_hit_rate = 0.5;
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), {{0.0, 2048, 1}}, exact(100000));
  REQUIRE(r.completed == 1);
  CHECK(r.ttft.p50 == gptest::approx(fwd(p, model::ForwardBatch{0, 1, 0, 1.0, 1024, 1024, true})).epsilon(1e-12));
}

TEST_CASE("prefix caching saves time: TTFT and prefill compute fall with the hit rate in the planner and the simulator") {
  const auto& a = arch("llama-3.1-8b");
  double last_flops = 1e300, last_prefill = 1e300, last_plan = 1e300, last_sim = 1e300, last_busy = 1e300;
  for (double h : {0.0, 0.25, 0.5, 0.75}) {
    INFO("hit rate " << h);
    model::ServingPerfPlan p;
    p.prefix_hit_rate = h;
    // The planner: one prompt's prefill FLOPs and time, and the steady state's TTFT.
    const double flops = model::forward_cost(a, p, model::prompt_pass(p, 2048), h100(), Explain::off).flops.raw();
    const double prefill = model::prefill_time(a, p, 1, 2048, h100()).raw();
    CHECK(flops < last_flops);
    CHECK(prefill < last_prefill);
    // The GEMM work is linear in the new tokens: at h = 0.5 about half (attention to the cached half stays).
    if (h == 0.5) {
      model::ServingPerfPlan none;
      const double full = model::forward_cost(a, none, model::prompt_pass(none, 2048), h100(), Explain::off).flops.raw();
      CHECK(flops / full > 0.45);
      CHECK(flops / full < 0.60);
    }
    last_flops = flops;
    last_prefill = prefill;
    // Planner and simulator at 2048/256, 8 req/s: the planned TTFT, the simulated mean TTFT and the engine's busy
    // time all fall, and they agree within 10% at every hit rate.
    const Agreement g = agree("llama-3.1-8b", 1, 2048, 256, 8.0, h);
    INFO("planner TTFT " << g.planner_ttft << " s, simulated mean " << g.sim_ttft_mean << " s");
    CHECK(g.planner_ttft < last_plan);
    CHECK(g.sim_ttft_mean < last_sim);
    CHECK(g.sim_iteration < last_busy);
    CHECK(off(g.sim_ttft_mean, g.planner_ttft) < 0.10);
    CHECK(off(g.sim_itl_mean, g.planner_itl) < 0.10);
    last_plan = g.planner_ttft;
    last_sim = g.sim_ttft_mean;
    last_busy = g.sim_iteration;
  }
}
