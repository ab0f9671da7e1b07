// One pass over a vision graph (vision.hpp): each op priced as it runs (implicit-GEMM convolutions autotuned over
// cuDNN's tiles, depthwise convolutions, attention, norms, activations, pooling, autocast's casts, the fused
// conv–batch-norm–ReLU engine's roles), what inference folds and fuses away, and the pass's time with the host's issue;
// vision_forward. vision_cost.cpp builds inference and training from these passes.
#include "vision_pass.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "vision_kernels.hpp"

namespace gpuplan::model {

using wl::VisionOp;
using wl::VisionOpKind;

namespace {

using detail::bandwidth_fraction;
using detail::flops_per_element;
using detail::Passes;
using detail::passes;
using detail::PtKernel;
using detail::Pricer;

/// How cuDNN's implicit-GEMM convolutions (NHWC) take an input whose channel count is not 16-byte aligned (the
/// stems: C_in = 3). The channels are padded to the next 16-byte multiple by a kernel of their own
/// (`nhwcAddPaddingKernel`, 2 launches per stem in our H100 profile:
/// data/validation/measured/h100-sxm5-80gb/vision_inference_profile.json), and the tensor-core kernel runs on the
/// padded map: aligned, but its main loop steps through the filter taps one at a time, each with a K-tile of at least
/// kConvTapTileBytes of channels (ResNet-50's stem ran `cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4`,
/// K-tile 32 bf16 channels), so a tap of C_pad < tile channels computes on zeros for the rest. The forward GEMM's
/// depth is k² × max(C_pad, tile) (ResNet-50: 49 × 32 = 1568 instead of 147, priced aligned instead of at the
/// element-aligned fallback's 0.176); the weight gradient's N is k² × C_pad (its tile runs along the taps).
struct ConvChannels {
  std::int64_t real = 0, padded = 0, tap_depth = 0;
};
constexpr double kConvTapTileBytes = 64.0;

ConvChannels conv_channels(std::int64_t c, double element_bytes) {
  ConvChannels r{c, c, c};
  const double step = std::max(1.0, kGemmAlignmentBytes / element_bytes);
  const double bytes = static_cast<double>(c) * element_bytes;
  if (std::fmod(bytes, kGemmAlignmentBytes) == 0.0) return r;
  r.padded = static_cast<std::int64_t>(std::ceil(static_cast<double>(c) / step) * step);
  const auto tile = static_cast<std::int64_t>(std::max(1.0, kConvTapTileBytes / element_bytes));
  r.tap_depth = std::max(r.padded, tile);
  return r;
}

hw::Precision attention_precision(hw::Precision p) {
  return p == hw::Precision::fp8 || p == hw::Precision::int8 || p == hw::Precision::fp4 ? hw::Precision::bf16 : p;
}

/// Which ops are absorbed at inference: batch norm folded into the conv before it; an activation or residual add
/// fused into the epilogue of the GEMM before it (directly, or after a folded norm).
std::vector<bool> absorbed(const wl::VisionGraph& g, const VisionRunPlan& plan, bool training) {
  std::vector<bool> out(g.ops.size(), false);
  if (training) return out;
  for (std::size_t i = 1; i < g.ops.size(); ++i) {
    const VisionOp& op = g.ops[i];
    const VisionOp& prev = g.ops[i - 1];
    if (op.kind == VisionOpKind::norm && op.norm == wl::VisionNorm::batch && plan.fold_bn &&
        prev.kind == VisionOpKind::conv)
      out[i] = true;
    if ((op.kind == VisionOpKind::activation || op.kind == VisionOpKind::add) && plan.fuse_epilogue) {
      // Walk back over ops already absorbed: the epilogue belongs to the GEMM that produced this map.
      std::size_t j = i - 1;
      while (j > 0 && out[j]) --j;
      if (g.ops[j].kind == VisionOpKind::conv || g.ops[j].kind == VisionOpKind::linear) out[i] = true;
    }
  }
  return out;
}

/// Bytes per element of each op's output as it runs. Without autocast every tensor is in the compute type. Under
/// torch.autocast (PyTorch's autocast op lists): convolutions, linear layers and attention run in 16-bit and cast an
/// fp32 input first (a kernel reading 4 and writing 2 bytes per element); layer norm runs in fp32 and casts a 16-bit
/// input up first (2 + 4); an add of a 16-bit and an fp32 tensor gives fp32 (type promotion), and so does adding
/// the fp32 position embedding; batch norm, activations, pooling and scales keep their input's type. `cast_in[i]`:
/// the input cast op i needs (0: none), in bytes per element read + written.
struct Dtypes {
  std::vector<double> out;
  std::vector<double> cast_in;
};
Dtypes dtypes(const wl::VisionGraph& g, const VisionRunPlan& plan) {
  const double e = hw::bytes_per_element(plan.compute);
  Dtypes t{std::vector<double>(g.ops.size(), e), std::vector<double>(g.ops.size(), 0.0)};
  if (!plan.autocast) return t;
  double in = 4.0;  // the image arrives in fp32
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const VisionOp& op = g.ops[i];
    double out = in;
    switch (op.kind) {
      case VisionOpKind::conv:
      case VisionOpKind::linear:
      case VisionOpKind::attention:
        if (in != e) t.cast_in[i] = in + e;
        out = e;
        break;
      case VisionOpKind::norm:
        if (op.norm == wl::VisionNorm::layer) {
          if (in != 4.0) t.cast_in[i] = in + 4.0;
          out = 4.0;
        }
        break;
      case VisionOpKind::add: {
        const double skip = op.residual_from >= 0 ? t.out[static_cast<std::size_t>(op.residual_from)] : in;
        out = std::max(in, skip);
        break;
      }
      case VisionOpKind::embedding: out = 4.0; break;
      default: break;
    }
    t.out[i] = out;
    in = out;
  }
  return t;
}

/// A training op under the fused conv–batch-norm–ReLU engine (detail::FusedRole): true when its role replaced its
/// eager kernels (priced here), false when it keeps them.
bool price_fused(const VisionOp& op, detail::FusedRole role, double out, double b_in, double b_skip, double b_out,
                 bool backward, Pricer& pr) {
  using detail::FusedRole;
  const double mask = out / 8.0;  // the 1-bit ReLU mask
  switch (role) {
    case FusedRole::keep: return false;
    case FusedRole::act_in_prologue:
    case FusedRole::relu_in_mask: return true;
    case FusedRole::bn_in_conv:
      if (!backward)  // the statistics come from the convolution's epilogue: only the finalize kernel on C values
        pr.add(pr.stream_bytes(op.name + " BN finalize", static_cast<double>(op.c_out) * 4.0 * 6.0, 0),
               &VisionPassCost::elementwise);
      else  // reduction (dy, x) and apply (dy, x → dx), the mask read
        pr.add(pr.stream_bytes(op.name + " dReLU-fork-dBN", 5.0 * out * b_out + mask, 8.0 * out),
               &VisionPassCost::elementwise, 2.0);
      return true;
    case FusedRole::bn_act_apply:
      if (!backward)
        pr.add(pr.stream_bytes(op.name + " scale-bias-ReLU", 2.0 * out * b_out + mask, 3.0 * out),
               &VisionPassCost::elementwise);
      return true;
    case FusedRole::block_output:
      if (!backward)
        pr.add(pr.stream_bytes(op.name + " scale-bias-add-ReLU", out * (b_in + b_skip + b_out) + mask, 4.0 * out),
               &VisionPassCost::elementwise);
      else  // the skip gradient, added in the epilogue of the data gradient it meets
        pr.add(pr.stream_bytes(op.name + " skip gradient (epilogue)", out * b_out, out), &VisionPassCost::elementwise);
      return true;
  }
  return false;
}

/// One op's operands in a pass: elements over the batch (input, output), the GEMM weights, and the bytes per element
/// of its input and output as they run (Dtypes); `wb`: the weight element bytes the GEMMs read.
struct OpIo {
  double in = 0, out = 0, w = 0, b_in = 0, b_out = 0, wb = 0;
};

/// A product of two activations (imported graphs): `groups` products of (rows/groups × K) · (K × N) per image; the
/// second operand is read like the first. Backward: dA = dC·Bᵀ and dB = Aᵀ·dC.
void price_matmul(const VisionOp& op, const VisionRunPlan& plan, const OpIo& io, bool backward, Pricer& pr) {
  const double n = static_cast<double>(plan.batch);
  const double in = io.in, out = io.out, wb = io.wb;
  const std::int64_t gr = plan.batch * std::max<std::int64_t>(1, op.groups);
  const std::int64_t rows = op.h_out * op.w_out / std::max<std::int64_t>(1, op.groups);
  const double b_el = n * static_cast<double>(std::max<std::int64_t>(1, op.groups) * op.c_in * op.c_out);
  if (!backward) {
    pr.add(pr.implicit_gemm(op.name, rows, op.c_out, op.c_in, gr, in + b_el + out, 0, wb, false), &VisionPassCost::gemm);
  } else {
    pr.add(pr.implicit_gemm(op.name + " dA", rows, op.c_in, op.c_out, gr, in + b_el + out, 0, wb, false),
           &VisionPassCost::gemm);
    pr.add(pr.implicit_gemm(op.name + " dB", op.c_in, op.c_out, rows, gr, in + b_el + out, 0, wb, false),
           &VisionPassCost::gemm);
  }
}

/// A convolution or linear layer as an implicit GEMM (op i of the graph; the first needs no data gradient), with its
/// channel padding, autocast's weight casts and the bias kernels cuDNN leaves outside the GEMM.
void price_gemm(const VisionOp& op, std::size_t i, const VisionRunPlan& plan, const OpIo& io, bool backward,
                Pricer& pr) {
  const double in = io.in, out = io.out, w = io.w, b_in = io.b_in, b_out = io.b_out, wb = io.wb;
  const std::int64_t gr = op.groups;
  const std::int64_t k2 = op.kernel_area();
  const std::int64_t m_out = plan.batch * op.h_out * op.w_out;
  const std::int64_t m_in = plan.batch * op.h_in * op.w_in;
  const std::int64_t cin = op.c_in / gr, cout = op.c_out / gr;
  // The GEMM's depth: K = C_in·k² when C_in is 16-byte aligned; otherwise the channel-padded filter taps
  // (conv_channels, e.g. the stems' C_in = 3).
  const bool conv = op.kind == VisionOpKind::conv;
  const ConvChannels ch = conv ? conv_channels(cin, pr.e_) : ConvChannels{cin, cin, cin};
  const std::int64_t k_fwd = ch.tap_depth * k2;
  if (ch.padded != cin)  // cuDNN's channel-padding kernel: the map read once, written with C_pad channels
    pr.add(pr.stream_bytes(op.name + (backward ? " channel pad (bwd)" : " channel pad"),
                           in * b_in + in * static_cast<double>(ch.padded) / static_cast<double>(cin) * pr.e_, 0,
                           PtKernel::channel_pad),
           &VisionPassCost::elementwise);
  if (plan.autocast && !backward)  // 4 B in, 2 B out per weight element
    pr.add(pr.stream_bytes(op.name + " weight cast", w * 6.0, 0), &VisionPassCost::casts);
  if (op.transposed) {
    // A transposed convolution as cuDNN runs it (the data gradient of the convolution it transposes): each input
    // pixel times the kernel, M = input pixels, N = C_out·k², K = C_in per group; backward: dX = dY-windows ·
    // weights (M = input pixels, N = C_in, K = C_out·k²), dW = Xᵀ·dY-windows.
    if (!backward) {
      if (plan.autocast) pr.add(pr.stream_bytes(op.name + " weight cast", w * 6.0, 0), &VisionPassCost::casts);
      pr.add(pr.implicit_gemm(op.name, m_in, cout * k2, cin, gr, in + out, w, wb, true), &VisionPassCost::gemm);
      if (op.bias) pr.add(pr.stream_bytes(op.name + " bias", 2.0 * out * b_out, out), &VisionPassCost::elementwise);
    } else {
      if (i > 0)
        pr.add(pr.implicit_gemm(op.name + " dgrad", m_in, cin, cout * k2, gr, in + out, w, wb, true), &VisionPassCost::gemm);
      pr.add(pr.implicit_gemm(op.name + " wgrad", cin, cout * k2, m_in, gr, in + out, w, wb, true), &VisionPassCost::gemm);
      if (op.bias) pr.add(pr.stream_bytes(op.name + " bias grad", out * b_out, out), &VisionPassCost::elementwise);
      if (plan.autocast) pr.add(pr.stream_bytes(op.name + " grad cast", w * 6.0, 0), &VisionPassCost::casts);
    }
    return;
  }
  if (!backward) {
    pr.add(pr.implicit_gemm(op.name, m_out, cout, k_fwd, gr, in + out, w, wb, conv), &VisionPassCost::gemm);
    // cuDNN's convolution leaves the bias to its own elementwise kernel (the profile's bias adds of the SE
    // 1×1 convolutions); cuBLASLt fuses a linear layer's bias into the GEMM epilogue.
    if (op.kind == VisionOpKind::conv && op.bias)
      pr.add(pr.stream_bytes(op.name + " bias", 2.0 * out * b_out, out), &VisionPassCost::elementwise);
  } else {
    if (i > 0)  // the image needs no gradient
      pr.add(pr.implicit_gemm(op.name + " dgrad", m_in, cin, cout * k2, gr, in + out, w, wb, conv), &VisionPassCost::gemm);
    pr.add(pr.implicit_gemm(op.name + " wgrad", cout, ch.padded * k2, m_out, gr, in + out, w, wb, conv),
           &VisionPassCost::gemm);
    if (op.kind == VisionOpKind::conv && op.bias)  // the bias gradient: a reduction of dy over N·H·W
      pr.add(pr.stream_bytes(op.name + " bias grad", out * b_out, out), &VisionPassCost::elementwise);
    if (plan.autocast)  // the 16-bit weight gradient cast and accumulated into the fp32 .grad
      pr.add(pr.stream_bytes(op.name + " grad cast", w * 6.0, 0), &VisionPassCost::casts);
  }
}

/// A depthwise convolution, streamed (PyTorch's own depthwise kernels).
void price_depthwise(const VisionOp& op, const VisionRunPlan& plan, const OpIo& io, bool training, bool backward,
                     Pricer& pr) {
  const double n = static_cast<double>(plan.batch);
  const double in = io.in, out = io.out, b_out = io.b_out;
  const double macs = n * static_cast<double>(op.macs());
  if (!backward) {
    pr.add(pr.stream_bytes(op.name, (in + out) * pr.e_, 2.0 * macs, training ? PtKernel::dw_fwd : PtKernel::plain),
           &VisionPassCost::depthwise);
    if (op.bias) pr.add(pr.stream_bytes(op.name + " bias", 2.0 * out * b_out, out), &VisionPassCost::elementwise);
  } else {
    pr.add(pr.stream_bytes(op.name + " dgrad", (in + out) * pr.e_, 2.0 * macs, PtKernel::dw_dgrad),
           &VisionPassCost::depthwise);
    pr.add(pr.stream_bytes(op.name + " wgrad", (in + out) * pr.e_, 2.0 * macs, PtKernel::dw_wgrad),
           &VisionPassCost::depthwise);
    if (op.bias) pr.add(pr.stream_bytes(op.name + " bias grad", out * b_out, out), &VisionPassCost::elementwise);
  }
}

/// Attention (ViT), with the layout copies nn.MultiheadAttention makes in training.
void price_attention(const VisionOp& op, const VisionRunPlan& plan, const Device& d, bool training, bool backward,
                     Pricer& pr) {
  const double n = static_cast<double>(plan.batch);
  const std::int64_t tokens = op.h_in * op.w_in;
  const std::int64_t kv = op.kv_tokens > 0 ? op.kv_tokens : tokens;
  const std::int64_t dh = op.c_out / op.heads;
  if (training) {
    // nn.MultiheadAttention (batch_first) outside its inference fast path runs F.multi_head_attention_forward,
    // which moves the activations between layouts with strided copies (the profile's direct_copy kernels, 2 + 2
    // per block forward): the (N, L, E) input transposed to (L, N, E) and made contiguous for the packed input
    // projection (E per token), the packed QKV unflattened and transposed to (3, L, N·h, d) contiguous (3E), and
    // the attention output permuted back contiguous (E) — read and written once each, in the compute type; the
    // backward copies their gradients back the same way.
    const double t = n * static_cast<double>(tokens);
    const double e_map = t * static_cast<double>(op.c_out) * pr.e_;
    for (const auto& [what, maps] : {std::pair<const char*, double>{" input transpose copy", 1.0},
                                     {" qkv layout copy", 3.0}, {" output permute copy", 1.0}})
      pr.add(pr.stream_bytes(op.name + what + (backward ? " (bwd)" : ""), 2.0 * maps * e_map, 0,
                             PtKernel::layout_copy),
             &VisionPassCost::elementwise);
  }
  for (auto& c : attention_cost(op.name, plan.batch * op.heads, tokens, kv, dh, dh, false, true, backward,
                                attention_precision(plan.compute), d))
    pr.add(std::move(c), &VisionPassCost::attention);
}

/// PyTorch's channels-last batch norm runs as more than one kernel. Inference: the transform, plus two small kernels
/// on the C running statistics (the inverse standard deviation from the running variance, and a copy of them to
/// fp32), as the torch.profiler counts of our H100 profile show (3 per BN: data/validation/
/// measured/h100-sxm5-80gb/vision_inference_profile.json). Training: a statistics pass and the transform; backward:
/// a reduction pass and the element pass. `bytes`: the op's traffic over its `p` passes.
void price_batch_norm(const VisionOp& op, const std::string& name, const Passes& p, double bytes, double out,
                      bool training, bool backward, Pricer& pr) {
  const double c_stats = static_cast<double>(op.c_out) * 4.0 * 2.0;
  if (!training) {
    pr.add(pr.stream_bytes(name + " invstd", c_stats, 0), &VisionPassCost::elementwise);
    pr.add(pr.stream_bytes(name + " stats copy", c_stats, 0), &VisionPassCost::elementwise);
    pr.add(pr.stream_bytes(name, bytes, flops_per_element(op) * out, PtKernel::bn_transform),
           &VisionPassCost::elementwise);
  } else {
    const double per_pass = bytes / (p.reads + p.writes);
    const double first = backward ? 2.0 : 1.0;  // reads of the reduction pass
    pr.add(pr.stream_bytes(name + " statistics", first * per_pass, 2.0 * out,
                           backward ? PtKernel::bn_bwd_reduce : PtKernel::bn_stats),
           &VisionPassCost::elementwise);
    pr.add(pr.stream_bytes(name, bytes - first * per_pass, 3.0 * out,
                           backward ? PtKernel::bn_bwd_elemt : PtKernel::bn_transform),
           &VisionPassCost::elementwise);
    if (!backward)  // the running statistics: their update, the batch counter, a fill and a memset (profile: 4 × 53)
      for (const char* k : {" running stats", " batch counter", " fill", " memset"})
        pr.add(pr.stream_bytes(name + k, c_stats, 0), &VisionPassCost::elementwise);
  }
}

/// A streamed op (norms, activations, adds, scales, pooling): its passes over the maps in their own types (op i).
void price_streamed(const VisionOp& op, std::size_t i, const Dtypes& dt, const OpIo& io, bool training, bool backward,
                    Pricer& pr) {
  const double in = io.in, out = io.out, b_in = io.b_in, b_out = io.b_out;
  const Passes p = passes(op, training, backward);
  // The op computes in its output's type (layer norm under autocast: fp32 after its input cast).
  const double b_op = dt.cast_in[i] > 0 ? b_out : b_in;
  double bytes = (p.reads + p.writes) * out * (backward ? b_out : b_op) + (p.reads_in + p.writes_in) * in * b_in;
  if (op.kind == VisionOpKind::add && !backward) {  // the two inputs in their own types
    const double b_skip = op.residual_from >= 0 ? dt.out[static_cast<std::size_t>(op.residual_from)] : b_in;
    bytes = out * (b_in + b_skip + b_out);
  }
  if (bytes <= 0) return;
  const std::string name = backward ? op.name + " (bwd)" : op.name;
  if (op.kind == VisionOpKind::norm && op.norm == wl::VisionNorm::batch) {
    price_batch_norm(op, name, p, bytes, out, training, backward, pr);
    return;
  }
  if (training && !backward && op.kind == VisionOpKind::activation && op.act == wl::VisionAct::silu)
    // torchvision builds its SiLU in place (Conv2dNormActivation, inplace=True) while SiLU's backward needs its
    // input: autograd keeps a copy of the map first (the profile's Memcpy DtoD, one per SiLU: 96 in
    // EfficientNet-B4, 3.72 ms at b 64).
    pr.add(pr.stream_bytes(name + " saved-input copy", 2.0 * out * b_op, 0), &VisionPassCost::elementwise);
  const PtKernel k = op.kind == VisionOpKind::pool && op.pool == wl::VisionPool::max
                         ? (backward ? PtKernel::maxpool_bwd : PtKernel::maxpool_fwd)
                         : PtKernel::plain;
  pr.add(pr.stream_bytes(name, bytes, flops_per_element(op) * out, k), &VisionPassCost::elementwise);
}

}  // namespace

namespace detail {

void price_pass(const wl::VisionGraph& g, const VisionRunPlan& plan, const Device& d, bool training, bool backward,
                Pricer& pr) {
  const double n = static_cast<double>(plan.batch);
  const std::vector<bool> skip = absorbed(g, plan, training);
  const Dtypes dt = dtypes(g, plan);
  // Weight element bytes the GEMMs read: the compute type (autocast casts once per forward; the cast is its own kernel).
  const double wb = hw::bytes_per_element(plan.compute);
  const std::vector<detail::FusedRole> roles =
      training && plan.fused_training ? detail::fused_training_roles(g) : std::vector<detail::FusedRole>{};
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const VisionOp& op = g.ops[i];
    if (skip[i]) continue;
    const double in = n * static_cast<double>(op.in_elements());
    const double out = n * static_cast<double>(op.out_elements());
    const double w = static_cast<double>(op.matmul_weights());
    const double b_in = i > 0 ? dt.out[i - 1] : (plan.autocast ? 4.0 : pr.e_);
    const double b_out = dt.out[i];
    if (!roles.empty() &&
        price_fused(op, roles[i], out, b_in,
                    op.residual_from >= 0 ? dt.out[static_cast<std::size_t>(op.residual_from)] : b_in, b_out, backward, pr))
      continue;
    if (dt.cast_in[i] > 0)  // autocast's input cast (its backward casts the gradient back)
      pr.add(pr.stream_bytes(op.name + (backward ? " input cast (bwd)" : " input cast"), in * dt.cast_in[i], 0),
             &VisionPassCost::casts);
    const OpIo io{in, out, w, b_in, b_out, wb};
    if (op.kind == VisionOpKind::matmul)
      price_matmul(op, plan, io, backward, pr);
    else if (op.gemm())
      price_gemm(op, i, plan, io, backward, pr);
    else if (op.kind == VisionOpKind::conv)  // depthwise
      price_depthwise(op, plan, io, training, backward, pr);
    else if (op.kind == VisionOpKind::attention)
      price_attention(op, plan, d, training, backward, pr);
    else
      price_streamed(op, i, dt, io, training, backward, pr);
  }
}

/// The pass's time: the GPU's, or the host's issue time when eager and longer. The host's: the measured cost of each
/// module call (detail::eager_host_seconds) when the plan asks for it and every op kind has one; otherwise kernels ×
/// the CPU time per kernel.
VisionPassCost finish(VisionPassCost pc, const VisionRunPlan& plan, const wl::VisionGraph& g, detail::HostMode mode) {
  // Eager PyTorch only: an engine (folded BN, fused epilogues, the fused training engine) enqueues its kernels from
  // C++, priced per kernel.
  if (!plan.cuda_graphs && plan.host_per_op && !plan.fused_training && !plan.fold_bn && !plan.fuse_epilogue)
    if (const auto h = detail::eager_host_seconds(g, mode)) pc.host_ops = units::seconds(*h);
  pc.cpu_issue = plan.cuda_graphs                  ? units::Seconds{}
                 : pc.host_ops > units::Seconds{} ? pc.host_ops
                                                  : plan.launch.cpu_per_kernel * pc.kernels;
  pc.time = std::max(pc.gpu_time, pc.cpu_issue);
  return pc;
}

Device with_launch(Device d, const VisionRunPlan& plan) {
  // One measured per-kernel cost for every kernel of the pass, graphed or not: the per-class graph costs
  // (issue #27) were measured on LLM decode kernels and made own vision in CUDA graphs worse (7.6% -> 10.8%).
  d.eff.kernel_launch = plan.cuda_graphs ? plan.launch.kernel_overhead_graph : plan.launch.kernel_overhead_eager;
  d.eff.launch_class = KernelClassCosts{};
  return d;
}

}  // namespace detail

using detail::finish;
using detail::price_pass;
using detail::Pricer;
using detail::with_launch;

VisionPassCost vision_forward(const wl::VisionGraph& g, const VisionRunPlan& plan, Device d, bool keep_ops) {
  d = with_launch(std::move(d), plan);
  Pricer pr(plan, d, keep_ops);
  price_pass(g, plan, d, false, false, pr);
  return finish(pr.pass(), plan, g, detail::HostMode::infer);
}

}  // namespace gpuplan::model
