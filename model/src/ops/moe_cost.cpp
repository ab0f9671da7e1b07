// The MoE-layer terms training and serving share (moe_cost.hpp).
#include "moe_cost.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gpuplan::model::detail {

OpCost grouped_gemm(OpCost batched) {
  batched.time = batched.time * kGroupedGemmTimeFactor + units::Seconds(kGroupedGemmFixedSeconds);
  return batched;
}

// The measured parts (data/validation/measured/h100-sxm5-80gb/moe_layer.json and moe_layer_ep4.json,
// scripts/measure/moe_layer.py: one MoE layer, 2K–32K tokens per GPU, Mixtral-like and Qwen3-30B-A3B-like, EP 1/2/4,
// two device calls): each stage's time is linear in the tokens; its intercept at zero tokens is the time that does
// not scale with the work. Medians over the 10 config × EP × call fits:
//  - the routing chain up to the first host sync (router, softmax, top-k, sort, bincount — whose output size the
//    host reads — and the gather into expert order): 0.645 ms (0.52–0.75), the same for 8 or 128 experts, h 2048 or
//    4096: the host's pace, not the GPU's;
//  - the split sizes to the host (`.tolist()`): 0.07 ms (0.05–0.08) at EP 1; with the counts' all-to-all before it,
//    0.32 ms (0.27–0.35) at EP 2 and 4;
//  - the dispatch all-to-all's fixed part beyond NCCL's own latency, the ranks arriving at different times after
//    their syncs: 0.15 ms (0.11–0.24) at EP > 1;
//  - the regroup into expert-major groups after the split sizes arrive (~27 eager kernels: the offsets from the
//    host's lists, cumsums, repeat_interleave, the index tensors, the padded gather), with the grouped GEMMs: the
//    expert stage's intercept, 0.67 ms forward (−0.35…1.05: the spread is the GEMMs' efficiency rising with rows,
//    up or down by shape; the median is the host's part) less the two grouped calls' fixed 2 × 11 µs = 0.64 ms;
//    backward 0.46 ms (−0.56…1.35) less four grouped calls = 0.41 ms (the index gradients' scatter-adds, the cat
//    and pad gradients at the host's pace);
//  - the backward's routing kernels (gather and unpermute gradients, the router's): 0.15 ms (0.09 + 0.06).
MoeHostSync moe_host_sync(bool eager, int ep, wl::EpDispatch dispatch, bool fixed_splits) {
  using units::Seconds;
  MoeHostSync r;
  if (dispatch == wl::EpDispatch::deepep) {
    r.what = "sync-free dispatcher (DeepEP: the receive counts stay on the GPU): no host synchronisation";
    return r;
  }
  if (fixed_splits) {
    // Megatron-LM core_v0.14.0 (23e00ed0) megatron/core/transformer/moe/token_dispatcher.py,
    // MoEAlltoAllTokenDispatcher.preprocess: with drop_and_pad the tokens per expert are torch.full(capacity) and
    // the method returns before any sync point is set (cuda_sync_point stays "no_sync").
    r.what = "fixed split sizes (expert capacity with padding: every expert gets exactly its capacity, known on the "
             "host): no host synchronisation";
    return r;
  }
  const bool multi = ep > 1;
  const Seconds split = Seconds(multi ? 0.32e-3 : 0.07e-3);
  if (!eager) {
    // Megatron-Core's all-to-all dispatcher (token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess) copies the
    // tokens per expert to the host each MoE layer forward (the all-to-all split sizes and the grouped GEMM's
    // m_splits); its permute/unpermute are fused kernels, so only the round trip (and at EP > 1 the counts'
    // exchange before it) is priced, as measured for ours.
    r.syncs = 1;
    r.fwd = split;
    r.what = fmt::format("1 host sync per layer forward (the tokens per expert copied to the host to size the "
                         "all-to-all): {:.2f} ms, measured with our dispatcher (moe_layer*.json, stage "
                         "dispatch_counts_sync){}",
                         split.raw() * 1e3, multi ? ", with the counts' all-to-all" : "");
    return r;
  }
  r.syncs = 2;
  const Seconds route(0.645e-3), skew(multi ? 0.15e-3 : 0.0), regroup(0.64e-3), regroup_bwd(0.41e-3),
      routing_bwd(0.15e-3);
  r.fwd = route + split + skew + regroup;
  r.bwd = regroup_bwd + routing_bwd;
  r.what = fmt::format(
      "eager dispatcher, 2 host syncs per layer forward (bincount's size, the split sizes): routing chain {:.3f} ms + "
      "split sizes {:.2f} ms{} + regroup {:.2f} ms at the host's pace; backward: regroup gradients {:.2f} ms + "
      "routing gradients {:.2f} ms (intercepts of moe_layer*.json's stage times, linear in tokens)",
      route.raw() * 1e3, split.raw() * 1e3,
      multi ? fmt::format(" + all-to-all arrival skew {:.2f} ms", skew.raw() * 1e3) : std::string(),
      regroup.raw() * 1e3, regroup_bwd.raw() * 1e3, routing_bwd.raw() * 1e3);
  return r;
}

OpCost issue_bound_cost(const std::string& name, units::Bytes bytes, units::Flops flops, double elements,
                        double per_sm_cycle, const Device& d) {
  OpCost c = streaming_cost(name, OpClass::elementwise, bytes, flops, d);
  const hw::GpuSpec* g = d.gpu;
  if (g == nullptr || g->compute_units <= 0 || !g->boost_clock_MHz || *g->boost_clock_MHz <= 0 || elements <= 0)
    return c;
  const double per_s = double(g->compute_units) * *g->boost_clock_MHz * 1e6 * per_sm_cycle;
  const units::Seconds launch = kernel_fixed(d, OpClass::elementwise);
  const units::Seconds issue(elements / per_s);
  if (issue > c.time - launch) {
    c.time = issue + launch;
    c.bound = Bound::compute;  // the SMs' instruction issue, not HBM
  }
  return c;
}

OpCost index_put_cost(const std::string& name, units::Bytes bytes, double element_bytes, const Device& d) {
  const double elements = element_bytes > 0 ? bytes.raw() / (2.0 * element_bytes) : 0.0;
  return issue_bound_cost(name, bytes, units::flop(0), elements, kIndexPutElementsPerSmCycle, d);
}

std::int64_t te_grouped_quant_kernels(wl::QuantRecipe r, std::int64_t groups) {
  if (r == wl::QuantRecipe::delayed || r == wl::QuantRecipe::nvfp4) return 1;
  return std::max<std::int64_t>(1, groups);
}

OpCost split_into_kernels(OpCost c, std::int64_t kernels, const Device& d) {
  if (kernels > 1) c.time += kernel_fixed(d, OpClass::elementwise) * double(kernels - 1);
  return c;
}

RouterKernels megatron_router_kernels(bool sigmoid_with_bias, bool group_limited, bool fused, bool token_drop,
                                      bool pad_to_capacity, int tp_cp) {
  RouterKernels r;
  const int allreduce = tp_cp > 1 ? 1 : 0;
  if (fused) {
    r.fwd = 1 + (1 + 1 + allreduce + 1 + 2);  // fused top-k; aux scores, map sum, all-reduce, fused loss, tracker
    r.bwd = 1 + (2 + 1 + 1) + 1;              // fused top-k; auto-scaler, fused loss, aux scores; logits' sum
  } else {
    const int scores = sigmoid_with_bias ? 8 : 2, scores_bwd = sigmoid_with_bias ? 8 : 4;
    const int aux_scores = sigmoid_with_bias ? 10 : 7, aux_scores_bwd = sigmoid_with_bias ? 4 : 1;
    r.fwd = scores + (group_limited ? 8 : 0) + 3 + 5 + (aux_scores + 1 + allreduce + 4 + 2);
    r.bwd = scores_bwd + (2 + 3 + aux_scores_bwd) + 1;
  }
  if (sigmoid_with_bias) r.fwd += 2;  // local_tokens_per_expert += routing_map.sum(dim=0)
  if (token_drop) {
    r.fwd += pad_to_capacity ? 6 : 7;
    r.bwd += 1;
  }
  return r;
}

double moe_dispatch_rows(double T, double k, int ep, bool fixed_capacity) {
  const double n = double(std::max(1, ep));
  return fixed_capacity ? T * k : T * k / n;
}

}  // namespace gpuplan::model::detail
