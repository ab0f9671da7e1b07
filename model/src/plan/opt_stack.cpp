// The optimisation stack (opt_stack.hpp): each step a plan, each plan an estimate_training run.
#include "gpuplan/model/opt_stack.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training_input.hpp"
#include "training_core.hpp"

namespace gpuplan::model {

namespace {
const char* recompute_name(wl::Recompute r) { return wl::to_string(r); }
}  // namespace

std::string to_string(const OptStep& s) {
  switch (s.kind) {
    case OptKind::amp: return "amp";
    case OptKind::fp8: return "fp8";
    case OptKind::flash: return "flash";
    case OptKind::fused_optimizer: return "fused-adam";
    case OptKind::compile: return "compile";
    case OptKind::workers: return fmt::format("workers={}", s.workers);
    case OptKind::overlap: return "overlap";
    case OptKind::recompute: return s.recompute == wl::Recompute::full ? "recompute=full" : "recompute";
    case OptKind::cuda_graphs: return "cuda-graphs";
  }
  return "?";
}

std::string describe(const OptStep& s) {
  switch (s.kind) {
    case OptKind::amp:
      return "torch.autocast bf16: GEMMs and attention in bf16, 16-bit activations, fp32 parameters and gradients "
             "kept (a bf16 copy of each weight per forward)";
    case OptKind::fp8: return "FP8 GEMMs (Transformer Engine), bf16 elsewhere";
    case OptKind::flash: return "fused attention (SDPA flash backend, FlashAttention-2): no score matrix in memory";
    case OptKind::fused_optimizer: return "fused optimizer step: one pass over weights, gradients and states";
    case OptKind::compile:
      return "torch.compile: elementwise chains fused into single kernels (norms, activations, residuals, the loss in "
             "one pass), unaligned matmul dimensions padded";
    case OptKind::workers:
      return fmt::format("{} DataLoader worker process{} per GPU prefetch the batches beside the GPU", s.workers,
                         s.workers == 1 ? "" : "es");
    case OptKind::overlap: return "gradient reduction, parameter gathers and TP collectives overlapped with compute";
    case OptKind::recompute:
      return fmt::format("{} activation recomputation: fewer activations kept, more compute", recompute_name(s.recompute));
    case OptKind::cuda_graphs: return "the step replayed from a CUDA graph: per-kernel cost of a graph replay";
  }
  return "";
}

double optimizer_step_bytes_per_param(const wl::TrainingPlan& plan) {
  return detail::unfused_optimizer(plan) ? detail::unfused_bytes_per_param(plan) : detail::optimizer_bytes_per_param(plan);
}

wl::TrainingPlan stack_baseline(const wl::TrainingPlan& plan, wl::OptimizerImpl optimizer) {
  wl::TrainingPlan p = plan;
  p.precision.compute = hw::Precision::fp32;
  p.precision.weight_bytes = 4;
  p.precision.gradient_bytes = 4;
  p.precision.master_bytes = 0;
  p.precision.activation_bytes = 4;
  p.precision.fp8_params = false;
  p.mixed_precision = wl::MixedPrecision::megatron;  // fp32 parameters are the master: nothing to cast
  p.kernels = wl::KernelStyle::eager;
  p.flash_attention = false;
  p.attention_kernel = wl::AttentionKernel::fa2;
  p.optimizer_impl = optimizer;
  p.overlap_grad_reduce = false;
  p.overlap_param_gather = false;
  p.overlap_tp_comm = false;
  p.recompute = wl::Recompute::none;
  p.recompute_modules = 0;
  return p;
}

void apply_step(const OptStep& step, wl::TrainingPlan& p, TrainingSystem& sys, int& workers) {
  auto autocast = [&p] {
    p.mixed_precision = wl::MixedPrecision::amp;
    p.precision.weight_bytes = 4;
    p.precision.gradient_bytes = 4;
    p.precision.master_bytes = 0;
    p.precision.activation_bytes = 2;
  };
  switch (step.kind) {
    case OptKind::amp:
      p.precision.compute = hw::Precision::bf16;
      autocast();
      break;
    case OptKind::fp8:
      if (p.precision.compute == hw::Precision::fp32 || p.precision.compute == hw::Precision::tf32) autocast();
      p.precision.compute = hw::Precision::fp8;
      break;
    case OptKind::flash: p.flash_attention = true; break;
    case OptKind::fused_optimizer: p.optimizer_impl = wl::OptimizerImpl::fused; break;
    case OptKind::compile:
      // Inductor fuses the elementwise chains and the loss: its cross_entropy forward and backward measured at 11.6 B
      // per logit, the one-pass kernel (loss_bytes_per_logit; loss_kernels.json).
      p.kernels = wl::KernelStyle::fused;
      p.cross_entropy = wl::CrossEntropyKernel::te;
      break;
    case OptKind::workers: workers = step.workers; break;
    case OptKind::overlap:
      p.overlap_grad_reduce = true;
      p.overlap_param_gather = true;
      p.overlap_tp_comm = true;
      break;
    case OptKind::recompute: p.recompute = step.recompute; break;
    case OptKind::cuda_graphs: {
      EfficiencyProfile e = sys.efficiency ? *sys.efficiency : default_efficiency(*sys.gpu);
      e.kernel_launch = e.graph_kernel.raw() > 0 ? e.graph_kernel : ServingPerfPlan{}.kernel_overhead_graph;
      // One cost for every kernel, not serving's per-class in-graph costs (EfficiencyProfile::graph_class): those were
      // measured on decode kernels (issue #27), not on a training step's, and no training measurement checks them.
      sys.efficiency = e;
      break;
    }
  }
}

OptStack optimisation_stack(const wl::TransformerArch& arch, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                            const TextLoader& loader, const std::vector<OptStep>& steps, Explain explain,
                            wl::OptimizerImpl baseline_optimizer) {
  OptStack out;
  wl::TransformerArch a = arch;  // compile pads the vocabulary (below)
  wl::TrainingPlan p = stack_baseline(plan, baseline_optimizer);
  TrainingSystem s = sys;
  int workers = 0;
  const long long gpus = std::max<long long>(1, plan.par.gpus());
  const auto price = sys.price ? sys.price : sys.gpu->price;
  const double tokens_per_step = double(plan.global_batch) * double(plan.seq_len);
  if (!loader.sample_cpu)
    out.notes.push_back("no per-sample CPU cost given: the input pipeline is not priced (the GPU never waits for data)");
  if (!price) out.notes.push_back(fmt::format("{} has no price in the data: no cost column", sys.gpu->info.id));

  auto evaluate = [&](const std::string& name, const std::string& what) {
    StackRow r;
    r.name = name;
    r.what = what;
    const TrainingEstimate est = estimate_training(a, p, s, explain);
    r.feasibility = est.feasibility;
    r.gpu_step = est.step_time;
    r.breakdown = est.step;
    r.peak = est.memory.total;
    r.fits = est.memory.fits;
    r.derivation = est.derivation;
    r.step_time = est.step_time;
    if (loader.sample_cpu && loader.sample_cpu->raw() > 0 && est.step_time.raw() > 0) {
      const DataPipeline pipe = training_input_pipeline(p, s, est.step_time, loader, workers, explain);
      r.loader = pipe.loader;
      r.step_time = pipe.step_time;
      r.loader_bound = pipe.bound;
      if (explain == Explain::on) r.derivation.children.push_back(pipe.derivation);
    }
    if (r.step_time.raw() > 0) {
      r.tokens_per_s = tokens_per_step / r.step_time.raw();
      r.mfu = est.mfu * est.step_time.raw() / r.step_time.raw();
      if (price) {
        r.cost_per_step = units::usd(price->raw() * r.step_time.raw() * double(gpus));
        r.usd_per_million_tokens = r.cost_per_step->raw() / tokens_per_step * 1e6;
      }
    }
    const StackRow* prev = out.rows.empty() ? nullptr : &out.rows.back();
    if (prev != nullptr && r.step_time.raw() > 0) {
      r.speedup = prev->step_time.raw() > 0 ? prev->step_time.raw() / r.step_time.raw() : 0.0;
      r.cumulative_speedup = out.rows.front().step_time.raw() > 0 ? out.rows.front().step_time.raw() / r.step_time.raw() : 0.0;
    }
    out.rows.push_back(std::move(r));
  };

  evaluate("baseline", fmt::format("PyTorch eager in fp32 (no TF32), attention materialised, {} AdamW, the batch loaded "
                                   "in the training process, no overlap, no recompute",
                                   wl::to_string(baseline_optimizer)));
  for (const OptStep& st : steps) {
    apply_step(st, p, s, workers);
    if (st.kind == OptKind::compile) {
      // Inductor's pad_mm pass (torch/_inductor/fx_passes/pad_mm.py, config.shape_padding, on by default) pads a
      // matmul dimension that is not 16-byte aligned to the next aligned size (and slices the result back): an odd
      // vocabulary (GPT-2's 50,257) no longer sends the LM head to the fallback kernel class (efficiency.hpp
      // GemmAlignment). The embedding and the loss keep the model's vocabulary in cost to within the padding.
      const double elem = hw::bytes_per_element(p.precision.compute);
      const std::int64_t step = std::max<std::int64_t>(1, std::int64_t(16.0 / std::max(1.0, elem)));
      const std::int64_t padded = (a.vocab + step - 1) / step * step;
      if (padded != a.vocab)
        out.notes.push_back(fmt::format("compile: the LM head's vocabulary dimension padded {} → {} (Inductor's pad_mm)",
                                        a.vocab, padded));
      a.vocab = padded;
    }
    evaluate(to_string(st), describe(st));
  }
  return out;
}

}  // namespace gpuplan::model
