// Eager PyTorch MoE training (issue #21): what our measured MoE training steps run
// (data/validation/measured/h100-sxm5-80gb/moe_train_L4_*.json, scripts/measure/moe_train_step.py) — the AMP
// optimizer's bytes, the DDP copies of only the gradients that are reduced, and the eager dispatcher's row passes.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "gpuplan/model/params.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {

model::TrainingSystem h100_node() { return test::node_system("dgx-h100"); }

using test::measured_moe_plan;  // the measured step's plan (library.hpp)

}  // namespace

TEST_CASE("the gradient copies cover only the gradients reduced: no routed-expert copy when EP = DP") {
  // The bench MoE model: 177,227,776 dense and 2,415,919,104 routed-expert parameters (the measurement's own count,
  // moe_train_L4_s4096_b1_ep4_w4.json: params_dense, params_expert_local × EP).
  const auto& a = test::arch("bench-moe-30b-a3b-shape-l4");
  const auto params = model::parameter_counts(a, Explain::off);
  const double dense = 177227776.0, experts = 2415919104.0;
  REQUIRE(double(params.total) == gptest::approx(dense + experts));
  // The measured script reduces after the backward (overlap_grad_reduce false): one flat buffer, three read + write
  // passes of the fp32 gradients (flatten, divide, copy back).
  // EP 4 on 4 GPUs: the expert-data-parallel group is one GPU; only the dense gradients are copied.
  CHECK(model::dp_copy_bytes(a, params, measured_moe_plan(4, 4)) == gptest::approx(3.0 * 2.0 * 4.0 * dense));
  // EP 2 × expert-DP 2: this GPU's half of the experts is reduced too.
  CHECK(model::dp_copy_bytes(a, params, measured_moe_plan(2, 4)) ==
        gptest::approx(3.0 * 2.0 * 4.0 * (dense + experts / 2.0)));
  // EP 1 × DP 4: everything.
  CHECK(model::dp_copy_bytes(a, params, measured_moe_plan(1, 4)) == gptest::approx(3.0 * 2.0 * 4.0 * (dense + experts)));
  // PyTorch DDP (reduction during the backward, gradient_as_bucket_view): one pass, the in-place divide.
  wl::TrainingPlan ddp = measured_moe_plan(1, 4);
  ddp.overlap_grad_reduce = true;
  CHECK(model::dp_copy_bytes(a, params, ddp) == gptest::approx(2.0 * 4.0 * (dense + experts)));
}

TEST_CASE("the AMP optimizer step reads and writes the fp32 parameters it updates: 28 B per parameter for AdamW") {
  // Fused AdamW over fp32 parameters (no separate master): the parameter read and written (4 + 4), m and v read and
  // written (16), the gradient read (4) = 28 B. Megatron's mixed precision: the fp32 master read and written (8),
  // m and v (16), the fp32 main gradient (4), the bf16 working weight written (2) = 30 B. The same streaming rate
  // prices both, so the times stand as 28 : 30 (the launch constant is microseconds against milliseconds).
  const auto& a = test::arch("bench-moe-30b-a3b-shape-l4");
  const auto sys = h100_node();
  wl::TrainingPlan amp = measured_moe_plan(4, 4);
  wl::TrainingPlan megatron = amp;
  megatron.mixed_precision = wl::MixedPrecision::megatron;
  megatron.precision.weight_bytes = 2;
  megatron.precision.master_bytes = 4;
  const auto ea = model::estimate_training(a, amp, sys, Explain::off);
  const auto em = model::estimate_training(a, megatron, sys, Explain::off);
  REQUIRE(em.step.optimizer.raw() > 0);
  CHECK(ea.step.optimizer.raw() / em.step.optimizer.raw() == gptest::approx(28.0 / 30.0).epsilon(0.01));
}

TEST_CASE("the eager dispatcher moves the routed rows 13 times forward, the fused one 4 times") {
  // P = T·k = 4096 · 8 routed rows of h = 2048 bf16 elements (4 KiB each), whatever the EP (balanced routing).
  // Eager (scripts/measure/moe_layer.py): gather into expert order (2), pad copy + gather + gather back around the
  // grouped GEMMs (6), gather back + scale + sum over top-k (5, the sum writing T rows); fused: 4.
  const auto& a = test::arch("bench-moe-30b-a3b-shape-l4");
  const auto sys = h100_node();
  const double row = 2048.0 * 2.0, P = 4096.0 * 8.0, T = 4096.0;
  auto routing_bytes = [&](const wl::TrainingPlan& p, bool backward) {
    const auto e = model::estimate_training(a, p, sys, Explain::on);
    double b = 0;
    for (const auto& op : e.layer_ops) {
      const std::string& n = op.name;
      const bool bwd = n.size() > 4 && n.compare(n.size() - 4, 4, " bwd") == 0;
      if (bwd == backward && (n.rfind("token permute", 0) == 0 || n.rfind("expert-order regroup", 0) == 0 ||
                              n.rfind("unpermute", 0) == 0))
        b += op.bytes.raw();
    }
    return b;
  };
  wl::TrainingPlan eager = measured_moe_plan(4, 4);
  CHECK(routing_bytes(eager, false) == gptest::approx(13.0 * P * row + T * row));
  CHECK(routing_bytes(eager, true) == gptest::approx(2.0 * (13.0 * P * row + T * row)));
  wl::TrainingPlan fused = eager;
  fused.kernels = wl::KernelStyle::fused;
  CHECK(routing_bytes(fused, false) == gptest::approx(4.0 * P * row));
}
