// Issue #22: SHARP for the data-parallel reductions (NCCL CollNet over a scale-out fabric whose switches reduce:
// model/src/comm/collective_algorithms.cpp collnet; the plan's dp_sharp, Megatron-LM --use-sharp) and Megatron-LM's
// --defer-embedding-wgrad-compute (model/src/train/compose_step.cpp deferred_head_wgrads). Sources: NCCL's CollNet
// factors 0.85 (all-reduce, compute capability >= 9.0) and 0.9 (reduce-scatter / all-gather) and its one network
// latency step (NVIDIA/nccl src/graph/tuning.cc @5067397c); NCCL's per-call base latency 8.4 us, per-step NVLink 3.4 us
// and network 14 us (tuning.cc @b6475625); Megatron-LM d98e8a64 megatron/core/tensor_parallel/layers.py (the deferred
// wgrad GEMMs of the first wgrad_deferral_limit micro-batches, 0 = all) and pipeline_parallel/schedules.py
// (finish_embedding_wgrad_compute after the schedule's last backward).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <string>

#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"
#include "training_core.hpp"

using namespace gpuplan;
using model::Collective;
using model::CollectiveAlgorithm;
using model::CommGroup;
using model::LinkTier;

namespace {

LinkTier sharp_tier(double bw_GBps, double eta, double alpha_us, bool reduces) {
  LinkTier t;
  t.name = "test tier";
  t.uni_per_gpu = units::gb_per_s(bw_GBps);
  t.bus_efficiency = eta;
  t.latency = units::microseconds(alpha_us);
  t.in_network_reduction = reduces;
  t.origin = "test";
  return t;
}

// A DGX H100-like group of n GPUs, 8 per domain: NVLink 450 GB/s per direction at η 0.81 and α 3.4 us (no NVLS here),
// one 400 Gb/s NIC per GPU (50 GB/s) at η 0.96 and α 14 us on a fabric that reduces (Quantum-2 SHARP), t0 8.4 us.
CommGroup h100_like(int n, bool collnet) {
  CommGroup g;
  g.size = n;
  g.scale_up_size = 8;
  g.scale_up = sharp_tier(450.0, 0.81, 3.4, false);
  g.scale_out = sharp_tier(50.0, 0.96, 14.0, true);
  g.call_latency = units::microseconds(8.4);
  g.collnet = collnet;
  return g;
}

model::CollectiveCost cost(Collective op, double bytes, const CommGroup& g,
                           CollectiveAlgorithm a = CollectiveAlgorithm::automatic, Explain e = Explain::off) {
  return model::collective_cost(op, units::bytes(bytes), g, a, e);
}

}  // namespace

TEST_CASE("CollNet all-reduce: 2(s-1)/s of S inside the domain, S/s across once each way at 0.85, pipelined") {
  const CommGroup g = h100_like(64, true);  // s 8, d 8
  const double S = 1e9;
  // t0 + 2(s−1)·α_up + α_out = 8.4 + 47.6 + 14 = 70 us; then the slower of S·2·7/8 / (450e9·0.81) = 4.8011 ms and
  // (S/8) / (50e9·0.96·0.85) = 3.0637 ms: NCCL pipelines the domain's phases with the network's.
  const double expected = 70e-6 + std::max(S * 1.75 / 364.5e9, 0.125e9 / 40.8e9);
  const auto c = cost(Collective::all_reduce, S, g, CollectiveAlgorithm::collnet, Explain::on);
  CHECK(c.algorithm == CollectiveAlgorithm::collnet);
  CHECK(c.time.raw() == gptest::approx(expected).epsilon(1e-12));
  CHECK(c.time.raw() == gptest::approx(4.8711e-3).epsilon(1e-4));
  CHECK(c.derivation.formula ==
        "t = t₀ + 2(s−1)·α_up + α_out + max(S·2(s−1)/s / (BW_up·η_up), (S/s) / (BW_out·η_out·κ))");
  // Automatic takes it: NCCL's tree across 8 domains (2·S at 364.5 GB/s, 5.63 ms) and ring (5.99 ms) are slower.
  const auto automatic = cost(Collective::all_reduce, S, g);
  CHECK(automatic.algorithm == CollectiveAlgorithm::collnet);
  CHECK(cost(Collective::all_reduce, S, h100_like(64, false)).time.raw() ==
        gptest::approx(140e-6 + 2.0 * S / 364.5e9).epsilon(1e-9));  // the tree without CollNet
}

TEST_CASE("CollNet is NCCL's only where the run enables it and the scale-out switches reduce") {
  const double S = 1e9;
  // Not enabled: not considered (NCCL needs NCCL_COLLNET_ENABLE=1).
  CHECK(cost(Collective::all_reduce, S, h100_like(64, false)).algorithm != CollectiveAlgorithm::collnet);
  // A fabric without in-network reduction: a CollNet request falls back, and says why.
  CommGroup plain = h100_like(64, true);
  plain.scale_out->in_network_reduction = false;
  const auto c = cost(Collective::all_reduce, S, plain, CollectiveAlgorithm::collnet, Explain::on);
  CHECK(c.algorithm != CollectiveAlgorithm::collnet);
  CHECK(c.derivation.notes[0].find("collnet requested but the scale-out fabric has no in-network reduction") == 0);
  // Inside one domain there is no scale-out switch.
  CommGroup one = h100_like(8, true);
  CHECK(cost(Collective::all_reduce, S, one).algorithm != CollectiveAlgorithm::collnet);
}

TEST_CASE("CollNet reduce-scatter and all-gather: a ring's bytes at 0.9 of the NIC, one network step") {
  const CommGroup g = h100_like(64, true);
  const double S = 1e9;
  // Reduce-scatter: t0 + (s−1)·α_up + α_out = 8.4 + 23.8 + 14 = 46.2 us; max(S·7/8 / 364.5e9, (S/8) / (48e9·0.9)).
  const double rs = 46.2e-6 + std::max(S * 0.875 / 364.5e9, 0.125e9 / 43.2e9);
  CHECK(cost(Collective::reduce_scatter, S, g, CollectiveAlgorithm::collnet).time.raw() ==
        gptest::approx(rs).epsilon(1e-12));
  // All-gather: the switches multicast; each rank receives (d−1)/d of S/8.
  const double ag = 46.2e-6 + std::max(S * 0.875 / 364.5e9, 0.125e9 * 7.0 / 8.0 / 43.2e9);
  CHECK(cost(Collective::all_gather, S, g, CollectiveAlgorithm::collnet).time.raw() ==
        gptest::approx(ag).epsilon(1e-12));
  // A small (latency-bound) reduce-scatter over 64 domains: one network step (14 us) where the hierarchical ring
  // takes 63 (882 us): 46.2 us + max(1 MB·7/8 / 364.5e9, 125 kB / 43.2e9).
  const CommGroup wide = h100_like(512, true);
  const auto sharp = cost(Collective::reduce_scatter, 1e6, wide);
  CHECK(sharp.algorithm == CollectiveAlgorithm::collnet);
  CHECK(sharp.time.raw() == gptest::approx(46.2e-6 + 0.125e6 / 43.2e9).epsilon(1e-12));
  CHECK(cost(Collective::reduce_scatter, 1e6, wide, CollectiveAlgorithm::hierarchical).time.raw() > 900e-6);
}

TEST_CASE("CollNet all-reduce runs the domain's phases at the NVLS rate where the NVSwitch reduces") {
  CommGroup g = h100_like(64, true);
  g.scale_up.in_network_reduction = true;
  g.scale_up.in_network_gain = 1.25;
  const double S = 1e9;
  const double expected = 70e-6 + std::max(S * 1.75 / (364.5e9 * 1.25), 0.125e9 / 40.8e9);
  CHECK(cost(Collective::all_reduce, S, g, CollectiveAlgorithm::collnet).time.raw() ==
        gptest::approx(expected).epsilon(1e-12));
}

namespace {
// Llama 3.1 8B on 64 H100s (8 DGX H100): TP 2, PP 4, DP 8, Megatron-Core with the distributed optimizer; the last
// stage holds 8 layers and the 128256 × 4096 LM head.
wl::TrainingPlan llama8b_pp4(int micro_batches) {
  wl::TrainingPlan p;
  p.par.tp = 2;
  p.par.pp = 4;
  p.par.dp = 8;
  p.par.sequence_parallel = true;
  p.micro_batch = 1;
  p.global_batch = 8 * micro_batches;
  p.seq_len = 8192;
  p.zero = wl::ZeroStage::optimizer;
  p.recompute = wl::Recompute::none;
  return p;
}
}  // namespace

TEST_CASE("deferred embedding wgrad: the last stage's m LM-head wgrads leave its t_i and run beside the drain") {
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  wl::TrainingPlan plan = llama8b_pp4(16);
  const auto base = model::estimate_training(a, plan, sys, Explain::off);
  plan.defer_embedding_wgrad = true;
  const auto deferred = model::estimate_training(a, plan, sys, Explain::on);
  REQUIRE(base.feasibility.ok);
  REQUIRE(deferred.feasibility.ok);
  // The LM head's wgrad GEMM of one micro-batch: T = 8192 tokens × 64128 (the vocabulary's TP shard) × 4096.
  const model::Device d = model::detail::training_device(plan, sys);
  const auto terms = model::detail::compute_terms(a, plan, d, nullptr);
  const double W = terms.head_wgrad.raw();
  REQUIRE(W > 0);
  REQUIRE(W < terms.head_time.raw());
  // The last stage (8 layers + the head) is the slowest with and without deferral; its t_i loses W.
  REQUIRE(base.bottleneck_stage == 3);
  REQUIRE(deferred.bottleneck_stage == 3);
  CHECK(base.stage_time[3].raw() - deferred.stage_time[3].raw() == gptest::approx(W).epsilon(1e-9));
  // The drain (three stages' backward of one micro-batch) outlasts 16·W: all of it hidden, the step m·W shorter.
  CHECK(base.step_time.raw() - deferred.step_time.raw() == gptest::approx(16.0 * W).epsilon(1e-6));
  // The explain tree's bubble node names N and W_head.
  bool found = false;
  for (const auto& c : deferred.derivation.children)
    if (c.id == "train.bubble")
      for (const auto& in : c.inputs)
        if (in.symbol == "N") found = in.value == "16";
  CHECK(found);
}

TEST_CASE("deferred embedding wgrad: --wgrad-deferral-limit defers the first N only, and what outlasts the drain shows") {
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  wl::TrainingPlan plan = llama8b_pp4(16);
  const auto base = model::estimate_training(a, plan, sys, Explain::off);
  const model::Device d = model::detail::training_device(plan, sys);
  const double W = model::detail::compute_terms(a, plan, d, nullptr).head_wgrad.raw();
  plan.defer_embedding_wgrad = true;
  plan.wgrad_deferral_limit = 4;
  const auto four = model::estimate_training(a, plan, sys, Explain::off);
  CHECK(base.step_time.raw() - four.step_time.raw() == gptest::approx(4.0 * W).epsilon(1e-6));
  // PP 2 with 256 micro-batches: the drain is the first stage's backward of one micro-batch (16 layers), far less
  // than 256·W, so the step loses only that: N·W − (N·W − D) = D, which lies inside the first stage's t_0 (its
  // forward, backward and embedding) and is most of it (a backward costs about twice a forward).
  wl::TrainingPlan two = llama8b_pp4(256);
  two.par.pp = 2;
  two.par.dp = 16;
  two.global_batch = 16 * 256;
  const auto b2 = model::estimate_training(a, two, sys, Explain::off);
  two.defer_embedding_wgrad = true;
  const auto d2 = model::estimate_training(a, two, sys, Explain::off);
  REQUIRE(b2.bottleneck_stage == 1);
  REQUIRE(d2.bottleneck_stage == 1);
  const double W2 =
      model::detail::compute_terms(a, two, model::detail::training_device(two, sys), nullptr).head_wgrad.raw();
  const double saved = b2.step_time.raw() - d2.step_time.raw();
  CHECK(256.0 * W2 > b2.stage_time[0].raw());
  CHECK(saved < b2.stage_time[0].raw());
  CHECK(saved > 0.5 * b2.stage_time[0].raw());
  // Without pipeline parallelism nothing is deferred (Megatron refuses it; the plan's field has no effect).
  wl::TrainingPlan flat = llama8b_pp4(16);
  flat.par.pp = 1;
  flat.par.dp = 32;
  flat.global_batch = 32 * 16;
  const auto f0 = model::estimate_training(a, flat, sys, Explain::off);
  flat.defer_embedding_wgrad = true;
  CHECK(model::estimate_training(a, flat, sys, Explain::off).step_time.raw() == f0.step_time.raw());
}
