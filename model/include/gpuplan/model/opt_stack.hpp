#pragma once
// The optimisation stack (issue #27 d3): a training plan taken from a plain PyTorch baseline through a list of
// optimisations applied in order, each step a full estimate_training run of the plan so far (and of its input
// pipeline), with its step time, peak memory, cost and speed-up over the previous step and over the baseline.
//
// Each optimisation sets the model's existing knobs (no per-step constants):
//   amp            torch.autocast bf16: GEMMs and attention in bf16 (precision bf16, mixed_precision amp: fp32
//                  parameters and gradients kept, a bf16 copy of each weight cast per forward, 16-bit activations)
//   fp8            FP8 GEMMs (Transformer Engine): precision fp8 (needs a GPU with FP8 tensor cores)
//   flash          fused attention (SDPA's FlashAttention-2 backend): flash_attention on, attention_kernel fa2
//   fused-adam     the fused optimizer step: optimizer_impl fused (baseline: PyTorch's default foreach)
//   compile        torch.compile (Inductor): the elementwise chains fused (kernels fused; the loss in one pass,
//                  cross_entropy te) and unaligned matmul dimensions padded (the LM head's vocabulary: pad_mm)
//   workers=N      N DataLoader workers per GPU (baseline: 0, the batch loaded in the training process between steps)
//   overlap        gradient reduction, parameter gathers and TP collectives overlapped with compute
//   recompute[=selective|full]  activation recomputation (memory for time)
//   cuda-graphs    the step replayed from a CUDA graph: the per-kernel fixed cost becomes the graph's
// The baseline: fp32 weights, GEMMs and activations (no TF32: PyTorch's default for matmuls), eager kernels,
// attention materialised (no flash), foreach AdamW (or the per-parameter loop when asked), the input loaded in the
// training process, no overlap, no recompute, no CUDA graphs — the plan's model, layout, batch and sequence
// otherwise as given.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/model/vision_data.hpp"

namespace gpuplan::model {

enum class OptKind { amp, fp8, flash, fused_optimizer, compile, workers, overlap, recompute, cuda_graphs };

struct OptStep {
  OptKind kind = OptKind::amp;
  int workers = 0;                                ///< workers: DataLoader workers per GPU (≥ 1)
  wl::Recompute recompute = wl::Recompute::selective;  ///< recompute: the mode
};

/// The stack's names, as the CLI and the GUI spell them ("amp", "fp8", "flash", "fused-adam", "compile",
/// "workers=N", "overlap", "recompute", "recompute=full", "cuda-graphs").
std::string to_string(const OptStep& s);
/// What the step sets, in words (the knobs it changes).
std::string describe(const OptStep& s);

struct StackRow {
  std::string name;   ///< "baseline" or the step's name
  std::string what;   ///< the knobs it set
  Feasibility feasibility;
  units::Seconds gpu_step{};   ///< estimate_training's step
  units::Seconds loader{};     ///< the host's time to deliver one step's samples (0: not priced)
  units::Seconds step_time{};  ///< with the input pipeline (data_pipeline's rule)
  StepBreakdown breakdown;
  units::Bytes peak{};         ///< per GPU
  bool fits = true;            ///< peak within the GPU's memory
  double tokens_per_s = 0;
  double mfu = 0;
  std::optional<units::Usd> cost_per_step;        ///< step time × GPUs × $/GPU-s (no price: none)
  std::optional<double> usd_per_million_tokens;
  double speedup = 1;             ///< previous row's step time / this one's
  double cumulative_speedup = 1;  ///< the baseline's / this one's
  std::string loader_bound;       ///< data_pipeline's bound ("GPU", "CPU decode ..."), empty when not priced
  Derivation derivation;          ///< the training estimate's, with the input pipeline's beside it
};

struct OptStack {
  std::vector<StackRow> rows;  ///< the baseline, then one row per step
  std::vector<std::string> notes;
};

/// HBM bytes one optimizer step moves per parameter for the plan's optimizer, precision and implementation: the
/// fused step's single pass, or the sum of PyTorch's foreach / for-loop passes (AdamW in AMP: 28 against 80 B).
double optimizer_step_bytes_per_param(const wl::TrainingPlan& plan);

/// The baseline of the stack for `plan` (see the header comment): the knobs the steps own, reset; its optimizer step
/// runs as `optimizer` (PyTorch's default foreach, or the per-parameter loop of foreach=False).
wl::TrainingPlan stack_baseline(const wl::TrainingPlan& plan,
                                wl::OptimizerImpl optimizer = wl::OptimizerImpl::foreach);

/// Applies one step's knobs to `plan` and `sys` (cuda-graphs changes the system's per-kernel cost; `workers` the
/// loader's workers).
void apply_step(const OptStep& step, wl::TrainingPlan& plan, TrainingSystem& sys, int& workers);

/// The stack: the baseline of `plan`, then each of `steps` applied on top of the previous, each evaluated by
/// estimate_training and the input pipeline (vision_data_pipeline's formula with one sequence a sample).
/// Preconditions: `sys` resolved as for estimate_training; a workers step has workers ≥ 1.
OptStack optimisation_stack(const wl::TransformerArch& arch, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                            const TextLoader& loader, const std::vector<OptStep>& steps, Explain explain,
                            wl::OptimizerImpl baseline_optimizer = wl::OptimizerImpl::foreach);

}  // namespace gpuplan::model
