#pragma once
// Training memory per GPU: model states by precision and ZeRO/FSDP stage, activations by recompute mode with TP/SP/CP
// and flash attention (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"),
// pipeline in-flight micro-batches on the heaviest (first) stage, logits/loss buffers, and runtime overheads.
#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

/// Runtime overheads that are not model states: stated parameters with their origin, never hidden constants.
struct RuntimeOverheads {
  units::Bytes cuda_context{};      ///< CUDA context + cuBLAS/cuDNN workspaces
  units::Bytes nccl_buffers{};      ///< NCCL communicator buffers (per communicator the GPU is in)
  double fragmentation = 0.0;       ///< allocator fragmentation as a fraction of the allocated peak
  std::string origin;               ///< where these numbers come from
};
/// Defaults documented in the implementation with their sources.
RuntimeOverheads default_training_overheads();

/// Whose saved-tensor set the activation count follows: autograd keeps different tensors in different stacks.
enum class ActivationLayout {
  from_plan,    ///< the plan's kernel style: megatron for fused kernels, torch_eager for PyTorch eager modules (default)
  megatron,     ///< Megatron-Core + Transformer Engine fused kernels, as counted by Korthikanti et al. 2022
  torch_eager,  ///< plain PyTorch modules under eager autograd (nn.Linear, fused F.rms_norm/LayerNorm, SDPA, F.silu)
  hf_eager,     ///< Hugging Face transformers modules under eager PyTorch autograd (fp32 RMSNorm upcast, repeat_kv, ...)
};

struct TrainingMemory {
  units::Bytes weights{};
  units::Bytes gradients{};
  units::Bytes master_weights{};
  units::Bytes optimizer_states{};
  units::Bytes activations{};       ///< stored for backward on the heaviest pipeline stage
  units::Bytes logits{};            ///< LM-head logits and loss buffers (last stage)
  units::Bytes cuda_context{};
  units::Bytes nccl_buffers{};
  units::Bytes fragmentation{};
  units::Bytes total{};             ///< peak per GPU on the heaviest stage
  units::Bytes capacity{};          ///< what the device exposes
  /// Master weights + optimizer states this GPU keeps in host memory under CPU offload (0 without); not in `total`.
  units::Bytes host_offloaded{};
  int stage = 0;                    ///< the pipeline stage reported (the heaviest; 0 without a pipeline)
  bool fits = false;
  Derivation derivation;
};

/// Bytes of optimizer state per trainable parameter (AdamW m + v, SGD momentum, 8-bit AdamW with its block scales),
/// in the plan's state dtype; the master weights are TrainingPrecision::master_bytes.
double optimizer_state_bytes(const wl::TrainingPlan& plan);

/// Per-GPU training memory of `arch` under `plan` on `gpu`. `params` are the model's counts (parameter_counts).
TrainingMemory training_memory(const wl::TransformerArch& arch, const ParameterCounts& params,
                               const wl::TrainingPlan& plan, const hw::GpuSpec& gpu,
                               const RuntimeOverheads& overheads, Explain explain = Explain::on,
                               ActivationLayout layout = ActivationLayout::from_plan);

/// Activation bytes stored per layer for one micro-batch on one GPU (the Korthikanti term), exposed for tests; the
/// mean over the model's layers where they differ (dense/MoE).
units::Bytes activation_bytes_per_layer(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                        ActivationLayout layout = ActivationLayout::from_plan);

/// What the fit checks' capacity (GpuSpec::memory_capacity) is for this GPU, in words for a derivation: the
/// device-reported figure and the tool it was read with, or the vendor label where no device-reported figure is
/// sourced. nvidia-smi and MLPerf figures count memory the driver reserves (CUDA's total is a few hundred MiB less:
/// 81559 against 81079 MiB on our H100 SXM5), so the words say the check is that much optimistic.
std::string capacity_basis(const hw::GpuSpec& gpu);

}  // namespace gpuplan::model
