#pragma once
// Internal to gpuplan::model's serve/: what the serving forward (serving.cpp), the layer pricer behind it
// (serving_layer.cpp) and the capacity planner (serving_plan.cpp) share.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_timeline.hpp"
#include "gpuplan/model/topology.hpp"
#include "moe_a2a.hpp"
#include "moe_layer.hpp"

namespace gpuplan::model::detail {

using units::Bytes;
using units::Seconds;

/// One priced op as forward_trace records it.
PassItem pass_item(const OpCost& c);

/// Per-stage accumulation of a layer's ops.
struct Acc {
  Seconds gemm{}, attention{}, elementwise{}, comm{};
  units::Flops flops{};
  Bytes weights{}, kv{};
  std::int64_t kernels = 0;      ///< kernel calls the host issues (eager: one CPU cost each)
  std::int64_t gpu_kernels = 0;  ///< kernels that run: the calls and what each launches beyond (OpCost::extra_kernels)
  std::array<double, kHostCalls> host_calls{};  ///< the host's calls by kind (eager: each at its measured cost)
  std::vector<OpCost> ops;
  bool tracing = false;          ///< record every kernel and collective in issue order (forward_trace)
  std::vector<PassItem> items;   ///< what tracing records
  MoeLayerTerms moe;             ///< one MoE layer's terms (moe_layer.hpp), recorded as its ops are added
  /// A call of its class's host kind: a GEMM's, the attention's, any other kernel's as a two-operand elementwise op.
  void add(const OpCost& c, bool keep) {
    add(c, keep, c.cls == OpClass::gemm ? HostCall::gemm : c.cls == OpClass::attention ? HostCall::attention
                                                                                       : HostCall::binary);
  }
  void add(const OpCost& c, bool keep, HostCall host) {
    record(c, keep);
    host_calls[std::size_t(host)] += 1.0;
    if (tracing) items.back().host_call = host;
  }
  /// A kernel that the call before it launches (the index buffers and copies inside a sort, a scan's first pass, the
  /// grouped GEMM's data preparation): a kernel the GPU runs, no host call of its own.
  void add_inner(const OpCost& c, bool keep) {
    record(c, keep);
    if (tracing) items.back().own_call = false;
  }
  void record(const OpCost& c, bool keep) {
    switch (c.cls) {
      case OpClass::gemm: gemm += c.time; break;
      case OpClass::attention: attention += c.time; break;
      default: elementwise += c.time; break;
    }
    flops += c.flops;
    ++kernels;
    gpu_kernels += 1 + c.extra_kernels;
    if (keep) ops.push_back(c);
    if (tracing) items.push_back(pass_item(c));
  }
  /// A collective of `n` kernels on the compute stream (serving engines do not overlap them with the layer's work).
  void add_comm(const char* name, PassItem::Kind kind, Seconds t, std::int64_t n) {
    comm += t;
    kernels += n;
    gpu_kernels += n;
    host_calls[std::size_t(HostCall::other)] += double(n);
    if (tracing && n > 0)
      items.push_back(PassItem{name, kind, t, n, fmt::format("{}: collective on the compute stream, {}", name,
                                                             units::format(t))});
  }
  [[nodiscard]] Seconds total() const { return gemm + attention + elementwise + comm; }
  Acc& scale_add(const Acc& o, double k) {
    gemm += o.gemm * k;
    attention += o.attention * k;
    elementwise += o.elementwise * k;
    comm += o.comm * k;
    flops += o.flops * k;
    weights += o.weights * k;
    kv += o.kv * k;
    kernels += std::llround(double(o.kernels) * k);
    gpu_kernels += std::llround(double(o.gpu_kernels) * k);
    for (std::size_t i = 0; i < kHostCalls; ++i) host_calls[i] += o.host_calls[i] * k;
    return *this;
  }
  /// The host's time to issue these calls in eager mode: each at its kind's measured cost, or kernels ×
  /// plan.cpu_per_kernel where the plan gives one figure (--cpu-per-kernel-us).
  [[nodiscard]] Seconds host(const ServingPerfPlan& plan) const {
    if (!plan.cpu_cost_by_op) return plan.cpu_per_kernel * double(kernels);
    Seconds s{};
    for (std::size_t i = 0; i < kHostCalls; ++i) s += eager_host_per_call(HostCall(i)) * host_calls[i];
    return s;
  }
};

/// The GPU as a serving engine runs it: sustained ceilings, the plan's per-kernel overhead and weight-only kernels.
Device serving_device(const ServingPerfPlan& plan, const ServingSystem& sys);
/// One layer (of a kind) on one GPU for one forward batch (serving_layer.cpp).
Acc layer_forward(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb, LayerKind kind,
                  const Device& d, const KvTokenBytes& kvt, const CommGroup& tp_g, const CommGroup& ep_g, bool keep,
                  bool trace);
/// The explain node of one MoE layer of a forward (serving_layer.cpp).
Derivation explain_serving_moe(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                               LayerKind kind, const Acc& layer, const Device& d, const KvTokenBytes& kvt,
                               const CommGroup& tp_g, const CommGroup& ep_g);

/// The MoE dispatcher of a serving pass (ep_overlap.cpp): the kernels the plan's backend and DeepEP mode pick for
/// this batch, their input to the one dispatch pricer (ops/moe_a2a.hpp) for `tokens_per_gpu` tokens and `rows`
/// token-expert rows sent by one GPU, and the explain note that says which and why.
A2aKernel serving_a2a_kernel(const ServingPerfPlan& plan, const ForwardBatch& fb);
A2aInput serving_a2a_input(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                           double tokens_per_gpu, double rows, bool fixed_capacity, const CommGroup& ep_g);
std::string serving_a2a_note(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                             const CommGroup& ep_g);
/// Two-batch overlap (ep_overlap.cpp): whether it applies (plan on, MoE, EP > 1, at least 2 tokens); one layer of the
/// kind as the two halves run it (2 × the half batch, each half's all-to-all exposed only beyond the other half's
/// compute); its explain node (`full`: the same layer priced for the whole batch in one pass).
bool tbo_applies(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb);
Acc tbo_layer(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb, LayerKind kind,
              const Device& d, const KvTokenBytes& kvt, const CommGroup& tp_g, const CommGroup& ep_g);
Derivation explain_tbo(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                       LayerKind kind, const Acc& full, const Device& d, const KvTokenBytes& kvt,
                       const CommGroup& tp_g, const CommGroup& ep_g);

/// The planner's pieces that the disaggregated pools reuse (serving_plan.cpp): the batch sizes it tries up to `max_b`,
/// ⌈x⌉ replicas (saturating, with `saturated` set, past its ceiling), whether TP `tp` splits the model's heads and
/// widths.
std::vector<std::int64_t> planner_batch_grid(std::int64_t max_b);
std::int64_t planner_replicas_for(double x, bool& saturated);
bool planner_tp_valid(const wl::TransformerArch& a, int tp);

}  // namespace gpuplan::model::detail
