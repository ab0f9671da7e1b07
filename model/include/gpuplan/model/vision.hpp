#pragma once
// Pricing a vision network (wl::VisionGraph) on one GPU: the forward pass of an inference batch and a training step.
// One walk over the op list prices every op with the functions every other pricer uses (ops.hpp): convolutions as
// implicit GEMMs, linear layers as GEMMs, a ViT's attention core as fused attention, the rest as streaming kernels.
//
// - Convolution (groups g, not depthwise): implicit GEMM with M = N·H_out·W_out, N = C_out/g, K = C_in/g·k², g GEMMs
//   in one launch. The compute side is gemm_cost's (tile/wave utilisation, depth law, measured ceiling) at that
//   shape; the memory side is the tensors the kernel really moves — input map, output map, weights — because the
//   im2col matrix (M×K) is never materialised. Backward: the data gradient is the implicit GEMM M = N·H_in·W_in,
//   N = C_in/g, K = C_out/g·k² (none for the first layer: the image needs no gradient) and the weight gradient
//   M = C_out/g, N = C_in/g·k², K = N·H_out·W_out, each priced the same way.
// - Depthwise convolution: k² MACs per output element on the CUDA cores against two maps streamed: a streaming
//   kernel (bandwidth-bound at every size the library has; the fp32 vector peak caps the compute side).
// - Norms, activations, residual adds, squeeze-excitation scales, pooling: streaming kernels, their bytes the maps
//   they read and write (stated per kind in the op table of vision_cost.cpp). At inference `fold_bn` folds batch norm
//   into the convolution's weights and `fuse_epilogue` runs activation and residual add in the GEMM's epilogue
//   (TensorRT-like engines); PyTorch eager and CUDA graphs of it do neither.
// - Autocast (torch.autocast, fp32 weights): each conv/linear weight is cast to the compute type once per forward, a
//   kernel that reads 4 and writes 2 bytes per element; in training the bf16 weight gradient is cast back and
//   accumulated into the fp32 .grad (6 bytes per element).
// - Launch: per-kernel fixed cost on the GPU from the serving launch model (ServingPerfPlan: CUDA-graph replay gap or
//   eager launch, measured by a calibration profile where it has them); eager adds a CPU floor: a pass is never
//   faster than kernels × CPU time per kernel.
// FLOPs are 2 × multiply-accumulates (wl/vision.hpp states the counting convention); training's model FLOPs are 3 ×
// the forward's (forward, data gradient, weight gradient).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/model/vision_data.hpp"
#include "gpuplan/wl/vision.hpp"

namespace gpuplan::model {

struct VisionRunPlan {
  std::int64_t batch = 1;  ///< images per forward (inference) or per GPU per step (training)
  hw::Precision compute = hw::Precision::bf16;  ///< bf16, fp16, fp8 or int8 tensor cores; fp32 = no tensor cores
  /// fp32 weights cast to `compute` every forward (torch.autocast, as torchvision's reference scripts run bf16);
  /// false: weights stored in the compute type (model.half(), an engine's int8 weights).
  bool autocast = true;
  bool cuda_graphs = false;  ///< the pass is replayed from a CUDA graph (no CPU issue cost)
  bool fold_bn = false;      ///< inference: batch norm folded into the preceding convolution's weights and bias
  bool fuse_epilogue = false;  ///< inference: activation and residual add in the preceding GEMM's epilogue
  /// training: a fused conv–batch-norm–ReLU engine (cuDNN's fused-ops API as NVIDIA's MXNet ResNet-50 runs it for
  /// MLPerf): batch-norm statistics in the convolution's epilogue, scale, bias and ReLU in the next convolution's
  /// prologue, block outputs in one scale-bias-add-ReLU kernel, dReLU and dBN in one (model/src/vision/vision_kernels.hpp).
  bool fused_training = false;
  /// eager: the host's issue time is the measured host cost of each module call (model/src/vision/vision_host.cpp); false:
  /// kernels × launch.cpu_per_kernel (the serving launch model; `--cpu-per-kernel-us` sets it)
  bool host_per_op = true;
  /// Per-kernel costs (kernel_overhead_graph / kernel_overhead_eager / cpu_per_kernel) and their origin.
  ServingPerfPlan launch;
};

/// What one pass costs, summed by kind.
struct VisionPassCost {
  units::Seconds gpu_time{};   ///< Σ op times (each with its per-kernel fixed cost)
  units::Seconds cpu_issue{};  ///< eager: the host's issue time (host_ops, or kernels × CPU time per kernel); 0 under CUDA graphs
  units::Seconds host_ops{};   ///< eager: Σ of the measured host cost of each module call (0: no measurement for a kind)
  units::Seconds time{};       ///< max(gpu_time, cpu_issue)
  double kernels = 0;
  units::Flops flops{};        ///< all FLOPs executed (2·MACs of convs, linears, attention; elementwise FLOPs)
  units::Seconds gemm{}, depthwise{}, attention{}, elementwise{}, casts{};
  std::vector<OpCost> ops;     ///< every kernel, in order (only when asked for)
};

/// One forward pass of `plan.batch` images on `d` (d.eff.kernel_launch is replaced by the plan's per-kernel cost).
VisionPassCost vision_forward(const wl::VisionGraph& g, const VisionRunPlan& plan, Device d, bool keep_ops = false);

struct VisionInference {
  units::Seconds latency{};      ///< one batch, one forward
  double images_per_second = 0;  ///< batch / latency
  VisionPassCost pass;
  Derivation derivation;
};
VisionInference vision_inference(const wl::VisionGraph& g, const VisionRunPlan& plan, const Device& d,
                                 Explain explain, bool keep_ops = false);

enum class VisionOptimizer { sgd_momentum, adamw };
const char* to_string(VisionOptimizer o);

struct VisionTrainPlan {
  VisionRunPlan run;  ///< run.batch = images per micro-batch
  std::int64_t accumulation = 1;  ///< micro-batches per step (gradient accumulation): images per step = batch × this
  VisionOptimizer optimizer = VisionOptimizer::sgd_momentum;
  /// Data parallelism (PyTorch DDP): the group the gradients are all-reduced over (size 1: one GPU). DDP reduces the
  /// fp32 gradients in buckets of `bucket_bytes` (bucket_cap_mb, 25 MiB) during the backward, each as soon as its
  /// gradients are ready, after copying them into the bucket (and back after the reduction).
  CommGroup dp;
  units::Bytes bucket_bytes = units::mebibytes(25);
  /// DDP's broadcast_buffers (PyTorch's default, true): before every forward, rank 0's module buffers — batch norm's
  /// running mean and variance (fp32, C each) and num_batches_tracked (one int64) — are broadcast to the other ranks
  /// (DistributedDataParallel._sync_buffers → _broadcast_coalesced: one flattened tensor and one broadcast per dtype,
  /// then one device-to-device copy back per buffer, each issued by the host).
  bool broadcast_buffers = true;
  /// The input pipeline (vision_data.hpp): absent, the images are already on the GPU (synthetic data, as our
  /// measurements and most benchmark tables run) and the step is the GPU's.
  std::optional<DataPipelinePlan> data;
};

struct VisionMemory {
  units::Bytes weights{}, weight_copies{}, gradients{}, optimizer{}, activations{};
  [[nodiscard]] units::Bytes total() const { return weights + weight_copies + gradients + optimizer + activations; }
};

struct VisionTraining {
  units::Seconds step_time{};      ///< the step as the run sees it: the GPU's, or the input pipeline's when it binds
  units::Seconds gpu_step_time{};  ///< the GPU's step alone (forward, backward, optimizer, exposed communication)
  std::optional<DataPipeline> data;  ///< the input pipeline against the GPU step (when the plan has one)
  double images_per_second = 0;  ///< over all data-parallel GPUs
  VisionPassCost forward, backward;
  units::Seconds optimizer{};
  /// DDP: the gradient all-reduce of the whole model (Σ buckets), the part of it not hidden under the backward (the
  /// last bucket, ready only when the backward ends, and what exceeds the backward), the GEMM time lost to the
  /// collectives running beside the backward (EfficiencyProfile::comm_compute_loss), and the bucket copies.
  units::Seconds allreduce{}, exposed_comm{}, comm_slowdown{}, bucket_copies{};
  /// DDP's buffer broadcast before each forward (VisionTrainPlan::broadcast_buffers), per micro-batch: the broadcasts
  /// plus the flatten and copy-back kernels or the host's issue of them, whichever is longer; its bytes and tensors.
  units::Seconds buffer_sync{};
  units::Bytes buffer_bytes{};
  std::int64_t buffer_tensors = 0;
  units::Flops model_flops{};  ///< per GPU: 3 × 2 × MACs × its images per step
  double mfu = 0;              ///< model FLOPs / (step time × dense peak)
  VisionMemory memory;
  Derivation derivation;
};

/// One training step on one GPU (of `plan.dp.size` data-parallel ones): forward, backward (data and weight gradients), the optimizer update (fp32 master
/// weights: SGD with momentum reads weight, gradient and momentum and writes weight and momentum, 20 B per
/// parameter; AdamW 28 B), and the memory it holds (fp32 weights, gradients and optimizer states, the compute-type
/// weight copies of autocast, the activations saved for the backward).
VisionTraining vision_training(const wl::VisionGraph& g, const VisionTrainPlan& plan, const Device& d, Explain explain);

}  // namespace gpuplan::model
