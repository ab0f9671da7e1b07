// The data-parallel communicator's CTA cap (dp_max_ctas, model/src/comm/collective_algorithms.hpp Ctx::raw_up and
// topology.cpp set_per_cta). Sources: one CTA moves 0.778 of an NVLink link (measured: 2 x H200, NCCL 2.28.9, 8 CTAs:
// 15.76 GB/s busbw per CTA = 0.778 x 25 GB/s x 0.81; data/validation/measured/h200-sxm-141gb/nccl_cta_cap_2gpu.json;
// carried to NVLink 5 as a share of the link, NVIDIA/nccl issue #1703); NVLink 5 = 18 links x 50 GB/s
// per direction (data/hardware/links/nvlink5.json); NCCL bus efficiency on NVLink 5 0.76 (topology.cpp kEfficiency);
// MLPerf Training v5.1 NeMo recipes: conf/nccl/custom_communicator_cta.yaml dp / dp_cp max_ctas 8.
#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {
double ring_time(model::Collective op, double bytes, const model::CommGroup& g) {
  return model::collective_cost(op, units::bytes(bytes), g, model::CollectiveAlgorithm::ring, Explain::off).time.raw();
}

// MLPerf v5.1 Llama 3.1 8B on 512 GB200s as NeMo ran it (config_GB200_128x4x1xtp2pp1cp4_8b.sh): TP 2 (SP), CP 4,
// DP 64, one sequence of 8192 tokens per 8 GPUs, one micro-batch per step, distributed optimizer, FP8.
wl::TrainingPlan mlperf_8b_512(int ctas) {
  wl::TrainingPlan p;
  p.par.tp = 2;
  p.par.cp = 4;
  p.par.dp = 64;
  p.par.sequence_parallel = true;
  p.micro_batch = 1;
  p.global_batch = 64;
  p.seq_len = 8192;
  p.zero = wl::ZeroStage::optimizer;
  p.recompute = wl::Recompute::none;
  p.precision.compute = hw::Precision::fp8;
  p.overlap_tp_comm = true;
  p.dp_max_ctas = ctas;
  return p;
}

const model::CommCost* comm(const model::TrainingEstimate& e, const char* kind) {
  for (const auto& c : e.comm)
    if (c.kind == kind) return &c;
  return nullptr;
}
}  // namespace

TEST_CASE("a communicator capped at 8 CTAs moves 8 CTAs' measured share of an NVLink 5 link: 311 of 900 GB/s") {
  const auto sys = test::node_system("gb200-nvl72");
  model::CommGroup g = model::training_comm_group(8, 1, sys);
  REQUIRE(g.domains() == 1);
  REQUIRE(g.scale_up.per_cta.raw() == gptest::approx(38.9e9));  // 0.778 × 50 GB/s per link
  const double S = 1073741824.0;                                 // 1 GiB all-gather output
  const double free = ring_time(model::Collective::all_gather, S, g);
  g.max_ctas = 8;
  const double capped = ring_time(model::Collective::all_gather, S, g);
  // Same latency, transfer S·(n−1)/n at min(900, 8 × 38.9) GB/s × η 0.76 = 236.5 GB/s instead of 900 × 0.76 = 684:
  // 0.939524096e9 B × (1/236.512e9 − 1/684e9) s/B = 2.6012 ms more.
  CHECK(capped - free == gptest::approx(0.939524096e9 * (1.0 / 236.512e9 - 1.0 / 684e9)).epsilon(1e-6));
  // A cap at or above what the link takes (24 CTAs × 38.9 GB/s > 900 GB/s) changes nothing.
  g.max_ctas = 24;
  CHECK(ring_time(model::Collective::all_gather, S, g) == gptest::approx(free).epsilon(1e-12));
  // Fewer CTAs never make a collective faster.
  for (int c : {1, 2, 4, 8, 16, 32}) {
    g.max_ctas = c;
    const double t = ring_time(model::Collective::reduce_scatter, S, g);
    g.max_ctas = c * 2;
    CHECK(ring_time(model::Collective::reduce_scatter, S, g) <= t);
  }
}

TEST_CASE("MLPerf 8B on 512 GB200s: the DP communicator's 8 CTAs make its reduce-scatter and gather 2.9x longer") {
  const auto sys = test::node_system("gb200-nvl72");
  const auto& a = test::arch("llama-3.1-8b");
  const auto free = model::estimate_training(a, mlperf_8b_512(0), sys, Explain::off);
  const auto capped = model::estimate_training(a, mlperf_8b_512(8), sys, Explain::off);
  REQUIRE(free.feasibility.ok);
  REQUIRE(capped.feasibility.ok);
  const auto* df = comm(free, "dp");
  const auto* dc = comm(capped, "dp");
  REQUIRE(df != nullptr);
  REQUIRE(dc != nullptr);
  // The dp·cp group of 256 spans 8 NVL72 domains with 32 members each: the scale-up phase dominates and moves at
  // 311 instead of 900 GB/s, so the DP time grows by up to 2.9x (less: latency and the IB phase do not change).
  CHECK(dc->time.raw() > 2.0 * df->time.raw());
  CHECK(dc->time.raw() < 2.9 * df->time.raw());
  // With one micro-batch the forward (about 13 ms) and backward (about 25 ms) cannot hide a 2.9x longer exchange.
  CHECK(dc->exposed.raw() > df->exposed.raw() + 0.010);
  CHECK(capped.step_time.raw() > free.step_time.raw() + 0.010);
}
