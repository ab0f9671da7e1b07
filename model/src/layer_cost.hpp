#pragma once
// Internal to gpuplan::model: the operator list and cost of one transformer layer for one micro-batch on one GPU,
// forward and backward (training.cpp composes layers into a step).
#include <string>
#include <vector>

#include "gpuplan/core/units.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model::detail {

using units::Seconds;

struct PassCost {
  Seconds gemm{}, attention{}, elementwise{}, other{};
  /// Σ (op time)² in s², one op = one kernel: with total() it gives the mean duration of the kernel in flight at a
  /// random instant (kernel_in_flight), which is what a collective launched beside this compute waits on.
  double time_sq_s2 = 0.0;
  [[nodiscard]] Seconds total() const { return gemm + attention + elementwise + other; }
  [[nodiscard]] Seconds kernel_in_flight() const {
    const double t = total().raw();
    return Seconds(t > 0 ? time_sq_s2 / t : 0.0);
  }
  void add(const OpCost& c) {
    switch (c.cls) {
      case OpClass::gemm: gemm += c.time; break;
      case OpClass::attention: attention += c.time; break;
      case OpClass::elementwise: elementwise += c.time; break;
      default: other += c.time; break;
    }
    time_sq_s2 += c.time.raw() * c.time.raw();
  }
  PassCost& operator+=(const PassCost& o) {
    gemm += o.gemm;
    attention += o.attention;
    elementwise += o.elementwise;
    other += o.other;
    time_sq_s2 += o.time_sq_s2;
    return *this;
  }
  /// k times as many of the same ops (a share of the layers): the kernel in flight is unchanged.
  PassCost scaled(double k) const { return {gemm * k, attention * k, elementwise * k, other * k, time_sq_s2 * k}; }
};

struct LayerCost {
  PassCost fwd, bwd;
  units::Flops flops_fwd{}, flops_bwd{};
  std::vector<OpCost> ops;  // for display
};

/// Forward and backward of one transformer layer for one micro-batch on one GPU. `keep_ops` false: no op list and
/// no op names (the search's term caches need only the sums).
LayerCost layer_cost(const wl::TransformerArch& a, const wl::TrainingPlan& plan, bool moe_layer, bool sliding,
                     const Device& d, bool keep_ops = true);

}  // namespace gpuplan::model::detail
