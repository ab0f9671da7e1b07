#pragma once
// The parallel dimensions of a training step as records (issue #20, Deliver 4): what compose_step, estimate_training,
// the --explain tree and the search do alike for every dimension — resolve its communicator, price its one-collective
// term (and cache it in the search), reset, halve (DualPipe), sum the exposed time, report it (TrainingEstimate::comm,
// LayoutScore::comm), explain it (train.comm.<kind>) — is a loop over this table, so that a new dimension adds a
// record here. What stays per dimension is its own arithmetic, in its record too: the stage pricing (price_stage) that
// turns its term into time and exposed time, with the terms only one dimension has (LoRA's TP gathers, parallel
// folding's expert-TP pairs, the EP bytes, the PP scatter/gather); DP's is compose_step.cpp's dp_terms (the buckets).
#include <array>
#include <cstdint>
#include <string>

#include "gpuplan/model/search.hpp"
#include "gpuplan/model/timeline.hpp"
#include "training_core.hpp"

namespace gpuplan::model::detail {

/// What a dimension's stage pricing reads: the step's inputs and the pipeline stage whose micro-batch it prices.
struct StageCommInputs {
  const wl::TransformerArch& a;
  const wl::TrainingPlan& plan;
  const StepTerms& t;
  const hw::GpuSpec& gpu;
  const StageShape& sh;
  int p;                 ///< pipeline stages
  int v;                 ///< model chunks per stage
  std::int64_t m;        ///< micro-batches per step
  double nccl_sm_share;  ///< the SM share of NCCL kernels beside compute (comm_compute_share)
  double rec_share;      ///< the share of the stage's layers fully recomputed
};

/// How many dimensions parallel_dims() has.
inline constexpr std::size_t kDimCount = 5;

struct ParallelDim {
  const char* kind;  ///< "tp": CommCost::kind, the explain node "train.comm.<kind>", the search's column
  /// Its numbers in the composed step, in one stage's micro-batch (nullptr: priced per step, not per stage: DP) and in
  /// the search's score.
  CommNumbers StepCore::*step;
  CommNumbers StageParts::*stage;
  units::Seconds CommExposed::*score;
  /// GPUs of its group as the report gives them (≤ 1: the dimension is not used).
  int (*group_size)(const wl::TrainingPlan&);
  /// Its communicator (dim_group): `comm_size` GPUs `stride` ranks apart in Megatron-Core's rank order; a gradient
  /// group also has DualPipe's mirror copies and the DP CTA cap (grad_comm_group).
  int (*comm_size)(const wl::TrainingPlan&);
  int (*stride)(const wl::TrainingPlan&);
  bool gradient;
  /// Its one-collective term in StepTerms (nullptr: none, DP's terms are DpTimes), when it is priced, its price over
  /// the communicator, and the plan's sizes it depends on (the search's cache key; unused entries 0).
  Seconds StepTerms::*one;
  bool (*priced)(const wl::TransformerArch&, const wl::TrainingPlan&);
  Seconds (*one_time)(const wl::TransformerArch&, const wl::TrainingPlan&, const CommGroup&);
  std::array<std::int64_t, 5> (*term_key)(const wl::TrainingPlan&);
  /// What it runs ("all-gather + reduce-scatter", ...).
  std::string (*collective)(const wl::TransformerArch&, const wl::TrainingPlan&);
  /// How compose_step leaves it exposed under this plan: the formula of its explain node.
  std::string (*exposure_rule)(const wl::TransformerArch&, const wl::TrainingPlan&);
  /// The step timeline (step_timeline.cpp; dimensions priced per stage only): the forward pass's share of a
  /// micro-batch's communication (compose_step's counts), its span kind on the comm stream and the span's text.
  double (*fwd_share)(const wl::TrainingPlan&);
  SpanKind span;
  const char* (*span_text)(const wl::TrainingPlan&, bool forward);
  /// Its communication over the step on one stage (dimensions priced per stage): time, bytes and the exposed part,
  /// into `out` (reset), from the stage's compute in `st` (its fwd, bwd and recompute are set).
  void (*price_stage)(const StageCommInputs& in, const StageTime& st, CommNumbers& out);
};

/// Every dimension, in the order of TrainingEstimate::comm, of CommExposed and of the step's sums (tp, cp, ep, pp, dp;
/// the order of the floating-point sums is part of the bit-identical contract between estimate_training and search).
const std::array<ParallelDim, kDimCount>& parallel_dims();
/// Positions in parallel_dims() (for the terms that are one dimension's own).
enum DimIndex : std::size_t { kTp, kCp, kEp, kPp, kDp };

/// The dimension's communicator resolved onto the system's link tiers.
CommGroup dim_group(const ParallelDim& dim, const wl::TrainingPlan& plan, const TrainingSystem& sys);

/// The SM share the expert-parallel dispatch/combine kernels take from the compute beside them: DeepSeek's kernels
/// hold 20 of the GPU's SMs while they run (arXiv:2412.19437 §3.5.1: "20 out of the 132 SMs available in the H800";
/// DeepEP's Buffer.num_sms default 20); NCCL's channels the house's share.
double ep_kernel_sm_share(const wl::TrainingPlan& plan, const hw::GpuSpec& gpu, double nccl_sm_share);

/// A compute kernel launched beside a data-parallel collective's kernel waits for it: the kernel's CTAs that cannot
/// start on the SMs the call's kernel holds start when that kernel ends or when the kernel's own other CTAs drain.
/// Measured (parallel_dims.cpp): the wait is this fraction of the call's own duration, whatever NCCL's CTA count.
inline constexpr double kKernelWaitPerCall = 0.548;

/// The compute time lost per unit of a DP collective's time hidden beside compute, for calls of `call` each beside
/// kernels of `kernel_in_flight`: per call the larger of the call's SM share over the call (`sm_share`) and the wait
/// for its kernel, kKernelWaitPerCall × the call, at most the kernel in flight (the mirror of the collective's wait
/// for the kernel in flight, EfficiencyProfile::comm_wait_kernels). `sm_share` alone when either time is unknown.
double dp_beside_compute_share(double sm_share, Seconds call, Seconds kernel_in_flight);

/// Σ over the dimensions priced per stage of their exposed time in `s` (tp + cp + ep + pp, in that order).
Seconds stage_comm_exposed(const StageParts& s);

}  // namespace gpuplan::model::detail
