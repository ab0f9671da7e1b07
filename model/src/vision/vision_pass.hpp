#pragma once
// Internal to vision/: the pricer of one pass over a vision graph, which vision_pass.cpp runs op by op and
// vision_cost.cpp's inference and training call: the Pricer, cuDNN's convolution tile shapes it autotunes over, and the
// pass's entry points.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/vision.hpp"
#include "vision_kernels.hpp"

namespace gpuplan::model::detail {

/// The tile shapes (M × N of the implicit GEMM) of cuDNN's Hopper convolution kernels in our H100 profile
/// (vision_inference_profile.json: sm90_xmma_fprop_implicit_gemm tilesize 128x256, 256x128, 128x128, 256x64,
/// 128x64; cutlass fprop 256x64 and 64x64): the N = 64 tiles fit the 64-channel convolutions that a 128- or 256-wide
/// tile would leave half or three-quarters empty.
struct ConvTile {
  int m, n;
};
constexpr std::array<ConvTile, 6> kConvTiles{{{128, 256}, {256, 128}, {128, 128}, {256, 64}, {128, 64}, {64, 64}}};

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
    const units::Seconds t_fixed = kernel_fixed(d_, OpClass::gemm);
    c.time = std::max(tc, tm) + t_fixed;
    if (t_fixed > std::max(tc, tm)) c.bound = Bound::launch;
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

/// Prices one pass of the graph (the forward, or the backward when `backward`; training or inference) into `pr`
/// (vision_pass.cpp).
void price_pass(const wl::VisionGraph& g, const VisionRunPlan& plan, const Device& d, bool training, bool backward,
                Pricer& pr);
/// The pass's time from its priced kernels (vision_pass.cpp).
VisionPassCost finish(VisionPassCost pc, const VisionRunPlan& plan, const wl::VisionGraph& g, detail::HostMode mode);
/// The device with the plan's per-kernel launch cost (CUDA graph or eager).
Device with_launch(Device d, const VisionRunPlan& plan);

}  // namespace gpuplan::model::detail
