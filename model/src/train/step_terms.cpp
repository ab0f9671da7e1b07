// The terms of one training step, each priced once and shared by estimate_training and the search
// (training_core.hpp): the device and constants, one micro-batch's compute per layer kind with the embedding, head and
// loss, the messages and collective times of each parallel group, the DP reduce/gather, the FSDP/DDP and AMP copies,
// the optimizer step and the host offload. compose_step.cpp composes them into the step.
#include "gpuplan/model/training.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/topology.hpp"
#include "fp8_quant.hpp"
#include "quant_recipe.hpp"
#include "training_core.hpp"
#include "optimizer_rate.hpp"

namespace gpuplan::model {

using units::Bytes;
using units::Seconds;

namespace detail {

Device training_device(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  // Training is sustained work: the calibrated GEMM ceilings (from the sweep's short bursts) at the sustained rate.
  return sustained_device(*sys.gpu, sys.efficiency, plan.attention_kernel);
}

TrainingConsts training_consts(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  TrainingConsts k;
  k.d = training_device(plan, sys);
  k.params = parameter_counts(a, Explain::off);
  k.fpt = flops_per_token(a, plan.seq_len, Explain::off);
  k.head_forward = units::flop(2.0 * double(build_head_graph(a).matmul_per_token()));
  k.moe_layers = double(a.moe_layer_count());
  k.parameter_tensors = parameter_tensors(a);
  if (plan.lora.on()) {
    // LoRA model FLOPs: the frozen weights run forward and dgrad only (2 + 2 per weight and token, as NeMo counts
    // its LoRA "model TFLOP/s"), attention forward and backward (3×), the adapters all three passes (6 per adapter
    // weight a token uses: routed experts' adapters in the proportion k/E of the experts a token visits).
    double adapters_per_token = 0;
    const LoraLayerParams ld = lora_layer_params(a, plan.lora, false), lm = lora_layer_params(a, plan.lora, true);
    const double n_moe = double(a.moe_layer_count()), n_dense = double(a.layers) - n_moe;
    adapters_per_token += n_dense * (ld.dense + ld.expert) + n_moe * lm.dense;
    if (a.moe) adapters_per_token += n_moe * lm.expert * double(a.moe->experts_per_token) / double(a.moe->num_experts);
    k.fpt.training = k.fpt.matmul_forward * 2.0 + (k.fpt.attention_forward + k.fpt.ssm_forward) * 3.0 +
                     units::flop(6.0 * adapters_per_token);
  }
  k.price = sys.price ? sys.price : sys.gpu->price;
  return k;
}

LossBytes loss_bytes_per_logit(const wl::TrainingPlan& plan) {
  // HBM traffic per logit of the vocabulary shard (16-bit logits of a_b bytes, fp32 = 4 B).
  const double e = plan.precision.activation_bytes;
  // FlashAttention's xentropy (any kernel style): the forward reads the logits once (a_b; the per-row loss and lse are
  // negligible), the backward reads them again and writes the gradient (a_b + a_b).
  if (plan.cross_entropy == wl::CrossEntropyKernel::flash) return {e, 2.0 * e, "FlashAttention xentropy"};
  if (plan.eager_loss())
    // PyTorch's cross_entropy under autocast (or over logits upcast by .float(), TorchTitan's loss_fn: the same
    // passes): upcast (2 + 4 B) and log_softmax forward; fill (4 B),
    // log_softmax_backward and the cast back (4 + 2 B) backward. A vocabulary row (V/tp fp32 values, 128 KiB and
    // more) does not fit in shared memory, so the softmax kernels make a pass per reduction: forward reads the row
    // for its max, for its sum of exponentials and for the output (3 × 4 + 4 B), backward reads the gradient for its
    // sum and again with the output (3 × 4 + 4 B). 22 + 26 B; measured on H100 (scripts/measure/loss_kernels.py,
    // data/validation/measured/h100-sxm5-80gb/loss_kernels.json: T = 8192, V = 32K-128K) at 49-51 B per logit in
    // units of the copy bandwidth.
    return {22.0, 26.0, "PyTorch eager"};
  switch (plan.cross_entropy) {
    case wl::CrossEntropyKernel::unfused:
      // megatron/core/tensor_parallel/cross_entropy.py: .float() (a_b + 4), max (4), in-place subtract (4 + 4),
      // exp (4 + 4), sum (4), softmax div_ (4 + 4) forward; the gradient's mul_ (4 + 4) and autograd's cast back to
      // the logits' dtype (4 + a_b) backward. The target gathers touch one logit per token (not counted). Measured
      // (the same passes in PyTorch, loss_kernels.json): 58.6 B per logit at the calibrated streaming rate, i.e. this
      // count is 11% fast (the row reductions run below the copy rate).
      return {e + 36.0, 12.0 + e, "Megatron-Core unfused"};
    case wl::CrossEntropyKernel::native:
      // megatron/core/fusions/fused_cross_entropy.py: the same steps in three jit-fused kernels forward — upcast
      // with max (a_b + 4), subtract+exp+sum (4 + 4), normalisation (4 + 4) — and one backward (4 + 4) plus the
      // cast back (4 + a_b).
      return {e + 20.0, 12.0 + e, "Megatron-Core jit-fused"};
    case wl::CrossEntropyKernel::te:
    case wl::CrossEntropyKernel::eager:  // handled above
    case wl::CrossEntropyKernel::flash:
      break;
  }
  // One fused pass: read the logits, keep fp32 row statistics and write the gradient (a_b + 4); the backward scales
  // the gradient (4 + a_b). Measured: Inductor's fused cross_entropy forward and backward, 11.6 B per logit
  // (loss_kernels.json).
  return {e + 4.0, 4.0 + e, "fused, one pass"};
}

ComputeTerms compute_terms(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const Device& d,
                           LayerCost* first) {
  ComputeTerms c;
  const auto& par = plan.par;
  // One micro-batch through each layer kind ({mixer} × {FFN}, graph.hpp); layers of one kind cost the same.
  const std::int64_t L = a.layers;
  // The kinds met so far and their costs (a model has a few: an array of LayerCost over every kind, zeroed per call,
  // cost the search more than the layers' pricing).
  std::vector<std::pair<std::size_t, LayerCost>> kinds;
  for (std::int64_t l = 0; l < L; ++l) {
    const LayerKind kind = LayerKind::of(a, l);
    const auto k = static_cast<std::size_t>(kind.index());
    const LayerCost* lc = nullptr;
    for (const auto& e : kinds)
      if (e.first == k) lc = &e.second;
    if (lc == nullptr) {
      lc = &kinds.emplace_back(k, layer_cost(a, plan, kind, d, first != nullptr)).second;
      if (first != nullptr && l == 0) *first = *lc;
    }
    c.fwd_all += lc->fwd;
    c.bwd_all += lc->bwd;
  }
  std::sort(kinds.begin(), kinds.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  for (const auto& [k, lc] : kinds) {
    c.kind_fwd[k] = lc.fwd;
    c.kind_bwd[k] = lc.bwd;
    c.kind_rec[k] = lc.rec;
    c.kind_list[c.kind_count++] = static_cast<std::uint8_t>(k);
  }
  // Embedding (first stage) and LM head + loss (last stage).
  const std::int64_t T = plan.micro_batch * plan.seq_len / par.cp;
  const double e = plan.precision.activation_bytes;
  const std::int64_t v_local = a.vocab / par.tp;
  const std::string none;
  const bool names = first != nullptr;
  // The output layer stays 16-bit under fp8 training (sixteen_bit_of: Megatron's output layer is outside TE's fp8).
  // A full-iteration CUDA graph (wl::CudaGraphScope::full_iteration: Megatron-Core's whole forward-backward of the
  // micro-batches, not the optimizer step) captures the embedding, the LM head and the loss too: the in-graph fixed
  // cost per kernel (graph_launch_device, serving's mechanism).
  std::optional<Device> in_graph;
  if (plan.cuda_graphs == wl::CudaGraphScope::full_iteration) in_graph = graph_launch_device(d);
  const Device& hd = in_graph ? *in_graph : d;
  const hw::Precision head_p = sixteen_bit_of(plan.precision.compute);
  OpCost head_f = gemm_cost(names ? "LM head" : none, {T, v_local, a.hidden, 1}, head_p, hd);
  OpCost head_dg = gemm_cost(names ? "LM head dgrad" : none, {T, a.hidden, v_local, 1}, head_p, hd);
  OpCost head_wg = gemm_cost(names ? "LM head wgrad" : none, {a.hidden, v_local, T, 1}, head_p, hd);
  if (wgrad_accumulates(plan) && !plan.lora.on())
    head_wg = accumulating_wgrad(head_wg, double(a.hidden) * double(v_local), plan.precision.gradient_bytes, hd);
  const LossBytes ce = loss_bytes_per_logit(plan);
  OpCost loss_f = streaming_cost(names ? "cross-entropy (" + ce.kernel + ")" : none, OpClass::loss,
                                 units::bytes((double(T) * double(v_local)) * ce.forward),
                                 units::flop(5.0 * (double(T) * double(v_local))), hd);
  OpCost loss_b = streaming_cost(names ? "cross-entropy bwd (" + ce.kernel + ")" : none, OpClass::loss,
                                 units::bytes((double(T) * double(v_local)) * ce.backward),
                                 units::flop(3.0 * (double(T) * double(v_local))), hd);
  OpCost embed = streaming_cost(none, OpClass::embedding, units::bytes((double(T) * double(a.hidden)) * e * 2.0), units::flop(0), hd);
  // LoRA: the LM head and the embedding are frozen: no weight-gradient GEMM, no gradient scatter-add.
  const bool frozen = plan.lora.on();
  c.head_time = head_f.time + head_dg.time + (frozen ? Seconds(0) : head_wg.time) + loss_f.time + loss_b.time;
  if (names) {
    c.head_ops = {head_f, head_dg};
    if (!frozen) c.head_ops.push_back(head_wg);
    c.head_ops.push_back(loss_f);
    c.head_ops.push_back(loss_b);
  }
  c.embed_time = embed.time * (frozen ? 1.0 : 3.0);  // lookup (+ gradient scatter-add)
  if (plan.mtp_layers > 0) {
    // DeepSeek-V3 §2.2.1: h' = M·[RMSNorm(h); RMSNorm(Emb(t))], M of h × 2h, then one transformer block (priced with
    // the stage's layers) and the shared output head with its loss (the same cost as the main model's).
    const std::int64_t h2 = 2 * a.hidden;
    const OpCost pf = gemm_cost(none, {T, a.hidden, h2, 1}, plan.precision.compute, hd);
    const OpCost pd = gemm_cost(none, {T, h2, a.hidden, 1}, plan.precision.compute, hd);
    const OpCost pw = gemm_cost(none, {h2, a.hidden, T, 1}, plan.precision.compute, hd);
    c.mtp_extra = pf.time + pd.time + pw.time + c.head_time;
  }
  return c;
}

double tp_message_elements(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  const std::int64_t T = plan.micro_batch * plan.seq_len / plan.par.cp;
  return double(T) * double(a.hidden);
}

Bytes tp_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  return units::bytes(tp_message_elements(a, plan) * plan.precision.activation_bytes);
}

Bytes cp_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  // The K/V a layer caches per token (the graph's attention op, attention_cache_elements): MLA's latent is whole on
  // every TP rank, K and V are split by heads.
  const std::int64_t kv_dim = a.mla ? attention_cache_elements(a) : attention_cache_elements(a) / plan.par.tp;
  return units::bytes((double(plan.micro_batch) * double(plan.seq_len) * double(kv_dim)) * plan.precision.activation_bytes);
}

Bytes ep_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  const std::int64_t T = plan.micro_batch * plan.seq_len / plan.par.cp;
  const std::int64_t k = a.moe ? a.moe->experts_per_token : 0;
  // × etp/tp: the rows an expert-TP group gathers (moe_dispatch); 1 without parallel folding.
  return units::bytes((double(T) * double(k) * double(a.hidden)) * plan.precision.activation_bytes *
                      (double(plan.par.expert_tp()) / double(std::max(1, plan.par.tp))));
}

bool pp_message_split(const wl::TrainingPlan& plan) {
  return plan.par.tp > 1 && (plan.par.sequence_parallel || plan.pp_scatter_gather);
}

Bytes pp_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  // Megatron-Core sends the (s/cp)·b·h boundary tensor, sequence-sharded over TP with sequence parallelism
  // (schedules.py get_tensor_shapes); the scatter/gather optimisation (Narayanan et al. 2021 §4.1, Megatron-LM's
  // scatter_gather_tensors_in_pipeline until March 2023) sends 1/tp of it without sequence parallelism too.
  const std::int64_t T = plan.micro_batch * plan.seq_len / plan.par.cp;
  return units::bytes((double(T) * double(a.hidden)) * plan.precision.activation_bytes /
                      (pp_message_split(plan) ? double(plan.par.tp) : 1.0));
}

GpuParams params_per_gpu(const ParameterCounts& params, const wl::TrainingPlan& plan) {
  // approx: even stages. DualPipe: each device holds two stages (DeepSeek-V3 Table 2: 2× parameters).
  // Routed experts: split over the expert TP and EP ranks of the stage (etp·ep; etp = tp without parallel folding).
  const double stages = double(plan.par.pp) / (plan.dualpipe() ? 2.0 : 1.0);
  const double tp_pp = double(plan.par.tp) * stages;
  const double routed = double(params.routed_experts);
  return {(double(params.total) - routed) / tp_pp, routed / (double(plan.par.expert_shard()) * stages)};
}

GpuParams trainable_per_gpu(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan) {
  if (!plan.lora.on()) return params_per_gpu(params, plan);
  return {lora_adapter_params(a, plan.lora) / (double(plan.par.tp) * double(plan.par.pp)), 0.0};
}

int dense_grad_group_size(const wl::TrainingPlan& plan) {
  return plan.par.dp * std::max(1, plan.par.cp) * stage_copies(plan);
}

int expert_grad_group_size(const wl::TrainingPlan& plan) {
  // Megatron-Core's expert-data-parallel group: tp·cp·dp / (etp·ep) ranks of a stage (dp·cp / ep when etp = tp);
  // × 2 under DualPipe (the mirror rank's copy, stage_copies).
  return static_cast<int>(std::max<long long>(1, plan.par.expert_dp())) * stage_copies(plan);
}

CommGroup grad_comm_group(int size, int stride, const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  CommGroup g = grad_comm_group_tiers(size, stride, plan, sys);
  g.max_ctas = plan.dp_max_ctas;  // the DP communicators' CTA cap (--dp-max-ctas)
  return g;
}

CommGroup grad_comm_group_tiers(int size, int stride, const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  const int copies = stage_copies(plan);
  if (copies == 1 || sys.node == nullptr) return training_comm_group(size, stride, sys);
  // DualPipe: the mirror copies sit (PP − 1 − 2i)·tp·cp·dp ranks away (Megatron's rank order, PP outermost), in
  // another scale-up domain unless the whole pipeline fits in one.
  const auto& par = plan.par;
  const int grid = par.tp * std::max(1, par.cp) * par.dp;
  if (grid * par.pp <= std::max(1, sys.node->scale_up.domain_gpus)) return training_comm_group(size, stride, sys);
  const int half = size / copies;
  if (half <= 1) return training_comm_group(copies, grid * (par.pp - 1), sys);
  CommGroup g = training_comm_group(half, stride, sys);
  g.size = size;  // the same members per domain, twice the domains
  return g;
}

double dp_reduced_params(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan) {
  const GpuParams p = trainable_per_gpu(a, params, plan);
  return (dense_grad_group_size(plan) > 1 ? p.dense : 0.0) + (expert_grad_group_size(plan) > 1 ? p.experts : 0.0);
}

Seconds tp_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& tp_g) {
  const Bytes act = tp_message(a, plan);
  return plan.par.sequence_parallel
             ? collective_time(Collective::all_gather, act, tp_g) + collective_time(Collective::reduce_scatter, act, tp_g)
             : collective_time(Collective::all_reduce, act, tp_g);
}

Seconds tp_gather_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& tp_g) {
  return collective_time(Collective::all_gather, tp_message(a, plan), tp_g);
}

TpQuantTimes tp_quant_times(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& tp_g) {
  TpQuantTimes q;
  if (!quantised_tp_gathers(plan)) return q;
  const double elems = tp_message_elements(a, plan);
  const TpGatherBytes b = tp_gather_bytes(plan.precision.recipe);
  auto gather = [&](double bytes_per_element) {
    return collective_time(Collective::all_gather, units::bytes(elems * bytes_per_element), tp_g);
  };
  q.reduce_scatter = collective_time(Collective::reduce_scatter, tp_message(a, plan), tp_g);
  q.pair_fwd = gather(b.input) + q.reduce_scatter;
  q.pair_bwd = gather(b.grad) + q.reduce_scatter;
  q.regather = gather(b.regather);
  if (tp_amax_reduction(plan.precision.recipe))
    q.amax = collective_time(Collective::all_reduce, units::bytes(4.0), tp_g);
  return q;
}

bool expert_tp_folded(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  return a.moe.has_value() && plan.par.expert_tp() != plan.par.tp;
}

Seconds etp_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& etp_g) {
  const Bytes act = tp_message(a, plan) * (double(plan.par.expert_tp()) / double(std::max(1, plan.par.tp)));
  return plan.par.sequence_parallel || plan.par.tp == 1
             ? collective_time(Collective::all_gather, act, etp_g) +
                   collective_time(Collective::reduce_scatter, act, etp_g)
             : collective_time(Collective::all_reduce, act, etp_g);
}

Seconds cp_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& cp_g) {
  const Bytes kv = cp_message(a, plan);
  return collective_time(Collective::all_gather, kv, cp_g) * 2.0 + collective_time(Collective::reduce_scatter, kv, cp_g);
}

Seconds ep_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& ep_g) {
  const MoeDispatch md = moe_dispatch(a, plan, ep_g);
  return (md.dispatch + md.combine) * 0.5;
}

Seconds pp_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& pp_g) {
  return collective_time(Collective::send_recv, pp_message(a, plan), pp_g);
}

Seconds pp_gather_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& tp_g) {
  // The scattered message is all-gathered over TP by the receiver (gather_split_1d_tensor) before its chunk runs.
  if (!plan.pp_scatter_gather || plan.par.sequence_parallel || plan.par.tp <= 1) return Seconds(0);
  return collective_time(Collective::all_gather, pp_message(a, plan) * double(plan.par.tp), tp_g);
}

double dp_last_unit_params(const ParameterCounts& params, const wl::TrainingPlan& plan, const DpBuckets& buckets) {
  // The unit reduced last (its gradients appear last in the backward, so nothing is left to hide its collective)
  // and the unit gathered first (before the first layer can run):
  //  - FSDP / ZeRO-3: the root unit, which holds what no decoder layer owns: the embedding, the final norm and an
  //    untied LM head;
  //  - buckets (DDP, Megatron): the bucket of the embedding's gradient, the last one produced, as dp_buckets forms
  //    it (tensor by tensor: the embedding and whatever the walk left open before it).
  const double tp = double(plan.par.tp);
  const double emb = double(params.embedding + params.position_embedding) / tp;
  const double unit = plan.zero == wl::ZeroStage::parameters ? emb + double(params.lm_head) / tp
                                                             : buckets.last;
  return std::min(unit, params_per_gpu(params, plan).dense);
}

DpTimes dp_collective_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                            const CommGroup& dp_group, const CommGroup& expert_group) {
  return dp_collective_times(a, params, plan, dp_group, expert_group, dp_buckets(a, plan));
}

DpTimes dp_collective_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                            const CommGroup& dp_group, const CommGroup& expert_group, const DpBuckets& buckets) {
  DpTimes t;
  // The DP communicators' CTA cap (--dp-max-ctas), whoever resolved the groups (a group is copied only when its cap
  // differs: the search prices this per DP term, and a group's copy cost more than its collectives).
  CommGroup dp_capped, expert_capped;
  auto capped = [&plan](const CommGroup& g, CommGroup& copy) -> const CommGroup& {
    if (g.max_ctas == plan.dp_max_ctas) return g;
    copy = g;
    copy.max_ctas = plan.dp_max_ctas;
    return copy;
  };
  const CommGroup& dp_g = capped(dp_group, dp_capped);
  const CommGroup& expert_g = capped(expert_group, expert_capped);
  const GpuParams p_gpu = params_per_gpu(params, plan), p_train = trainable_per_gpu(a, params, plan);
  const double base_b = base_weight_bytes(plan);
  // ZeRO-3 gathers the (frozen or not) weights for compute; ZeRO-1/2 gather the updated shards after the optimizer
  // step: the trainable ones only.
  const bool zero3 = plan.zero == wl::ZeroStage::parameters;
  const Bytes grads = units::bytes(p_train.dense * plan.precision.gradient_bytes);
  const Bytes weights = units::bytes(zero3 ? p_gpu.dense * base_b : p_train.dense * plan.precision.weight_bytes);
  // The routed experts' gradients and weights travel over the expert-data-parallel group (Megatron-Core keeps them in
  // their own buffers, reduced over the expert-data-parallel group: distributed/distributed_data_parallel.py).
  const Bytes expert_grads = units::bytes(p_train.experts * plan.precision.gradient_bytes);
  const Bytes expert_weights =
      units::bytes(zero3 ? p_gpu.experts * base_b : p_train.experts * plan.precision.weight_bytes);
  // The buckets (dp_buckets) and the unit reduced last and gathered first (dp_last_unit_params).
  t.buckets = buckets;
  const double unit = dp_last_unit_params(params, plan, t.buckets);
  t.last_unit = unit;
  // LoRA: the embedding and LM head are frozen; the last reduction is one bucket of adapter gradients.
  const double unit_train = plan.lora.on() ? std::min(unit, p_train.dense) : unit;
  const Bytes unit_grads = units::bytes(unit_train * plan.precision.gradient_bytes);
  const Bytes unit_weights = units::bytes(zero3 ? unit * base_b : unit_train * plan.precision.weight_bytes);
  if (plan.zero == wl::ZeroStage::none) {
    t.reduce = collective_time(Collective::all_reduce, grads, dp_g) +
               collective_time(Collective::all_reduce, expert_grads, expert_g);
    t.reduce_last = collective_time(Collective::all_reduce, unit_grads, dp_g);
  } else {
    t.reduce = collective_time(Collective::reduce_scatter, grads, dp_g) +
               collective_time(Collective::reduce_scatter, expert_grads, expert_g);
    t.gather = collective_time(Collective::all_gather, weights, dp_g) +
               collective_time(Collective::all_gather, expert_weights, expert_g);
    t.reduce_last = collective_time(Collective::reduce_scatter, unit_grads, dp_g);
    t.gather_first = collective_time(Collective::all_gather, unit_weights, dp_g);
    if (zero3 && plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking) {
      // One collective per parameter tensor (DeepSpeed 0.3.13-0.5.x: partition_parameters.py _allgather_param,
      // _reduce_scatter_gradient) through torch.distributed on the NCCL of 2021
      // (2.7-2.10), which runs all-gather and reduce-scatter as rings only (tree and NVLS serve all-reduce; no
      // two-level scheme): every call pays the ring's n - 1 steps of latency. The bytes are priced as one ring call;
      // each further tensor of a layer is its own call, priced as a ring call of one h-element vector (latency-bound:
      // at 1536 ranks about 7.3 ms on DGX A100).
      const auto ring = [&dp_g](Collective op, Bytes b) {
        return collective_cost(op, b, dp_g, CollectiveAlgorithm::ring, Explain::off).time;
      };
      // Tensors as the PyTorch modules hold them (parameter_tensors; GPT-3 175B: 12 per layer, 2 LayerNorms × weight
      // and bias, fused QKV, O, fc1, fc2 × weight and bias, + embedding, positions, final norm: 1156).
      const double extra = std::max(0.0, stage_parameter_tensors(a, plan) - 1.0);
      const Bytes vec = units::bytes(double(a.hidden) * base_b);
      t.reduce = ring(Collective::reduce_scatter, grads) + ring(Collective::reduce_scatter, vec) * extra;
      t.gather = ring(Collective::all_gather, weights) + ring(Collective::all_gather, vec) * extra;
      t.reduce_last = ring(Collective::reduce_scatter, unit_grads);
      t.gather_first = ring(Collective::all_gather, unit_weights);
    }
  }
  return t;
}

double zero3_gathers_per_microbatch(const wl::TrainingPlan& plan) {
  // Forward and backward (the parameters are released after each use). DeepSpeed's per-tensor fetch also gathers
  // again for the recomputed forward under full recomputation: the checkpointed layer's forward runs its submodules'
  // pre-forward hooks (stage3.py fetch_sub_module) and their post-forward hooks release them again, since a layer of
  // more than max_reuse_distance (1e9) parameters is not kept for its backward (_keep_for_later).
  if (plan.zero != wl::ZeroStage::parameters) return 1.0;
  return plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking && plan.recompute == wl::Recompute::full ? 3.0
                                                                                                          : 2.0;
}


double fsdp_copy_bytes(const ParameterCounts& params, const wl::TrainingPlan& plan) {
  // PyTorch FSDP2 (fully_shard, one unit per decoder layer + the root) moves every parameter through copies around its
  // collectives (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py):
  //  - all-gather copy-in: the local shard cast to the compute dtype into the all-gather input, (b_w + c) B per
  //    shard parameter, at every gather;
  //  - all-gather copy-out: the gathered flat buffer split into the unsharded parameters, 2·c B per parameter;
  //  - reduce-scatter copy-in: the unsharded gradients (compute dtype) into the reduce-scatter input in the reduce
  //    dtype, (c + b_g) B per parameter, once per micro-batch.
  // The decoder layers are gathered for the forward and again for the backward (reshard_after_forward); the root
  // (embedding, final norm, LM head) once.
  // Routed experts are sharded over the expert-data-parallel group instead (expert_optimizer_shard).
  const auto& pr = plan.precision;
  const double shard = optimizer_shard(plan), shard_e = expert_optimizer_shard(plan);
  const GpuParams p_gpu = params_per_gpu(params, plan);
  const double root = std::min(p_gpu.dense, double(params.embedding + params.position_embedding + params.lm_head) /
                                                double(std::max(1, plan.par.tp)));
  const double cd = plan.mixed_precision == wl::MixedPrecision::amp ? pr.activation_bytes : base_weight_bytes(plan);
  const double gathered = 2.0 * (p_gpu.dense - root) + root;  // dense parameters gathered per micro-batch
  const double gathered_e = 2.0 * p_gpu.experts;               // expert parameters gathered per micro-batch
  const double m = double(std::max<std::int64_t>(1, plan.micro_batches()));
  const double trainable = plan.lora.on() ? 0.0 : p_gpu.total();  // LoRA: the adapters' gradients only (negligible)
  const double in = base_weight_bytes(plan) + cd;
  return m * (gathered * (2.0 * cd + in / shard) + gathered_e * (2.0 * cd + in / shard_e) +
              trainable * (cd + pr.gradient_bytes));
}

Seconds dp_copy_time(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                     const Device& d) {
  // Counted on the compute stream: DDP's bucket copy and FSDP's copy-outs run there, FSDP's copy-ins on its side
  // streams but on the same HBM. Measured: the FSDP2 profile of the 1B-like step on 4 H200s
  // (data/validation/measured/h200-sxm-141gb/profile_h200_llama1b_s2048_b4_fsdp4.json) spends 3.9 ms more in
  // elementwise kernels and 3.0 ms in foreach copies during forward and backward than the single-GPU step; the
  // formula gives 22.6 GB, 5.4 ms at the streaming rate.
  return dp_copy_time(units::bytes(dp_copy_bytes(a, params, plan)), plan, d);
}

Seconds dp_copy_time(Bytes bytes, const wl::TrainingPlan& plan, const Device& d) {
  if (bytes.raw() <= 0) return Seconds(0);
  return streaming_cost(plan.zero != wl::ZeroStage::none ? "FSDP copy-in/copy-out"
                        : plan.overlap_grad_reduce     ? "DDP bucket copy"
                                                       : "flat gradient buffer copies",
                        OpClass::elementwise, bytes, units::flop(0), d)
      .time;
}

/// PyTorch's unvectorised dtype-converting copy: bytes (read + written) per SM per boost-clock cycle, from the four
/// profiled steps (amp_cast_time).
constexpr double kUnvectorisedCopyBytesPerSmCycle = 5.2;

Seconds amp_cast_time(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                      const Device& d) {
  // PyTorch AMP: autocast casts every fp32 weight to bf16 in each forward (read 4 B, write 2 B per parameter) and
  // each bf16 weight gradient is copied into the fp32 .grad (read 2 B, write 4 B). (FSDP with a bf16 param_dtype
  // policy folds the cast into its all-gather: that is mixed_precision "megatron" here, bf16 parameters.) LoRA: only
  // the adapters have gradients; a quantised frozen base is dequantised per GEMM instead (layer_cost).
  const double p_stage = params_per_gpu(params, plan).total();
  const bool base_cast = !plan.lora.on() || plan.lora.base == wl::LoraBase::same;
  const Bytes cast = units::bytes(base_cast ? p_stage * 6.0 : 0.0);
  const Bytes grad_copy = units::bytes(trainable_per_gpu(a, params, plan).total() * 6.0);
  Seconds t = streaming_cost(std::string(), OpClass::elementwise, cast, units::flop(0), d).time;
  // The bf16 → fp32 copy into .grad runs PyTorch's unvectorised direct-copy kernel
  // (unrolled_elementwise_kernel<direct_copy_kernel_cuda>), which is bound by instruction issue, not HBM: our kernel
  // profiles measured 1.18 and 1.42 TB/s on H100 and 1.20 and 1.26 TB/s on H200 (132 SMs each;
  // data/validation/measured/*/profile_*.json), a mean of 5.2 bytes per SM per cycle of the 1830 MHz boost clock.
  // The copy runs at the lower of that issue rate and the streaming rate.
  Seconds copy = streaming_cost(std::string(), OpClass::elementwise, grad_copy, units::flop(0), d).time;
  if (d.gpu != nullptr && d.gpu->compute_units > 0 && d.gpu->boost_clock_MHz)
    copy = std::max(copy, Seconds(grad_copy.raw() / (kUnvectorisedCopyBytesPerSmCycle * double(d.gpu->compute_units) *
                                                     *d.gpu->boost_clock_MHz * 1e6)));
  return t + copy;
}

double optimizer_shard(const wl::TrainingPlan& plan) {
  const auto& par = plan.par;
  return plan.zero == wl::ZeroStage::none
             ? 1.0
             : double(par.shard_group > 0 && plan.zero == wl::ZeroStage::parameters ? par.shard_group
                                                                                  : dense_grad_group_size(plan));
}

double expert_optimizer_shard(const wl::TrainingPlan& plan) {
  // The dense shard group (dp·cp, or the hybrid group) regrouped for the experts: × tp / (etp·ep).
  if (plan.zero == wl::ZeroStage::none) return 1.0;
  return std::max(1.0, optimizer_shard(plan) * double(plan.par.tp) / double(plan.par.expert_shard()));
}

double optimizer_shard_params(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan) {
  const GpuParams p = trainable_per_gpu(a, params, plan);
  return p.dense / optimizer_shard(plan) + p.experts / expert_optimizer_shard(plan);
}

std::int64_t heaviest_stage_layers(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  const int p = std::max(1, plan.par.pp);
  std::vector<std::int64_t> chunks = chunk_layers(a, plan, nullptr);
  std::vector<std::int64_t> stage(std::size_t(p), 0);
  for (std::size_t j = 0; j < chunks.size(); ++j) stage[j % std::size_t(p)] += chunks[j];
  return std::max<std::int64_t>(1, *std::max_element(stage.begin(), stage.end()));
}

double comm_compute_share(const Device& d) {
  // Overlap is not free: while a collective runs it holds SMs (NCCL: one per channel; userbuffers: its copy kernels)
  // that the GEMMs lose, so the hidden part of a communication still costs (hidden time) × (that share). Measured by
  // the calibration profile's overlap items (comm_compute_loss) where there is one; else the assumption of 16
  // channels' share of the SMs, NCCL's usual ring width on NVLink-connected Hopper/Ampere nodes.
  // (Parts whose SM count is not in the data get no contention term.)
  if (d.eff.comm_compute_loss > 0) return d.eff.comm_compute_loss;
  return d.gpu->compute_units > 0 ? std::min(1.0, 16.0 / double(d.gpu->compute_units)) : 0.0;
}

double dp_comm_compute_share(const Device& d, const wl::TrainingPlan& plan) {
  const double share = comm_compute_share(d);
  if (plan.dp_max_ctas <= 0 || d.gpu->compute_units <= 0) return share;
  return std::min(share, double(plan.dp_max_ctas) / double(d.gpu->compute_units));
}

/// Bytes one optimizer step streams per parameter: a fused AdamW reads and writes the master weight, m and v (fp32),
/// reads the gradient and writes the new working weight. DeepSpeed's CPU Adam streams the same. Without a separate
/// master copy (PyTorch AMP's fp32 parameters, fp32 training) the working weight is the master: read and written.
double optimizer_bytes_per_param(const wl::TrainingPlan& plan) {
  // Each state is read and written once: 2 × optimizer_state_bytes (m and v for AdamW, momentum for SGD).
  const double weight_passes = plan.precision.master_bytes > 0 ? 1.0 : 2.0;
  return 2.0 * plan.precision.master_bytes + 2.0 * optimizer_state_bytes(plan) + plan.precision.gradient_bytes +
         weight_passes * plan.precision.weight_bytes;
}

std::optional<units::Bandwidth> host_link_bandwidth(const TrainingSystem& sys) {
  if (sys.db == nullptr || sys.gpu == nullptr) return std::nullopt;
  if (!sys.gpu->pcie.empty()) {
    const hw::LinkSpec* l = sys.db->find_link(sys.gpu->pcie);
    if (l != nullptr && l->x16_uni) return *l->x16_uni;
  }
  // Grace superchips: the NVLink-C2C link to the CPU, shared by the GPUs it serves (GpuSpec::host_link_gpus).
  if (!sys.gpu->host_link.empty()) {
    const hw::LinkSpec* l = sys.db->find_link(sys.gpu->host_link);
    if (l != nullptr && l->per_link_uni) return *l->per_link_uni / double(std::max(1, sys.gpu->host_link_gpus));
  }
  return std::nullopt;
}

long long offload_node_gpus(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  return std::max<long long>(1, sys.node != nullptr ? std::min<long long>(sys.node->gpus, plan.par.gpus()) : 1);
}

double offload_host_bytes_per_node(double host_per_gpu, const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  return host_per_gpu * double(offload_node_gpus(plan, sys));
}

bool offload_fits_host(double host_per_gpu, const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  if ((plan.offload != wl::Offload::optimizer && plan.activation_offload_layers <= 0) || sys.node == nullptr ||
      !sys.node->host_memory)
    return true;
  return offload_host_bytes_per_node(host_per_gpu, plan, sys) <= sys.node->host_memory->raw();
}

OffloadTimes offload_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                           const TrainingSystem& sys) {
  OffloadTimes o;
  const auto link = host_link_bandwidth(sys);
  if (!link || sys.node == nullptr || !sys.node->host_memory_bandwidth) return o;
  const double shard_params = optimizer_shard_params(a, params, plan);
  const long long node_gpus = offload_node_gpus(plan, sys);
  const units::Bandwidth link_eff = *link * kHostLinkEfficiency;
  // Every GPU of the node runs its optimizer step on the host at the same time: each gets 1/node_gpus of the DRAM.
  const units::Bandwidth dram = *sys.node->host_memory_bandwidth * (kHostDramEfficiency / double(node_gpus));
  o.host_link_GBps = units::to_GBps(link_eff);
  o.dram_GBps = units::to_GBps(dram);
  o.d2h = units::bytes(shard_params * plan.precision.gradient_bytes) / link_eff;
  o.h2d = units::bytes(shard_params * plan.precision.weight_bytes) / link_eff;
  o.cpu_step = units::bytes(shard_params * optimizer_bytes_per_param(plan)) / dram;
  return o;
}

OptimizerStep optimizer_step(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                             const Device& d) {
  OptimizerStep o;
  o.p_shard = optimizer_shard_params(a, params, plan);
  if (quantised_gemms(plan)) {
    // The weights FP8 / FP4 GEMMs read: the layers' linears (not the embedding, LM head, norms or the 16-bit router),
    // split as params_per_gpu splits them; the optimizer's shard of them as optimizer_shard_params shards them.
    ParameterCounts g;
    g.routed_experts = params.routed_experts;
    g.total = params.attention + params.ssm + params.dense_mlp + params.shared_experts + params.routed_experts;
    const GpuParams w = params_per_gpu(g, plan);
    o.fp8_weights = weight_quantisation_time(
        w.total(), w.dense / optimizer_shard(plan) + w.experts / expert_optimizer_shard(plan), plan, d);
  }
  if (unfused_optimizer(plan)) {
    o.unfused = unfused_optimizer_step(a, o.p_shard, plan, d);
    o.time = o.unfused.time + o.fp8_weights;
    return o;
  }
  // The fused kernel streams at kFusedOptimizerStreamShare of the streaming rate (our H100 step profiles): priced as
  // its bytes over that share.
  const double opt_bytes = o.p_shard * optimizer_bytes_per_param(plan) / kFusedOptimizerStreamShare;
  o.time = streaming_cost("optimizer step", OpClass::optimizer, units::bytes(opt_bytes), units::flop(o.p_shard * 12.0), d)
               .time +
           o.fp8_weights;
  return o;
}

Seconds optimizer_time(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                       const Device& d) {
  return optimizer_step(a, params, plan, d).time;
}

}  // namespace detail

}  // namespace gpuplan::model
