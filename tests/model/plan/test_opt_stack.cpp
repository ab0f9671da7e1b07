// The optimisation stack (model/opt_stack.hpp, issue #27 d3) and the terms it added: the unfused optimizer step
// (foreach and for-loop AdamW priced pass by pass, optimizer_step.cpp) and the text input pipeline with N DataLoader
// workers (vision_data_pipeline's formula, one sequence a sample). Hand-computed from the formulas: the passes' bytes
// per parameter, the multi-tensor launches, the CPU issue bound, the serial in-process loader; each stack row equal to
// estimate_training of the plan built by hand; properties (AMP and flash attention pay on an H100, recompute trades
// time for memory, cumulative speed-up is the product of the steps').
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/model/opt_stack.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

model::TrainingSystem h100() { return test::node_system("dgx-h100"); }

/// GPT-2 small, one GPU, 8 × 1024 tokens a step, AMP bf16 (fp32 parameters, gradients and AdamW states).
wl::TrainingPlan amp_plan() {
  wl::TrainingPlan p;
  p.seq_len = 1024;
  p.micro_batch = 8;
  p.global_batch = 8;
  p.precision.compute = hw::Precision::bf16;
  p.mixed_precision = wl::MixedPrecision::amp;
  p.precision.weight_bytes = 4;
  p.precision.gradient_bytes = 4;
  p.precision.master_bytes = 0;
  p.precision.activation_bytes = 2;
  return p;
}

double optimizer_s(const wl::TrainingPlan& p) {
  const auto e = model::estimate_training(arch("gpt2"), p, h100(), Explain::off);
  REQUIRE(e.feasibility.ok);
  return e.step.optimizer.raw();
}

double step_s(const wl::TrainingPlan& p, const model::TrainingSystem& s) {
  return model::estimate_training(arch("gpt2"), p, s, Explain::off).step_time.raw();
}

double rel(double a, double b) { return std::abs(a / b - 1.0); }

}  // namespace

TEST_CASE("foreach AdamW streams 80 bytes a parameter in 8 passes where the fused step streams 28") {
  // AMP: the fp32 parameter is the master (w = 4), fp32 gradient (g = 4) and moments (s = 4). Fused: read w, g, m, v
  // and write w, m, v = 28 B. Foreach (torch/optim/adam.py _multi_tensor_adam): mul_ 2w, lerp_ 2s+g, mul_ 2s,
  // addcmul_ 2s+g, sqrt 2s, div_ 2s, add_ 2s, addcdiv_ 2w+2s = 4w + 2g + 14s = 80 B.
  // GPT-2 small: 124,439,808 parameters in 148 tensors (12 per layer: c_attn, c_proj, c_fc, mlp c_proj weights and
  // biases, two LayerNorms' weight and bias; wte, wpe, ln_f's two). Each foreach pass launches per group of at most
  // 110/64/48 tensors (1/2/3 tensor lists) and 320 × 65,536 elements: max(⌈148/·⌉, ⌈124.4M / 20.97M⌉ = 6) = 6
  // kernels; 8 passes: 48. All memory-bound: t_fused = 28·P/BW + t_l, t_foreach = 80·P/BW + 48·t_l.
  const double t_l = model::default_efficiency(*h100().gpu).kernel_launch.raw();
  wl::TrainingPlan p = amp_plan();
  const double fused = optimizer_s(p);
  // The fused kernel streams at 0.868 of the streaming rate (training_core.hpp kFusedOptimizerStreamShare: our H100
  // step profiles), the foreach passes at the streaming rate.
  const double P_over_bw = (fused - t_l) * 0.868 / 28.0;  // seconds per byte-per-parameter
  p.optimizer_impl = wl::OptimizerImpl::foreach;
  const double foreach = optimizer_s(p);
  CHECK(rel(foreach, 80.0 * P_over_bw + 48.0 * t_l) < 1e-9);
  // For-loop (_single_tensor_adam): 8 kernels per tensor, 1,184. The CPU issues them at the eager cost (22.2 µs, the
  // serving model's cpu_per_kernel: 26.3 ms) but ahead of the GPU, behind the backward's queued kernels: the step
  // pays the GPU's side, 80·P/BW + 1,184·t_l.
  p.optimizer_impl = wl::OptimizerImpl::for_loop;
  CHECK(rel(optimizer_s(p), 80.0 * P_over_bw + 1184.0 * t_l) < 1e-9);
}

TEST_CASE("foreach SGD with momentum streams 3 passes: 2w + g + 5s") {
  // _multi_tensor_sgd: mul_(buf) 2s, add_(buf, g) 2s + g, add_(p, buf) 2w + s; fused: 2w + g + 2s. fp32 everything
  // (AMP): 32 B against 20 B a parameter; 3 passes of max(⌈148/110 or 64⌉, 6) = 6 launches.
  const double t_l = model::default_efficiency(*h100().gpu).kernel_launch.raw();
  wl::TrainingPlan p = amp_plan();
  p.optimizer = wl::OptimizerKind::sgd;
  const double fused = optimizer_s(p);
  const double P_over_bw = (fused - t_l) * 0.868 / 20.0;  // the fused kernel at 0.868 of the streaming rate
  p.optimizer_impl = wl::OptimizerImpl::foreach;
  CHECK(rel(optimizer_s(p), 32.0 * P_over_bw + 18.0 * t_l) < 1e-9);
}

TEST_CASE("each row of the stack is estimate_training of the plan its steps build") {
  const auto sys = h100();
  wl::TrainingPlan base = amp_plan();
  base.precision.compute = hw::Precision::bf16;  // what the user gave: the stack resets it to fp32
  const std::vector<model::OptStep> steps{{model::OptKind::amp},
                                          {model::OptKind::flash},
                                          {model::OptKind::fused_optimizer},
                                          {model::OptKind::compile}};
  const auto st = model::optimisation_stack(arch("gpt2"), base, sys, {}, steps, Explain::off);
  REQUIRE(st.rows.size() == 5);
  // The baseline by hand: fp32 (no TF32), eager, no flash (FA2 when it comes), foreach AdamW, no overlap.
  wl::TrainingPlan p = base;
  p.precision = {};
  p.precision.compute = hw::Precision::fp32;
  p.precision.weight_bytes = p.precision.gradient_bytes = p.precision.activation_bytes = 4;
  p.precision.master_bytes = 0;
  p.mixed_precision = wl::MixedPrecision::megatron;
  p.kernels = wl::KernelStyle::eager;
  p.flash_attention = false;
  p.attention_kernel = wl::AttentionKernel::fa2;
  p.optimizer_impl = wl::OptimizerImpl::foreach;
  p.overlap_grad_reduce = p.overlap_param_gather = p.overlap_tp_comm = false;
  std::vector<double> expect{step_s(p, sys)};
  p = [p] {
    wl::TrainingPlan q = p;
    q.precision.compute = hw::Precision::bf16;
    q.mixed_precision = wl::MixedPrecision::amp;
    q.precision.activation_bytes = 2;
    return q;
  }();
  expect.push_back(step_s(p, sys));
  p.flash_attention = true;
  expect.push_back(step_s(p, sys));
  p.optimizer_impl = wl::OptimizerImpl::fused;
  expect.push_back(step_s(p, sys));
  // compile: fused elementwise kernels, the one-pass loss, and the LM head's vocabulary padded to a multiple of 8
  // (16 bytes of bf16: Inductor's pad_mm) — 50,257 → 50,264.
  p.kernels = wl::KernelStyle::fused;
  p.cross_entropy = wl::CrossEntropyKernel::te;
  wl::TransformerArch padded = arch("gpt2");
  padded.vocab = 50264;
  expect.push_back(model::estimate_training(padded, p, sys, Explain::off).step_time.raw());
  double product = 1;
  for (std::size_t i = 0; i < expect.size(); ++i) {
    INFO("row " << i << " " << st.rows[i].name);
    CHECK(st.rows[i].feasibility.ok);
    CHECK(rel(st.rows[i].step_time.raw(), expect[i]) < 1e-12);
    CHECK(st.rows[i].loader.raw() == 0.0);  // no per-sample cost given: not priced
    if (i > 0) {
      CHECK(rel(st.rows[i].speedup, expect[i - 1] / expect[i]) < 1e-12);
      product *= st.rows[i].speedup;
    }
    CHECK(rel(st.rows[i].cumulative_speedup, expect[0] / expect[i]) < 1e-12);
  }
  CHECK(rel(product, st.rows.back().cumulative_speedup) < 1e-12);
  REQUIRE(st.notes.size() == 2);  // the loader is not priced; the vocabulary padded
  CHECK(st.notes[1].find("50257 → 50264") != std::string::npos);
  // Physics the stack must show on an H100: bf16 tensor cores against fp32 FMA units (67 vs 989 TFLOP/s dense) make
  // AMP faster, but the eager step's memory-bound kernels only halve their bytes: measured ×2.27 on the H100
  // (optstack_gpt2.json; the GEMMs alone ×8-15 in our H200 probe, optstack_probe.json). Flash attention keeps no
  // 12 × 1024² score matrices per layer, so it saves memory.
  CHECK(st.rows[1].speedup > 2.0);
  CHECK(st.rows[1].speedup < 4.0);
  CHECK(st.rows[2].peak < st.rows[1].peak);
  CHECK(st.rows[3].speedup > 1.0);
  CHECK(st.rows[4].speedup > 1.0);
  // Cost per step: step time × 1 GPU × the H100's indicative price.
  REQUIRE(h100().gpu->price.has_value());
  REQUIRE(st.rows[4].cost_per_step.has_value());
  CHECK(rel(st.rows[4].cost_per_step->raw(), h100().gpu->price->raw() * expect[4]) < 1e-12);
}

TEST_CASE("the input pipeline: no workers adds the loading to the step, N workers hide it behind the GPU") {
  // 8 sequences a step at 5 ms of CPU each: in the training process (num_workers = 0) the step is t_GPU + 40 ms;
  // with 2 workers the host delivers 400 sequences/s, 20 ms a step, hidden behind the GPU's step when that is longer,
  // and with 1 worker 40 ms: the step is max(t_GPU, 40 ms).
  const auto sys = h100();
  model::TextLoader loader;
  loader.sample_cpu = units::Seconds(5e-3);
  const std::vector<model::OptStep> steps{{model::OptKind::amp}, {model::OptKind::workers, 1},
                                          {model::OptKind::workers, 2}};
  const auto st = model::optimisation_stack(arch("gpt2"), amp_plan(), sys, loader, steps, Explain::on);
  REQUIRE(st.rows.size() == 4);
  const double g1 = st.rows[1].gpu_step.raw();
  CHECK(rel(st.rows[1].step_time.raw(), g1 + 0.040) < 1e-12);
  CHECK(rel(st.rows[1].loader.raw(), 0.040) < 1e-12);
  CHECK(rel(st.rows[2].step_time.raw(), std::max(g1, 0.040)) < 1e-12);
  CHECK(rel(st.rows[3].step_time.raw(), std::max(g1, 0.020)) < 1e-12);
  CHECK(st.rows[2].gpu_step.raw() == g1);  // the workers change the host side only
  // The derivation carries the pipeline's node with its serial formula.
  bool found = false;
  for (const auto& c : st.rows[1].derivation.children)
    if (c.formula.find("t_GPU + n / r_core") != std::string::npos) found = true;
  CHECK(found);
}

TEST_CASE("recompute trades step time for activation memory, and CUDA graphs only lower the per-kernel cost") {
  const auto sys = h100();
  const std::vector<model::OptStep> steps{{model::OptKind::amp},
                                          {model::OptKind::recompute, 0, wl::Recompute::full},
                                          {model::OptKind::cuda_graphs}};
  const auto st = model::optimisation_stack(arch("gpt2"), amp_plan(), sys, {}, steps, Explain::off);
  REQUIRE(st.rows.size() == 4);
  CHECK(st.rows[2].peak < st.rows[1].peak);
  CHECK(st.rows[2].speedup < 1.0);
  CHECK(st.rows[3].speedup >= 1.0);
  CHECK(st.rows[3].peak == st.rows[2].peak);
}
