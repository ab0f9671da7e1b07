#pragma once
// Kernel tables of the vision pricer (model/src/vision/vision_cost.cpp): the reads and writes of each elementwise kind, and
// the measured bandwidth fractions of eager PyTorch's memory-bound kernels; and the fused training engine's roles
// (model/src/vision/vision_fused.cpp). Internal to gpuplan_model.
#include <optional>
#include <vector>

#include "gpuplan/wl/vision.hpp"

namespace gpuplan::model::detail {

using wl::VisionOp;
using wl::VisionOpKind;

/// nn.MultiheadAttention's layout copies in training (see price_attention, vision_pass.cpp): ViT-B/16 b 256
/// forward, 9.29 GB of copies as this pricer counts them in 8.11 ms of `direct_copy` kernels (24 + 25 calls), 0.397.
constexpr double kLayoutCopyFraction = 0.397;

/// Reads and writes of an elementwise kind, in maps of the op's output size (pooling: of its input or output as
/// stated), forward / backward, PyTorch's kernels:
/// - norm at inference: read x, write y; in training the statistics pass reads x once more (2 reads); backward reads
///   x and dy for the two reductions and again to form dx (4 reads), writes dx.
/// - activation: read, write; backward: read dy and the saved tensor, write dx.
/// - add: read both inputs, write; backward: the skip branch's gradient is added where the branches fork (2 r, 1 w).
/// - mul (SE / layer scale): read the map, write it (the per-channel vector is small); backward: dx = dy·s and the
///   per-channel sum of dy·x (3 reads, 2 writes).
/// - max / average pool with a window: read the input, write the output; backward: read dy, write dx. Global average
///   pool: read the input; backward: write dx.
/// - embedding (ViT): concatenate the class token (read, write) and add the positions (2 reads, 1 write); backward:
///   read, write.
/// - resize (imported graphs): read the input, write the output; backward: read dy, write dx. Copy (concat,
///   transpose, slice, pad, expand): read and write each output element, forward and backward.
struct Passes {
  double reads = 0, writes = 0;  ///< of the output map
  double reads_in = 0, writes_in = 0;  ///< of the input map (pooling)
};
inline Passes passes(const VisionOp& op, bool training, bool backward) {
  switch (op.kind) {
    case VisionOpKind::norm: return backward ? Passes{4, 1} : training ? Passes{2, 1} : Passes{1, 1};
    case VisionOpKind::activation: return backward ? Passes{2, 1} : Passes{1, 1};
    case VisionOpKind::add: return backward ? Passes{2, 1} : Passes{2, 1};
    case VisionOpKind::mul: return backward ? Passes{3, 2} : Passes{1, 1};
    case VisionOpKind::pool:
      if (op.pool == wl::VisionPool::global_avg) return backward ? Passes{0, 0, 0, 1} : Passes{0, 0, 1, 0};
      return backward ? Passes{1, 0, 0, 1} : Passes{0, 1, 1, 0};
    case VisionOpKind::embedding: return backward ? Passes{1, 1} : Passes{3, 2};
    case VisionOpKind::resize: return backward ? Passes{1, 0, 0, 1} : Passes{0, 1, 1, 0};
    case VisionOpKind::copy: return Passes{1, 1};
    default: return {};
  }
}
inline double flops_per_element(const VisionOp& op) {
  switch (op.kind) {
    case VisionOpKind::norm: return 5;
    case VisionOpKind::activation: return op.act == wl::VisionAct::relu ? 1 : 8;
    default: return 1;
  }
}


/// Eager PyTorch's memory-bound vision kernels whose bandwidth is not a plain streaming kernel's, as the fraction of
/// the streaming rate (BW × η_hbm) they reach: the bytes this pricer counts for the class over the class's time in
/// our H100 per-kernel training profile (data/validation/measured/h100-sxm5-80gb/vision_train_profile.json; ResNet-50
/// b 256 for the CNN classes, ViT-B/16 b 256 for the layout copies; H100 streaming rate 3.35 TB/s × 0.862):
/// - channels-last batch-norm statistics (`batch_norm_collect_statistics_channels_last_kernel`, a Welford reduction
///   over N·H·W per channel): 5.70 GB in 9.05 ms, 0.218;
/// - the batch-norm transform (`batch_norm_transform_input_channels_last_kernel`): 11.39 GB in 5.38 ms, 0.733 (the
///   inference profile's eval-mode instance, b 64: 0.695);
/// - batch-norm backward, reduction (`batch_norm_backward_reduce_channels_last_kernel`): 11.39 GB in 5.72 ms, 0.689,
///   and element pass (`batch_norm_backward_elemt_channels_last_kernel`): 17.05 GB in 7.03 ms, 0.840;
/// - max pooling NHWC forward: 0.514 GB in 0.863 ms, 0.206; backward (reads the int64 indices, scatters): 0.097;
/// - cuDNN's channel padding of a stem (`nhwcAddPaddingKernel`): 0.360 GB in 0.218 ms, 0.571;
/// - the layout copies of nn.MultiheadAttention's training path (strided `direct_copy` kernels): see layout_copy;
/// - depthwise convolutions in training (EfficientNet-B4 b 64, both maps counted once, 5.80 GB a pass): forward
///   `conv2d_c1_k1_nhwc_specialized` 3.61 ms, 0.556 (the inference profile's, eval mode: ~0.56); data gradient
///   `dgrad2d_c1_k1_nhwc_specialized` 7.89 ms, 0.254; weight gradient `wgrad2d_c1_k1_nhwc` 4.32 ms, 0.465.
///   (At inference the depthwise forward stays priced at the streaming rate, as validated in CUDA-graph runs.)
/// Plain elementwise kernels (ReLU, SiLU, GELU, adds) reach the streaming rate or above it (L2 reuse: ReLU after BN
/// 1.07×) and stay priced at it. These are measurements of PyTorch 2.11's kernels on an H100, carried to other GPUs as
/// an assumption (the same kernels, the same access patterns).
enum class PtKernel { plain, bn_stats, bn_transform, bn_bwd_reduce, bn_bwd_elemt, maxpool_fwd, maxpool_bwd, channel_pad,
                      layout_copy, dw_fwd, dw_dgrad, dw_wgrad };
inline double bandwidth_fraction(PtKernel k) {
  switch (k) {
    case PtKernel::bn_stats: return 0.218;
    case PtKernel::bn_transform: return 0.733;
    case PtKernel::bn_bwd_reduce: return 0.689;
    case PtKernel::bn_bwd_elemt: return 0.840;
    case PtKernel::maxpool_fwd: return 0.206;
    case PtKernel::maxpool_bwd: return 0.097;
    case PtKernel::channel_pad: return 0.571;
    case PtKernel::layout_copy: return kLayoutCopyFraction;
    case PtKernel::dw_fwd: return 0.556;
    case PtKernel::dw_dgrad: return 0.254;
    case PtKernel::dw_wgrad: return 0.465;
    case PtKernel::plain: break;
  }
  return 1.0;
}


/// What a training op becomes in a fused conv–batch-norm–ReLU engine (VisionRunPlan::fused_training; cuDNN's fused-ops
/// API, cudnnFusedOps_t, as NVIDIA's MXNet ResNet-50 for MLPerf runs it with --fuse-bn-relu --fuse-bn-add-relu, NHWC):
/// - bn_in_conv: a batch norm on a GEMM convolution's output. Forward: the convolution's epilogue sums the channels
///   (CUDNN_FUSED_SCALE_BIAS_ACTIVATION_CONV_BNSTATS), one small finalize kernel turns the sums into scale and bias
///   (CUDNN_FUSED_BN_FINALIZE_STATISTICS_TRAINING); no pass over the map. Backward: dReLU (from the bit mask), the
///   residual fork and dBN in one kernel (CUDNN_FUSED_DACTIVATION_FORK_DBATCHNORM): a reduction pass (dy, x) and an
///   apply pass (dy, x → dx), 5 map passes.
/// - act_in_prologue: the ReLU after such a norm, when the next op is a GEMM convolution: applied with the scale and
///   bias in that convolution's prologue, forward and in its weight-gradient's (CUDNN_FUSED_SCALE_BIAS_ACTIVATION_WGRAD);
///   its gradient is taken in the dBN kernel. No pass of its own.
/// - bn_act_apply: the ReLU after such a norm when the next op cannot take a prologue (pooling, a depthwise
///   convolution, the head): one kernel reads the raw map and writes the activated map and a 1-bit mask.
/// - block_output: a residual add after such a norm (ResNet's block output): scale, bias, add and ReLU in one kernel
///   that reads the raw map and the skip input (or the raw projection, normalised in the same kernel: "dual"), writes
///   the output and a 1-bit mask (CUDNN_FUSED_SCALE_BIAS_ADD_ACTIVATION_GEN_BITMASK). Backward: the skip gradient is
///   added in the epilogue of the data gradient it meets (one read).
/// - relu_in_mask: the ReLU after a block output (in its kernel).
/// Other ops (SiLU, layer norm, depthwise convolutions, pooling, attention) keep their eager kernels: the fused-ops
/// API takes ReLU only.
enum class FusedRole { keep, bn_in_conv, act_in_prologue, bn_act_apply, block_output, relu_in_mask };
std::vector<FusedRole> fused_training_roles(const wl::VisionGraph& g);

/// Eager PyTorch's host time for one pass of the op list (model/src/vision/vision_host.cpp): Σ of the measured host cost of
/// each module call in the mode; nullopt when an op's kind has no measurement.
enum class HostMode { infer, train_fwd, train_bwd };
std::optional<double> eager_host_seconds(const wl::VisionGraph& g, HostMode mode);
/// The host time of one eager optimizer step and zero_grad(set_to_none) over `tensors` parameter tensors (SGD with
/// momentum and weight decay, foreach; or fused AdamW), measured; nullopt when not measured.
std::optional<double> optimizer_host_seconds(bool adamw, std::int64_t tensors);
/// Parameter tensors of the op list as torch's model.parameters() yields them (weights, biases, norm scales and shifts,
/// class token and positions, layer scales).
std::int64_t parameter_tensors(const wl::VisionGraph& g);

}  // namespace gpuplan::model::detail
