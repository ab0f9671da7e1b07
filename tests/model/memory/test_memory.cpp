#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/params.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::units::literals;
using gpuplan::test::arch;
using gpuplan::test::hf;
using model::ActivationLayout;

namespace {

hw::GpuSpec gpu_with(units::Bytes capacity) {
  hw::GpuSpec g;
  g.info.id = "test-gpu";
  g.memory.capacity_label = capacity;
  return g;
}

/// A model of exactly `total` parameters, all in the transformer layers (the textbook's "7B" is 7·10⁹ parameters).
model::ParameterCounts flat_params(const wl::TransformerArch& a, std::int64_t total) {
  model::ParameterCounts p;
  p.attention_per_layer = total / a.layers;
  p.attention = total;
  p.total = total;
  return p;
}

double states(const model::TrainingMemory& m) {
  return (m.weights + m.gradients + m.master_weights + m.optimizer_states).raw();
}

double sum_of_fields(const model::TrainingMemory& m) {
  return (m.weights + m.gradients + m.master_weights + m.optimizer_states + m.activations + m.logits + m.cuda_context +
          m.nccl_buffers + m.fragmentation)
      .raw();
}

const model::RuntimeOverheads kNone{};

wl::TrainingPlan plan_with(std::int64_t seq, std::int64_t micro = 1) {
  wl::TrainingPlan p;
  p.seq_len = seq;
  p.micro_batch = micro;
  p.global_batch = micro;
  return p;
}

model::TrainingMemory run(const wl::TransformerArch& a, const model::ParameterCounts& p, const wl::TrainingPlan& plan,
                          const model::RuntimeOverheads& o = kNone,
                          ActivationLayout layout = ActivationLayout::megatron) {
  return model::training_memory(a, p, plan, gpu_with(80_GB), o, Explain::on, layout);
}

/// Relative error of a model value against a reference.
double rel_err(double model_value, double reference) { return model_value / reference - 1.0; }

}  // namespace

// ---------------------------------------------------------------------------------------------------- model states

TEST_CASE("model states of a 7B model in bf16 with AdamW are 16 B per parameter = 112 GB (textbook T5)") {
  const auto& a = arch("llama-2-7b");
  const auto m = run(a, flat_params(a, 7'000'000'000), plan_with(2048));
  CHECK(m.weights.raw() == gptest::approx(14e9));
  CHECK(m.gradients.raw() == gptest::approx(14e9));
  CHECK(m.master_weights.raw() == gptest::approx(28e9));
  CHECK(m.optimizer_states.raw() == gptest::approx(56e9));
  CHECK(states(m) == gptest::approx(112e9));
}

TEST_CASE("fp32 training and bf16 mixed precision both hold 16 B per parameter and only activations shrink (T7)") {
  const auto& a = arch("llama-2-7b");
  const auto params = flat_params(a, 7'000'000'000);
  auto amp = plan_with(2048);
  auto fp32 = amp;
  fp32.precision.compute = hw::Precision::fp32;
  fp32.precision.weight_bytes = 4;
  fp32.precision.gradient_bytes = 4;
  fp32.precision.master_bytes = 0;
  fp32.precision.activation_bytes = 4;
  const auto m_amp = run(a, params, amp);
  const auto m_fp32 = run(a, params, fp32);
  CHECK(states(m_amp) == gptest::approx(112e9));
  CHECK(states(m_fp32) == gptest::approx(112e9));
  // Activations halve except the fp32 FlashAttention log-sum-exp, which is fp32 in both.
  CHECK(m_amp.activations.raw() / m_fp32.activations.raw() == gptest::approx(0.5).epsilon(0.002));
  CHECK(m_amp.activations < m_fp32.activations);
}

TEST_CASE("model states of a 70B model with AdamW are 1.12 TB (textbook T21)") {
  const auto& a = arch("llama-2-70b");
  const auto m = run(a, flat_params(a, 70'000'000'000), plan_with(4096));
  CHECK(states(m) == gptest::approx(1.12e12));
}

TEST_CASE("FSDP over 64 GPUs shards 70B model states to 17.5 GB per GPU, plus the gathered layers (textbook T22)") {
  const auto& a = arch("llama-2-70b");
  auto plan = plan_with(4096);
  plan.par.dp = 64;
  plan.global_batch = 64;
  plan.zero = wl::ZeroStage::parameters;
  const auto m = run(a, flat_params(a, 70'000'000'000), plan);
  // FSDP also materialises the largest layer unsharded: two units of weights (current + prefetched) and one unit
  // of gradients before its reduce-scatter. 70e9 / 80 layers = 875e6 parameters per layer.
  const double layer = 70e9 / 80;
  const double gathered = layer * 2.0 * 2 + layer * 2.0;
  CHECK(states(m) - gathered == gptest::approx(17.5e9));
  CHECK(m.derivation.find("memory.weights")->notes.size() >= 2);
}

TEST_CASE("ZeRO stages shard 12 B, then 14 B, then all 16 B per parameter over dp (Rajbhandari et al. 2020 §5)") {
  const auto& a = arch("llama-2-7b");
  const auto params = flat_params(a, 7'000'000'000);
  auto plan = plan_with(2048);
  plan.par.dp = 64;
  plan.global_batch = 64;
  const double P = 7e9, N = 64;
  plan.zero = wl::ZeroStage::none;
  CHECK(states(run(a, params, plan)) == gptest::approx(16 * P));
  plan.zero = wl::ZeroStage::optimizer;
  CHECK(states(run(a, params, plan)) == gptest::approx((2 + 2 + 12 / N) * P));
  plan.zero = wl::ZeroStage::gradients;
  CHECK(states(run(a, params, plan)) == gptest::approx((2 + 14 / N) * P));
  // Hybrid sharding over 8 GPUs instead of 64.
  plan.zero = wl::ZeroStage::optimizer;
  plan.par.shard_group = 8;
  CHECK(states(run(a, params, plan)) == gptest::approx((2 + 2 + 12.0 / 8) * P));
}

TEST_CASE("the master copy is master_bytes per parameter sharded with the optimizer states: 4, 2 (Apex remainders), 0") {
  // Apex DistributedFusedAdam (NeMo 1.x distributed_fused_adam): store_param_remainders keeps an int16 per parameter
  // beside the bf16 weight; an optimizer whose dtype is the parameters' keeps none. 7·10⁹ parameters, ZeRO-1 over 64.
  const auto& a = arch("llama-2-7b");
  const auto params = flat_params(a, 7'000'000'000);
  auto plan = plan_with(2048);
  plan.par.dp = 64;
  plan.global_batch = 64;
  plan.zero = wl::ZeroStage::optimizer;
  const double P = 7e9, N = 64;
  CHECK(run(a, params, plan).master_weights.raw() == gptest::approx(4 * P / N));
  plan.precision.master_bytes = 2;
  const auto rem = run(a, params, plan);
  CHECK(rem.master_weights.raw() == gptest::approx(2 * P / N));  // 218.75 MB
  CHECK(states(rem) == gptest::approx((2 + 2 + (2 + 8) / N) * P));
  plan.precision.master_bytes = 0;
  CHECK(run(a, params, plan).master_weights.raw() == 0);
}

TEST_CASE("8-bit AdamW keeps 2 bytes plus one fp32 scale per 2048-value block per state and SGD keeps 4 bytes") {
  const auto& a = arch("llama-2-7b");
  const auto params = flat_params(a, 7'000'000'000);
  auto plan = plan_with(2048);
  plan.optimizer = wl::OptimizerKind::adamw_8bit;
  CHECK(run(a, params, plan).optimizer_states.raw() == gptest::approx(7e9 * 2 * (1 + 4.0 / 2048)));
  plan.optimizer = wl::OptimizerKind::sgd;
  CHECK(run(a, params, plan).optimizer_states.raw() == gptest::approx(7e9 * 4));
}

TEST_CASE("tensor parallelism divides the stage's parameters and expert parallelism divides only routed experts") {
  const auto& a = arch("mixtral-8x7b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(4096);
  plan.par.ep = 8;
  plan.par.dp = 8;
  plan.global_batch = 8;
  const auto m = run(a, p, plan);
  const double per_gpu = double(p.total - p.routed_experts) + double(p.routed_experts) / 8;
  CHECK(m.weights.raw() == gptest::approx(per_gpu * 2));
  plan.par.tp = 2;
  CHECK(run(a, p, plan).weights.raw() == gptest::approx(per_gpu * 2 / 2));
}

TEST_CASE("under PP the first stage holds the embedding and the last a copy of a tied embedding for the LM head") {
  const auto& a = arch("qwen3-4b");  // tied embeddings, 36 layers
  REQUIRE(a.tied_embeddings);
  const auto p = model::parameter_counts(a, Explain::off);
  const double norm = double(p.norms) / double(36 * a.norms_per_layer + 1);
  const double layer = double(p.attention_per_layer + p.dense_mlp_per_layer) + double(a.norms_per_layer) * norm;
  auto plan = plan_with(4096);
  plan.par.pp = 2;
  plan.global_batch = 1;  // m = 1: both stages hold one micro-batch, the last adds the logits: it is the heaviest
  const auto m = run(a, p, plan);
  CHECK(m.derivation.result.find("last") != std::string::npos);
  CHECK(m.weights.raw() == gptest::approx(2 * (18 * layer + norm + double(p.embedding))));
}

// ---------------------------------------------------------------------------------------------------- activations

TEST_CASE(
    "a GPT layer stores s·b·h·(34 + 5·a·s/h) bytes and its TP, SP and recompute forms (Korthikanti 2022 Table 2)") {
  const auto& a = arch("gpt3-175b");  // plain 4h MLP, LayerNorm, MHA: GPT-style with dropout
  const double s = 2048, b = 1, h = double(a.hidden), heads = double(a.heads);
  auto plan = plan_with(2048);
  plan.flash_attention = false;
  const double sbh = s * b * h;
  const auto per_layer = [&] { return model::activation_bytes_per_layer(a, plan).raw(); };

  CHECK(per_layer() == gptest::approx(sbh * (34 + 5 * heads * s / h)).epsilon(1e-12));
  const double t = 8;
  plan.par.tp = 8;
  CHECK(per_layer() == gptest::approx(sbh * (10 + 24 / t + 5 * heads * s / (h * t))).epsilon(1e-12));
  plan.par.sequence_parallel = true;
  CHECK(per_layer() == gptest::approx(sbh * (34 / t + 5 * heads * s / (h * t))).epsilon(1e-12));
  plan.recompute = wl::Recompute::selective;  // drops the 5as/h attention core
  CHECK(per_layer() == gptest::approx(sbh * 34 / t).epsilon(1e-12));
  plan.recompute = wl::Recompute::full;  // only the layer input, split by SP
  CHECK(per_layer() == gptest::approx(sbh * 2 / t).epsilon(1e-12));

  // FlashAttention removes the 5as/h term; the kernel keeps one fp32 log-sum-exp per head and token.
  plan = plan_with(2048);
  plan.flash_attention = true;
  CHECK(per_layer() == gptest::approx(sbh * 34 + s * b * heads * 4).epsilon(1e-12));
}

TEST_CASE("a GPT layer whose config says no dropout stores no masks: 34 − 2 (masks) bytes per s·b·h, 3as/h of scores") {
  // MPT-7B as llm-foundry trains it: GPT-shaped (plain MLP, LayerNorm) but attn_pdrop = resid_pdrop = 0 in its config
  // (MPTConfig's defaults). Korthikanti's 34 counts two 1-byte dropout masks per token (after attention, after the
  // MLP) and 5as/h of scores, of which the as/h mask and the 2as/h dropped-out copy are gone.
  const auto& a = arch("llmfoundry-mpt-7b");
  REQUIRE(a.attention_dropout.has_value());
  CHECK_FALSE(a.attention_dropout_on());
  CHECK_FALSE(a.hidden_dropout_on());
  const double s = 2048, b = 1, h = double(a.hidden), heads = double(a.heads);
  auto plan = plan_with(2048);
  plan.flash_attention = false;
  CHECK(model::activation_bytes_per_layer(a, plan).raw() ==
        gptest::approx(s * b * h * (32 + 2 * heads * s / h)).epsilon(1e-12));
  // The same shape with the config silent: the GPT-style assumption (dropout) and Korthikanti's 34 + 5as/h.
  wl::TransformerArch silent = a;
  silent.attention_dropout.reset();
  silent.hidden_dropout.reset();
  CHECK(silent.attention_dropout_on());
  CHECK(model::activation_bytes_per_layer(silent, plan).raw() ==
        gptest::approx(s * b * h * (34 + 5 * heads * s / h)).epsilon(1e-12));
}

TEST_CASE("a Llama layer counts GQA-narrow K and V and the fused SwiGLU's three intermediate widths") {
  const auto& a = arch("llama-3.1-8b");  // h 4096, 32 q heads, 8 KV heads of 128, i 14336, no dropout
  auto plan = plan_with(8192);
  const double s = 8192, h = 4096, kv = 8 * 128, i = 14336, q = 32 * 128;
  // norm in, QKV in, Q, K, V, O in, norm in, MLP in (2 B each) + [gate|up] + product + fp32 LSE per head.
  const double per_token = 2 * (h + h + q + kv + kv + q + h + h) + 2 * (2 * i + i) + 4 * 32;
  CHECK(model::activation_bytes_per_layer(a, plan).raw() == gptest::approx(s * per_token).epsilon(1e-12));
}

TEST_CASE("activations of a 7B layer at seq 2048: term-by-term count vs the 12·b·s·h·2 rule of thumb (textbook T6)") {
  const auto& a = arch("llama-2-7b");  // h 4096, 32 layers, MHA, i 11008
  auto plan = plan_with(2048);
  const double s = 2048, b = 1, h = 4096, L = 32, i = 11008;
  // The textbook's simplified formula, from the textbook: 12·b·s·h·2 bytes per layer → 6.4 GB for 32 layers.
  const double thumb = 12 * b * s * h * 2 * L;
  CHECK(thumb / 1e9 == gptest::approx(6.4).epsilon(0.01));
  // Ours, Korthikanti's terms with FlashAttention and no dropout: 16 h-wide tensors' bytes + fused SwiGLU + LSE.
  const double per_layer = s * b * (2 * 8 * h + 2 * 3 * i + 4 * 32);
  CHECK(model::activation_bytes_per_layer(a, plan).raw() == gptest::approx(per_layer));
  const auto m = run(a, flat_params(a, 7'000'000'000), plan);
  // L layers + the final norm and LM-head inputs on the (only) stage.
  CHECK(m.activations.raw() == gptest::approx(L * per_layer + s * b * 2 * h * 2));
  INFO("T6: rule of thumb " << units::format(units::bytes(thumb)) << ", Korthikanti with flash "
                            << units::format(units::bytes(L * per_layer)));
  // Both appear in the derivation (in GiB, with the textbook's decimal GB beside the totals).
  const auto* act = m.derivation.find("memory.activations");
  REQUIRE(act != nullptr);
  bool shows_thumb = false;
  for (const auto& n : act->notes)
    shows_thumb = shows_thumb || (n.find("rule of thumb 12·s·b·h·2") != std::string::npos &&
                                  n.find("(6.44 GB) for 32 layers") != std::string::npos &&
                                  n.find("(8.63 GB) for 32 layers") != std::string::npos);
  CHECK(shows_thumb);
}

TEST_CASE("MoE layers store the top-k experts' intermediates: one more expert per token adds h + 3·i_e per token") {
  // Megatron-Core: the dispatched input (h) and the fused SwiGLU's fc1 output and product (3·i_e) per routed copy; the
  // routing weights enter inside the activation (TEGroupedMLP's weighted SwiGLU), so no expert output is kept.
  auto a = arch("mixtral-8x7b");
  auto plan = plan_with(4096);
  const double k2 = model::activation_bytes_per_layer(a, plan).raw();
  a.moe->experts_per_token = 1;
  const double k1 = model::activation_bytes_per_layer(a, plan).raw();
  CHECK(k2 - k1 == gptest::approx(4096.0 * (4096 + 3 * 14336) * 2));
}

TEST_CASE("the logits buffers are s·b·V/t values in the activation dtype plus their fp32 upcast") {
  const auto& a = arch("llama-3.1-8b");
  auto plan = plan_with(4096, 2);
  plan.par.tp = 4;
  plan.cross_entropy = wl::CrossEntropyKernel::unfused;  // Megatron-Core's VocabParallelCrossEntropy
  const auto m = run(a, model::parameter_counts(a, Explain::off), plan);
  CHECK(m.logits.raw() == gptest::approx(4096.0 * 2 * 128256 / 4 * (2 + 4)));
  plan.cross_entropy = wl::CrossEntropyKernel::native;  // its fused variant keeps the same fp32 softmax
  CHECK(run(a, model::parameter_counts(a, Explain::off), plan).logits.raw() == gptest::approx(m.logits.raw()));
}

TEST_CASE("TE's cross entropy writes its gradient into the logits: s·b·V/t·a_b, no fp32 copy") {
  // TransformerEngine transformer_engine/pytorch/triton/cross_entropy.py (v2.17 and earlier, e.g. e9a5fa4e):
  // cross_entropy_forward overwrites the logits with the gradient and saves that tensor. 4096 × 2 tokens, V 128256
  // over TP 4, bf16: 8192 · 32064 · 2 B = 525,336,576 B (501 MiB), a third of Megatron's 2 + 4 B per logit.
  const auto& a = arch("llama-3.1-8b");
  auto plan = plan_with(4096, 2);
  plan.par.tp = 4;
  plan.cross_entropy = wl::CrossEntropyKernel::te;
  const auto m = run(a, model::parameter_counts(a, Explain::off), plan);
  CHECK(m.logits.raw() == gptest::approx(525'336'576.0));
}

TEST_CASE("FlashAttention's cross entropy keeps the logits and a new gradient: s·b·V/t·2·a_b, with eager kernels too") {
  // flash_attn.losses.cross_entropy.CrossEntropyLoss (csrc/xentropy, flash-attn 1.0.9 as llm-foundry 061f2c7 pins it):
  // the forward saves the bf16 logits and fp32 row statistics; the backward writes the gradient into a new bf16
  // tensor (inplace_backward False). 4096 × 2 tokens, V 128256 over TP 4: 8192 · 32064 · (2 + 2) B = 1,050,673,152 B.
  const auto& a = arch("llama-3.1-8b");
  auto plan = plan_with(4096, 2);
  plan.par.tp = 4;
  plan.cross_entropy = wl::CrossEntropyKernel::flash;
  const auto fused = run(a, model::parameter_counts(a, Explain::off), plan);
  CHECK(fused.logits.raw() == gptest::approx(1'050'673'152.0));
  plan.kernels = wl::KernelStyle::eager;  // llm-foundry: eager modules, FlashAttention's loss
  const auto eager = run(a, model::parameter_counts(a, Explain::off), plan);
  CHECK(eager.logits.raw() == gptest::approx(1'050'673'152.0));
  // PyTorch's own cross_entropy under eager kernels: 2 + 4 + 4 B per logit, 2.5 times as much.
  plan.cross_entropy = wl::CrossEntropyKernel::te;
  CHECK(run(a, model::parameter_counts(a, Explain::off), plan).logits.raw() == gptest::approx(8192.0 * 32064 * 10));
}

TEST_CASE("the CUDA context is the GPU file's where it records one, else the generic V100 figure") {
  const auto generic = model::default_training_overheads();
  CHECK(generic.cuda_context == units::mebibytes(1343 + 32));  // + the 32 MiB cuBLASLt workspace
  wl::TrainingPlan plan = plan_with(4096);
  plan.par.dp = 8;
  plan.global_batch = 8;
  const auto& a = arch("llama-3.1-8b");
  // Hopper files (compute capability 9.0) record our H200's 718,077,952 B outside the allocator (mem_headroom.json)
  // = 684.8 MiB, as 685, + 32 MiB. The derivation cites the file and calls the figure a measurement.
  for (const char* node : {"dgx-h100", "dgx-h200"}) {
    CAPTURE(node);
    const auto e = model::estimate_training(a, plan, gpuplan::test::node_system(node), Explain::on);
    CHECK(e.memory.cuda_context == units::mebibytes(685 + 32));
    const auto* ctx = e.memory.derivation.find("memory.cuda_context");
    REQUIRE(ctx != nullptr);
    REQUIRE_FALSE(ctx->inputs.empty());
    CHECK(ctx->inputs.front().origin.kind == gpuplan::OriginKind::measurement);
    CHECK(ctx->inputs.front().origin.ref.find("#/memory/context_MiB") != std::string::npos);
    CHECK(ctx->inputs.front().origin.ref.find("mem_headroom.json") != std::string::npos);
  }
  // Ampere and Blackwell files record none: the generic figure, an assumption.
  for (const char* node : {"dgx-a100", "dgx-b200"}) {
    CAPTURE(node);
    const auto e = model::estimate_training(a, plan, gpuplan::test::node_system(node), Explain::on);
    CHECK(e.memory.cuda_context == generic.cuda_context);
    const auto* ctx = e.memory.derivation.find("memory.cuda_context");
    REQUIRE(ctx != nullptr);
    CHECK(ctx->inputs.front().origin.kind == gpuplan::OriginKind::assumption);
  }
}

TEST_CASE("the first 1F1B stage holds L layers' worth, interleaving multiplies by 1 + (p−1)/(p·v), m < p keeps m") {
  const auto& a = arch("llama-2-7b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(2048);
  plan.par.pp = 4;
  plan.global_batch = 8;  // m = 8 ≥ p
  const double layer = model::activation_bytes_per_layer(a, plan).raw();
  const auto m = run(a, p, plan);
  CHECK(m.activations.raw() == gptest::approx(32 * layer));
  CHECK(m.derivation.result.find("first") != std::string::npos);

  plan.global_batch = 2;  // m = 2 < p: only two micro-batches of the stage's 8 layers
  CHECK(run(a, p, plan).activations.raw() == gptest::approx(2 * 8 * layer));

  plan.global_batch = 8;
  plan.schedule = wl::PipelineSchedule::interleaved;
  plan.par.virtual_stages = 2;
  CHECK(run(a, p, plan).activations.raw() == gptest::approx(32 * layer * (1 + 3.0 / (4 * 2))));
}

// ---------------------------------------------------------------------------------------------------- properties

TEST_CASE("per-GPU memory does not rise with tensor parallelism, with or without sequence parallelism") {
  const auto& a = arch("llama-2-7b");
  const auto p = model::parameter_counts(a, Explain::off);
  for (bool sp : {false, true}) {
    double prev = 1e300;
    for (int tp : {1, 2, 4, 8}) {
      auto plan = plan_with(4096);
      plan.par.tp = tp;
      plan.par.sequence_parallel = sp;
      const double total = run(a, p, plan, model::default_training_overheads()).total.raw();
      CAPTURE(tp);
      CHECK(total <= prev);
      prev = total;
    }
  }
}

TEST_CASE("per-GPU memory does not rise with pipeline parallelism when m ≥ p") {
  const auto& a = arch("llama-2-13b");
  const auto p = model::parameter_counts(a, Explain::off);
  double prev = 1e300;
  for (int pp : {1, 2, 4, 8}) {
    auto plan = plan_with(4096);
    plan.par.pp = pp;
    plan.global_batch = 64;
    const double total = run(a, p, plan, model::default_training_overheads()).total.raw();
    CAPTURE(pp);
    CHECK(total <= prev);
    prev = total;
  }
}

TEST_CASE("per-GPU memory does not rise with the ZeRO stage") {
  const auto& a = arch("llama-2-7b");
  const auto p = model::parameter_counts(a, Explain::off);
  double prev = 1e300;
  for (auto z : {wl::ZeroStage::none, wl::ZeroStage::optimizer, wl::ZeroStage::gradients, wl::ZeroStage::parameters}) {
    auto plan = plan_with(4096);
    plan.par.dp = 8;
    plan.global_batch = 8;
    plan.zero = z;
    const double total = run(a, p, plan, model::default_training_overheads()).total.raw();
    CAPTURE(static_cast<int>(z));
    CHECK(total <= prev);
    prev = total;
  }
}

TEST_CASE("per-GPU memory does not rise from no recompute to selective to full, with and without flash attention") {
  const auto& a = arch("llama-2-7b");
  const auto p = model::parameter_counts(a, Explain::off);
  for (bool flash : {false, true}) {
    double prev = 1e300;
    for (auto r : {wl::Recompute::none, wl::Recompute::selective, wl::Recompute::full}) {
      auto plan = plan_with(4096);
      plan.flash_attention = flash;
      plan.recompute = r;
      const double total = run(a, p, plan, model::default_training_overheads()).total.raw();
      CAPTURE(flash);
      CAPTURE(static_cast<int>(r));
      CHECK(total <= prev);
      prev = total;
    }
  }
  // With flash attention there is no attention core to drop: selective changes nothing.
  auto plan = plan_with(4096);
  const double none = run(a, p, plan).activations.raw();
  plan.recompute = wl::Recompute::selective;
  CHECK(run(a, p, plan).activations.raw() == gptest::approx(none));
}

TEST_CASE("context parallelism over 2 GPUs halves activations and logits") {
  const auto& a = arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(16384);
  const auto one = run(a, p, plan);
  plan.par.cp = 2;
  const auto two = run(a, p, plan);
  CHECK(two.activations.raw() == gptest::approx(one.activations.raw() / 2));
  CHECK(two.logits.raw() == gptest::approx(one.logits.raw() / 2));
}

// ---------------------------------------------------------------------------------------------------- report shape

TEST_CASE("the total is the sum of the components, fits compares it with the device capacity") {
  const auto& a = arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(8192);
  plan.par.tp = 2;
  plan.par.dp = 4;
  plan.global_batch = 4;
  const auto o = model::default_training_overheads();
  const auto big = model::training_memory(a, p, plan, gpu_with(141_GB), o);
  CHECK(big.total.raw() == gptest::approx(sum_of_fields(big)));
  CHECK(big.capacity == 141_GB);
  CHECK(big.fits);
  const auto small = model::training_memory(a, p, plan, gpu_with(24_GB), o);
  CHECK_FALSE(small.fits);
  CHECK(small.derivation.result.find("does not fit") != std::string::npos);
  // NCCL: TP and DP communicators.
  CHECK(big.nccl_buffers.raw() == gptest::approx(2 * o.nccl_buffers.raw()));
  CHECK(big.fragmentation.raw() ==
        gptest::approx(o.fragmentation * (big.total - big.fragmentation - big.cuda_context - big.nccl_buffers).raw()));
}

TEST_CASE("the derivation has a root with one child per component and a per-layer breakdown") {
  const auto& a = arch("mixtral-8x7b");
  auto plan = plan_with(4096);
  plan.par.ep = 8;
  plan.par.dp = 8;
  plan.global_batch = 8;
  const auto m = model::training_memory(a, model::parameter_counts(a, Explain::off), plan, gpu_with(80_GB),
                                        model::default_training_overheads());
  CHECK(m.derivation.id == "memory");
  for (const char* id : {"memory.weights", "memory.gradients", "memory.master_weights", "memory.optimizer_states",
                         "memory.activations", "memory.activations.moe_layer", "memory.logits", "memory.cuda_context",
                         "memory.nccl", "memory.fragmentation"}) {
    CAPTURE(id);
    const auto* c = m.derivation.find(id);
    REQUIRE(c != nullptr);
    CHECK_FALSE(c->formula.empty());
    CHECK_FALSE(c->result_text().empty());
  }
  CHECK(m.derivation.find("memory.activations.moe_layer")->inputs.size() > 8);
  CHECK(m.derivation.find("memory.activations.layer") == nullptr);  // Mixtral has no dense FFN layer
  const auto& llama = arch("llama-3.1-8b");
  const auto dense = model::training_memory(llama, model::parameter_counts(llama, Explain::off), plan_with(4096),
                                            gpu_with(80_GB), model::default_training_overheads());
  CHECK(dense.derivation.find("memory.activations.layer") != nullptr);
  const auto off = model::training_memory(a, model::parameter_counts(a, Explain::off), plan, gpu_with(80_GB),
                                          model::default_training_overheads(), Explain::off);
  CHECK(off.derivation.empty());
  CHECK(off.total == m.total);
}

TEST_CASE("default overheads state their values and sources") {
  const auto o = model::default_training_overheads();
  CHECK(o.cuda_context == 1343_MiB + 32_MiB);
  CHECK(o.nccl_buffers == 367_MB);
  CHECK(o.fragmentation == gptest::approx(0.05));
  CHECK(o.origin.find("PR#587") != std::string::npos);
  CHECK(o.origin.find("NCCL_BUFFSIZE") != std::string::npos);
}

TEST_CASE("the fragmentation reserve follows the plan's parameter layout: 5% per tensor, 0.5% contiguous") {
  // Per tensor: the overheads' 5% (vllm-project/compressed-tensors PR#587). Contiguous (Megatron-Core's
  // param_and_grad_buffer): 0.5%, the larger of the 0.14% and 0.48% of the allocated peak an H200 step needed with
  // that layout (data/validation/measured/h200-sxm-141gb/mem_headroom_contiguous.json). Nothing else moves.
  const auto& a = arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(4096);
  const auto o = model::default_training_overheads();
  const auto per_tensor = model::training_memory(a, p, plan, gpu_with(141_GB), o);
  plan.param_layout = wl::ParamLayout::contiguous;
  const auto contiguous = model::training_memory(a, p, plan, gpu_with(141_GB), o);
  const double allocated = per_tensor.total.raw() - per_tensor.fragmentation.raw() - per_tensor.nccl_buffers.raw() -
                           per_tensor.cuda_context.raw();
  CHECK(per_tensor.fragmentation.raw() == gptest::approx(0.05 * allocated));
  CHECK(contiguous.fragmentation.raw() == gptest::approx(0.005 * allocated));
  CHECK(contiguous.total.raw() == gptest::approx(per_tensor.total.raw() - 0.045 * allocated));
  CHECK(contiguous.activations == per_tensor.activations);
  const auto* f = contiguous.derivation.find("memory.fragmentation");
  REQUIRE(f != nullptr);
  REQUIRE_FALSE(f->inputs.empty());
  CHECK(f->inputs[0].value == "0.005");
  CHECK(f->inputs[0].origin.ref.find("mem_headroom_contiguous.json") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------------- reference cases

TEST_CASE("largest model by model states, ZeRO Table II theory columns (dev cases B-zero-t2-*)") {
  // Rajbhandari et al. SC'20 (arXiv:1910.02054) Table II: V100-32GB, Nd = 64, mixed precision + Adam. The paper's
  // "theory" columns are the model-state bound: capacity / bytes per parameter (2+2+12; 2+2+12/Nd; 2+14/Nd; 16/Nd),
  // times the model-parallel degree. Tolerance 2.5%: the table rounds to 2-3 digits ("1T" for 1.024T).
  // The "measured" columns (largest model that ran) also hold activations, buffers and fragmentation of GPT-2-like
  // configurations the case does not give (hidden size, layers, batch), so the model cannot express them; it only
  // checks that every measured size lies below its bound.
  struct Row {
    const char* id;
    int mp;
    double theory[4];    // baseline, P_os, P_os+g, P_os+g+p (billions)
    double measured[2];  // baseline, P_os (billions)
  };
  const Row rows[] = {
      {"B-zero-t2-mp1-64gpu", 1, {2, 7.6, 14.4, 128}, {1.3, 6.2}},
      {"B-zero-t2-mp2-128gpu", 2, {4, 15.2, 28.8, 256}, {2.5, 12.5}},
      {"B-zero-t2-mp4-256gpu", 4, {8, 30.4, 57.6, 500}, {5, 25}},
      {"B-zero-t2-mp8-512gpu", 8, {16, 60.8, 115.2, 1000}, {10, 50}},
      {"B-zero-t2-mp16-1024gpu", 16, {32, 121.6, 230.4, 2000}, {20, 100}},
  };
  const auto& a = arch("megatron-gpt-145.6b");
  const std::int64_t P = 1'000'000'000;
  const double capacity = 32e9;
  const wl::ZeroStage stages[] = {wl::ZeroStage::none, wl::ZeroStage::optimizer, wl::ZeroStage::gradients,
                                  wl::ZeroStage::parameters};
  for (const auto& row : rows) {
    CAPTURE(std::string(row.id));
    for (int k = 0; k < 4; ++k) {
      auto plan = plan_with(1024);
      plan.par.tp = row.mp;
      plan.par.dp = 64;
      plan.global_batch = 64;
      plan.zero = stages[k];
      const auto m = run(a, flat_params(a, P), plan);
      double per_param = states(m) / double(P);
      if (k == 3) {
        // The paper's bound leaves out FSDP's gathered layer buffers (2 layers' weights + 1 layer's gradients).
        per_param -= (2.0 * 2 + 2.0) / double(a.layers) / row.mp;
      }
      const double max_B = capacity / per_param / 1e9;
      CAPTURE(k);
      INFO(row.id << " stage " << k << ": model " << max_B << "B vs paper theory " << row.theory[k] << "B");
      CHECK(std::fabs(rel_err(max_B, row.theory[k])) <= 0.025);
      if (k < 2) CHECK(row.measured[k] < max_B);
    }
  }
}

TEST_CASE("BERT-large fp32 HF Trainer on a 16 GB V100 peaks at 14949 MiB (dev case B-hf-bert-large-v100-memory)") {
  // huggingface/transformers docs "Model training anatomy": bert-large-uncased, seq 512, batch 4, fp32, torch AdamW,
  // eager attention (2022), NVML used after training = context + caching-allocator reserve. Tolerance 10%.
  // Stand-in: a GPT-2-shaped encoder of the same size (24 layers, h 1024, 16 heads, 4h MLP, LayerNorm, dropout,
  // learned positions, tied 30522-token embedding): 334M parameters against BERT-large's 335M. Differences: the
  // stand-in counts V-wide logits (0.5 GB) where the sequence classifier has two logits per sequence; the pooler and
  // token-type embeddings (1M parameters) are missing. Bidirectional attention stores the same s×s scores.
  const auto a = hf(R"({"model_type": "gpt2", "n_embd": 1024, "n_layer": 24, "n_head": 16, "n_inner": 4096,
                        "n_positions": 512, "vocab_size": 30522, "tie_word_embeddings": true})");
  const auto p = model::parameter_counts(a, Explain::off);
  CHECK(double(p.total) == gptest::approx(335e6).epsilon(0.01));
  auto plan = plan_with(512, 4);
  plan.precision.compute = hw::Precision::fp32;
  plan.precision.weight_bytes = 4;
  plan.precision.gradient_bytes = 4;
  plan.precision.master_bytes = 0;
  plan.precision.activation_bytes = 4;
  plan.flash_attention = false;
  const auto gpu = gpu_with(units::mebibytes(16160));  // nvidia-smi in the same document
  const auto m = model::training_memory(a, p, plan, gpu, model::default_training_overheads(), Explain::on,
                                        ActivationLayout::hf_eager);
  const double measured = units::mebibytes(14949).raw();
  INFO("B-hf-bert-large-v100-memory: model " << units::format(m.total, units::BytePrefix::binary) << " vs 14949 MiB, "
                                             << rel_err(m.total.raw(), measured) * 100 << "%");
  CHECK(std::fabs(rel_err(m.total.raw(), measured)) <= 0.10);
  CHECK(m.fits);
  // After loading: CUDA context + fp32 weights = 2631 MiB measured.
  CHECK(std::fabs(rel_err((m.cuda_context + m.weights).raw() - units::mebibytes(32).raw(),
                          units::mebibytes(2631).raw())) <= 0.10);
}

TEST_CASE(
    "hidden-state copies one HF decoder layer keeps, stas00 activation-memory probe (dev cases B-actmem-coef-*)") {
  // stas00/ml-engineering training/performance/README.md (snapshot 744d01e), activation-memory-per-layer.py:
  // torch.cuda.memory_allocated() delta across layer 0's forward, bf16, batch 1, seq 32384, SDPA attention, in
  // units of s·b·h·2 bytes. The probe holds the returned output, which a stacked HF layer does not save (its RMSNorm
  // upcasts the input first): measured = ours / (s·b·h·2) + 1. Tolerance 10%.
  struct Case {
    const char* id;
    wl::TransformerArch arch;
    double measured;
  };
  const std::vector<Case> cases = {
      {"B-actmem-coef-SmolLM2-360M",
       hf(R"({"model_type": "llama", "hidden_size": 960, "intermediate_size": 2560, "num_attention_heads": 15,
              "num_key_value_heads": 5, "num_hidden_layers": 32, "vocab_size": 49152, "tie_word_embeddings": true})"),
       24.0},
      {"B-actmem-coef-Llama-3.1-8B-Instruct", arch("llama-3.1-8b"), 28.0},
      {"B-actmem-coef-Mistral-7B-Instruct-v0.3", arch("mistral-7b-v0.3"), 28.0},
      {"B-actmem-coef-DeepSeek-R1-0528-Qwen3-8B", arch("qwen3-8b"), 29.8},
      {"B-actmem-coef-Qwen3-4B", arch("qwen3-4b"), 38.0},
      {"B-actmem-coef-gemma-1.1-2b-it",
       hf(R"({"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384, "num_attention_heads": 8,
              "num_key_value_heads": 1, "head_dim": 256, "num_hidden_layers": 18, "vocab_size": 256000})"),
       48.0},
  };
  const auto plan = plan_with(32384);
  for (const auto& c : cases) {
    CAPTURE(std::string(c.id));
    const double unit = 32384.0 * double(c.arch.hidden) * 2;
    const double ours = model::activation_bytes_per_layer(c.arch, plan, ActivationLayout::hf_eager).raw() / unit + 1;
    const double megatron = model::activation_bytes_per_layer(c.arch, plan).raw() / unit;
    INFO(c.id << ": hf_eager " << ours << " vs measured " << c.measured << " (" << rel_err(ours, c.measured) * 100
              << "%); megatron layout " << megatron);
    CHECK(std::fabs(rel_err(ours, c.measured)) <= 0.10);
  }
}

TEST_CASE("Llama-3.1-8B at 32k: 7 GiB per layer, 8 GiB of checkpoints, 15.7 GiB fp32 logits (B-llama3-8B-32k-*)") {
  // stas00/ml-engineering worked example (snapshot 744d01e), built on the measured coefficient 28: per layer
  // 28 × 0.25 GiB = 7 GiB; 32 checkpointed layer inputs 8 GiB; fp32 logits 15.7 GiB; totals 31 GiB with gradient
  // checkpointing and 240 GiB without. A derived estimate, not a measurement; tolerance 10%. Our totals count
  // activations + logits buffers (bf16 logits + fp32 upcast) + final norm/LM-head inputs; the working set of the layer
  // being recomputed does not coexist with the logits (the example adds both and omits the bf16 logits).
  const auto& a = arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(32768);
  plan.cross_entropy = wl::CrossEntropyKernel::unfused;  // the example upcasts the logits to fp32, as Megatron does
  const double s = 32768, h = 4096, V = 128256;
  const double copy = s * h * 2;  // 0.25 GiB
  const double per_layer = model::activation_bytes_per_layer(a, plan, ActivationLayout::hf_eager).raw();
  CHECK(std::fabs(rel_err(per_layer + copy, units::gibibytes(7).raw())) <= 0.10);

  const auto none =
      model::training_memory(a, p, plan, gpu_with(80_GB), kNone, Explain::off, ActivationLayout::hf_eager);
  CHECK(none.logits.raw() * 4 / 6 == gptest::approx(s * V * 4));
  CHECK(std::fabs(rel_err(none.logits.raw() * 4 / 6, units::gibibytes(15.7).raw())) <= 0.005);
  const double without = (none.activations + none.logits).raw();
  INFO("without checkpointing: " << units::format(units::bytes(without), units::BytePrefix::binary) << " vs 240 GiB");
  CHECK(std::fabs(rel_err(without, units::gibibytes(240).raw())) <= 0.10);

  plan.recompute = wl::Recompute::full;
  const auto full =
      model::training_memory(a, p, plan, gpu_with(80_GB), kNone, Explain::off, ActivationLayout::hf_eager);
  // 32 checkpointed inputs (8 GiB) + final norm and LM-head inputs; the 6.75 GiB working set hides under the logits.
  CHECK(full.activations.raw() == gptest::approx(32 * copy + 2 * copy));
  CHECK(32 * copy == gptest::approx(units::gibibytes(8).raw()));
  const double with = (full.activations + full.logits).raw();
  INFO("with checkpointing: " << units::format(units::bytes(with), units::BytePrefix::binary) << " vs 31 GiB");
  CHECK(std::fabs(rel_err(with, units::gibibytes(31).raw())) <= 0.10);
}

// Not expressible: B-zero-offload-single-gpu-capacity (13B on one V100 with ZeRO-2 + CPU optimizer offload). The
// plan has no offload knob, so optimizer states and master weights are always on the GPU.

// ------------------------------------------------------------------------------------------ a PyTorch training loop

TEST_CASE("a PyTorch loop's peak is the backward's start: what the allocator timeline of our 1B-like run holds") {
  // data/validation/measured/h200-sxm-141gb/mem_llama1b_s2048_b4.json (torch.cuda.memory history of one step, H200):
  // peak 40.23 GiB at log_softmax's backward = fp32 params + AdamW m, v (16.81 GiB), no parameter gradients
  // (set_to_none), autocast's bf16 copies of every GEMM weight (2.30 GiB), 45.0·h bytes per token and layer, and
  // [T, V] buffers of 2 + 4 + 4 bytes per logit (9.78 GiB). Each term is asserted from its own formula here; the
  // total against the measurement is a validation case (1% tolerance here: the model leaves out RoPE tables and
  // per-token norm statistics).
  const auto& a = arch("bench-llama-1b-like");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(2048, 4);
  plan.kernels = wl::KernelStyle::eager;
  plan.mixed_precision = wl::MixedPrecision::amp;
  plan.precision.weight_bytes = 4;
  plan.precision.gradient_bytes = 4;
  plan.precision.master_bytes = 0;
  plan.attention_kernel = wl::AttentionKernel::fa2;
  const auto m = run(a, p, plan, kNone, ActivationLayout::from_plan);
  const double P = double(p.total), emb = double(p.embedding), T = 8192, V = double(a.vocab), h = double(a.hidden);
  CHECK(m.gradients.raw() == 0);
  CHECK(m.weights.raw() == gptest::approx(4 * P + 2 * (P - emb)));
  CHECK(m.optimizer_states.raw() == gptest::approx(8 * P));
  CHECK(m.logits.raw() == gptest::approx(T * V * (2 + 4 + 4)));
  // 16 layers × (2h norm in + 2h norm out + 2h Q + 0.5h K + 0.5h V + 2h SDPA out + 2h residual + 2h norm out + 16h
  // gate|up + 8h silu + 8h product + fp32 LSE 32 heads) + final norm/LM-head inputs 4h, per token.
  const double per_layer = (2 + 2 + 2 + 0.5 + 0.5 + 2 + 2 + 2 + 16 + 8 + 8) * h + 32 * 4;
  CHECK(m.activations.raw() == gptest::approx(T * (16 * per_layer + 4 * h)));
  const double allocated = (m.weights + m.optimizer_states + m.activations + m.logits).raw();
  CHECK(std::fabs(rel_err(allocated, 43'192'647'168.0)) <= 0.01);  // mem_llama1b_s2048_b4: 40.23 GiB

  // Megatron's loop keeps its gradient buffers and fuses SwiGLU and the cross entropy: the same plan with fused
  // kernels and Megatron's fused cross entropy counts gradients and 6 bytes per logit.
  plan.kernels = wl::KernelStyle::fused;
  plan.cross_entropy = wl::CrossEntropyKernel::native;
  const auto f = run(a, p, plan, kNone, ActivationLayout::from_plan);
  CHECK(f.gradients.raw() == gptest::approx(4 * P));
  CHECK(f.logits.raw() == gptest::approx(T * V * 6));
}

// ------------------------------------------------------------------------------- optimizer-state dtype, FP8 training

TEST_CASE("bf16 optimizer states halve AdamW's m and v and SGD's momentum, the fp32 master weights stay") {
  const auto& a = arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(4096);
  const auto fp32 = run(a, p, plan);
  plan.optimizer_states = wl::StateDtype::bf16;
  const auto bf16 = run(a, p, plan);
  const double P = double(p.total);
  CHECK(fp32.optimizer_states.raw() == gptest::approx(8.0 * P));
  CHECK(bf16.optimizer_states.raw() == gptest::approx(4.0 * P));
  CHECK(bf16.master_weights.raw() == gptest::approx(fp32.master_weights.raw()));
  CHECK(model::optimizer_state_bytes(plan) == 4.0);
  plan.optimizer = wl::OptimizerKind::sgd;
  CHECK(model::optimizer_state_bytes(plan) == 2.0);
  plan.optimizer = wl::OptimizerKind::adamw_8bit;  // its own 8-bit states, whatever the dtype key says
  CHECK(model::optimizer_state_bytes(plan) == gptest::approx(2.0 * (1.0 + 4.0 / 2048.0)));
}

TEST_CASE("FP8 training: TE's cached FP8 weights and their transposes, FP8-saved GEMM inputs, FP8 parameters") {
  // Llama-3.1-8B, one GPU, seq 4096, no recompute, Megatron layout (fused kernels).
  const auto& a = arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(4096);
  const auto bf16 = run(a, p, plan);
  plan.precision.compute = hw::Precision::fp8;
  const auto fp8 = run(a, p, plan);
  // The weight cache: 2 B per GEMM weight of the layers (not the embedding or the LM head).
  // (The norm weights, 0.004% of them, are counted with the layers.)
  const double gemm = double(p.total - p.embedding - p.lm_head);
  CHECK((fp8.weights - bf16.weights).raw() == gptest::approx(2.0 * gemm).epsilon(1e-9));
  // Saved GEMM inputs at 1 B instead of 2: QKV input h, MLP input h and fc2 input i drop by one byte each, and the
  // O projection keeps an FP8 copy beside FlashAttention's bf16 output (+ n_q·d), per token and layer.
  const double per_token_layer = double(a.hidden) + double(a.hidden) + double(a.intermediate) -
                                 double(a.heads * a.head_dim);
  CHECK((bf16.activations - fp8.activations).raw() ==
        gptest::approx(per_token_layer * 4096.0 * double(a.layers)).epsilon(1e-9));
  // FP8 parameters: the layers' weights are 1 B (the embedding and LM head stay bf16) and the cache keeps the
  // transpose only (1 B): 1 + 1 B saved per GEMM weight.
  plan.precision.fp8_params = true;
  plan.precision.weight_bytes = 1.0;
  const auto fp8p = run(a, p, plan);
  CHECK((fp8.weights - fp8p.weights).raw() == gptest::approx(2.0 * gemm).epsilon(1e-9));
  // A PyTorch loop has no Transformer Engine path: no FP8-saved inputs.
  plan.precision.fp8_params = false;
  plan.precision.weight_bytes = 2.0;
  plan.kernels = wl::KernelStyle::eager;
  auto eager_bf16 = plan;
  eager_bf16.precision.compute = hw::Precision::bf16;
  CHECK(run(a, p, plan, kNone, ActivationLayout::from_plan).activations.raw() ==
        gptest::approx(run(a, p, eager_bf16, kNone, ActivationLayout::from_plan).activations.raw()));
}

TEST_CASE("LoRA: a frozen linear layer without an adapter keeps no input for a weight gradient") {
  const auto& a = arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto plan = plan_with(4096);
  const auto full = run(a, p, plan);
  plan.lora.rank = 16;
  plan.lora.targets = wl::LoraTargets::qkv;
  const auto qkv = run(a, p, plan);
  // QKV adapters need the norm output. Not saved: the MLP input (h) and the fc2 input (i), 2 B each per token and
  // layer; the O projection's input is FlashAttention's output, which FlashAttention keeps anyway.
  const double dropped = (double(a.hidden) + double(a.intermediate)) * 2.0;
  CHECK((full.activations - qkv.activations).raw() == gptest::approx(dropped * 4096.0 * double(a.layers)));
  plan.lora.targets = wl::LoraTargets::all;
  CHECK(run(a, p, plan).activations.raw() == gptest::approx(full.activations.raw()));
  plan.lora.targets = wl::LoraTargets::mlp;  // no attention adapter: the QKV input goes too
  CHECK((full.activations - run(a, p, plan).activations).raw() ==
        gptest::approx(double(a.hidden) * 2.0 * 4096.0 * double(a.layers)));
}
