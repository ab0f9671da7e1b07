// TorchTitan's op-level selective activation checkpointing (wl::Recompute::selective_op). Source: pytorch/torchtitan
// 9dec370ad26b torchtitan/parallelisms/parallelize_llama.py: _save_list (aten.mm, SDPA flash/efficient,
// reduce_scatter_tensor, abs, max) and _custom_policy ("Saves output of all compute ops, except every second mm"), the
// policy of train_configs/llama3_8b.toml (mode 'selective', selective_ac_option 'op'); the mm order of a block is
// torchtitan/models/llama/model.py's: wq, wk, wv (Attention.forward), wo, then w1, w3, w2 (FeedForward.forward).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "../../../model/src/memory/memory_activations.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;
using units::Seconds;

namespace {
// TorchTitan paper Table 1's 8B row as the case file writes it (FSDP over 8 Grand Teton H100, local batch 2, 8K
// sequence, FSDP2 eager modules, float32 gradient reduction, the flash SDPA backend).
wl::TrainingPlan torchtitan_t1(wl::Recompute r) {
  wl::TrainingPlan p;
  p.par.dp = 8;
  p.micro_batch = 2;
  p.global_batch = 16;
  p.seq_len = 8192;
  p.zero = wl::ZeroStage::parameters;
  p.recompute = r;
  p.kernels = wl::KernelStyle::eager;
  p.precision.gradient_bytes = 4.0;
  p.attention_kernel = wl::AttentionKernel::fa2;
  return p;
}

Seconds fwd_op(const model::TrainingEstimate& e, const std::string& name) {
  for (const auto& o : e.layer_ops)
    if (o.name == name) return o.time;
  FAIL("no op " << name);
  return Seconds(0);
}
}  // namespace

TEST_CASE("op-level SAC keeps the block input, wq, wv, SDPA's output and log-sum-exp, w1 and w2: 63,616 B per token") {
  const auto& a = test::arch("llama-3.1-8b");
  const auto plan = torchtitan_t1(wl::Recompute::selective_op);
  const auto c = model::detail::make_ctx(a, plan, model::ActivationLayout::from_plan);
  // Per token, bf16: x 4096 + wq 32·128 + wv 8·128 + SDPA out 32·128 + w1 14336 + w2 4096 = 31,744 elements × 2 B,
  // and the fp32 log-sum-exp of 32 heads (128 B).
  const double kept = 2.0 * (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 32 * 4;
  CHECK(kept == 63616.0);
  const auto terms = model::detail::layer_terms(c, false);
  const auto sums = model::detail::sum_terms(c, terms);
  CHECK(model::detail::stored_per_token(c, sums) == gptest::approx(kept).epsilon(1e-12));
  // The recomputation rebuilds the eager layer's saved tensors but reuses the kept ones its backward also reads (the
  // input, V, the SDPA output and log-sum-exp, w1's output): 2·(4096 + 1024 + 4096 + 14336) + 128 = 47,232 B.
  CHECK(model::detail::working_set_per_token(c, sums) == gptest::approx(sums.all - 47232.0).epsilon(1e-12));
  // Against the two Megatron modes: more than full (the layer input, 8,192 B), far less than selective (all kept).
  auto full = plan;
  full.recompute = wl::Recompute::full;
  CHECK(model::detail::stored_per_token(model::detail::make_ctx(a, full, model::ActivationLayout::from_plan), sums) ==
        8192.0);
  CHECK(sums.all > 2.0 * kept);
}

TEST_CASE("op-level SAC on TorchTitan's Table 1 8B row: 31.06 GiB of layer activations, so the row fits its 95 GiB") {
  const auto sys = test::node_system("grand-teton-h100");
  const auto& a = test::arch("llama-3.1-8b");
  const auto op = model::estimate_training(a, torchtitan_t1(wl::Recompute::selective_op), sys, Explain::off);
  const auto sel = model::estimate_training(a, torchtitan_t1(wl::Recompute::selective), sys, Explain::off);
  const auto full = model::estimate_training(a, torchtitan_t1(wl::Recompute::full), sys, Explain::off);
  REQUIRE(op.feasibility.ok);
  // 32 layers × 63,616 B × 16,384 tokens = 31.06 GiB of kept tensors; the full-recompute run keeps 32 × 8,192 B ×
  // 16,384 = 4 GiB of checkpoints. The rest of the activations (the embedding, the head) is the same, and neither
  // recomputation working set counts: both (under op-SAC the eager layer's saved tensors less the 47,232 B per token
  // it reuses, under full the layer less its input) stay below the last stage's logits buffers, which the peak
  // formula subtracts (max(0, working set − logits buffers): 16,384 tokens × 128,256 logits).
  const double tokens = 16384.0;
  const double expected_diff = 32.0 * (63616.0 - 8192.0) * tokens;
  CHECK((op.memory.activations - full.memory.activations).raw() == gptest::approx(expected_diff).epsilon(1e-9));
  CHECK(op.memory.fits);
  CHECK_FALSE(sel.memory.fits);  // Megatron's selective keeps every tensor of the eager layer: 125 GiB
  CHECK(op.memory.total.raw() < sel.memory.total.raw() - 40.0 * 1073741824.0);
}

TEST_CASE("op-level SAC reruns wk, wo, w3, the norms, RoPE, the first residual add and SwiGLU: their forward time") {
  const auto sys = test::node_system("grand-teton-h100");
  const auto& a = test::arch("llama-3.1-8b");
  const auto op = model::estimate_training(a, torchtitan_t1(wl::Recompute::selective_op), sys, Explain::on);
  const auto none = model::estimate_training(a, torchtitan_t1(wl::Recompute::none), sys, Explain::on);
  REQUIRE(op.feasibility.ok);
  REQUIRE_FALSE(op.layer_ops.empty());
  // wk is 8·128 of the fused QKV GEMM's (32 + 2·8)·128 outputs; w3 is half of the fused [w1 | w3] GEMM.
  const Seconds per_layer = fwd_op(op, "QKV projection") * (1024.0 / 6144.0) + fwd_op(op, "output projection") +
                            fwd_op(op, "MLP up/gate") * 0.5 + fwd_op(op, "input norm") + fwd_op(op, "post-attention norm") +
                            fwd_op(op, "rotary") + fwd_op(op, "SwiGLU") + fwd_op(op, "residual add");
  // One micro-batch per step (16 = 2 × DP 8), 32 layers.
  CHECK(op.step.recompute.raw() == gptest::approx(32.0 * per_layer.raw()).epsilon(1e-9));
  CHECK(none.step.recompute.raw() == 0.0);
  // The step grows by the recomputation (FSDP's traffic is the same; nothing else moves).
  CHECK((op.step.gemm + op.step.elementwise - none.step.gemm - none.step.elementwise).raw() ==
        gptest::approx(op.step.recompute.raw()).epsilon(1e-9));
}

TEST_CASE("op-level SAC is refused where TorchTitan's mm counting is not modelled: TP > 1, biases, MoE") {
  const auto sys = test::node_system("grand-teton-h100");
  auto tp = torchtitan_t1(wl::Recompute::selective_op);
  tp.par.tp = 2;
  tp.par.dp = 4;
  tp.par.sequence_parallel = true;
  const auto e = model::check_training_layout(test::arch("llama-3.1-8b"), tp, sys);
  REQUIRE_FALSE(e.ok);
  CHECK(e.reasons.front().find("recompute selective_op (TorchTitan's op-level policy") != std::string::npos);
  CHECK(e.reasons.front().find("TP 1") != std::string::npos);
  auto moe = torchtitan_t1(wl::Recompute::selective_op);
  moe.par.ep = 8;
  CHECK_FALSE(model::check_training_layout(test::arch("mixtral-8x7b"), moe, sys).ok);
}
