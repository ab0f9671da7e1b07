// Eager PyTorch's host (CPU) time per module call, for the eager vision passes (issue #25: host-bound small batches).
// A pass whose kernels are small is bound by the host issuing them: Python module calls, the dispatcher, autocast,
// autograd recording (forward) and the autograd engine (backward), each kernel launch. The costs below are measured on
// their own — chains of one module kind on tiny tensors, so the GPU is never the bound (scripts/measure/host_ops.py,
// data/validation/measured/h100-sxm5-80gb/eager_host_ops.json) — not fitted to the validation steps; they are
// PyTorch 2.11 on the lent H100 machine's 16-vCPU host, carried to other hosts as an assumption.
#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "gpuplan/model/serving.hpp"
#include "vision_kernels.hpp"

namespace gpuplan::model::detail {

namespace {

/// µs per module call: inference (bf16, inference_mode), training forward (autocast, autograd), backward.
struct HostCost {
  double infer = -1, fwd = -1, bwd = -1;
  [[nodiscard]] double at(HostMode m) const { return m == HostMode::infer ? infer : m == HostMode::train_fwd ? fwd : bwd; }
};

// eager_host_ops.json (2026-11-27, H100 SXM host, 16 vCPU Xeon; median of 15 chains of 64 calls), µs per call.
// The in-place activations are the BN + activation pair minus the BN alone (as torchvision builds them); the
// attention core is nn.MultiheadAttention minus its two projections (the graph prices those as linear layers).
// A sigmoid (SE gate) is priced as GELU: one unary kernel.
constexpr HostCost kConv{19.3, 43.3, 94.2};              // conv3x3, no bias
constexpr HostCost kConvBias{34.9, 65.7, 186.6};         // conv1x1 with bias (cuDNN leaves the bias to its own kernel)
constexpr HostCost kDepthwise{21.2, 46.9, 80.9};         // dwconv3x3
constexpr HostCost kBatchNorm{43.2, 59.3, 78.7};         // bn
constexpr HostCost kRelu{57.6 - 43.2, 81.5 - 59.3, 138.0 - 78.7};   // bn_relu_inplace − bn
constexpr HostCost kSilu{53.4 - 43.2, 112.1 - 59.3, 115.5 - 78.7};  // bn_silu_inplace − bn
constexpr HostCost kGelu{12.5, 14.8, 21.6};
constexpr HostCost kAdd{23.6, 26.8, 12.9};
constexpr HostCost kAddTokens{22.2, 24.9, 7.7};          // add_tokens: the same add on a [2, 8, 64] token tensor
constexpr HostCost kMulChannel{20.0, 24.6, 87.3};
constexpr HostCost kMaxPool{26.7, 31.0, 47.4};           // maxpool3x3 (global pooling priced alike)
constexpr HostCost kLinear{38.4, 92.3, 164.8};
constexpr HostCost kLayerNorm{32.9, 39.5, 78.4};
constexpr HostCost kMhaCore{113.0 - 2 * 38.4, 310.7 - 2 * 92.3, 707.3 - 2 * 164.8};  // mha − 2 × linear
constexpr HostCost kStochasticDepth{3.8, 73.3, 25.1};
constexpr HostCost kDropout{6.5, 6.8, 1.7};              // nn.Dropout(p = 0)

/// a + b, or −1 when either is unmeasured.
double plus(double a, double b) { return a < 0 || b < 0 ? -1 : a + b; }

/// One optimizer step plus zero_grad(set_to_none) on the host: fixed + per parameter tensor, µs.
struct OptimizerHost {
  double fixed_us = -1, per_tensor_us = 0;
};
// Least-squares lines through the optimizer rows of eager_host_ops.json (16, 64, 256, 512 tensors of 4096 elements;
// SGD foreach 317 / 800 / 2942 / 3399 µs, fused AdamW 197 / 444 / 1350 / 1573 µs), plus zero_grad(set_to_none) at
// 3.5 µs a tensor (the three models' zero_grad rows of the same file: 0.46-0.64 ms for ResNet-50's 161 tensors,
// 0.66-0.73 ms for ViT-B/16's 152).
constexpr double kZeroGradPerTensorUs = 3.5;
constexpr OptimizerHost kSgdForeach{515.0, 6.36 + kZeroGradPerTensorUs}, kAdamWFused{297.0, 2.80 + kZeroGradPerTensorUs};

double op_cost(const wl::VisionGraph& g, std::size_t i, HostMode m) {
  const VisionOp& op = g.ops[i];
  const bool vit = g.family == wl::VisionFamily::vit;
  const double dropout = kDropout.at(m);  // nn.Dropout(p = 0), in eval mode too: a module call
  switch (op.kind) {
    case VisionOpKind::conv:
      if (op.depthwise()) return kDepthwise.at(m);
      return op.bias ? kConvBias.at(m) : kConv.at(m);
    case VisionOpKind::linear: return kLinear.at(m);
    case VisionOpKind::norm: return op.norm == wl::VisionNorm::batch ? kBatchNorm.at(m) : kLayerNorm.at(m);
    case VisionOpKind::activation: {
      const double a =
          op.act == wl::VisionAct::relu ? kRelu.at(m) : op.act == wl::VisionAct::silu ? kSilu.at(m) : kGelu.at(m);
      return a < 0 || (vit && op.act == wl::VisionAct::gelu) ? plus(a, dropout) : a;  // MLPBlock: GELU, Dropout
    }
    case VisionOpKind::add: {
      // torchvision's MBConv passes its result through StochasticDepth before the residual add (training only); a
      // ViT block's two residual adds each follow a Dropout (p = 0 by default, still a module call).
      const double pre = g.family == wl::VisionFamily::efficientnet && m != HostMode::infer ? kStochasticDepth.at(m)
                         : vit                                                            ? dropout
                                                                                          : 0.0;
      return plus(kAdd.at(m), pre);
    }
    case VisionOpKind::mul: return kMulChannel.at(m);
    case VisionOpKind::pool: return kMaxPool.at(m);
    case VisionOpKind::attention: return kMhaCore.at(m);
    case VisionOpKind::embedding:  // the class token's cat, the positions' add, the encoder's input Dropout
      return plus(kAdd.at(m) < 0 ? -1 : 2.0 * kAdd.at(m), vit ? dropout : 0.0);
    default: return -1;
  }
}
}  // namespace

std::optional<double> eager_host_seconds(const wl::VisionGraph& g, HostMode mode) {
  double us = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const double c = op_cost(g, i, mode);
    if (c < 0) return std::nullopt;
    us += c;
  }
  return us * 1e-6;
}

std::int64_t parameter_tensors(const wl::VisionGraph& g) {
  std::int64_t n = 0;
  for (const auto& op : g.ops) {
    switch (op.kind) {
      case VisionOpKind::conv:
      case VisionOpKind::linear: n += op.bias ? 2 : 1; break;
      case VisionOpKind::norm: n += op.norm == wl::VisionNorm::rms ? 1 : 2; break;
      case VisionOpKind::embedding: n += op.extra_params > 0 ? 2 : 0; break;
      case VisionOpKind::mul: n += op.extra_params > 0 ? 1 : 0; break;
      default: break;
    }
  }
  return n;
}

std::optional<double> optimizer_host_seconds(bool adamw, std::int64_t tensors) {
  const OptimizerHost& o = adamw ? kAdamWFused : kSgdForeach;
  if (o.fixed_us < 0) return std::nullopt;
  return (o.fixed_us + o.per_tensor_us * static_cast<double>(tensors)) * 1e-6;
}

}  // namespace gpuplan::model::detail

namespace gpuplan::model {

units::Seconds eager_cpu_per_kernel() {
  // The single-kernel ops of the table (one kernel per inference call in eager_host_ops.json), their median.
  std::array<double, 9> us{detail::kConv.infer,      detail::kDepthwise.infer, detail::kMulChannel.infer,
                           detail::kMaxPool.infer,   detail::kAdd.infer,       detail::kAddTokens.infer,
                           detail::kLinear.infer,    detail::kLayerNorm.infer, detail::kGelu.infer};
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return units::microseconds(us[us.size() / 2]);
}

units::Seconds eager_host_per_call(HostCall c) {
  // The inference column of the table above (single-kernel calls, µs); the attention core as vision prices it.
  switch (c) {
    case HostCall::gemm: return units::microseconds(detail::kLinear.infer);
    case HostCall::norm: return units::microseconds(detail::kLayerNorm.infer);
    case HostCall::attention: return units::microseconds(detail::kMhaCore.infer);
    case HostCall::unary: return units::microseconds(detail::kGelu.infer);
    case HostCall::binary: return units::microseconds(detail::kAdd.infer);
    case HostCall::other: break;
  }
  return eager_cpu_per_kernel();
}

std::string default_overhead_origin() {
  return fmt::format(
      "2.5 µs per kernel under CUDA graphs, 5 µs eager launch (until calibrated); eager CPU per call by op "
      "(eager_host_ops.json, H100 host: GEMM {:.1f}, norm {:.1f}, attention {:.1f}, one-operand elementwise {:.1f}, "
      "other elementwise {:.1f}, collectives {:.1f} µs); no engine step overhead",
      eager_host_per_call(HostCall::gemm).raw() * 1e6, eager_host_per_call(HostCall::norm).raw() * 1e6,
      eager_host_per_call(HostCall::attention).raw() * 1e6, eager_host_per_call(HostCall::unary).raw() * 1e6,
      eager_host_per_call(HostCall::binary).raw() * 1e6, eager_host_per_call(HostCall::other).raw() * 1e6);
}

}  // namespace gpuplan::model
