// DeepSpeed ZeRO-3 of 0.3.13-0.5.x (zero3_gather per_tensor_blocking, model/src/train/dp_terms.cpp and
// compose_step.cpp): one all-gather and one reduce-scatter per parameter tensor, each call paying NCCL's ring latency
// over the whole DP group, the gathers not overlapped with compute, and a third gather for the recomputed forward.
// Sources: microsoft/DeepSpeed v0.3.13 (2021-03-16) deepspeed/runtime/zero/partition_parameters.py _allgather_param
// (torch.cuda.synchronize() then torch.distributed.all_gather per parameter) and _reduce_scatter_gradient (one
// reduce_scatter per parameter), stage3.py fetch_sub_module (_synchronize_communication: comm stream and device
// synchronised before the submodule runs); NCCL's ring latency model (NVIDIA/nccl src/graph/tuning.cc: baseLat
// Ring/Simple 8.4 µs, hwLat Ring/Simple NVLink 3.4 µs and NET 14 µs per step).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {
// GPT-3 175B as Narayanan et al. SC'21 Table 2 ran it under ZeRO-3: pure DP over 1536 A100s, micro-batch 1,
// global batch 1536 (one micro-batch per step), fp16, full recomputation.
wl::TrainingPlan gpt3_zero3(wl::Zero3Gather g) {
  wl::TrainingPlan p;
  p.par.dp = 1536;
  p.micro_batch = 1;
  p.global_batch = 1536;
  p.seq_len = 2048;
  p.precision.compute = hw::Precision::fp16;
  p.zero = wl::ZeroStage::parameters;
  p.zero3_gather = g;
  p.recompute = wl::Recompute::full;
  p.flash_attention = false;
  return p;
}

double ring(model::Collective op, double bytes, const model::CommGroup& g) {
  return model::collective_cost(op, units::bytes(bytes), g, model::CollectiveAlgorithm::ring, Explain::off).time.raw();
}

const model::CommCost* dp_comm(const model::TrainingEstimate& e) {
  for (const auto& c : e.comm)
    if (c.kind == "dp" || c.kind == "fsdp") return &c;
  return nullptr;
}
}  // namespace

TEST_CASE("DeepSpeed 2021 ZeRO-3 on 1536 A100s: 11 more calls per layer, each 7.25 ms of ring latency, no overlap") {
  const auto sys = test::node_system("dgx-a100");
  const auto& a = test::arch("gpt3-175b");
  const auto unit = model::estimate_training(a, gpt3_zero3(wl::Zero3Gather::per_unit), sys, Explain::off);
  const auto tens = model::estimate_training(a, gpt3_zero3(wl::Zero3Gather::per_tensor_blocking), sys, Explain::off);
  REQUIRE(unit.feasibility.ok);
  REQUIRE(tens.feasibility.ok);
  const auto* cu = dp_comm(unit);
  const auto* ct = dp_comm(tens);
  REQUIRE(cu != nullptr);
  REQUIRE(ct != nullptr);

  // One call of an h-element fp16 vector (12288 × 2 B) over 1536 ranks = 192 DGX A100 nodes of 8 is latency-bound:
  // ring all-gather, 1535 steps, 1344 over NVLink and 191 over InfiniBand:
  // 8.4 µs + 1344 × 3.4 µs + 191 × 14 µs = 8.4 + 4569.6 + 2674 = 7252 µs (tuning.cc constants, above).
  // torch.distributed on the NCCL of 2021 runs all-gather and reduce-scatter as rings only.
  const auto g = model::training_comm_group(1536, 1, sys);
  const double t_vec = ring(model::Collective::all_gather, 12288.0 * 2, g);
  CHECK(t_vec == gptest::approx(7.252e-3).epsilon(2e-3));
  const double t_vec_rs = ring(model::Collective::reduce_scatter, 12288.0 * 2, g);

  // GPT-3 has 12 parameter tensors per layer (2 LayerNorms × weight + bias; fused QKV, O, fc1, fc2 × weight + bias)
  // and 4 outside the layers (token and position embeddings, final LayerNorm weight + bias; the head is tied):
  // 96 × 12 + 4 = 1156 calls per gather pass and for the reduce-scatter, 1155 more than one flat call. Passes:
  // forward, recomputed forward, backward = 3 (per_unit: 2). The DP total is the ring reduce-scatter of all
  // 174.6e9 fp16 gradients + 1155 vector calls, and three times the ring all-gather of all fp16
  // parameters + 1155 vector calls: the latency alone is 4 × 1155 × 7.252 ms = 33.50 s.
  const double p = 174604836864.0;
  const double flat = ring(model::Collective::all_gather, p * 2, g);
  const double expected =
      ring(model::Collective::reduce_scatter, p * 2, g) + 1155 * t_vec_rs + 3 * (flat + 1155 * t_vec);
  CHECK(4 * 1155 * t_vec == gptest::approx(33.50).epsilon(2e-3));
  CHECK(ct->time.raw() == gptest::approx(expected).epsilon(0.01));
  CHECK(ct->time.raw() > cu->time.raw() + 33.4);

  // Blocking fetch: the gathers are all exposed, so the exposed DP time is at least the three passes.
  const double gathers = 3 * (flat + 1155 * t_vec);
  CHECK(ct->exposed.raw() >= gathers * 0.999);
  CHECK(cu->exposed.raw() < 0.2 * gathers);
  CHECK(tens.step_time.raw() > unit.step_time.raw() + gathers * 0.99);
}

TEST_CASE("per-tensor ZeRO-3 without recomputation: two gather passes of ring calls, one call per tensor") {
  // Without recomputation DeepSpeed gathers for the forward and the backward only: two passes.
  const auto sys = test::node_system("dgx-a100");
  const auto& a = test::arch("gpt3-175b");
  auto pu = gpt3_zero3(wl::Zero3Gather::per_unit), pt = gpt3_zero3(wl::Zero3Gather::per_tensor_blocking);
  pu.recompute = pt.recompute = wl::Recompute::none;
  pu.par.dp = pt.par.dp = 384;
  pu.global_batch = pt.global_batch = 384;
  const auto eu = model::estimate_training(a, pu, sys, Explain::off);
  const auto et = model::estimate_training(a, pt, sys, Explain::off);
  REQUIRE(dp_comm(eu) != nullptr);
  REQUIRE(dp_comm(et) != nullptr);
  // 384 ranks = 48 nodes: 8.4 + 336 × 3.4 + 47 × 14 = 8.4 + 1142.4 + 658 = 1808.8 µs per call.
  const auto g = model::training_comm_group(384, 1, sys);
  const double t_vec = ring(model::Collective::all_gather, 12288.0 * 2, g);
  CHECK(t_vec == gptest::approx(1.8088e-3).epsilon(2e-3));
  const double t_vec_rs = ring(model::Collective::reduce_scatter, 12288.0 * 2, g);
  const double p = 174604836864.0;
  const double expected = ring(model::Collective::reduce_scatter, p * 2, g) + 1155 * t_vec_rs +
                          2 * (ring(model::Collective::all_gather, p * 2, g) + 1155 * t_vec);
  CHECK(dp_comm(et)->time.raw() == gptest::approx(expected).epsilon(0.01));
  CHECK(dp_comm(et)->time.raw() > dp_comm(eu)->time.raw() + 3 * 1155 * 1.8e-3);
}

TEST_CASE("per-tensor ZeRO-3 under PP 3: the heaviest stage's ⌈1156/3⌉ = 386 tensors, as priced and as explained") {
  // A stage holds whole tensors: GPT-3's 1156 over 3 stages is 386 on the heaviest (1156/3 = 385.33). The DP calls
  // and their waits were priced with 386, the ring-latency vectors with 384.33 extra calls and the explain line said
  // 385 (issue #20: an explain input computed again beside the arithmetic). Now one count, stage_parameter_tensors,
  // and the explain line prints the calls and passes compose_step priced: 3 passes (forward, recomputed forward,
  // backward) × 3 micro-batches (1536 sequences over DP 128 × micro-batch 4).
  const auto sys = test::node_system("dgx-a100");
  const auto& a = test::arch("gpt3-175b");
  auto p = gpt3_zero3(wl::Zero3Gather::per_tensor_blocking);
  p.par.pp = 3;
  p.par.dp = 128;
  p.micro_batch = 4;
  const auto e = model::estimate_training(a, p, sys, Explain::on);
  REQUIRE(e.feasibility.ok);
  const Derivation* comm = e.derivation.find("train.comm");
  REQUIRE(comm != nullptr);
  const DerivationInput* line = nullptr;
  for (const auto& in : comm->inputs)
    if (in.symbol == "ZeRO-3 gathers") line = &in;
  REQUIRE(line != nullptr);
  CHECK(line->value == "386 ring calls per pass × 9 passes, not overlapped");
}

TEST_CASE("per-tensor ZeRO-3 through PyTorch's list collectives: 3·c B per parameter per gather, 4·b_g per micro-batch") {
  // DeepSpeed 0.3.13 _allgather_param zero-fills the whole tensor (2 B) and PyTorch's list all_gather copies the flat
  // output into the per-rank views (read 2 + write 2); the gradients are divided in place (2 + 2) and copied into the
  // list reduce-scatter's flat input (2 + 2). GPT-3 175B, fp16, full recompute (3 gathers), 1 micro-batch:
  // 26 B per parameter. Parameters as the model holds them (vocabulary 50257 unpadded): 96 layers × (12h² + 13h)
  // + 50257·h + 2048·h + 2h, h = 12288: 173,961,510,912 + 617,558,016 + 25,165,824 + 24,576 = 174,604,259,328.
  const auto& a = test::arch("gpt3-175b");
  const auto params = model::parameter_counts(a, Explain::off);
  const double p = 96.0 * (12.0 * 12288 * 12288 + 13.0 * 12288) + 50257.0 * 12288 + 2048.0 * 12288 + 2.0 * 12288;
  CHECK(p == 174604259328.0);
  auto pt = gpt3_zero3(wl::Zero3Gather::per_tensor_blocking);
  CHECK(model::dp_copy_bytes(a, params, pt) == gptest::approx(26.0 * p).epsilon(1e-9));
  // Two micro-batches per step (micro-batch 1, global 3072): twice the bytes.
  pt.global_batch = 3072;
  CHECK(model::dp_copy_bytes(a, params, pt) == gptest::approx(52.0 * p).epsilon(1e-9));
  // Without recomputation: 2 gathers, (2 × 6 + 8) B.
  pt.global_batch = 1536;
  pt.recompute = wl::Recompute::none;
  CHECK(model::dp_copy_bytes(a, params, pt) == gptest::approx(20.0 * p).epsilon(1e-9));
  // The flat per-layer gather (FSDP, DeepSpeed >= 0.6) with the fused kernels: no copies priced.
  CHECK(model::dp_copy_bytes(a, params, gpt3_zero3(wl::Zero3Gather::per_unit)) == 0.0);
}
