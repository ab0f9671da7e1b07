#pragma once
// Vision networks as a workload of their own (issue #25; DESIGN.md §11 "one op graph"): a compact architecture
// description (stages, blocks, repeats, widths; EfficientNet's compound scaling; a ViT's patch size and encoder) is
// expanded into a flat list of ops, each with its tensor shapes per image — input and output C×H×W, kernel, stride,
// groups —, so that parameters, multiply-accumulates, activation elements and weight elements are one fold over the
// ops, and a pricer (model/vision.hpp) walks the same list. Nothing here is bolted onto TransformerArch: a ViT's
// encoder blocks are ops of this list (linear, attention, norm), priced by the same GEMM and fused-attention
// functions the transformer pricers call.
//
// Counting convention: `macs()` counts multiply-accumulates of convolutions, linear layers and the two attention
// matmuls (QKᵀ and PV), nothing for norms, activations, pooling or adds. This is what torchvision's model docs call
// "GFLOPS" (ResNet-50: 4.089) and what the papers report as FLOPs (ResNet-50 "3.8 × 10⁹ FLOPs", He et al. 2016
// Table 1; EfficientNet-B0 "0.39B FLOPs", Tan & Le 2019 Table 2): one MAC = 2 FLOPs. The pricer counts FLOPs = 2·MACs.
//
// Pure value types: no IO; the library files (data/models/vision/*.json) are decoded in workloads/io.
#include <cstdint>
#include <string>
#include <vector>

namespace gpuplan::wl {

enum class VisionOpKind : std::uint8_t {
  conv,        ///< 2-D convolution (groups = channels: depthwise)
  linear,      ///< a linear layer over tokens (H = tokens, W = 1) or over a pooled vector
  norm,        ///< batch norm or layer norm
  activation,  ///< ReLU, SiLU, GELU, sigmoid
  pool,        ///< max / average pooling with a window, or global average pooling
  add,         ///< residual add (two inputs of the output's shape)
  mul,         ///< squeeze-excitation scale or layer scale: the map times a per-channel vector
  attention,   ///< the attention core of a ViT block: softmax(QKᵀ/√d)·V over all tokens (not causal)
  embedding,   ///< ViT class token and learned positions (parameters; adds the positions)
  matmul,      ///< a matmul of two activations (imported graphs): `groups` products per image of (M × K)·(K × N);
               ///< h = all rows (groups · M), c_in = K, c_out = N
  resize,      ///< upsampling or resizing (imported graphs): reads the input map, writes the output map
  copy,        ///< data movement that runs a kernel (imported graphs: concat, transpose, slice, pad, expand): reads
               ///< and writes each output element
};
enum class VisionNorm : std::uint8_t { batch, layer, rms };  ///< rms: a scale per channel, no shift
enum class VisionAct : std::uint8_t { relu, silu, gelu, sigmoid };
enum class VisionPool : std::uint8_t { max, avg, global_avg };

/// One op of a vision network, per image. Feature maps are C×H×W; token ops use H = tokens, W = 1.
struct VisionOp {
  VisionOpKind kind = VisionOpKind::conv;
  std::string name;  ///< "layer3.2.conv2", as torchvision names the module where there is one
  std::int64_t c_in = 0, h_in = 0, w_in = 0;
  std::int64_t c_out = 0, h_out = 0, w_out = 0;
  std::int64_t kernel = 1, stride = 1, groups = 1;  ///< square kernels (every network of the library has them)
  std::int64_t kernel_w = 0;  ///< a non-square kernel's width (imported graphs); 0: square (`kernel`)
  bool transposed = false;    ///< conv: a transposed convolution (imported graphs): every input pixel meets the kernel
  std::int64_t kv_tokens = 0;  ///< attention: keys/values attended to when they are not the queries' tokens (cross
                               ///< attention); 0: self-attention over the h_in·w_in tokens
  bool bias = false;
  VisionNorm norm = VisionNorm::batch;
  VisionAct act = VisionAct::relu;
  VisionPool pool = VisionPool::global_avg;
  std::int64_t heads = 0;         ///< attention: heads (c_in = 3·hidden: Q, K, V; c_out = hidden)
  std::int64_t extra_params = 0;  ///< parameters that are no conv/linear/norm weight: class token, positions, layer scale
  std::int64_t residual_from = -1;  ///< add: the index of the op whose output is the skip input (-1: none recorded)

  /// Weights and biases of this op (torchvision's parameters(); BN running statistics are buffers, not counted).
  [[nodiscard]] std::int64_t parameters() const;
  /// Weight elements that take part in a matmul (conv/linear kernels; not biases, norms, embeddings).
  [[nodiscard]] std::int64_t matmul_weights() const;
  /// kernel height × width.
  [[nodiscard]] std::int64_t kernel_area() const { return kernel * (kernel_w > 0 ? kernel_w : kernel); }
  /// Multiply-accumulates per image (convention above; a transposed convolution: input pixels × weights; a matmul of
  /// two activations: rows · K · N).
  [[nodiscard]] std::int64_t macs() const;
  [[nodiscard]] std::int64_t in_elements() const { return c_in * h_in * w_in; }
  [[nodiscard]] std::int64_t out_elements() const { return c_out * h_out * w_out; }
  /// groups == input channels == output channels (> 1): a depthwise convolution.
  [[nodiscard]] bool depthwise() const { return kind == VisionOpKind::conv && groups > 1 && groups == c_in && c_in == c_out; }
  [[nodiscard]] bool gemm() const { return (kind == VisionOpKind::conv && !depthwise()) || kind == VisionOpKind::linear; }
};

/// `onnx`: an op list imported from an ONNX file (workloads/io onnx_io.hpp), not built from a description.
enum class VisionFamily : std::uint8_t { resnet, efficientnet, convnext, vit, yolov8, detr, unet, fpn, onnx };
const char* to_string(VisionFamily f);

/// One MBConv stage of EfficientNet's base network (B0; Tan & Le 2019 Table 1), before compound scaling.
struct MbConvStage {
  std::int64_t expand = 1, kernel = 3, stride = 1, in = 0, out = 0, repeats = 1;
};

/// The switches that tell the ViT encoders of multimodal models apart from torchvision's ViT (issue #23), and the tail
/// that turns the encoder's patches into the language model's image tokens. The defaults are torchvision's
/// VisionTransformer: class token, learned positions, a patch convolution with bias, LayerNorm, a GELU fc1/fc2 MLP, a
/// final LayerNorm and a classification head.
struct VitOptions {
  bool class_token = true;   ///< a class token (torchvision, CLIP, Llama 4); SigLIP and Qwen-VL have none
  bool positions = true;     ///< learned absolute positions; Qwen-VL rotates q and k instead (no weights)
  bool patch_bias = true;    ///< the patch projection's bias; CLIP, Llama 4 and Qwen2.5-VL have none
  bool pre_norm = false;     ///< a norm before the first block (CLIP's pre_layrnorm, Llama 4's layernorm_pre)
  bool final_norm = true;    ///< a norm after the last block (Qwen-VL has none: its merger normalises)
  bool gated_mlp = false;    ///< gate, up and down projections with SiLU (Qwen2.5-VL) instead of fc1, GELU, fc2
  bool rms_norm = false;     ///< RMSNorm (Qwen2.5-VL) instead of LayerNorm
  bool classifier = true;    ///< torchvision's head: a linear layer to `classes` on the class token
  /// Windowed self-attention (Qwen2.5-VL): patches per window on every layer not in `full_layers`; 0: every layer
  /// attends to all patches.
  std::int64_t window = 0;
  std::vector<std::int64_t> full_layers;
  // The multimodal tail (when !classifier): the class token is dropped, `merge` neighbouring patches become one
  // token — by average pooling (Gemma 3) or by concatenating their channels (Qwen-VL's merger, Llama 4's pixel
  // shuffle) —, a norm (`merge_norm`) and the projector's linear layers (`projector`: output widths, the last one the
  // language model's width; a GELU between two of them) map it to the language model.
  std::int64_t merge = 1;
  bool merge_pool = false;
  bool merge_norm = false;
  bool merge_norm_rms = false;  ///< the merger's norm is an RMSNorm (Gemma 3's soft-embedding norm, Qwen-VL's ln_q)
  std::vector<std::int64_t> projector;
  bool projector_bias = true;
};

/// A compact description of a vision network. Which fields apply depends on the family:
/// - resnet: stem_width, depths (blocks per stage), widths (bottleneck widths), expansion, bottleneck (or basic);
/// - efficientnet: stages (B0), width_mult, depth_mult, stem_channels, divisor, se_divisor, head_multiplier;
/// - convnext: depths, widths (channels per stage), patch (stem), kernel (depthwise), mlp_ratio;
/// - vit: patch, hidden, layers, heads, mlp;
/// - yolov8: depth_mult, width_mult, max_channels, classes (80 for COCO), resolution (640);
/// - unet (Ronneberger et al. 2015): in_channels, classes, widths (channels per level, encoder), resolution; unpadded
///   3×3 convolutions, 2×2 max pooling, 2×2 stride-2 transposed convolutions, cropped skip maps concatenated;
/// - fpn (a segmentation head on a backbone's C2…C5 maps): widths (the maps' channels, strides 4, 8, 16, 32),
///   resolution (the image), hidden (pyramid channels), mlp (the semantic branch's channels), classes;
/// - detr (a head on a backbone's feature map): in_channels (the map's channels), patch (its stride), resolution (the
///   image), hidden, heads, mlp, depths ([encoder layers, decoder layers]), queries, classes.
struct VisionArch {
  std::string id;
  VisionFamily family = VisionFamily::resnet;
  std::int64_t resolution = 224, in_channels = 3, classes = 1000;
  std::vector<std::int64_t> depths, widths;
  std::int64_t stem_width = 64, expansion = 4;
  bool bottleneck = true;
  std::vector<MbConvStage> stages;
  double width_mult = 1.0, depth_mult = 1.0;
  std::int64_t stem_channels = 32, divisor = 8, se_divisor = 4, head_multiplier = 4;
  std::int64_t patch = 16, kernel = 7, mlp_ratio = 4;
  std::int64_t hidden = 0, layers = 0, heads = 0, mlp = 0;
  std::int64_t max_channels = 1024;  ///< yolov8: the width cap before the width multiple
  std::int64_t queries = 100;        ///< detr: object queries
  VitOptions vit;                    ///< vit: torchvision's by default; a multimodal model's encoder otherwise
};

/// The ops of a network for one image, in execution order.
struct VisionGraph {
  std::string id;
  VisionFamily family = VisionFamily::resnet;
  std::int64_t resolution = 0;
  std::vector<VisionOp> ops;
  [[nodiscard]] std::int64_t parameters() const;
  [[nodiscard]] std::int64_t macs() const;
  [[nodiscard]] std::int64_t count(VisionOpKind k) const;
};

/// torchvision's _make_divisible (from the TF MobileNet/EfficientNet reference): v rounded to the nearest multiple of
/// `divisor` (at least `divisor`), one more step up when rounding lost more than 10%.
std::int64_t make_divisible(double v, std::int64_t divisor);

/// Expands a description into its op list. `resolution` overrides the arch's input size when > 0. Preconditions (the
/// decoder checks them): positive sizes, the family's fields present.
VisionGraph build_vision_graph(const VisionArch& a, std::int64_t resolution = 0);

/// Why the network cannot take a `resolution`×`resolution` input, or "" when it can: a ViT needs a multiple of its
/// patch size (torchvision refuses other sizes), and every map of the op list must keep at least 1×1.
std::string vision_input_problem(const VisionArch& a, std::int64_t resolution);

}  // namespace gpuplan::wl
