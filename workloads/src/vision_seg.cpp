// Segmentation networks of the vision library (issue #25 deliverable 1): the U-Net of Ronneberger et al. and a
// feature-pyramid segmentation head (torchvision's FeaturePyramidNetwork with the Panoptic FPN semantic branch).
#include <string>
#include <vector>

#include "vision_builder.hpp"

namespace gpuplan::wl::detail {

namespace {
std::string level(const std::string& prefix, std::size_t i) { return prefix + "." + std::to_string(i); }
}  // namespace

/// U-Net (Ronneberger, Fischer, Brox 2015, arXiv:1505.04597, Fig. 1): per encoder level two unpadded 3×3
/// convolutions with bias, each followed by ReLU, then 2×2 max pooling (not after the last level); per decoder level a
/// 2×2 stride-2 transposed convolution with bias halving the channels, the encoder map of that level cropped to its
/// size and concatenated (one copy kernel: torch.cat of the slice), two unpadded 3×3 convolutions with ReLU; a 1×1
/// convolution to the classes. 572 px in, 388 px out at the paper's widths 64…1024.
void build_unet(const VisionArch& a, Builder& b) {
  const std::size_t levels = a.widths.size();
  auto double_conv = [&](const std::string& p, std::int64_t out) {
    b.conv(p + ".conv1", out, 3, 1, 1, true, 0);
    b.act(p + ".relu1", VisionAct::relu);
    b.conv(p + ".conv2", out, 3, 1, 1, true, 0);
    b.act(p + ".relu2", VisionAct::relu);
  };
  for (std::size_t i = 0; i < levels; ++i) {
    double_conv(level("down", i), a.widths[i]);
    if (i + 1 < levels) b.pool(level("down", i) + ".pool", VisionPool::max, 2, 2);
  }
  for (std::size_t i = levels - 1; i-- > 0;) {
    const std::string p = level("up", i);
    b.conv_transpose(p + ".upconv", a.widths[i], 2, 2, true);
    b.concat(p + ".crop_concat", 2 * a.widths[i]);
    double_conv(p, a.widths[i]);
  }
  b.conv("final", a.classes, 1, 1, 1, true, 0);
}

/// A feature-pyramid segmentation head on a backbone's C2…C5 maps (strides 4, 8, 16, 32 of the image):
/// - the pyramid as torchvision builds it (torchvision.ops.FeaturePyramidNetwork, used by fasterrcnn_resnet50_fpn):
///   per level a 1×1 lateral convolution with bias to `hidden` channels, top-down from the coarsest level: the coarser
///   merged map upsampled ×2 (nearest) and added, then a 3×3 output convolution with bias (P5…P2);
/// - the semantic branch of Panoptic FPN (Kirillov, Girshick, He, Dollár 2019, arXiv:1901.02446, §3 and Fig. 3; as
///   Detectron2's SemSegFPNHead builds it): from each level, stages of a 3×3 convolution to `mlp` channels (no bias),
///   GroupNorm (32 groups), ReLU and ×2 bilinear upsampling until stride 4 (P2: one stage, no upsampling); the four
///   maps summed, a 1×1 convolution with bias to the classes and a ×4 bilinear upsampling to the image.
/// GroupNorm is entered as a per-sample norm of the layer kind: 2·C parameters, statistics per image, fp32 under
/// autocast (PyTorch's autocast runs group_norm in fp32, as layer_norm).
void build_fpn_segmentation(const VisionArch& a, Builder& b) {
  const std::size_t n = a.widths.size();
  std::vector<std::int64_t> side(n);
  for (std::size_t i = 0; i < n; ++i) side[i] = a.resolution / (std::int64_t{4} << i);
  // Top-down pathway: inner (lateral) convolutions, upsample-and-add, output convolutions, coarsest level first.
  for (std::size_t i = n; i-- > 0;) {
    b.reshape(a.widths[i], side[i], side[i]);
    b.conv(level("fpn.inner_blocks", i), a.hidden, 1, 1, 1, true);
    if (i + 1 < n) {
      const std::int64_t lateral = b.last();
      b.reshape(a.hidden, side[i + 1], side[i + 1]);
      b.resize(level("fpn.top_down", i), 2);
      b.add(level("fpn.merge", i), lateral);
    }
    b.conv(level("fpn.layer_blocks", i), a.hidden, 3, 1, 1, true);
  }
  // Semantic branch: each level up to stride 4, then the sum.
  std::int64_t sum_from = -1;
  for (std::size_t i = 0; i < n; ++i) {
    b.reshape(a.hidden, side[i], side[i]);
    const std::size_t stages = i == 0 ? 1 : i;
    for (std::size_t k = 0; k < stages; ++k) {
      const std::string p = level("sem_seg_head.p" + std::to_string(i + 2), k);
      b.conv(p + ".conv", a.mlp, 3, 1, 1, false);
      b.norm(p + ".norm", VisionNorm::layer);
      b.act(p + ".relu", VisionAct::relu);
      if (i > 0) b.resize(p + ".upsample", 2);
    }
    if (i > 0) b.add("sem_seg_head.sum" + std::to_string(i + 2), sum_from);
    sum_from = b.last();
  }
  b.conv("sem_seg_head.predictor", a.classes, 1, 1, 1, true);
  b.resize("sem_seg_head.upsample", 4);
}

}  // namespace gpuplan::wl::detail
