// One MoE layer priced by one function for training and serving (model/src/ops/moe_layer.hpp, issue #21): the
// same routed-expert work for the same EP × ETP group whichever front end asks, the explain node both show (router,
// dispatch, expert GEMMs, combine, shared experts, imbalance, with values), and the hot-expert skew in serving.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <string>

#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {

model::TrainingSystem dgx_h100() { return test::node_system("dgx-h100"); }

/// Our measured MoE training step's layout (test::measured_moe_plan: TP 1, EP `ep` over `ep` GPUs, 4096 tokens a GPU,
/// FlashAttention 2) with TrainingPlan's own precision and kernels instead of the measured run's (AMP, eager, gradients
/// reduced after the backward), stated here.
wl::TrainingPlan train_plan(int ep) {
  wl::TrainingPlan p = test::measured_moe_plan(ep, ep);
  const wl::TrainingPlan defaults;
  p.kernels = defaults.kernels;
  p.mixed_precision = defaults.mixed_precision;
  p.precision = defaults.precision;
  p.overlap_grad_reduce = defaults.overlap_grad_reduce;
  return p;
}

model::ServingPerfPlan serve_plan(int tp, int ep) {
  model::ServingPerfPlan p;
  p.tp = tp;
  p.ep = ep;
  return p;
}

const model::OpCost* find_op(const std::vector<model::OpCost>& ops, const std::string& name) {
  for (const auto& o : ops)
    if (o.name == name) return &o;
  return nullptr;
}

const DerivationInput* input(const Derivation& d, const std::string& symbol) {
  for (const auto& i : d.inputs)
    if (i.symbol == symbol) return &i;
  return nullptr;
}

void check_terms(const Derivation* node) {
  REQUIRE(node != nullptr);
  for (const char* sym : {"t_router", "t_dispatch", "t_expert GEMMs", "t_combine", "t_shared", "ι", "t_imbalance"}) {
    CAPTURE(sym);
    const DerivationInput* in = input(*node, sym);
    REQUIRE(in != nullptr);
    CHECK(!in->value.empty());
  }
}

}  // namespace

TEST_CASE("the same MoE layer gets the same grouped expert GEMM in training and serving (one EP x ETP group)") {
  // Training at EP 4, TP 1: each GPU routes its own 4096 tokens, the EP group 4 × 4096 = 16384, so 16384·8/128 =
  // 1024 rows for each of the 32 local experts. Serving at attention TP 4 with EP 4 inside it (expert TP 1) routes
  // the 16384 prompt tokens every TP rank holds over the same group: the same 32 × 1024 × 2048 → 1536 GEMM.
  const auto& a = test::arch("bench-moe-30b-a3b-shape-l4");
  const auto sys = dgx_h100();
  const auto est = model::estimate_training(a, train_plan(4), sys, Explain::off);
  const model::OpCost* train_up = find_op(est.layer_ops, "expert up/gate");
  REQUIRE(train_up != nullptr);
  const model::ForwardBatch prefill{0, 1, 0, 1, 16384, 0, false};
  const auto fc = model::forward_cost(a, serve_plan(4, 4), prefill, sys, Explain::on);
  const model::OpCost* serve_up = find_op(fc.ops, "expert up/gate");
  REQUIRE(serve_up != nullptr);
  const double want = 2.0 * 32 * 1024 * 2048 * 1536;  // 2·groups·rows·h·(2·i_e)
  CHECK(std::abs(train_up->flops.raw() / want - 1.0) < 1e-12);
  CHECK(std::abs(serve_up->flops.raw() / want - 1.0) < 1e-12);
  // The same law prices it: the two devices differ only in their per-kernel gap, so the times agree within it.
  CHECK(std::abs(train_up->time.raw() - serve_up->time.raw()) < 20e-6);
}

TEST_CASE("serve --explain and train --explain show the MoE layer's dispatch, expert GEMM, combine and imbalance") {
  const auto& a = test::arch("bench-moe-30b-a3b-shape-l4");
  const auto sys = dgx_h100();
  const auto est = model::estimate_training(a, train_plan(4), sys, Explain::on);
  check_terms(est.derivation.find("train.moe"));
  const model::ForwardBatch decode{64, 1, 2048, 0, 0, 0, true};
  const auto fc = model::forward_cost(a, serve_plan(4, 4), decode, sys, Explain::on);
  const Derivation* node = fc.derivation.find("serving.moe");
  check_terms(node);
  CHECK(node->title.find("decode") != std::string::npos);
  // Uniform routing is the default and says so.
  CHECK(input(*node, "ι")->value == "1");
  CHECK(input(*node, "ι")->origin.kind == OriginKind::assumption);
}

TEST_CASE("a hot-expert skew slows the MoE layer in serving and training, and the imbalance term shows by how much") {
  const auto& a = test::arch("bench-moe-30b-a3b-shape-l4");
  const auto sys = dgx_h100();
  // Serving, fused kernels (variable-size dispatch): the busiest EP rank's expert rows and all-to-alls × ι.
  auto even = serve_plan(4, 4);
  even.kernels = wl::KernelStyle::fused;
  auto hot = even;
  hot.moe_imbalance = 2.0;
  const model::ForwardBatch prefill{0, 1, 0, 1, 8192, 0, false};
  const auto t_even = model::forward_cost(a, even, prefill, sys, Explain::off).total;
  const auto fc_hot = model::forward_cost(a, hot, prefill, sys, Explain::on);
  CHECK(fc_hot.total > t_even);
  const Derivation* node = fc_hot.derivation.find("serving.moe");
  REQUIRE(node != nullptr);
  CHECK(input(*node, "ι")->value == "2");
  CHECK(input(*node, "ι")->origin.kind == OriginKind::user);
  CHECK(input(*node, "t_imbalance")->value != "0 s");
  // Training: the same parameter, the same function.
  auto plan = train_plan(4);
  const auto step_even = model::estimate_training(a, plan, sys, Explain::off).step.total;
  plan.moe_imbalance = 1.5;
  const auto est_hot = model::estimate_training(a, plan, sys, Explain::on);
  CHECK(est_hot.step.total > step_even);
  const Derivation* tnode = est_hot.derivation.find("train.moe");
  REQUIRE(tnode != nullptr);
  CHECK(input(*tnode, "t_imbalance")->value != "0 s");
}

TEST_CASE("the shared experts' activation is a kernel in training and in serving, in every framework") {
  // Llama 4 Scout: one shared SwiGLU expert of width 8192 beside the routed ones. Its activation reads [gate | up]
  // and writes its output: 3 · 2 B per output element in bf16, fused (vLLM's SiluAndMul, TE's bias_swiglu).
  const auto& a = test::arch("llama-4-scout-17b-16e");
  const auto sys = dgx_h100();
  const model::ForwardBatch prefill{0, 1, 0, 1, 4096, 0, false};
  const auto fc = model::forward_cost(a, serve_plan(1, 1), prefill, sys, Explain::on);
  const model::OpCost* serve_act = find_op(fc.ops, "shared expert SwiGLU");
  REQUIRE(serve_act != nullptr);
  CHECK(serve_act->bytes.raw() == gptest::approx(4096.0 * 8192.0 * 2.0 * 3.0).epsilon(1e-12));
  CHECK(serve_act->time.raw() > 0.0);
  const model::OpCost* dense_like = find_op(fc.ops, "SwiGLU");
  CHECK(dense_like == nullptr);  // every Scout layer is MoE: no dense MLP activation

  const auto est = model::estimate_training(a, train_plan(1), sys, Explain::off);
  const model::OpCost* train_act = find_op(est.layer_ops, "shared expert SwiGLU");
  REQUIRE(train_act != nullptr);
  // The forward reads [gate | up] and writes the output (3 · 2 B per element) for the GPU's 4096 tokens.
  CHECK(train_act->bytes.raw() == gptest::approx(4096.0 * 8192.0 * 2.0 * 3.0).epsilon(1e-12));
}
