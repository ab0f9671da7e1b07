#pragma once
// Internal to gpuplan::model: the operator list and cost of one transformer layer for one micro-batch on one GPU,
// forward and backward (training.cpp composes layers into a step).
#include <string>
#include <vector>

#include "gpuplan/core/units.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"
#include "moe_layer.hpp"

namespace gpuplan::model::detail {

using units::Seconds;

struct PassCost {
  Seconds gemm{}, attention{}, elementwise{}, other{};
  /// GEMM and attention kernels counted (one op = one kernel): the long, SM-filling kernels a collective launched
  /// beside this compute waits behind. kernel_in_flight = their mean duration (a mean, so that no kernel getting
  /// faster can lengthen it: the step stays monotone in every peak and bandwidth, tests/property).
  double compute_kernels = 0.0;
  /// The weight-gradient GEMMs among `gemm` (a part of it, not added to total()): W of the DualPipe bubble, the work
  /// a zero-bubble schedule can defer.
  Seconds wgrad{};
  [[nodiscard]] Seconds total() const { return gemm + attention + elementwise + other; }
  [[nodiscard]] Seconds kernel_in_flight() const {
    return compute_kernels > 0 ? (gemm + attention) / compute_kernels : Seconds(0);
  }
  void add(const OpCost& c) {
    switch (c.cls) {
      case OpClass::gemm: gemm += c.time; compute_kernels += 1; break;
      case OpClass::attention: attention += c.time; compute_kernels += 1; break;
      case OpClass::elementwise: elementwise += c.time; break;
      default: other += c.time; break;
    }
  }
  PassCost& operator+=(const PassCost& o) {
    gemm += o.gemm;
    attention += o.attention;
    elementwise += o.elementwise;
    other += o.other;
    compute_kernels += o.compute_kernels;
    wgrad += o.wgrad;
    return *this;
  }
  /// k times as many of the same ops (a share of the layers): the mean kernel is unchanged.
  PassCost scaled(double k) const {
    return {gemm * k, attention * k, elementwise * k, other * k, compute_kernels * k, wgrad * k};
  }
};

struct LayerCost {
  PassCost fwd, bwd;
  /// The forward work the plan's recompute modules (wl::RecomputeModule) repeat in the backward: the norms, MLA's
  /// up-projections, the experts' activation. Zero without recompute modules.
  PassCost rec;
  units::Flops flops_fwd{}, flops_bwd{};
  std::vector<OpCost> ops;  // for display
  MoeLayerTerms moe;        ///< an MoE layer's terms, forward + backward (dispatch/combine: moe_dispatch)
};

/// The device with the per-kernel fixed costs of a kernel replayed from a CUDA graph (training's
/// wl::CudaGraphScope): serving's launch mechanism, one place (serving.hpp apply_launch_costs): each kernel class's
/// measured in-graph cost where the GPU's profile has them (EfficiencyProfile::graph_class), else the one in-graph
/// cost of ServingPerfPlan::kernel_overhead_graph (use_measured_overheads takes a calibration profile's).
Device graph_launch_device(const Device& d);

/// Forward and backward of one transformer layer for one micro-batch on one GPU. `keep_ops` false: no op list and
/// no op names (the search's term caches need only the sums).
LayerCost layer_cost(const wl::TransformerArch& a, const wl::TrainingPlan& plan, LayerKind kind, const Device& d,
                     bool keep_ops = true);

}  // namespace gpuplan::model::detail
