// TorchTitan's rows as the stack runs them: op-level selective activation checkpointing (wl::Recompute::selective_op),
// the eager RMSNorm written as PyTorch ops (wl::NormKernel::composite) and the loss left out of torch.compile
// (wl::CrossEntropyKernel::eager). Source: pytorch/torchtitan
// 9dec370ad26b torchtitan/parallelisms/parallelize_llama.py: _save_list (aten.mm, SDPA flash/efficient,
// reduce_scatter_tensor, abs, max) and _custom_policy ("Saves output of all compute ops, except every second mm"), the
// policy of train_configs/llama3_8b.toml (mode 'selective', selective_ac_option 'op'); the mm order of a block is
// torchtitan/models/llama/model.py's: wq, wk, wv (Attention.forward), wo, then w1, w3, w2 (FeedForward.forward).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "../../../model/src/memory/memory_activations.hpp"
#include "gpuplan/model/ops.hpp"
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

const model::OpCost& op_named(const model::TrainingEstimate& e, const std::string& name) {
  for (const auto& o : e.layer_ops)
    if (o.name == name) return o;
  FAIL("no op " << name);
  return e.layer_ops.front();
}
Seconds fwd_op(const model::TrainingEstimate& e, const std::string& name) { return op_named(e, name).time; }
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
  // TorchTitan's eager modules hold wk and w3 as their own nn.Linear, each its own GEMM (the K projection, the MLP's
  // up projection; model/src/graph/linear_gemms.hpp projections_apart).
  const Seconds per_layer = fwd_op(op, "K projection") + fwd_op(op, "output projection") + fwd_op(op, "MLP up") +
                            fwd_op(op, "input norm") + fwd_op(op, "post-attention norm") + fwd_op(op, "rotary") +
                            fwd_op(op, "SwiGLU") + fwd_op(op, "residual add");
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

TEST_CASE("TorchTitan's eager RMSNorm is PyTorch ops: 36 B forward and 92 B backward per element in 8 and 14 kernels") {
  // torchtitan/models/norms.py RMSNorm at 9dec370: (x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x)
  // * weight. Per element, a = 2 B, f = 4 B: forward upcast a+f, pow 2f, mean f, mul 2f, cast f+a, weight mul 2a =
  // 36 B; backward (autograd) weight mul 2a + 3a + a, cast a+f, mul 2f + 3f + f, mean f, pow 2f + 2f + 3f, the sum of
  // the two gradients 3f, upcast f+a = 92 B. The fused kernel: 4 B and 8 B.
  const auto sys = test::node_system("grand-teton-h100");
  const auto& a = test::arch("llama-3.1-8b");
  auto plan = torchtitan_t1(wl::Recompute::selective_op);
  plan.norm_kernel = wl::NormKernel::composite;
  const auto comp = model::estimate_training(a, plan, sys, Explain::on);
  const auto fused = model::estimate_training(a, torchtitan_t1(wl::Recompute::selective_op), sys, Explain::on);
  REQUIRE(comp.feasibility.ok);
  const double elems = 16384.0 * 4096.0;  // the micro-batch's 2 × 8,192 tokens × hidden 4,096
  const auto& f = op_named(comp, "input norm (composite: upcast, pow, mean, rsqrt, mul, cast, weight mul)");
  const auto& b = op_named(comp, "input norm bwd (composite: autograd of each op)");
  CHECK(f.bytes.raw() == gptest::approx(2415919104.0).epsilon(1e-12));  // 36 × 67,108,864
  CHECK(b.bytes.raw() == gptest::approx(6174015488.0).epsilon(1e-12));  // 92 × 67,108,864
  CHECK(op_named(fused, "input norm").bytes.raw() == gptest::approx(4.0 * elems).epsilon(1e-12));
  // Eight kernels forward, fourteen backward, the bytes at 0.70 and 0.88 of the streaming rate (measured on our H200,
  // torchtitan_norm_rope.json: 867.6 and 1,739.8 µs).
  const model::Device d = model::sustained_device(*sys.gpu, sys.efficiency, plan.attention_kernel);
  const Seconds k = model::kernel_fixed(d, model::OpClass::elementwise);
  const auto at_rate = [&](const model::OpCost& o, double rate, int kernels) {
    const Seconds s = model::streaming_cost("", model::OpClass::elementwise, o.bytes, o.flops, d).time;
    return ((s - k) / rate + k * double(kernels)).raw();
  };
  CHECK(f.time.raw() == gptest::approx(at_rate(f, 0.70, 8)).epsilon(1e-12));
  CHECK(b.time.raw() == gptest::approx(at_rate(b, 0.88, 14)).epsilon(1e-12));
  // Op-level SAC reruns both norms of every layer: 32 layers × 2 norms × the forward's difference, one micro-batch.
  const double dfwd = (f.time - op_named(fused, "input norm").time).raw();
  CHECK((comp.step.recompute - fused.step.recompute).raw() == gptest::approx(64.0 * dfwd).epsilon(1e-9));
  // At 2.4 TB/s the 8B row's 65 norm passes cost at least (36 + 92 + 36 − 4 − 8 − 4) B × 67.1M × 64 / 2.4 TB/s
  // = 0.265 s more per step than the fused kernels.
  CHECK((comp.step_time - fused.step_time).raw() > 148.0 * elems * 64.0 / 2.4e12);
}

TEST_CASE("composite norm kernels are refused on a LayerNorm model: nn.LayerNorm is one fused kernel") {
  const auto sys = test::node_system("grand-teton-h100");
  auto plan = torchtitan_t1(wl::Recompute::none);
  plan.seq_len = 1024;
  plan.norm_kernel = wl::NormKernel::composite;
  const auto e = model::check_training_layout(test::arch("gpt2"), plan, sys);
  REQUIRE_FALSE(e.ok);
  CHECK(e.reasons.front() ==
        "norm_kernel composite prices RMSNorm written as PyTorch ops (TorchTitan's, Hugging Face's); the model uses "
        "LayerNorm (PyTorch's nn.LayerNorm is one fused kernel): leave it out");
}

TEST_CASE("TorchTitan compiles its blocks, not its loss: cross_entropy eager is PyTorch's 22 + 26 B per logit") {
  const auto sys = test::node_system("grand-teton-h100");
  const auto& a = test::arch("llama-3.1-8b");
  auto te = torchtitan_t1(wl::Recompute::selective_op);
  te.kernels = wl::KernelStyle::fused;
  auto eager = te;
  eager.cross_entropy = wl::CrossEntropyKernel::eager;
  const auto ee = model::estimate_training(a, eager, sys, Explain::off);
  const auto et = model::estimate_training(a, te, sys, Explain::off);
  REQUIRE(ee.feasibility.ok);
  // Memory: log_softmax's fp32 output and its fp32 gradient beside the bf16 logits, 10 B against TE's 2 B per logit:
  // 16,384 tokens × 128,256 logits × 8 B.
  CHECK((ee.memory.logits - et.memory.logits).raw() == gptest::approx(16384.0 * 128256.0 * 8.0).epsilon(1e-12));
  // Time: the loss's two streaming passes over the 2.10 G logits of the step's one micro-batch, 22 + 26 B per logit
  // against one fused pass's 6 + 6 B.
  const model::Device d = model::sustained_device(*sys.gpu, sys.efficiency, te.attention_kernel);
  const double logits = 16384.0 * 128256.0;
  const auto pass = [&](double bytes, double flops) {
    return model::streaming_cost("", model::OpClass::loss, units::bytes(logits * bytes), units::flop(logits * flops), d)
        .time.raw();
  };
  const double expected = pass(22.0, 5.0) + pass(26.0, 3.0) - pass(6.0, 5.0) - pass(6.0, 3.0);
  CHECK(expected > 36.0 * logits / 2.4e12);  // at least HBM's 2.4 TB/s for the 36 B per logit more: 31.5 ms
  CHECK((ee.step_time - et.step_time).raw() == gptest::approx(expected).epsilon(1e-6));
  // The layers are the same (the blocks are compiled either way).
  CHECK(ee.step.recompute.raw() == gptest::approx(et.step.recompute.raw()).epsilon(1e-12));
}
