#pragma once
// Time-resolved views of one training step: the step timeline (a Gantt chart per pipeline stage and stream, what a
// profiler trace shows) and the memory timeline (the allocator's view: bytes allocated over the step). Both lay out
// the terms the step and memory models already compute (estimate_training's per-stage micro-batch times, the DP
// terms; training_memory's per-stage states and per-layer saved tensors) on the pipeline schedule: nothing here is a
// second formula for a time or a size. Pure: no IO.
#include <cstdint>
#include <string>
#include <vector>

#include "gpuplan/core/units.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/model/vision_data.hpp"

namespace gpuplan::model {

// ---------------------------------------------------------------------------------------------- pipeline schedule

/// One forward or backward pass of one model chunk of one micro-batch on a pipeline stage.
struct PipeOp {
  bool forward = true;
  std::int64_t micro_batch = 0;
  int chunk = 0;  ///< model chunk on this stage, 0 … v − 1
};

/// The order in which pipeline stage `stage` of `pp` runs its passes: 1F1B (v = 1; Narayanan et al. 2021 §2.2.1: the
/// stage warms up with min(pp − stage − 1, m) forwards, then alternates one forward and one backward, then drains)
/// and interleaved 1F1B (v > 1; §2.2.2 and Megatron-Core schedules.py forward_backward_pipelining_with_interleaving:
/// min(2·(pp − stage − 1) + (v − 1)·pp, m·v) warm-up forwards; virtual micro-batch k runs chunk (k mod pp·v) / pp of
/// micro-batch (k / pp·v)·pp + k mod pp, the backward chunks in reverse). Needs m divisible by pp when v > 1.
std::vector<PipeOp> pipeline_order(int pp, int v, std::int64_t m, int stage);

// ---------------------------------------------------------------------------------------------- step timeline

enum class SpanKind {
  forward,         ///< a forward pass of a chunk's layers (compute)
  backward,        ///< a backward pass of a chunk's layers (compute)
  recompute,       ///< the forward work recomputed before a backward
  embedding,       ///< the embedding (first stage)
  head_loss,       ///< the LM head and loss, forward and backward (last stage)
  extra,           ///< MTP modules, AMP weight casts
  comm_exposed,    ///< the exposed part of a chunk's TP/CP/EP/PP communication (the compute stream waits)
  comm_tp,         ///< TP collectives (comm stream), CP, EP, PP in the kinds below
  comm_cp,
  comm_ep,
  comm_pp,
  dp_reduce,       ///< a DP gradient bucket's all-reduce / reduce-scatter
  dp_gather,       ///< a DP parameter all-gather (ZeRO ≥ 1)
  dp_wait,         ///< the compute stream waiting on DP collectives after the backward
  sm_contention,   ///< the SM share collectives running beside compute took from it
  dp_copy,         ///< PyTorch DDP/FSDP copies into and out of the communication buffers
  bubble,          ///< pipeline idle time of a stage
  optimizer,       ///< the optimizer step
  offload,         ///< CPU offload transfers over the host link
  allowance,       ///< the pipeline formula's overstatement against this layout (see StepTimeline::allowance)
  // A serving iteration (serving_timeline.hpp): one forward pass kernel by kernel.
  gemm,            ///< a GEMM kernel of a layer
  attention,       ///< an attention kernel (prefill flash, decode flash-decoding)
  elementwise,     ///< norms, rotary + KV write, activations, quantisation passes
  sampling,        ///< the sampling kernel after the LM head
  host,            ///< the host: kernel issue (eager), the engine's per-iteration work
  launch_gap,      ///< the GPU idle, waiting for the host to issue the next kernel
  // The input pipeline of a training step (training_input.hpp).
  data_load,       ///< the data loader preparing a batch (DataLoader workers, or the training process itself)
  data_wait,       ///< the GPU idle, waiting for the loader's batch
};
const char* to_string(SpanKind k);

struct TimelineLane {
  std::string name;    ///< "stage 0 · compute"
  int stage = 0;
  bool compute = true;  ///< compute stream (false: communication stream, or the host when `host`)
  bool host = false;    ///< a host lane (the data loader), not a GPU stream
};

struct TimelineSpan {
  int lane = 0;
  SpanKind kind = SpanKind::forward;
  units::Seconds start{}, end{};
  int stage = 0;
  std::int64_t micro_batch = -1;  ///< -1: not a micro-batch's pass
  int chunk = 0;
  std::string label;   ///< short ("F3", "B3", "DP RS 2/5")
  std::string detail;  ///< the model terms it lays out (hover text)
  [[nodiscard]] units::Seconds duration() const { return end - start; }
};

struct StepTimeline {
  bool ok = false;
  std::string error;  ///< why no timeline: an infeasible layout, DualPipe (not laid out)
  std::vector<TimelineLane> lanes;
  std::vector<TimelineSpan> spans;
  units::Seconds step_time{};     ///< the model's step time (estimate_training)
  units::Seconds pipeline_end{};  ///< when the first stage's last backward ends in this layout
  units::Seconds end{};           ///< the layout's end: equals step_time (the allowance span closes any gap)
  /// The pipeline formula T = m·max t_i + (Σ t_i − max t_i)/v against the schedule laid out with the same t_i:
  /// equal when the stages are equal or the slowest is last (v = 1); otherwise the formula counts work the
  /// schedule overlaps (its stated overstatement), shown as one `allowance` span so the layout still sums to the step.
  units::Seconds allowance{};
  std::vector<std::string> notes;
  bool serving_iteration = false;  ///< one serving engine iteration (serving_timeline.hpp), not a training step
  /// The input pipeline (training_timeline with a TextLoader): the GPU's step without it, the loader's time for one
  /// step's batch, and the share of the step the GPU is busy (gpu_step / step_time; 1 when not priced).
  bool loader_priced = false;
  units::Seconds gpu_step{};
  units::Seconds loader{};
  double gpu_utilisation = 1.0;
  std::string loader_bound;  ///< the data pipeline's bound ("GPU", "CPU decode", ...)
  /// Total time of the spans of `kind` on compute lanes.
  [[nodiscard]] units::Seconds compute_time(SpanKind kind) const;
};

/// The step of `plan` laid out per pipeline stage on a compute and a communication stream (estimate_training's terms
/// on pipeline_order's schedule): a stage's forward of one chunk = its layers' forward (+ the embedding on chunk 0
/// of stage 0, + the LM head and loss on the last chunk of the last stage) + the exposed share of its TP/CP/EP/PP
/// communication; its backward = recompute + backward + the rest. Each pass starts when its stage is free and its
/// input has arrived (the previous stage's forward, the next stage's backward). After the pipeline: the DP
/// reduction's exposed tail, the SM share lost to overlapped collectives, the PyTorch buffer copies, the optimizer
/// step and the offload transfers, each the model's number.
/// With loader.sample_cpu given, the input pipeline gets its own host lane (training_input_pipeline, `loader_workers`
/// DataLoader workers per GPU, 0: in the training process): the workers prepare the next batch beside the step, and
/// where they take longer than the GPU's step, the GPU waits for the batch at the step's start (a data_wait span on
/// every compute stream, the rest of the step after it); without workers the batch is loaded before the step, the
/// GPU idle meanwhile. The step then ends at the pipeline's step time (max, or the sum without workers).
StepTimeline training_timeline(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                               const TrainingSystem& sys, const TextLoader& loader = {}, int loader_workers = 0);

// ---------------------------------------------------------------------------------------------- memory timeline

/// One point of the allocator timeline: bytes allocated right after `event`.
struct MemorySample {
  units::Seconds time{};
  units::Bytes allocated{};
  units::Bytes activations{};  ///< saved tensors, recompute working set, logits and loss buffers
  units::Bytes gradients{};    ///< gradients (and DDP buckets) alive
  std::string event;
};

struct StageMemoryTimeline {
  int stage = 0;
  units::Bytes states{};  ///< allocated through the whole step: weights, master weights, optimizer states, ...
  std::vector<MemorySample> samples;
  units::Bytes peak{};
  units::Seconds peak_time{};
  std::string peak_event;
  /// What training_memory's peak formula allocates for this stage (its total less the CUDA context, the NCCL buffers
  /// and the fragmentation reserve, which the allocator does not count as allocated).
  units::Bytes model_peak{};
  std::string peak_difference;  ///< why `peak` differs from `model_peak` (empty when equal)
};

struct MemoryTimeline {
  bool ok = false;
  std::string error;
  std::vector<StageMemoryTimeline> stages;
  units::Bytes cuda_context{}, nccl_buffers{};  ///< reserved outside the allocator's count, per GPU
  double fragmentation = 0.0;                   ///< the reserve the peak estimate adds on the allocated peak
  units::Bytes model_total{};                   ///< training_memory's total (heaviest stage)
  std::vector<std::string> notes;
};

/// The allocator's bytes over one step on every pipeline stage, at layer granularity: each forward of a chunk adds its
/// layers' saved tensors one layer at a time (memory_activations' per-layer terms under the plan's recompute mode and
/// modules), the backward recomputes (the working set), frees them in reverse and, in a PyTorch loop, creates each
/// layer's gradients; the last stage holds the LM head's logits and loss buffers from its forward to its backward; the
/// first stage its embedding-dropout masks. States (weights, master weights, optimizer states, persistent gradient
/// buffers) are allocated throughout. Times are the step timeline's (the layers of a pass evenly spaced).
MemoryTimeline training_memory_timeline(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                        const TrainingSystem& sys);

}  // namespace gpuplan::model
