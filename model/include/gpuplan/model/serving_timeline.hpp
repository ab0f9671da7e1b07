#pragma once
// One serving engine iteration as a Gantt chart (issue #27 d2): forward_cost's pass laid out kernel by kernel per
// pipeline stage — each layer's GEMMs, attention, norms and TP collectives, the LM head and sampling on the last
// stage, the stage-to-stage sends, the host issuing kernels in eager mode (and the GPU waiting for it), the engine's
// per-iteration work. Every duration is forward_cost's (forward_trace); nothing is priced here. Pure: no IO.
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/timeline.hpp"

namespace gpuplan::model {

/// One kernel or collective of a forward pass, in issue order (forward_trace; the serving timeline lays them out).
struct PassItem {
  enum class Kind { gemm, attention, elementwise, comm_tp, comm_ep };
  std::string name;
  Kind kind = Kind::elementwise;
  units::Seconds time{};       ///< forward_cost's time for it (per-kernel overhead included)
  std::int64_t kernels = 1;    ///< kernels it launches (the host issues each in eager mode)
  std::string detail;          ///< its terms: time, bytes, bound, FLOPs
  HostCall host_call = HostCall::other;  ///< what the call is, for its eager host cost (eager_host_per_call)
  bool own_call = true;        ///< false: a kernel the call before it launches (a sort's buffers): no host call
  units::Seconds host{};       ///< eager: the host's time to issue it (forward_trace; 0 under CUDA graphs)
};

/// forward_cost's pass item by item: the kernels of each layer kind in issue order (each kind costed once, as
/// forward_cost does), which kind each layer is, the embedding gather before the first layer and the LM head,
/// sampling and logits gather after the last. Nothing here is priced twice: cost is forward_cost of the same pass.
struct ForwardTrace {
  ForwardCost cost;
  std::vector<std::vector<PassItem>> kinds;  ///< per layer kind, in order of first appearance
  std::vector<int> layer_kind;               ///< per layer of the model: index into kinds
  std::vector<PassItem> embedding;           ///< first stage, before its layers
  std::vector<PassItem> head;                ///< last stage, after its layers
  units::Seconds cpu_per_kernel{};           ///< eager: the host's mean issue time per kernel (0 under CUDA graphs)
};
ForwardTrace forward_trace(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ForwardBatch& batch,
                           const ServingSystem& sys);


/// The iteration of `batch` on one replica of `plan`. Lanes: per pipeline stage the GPU (every TP rank runs the
/// same kernels: one lane stands for them) and, without CUDA graphs, the host issuing the stage's kernels, each at
/// its PassItem::host; a kernel starts when the GPU is free and its launch has been issued (the gap before it
/// is `launch_gap`). Stages run in sequence on a token's path (forward_cost's total), each after the previous
/// stage's send. The layout's end equals forward_cost's total when the GPU or the host alone bounds each stage
/// (CUDA graphs: always); when they take turns, the kernel-by-kernel layout ends later than the model's
/// max(GPU, host) and a note gives the difference.
StepTimeline serving_timeline(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ForwardBatch& batch,
                              const ServingSystem& sys);

}  // namespace gpuplan::model
