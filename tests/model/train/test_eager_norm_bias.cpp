// PyTorch eager LayerNorm and bias-gradient kernels at their measured rates (model/src/ops/norm_loss.cpp
// kEagerLayerNormRate 0.533, model/src/train/layer_cost.cpp kEagerBiasGradRate 0.758: our H100,
// mpt_nongemm_mpt-1b_s2048_b6_resbf16.json, each op alone at the MPT-1b layer's shape). Checked on the op list of an MPT-1b step: the rates are recovered from the
// op times against two ops priced at the streaming rate (the residual add and the GELU), whatever the part's rate.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>
#include <vector>

#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {
model::TrainingSystem h100_node() { return test::node_system("dgx-h100"); }

wl::TrainingPlan mpt_plan(wl::KernelStyle k) {
  wl::TrainingPlan p;
  p.micro_batch = 6;
  p.seq_len = 2048;
  p.global_batch = 6;
  p.kernels = k;
  p.mixed_precision = wl::MixedPrecision::amp;
  p.precision.weight_bytes = 4;
  p.precision.gradient_bytes = 4;
  p.precision.master_bytes = 0;
  p.attention_kernel = wl::AttentionKernel::fa2;
  return p;
}

const model::OpCost* find(const std::vector<model::OpCost>& ops, const std::string& name) {
  for (const auto& o : ops)
    if (o.name == name) return &o;
  return nullptr;
}
}  // namespace

TEST_CASE("eager GPT-2 layout: LayerNorm at 0.533 and each linear's bias gradient at 0.758 of the streaming rate") {
  const auto& a = test::arch("llmfoundry-mpt-1b");
  const auto e = model::estimate_training(a, mpt_plan(wl::KernelStyle::eager), h100_node(), Explain::on);
  const auto* res = find(e.layer_ops, "residual add");
  const auto* gelu = find(e.layer_ops, "GELU");
  REQUIRE(res != nullptr);
  REQUIRE(gelu != nullptr);
  // Two streaming ops give the rate and the per-kernel launch: t = L + bytes / BW.
  const double bw = (gelu->bytes.raw() - res->bytes.raw()) / (gelu->time.raw() - res->time.raw());
  const double launch = res->time.raw() - res->bytes.raw() / bw;
  auto rate = [&](const model::OpCost& o) { return o.bytes.raw() / ((o.time.raw() - launch) * bw); };
  int norms = 0, biases = 0;
  for (const auto& o : e.layer_ops) {
    CAPTURE(o.name);
    if (o.name.find("norm") != std::string::npos) {
      ++norms;
      CHECK(rate(o) == gptest::approx(0.533).epsilon(1e-6));
    }
    if (o.name.find("bias grad") != std::string::npos) {
      ++biases;
      CHECK(rate(o) == gptest::approx(0.758).epsilon(1e-6));
    }
  }
  CHECK(norms == 4);   // two LayerNorms, forward and backward
  CHECK(biases == 4);  // QKV (3d wide), output (d), fc1 (4d), fc2 (d)
  // 12288 tokens × 2048 × 2 B = the bias gradient of a d-wide linear reads 50.3 MB.
  int d_wide = 0;
  for (const auto& o : e.layer_ops)
    if (o.name.find("bias grad") != std::string::npos && o.bytes.raw() == gptest::approx(12288.0 * 2048 * 2)) ++d_wide;
  CHECK(d_wide == 2);
}

TEST_CASE("fused kernels (Megatron, Transformer Engine) keep the norm at the streaming rate and fuse the bias gradient") {
  const auto& a = test::arch("llmfoundry-mpt-1b");
  const auto e = model::estimate_training(a, mpt_plan(wl::KernelStyle::fused), h100_node(), Explain::on);
  for (const auto& o : e.layer_ops) {
    CAPTURE(o.name);
    CHECK(o.name.find("bias grad") == std::string::npos);
  }
  // And a model without biases (Llama layout) has no bias-gradient op when eager either.
  const auto l = model::estimate_training(test::arch("llama-3.1-8b"), mpt_plan(wl::KernelStyle::eager), h100_node(),
                                          Explain::on);
  for (const auto& o : l.layer_ops) CHECK(o.name.find("bias grad") == std::string::npos);
}
