// The data-parallel gradient bucket (dp_bucket_size, model/src/train/step_terms.cpp dp_bucket_params and
// dp_last_unit_params; compose_step.cpp dp_calls). Sources: Megatron-Core DistributedDataParallelConfig.bucket_size
// ("Maximum number of parameters in each bucket"; unset: max(40000000, 1000000 x DP)); param_and_grad_buffer.py
// closes a bucket once it holds bucket_size parameters, walking the parameters in reverse (backward) order, so the
// embedding's bucket is the last one reduced; NeMo 2 MegatronCommOverlapCallback sets 128 Mi parameters with the
// distributed optimizer; MLPerf Training v5.1 Llama 3.1 8B config_common_8b.sh BUCKET_SIZE=768000000.
#include <doctest/doctest.h>

#include <cmath>

#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {
// Llama 3.1 8B on one DGX H100 (one NVLink domain): TP 1, DP 8, ZeRO-1, 8 micro-batches of 4096 tokens per GPU.
wl::TrainingPlan h100_zero1(std::int64_t bucket) {
  wl::TrainingPlan p;
  p.par.dp = 8;
  p.micro_batch = 1;
  p.global_batch = 64;
  p.seq_len = 4096;
  p.zero = wl::ZeroStage::optimizer;
  p.dp_bucket_size = bucket;
  return p;
}

const model::CommCost* comm(const model::TrainingEstimate& e, const char* kind) {
  for (const auto& c : e.comm)
    if (c.kind == kind) return &c;
  return nullptr;
}

std::string explain_text(const Derivation& d) {
  std::string s = d.title + " | ";
  for (const auto& i : d.inputs) s += i.symbol + ": " + i.value + " | ";
  for (const auto& c : d.children) s += explain_text(c);
  return s;
}
}  // namespace

TEST_CASE("a bucket above the embedding stays exposed whole: 768M instead of 600M adds its RS + AG, less the SM share") {
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  const auto b600 = model::estimate_training(a, h100_zero1(600000000), sys, Explain::off);
  const auto b768 = model::estimate_training(a, h100_zero1(768000000), sys, Explain::off);
  REQUIRE(b600.feasibility.ok);
  REQUIRE(b768.feasibility.ok);
  const auto* d0 = comm(b600, "dp");
  const auto* d1 = comm(b768, "dp");
  REQUIRE(d0 != nullptr);
  REQUIRE(d1 != nullptr);
  // The same bytes travel: only what stays exposed moves.
  CHECK(d1->time.raw() == doctest::Approx(d0->time.raw()).epsilon(1e-12));
  // Both buckets exceed the embedding (128256 x 4096 = 525,336,576 parameters, one tensor), so the last bucket is the
  // bucket itself; 8.03e9 / 600M = 14 calls and / 768M = 11 are few enough that the backward (and forward) of one
  // micro-batch hide everything but that bucket's reduce-scatter and all-gather. The exposed part of each is its own
  // time; the rest hides and costs 16/132 of itself in lost GEMM throughput (NCCL's 16 channels of the H100's 132 SMs;
  // no calibration profile here), so exposed = t·s + e·(1 − s) and
  //   Δexposed = (RS(768M·b_g) − RS(600M·b_g) + AG(768M·b_w) − AG(600M·b_w)) · (1 − 16/132),
  // b_g = b_w = 2 B: 168M more parameters, 336 MB more each way, of which each GPU moves 7/8 = 294 MB over NVLink 4
  // at the model's NVLink 4 rate (18 links x 25 GB/s x η): about 0.96 ms each way, 1.69 ms in all after the share.
  const model::CommGroup g = model::training_comm_group(8, 1, sys);
  auto rs = [&](double params) {
    return model::collective_time(model::Collective::reduce_scatter, units::bytes(params * 2.0), g).raw();
  };
  auto ag = [&](double params) {
    return model::collective_time(model::Collective::all_gather, units::bytes(params * 2.0), g).raw();
  };
  const double expected = (rs(768e6) - rs(600e6) + ag(768e6) - ag(600e6)) * (1.0 - 16.0 / 132.0);
  CHECK(expected == doctest::Approx(1.69e-3).epsilon(0.1));
  CHECK(d1->exposed.raw() - d0->exposed.raw() == doctest::Approx(expected).epsilon(1e-6));
  CHECK(b768.step_time.raw() - b600.step_time.raw() == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("Megatron's default 40M bucket makes 201 calls, each waiting for SMs: more exposed than 81 of 100M or 11 of 768M") {
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  const auto def = model::estimate_training(a, h100_zero1(0), sys, Explain::off);
  const auto b100 = model::estimate_training(a, h100_zero1(100000000), sys, Explain::off);
  const auto b768 = model::estimate_training(a, h100_zero1(768000000), sys, Explain::off);
  // 40M and 100M leave the embedding's 525.3M as the last bucket; only the calls differ (201 and 81), and each call
  // beside compute waits for the kernel in flight (the overlap items' wait), which stretches the reduction past the
  // backward that hides it. 768M exposes a larger last bucket (the 600M-768M case above) but makes 11 calls: fewer
  // waits than the default's, more exposed bucket than 100M's.
  CHECK(comm(b100, "dp")->exposed.raw() < comm(def, "dp")->exposed.raw());
  CHECK(comm(b768, "dp")->exposed.raw() < comm(def, "dp")->exposed.raw());
  CHECK(comm(b768, "dp")->exposed.raw() > comm(b100, "dp")->exposed.raw());
  CHECK(comm(def, "dp")->time.raw() == doctest::Approx(comm(b768, "dp")->time.raw()).epsilon(1e-12));
}

TEST_CASE("the explain tree names the bucket, the calls per step and the exposed last bucket, with their origin") {
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  // 8,030,261,248 parameters on each GPU (TP 1): ceil(8.03e9 / 768e6) = 11 buckets; default 40M: ceil(200.8) = 201.
  const auto big = model::estimate_training(a, h100_zero1(768000000), sys, Explain::on);
  const std::string t = explain_text(big.derivation);
  CHECK(t.find("DP bucket: 768,000,000 parameters: 11 per step, the last (exposed) 768,000,000 |") !=
        std::string::npos);
  const auto base = model::estimate_training(a, h100_zero1(0), sys, Explain::on);
  const std::string t0 = explain_text(base.derivation);
  CHECK(t0.find("DP bucket: 40,000,000 parameters: 201 per step, the last (exposed) 525,336,576 |") !=
        std::string::npos);
}
