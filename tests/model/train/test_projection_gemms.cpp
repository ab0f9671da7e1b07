// Q/K/V and gate/up as one GEMM each (Megatron-Core's linear_qkv, linear_fc1) or one GEMM per projection, as PyTorch
// modules holding them as separate nn.Linear layers run them (model/src/graph/linear_gemms.hpp projections_apart,
// priced in train/layer_cost.cpp). Checked on the op list of our 1B-like step (scripts/measure/train_step.py: wq, wk,
// wv, gate, up as separate nn.Linear): hidden 2048, 32 query heads and 8 KV heads of 64, FFN 8192.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>
#include <vector>

#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {
wl::TrainingPlan eager_1b() {
  wl::TrainingPlan p;
  p.micro_batch = 4;
  p.seq_len = 2048;
  p.global_batch = 4;
  p.kernels = wl::KernelStyle::eager;
  p.mixed_precision = wl::MixedPrecision::amp;
  p.precision.weight_bytes = 4;
  p.precision.gradient_bytes = 4;
  p.precision.master_bytes = 0;
  p.attention_kernel = wl::AttentionKernel::fa2;
  return p;
}

const model::OpCost* find_op(const std::vector<model::OpCost>& ops, const std::string& name) {
  for (const auto& o : ops)
    if (o.name == name) return &o;
  return nullptr;
}

int count_ops(const std::vector<model::OpCost>& ops, const std::string& part) {
  int n = 0;
  for (const auto& o : ops) n += o.name.find(part) != std::string::npos ? 1 : 0;
  return n;
}

double gemm_flops(const std::vector<model::OpCost>& ops) {
  double f = 0;
  for (const auto& o : ops)
    if (o.cls == model::OpClass::gemm) f += o.flops.raw();
  return f;
}
}  // namespace

TEST_CASE("eager kernels hold Q, K, V and gate, up apart: one GEMM each, at its own width, the same FLOPs") {
  const auto& a = test::arch("bench-llama-1b-like");
  const auto sys = test::node_system("dgx-h100");
  const auto sep = model::estimate_training(a, eager_1b(), sys, Explain::on);
  // T = 4 x 2048 = 8192 tokens; forward FLOPs 2·T·h·n: Q n = 32 x 64 = 2048, K and V n = 8 x 64 = 512 each, gate and
  // up n = 8192 each.
  const double T = 8192, h = 2048;
  const auto* q = find_op(sep.layer_ops, "Q projection");
  const auto* k = find_op(sep.layer_ops, "K projection");
  const auto* v = find_op(sep.layer_ops, "V projection");
  const auto* gate = find_op(sep.layer_ops, "MLP gate");
  const auto* up = find_op(sep.layer_ops, "MLP up");
  REQUIRE(q != nullptr);
  REQUIRE(k != nullptr);
  REQUIRE(v != nullptr);
  REQUIRE(gate != nullptr);
  REQUIRE(up != nullptr);
  CHECK(q->flops.raw() == gptest::approx(2 * T * h * 2048));
  CHECK(k->flops.raw() == gptest::approx(2 * T * h * 512));
  CHECK(v->flops.raw() == gptest::approx(2 * T * h * 512));
  CHECK(gate->flops.raw() == gptest::approx(2 * T * h * 8192));
  CHECK(up->flops.raw() == gptest::approx(2 * T * h * 8192));
  CHECK(find_op(sep.layer_ops, "QKV projection") == nullptr);
  // Autograd sums the input gradients of the GEMMs that read one input: two adds for Q/K/V, one for gate/up, each
  // reading two T x h bf16 gradients and writing one: 3 x 8192 x 2048 x 2 B = 100,663,296 B.
  CHECK(count_ops(sep.layer_ops, "input-gradient sum") == 3);
  const auto* sum = find_op(sep.layer_ops, "Q projection input-gradient sum");
  REQUIRE(sum != nullptr);
  CHECK(sum->bytes.raw() == gptest::approx(100663296.0));

  // Fused kernels (Megatron-Core's linear_qkv and linear_fc1): one QKV GEMM of n = 2048 + 2 x 512 = 3072, one
  // gate|up of 16384.
  auto fp = eager_1b();
  fp.kernels = wl::KernelStyle::fused;
  const auto fused = model::estimate_training(a, fp, sys, Explain::on);
  const auto* qkv = find_op(fused.layer_ops, "QKV projection");
  const auto* gu = find_op(fused.layer_ops, "MLP up/gate");
  REQUIRE(qkv != nullptr);
  REQUIRE(gu != nullptr);
  CHECK(qkv->flops.raw() == gptest::approx(2 * T * h * 3072));
  CHECK(gu->flops.raw() == gptest::approx(2 * T * h * 16384));
  CHECK(count_ops(fused.layer_ops, "input-gradient sum") == 0);
  // The same GEMM FLOPs either way; the narrower GEMMs take no less time than the fused one they replace.
  CHECK(gemm_flops(sep.layer_ops) == gptest::approx(gemm_flops(fused.layer_ops)));
  CHECK(q->time + k->time + v->time >= qkv->time);
  CHECK(gate->time + up->time >= gu->time);
}

TEST_CASE("eager GPT-style modules keep their one fused QKV module (llm-foundry's MPT Wqkv)") {
  // MPT-1b: hidden 2048, 16 heads, plain GELU MLP, LayerNorm; llm-foundry's attention holds Wqkv as one nn.Linear
  // (and so does our scripts/measure/mpt_fsdp_step.py): one GEMM of n = 3 x 2048, no input-gradient sums.
  const auto& a = test::arch("llmfoundry-mpt-1b");
  auto p = eager_1b();
  p.micro_batch = 6;
  p.global_batch = 6;
  const auto e = model::estimate_training(a, p, test::node_system("dgx-h100"), Explain::on);
  const auto* qkv = find_op(e.layer_ops, "QKV projection");
  REQUIRE(qkv != nullptr);
  CHECK(qkv->flops.raw() == gptest::approx(2.0 * 6 * 2048 * 2048 * 6144));
  CHECK(find_op(e.layer_ops, "Q projection") == nullptr);
  CHECK(count_ops(e.layer_ops, "input-gradient sum") == 0);
}
