// Static batching in the request-level simulator (simulate.hpp, Batching::static_; issue #27 d4): deterministic
// arrivals whose TTFT, E2E, queueing and duration are summed by hand from forward_cost, the timeout that starts a
// partial batch, padding to the longest prompt and output, and continuous batching's throughput advantage at equal
// KV memory on the GUI's and CLI's simulation scenario.
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
/// n padded prompts of `isl` tokens in one pass; n decodes each holding `ctx` tokens.
double prefill(const model::ServingPerfPlan& p, double n, std::int64_t isl) {
  return fwd(p, model::ForwardBatch{0, 1, 0, n, isl, 0, true});
}
double decode(const model::ServingPerfPlan& p, double n, std::int64_t ctx) {
  return fwd(p, model::ForwardBatch{n, 1, ctx, 0, 0, 0, false});
}

model::SimOptions static_opts(std::int64_t batch, double timeout_s, std::int64_t blocks = 100000) {
  model::SimOptions o;
  o.kv_blocks = blocks;
  o.block_size = 16;
  o.cost_bits = 0;  // exact batch shapes
  o.batching = model::Batching::static_;
  o.static_batch = batch;
  o.static_timeout_s = timeout_s;
  return o;
}

double rel(double a, double b) { return std::abs(a / b - 1.0); }

}  // namespace

TEST_CASE("static batching: a batch of 2 waits for its second request and runs to the longest output") {
  // Requests at 0, 1, 2, 3 s, 100 prompt tokens, 3 output tokens; B = 2, timeout 10 s. Batch 1 = {0, 1} starts at
  // 1 s (full), batch 2 = {2, 3} at 3 s. Each: prefill P of 2 × 100 tokens, then decodes D1 (2 sequences holding
  // 100 tokens) and D2 (holding 101).
  model::ServingPerfPlan p;
  const std::vector<model::SimRequest> rq{{0.0, 100, 3}, {1.0, 100, 3}, {2.0, 100, 3}, {3.0, 100, 3}};
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), rq, static_opts(2, 10.0));
  const double P = prefill(p, 2, 100), D1 = decode(p, 2, 100), D2 = decode(p, 2, 101);
  REQUIRE(P + D1 + D2 < 1.0);  // batch 1 ends before batch 2 is full
  REQUIRE(r.completed == 4);
  CHECK(r.batches == 2);
  CHECK(r.mean_batch == 2.0);
  CHECK(r.iterations == 6);
  // TTFT: 1 + P for the first of each pair (it waited 1 s for the second), P for the second.
  CHECK(rel(r.ttft.mean, 0.5 + P) < 1e-12);
  CHECK(rel(r.ttft.max, 1.0 + P) < 1e-12);
  CHECK(rel(r.ttft.p50, P) < 1e-12);
  CHECK(r.queue.mean == gptest::approx(0.5).epsilon(1e-12));
  CHECK(r.queue.max == gptest::approx(1.0).epsilon(1e-12));
  CHECK(rel(r.e2e.mean, 0.5 + P + D1 + D2) < 1e-12);
  CHECK(rel(r.duration_s, 3.0 + P + D1 + D2) < 1e-12);
  CHECK(rel(r.output_tokens_per_s, 12.0 / (3.0 + P + D1 + D2)) < 1e-12);
  CHECK(rel(r.busy_s, 2.0 * (P + D1 + D2)) < 1e-12);
  CHECK(r.padding_fraction == 0.0);
  CHECK(r.preemptions == 0);
}

TEST_CASE("static batching: a partial batch starts when its oldest request has waited the timeout") {
  // Requests at 0, 0.25, 2 s; B = 2, timeout 0.5 s: {0, 0.25} starts at 0.25 s (full), {2} alone at 2.5 s.
  model::ServingPerfPlan p;
  const std::vector<model::SimRequest> rq{{0.0, 100, 2}, {0.25, 100, 2}, {2.0, 100, 2}};
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), rq, static_opts(2, 0.5));
  REQUIRE(r.completed == 3);
  CHECK(r.batches == 2);
  CHECK(r.mean_batch == gptest::approx(1.5));
  const double P2 = prefill(p, 2, 100), P1 = prefill(p, 1, 100), D1 = decode(p, 1, 100);
  REQUIRE(P1 < 0.5);
  CHECK(rel(r.ttft.max, 0.5 + P1) < 1e-12);
  CHECK(rel(r.ttft.mean, (0.25 + P2 + P2 + 0.5 + P1) / 3.0) < 1e-12);
  CHECK(r.queue.mean == gptest::approx((0.25 + 0.0 + 0.5) / 3.0).epsilon(1e-12));
  CHECK(rel(r.duration_s, 2.5 + P1 + D1) < 1e-12);
  // Requests 1 s apart with the same timeout: the first leaves alone at 0.5 s, before its partner comes.
  const std::vector<model::SimRequest> spaced{{0.0, 100, 2}, {1.0, 100, 2}};
  const auto s = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), spaced, static_opts(2, 0.5));
  CHECK(s.batches == 2);
  CHECK(rel(s.ttft.max, 0.5 + P1) < 1e-12);
  // Timeout 0: whatever waits starts at once: three batches of one, no wait.
  const auto g = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), rq, static_opts(2, 0.0));
  CHECK(g.batches == 3);
  CHECK(g.queue.max == 0.0);
  CHECK(rel(g.ttft.mean, P1) < 1e-12);
}

TEST_CASE("static batching pads the prompts to the longest and decodes until the longest output ends") {
  // Two requests at 0: 100 prompt / 3 output tokens and 50 / 1. One prefill of 2 × 100 tokens; the short one is done
  // at the prefill's end but its slot decodes on (padding) through the two steps the long one needs.
  model::ServingPerfPlan p;
  const std::vector<model::SimRequest> rq{{0.0, 100, 3}, {0.0, 50, 1}};
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), rq, static_opts(4, 0.0));
  REQUIRE(r.completed == 2);
  CHECK(r.batches == 1);
  const double P = prefill(p, 2, 100), D1 = decode(p, 2, 100), D2 = decode(p, 2, 101);
  CHECK(rel(r.e2e.max, P + D1 + D2) < 1e-12);
  CHECK(rel(r.e2e.p50, P) < 1e-12);  // the short request streams its one token at the prefill's end
  CHECK(rel(r.duration_s, P + D1 + D2) < 1e-12);
  // Token slots: 2 × 100 prefill + 2 × 2 decode = 204; padding: 50 prompt + 2 decode slots of the finished one.
  CHECK(r.padding_fraction == gptest::approx(52.0 / 204.0).epsilon(1e-12));
  // Its KV: 2 padded sequences of 103 tokens, 7 blocks each, reserved for the whole batch.
  CHECK(r.kv_utilisation_peak == gptest::approx(14.0 / 100000.0).epsilon(1e-12));
}

TEST_CASE("static batching takes fewer requests when the padded batch would not fit the KV cache") {
  // 5 blocks of 16 tokens: one padded sequence of 50 + 10 tokens needs 4 blocks, so each batch holds one request.
  model::ServingPerfPlan p;
  const std::vector<model::SimRequest> rq{{0.0, 50, 10}, {0.0, 50, 10}, {0.0, 200, 10}};
  const auto r = model::simulate_serving(arch("llama-3.1-8b"), p, h100(), rq, static_opts(8, 0.0, 5));
  CHECK(r.completed == 2);
  CHECK(r.batches == 2);
  REQUIRE(r.notes.size() == 1);  // 210 tokens need 14 blocks: refused
  CHECK(r.notes[0].find("refused") != std::string::npos);
}

// Issue #27 d4: at equal KV memory and a rate beyond what static batching sustains, the continuous scheduler
// delivers more output tokens per second (Orca §2.2: static batches idle their finished slots and make arrivals wait
// for the whole batch). The scenario is the simulation tab's and `gpuplan simulate`'s (Llama-3.1-8B on one H100,
// lognormal prompts and outputs), static B = the engine's max_num_seqs.
TEST_CASE("continuous batching beats static batching on throughput at equal memory under load") {
  const auto& a = arch("llama-3.1-8b");
  const auto params = model::parameter_counts(a, Explain::off);
  model::ServingPerfPlan p;
  model::ServingMemoryPlan mp;
  mp.tp = 1;
  mp.context = 1024 + 256;
  const auto mem = model::serving_memory(a, params, *h100().gpu, mp, Explain::off);
  model::ArrivalSpec spec;
  spec.rate_per_s = 40;
  spec.count = 3000;
  spec.input = {model::LengthSampler::Kind::lognormal, 1024, 512};
  spec.output = {model::LengthSampler::Kind::lognormal, 256, 128};
  const auto reqs = model::generate_requests(spec);
  model::SimOptions so;
  so.block_size = mem.plan.block_size;
  so.kv_blocks = mem.kv_token_capacity / mem.plan.block_size;
  const auto cont = model::simulate_serving(a, p, h100(), reqs, so);
  so.batching = model::Batching::static_;
  so.static_batch = 256;
  so.static_timeout_s = 0.0;
  const auto stat = model::simulate_serving(a, p, h100(), reqs, so);
  so.static_timeout_s = 1.0;
  const auto stat_wait = model::simulate_serving(a, p, h100(), reqs, so);
  REQUIRE(cont.completed == spec.count);
  REQUIRE(stat.completed == spec.count);
  REQUIRE(stat_wait.completed == spec.count);
  INFO("continuous " << cont.output_tokens_per_s << " tok/s, TTFT p50 " << cont.ttft.p50 << " s; static "
                     << stat.output_tokens_per_s << " tok/s, TTFT p50 " << stat.ttft.p50 << " s, padding "
                     << stat.padding_fraction << "; static with 1 s timeout " << stat_wait.output_tokens_per_s);
  CHECK(cont.output_tokens_per_s > stat.output_tokens_per_s);
  CHECK(cont.output_tokens_per_s > stat_wait.output_tokens_per_s);
  CHECK(cont.ttft.p50 < stat.ttft.p50);
  CHECK(stat.padding_fraction > 0.1);  // lognormal lengths: the longest in a batch sets its padding
}
