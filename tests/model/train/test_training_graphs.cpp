// CUDA graphs in training (wl::CudaGraphScope; issue #24) and Megatron-Core's router kernels (issue #21): a kernel
// replayed from a graph pays the in-graph fixed cost instead of the eager launch, and nothing else moves; the
// router's small kernels counted from Megatron-LM core_v0.14.0 (moe_cost.hpp megatron_router_kernels).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "gpuplan/model/training.hpp"
#include "library.hpp"
#include "megatron_moe_rows.hpp"
#include "moe_cost.hpp"

using namespace gpuplan;

namespace {

double layer_time(const model::TrainingEstimate& e) {
  double t = 0;
  for (const auto& op : e.layer_ops) t += op.time.raw();
  return t;
}

const model::OpCost& op_starting(const model::TrainingEstimate& e, const std::string& prefix) {
  for (const auto& op : e.layer_ops)
    if (op.name.rfind(prefix, 0) == 0) return op;
  FAIL("no op named " << prefix);
  return e.layer_ops.front();
}

const model::OpCost& op_exactly(const model::TrainingEstimate& e, const std::string& name) {
  for (const auto& op : e.layer_ops)
    if (op.name == name) return op;
  FAIL("no op named " << name);
  return e.layer_ops.front();
}

// Llama-3-8B at the Megatron-Bridge 25.09 B200 row's layout (TP 1, DP 8, micro-batch 1 × 8192), bf16.
wl::TrainingPlan llama_row(wl::CudaGraphScope g) {
  wl::TrainingPlan p;
  p.par.dp = 8;
  p.micro_batch = 1;
  p.seq_len = 8192;
  p.global_batch = 8;
  p.cuda_graphs = g;
  return p;
}

}  // namespace

TEST_SUITE("training cuda graphs") {
  TEST_CASE("a graphed dense layer is faster by n_kernels × (eager − in-graph fixed cost), and only by that") {
    const auto sys = test::node_system("dgx-b200");
    const auto a = test::arch("llama-3-8b");
    const auto eager = model::estimate_training(a, llama_row(wl::CudaGraphScope::none), sys, Explain::off);
    const auto graphed = model::estimate_training(a, llama_row(wl::CudaGraphScope::layer), sys, Explain::off);
    const auto attn = model::estimate_training(a, llama_row(wl::CudaGraphScope::attention), sys, Explain::off);
    // One kernel per op, forward and backward: two norms (2 each), QKV / output / fc1 / fc2 GEMMs (fwd, dgrad, wgrad:
    // 12), rotary (2), flash attention (2), two residual adds (4), SwiGLU (2) = 26.
    REQUIRE(eager.layer_ops.size() == 26);
    // B200 takes the H200's measured in-graph costs by class (measured.json OWN-GRAPH-CLASS: GEMM 4.5, fused
    // attention 5.1, other 2.4 µs, a norm 1.93 µs + 1.06 ns × its row) against the 5 µs launch: 12 GEMMs × 0.5 +
    // 2 attention kernels × (−0.1) + 8 other kernels (rotary 2, residual adds 4, SwiGLU 2) × 2.6 + 4 norm kernels of
    // rows of 4096 × (5 − 6.27176) = 6 − 0.2 + 20.8 − 5.08704 = 21.51296 µs.
    CHECK(layer_time(eager) - layer_time(graphed) == gptest::approx(21.51296e-6));
    // Scope attn: the input norm (2), QKV (3), rotary (2), attention (2), output projection (3) and its residual
    // add (2) = 14 kernels: 6 GEMMs × 0.5 − 2 × 0.1 + 4 other × 2.6 + 2 norms × (−1.27176) = 10.65648 µs.
    CHECK(layer_time(eager) - layer_time(attn) == gptest::approx(10.65648e-6));
    // The FLOPs and bytes do not move.
    CHECK(graphed.hardware_flops_per_step.raw() == gptest::approx(eager.hardware_flops_per_step.raw()));
  }

  TEST_CASE("a GPU without measured in-graph costs by class takes serving's one in-graph cost, 2.5 µs per kernel") {
    const auto sys = test::node_system("dgx-a100");
    const auto a = test::arch("llama-3-8b");
    const auto eager_plan = llama_row(wl::CudaGraphScope::none);
    auto graph_plan = eager_plan;
    graph_plan.cuda_graphs = wl::CudaGraphScope::layer;
    const auto eager = model::estimate_training(a, eager_plan, sys, Explain::off);
    const auto graphed = model::estimate_training(a, graph_plan, sys, Explain::off);
    REQUIRE(eager.layer_ops.size() == 26);
    CHECK(layer_time(eager) - layer_time(graphed) == gptest::approx(26 * 2.5e-6));
  }

  TEST_CASE("on Hopper each kernel class takes its measured in-graph cost (GEMM 4.6, fused attention 5.1, norm by row, "
            "other 2.4 µs)") {
    const auto sys = test::node_system("dgx-h100");
    const auto a = test::arch("llama-3-8b");
    const auto eager = model::estimate_training(a, llama_row(wl::CudaGraphScope::none), sys, Explain::off);
    const auto graphed = model::estimate_training(a, llama_row(wl::CudaGraphScope::layer), sys, Explain::off);
    // 12 GEMMs × (5 − 4.6) + 2 attention kernels × (5 − 5.1) + 8 other kernels × (5 − 2.4) + the 4 norm kernels ×
    // (5 − 6.27176: the norm's in-graph latency of a 4096 row, 1.93 µs + 1.06 ns × 4096, as serving prices it) =
    // 4.8 − 0.2 + 20.8 − 5.08704 = 20.31296 µs.
    CHECK(layer_time(eager) - layer_time(graphed) == gptest::approx(20.31296e-6));
  }

  TEST_CASE("a dropless MoE block keeps the eager launch under layer graphs, a padded capacity makes it capturable") {
    const auto sys = test::node_system("dgx-b200");
    const auto a = test::arch("qwen3-30b-a3b");
    auto plan = test::qwen3_b200_row();
    const auto eager = model::estimate_training(a, plan, sys, Explain::off);
    plan.cuda_graphs = wl::CudaGraphScope::layer;
    const auto graphed = model::estimate_training(a, plan, sys, Explain::off);
    const std::string router = "router kernels (fused top-k, aux loss)";
    CHECK(op_starting(graphed, router).time.raw() == gptest::approx(op_starting(eager, router).time.raw()));
    // The attention half is captured: its QKV projection's forward GEMM is 5 − 4.5 µs faster (the GEMM class), the
    // FP8 cast before it 5 − 2.4 µs (other kernels).
    CHECK(op_exactly(eager, "QKV projection").time.raw() - op_exactly(graphed, "QKV projection").time.raw() ==
          gptest::approx(0.5e-6));
    CHECK(op_exactly(eager, "QKV projection fp8 tensorwise cast").time.raw() -
              op_exactly(graphed, "QKV projection fp8 tensorwise cast").time.raw() ==
          gptest::approx(2.6e-6));
    plan.moe_capacity_factor = 1.0;
    plan.moe_pad_to_capacity = true;
    const auto padded = model::estimate_training(a, plan, sys, Explain::off);
    plan.cuda_graphs = wl::CudaGraphScope::none;
    const auto padded_eager = model::estimate_training(a, plan, sys, Explain::off);
    // Forward: 6 fused router kernels + 6 of the token drop, each 5 − 2.4 µs cheaper in the graph (other kernels).
    CHECK(op_starting(padded_eager, router).time.raw() - op_starting(padded, router).time.raw() ==
          gptest::approx(12 * 2.6e-6));
  }

  TEST_CASE("Megatron-Core's router kernels, counted from core_v0.14.0 router.py and moe_utils.py") {
    using model::detail::megatron_router_kernels;
    // Fused (TE): top-k with score 1; aux scores 1, map sum 1, fused aux loss 1, tracker 2 | backward 1 + 4 + 1.
    auto r = megatron_router_kernels(false, false, true, false, false, 1);
    CHECK(r.fwd == 6);
    CHECK(r.bwd == 6);
    CHECK(megatron_router_kernels(false, false, true, false, false, 2).fwd == 7);  // the counts' TP×CP all-reduce
    // Unfused softmax: topk, softmax; probs 3; map 5; aux scores 7, sum 1, loss 4, tracker 2 = 24 | 4 + 6 + 1 = 11.
    r = megatron_router_kernels(false, false, false, false, false, 1);
    CHECK(r.fwd == 24);
    CHECK(r.bwd == 11);
    // DeepSeek-V3's sigmoid with expert bias and group-limited top-k, unfused: 8 + 8 + 3 + 5 + (10 + 1 + 4 + 2) + 2
    // (the bias's token counts) = 43 | 8 + (2 + 3 + 4) + 1 = 18.
    r = megatron_router_kernels(true, true, false, false, false, 1);
    CHECK(r.fwd == 43);
    CHECK(r.bwd == 18);
    // Token dropping: topk over tokens, zeros_like, scatter (2), bool, the mask product (+ logical_and unpadded).
    r = megatron_router_kernels(false, false, true, true, true, 1);
    CHECK(r.fwd == 12);
    CHECK(r.bwd == 7);
    CHECK(megatron_router_kernels(false, false, true, true, false, 1).fwd == 13);
  }

  TEST_CASE("the router kernels are priced as their fixed costs plus one fp32 [tokens, experts] read and write each") {
    const auto sys = test::node_system("dgx-b200");
    const auto a = test::arch("qwen3-30b-a3b");
    auto plan = test::qwen3_b200_row();
    const auto fused = model::estimate_training(a, plan, sys, Explain::off);
    const model::OpCost& f = op_starting(fused, "router kernels (fused top-k, aux loss)");
    CHECK(f.bytes.raw() == gptest::approx(6 * 4096.0 * 128.0 * 8.0));
    // Beyond its bytes at the residual add's rate per byte, six kernels' 5 µs.
    const model::OpCost& res = op_starting(fused, "residual add");
    const double per_byte = (res.time.raw() - 5e-6) / res.bytes.raw();
    CHECK(f.time.raw() - f.bytes.raw() * per_byte == gptest::approx(6 * 5e-6));
    plan.moe_router_fusion = false;
    const auto unfused = model::estimate_training(a, plan, sys, Explain::off);
    const model::OpCost& u = op_starting(unfused, "router kernels bwd (unfused top-k, aux loss)");
    CHECK(u.time.raw() - u.bytes.raw() * per_byte == gptest::approx(11 * 5e-6));
  }

  TEST_CASE("the router's gating GEMM runs on this rank's tokens: T/tp under sequence parallelism, T without") {
    // Megatron-Core's TopKRouter routes the MoE layer's input, the sequence shard under SP ([s/tp, b, h]); the
    // dispatcher gathers across TP afterwards. Qwen3-30B-A3B: h 2048, 128 experts; micro-batch 1 × 4096, TP 2.
    const auto sys = test::node_system("dgx-b200");
    const auto a = test::arch("qwen3-30b-a3b");
    auto plan = test::qwen3_b200_row();
    plan.par.tp = 2;
    plan.par.dp = 4;
    plan.par.ep = 4;
    plan.par.sequence_parallel = true;
    const auto sp = model::estimate_training(a, plan, sys, Explain::off);
    // Forward GEMM: 2 · (4096 / 2) · 2048 · 128 FLOPs.
    CHECK(op_starting(sp, "router").flops.raw() == gptest::approx(2.0 * 2048.0 * 2048.0 * 128.0));
    plan.par.sequence_parallel = false;
    const auto no_sp = model::estimate_training(a, plan, sys, Explain::off);
    CHECK(op_starting(no_sp, "router").flops.raw() == gptest::approx(2.0 * 4096.0 * 2048.0 * 128.0));
  }
}
