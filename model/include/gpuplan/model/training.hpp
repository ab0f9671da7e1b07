#pragma once
// Training step time, throughput, MFU/HFU, memory, communication, time-to-train and cost: composes the operator,
// memory, collective and pipeline formulas. Two phases (DESIGN.md §6): resolve (validate the layout against the
// model and the cluster, map each parallel group onto link tiers) then evaluate.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

/// The hardware a plan runs on. `node` is required for anything beyond one GPU; `cluster` is optional (fabric).
struct TrainingSystem {
  const hw::HardwareDb* db = nullptr;
  const hw::GpuSpec* gpu = nullptr;
  const hw::NodeSpec* node = nullptr;
  const hw::ClusterSpec* cluster = nullptr;
  std::optional<units::UsdPerSecond> price;  ///< overrides the GPU file's indicative price
  std::optional<EfficiencyProfile> efficiency;  ///< overrides the built-in default (calibration)
  std::optional<LinkCalibration> scale_up_calibration;  ///< measured NVLink α and η (calibration)
};

/// Valid input that cannot work: every reason, each with a hint where one exists.
struct Feasibility {
  bool ok = true;
  std::vector<std::string> reasons;
  void fail(std::string r) {
    ok = false;
    reasons.push_back(std::move(r));
  }
};

/// One kind of communication in a step.
struct CommCost {
  std::string kind;         ///< "tp", "cp", "ep", "pp", "dp", "fsdp"
  std::string collective;   ///< "all-reduce", "all-gather + reduce-scatter", ...
  units::Bytes bytes_per_step{};  ///< per GPU, as NCCL counts the buffers
  units::Seconds time{};    ///< total per step if nothing overlapped
  units::Seconds exposed{};  ///< what remains on the critical path
  int group_size = 1;
  std::string tier;         ///< which link tier(s) it crosses
};

struct StepBreakdown {
  units::Seconds gemm{}, attention{}, elementwise{}, embedding_loss{};  ///< compute per step on the critical path
  units::Seconds recompute{};   ///< share of the above spent recomputing activations
  /// The GPU waiting for the host: an MoE dispatcher's host synchronisations (moe_cost.hpp), in the step's compute
  /// path (part of the total, not of the four kinds of compute above).
  units::Seconds moe_host{};
  units::Seconds comm_exposed{};
  units::Seconds bubble{};
  units::Seconds optimizer{};   ///< the optimizer step (on the CPU under offload)
  units::Seconds offload{};     ///< exposed host-link transfers of the CPU offload (gradients down, weights up)
  units::Seconds total{};
};

struct TrainingEstimate {
  Feasibility feasibility;
  StepBreakdown step;
  std::vector<CommCost> comm;
  TrainingMemory memory;
  units::Seconds step_time{};
  double tokens_per_s = 0;
  double mfu = 0;  ///< model FLOPs (6·N·T + attention, no recompute) / (time · GPUs · dense peak)
  double hfu = 0;  ///< the FLOPs the hardware executes, recompute included
  units::Flops model_flops_per_step{};
  units::Flops hardware_flops_per_step{};
  std::int64_t micro_batches = 0;
  double bubble_fraction = 0;
  /// One micro-batch on each pipeline stage (its layers forward + backward + recompute, its exposed TP/CP/EP/PP
  /// communication, its embedding or LM head + loss): t_i of the pipeline formula; `bottleneck_stage` is the slowest.
  std::vector<units::Seconds> stage_time;
  int bottleneck_stage = 0;
  std::optional<units::Seconds> time_to_train;
  std::optional<double> gpu_hours;
  std::optional<units::Usd> cost;
  std::optional<units::Joules> energy;
  std::vector<OpCost> layer_ops;  ///< one dense layer, forward + backward, one micro-batch (for display)
  Derivation derivation;
};

/// The communicator of a parallel group of `size` GPUs whose consecutive members are `stride` ranks apart on the
/// system's node and cluster (resolve_group), with the calibration profile's measured scale-up tier applied: the group
/// estimate_training prices TP (stride 1), CP (stride tp), DP/EP (stride tp·cp) and PP traffic on, and serving its
/// TP, EP, PP and KV-transfer traffic (ServingSystem is TrainingSystem). Size 1 or no node: the empty group.
CommGroup training_comm_group(int size, int stride, const TrainingSystem& sys);

/// Checks the layout (divisibility, sizes, topology) without evaluating it.
Feasibility check_training_layout(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                  const TrainingSystem& sys);

/// Evaluates a plan. If the layout is invalid the estimate holds only the feasibility reasons.
/// (search.hpp's FastTrainingEvaluator gives the same numbers, bit for bit, from cached terms.)
TrainingEstimate estimate_training(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                   const TrainingSystem& sys, Explain explain = Explain::on);

/// Bytes per step that the PyTorch data-parallel wrappers copy on the GPU (kernels eager, DP > 1): DDP copies each
/// gradient into its buckets (read + write); FSDP2 (ZeRO-3) casts shards into its all-gather input, splits the gathered
/// buffers into parameters (forward and backward) and copies the gradients into its reduce-scatter input. 0 for the
/// fused frameworks (Megatron's contiguous buffers are the collectives' inputs and outputs) and for ZeRO-1/2.
double dp_copy_bytes(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan);

/// Wall time to execute `total` FLOPs on `gpus` GPUs of dense peak `peak` at model-FLOPs utilisation `mfu`:
/// t = F / (N · P · MFU) — the back-of-envelope template (F = 6·P·tokens for training).
units::Seconds time_at_mfu(units::Flops total, double gpus, units::FlopRate peak, double mfu);

/// Strong scaling against a baseline run at fixed global batch: the ideal time on `gpus` GPUs is the baseline's
/// time scaled by N0/N (linear speed-up), and the scaling efficiency is t_ideal / t (1 = perfect).
struct StrongScaling {
  units::Seconds ideal{};
  double efficiency = 0;
};
StrongScaling strong_scaling(units::Seconds base_time, long long base_gpus, units::Seconds time, long long gpus);

/// How the plan's decoder layers sit on the pipeline (the one assignment the memory and step models use, Megatron-
/// Core's rules: see wl::PipelineSplit). chunk_layers[k·pp + i]: the k-th chunk of stage i; stage_layers[i]: their
/// sum. Both empty, with `error` saying why, when the plan's split cannot be made on this model.
struct PipelineAssignment {
  std::vector<std::int64_t> chunk_layers, stage_layers;
  std::string error;
};
PipelineAssignment pipeline_assignment(const wl::TransformerArch& arch, const wl::TrainingPlan& plan);

/// Pipeline bubble as a fraction of ideal compute: (p − 1) / (v · m) (Narayanan et al. 2021 §2.2).
double pipeline_bubble_fraction(int pp, int virtual_stages, std::int64_t micro_batches);

}  // namespace gpuplan::model
