// The MoE token dispatch and combine of one micro-batch through one MoE layer on an expert-parallel group
// (training_core.hpp: moe_dispatch): NCCL's all-to-all, or DeepSeek-V3's node-deduplicating kernels (DeepEP).
#include <algorithm>

#include "gpuplan/model/graph.hpp"
#include "moe_a2a.hpp"
#include "moe_layer.hpp"
#include "quant_recipe.hpp"
#include "training_core.hpp"

namespace gpuplan::model::detail {

MoeDispatch moe_dispatch(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& g) {
  MoeDispatch r;
  if (!a.moe || g.size <= 1) return r;
  // Tokens per EP rank: the micro-batch's (s/cp)·b, × etp/tp under parallel folding (the unique tokens of the etp
  // sequence shards an expert-TP group holds; etp = tp without folding, the factor 1).
  const double T = double(plan.micro_batch) * double(plan.seq_len) / double(std::max(1, plan.par.cp)) *
                   (double(plan.par.expert_tp()) / double(std::max(1, plan.par.tp)));
  const double k = double(a.moe->experts_per_token), h = double(layer_boundary_width(a));
  const double ab = plan.precision.activation_bytes;
  // The busiest rank's rows over the balanced mean after the expert capacity (TrainingPlan::moe_load): with padding
  // to capacity every rank sends and receives f·k·T rows, the padding included.
  r.imbalance = plan.moe_load();
  // The one MoE dispatch pricer (ops/moe_a2a.hpp), the same serving uses. NCCL's all-to-all moves one copy per
  // (token, expert) row, T·k·h·a_b bytes each way. DeepSeek-V3's kernels (§3.2.2; DeepEP normal kernels) send a token
  // once over InfiniBand to each distinct remote node among its experts' nodes, which forwards it over NVLink; §3.3.2:
  // the dispatch moves FP8 (1 B plus one fp32 scale per 128-element tile) when the GEMMs are FP8, the combine BF16.
  const bool deepep = plan.ep_dispatch == wl::EpDispatch::deepep;
  A2aInput in;
  in.kernel = deepep ? A2aKernel::deepep_normal : A2aKernel::nccl;
  in.tokens = T;
  in.rows = T * k;
  in.top_k = k;
  in.hidden = h;
  in.node_limit = moe_node_limit(a, g.domains());
  in.dispatch_bytes = deepep && plan.precision.compute == hw::Precision::fp8 ? kFp8DispatchBytes : ab;
  in.combine_bytes = ab;
  in.imbalance = r.imbalance;
  const A2aCost c = moe_a2a(in, g);
  r.dispatch = c.dispatch;
  // Megatron-Core's all-to-all dispatcher sends the routing weights in an all-to-all of their own after the tokens'
  // (token_dispatcher.py MoEAlltoAllTokenDispatcher.token_dispatch, core_v0.14.0: all_to_all(ep_group, permuted_probs,
  // ...)), and its backward returns their gradient the same way: one value per row (4 B), a call whose latency is
  // its cost. DeepEP carries the weights in its dispatch; an eager dispatcher (ours, scripts/measure/moe_layer.py)
  // keeps them on the source GPU and weights the combined rows there.
  if (!deepep && plan.kernels != wl::KernelStyle::eager) r.dispatch += moe_all_to_all(T * k, 4.0, g, r.imbalance);
  r.combine = c.combine;
  r.dispatch_bytes = c.dispatch_sent;
  r.combine_bytes = c.combine_sent;
  r.ib_copies = c.nic_copies;
  r.nvlink_copies = c.nvlink_copies;
  r.node_limit = deepep ? c.node_limit : 0.0;
  return r;
}

double paired_gemm_sm_share(const wl::TrainingPlan& plan, const hw::GpuSpec& gpu) {
  if (!plan.dualpipe() || plan.ep_dispatch != wl::EpDispatch::deepep || !one_layout_blockwise(plan)) return 0.0;
  return a2a_sm_share(A2aKernel::deepep_normal, gpu.compute_units, 0.0);
}

}  // namespace gpuplan::model::detail
