// FP8 storage that depends on the GPU and on the recipe: the transposed FP8 copies Transformer Engine keeps only where
// the GPU's FP8 GEMMs need the TN layout (model/src/ops/quant_recipe.hpp, fp8_any_layout), and Megatron-Core's
// activation_func_fp8_input_store (the SwiGLU input kept in FP8).
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {

const model::RuntimeOverheads kNone{};

wl::TrainingPlan fp8_plan() {
  wl::TrainingPlan p;
  p.seq_len = 4096;
  p.micro_batch = 1;
  p.global_batch = 1;
  p.precision.compute = hw::Precision::fp8;
  return p;
}

model::TrainingMemory memory_on(const std::string& gpu_id, const wl::TrainingPlan& plan) {
  const auto& a = test::arch("llama-3.1-8b");
  const auto* gpu = test::hardware().find_gpu(gpu_id);
  REQUIRE(gpu != nullptr);
  return model::training_memory(a, model::parameter_counts(a, Explain::off), plan, *gpu, kNone,
                                Explain::on, model::ActivationLayout::megatron);
}

}  // namespace

/// The FP8 weight cache of delayed scaling on `gpu_id`, in bytes per GEMM weight of the layers.
double cache_bytes_per_weight(const std::string& gpu_id) {
  const auto& a = test::arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  auto bf16 = fp8_plan();
  bf16.precision.compute = hw::Precision::bf16;
  return (memory_on(gpu_id, fp8_plan()).weights - memory_on(gpu_id, bf16).weights).raw() /
         double(p.total - p.embedding - p.lm_head);
}

bool has_note(const model::TrainingMemory& m, const char* node, const std::string& text) {
  const auto* d = m.derivation.find(node);
  REQUIRE(d != nullptr);
  for (const auto& n : d->notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

TEST_CASE("FP8 GEMMs take either operand layout from compute capability 10.0 to 11.x and from 13.0, as TE decides") {
  // Transformer Engine's nvte_is_non_tn_fp8_gemm_supported: (cc >= 100 && cc < 120) || cc >= 130, with the GPU files'
  // capabilities (developer.nvidia.com/cuda-gpus). Where it holds, a per-tensor FP8 weight needs no transpose: the
  // delayed-scaling cache is 1 B per GEMM weight instead of 1 + 1.
  CHECK(cache_bytes_per_weight("h100-sxm5-80gb") == gptest::approx(2.0).epsilon(1e-9));  // 9.0: K-major FP8 only
  CHECK(cache_bytes_per_weight("l40s") == gptest::approx(2.0).epsilon(1e-9));            // 8.9
  CHECK(cache_bytes_per_weight("b200-hgx") == gptest::approx(1.0).epsilon(1e-9));        // 10.0
  CHECK(cache_bytes_per_weight("gb300-gpu") == gptest::approx(1.0).epsilon(1e-9));       // 10.3
  CHECK(cache_bytes_per_weight("jetson-agx-thor") == gptest::approx(1.0).epsilon(1e-9)); // 11.0
  CHECK(cache_bytes_per_weight("rtx-5090") == gptest::approx(2.0).epsilon(1e-9));        // 12.0: TN kept
  CHECK(cache_bytes_per_weight("mi300x") == gptest::approx(2.0).epsilon(1e-9));          // no CUDA capability
}

TEST_CASE("the FP8 weight cache: the transpose only where the GPU needs it") {
  const auto& a = test::arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  const double gemm = double(p.total - p.embedding - p.lm_head);  // the layers' GEMM weights (norms included)
  auto plan = fp8_plan();
  auto bf16 = plan;
  bf16.precision.compute = hw::Precision::bf16;
  // Delayed scaling on Hopper: the FP8 copy and its transpose, 1 + 1 B per GEMM weight; on B200 the copy only.
  const double h100 = (memory_on("h100-sxm5-80gb", plan).weights - memory_on("h100-sxm5-80gb", bf16).weights).raw();
  const double b200 = (memory_on("b200-hgx", plan).weights - memory_on("b200-hgx", bf16).weights).raw();
  CHECK(h100 == gptest::approx(2.0 * gemm).epsilon(1e-9));
  CHECK(b200 == gptest::approx(1.0 * gemm).epsilon(1e-9));
  // MXFP8 quantises each axis separately: two copies with their E8M0 scales on either GPU.
  plan.precision.recipe = wl::QuantRecipe::mxfp8;
  const auto mx_b200 = memory_on("b200-hgx", plan);
  CHECK((mx_b200.weights - memory_on("b200-hgx", bf16).weights).raw() ==
        gptest::approx(2.0 * (1.0 + 1.0 / 32.0) * gemm).epsilon(1e-9));
  // FP8 parameters: the parameter is the forward's copy; Hopper adds the transpose (1 B), B200 nothing.
  plan.precision.recipe = wl::QuantRecipe::delayed;
  plan.precision.fp8_params = true;
  plan.precision.weight_bytes = 1.0;
  const double h100_p = memory_on("h100-sxm5-80gb", plan).weights.raw();
  const double b200_p = memory_on("b200-hgx", plan).weights.raw();
  CHECK(h100_p - b200_p == gptest::approx(1.0 * gemm).epsilon(1e-9));
  // The explain note states the bytes per weight the estimate used.
  const auto explained = memory_on("b200-hgx", fp8_plan());
  CHECK(has_note(explained, "memory.weights", "1 B per weight"));
  CHECK(has_note(explained, "memory.weights", "no transpose is kept"));
  CHECK(has_note(memory_on("h100-sxm5-80gb", fp8_plan()), "memory.weights", "2 B per weight"));
}

TEST_CASE("activation_func_fp8_input_store keeps the SwiGLU input at 1 B instead of 2") {
  // Megatron-Core TransformerConfig.activation_func_fp8_input_store (MLPerf's FP8_ACT=1): the fc1 output [gate | up]
  // (2·i per token and layer) saved in FP8.
  const auto& a = test::arch("llama-3.1-8b");
  auto plan = fp8_plan();
  const auto base = memory_on("h100-sxm5-80gb", plan);
  plan.activation_fp8_input_store = true;
  const auto stored = memory_on("h100-sxm5-80gb", plan);
  const double per_token_layer = 2.0 * double(a.intermediate) * (2.0 - 1.0);
  CHECK((base.activations - stored.activations).raw() ==
        gptest::approx(per_token_layer * 4096.0 * double(a.layers)).epsilon(1e-9));
  const auto* act = stored.derivation.find("memory.activations");
  REQUIRE(act != nullptr);
  bool named = false;
  std::vector<const Derivation*> todo{act};
  while (!todo.empty()) {
    const auto* n = todo.back();
    todo.pop_back();
    for (const auto& in : n->inputs) named = named || in.meaning.find("kept in FP8") != std::string::npos;
    for (const auto& c : n->children) todo.push_back(&c);
  }
  CHECK(named);
}

TEST_CASE("activation_func_fp8_input_store is refused where Megatron-Core refuses it: no gated MLP") {
  // TransformerConfig.__post_init__: 'Storing activation input in FP8 is supported only for SwiGLU.'
  auto plan = fp8_plan();
  plan.activation_fp8_input_store = true;
  const auto e = model::estimate_training(test::arch("gpt3-175b"), plan, test::node_system("dgx-h100"));
  bool refused = false;
  for (const auto& r : e.feasibility.reasons) refused = refused || r.find("only for SwiGLU") != std::string::npos;
  CHECK(refused);
}

TEST_CASE("fp8_dot_product_attention keeps Q, K, V and the output at 1 B, the output at 2 B under tensorwise scaling") {
  // Transformer Engine's FusedAttnFunc under FP8 (TransformerEngine pytorch/attention/dot_product_attention/
  // backends.py): with NVTE_FP8_DPA_BWD=1 (its default) it saves q_fp8, k_fp8, v_fp8 and out_fp8 for the backward;
  // under current scaling with NVTE_DPA_FP8CS_O_in_F16=1 (its default) the output stays 16-bit. Llama 3.1 8B: 32 query
  // heads and 8 KV heads of 128, so Q and O are 4096 wide and K, V 1024 each, per token and layer.
  const auto& a = test::arch("llama-3.1-8b");
  auto plan = fp8_plan();
  const auto base = memory_on("h100-sxm5-80gb", plan);
  plan.fp8_dot_product_attention = true;
  const auto dpa = memory_on("h100-sxm5-80gb", plan);
  const double tokens_layers = 4096.0 * double(a.layers);
  CHECK((base.activations - dpa.activations).raw() ==
        gptest::approx((4096.0 + 1024.0 + 1024.0 + 4096.0) * (2.0 - 1.0) * tokens_layers).epsilon(1e-9));
  plan.precision.recipe = wl::QuantRecipe::tensorwise;
  auto tensorwise_base = plan;
  tensorwise_base.fp8_dot_product_attention = false;
  const auto cs = memory_on("h100-sxm5-80gb", plan);
  CHECK((memory_on("h100-sxm5-80gb", tensorwise_base).activations - cs.activations).raw() ==
        gptest::approx((4096.0 + 1024.0 + 1024.0) * (2.0 - 1.0) * tokens_layers).epsilon(1e-9));
}

TEST_CASE("fp8_dot_product_attention adds its casts to the step and is refused outside FP8 fused attention") {
  // The casts around the FP8 kernel: Q, K, V quantised and the output dequantised in the forward, dO quantised and
  // dQ, dK, dV dequantised in the backward, each reading a_b and writing 1 B per element (or the reverse). The kernel
  // keeps the 16-bit rate, so the step grows by those streaming passes only.
  auto plan = fp8_plan();
  plan.par.dp = 8;
  plan.global_batch = 8;
  plan.zero = wl::ZeroStage::optimizer;
  const auto sys = test::node_system("dgx-h100");
  const auto& a = test::arch("llama-3.1-8b");
  const auto base = model::estimate_training(a, plan, sys, Explain::on);
  plan.fp8_dot_product_attention = true;
  const auto dpa = model::estimate_training(a, plan, sys, Explain::on);
  REQUIRE(dpa.feasibility.ok);
  const double extra = (dpa.step_time - base.step_time).raw();
  // Per layer and direction: 4096 tokens × (4096 + 1024 + 1024 + 4096) elements × 3 B at ~3 TB/s ≈ 42 µs, 32 layers
  // forward and backward: a few ms, and no more than the bytes at a tenth of the HBM rate.
  const double bytes = 2.0 * 4096.0 * 10240.0 * 3.0 * double(a.layers);
  CHECK(extra > bytes / 3.35e12);
  CHECK(extra < bytes / 0.335e12);
  plan.precision.compute = hw::Precision::bf16;
  const auto refused = model::estimate_training(a, plan, sys);
  bool named = false;
  for (const auto& r : refused.feasibility.reasons)
    named = named || r.find("fp8_dot_product_attention: ") != std::string::npos;
  CHECK(named);
}
