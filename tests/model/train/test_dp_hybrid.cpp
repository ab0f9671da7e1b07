// The hybrid shard group at ZeRO 1/2: Megatron-Core's partial distributed optimizer (--num-distributed-optimizer-
// instances N). Sources, Megatron-LM d98e8a64ddf3: megatron/core/parallel_state.py (intra_partial_data_parallel_size
// = dp·cp / N, the intra-instance groups consecutive slices of the dp-cp ranks, the inter-instance group one rank of
// each slice); megatron/core/distributed/param_and_grad_buffer.py start_grad_sync (reduce-scatter inside the
// instance, then all-reduce of the instance's shard across the instances) and start_param_sync (all-gather inside
// the instance).
#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {
// Llama 3.1 8B on GB200 NVL72 (72 GPUs per NVLink domain), TP 2 with SP, distributed optimizer, bf16 weights and
// bf16 gradient buffers, 8192 tokens per micro-batch, one micro-batch per replica.
wl::TrainingPlan hybrid_plan(int dp, int shard_group) {
  wl::TrainingPlan p;
  p.par.tp = 2;
  p.par.dp = dp;
  p.par.shard_group = shard_group;
  p.par.sequence_parallel = true;
  p.micro_batch = 1;
  p.global_batch = dp;
  p.seq_len = 8192;
  p.zero = wl::ZeroStage::optimizer;
  p.recompute = wl::Recompute::none;
  p.precision.gradient_bytes = 2;
  return p;
}

const model::CommCost& dp_comm(const model::TrainingEstimate& e) {
  for (const auto& c : e.comm)
    if (c.kind == "dp") return c;
  FAIL("no dp row");
  return e.comm.front();
}
}  // namespace

TEST_CASE("two distributed-optimizer instances: the reduce-scatter and gather inside 32 ranks, plus an all-reduce "
          "of the 1/32 shard across the 2 instances") {
  const auto sys = test::node_system("gb200-nvl72");
  const auto& a = test::arch("llama-3.1-8b");
  // 128 GPUs: dp 64 cut into 2 instances of 32 (64 GPUs, one NVL72 domain each), against a plain dp 32 run whose
  // whole DP group is one instance's group (the same per-GPU buffers: TP 2, PP 1).
  const auto hybrid = model::estimate_training(a, hybrid_plan(64, 32), sys, Explain::off);
  const auto one = model::estimate_training(a, hybrid_plan(32, 0), sys, Explain::off);
  REQUIRE(hybrid.feasibility.ok);
  REQUIRE(one.feasibility.ok);
  const auto& h = dp_comm(hybrid);
  const auto& o = dp_comm(one);
  // ZeRO 1's DP bytes per step: the gradient buffer and the weights, 2 B each per parameter on this GPU.
  REQUIRE(o.bytes_per_step.raw() == gptest::approx(h.bytes_per_step.raw()));
  const double grads = o.bytes_per_step.raw() / 2.0;
  // The instances are 32 ranks apart (stride tp·32 = 64 GPUs, past one 72-GPU domain): a 2-rank all-reduce over the
  // scale-out tier, of one rank's shard, grads / 32.
  const model::CommGroup inter = model::training_comm_group(2, 64, sys);
  REQUIRE(inter.domains() == 2);
  const double across = model::collective_time(model::Collective::all_reduce, units::bytes(grads / 32.0), inter).raw();
  CHECK(h.time.raw() - o.time.raw() == gptest::approx(across).epsilon(1e-9));
  CHECK(across > 0.0);
}

TEST_CASE("one instance (shard group = dp·cp) prices the DP step as no hybrid group") {
  const auto sys = test::node_system("gb200-nvl72");
  const auto& a = test::arch("llama-3.1-8b");
  const auto whole = model::estimate_training(a, hybrid_plan(64, 64), sys, Explain::off);
  const auto plain = model::estimate_training(a, hybrid_plan(64, 0), sys, Explain::off);
  REQUIRE(whole.feasibility.ok);
  CHECK(dp_comm(whole).time.raw() == gptest::approx(dp_comm(plain).time.raw()).epsilon(1e-12));
  CHECK(whole.memory.optimizer_states.raw() == gptest::approx(plain.memory.optimizer_states.raw()));
}

TEST_CASE("the optimizer states of two instances are sharded over 32 ranks, not 64") {
  const auto sys = test::node_system("gb200-nvl72");
  const auto& a = test::arch("llama-3.1-8b");
  const auto hybrid = model::estimate_training(a, hybrid_plan(64, 32), sys, Explain::off);
  const auto plain = model::estimate_training(a, hybrid_plan(64, 0), sys, Explain::off);
  CHECK(hybrid.memory.optimizer_states.raw() == gptest::approx(2.0 * plain.memory.optimizer_states.raw()));
}

TEST_CASE("a shard group that does not slice dp·cp is refused at ZeRO 1 as at ZeRO 3") {
  const auto sys = test::node_system("gb200-nvl72");
  const auto& a = test::arch("llama-3.1-8b");
  auto p = hybrid_plan(64, 24);
  const auto f = model::check_training_layout(a, p, sys);
  REQUIRE_FALSE(f.ok);
  CHECK(f.reasons.front().find("hybrid shard group 24 does not divide DP 64") != std::string::npos);
  p = hybrid_plan(16, 8);
  p.par.cp = 2;
  p.global_batch = 16;
  p.par.shard_group = 12;
  const auto g = model::check_training_layout(a, p, sys);
  REQUIRE_FALSE(g.ok);
  CHECK(g.reasons.front().find("hybrid shard group 12 does not divide DP × CP = 32") != std::string::npos);
}

TEST_CASE("the dp explain entry names the instance split: 2 optimizer instances of 32 ranks") {
  const auto sys = test::node_system("gb200-nvl72");
  const auto& a = test::arch("llama-3.1-8b");
  const auto e = model::estimate_training(a, hybrid_plan(64, 32), sys, Explain::on);
  REQUIRE(e.feasibility.ok);
  const auto& c = dp_comm(e);
  CHECK(c.collective == "reduce-scatter + all-gather in each of 2 optimizer instances of 32, all-reduce across them");
  const Derivation* dp = e.derivation.find("train.comm.dp");
  REQUIRE(dp != nullptr);
  const DerivationInput* split = nullptr;
  for (const auto& in : dp->inputs)
    if (in.symbol == "instances") split = &in;
  REQUIRE(split != nullptr);
  CHECK(split->value == "2 × 32 ranks");
  CHECK(split->origin.ref.find("--num-distributed-optimizer-instances") != std::string::npos);
  // Without a hybrid group the entry has no such input.
  const auto plain = model::estimate_training(a, hybrid_plan(64, 0), sys, Explain::on);
  const Derivation* pdp = plain.derivation.find("train.comm.dp");
  REQUIRE(pdp != nullptr);
  for (const auto& in : pdp->inputs) CHECK(in.symbol != "instances");
}

TEST_CASE("the experts' data-parallel group is cut into as many instances: one it does not divide is refused") {
  // Mixtral 8x7B at TP 2, EP 4 (expert TP = TP) over dp 8: the expert-data-parallel group has 2 × 8 / (2 × 4) = 2
  // ranks (parallel_state.py, expert_data_parallel_size). Shard group 2 makes 8 / 2 = 4 instances: 2 does not divide
  // by 4; shard group 4 makes 2 instances, which it does (the experts' instances of 1 rank each).
  const auto sys = test::node_system("gb200-nvl72");
  const auto& a = test::arch("mixtral-8x7b");
  auto p = hybrid_plan(8, 2);
  p.par.ep = 4;
  const auto f = model::check_training_layout(a, p, sys);
  REQUIRE_FALSE(f.ok);
  CHECK(f.reasons.front().find("the expert-data-parallel group of 2 ranks (TP × CP × DP / (expert TP × EP) = 16 / 8) "
                               "is not divisible by the 4 optimizer instances of the hybrid shard group 2") !=
        std::string::npos);
  CHECK(f.reasons.front().find("Expert data parallel size should be divisible by partial DistOpt shard factor") !=
        std::string::npos);
  p.par.shard_group = 4;
  CHECK(model::check_training_layout(a, p, sys).ok);
  const auto e = model::estimate_training(a, p, sys, Explain::on);
  REQUIRE(e.feasibility.ok);
  const Derivation* dp = e.derivation.find("train.comm.dp");
  REQUIRE(dp != nullptr);
  bool named = false;
  for (const auto& in : dp->inputs)
    if (in.symbol == "instances") named = in.value == "2 × 4 ranks (routed experts: 2 × 1)";
  CHECK(named);
}
