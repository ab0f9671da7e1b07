#include "gpuplan/model/vision.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collectives.hpp"
#include "vision_kernels.hpp"

namespace gpuplan::model {

using wl::VisionOp;
using wl::VisionOpKind;

const char* to_string(VisionOptimizer o) { return o == VisionOptimizer::adamw ? "adamw" : "sgd-momentum"; }

namespace {

using detail::bandwidth_fraction;
using detail::flops_per_element;
using detail::Passes;
using detail::passes;
using detail::PtKernel;

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

/// The tile shapes (M × N of the implicit GEMM) of cuDNN's Hopper convolution kernels in our H100 profile
/// (vision_inference_profile.json: sm90_xmma_fprop_implicit_gemm tilesize 128x256, 256x128, 128x128, 256x64,
/// 128x64; cutlass fprop 256x64 and 64x64): the N = 64 tiles fit the 64-channel convolutions that a 128- or 256-wide
/// tile would leave half or three-quarters empty.
struct ConvTile {
  int m, n;
};
constexpr std::array<ConvTile, 6> kConvTiles{{{128, 256}, {256, 128}, {128, 128}, {256, 64}, {128, 64}, {64, 64}}};
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

class Pricer {
 public:
  Pricer(const VisionRunPlan& plan, const Device& d, bool keep) : plan_(plan), d_(d), keep_(keep) {
    e_ = hw::bytes_per_element(plan.compute);
  }
  VisionPassCost& pass() { return pc_; }

  void add(OpCost c, units::Seconds VisionPassCost::*bucket, double kernels = 1.0) {
    pc_.gpu_time += c.time;
    pc_.*bucket += c.time;
    pc_.flops += c.flops;
    pc_.kernels += kernels;
    if (keep_) pc_.ops.push_back(std::move(c));
  }

  /// An implicit-GEMM convolution or a linear layer: compute from gemm_cost at (m, n, k, g), traffic from the
  /// tensors moved (a, b, c elements at the activation and weight element sizes). A convolution is autotuned
  /// (cudnn.benchmark, as PyTorch's vision recipes and our measurements run): the fastest of cuDNN's tile shapes
  /// (kConvTiles) under the house's tile/wave model, where a linear layer keeps cuBLAS's reference tile.
  OpCost implicit_gemm(const std::string& name, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t groups,
                       double act_elements, double weight_elements, double weight_bytes, bool autotuned) const {
    OpCost c = gemm_cost(name, {m, n, k, groups}, plan_.compute, d_);
    if (autotuned && !d_.eff.stream_k)
      for (const ConvTile& t : kConvTiles) {
        Device dt = d_;
        dt.eff.tile_m = t.m;
        dt.eff.tile_n = t.n;
        OpCost ct = gemm_cost(name, {m, n, k, groups}, plan_.compute, dt);
        if (ct.efficiency > c.efficiency) c = std::move(ct);  // the compute side (the memory side is ours)
      }
    const units::FlopRate rate = d_.peak(plan_.compute) * c.efficiency;
    const units::Seconds tc = c.flops / rate;
    c.bytes = units::bytes(act_elements * e_ + weight_elements * weight_bytes);
    const double eta = d_.eff.gemm_hbm > 0 ? d_.eff.gemm_hbm : d_.eff.hbm;
    const units::Seconds tm = c.bytes / (d_.gpu->memory.bandwidth * eta);
    c.bound = tc >= tm ? Bound::compute : Bound::memory;
    c.time = std::max(tc, tm) + d_.eff.kernel_launch;
    if (d_.eff.kernel_launch > std::max(tc, tm)) c.bound = Bound::launch;
    return c;
  }

  OpCost stream(const std::string& name, double elements, double flops, OpClass cls = OpClass::elementwise) const {
    return streaming_cost(name, cls, units::bytes(elements * e_), units::flop(flops), d_);
  }
  OpCost stream_bytes(const std::string& name, double bytes, double flops, PtKernel k = PtKernel::plain) const {
    if (k != PtKernel::plain) {
      Device dk = d_;
      dk.eff.hbm *= bandwidth_fraction(k);
      return streaming_cost(name, OpClass::elementwise, units::bytes(bytes), units::flop(flops), dk);
    }
    return streaming_cost(name, OpClass::elementwise, units::bytes(bytes), units::flop(flops), d_);
  }

  double e_ = 2;

 private:
  const VisionRunPlan& plan_;
  const Device& d_;
  bool keep_;
  VisionPassCost pc_;
};

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
    if (op.kind == VisionOpKind::matmul) {
      // Two activations (imported graphs): `groups` products of (rows/groups × K) · (K × N) per image; the second
      // operand is read like the first. Backward: dA = dC·Bᵀ and dB = Aᵀ·dC.
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
      continue;
    }
    if (op.gemm()) {
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
        continue;
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
      continue;
    }
    if (op.kind == VisionOpKind::conv) {  // depthwise
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
      continue;
    }
    if (op.kind == VisionOpKind::attention) {
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
      continue;
    }
    const Passes p = passes(op, training, backward);
    // The op computes in its output's type (layer norm under autocast: fp32 after its input cast).
    const double b_op = dt.cast_in[i] > 0 ? b_out : b_in;
    double bytes = (p.reads + p.writes) * out * (backward ? b_out : b_op) + (p.reads_in + p.writes_in) * in * b_in;
    if (op.kind == VisionOpKind::add && !backward) {  // the two inputs in their own types
      const double b_skip = op.residual_from >= 0 ? dt.out[static_cast<std::size_t>(op.residual_from)] : b_in;
      bytes = out * (b_in + b_skip + b_out);
    }
    if (bytes <= 0) continue;
    const std::string name = backward ? op.name + " (bwd)" : op.name;
    if (op.kind == VisionOpKind::norm && op.norm == wl::VisionNorm::batch) {
      // PyTorch's channels-last batch norm runs as more than one kernel. Inference: the transform, plus two small
      // kernels on the C running statistics (the inverse standard deviation from the running variance, and a copy
      // of them to fp32), as the torch.profiler counts of our H100 profile show (3 per BN: data/validation/
      // measured/h100-sxm5-80gb/vision_inference_profile.json). Training: a statistics pass and the transform;
      // backward: a reduction pass and the element pass.
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
      continue;
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
  d.eff.kernel_launch = plan.cuda_graphs ? plan.launch.kernel_overhead_graph : plan.launch.kernel_overhead_eager;
  return d;
}

std::string ms(units::Seconds s) { return units::format(s); }

}  // namespace

VisionPassCost vision_forward(const wl::VisionGraph& g, const VisionRunPlan& plan, Device d, bool keep_ops) {
  d = with_launch(std::move(d), plan);
  Pricer pr(plan, d, keep_ops);
  price_pass(g, plan, d, false, false, pr);
  return finish(pr.pass(), plan, g, detail::HostMode::infer);
}

namespace {
/// One child per kernel of the pass (when the pass kept them): its FLOPs, bytes, bound and time.
std::vector<Derivation> op_children(const VisionPassCost& pc) {
  std::vector<Derivation> out;
  out.reserve(pc.ops.size());
  for (std::size_t i = 0; i < pc.ops.size(); ++i) {
    const OpCost& c = pc.ops[i];
    out.push_back({fmt::format("vision.op.{}", i),
                   c.name,
                   "t = max(FLOPs / (P·η), bytes / (BW·η_hbm)) + t_kernel",
                   {{"FLOPs", units::format(c.flops), to_string(c.cls), Origin::derived()},
                    {"bytes", units::format(c.bytes), "tensors moved", Origin::derived()}},
                   fmt::format("{} ({}-bound)", ms(c.time), to_string(c.bound)),
                   {},
                   {}});
  }
  return out;
}

Derivation pass_derivation(const std::string& id, const std::string& title, const VisionPassCost& pc,
                           const VisionRunPlan& plan) {
  return {id,
          title,
          "t = max(Σ_ops t_op, kernels · t_cpu) ; t_op = max(FLOPs / (P·η), bytes / (BW·η_hbm)) + t_kernel",
          {{"Σ GEMM", ms(pc.gemm), "convolutions (implicit GEMM) and linear layers", Origin::derived()},
           {"Σ depthwise", ms(pc.depthwise), "depthwise convolutions, streamed", Origin::derived()},
           {"Σ attention", ms(pc.attention), "fused attention (ViT)", Origin::derived()},
           {"Σ elementwise", ms(pc.elementwise), "norms, activations, adds, scales, pooling", Origin::derived()},
           {"Σ casts", ms(pc.casts), "autocast weight (and gradient) casts", Origin::derived()},
           {"kernels", fmt::format("{:g}", pc.kernels), "kernel launches of the pass", Origin::derived()},
           {"t_kernel", ms(plan.cuda_graphs ? plan.launch.kernel_overhead_graph : plan.launch.kernel_overhead_eager),
            plan.cuda_graphs ? "per-kernel cost inside a CUDA graph" : "eager launch per kernel",
            plan.launch.overhead_origin.rfind("measured", 0) == 0 ? Origin::calibration(plan.launch.overhead_origin)
                                                                   : Origin::assumption(plan.launch.overhead_origin)},
           {"t_cpu", plan.cuda_graphs ? std::string("0 (CUDA graph)") : ms(plan.launch.cpu_per_kernel),
            "CPU time to issue one eager kernel", Origin::assumption(plan.launch.overhead_origin)}},
          fmt::format("{} (GPU {}, CPU issue {}{})", ms(pc.time), ms(pc.gpu_time), ms(pc.cpu_issue),
                      pc.host_ops > units::Seconds{}
                          ? ": eager PyTorch's measured host cost of each module call summed (eager_host_ops.json)"
                          : ""),
          {},
          op_children(pc)};
}
}  // namespace

namespace {
/// DDP's buffer broadcast before each forward (torch.nn.parallel.DistributedDataParallel with broadcast_buffers=True,
/// the default): every batch norm holds running_mean and running_var (fp32, C each) and num_batches_tracked (one
/// int64). _broadcast_coalesced flattens the buffers of each dtype into one tensor (a cat kernel), broadcasts it from
/// rank 0 (one NCCL broadcast per dtype), and copies each buffer back (one device-to-device copy per buffer tensor).
/// The host issues those copies one by one while the forward waits behind them, so the term is the broadcasts plus
/// the longer of the kernels' GPU time and the host's issue time (the pass pricing's max(GPU, kernels · t_cpu)).
/// Layer norm holds no buffers: ViT pays nothing. Our 2-GPU ResNet-50 profile (vision_ddp_profile_x2.json) shows
/// exactly these kernels in the forward: 159 = 53 × 3 copies, 2 cat, 2 broadcasts.
void buffer_broadcast(const wl::VisionGraph& g, const VisionTrainPlan& plan, const Device& d, VisionTraining& r) {
  double fp32 = 0, int64 = 0;
  std::int64_t tensors = 0;
  for (const auto& op : g.ops)
    if (op.kind == VisionOpKind::norm && op.norm == wl::VisionNorm::batch) {
      fp32 += 2.0 * static_cast<double>(op.c_out);
      int64 += 1.0;
      tensors += 3;
    }
  if (tensors == 0) return;
  r.buffer_tensors = tensors;
  r.buffer_bytes = units::bytes(4.0 * fp32 + 8.0 * int64);
  auto bcast = [&](double bytes) {
    return collective_cost(Collective::broadcast, units::bytes(bytes), plan.dp, CollectiveAlgorithm::automatic,
                           Explain::off)
        .time;
  };
  const units::Seconds broadcasts = bcast(4.0 * fp32) + bcast(8.0 * int64);
  // Flatten (cat: read + write) and copy back (read + write) of every byte; one kernel per copy, two cats.
  const double kernels = static_cast<double>(tensors) + 2.0;
  const OpCost moves =
      streaming_cost("DDP buffer flatten and copy-back", OpClass::elementwise, r.buffer_bytes * 4.0, units::flop(0), d);
  const units::Seconds gpu = moves.time + plan.run.launch.kernel_overhead_eager * kernels;
  const units::Seconds host = plan.run.launch.cpu_per_kernel * kernels;
  r.buffer_sync = broadcasts + std::max(gpu, host);
}
}  // namespace

VisionInference vision_inference(const wl::VisionGraph& g, const VisionRunPlan& plan, const Device& d,
                                 Explain explain, bool keep_ops) {
  VisionInference r;
  r.pass = vision_forward(g, plan, d, keep_ops || explain == Explain::on);
  r.latency = r.pass.time;
  r.images_per_second = r.latency.raw() > 0 ? static_cast<double>(plan.batch) / r.latency.raw() : 0.0;
  if (explain == Explain::on) {
    r.derivation = pass_derivation("vision.latency", "Forward latency of one batch", r.pass, plan);
    r.derivation.notes.push_back(fmt::format(
        "{} images of {}×{} px, {} ops, {} MACs per image; {}{}{}{}", plan.batch, g.resolution, g.resolution,
        g.ops.size(), units::format_number(static_cast<double>(g.macs()), 4), hw::to_string(plan.compute),
        plan.autocast ? " autocast (fp32 weights cast each forward)" : " weights", plan.fold_bn ? ", BN folded" : "",
        plan.fuse_epilogue ? ", activation/add fused into the GEMM epilogue" : ""));
  }
  return r;
}

namespace {
/// The step's phases on two resources in series: the host issues each phase's kernels (eager: the pass's host time,
/// the optimizer's Python step), the GPU runs them. The GPU ends a phase after its own work on it and no earlier than
/// the host's issue of the phase's last kernel: t_host += host; t_gpu = max(t_gpu + gpu, t_host). The host runs ahead
/// while the GPU is the bound (large batches: the sum of the GPU's phases), the GPU waits while it is not (small
/// batches: the host's sum). Under CUDA graphs the host's terms are 0.
units::Seconds issue_flow(const VisionTraining& r, std::int64_t accumulation, units::Seconds opt_gpu,
                          units::Seconds opt_host) {
  double host = 0, gpu = 0;
  for (std::int64_t a = 0; a < std::max<std::int64_t>(1, accumulation); ++a) {
    host += r.forward.cpu_issue.raw();
    gpu = std::max(gpu + r.forward.gpu_time.raw() + r.buffer_sync.raw(), host);
    host += r.backward.cpu_issue.raw();
    gpu = std::max(gpu + r.backward.gpu_time.raw(), host);
  }
  host += opt_host.raw();
  gpu = std::max(gpu + (opt_gpu + r.exposed_comm + r.comm_slowdown + r.bucket_copies).raw(), host);
  return units::seconds(gpu);
}
}  // namespace

VisionTraining vision_training(const wl::VisionGraph& g, const VisionTrainPlan& plan, const Device& d0,
                               Explain explain) {
  VisionTraining r;
  VisionRunPlan run = plan.run;
  run.fold_bn = false;
  run.fuse_epilogue = false;
  const Device d = with_launch(d0, run);
  {
    Pricer pr(run, d, explain == Explain::on);
    price_pass(g, run, d, true, false, pr);
    r.forward = finish(pr.pass(), run, g, detail::HostMode::train_fwd);
  }
  {
    Pricer pr(run, d, explain == Explain::on);
    price_pass(g, run, d, true, true, pr);
    r.backward = finish(pr.pass(), run, g, detail::HostMode::train_bwd);
  }
  // Optimizer: fp32 master weights, multi-tensor (foreach) kernels streaming every parameter.
  const double params = static_cast<double>(g.parameters());
  // torch.optim.SGD (foreach) with momentum and weight decay, as ImageNet recipes run it: g' = g + wd·p (read 8, write
  // 4), buf = m·buf (8), buf += g' (12), p −= lr·buf (12): 44 B per parameter in four multi-tensor passes (our H100
  // profile: 13 multi_tensor_apply kernels, 0.49 ms for ResNet-50's 25.6 M parameters = 2.30 TB/s at 44 B). Fused
  // AdamW: 28 B in one pass.
  const double bytes_per_param = plan.optimizer == VisionOptimizer::adamw ? 28.0 : 44.0;
  const OpCost opt = streaming_cost("optimizer step", OpClass::optimizer, units::bytes(params * bytes_per_param),
                                    units::flop(params * (plan.optimizer == VisionOptimizer::adamw ? 12.0 : 4.0)), d);
  r.optimizer = opt.time;
  // Eager: the step is issued by Python (the optimizer's per-group loop, foreach or fused kernels, zero_grad): when the
  // GPU has caught up, the phase lasts the host's time (measured per parameter tensor, vision_host.cpp).
  units::Seconds opt_host{};
  if (!run.cuda_graphs && run.host_per_op)
    if (const auto h = detail::optimizer_host_seconds(plan.optimizer == VisionOptimizer::adamw,
                                                      detail::parameter_tensors(g)))
      opt_host = units::seconds(*h);
  const double acc = static_cast<double>(std::max<std::int64_t>(1, plan.accumulation));
  if (plan.dp.size > 1) {
    // DDP: the fp32 gradients (4 B per parameter) in buckets; all but the last overlap the last micro-batch's
    // backward, the last (the first layers' gradients) is ready only when the backward ends.
    const double grad_bytes = 4.0 * static_cast<double>(g.parameters());
    const double bucket = std::max(1.0, plan.bucket_bytes.raw());
    const double full = std::floor(grad_bytes / bucket);
    const double rest = grad_bytes - full * bucket;
    auto ar = [&](double bytes) {
      return collective_cost(Collective::all_reduce, units::bytes(bytes), plan.dp, CollectiveAlgorithm::automatic,
                             Explain::off)
          .time;
    };
    const units::Seconds t_full = full > 0 ? ar(bucket) : units::Seconds{};
    const units::Seconds t_rest = rest > 0 ? ar(rest) : units::Seconds{};
    r.allreduce = t_full * full + t_rest;
    const units::Seconds last = rest > 0 ? t_rest : t_full;
    const units::Seconds hidden_part = r.allreduce - last;
    r.exposed_comm = last + std::max(units::Seconds{}, hidden_part - r.backward.time);
    const double loss = d.eff.comm_compute_loss;
    r.comm_slowdown = std::min(hidden_part, r.backward.gemm) * loss;
    const OpCost copies = streaming_cost("DDP bucket copies", OpClass::elementwise, units::bytes(4.0 * grad_bytes),
                                         units::flop(0), d);
    r.bucket_copies = copies.time;
    if (plan.broadcast_buffers) buffer_broadcast(g, plan, d, r);
  }
  r.gpu_step_time = issue_flow(r, plan.accumulation, opt.time, opt_host);
  r.step_time = r.gpu_step_time;
  const double n = static_cast<double>(run.batch);
  if (plan.data) {
    r.data = vision_data_pipeline(r.gpu_step_time, run.batch * std::max<std::int64_t>(1, plan.accumulation), *plan.data,
                                  explain);
    r.step_time = r.data->step_time;
  }
  const double replicas = static_cast<double>(std::max(1, plan.dp.size));
  r.images_per_second = r.step_time.raw() > 0 ? n * acc * replicas / r.step_time.raw() : 0.0;
  r.model_flops = units::flop(3.0 * 2.0 * static_cast<double>(g.macs()) * n * acc);
  r.mfu = r.step_time.raw() > 0 ? (r.model_flops / r.step_time).raw() / d.peak(run.compute).raw() : 0.0;

  // Memory: fp32 weights and gradients, optimizer states, the compute-type weight copies autocast keeps for the
  // backward, and the activations saved for it: each op's saved tensor counted once (its input — conv, linear,
  // norm, SE scale, pooling with a window — or its output — activation), attention's Q, K, V, O and row statistics.
  const double e = hw::bytes_per_element(run.compute);
  r.memory.weights = units::bytes(4.0 * params);
  r.memory.gradients = units::bytes(4.0 * params);
  r.memory.optimizer = units::bytes((plan.optimizer == VisionOptimizer::adamw ? 8.0 : 4.0) * params);
  double matmul = 0;
  for (const auto& op : g.ops) matmul += static_cast<double>(op.matmul_weights());
  r.memory.weight_copies = units::bytes(run.autocast ? e * matmul : 0.0);
  std::vector<bool> saved(g.ops.size() + 1, false);  // saved[i + 1]: op i's output; saved[0]: the image
  double act = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const VisionOp& op = g.ops[i];
    const bool saves_input = op.kind == VisionOpKind::conv || op.kind == VisionOpKind::linear ||
                             op.kind == VisionOpKind::matmul ||
                             op.kind == VisionOpKind::norm || op.kind == VisionOpKind::mul ||
                             (op.kind == VisionOpKind::pool && op.pool != wl::VisionPool::global_avg);
    if (saves_input && !saved[i]) {
      saved[i] = true;
      act += static_cast<double>(op.in_elements()) * e;
    }
    if (op.kind == VisionOpKind::activation && !saved[i + 1]) {
      saved[i + 1] = true;
      act += static_cast<double>(op.out_elements()) * e;
    }
    if (op.kind == VisionOpKind::attention) {
      const double t = static_cast<double>(op.h_in * op.w_in);
      act += t * static_cast<double>(op.c_out) * e + t * static_cast<double>(op.heads) * 4.0;  // O and row stats
      saved[i + 1] = true;
    }
  }
  r.memory.activations = units::bytes(act * n);

  if (explain == Explain::on) {
    r.derivation = {"vision.step_time",
                    "Training step time on one GPU",
                    "t_step: per phase t_host += host issue; t_gpu = max(t_gpu + GPU time, t_host) over a × (fwd + buffers, "
                    "bwd), then opt + t_comm,exposed + t_comm,beside + t_copies (= a · (t_fwd + t_bwd + t_buffers) + "
                    "t_opt + … when the GPU is the bound)",
                    {{"a", fmt::format("{:g}", acc), "micro-batches per step (gradient accumulation)", Origin::user("--global-batch / --micro-batch")},
                     {"t_fwd", ms(r.forward.time), "forward pass (training: batch statistics)", Origin::derived()},
                     {"t_bwd", ms(r.backward.time), "data- and weight-gradient GEMMs, elementwise backward",
                      Origin::derived()},
                     {"t_opt", ms(r.optimizer),
                      fmt::format("{} over {} fp32 parameters, {:g} B each, streamed{}", to_string(plan.optimizer),
                                  units::format_number(params, 4), bytes_per_param,
                                  opt_host > units::Seconds{}
                                      ? fmt::format("; the host's Python step and zero_grad {} ({} parameter tensors)",
                                                    ms(opt_host), detail::parameter_tensors(g))
                                      : std::string()),
                      Origin::derived()},
                     {"t_comm,exposed", ms(r.exposed_comm),
                      fmt::format("DDP over {} GPUs: last bucket + what the backward does not hide of the {} all-reduce "
                                  "(buckets of {})",
                                  plan.dp.size, ms(r.allreduce), units::format(plan.bucket_bytes)),
                      Origin::derived()},
                     {"t_comm,beside", ms(r.comm_slowdown),
                      "GEMM throughput lost while the bucket all-reduces run beside the backward",
                      d.eff.calibrated ? Origin::calibration(d.eff.origin) : Origin::assumption(d.eff.origin)},
                     {"t_copies", ms(r.bucket_copies), "gradients copied into the buckets and back (4 × 4 B per parameter)",
                      Origin::derived()},
                     {"t_buffers", ms(r.buffer_sync),
                      r.buffer_tensors > 0
                          ? fmt::format("DDP broadcast_buffers before each forward: {} batch-norm buffers ({}) broadcast "
                                        "from rank 0, flattened and copied back (max of GPU time and host issue of {} "
                                        "kernels)",
                                        r.buffer_tensors, units::format(r.buffer_bytes), r.buffer_tensors + 2)
                          : std::string("no DDP buffer broadcast (one GPU, no batch norm, or broadcast_buffers off)"),
                      Origin::derived()}},
                    ms(r.gpu_step_time),
                    {fmt::format("{} images per micro-batch; model FLOPs 3 × 2 × MACs × images = {}; MFU {:.1f}%", run.batch,
                                 units::format(r.model_flops), 100.0 * r.mfu)},
                    {pass_derivation("vision.forward", "Forward pass", r.forward, run),
                     pass_derivation("vision.backward", "Backward pass", r.backward, run)}};
    if (r.data) {  // the step the run sees: the GPU's against its input pipeline
      Derivation gpu = std::move(r.derivation);
      Derivation top = r.data->derivation;
      top.children.insert(top.children.begin(), std::move(gpu));
      r.derivation = std::move(top);
    }
  }
  return r;
}

}  // namespace gpuplan::model
