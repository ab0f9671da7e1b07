// The training step estimate (estimate_training): its terms, compose_step and the public helpers of training.hpp.
#include "gpuplan/model/training.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/model/utilisation.hpp"
#include "training_core.hpp"
#include "optimizer_rate.hpp"

namespace gpuplan::model {

using units::Bytes;
using units::Seconds;

units::Seconds time_at_mfu(units::Flops total, double gpus, units::FlopRate peak, double mfu) {
  return total / (peak * (gpus * mfu));
}

StrongScaling strong_scaling(units::Seconds base_time, long long base_gpus, units::Seconds time, long long gpus) {
  StrongScaling r;
  if (gpus <= 0 || base_gpus <= 0) return r;
  r.ideal = base_time * (double(base_gpus) / double(gpus));
  r.efficiency = time.raw() > 0 ? (r.ideal / time).raw() : 0.0;
  return r;
}

double pipeline_bubble_fraction(int pp, int virtual_stages, std::int64_t micro_batches) {
  if (pp <= 1 || micro_batches <= 0) return 0.0;
  return static_cast<double>(pp - 1) / (static_cast<double>(std::max(1, virtual_stages)) * double(micro_batches));
}

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
  k.moe_layers = double(a.moe_layer_count());
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
  if (plan.kernels == wl::KernelStyle::eager)
    // PyTorch's cross_entropy under autocast: upcast (2 + 4 B) and log_softmax forward; fill (4 B),
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
  std::array<LayerCost, LayerKind::kCount> kinds;
  std::array<bool, LayerKind::kCount> have_kind{};
  for (std::int64_t l = 0; l < L; ++l) {
    const LayerKind kind = LayerKind::of(a, l);
    const auto k = static_cast<std::size_t>(kind.index());
    if (!have_kind[k]) {
      kinds[k] = layer_cost(a, plan, kind, d, first != nullptr);
      have_kind[k] = true;
      if (first != nullptr && l == 0) *first = kinds[k];
    }
    const LayerCost& lc = kinds[k];
    c.fwd_all += lc.fwd;
    c.bwd_all += lc.bwd;
  }
  for (std::size_t k = 0; k < kinds.size(); ++k)
    if (have_kind[k]) {
      c.kind_fwd[k] = kinds[k].fwd;
      c.kind_bwd[k] = kinds[k].bwd;
      c.kind_rec[k] = kinds[k].rec;
    }
  // Embedding (first stage) and LM head + loss (last stage).
  const std::int64_t T = plan.micro_batch * plan.seq_len / par.cp;
  const double e = plan.precision.activation_bytes;
  const std::int64_t v_local = a.vocab / par.tp;
  const std::string none;
  const bool names = first != nullptr;
  // The output layer stays 16-bit under fp8 training (sixteen_bit_of: Megatron's output layer is outside TE's fp8).
  const hw::Precision head_p = sixteen_bit_of(plan.precision.compute);
  OpCost head_f = gemm_cost(names ? "LM head" : none, {T, v_local, a.hidden, 1}, head_p, d);
  OpCost head_dg = gemm_cost(names ? "LM head dgrad" : none, {T, a.hidden, v_local, 1}, head_p, d);
  OpCost head_wg = gemm_cost(names ? "LM head wgrad" : none, {a.hidden, v_local, T, 1}, head_p, d);
  if (wgrad_accumulates(plan) && !plan.lora.on())
    head_wg = accumulating_wgrad(head_wg, double(a.hidden) * double(v_local), plan.precision.gradient_bytes, d);
  const LossBytes ce = loss_bytes_per_logit(plan);
  OpCost loss_f = streaming_cost(names ? "cross-entropy (" + ce.kernel + ")" : none, OpClass::loss,
                                 units::bytes((double(T) * double(v_local)) * ce.forward),
                                 units::flop(5.0 * (double(T) * double(v_local))), d);
  OpCost loss_b = streaming_cost(names ? "cross-entropy bwd (" + ce.kernel + ")" : none, OpClass::loss,
                                 units::bytes((double(T) * double(v_local)) * ce.backward),
                                 units::flop(3.0 * (double(T) * double(v_local))), d);
  OpCost embed = streaming_cost(none, OpClass::embedding, units::bytes((double(T) * double(a.hidden)) * e * 2.0), units::flop(0), d);
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
    const OpCost pf = gemm_cost(none, {T, a.hidden, h2, 1}, plan.precision.compute, d);
    const OpCost pd = gemm_cost(none, {T, h2, a.hidden, 1}, plan.precision.compute, d);
    const OpCost pw = gemm_cost(none, {h2, a.hidden, T, 1}, plan.precision.compute, d);
    c.mtp_extra = pf.time + pd.time + pw.time + c.head_time;
  }
  return c;
}

Bytes tp_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  const std::int64_t T = plan.micro_batch * plan.seq_len / plan.par.cp;
  return units::bytes((double(T) * double(a.hidden)) * plan.precision.activation_bytes);
}

Bytes cp_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  const std::int64_t kv_dim =
      a.mla ? a.mla->kv_lora_rank + a.mla->qk_rope_head_dim : 2 * a.kv_heads * a.head_dim / plan.par.tp;
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

int dense_grad_group_size(const wl::TrainingPlan& plan) { return plan.par.dp * std::max(1, plan.par.cp); }

int expert_grad_group_size(const wl::TrainingPlan& plan) {
  // Megatron-Core's expert-data-parallel group: tp·cp·dp / (etp·ep) ranks of a stage (dp·cp / ep when etp = tp).
  return static_cast<int>(std::max<long long>(1, plan.par.expert_dp()));
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

DpTimes dp_collective_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                            const CommGroup& dp_g, const CommGroup& expert_g) {
  DpTimes t;
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
  // The unit reduced last (its gradients appear last in the backward, so nothing is left to hide its collective)
  // and the unit gathered first (before the first layer can run):
  //  - FSDP / ZeRO-3: the root unit, which holds what no decoder layer owns: the embedding, the final norm and an
  //    untied LM head;
  //  - buckets (DDP, Megatron): the bucket of the embedding's gradient, the last one produced; one tensor is never
  //    split, so it is max(bucket, embedding).
  const double tp = double(plan.par.tp);
  const double emb = double(params.embedding + params.position_embedding) / tp;
  double unit = 0;
  if (plan.zero == wl::ZeroStage::parameters) {
    unit = emb + double(params.lm_head) / tp;
  } else {
    const double bucket = plan.kernels == wl::KernelStyle::eager && plan.zero == wl::ZeroStage::none
                              ? 25.0 * 1024 * 1024 / plan.precision.gradient_bytes
                              : std::max(4.0e7, 1.0e6 * double(dense_grad_group_size(plan)));
    unit = std::max(bucket, emb);
  }
  unit = std::min(unit, p_gpu.dense);
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
  }
  return t;
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
  const double bytes = dp_copy_bytes(a, params, plan);
  if (bytes <= 0) return Seconds(0);
  return streaming_cost(plan.zero != wl::ZeroStage::none ? "FSDP copy-in/copy-out"
                        : plan.overlap_grad_reduce     ? "DDP bucket copy"
                                                       : "flat gradient buffer copies",
                        OpClass::elementwise, units::bytes(bytes), units::flop(0), d)
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

namespace {
/// Collective calls of one step's DP communication, from the frameworks' bucketing:
///  - PyTorch DDP (eager kernels, no ZeRO): gradient buckets of 25 MiB (`bucket_cap_mb` = 25, the default of
///    torch.nn.parallel.DistributedDataParallel);
///  - FSDP / ZeRO-3: one reduce-scatter and one all-gather per layer (one unit per decoder layer);
///  - Megatron-LM DDP and distributed optimizer: buckets of max(40M, 1M × DP) parameters (Megatron core
///    DistributedDataParallel's default bucket size).
struct DpCalls {
  double reduce = 1, gather = 1;  ///< reduce: per step; gather: per pass (ZeRO-3 gathers twice per micro-batch)
};
DpCalls dp_calls(const wl::TrainingPlan& plan, std::int64_t most_layers, double p_gpu, units::Bytes grads) {
  const double layers_stage = double(std::max<std::int64_t>(1, most_layers));
  if (plan.zero == wl::ZeroStage::parameters) return {layers_stage, layers_stage};
  if (plan.kernels == wl::KernelStyle::eager && plan.zero == wl::ZeroStage::none)
    return {std::max(1.0, std::ceil(grads.raw() / (25.0 * 1024 * 1024))), 1};
  const double bucket = std::max(4.0e7, 1.0e6 * double(plan.par.dp));
  const double n = std::max(1.0, std::ceil(p_gpu / bucket));
  return {n, n};
}

/// A communication of alone-time t, issued as `calls` collective calls beside compute of length `window` whose
/// kernel in flight lasts tk: each call waits wait_kernels × tk for SMs, so beside compute it takes
/// t + calls × wait_kernels × tk. What the compute window does not cover runs alone afterwards (exposed, at least
/// `floor`: the last bucket); `hidden` is how long its kernels ran beside compute (which pays the SM share): its own
/// time t less the exposed part, at most the window — not the waits, during which the compute kernel in flight holds
/// the SMs undisturbed (issue #24: with the built-in wait a slow GPU's long kernels made the waits, charged at the SM
/// share, outgrow the communication itself).
struct BesideCompute {
  Seconds exposed{}, hidden{};
};
BesideCompute beside_compute(Seconds t, Seconds window, double calls, Seconds tk, double wait_kernels, Seconds floor) {
  if (!(t > Seconds(0))) return {};
  const Seconds stretched = t + tk * (calls * wait_kernels);
  const Seconds beyond = stretched <= window ? Seconds(0) : t * (1.0 - (window / stretched).raw());
  BesideCompute b;
  b.exposed = std::min(t, std::max(floor, beyond));
  b.hidden = std::max(Seconds(0), std::min(window, t - b.exposed));
  return b;
}

}  // namespace

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

Seconds optimizer_time(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                       const Device& d) {
  const double p_shard = optimizer_shard_params(a, params, plan);
  if (unfused_optimizer(plan)) return unfused_optimizer_step(a, p_shard, plan, d).time;
  // The fused kernel streams at kFusedOptimizerStreamShare of the streaming rate (our H100 step profiles): priced as
  // its bytes over that share.
  const double opt_bytes = p_shard * optimizer_bytes_per_param(plan) / kFusedOptimizerStreamShare;
  return streaming_cost("optimizer step", OpClass::optimizer, units::bytes(opt_bytes), units::flop(p_shard * 12.0), d)
      .time;
}

namespace {

/// One micro-batch on one pipeline stage as compose_step prices it.
struct StageTime {
  PassCost fwd, bwd, recompute;
  CommNumbers tp, cp, ep, pp;
  Seconds extra{}, total{};
  Seconds embed{}, head{}, mtp{}, amp{};
};

/// What every part of compose_step reads: its inputs and the step's shape.
struct StepInputs {
  const wl::TransformerArch& a;
  const wl::TrainingPlan& plan;
  const TrainingConsts& k;
  const StepTerms& t;
  const hw::GpuSpec& gpu;
  int p;                 // pipeline stages
  int v;                 // model chunks per stage
  std::int64_t m;        // micro-batches per step
  double nccl_sm_share;  // the SM share of NCCL kernels beside compute (comm_compute_share)
};

/// The stage's compute per micro-batch: its layers' forward and backward (from the layer kinds it holds), the
/// recomputation, and the embedding, head, MTP and AMP extras. Returns the share of its layers recomputed.
double stage_compute(const StepInputs& x, const StageShape& sh, StageTime& st) {
  const auto& plan = x.plan;
  const StepTerms& t = x.t;
  const int p = x.p;
  if (p == 1) {
    st.fwd = t.compute.fwd_all;
    st.bwd = t.compute.bwd_all;
  } else {
    st.fwd = st.bwd = PassCost{};
    for (std::size_t ki = 0; ki < sh.kind_layers.size(); ++ki)
      if (sh.kind_layers[ki] > 0) {
        st.fwd += t.compute.kind_fwd[ki].scaled(double(sh.kind_layers[ki]));
        st.bwd += t.compute.kind_bwd[ki].scaled(double(sh.kind_layers[ki]));
      }
  }
  st.recompute = PassCost{};
  // Full recompute repeats the forward of the recomputed layers (all of them, or the first N of each chunk under
  // --recompute-method block: StageShape::recomputed).
  const double rec_share = sh.layers > 0 ? double(sh.recomputed) / double(sh.layers) : 1.0;
  if (plan.recompute == wl::Recompute::full) st.recompute = st.fwd.scaled(rec_share);
  else if (plan.recompute == wl::Recompute::selective && !plan.flash_attention) st.recompute.attention = st.fwd.attention;
  if (plan.recompute != wl::Recompute::full && plan.recompute_modules != 0)
    for (std::size_t ki = 0; ki < sh.kind_layers.size(); ++ki)
      if (sh.kind_layers[ki] > 0) st.recompute += t.compute.kind_rec[ki].scaled(double(sh.kind_layers[ki]));
  st.embed = sh.first ? t.compute.embed_time : Seconds(0);
  st.head = sh.last ? t.compute.head_time : Seconds(0);
  st.mtp = t.compute.mtp_extra * double(sh.mtp);
  st.amp = plan.mixed_precision == wl::MixedPrecision::amp ? t.amp_casts : Seconds(0);
  st.extra = st.embed + st.head + st.mtp + st.amp;
  return rec_share;
}

/// The SM share the expert-parallel dispatch/combine kernels take from the compute beside them: DeepSeek's kernels
/// hold 20 of the GPU's SMs while they run (arXiv:2412.19437 §3.5.1: "20 out of the 132 SMs available in the H800";
/// DeepEP's Buffer.num_sms default 20); NCCL's channels the house's share.
double ep_kernel_sm_share(const wl::TrainingPlan& plan, const hw::GpuSpec& gpu, double nccl_sm_share) {
  return plan.ep_dispatch == wl::EpDispatch::deepep && gpu.compute_units > 0
             ? std::min(1.0, 20.0 / double(gpu.compute_units))
             : nccl_sm_share;
}

/// Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm with --delay-wgrad-compute;
/// model_parallel_config.py: "Overlap EP A2A communications with independent computations of different micro-batches
/// in 1f1b phase of pipelining or non-pipelining schedule"; pipeline_parallel/combined_1f1b.py): in the steady 1F1B
/// phase the forward of one micro-batch and the backward of another run as one merged schedule, each one's dispatch
/// and combine beside the other's compute (the delayed weight-gradient GEMMs fill the backward's side). Warm-up and
/// cool-down passes have no partner: of the m·v chunk passes per direction, W = min(m·v, 2(p−1) + (v−1)·p) run alone
/// (schedules.py get_pp_rank_microbatches, the first pipeline rank's warm-up; 1 without pipelining), their all-to-all
/// exposed. Of the paired part, what exceeds the partner's compute stays exposed; the hidden part pays the SM share.
void ep_a2a_overlap(const StepInputs& x, StageTime& st) {
  const double passes = double(x.m) * double(x.v);
  if (passes <= 0 || !(st.ep.time > Seconds(0))) return;
  const double alone = std::min(passes, x.p > 1 ? 2.0 * double(x.p - 1) + double(x.v - 1) * double(x.p) : 1.0);
  const double paired = (passes - alone) / passes;
  const Seconds comm = st.ep.time * paired;
  const Seconds window = (st.fwd.total() + st.bwd.total() + st.recompute.total()) * (double(x.m) * paired);
  const Seconds exposed = std::max(Seconds(0), comm - window);
  st.ep.exposed = st.ep.time * (1.0 - paired) + exposed +
                  (comm - exposed) * ep_kernel_sm_share(x.plan, x.gpu, x.nccl_sm_share);
}

/// The stage's TP, CP, EP and PP communication over the step: time, bytes and the part left exposed.
void stage_comm(const StepInputs& x, const StageShape& sh, double rec_share, StageTime& st) {
  const auto& a = x.a;
  const auto& plan = x.plan;
  const auto& par = plan.par;
  const StepTerms& t = x.t;
  const int v = x.v;
  const std::int64_t m = x.m;
  const double nccl_sm_share = x.nccl_sm_share;
  const double layers = double(sh.layers), moe_layers = double(sh.moe_layers);
  st.tp = st.cp = st.ep = st.pp = CommNumbers{};
  // TP: Megatron — 2 all-reduces forward and 2 backward per layer (SP: all-gather + reduce-scatter, same bytes).
  // Parallel folding (etp ≠ tp): the MoE layers' expert half runs over the expert-TP group instead (etp_one), and
  // over TP only for their shared experts (a dense MLP split by TP).
  const bool folded = expert_tp_folded(a, plan);
  const double moe_tp_half = !folded || (a.moe && a.moe->shared_experts > 0) ? 1.0 : 0.0;
  const double tp_layers = folded ? layers - moe_layers * (1.0 - moe_tp_half) * 0.5 : layers;
  if (par.tp > 1 && tp_layers > 0) {
    const Bytes act = tp_message(a, plan);
    // Per layer: a forward pair and a backward pair; full recompute repeats the forward pair.
    const double pairs = plan.recompute == wl::Recompute::full ? 2.0 + rec_share : 2.0;
    const double per_mb = pairs * tp_layers;
    st.tp.time = t.tp_one * per_mb * double(m);
    st.tp.bytes = act * (per_mb * 2.0 * double(m));
    const Seconds gemm_stage = (st.fwd.gemm + st.bwd.gemm) * double(m);
    if (plan.overlap_tp_comm) {
      // Userbuffers / async TP split each GEMM into TP chunks and move chunk i while chunk i±1 computes: the
      // all-gather's first chunk is local, but the reduce-scatter's last chunk has no GEMM left to hide behind, so
      // 1/tp of the reduce-scatter half of each pair stays exposed; the rest hides behind the GEMMs at its SM cost.
      const Seconds tail = st.tp.time * (0.5 / double(par.tp));
      const Seconds rest = st.tp.time - tail;
      const Seconds rest_exposed = std::max(Seconds(0), rest - gemm_stage);
      st.tp.exposed = tail + rest_exposed + (rest - rest_exposed) * nccl_sm_share;
    } else {
      st.tp.exposed = st.tp.time;
    }
  }
  if (folded && par.expert_tp() > 1 && moe_layers > 0) {
    // The expert half of every MoE layer over the expert-TP group: not behind a GEMM (the dispatcher's own
    // gather and reduce-scatter around the grouped GEMMs), so exposed.
    const double pairs = plan.recompute == wl::Recompute::full ? 2.0 + rec_share : 2.0;
    const double per_mb = pairs * 0.5 * moe_layers;
    const Bytes act = tp_message(a, plan) * (double(par.expert_tp()) / double(std::max(1, par.tp)));
    st.tp.time += t.etp_one * per_mb * double(m);
    st.tp.bytes += act * (per_mb * 2.0 * double(m));
    st.tp.exposed += t.etp_one * per_mb * double(m);
  }
  // CP: ring attention exchanges K and V forward, dK and dV backward; overlapped with attention compute.
  if (par.cp > 1) {
    const Bytes kv = cp_message(a, plan);
    st.cp.time = t.cp_one * layers * double(m);
    st.cp.bytes = kv * (3.0 * layers * double(m));
    st.cp.exposed = std::max(Seconds(0), st.cp.time - (st.fwd.attention + st.bwd.attention) * double(m));
  }
  // EP: dispatch and combine all-to-all, forward and backward, per MoE layer.
  if (par.ep > 1 && a.moe) {
    const Bytes buf = t.ep_bytes_one.raw() > 0 ? t.ep_bytes_one : ep_message(a, plan);
    st.ep.time = t.ep_one * (4.0 * moe_layers * double(m));
    st.ep.bytes = buf * (4.0 * moe_layers * double(m));
    st.ep.exposed = st.ep.time;
    if (plan.ep_a2a_overlap) ep_a2a_overlap(x, st);
  }
  // PP: activations forward, gradients backward, at each chunk boundary per micro-batch (plus the receiver's TP
  // all-gather under scatter/gather). Interleaved with Megatron's overlap_p2p_comm: each send/recv runs beside the
  // neighbouring chunk's compute (schedules.py forward_backward_pipelining_with_interleaving, overlap_p2p_comm:
  // the next chunk's input is received while this chunk computes); only the part longer than a chunk's forward
  // (backward) stays exposed, and the hidden part pays the SM share of its NCCL kernels.
  if (par.pp > 1) {
    const Bytes msg = pp_message(a, plan);
    const double sends = 2.0 * double(v) * double(m);
    const Seconds one = t.pp_one + t.pp_gather_one;
    st.pp.time = one * sends;
    st.pp.bytes = msg * sends;
    st.pp.exposed = st.pp.time;
    if (plan.schedule == wl::PipelineSchedule::interleaved && v > 1 && plan.overlap_p2p_comm) {
      const Seconds f_chunk = st.fwd.total() / double(v), b_chunk = (st.bwd.total() + st.recompute.total()) / double(v);
      const Seconds ef = std::max(Seconds(0), one - f_chunk), eb = std::max(Seconds(0), one - b_chunk);
      const Seconds exposed = (ef + eb) * (double(v) * double(m));
      st.pp.exposed = exposed + (st.pp.time - exposed) * nccl_sm_share;
    }
  }
}

/// DualPipe: the device's two stages are summed in its shape and each micro-batch passes through one of them, so one
/// micro-batch costs half of the sum; the communication of the paired chunks hides behind the other direction's
/// compute, that of the chunks run alone does not.
void dualpipe_halves(const StepInputs& x, const StageShape& sh, StageTime& st) {
  const auto& plan = x.plan;
  const auto& gpu = x.gpu;
  const std::int64_t m = x.m;
  const double nccl_sm_share = x.nccl_sm_share;
  // m/2 micro-batches each way.
  st.fwd = st.fwd.scaled(0.5);
  st.bwd = st.bwd.scaled(0.5);
  st.recompute = st.recompute.scaled(0.5);
  st.extra = st.extra * 0.5;
  st.embed = st.embed * 0.5;
  st.head = st.head * 0.5;
  st.mtp = st.mtp * 0.5;
  st.amp = st.amp * 0.5;
  for (CommNumbers* c : {&st.tp, &st.cp, &st.ep, &st.pp}) {
    c->time = c->time * 0.5;
    c->exposed = c->exposed * 0.5;
    c->bytes = c->bytes * 0.5;
  }
  // DualPipe overlaps a forward chunk of one micro-batch with a backward chunk of another (§3.2.1, Figure 4): the
  // all-to-all dispatch/combine and the pipeline sends of each run beside the other's attention and MLP compute, so
  // what exceeds the compute stays exposed and the hidden part costs the SM share of the communication kernels
  // (comm_compute_share). Only the paired share φ of the chunks runs so (dualpipe_paired_share); a chunk run alone
  // waits for its own dispatch and combine, so (1 − φ) of the all-to-all is exposed. The pipeline sends are
  // asynchronous (DualPipe's isend/irecv) and stay with the paired window.
  const double phi = detail::dualpipe_paired_share(x.p, m, sh.index);
  const Seconds solo = st.ep.time * (1.0 - phi);
  const Seconds window = (st.fwd.total() + st.bwd.total() + st.recompute.total() + st.extra) * double(m) * phi;
  const Seconds comm = st.ep.time * phi + st.pp.time;
  st.ep.exposed = solo;
  st.pp.exposed = Seconds(0);
  if (comm > Seconds(0)) {
    const Seconds exposed = std::max(Seconds(0), comm - window);
    const Seconds hidden = comm - exposed;
    const double ep_part = (st.ep.time * phi / comm).raw();
    // DeepSeek's dispatch/combine kernels hold 20 of the GPU's SMs while they run (§3.5.1: "20 out of the 132
    // SMs available in the H800"; DeepEP's Buffer.num_sms default 20; ep_kernel_sm_share); NCCL's channels the
    // house's share.
    const double ep_share = ep_kernel_sm_share(plan, gpu, nccl_sm_share);
    st.ep.exposed += (exposed + hidden * ep_share) * ep_part;
    st.pp.exposed = (exposed + hidden * nccl_sm_share) * (1.0 - ep_part);
  }
}

/// t_i: one micro-batch on the stage, with its parts.
void stage_time(const StepInputs& x, const StageShape& sh, StageTime& st) {
  const std::int64_t m = x.m;
  const double rec_share = stage_compute(x, sh, st);
  stage_comm(x, sh, rec_share, st);
  if (sh.chunks == 2) dualpipe_halves(x, sh, st);
  const Seconds comm_mb = (st.tp.exposed + st.cp.exposed + st.ep.exposed + st.pp.exposed) / double(m);
  st.total = st.fwd.total() + st.bwd.total() + st.recompute.total() + comm_mb + st.extra;
}

/// Every stage's t_i (recorded when asked), their sum, and the slowest stage (`worst`, o.bottleneck).
void price_stages(const StepInputs& x, const std::vector<StageShape>& stages, StageTime& worst, StepCore& o) {
  StageTime cur;
  o.bottleneck = 0;
  o.stage_sum = Seconds(0);
  if (o.stage_times != nullptr) o.stage_times->clear();
  if (o.layout != nullptr) o.layout->stages.clear();
  for (std::size_t i = 0; i < stages.size(); ++i) {
    StageTime& st = i == 0 ? worst : cur;
    stage_time(x, stages[i], st);
    o.stage_sum += st.total;
    if (o.stage_times != nullptr) o.stage_times->push_back(st.total);
    if (o.layout != nullptr)
      o.layout->stages.push_back({st.fwd, st.bwd, st.recompute, st.tp, st.cp, st.ep, st.pp, st.embed, st.head, st.mtp,
                                  st.amp, st.total});
    if (i > 0 && cur.total > worst.total) {
      worst = cur;
      o.bottleneck = int(i);
    }
  }
}

/// What the DP terms leave for the step's later terms: the backward window of one micro-batch and the parameters
/// the DP group reduces.
struct DpWindow {
  Seconds bwd_mb{};
  double p_train = 0.0;
};

/// DP: the gradient reduction and parameter gathers of this GPU's parameters, what the compute left over hides, and
/// the framework's buffer copies (o.dp, o.layout->dp).
DpWindow dp_terms(const StepInputs& x, const PassCost& fwd, const PassCost& bwd, const PassCost& recompute,
                  StepCore& o) {
  const auto& a = x.a;
  const auto& plan = x.plan;
  const TrainingConsts& k = x.k;
  const StepTerms& t = x.t;
  const std::int64_t m = x.m;
  const double nccl_sm_share = x.nccl_sm_share;
  // DP: gradient reduction of this GPU's parameters (ZeRO ≥ 1: reduce-scatter + parameter all-gather).
  // Only what is reduced travels and fills buckets: routed experts with EP = dp·cp have no expert-data-parallel peer.
  const GpuParams held = params_per_gpu(k.params, plan);
  const double p_gpu = held.dense + (expert_grad_group_size(plan) > 1 ? held.experts : 0.0);
  const double p_train = dp_reduced_params(a, k.params, plan);
  const double base_b = base_weight_bytes(plan);
  // Compute time already hiding the TP and CP communication (their hidden parts) is not available again to hide the
  // DP collectives: the windows below are the compute left over (before, a faster attention kernel could lengthen
  // the step — the CP exchange and a ZeRO-3 gather both counted the same attention time; tests/property).
  const Seconds fwd_all_mb = fwd.total(), bwd_all_mb = bwd.total() + recompute.total();
  const Seconds hidden_tp_cp_mb = ((o.tp.time - o.tp.exposed) + (o.cp.time - o.cp.exposed)) / double(m);
  const double bwd_part = (fwd_all_mb + bwd_all_mb) > Seconds(0) ? (bwd_all_mb / (fwd_all_mb + bwd_all_mb)).raw() : 0.0;
  const Seconds bwd_mb = std::max(Seconds(0), bwd_all_mb - hidden_tp_cp_mb * bwd_part);
  const Seconds fwd_mb = std::max(Seconds(0), fwd_all_mb - hidden_tp_cp_mb * (1.0 - bwd_part));
  if (dense_grad_group_size(plan) > 1) {
    const Bytes grads = units::bytes(p_train * plan.precision.gradient_bytes);
    const Bytes weights = units::bytes(plan.zero == wl::ZeroStage::parameters ? p_gpu * base_b
                                                                             : p_train * plan.precision.weight_bytes);
    const Seconds reduce = t.dp.reduce;
    Seconds gather{};
    if (plan.zero == wl::ZeroStage::none) {
      o.dp.bytes = grads;
    } else {
      gather = t.dp.gather;
      o.dp.bytes = grads + weights;
    }
    if (plan.zero == wl::ZeroStage::parameters) {
      // FSDP/ZeRO-3: parameters gathered for forward and again for backward in every micro-batch.
      gather = gather * (2.0 * double(m));
      o.dp.bytes = grads + weights * (2.0 * double(m));
    }
    o.dp.time = reduce + gather;
    // Each collective call beside compute also waits for SMs: a GEMM grid holds them all, so the call's kernel starts
    // when the kernel in flight drains, (wait_kernels) × (that kernel's duration) per call, measured by the
    // calibration profile's overlap items (0 without one). Calls: dp_calls (the frameworks' bucket sizes).
    const DpCalls calls = dp_calls(plan, most_stage_layers(*t.stages), p_train, grads);
    const double wait = k.d.eff.comm_wait_kernels;
    PassCost bwd_pass = bwd;
    bwd_pass += recompute;
    const Seconds tk_bwd = bwd_pass.kernel_in_flight();
    PassCost all_pass = bwd_pass;
    all_pass += fwd;
    const Seconds tk_all = all_pass.kernel_in_flight();
    // Bucketed reduction overlaps the backward of the last micro-batch; the last unit's collective (the embedding's
    // bucket, FSDP's root unit: dp_collective_times) stays exposed.
    const BesideCompute red = plan.overlap_grad_reduce
                                  ? beside_compute(reduce, bwd_mb, calls.reduce, tk_bwd, wait, t.dp.reduce_last)
                                  : BesideCompute{reduce, Seconds(0)};
    // ZeRO-3 gathers behind the whole step's compute, which includes the last backward that already hides the
    // gradient reduction: that time is not available twice (before, a faster GPU could lengthen the step: the
    // shrinking backward exposed both streams; tests/property "step time does not rise when ... compute peak").
    const Seconds gather_window = plan.zero == wl::ZeroStage::parameters
                                      ? std::max(Seconds(0), (fwd_mb + bwd_mb) * double(m) - red.hidden)
                                      : fwd_mb;
    const double gather_calls =
        plan.zero == wl::ZeroStage::parameters ? calls.gather * 2.0 * double(m) : calls.gather;
    const BesideCompute gat = plan.overlap_param_gather
                                  ? beside_compute(gather, gather_window, gather_calls, tk_all, wait, t.dp.gather_first)
                                  : BesideCompute{gather, Seconds(0)};
    // The hidden part still costs its SM share (nccl_sm_share, above).
    o.dp.exposed = red.exposed + gat.exposed + (red.hidden + gat.hidden) * nccl_sm_share;
    // PyTorch DDP copies each gradient into its communication bucket (read + write per element), PyTorch FSDP moves
    // parameters and gradients through its copy-in/copy-out buffers (dp_copy_time); Megatron's contiguous buffers
    // avoid both.
    o.dp.exposed += t.dp_copy;
    if (o.layout != nullptr)
      o.layout->dp = {reduce,      gather,        red.exposed,   red.hidden,   gat.exposed,
                      gat.hidden,  t.dp_copy,     nccl_sm_share, calls.reduce, gather_calls};
  }
  return {bwd_mb, p_train};
}

/// The pipeline bubble (and o.bubble_fraction): DualPipe's, or the critical path's fill and drain.
Seconds pipeline_bubble(const StepInputs& x, const PassCost& bwd, const PassCost& recompute, StepCore& o) {
  const auto& plan = x.plan;
  const int p = x.p, v = x.v;
  const std::int64_t m = x.m;
  // The pipeline's critical path with per-stage times t_i per micro-batch: the first micro-batch through every stage,
  // the other m − 1 at the pace of the slowest (which then never idles), the fill and drain at chunk granularity:
  //   T = m·max_i t_i + (Σ_i t_i − max_i t_i) / v.
  // v = 1 is the flow-shop makespan of m identical jobs over stages t_i, Σ t_i + (m − 1)·max t_i; equal stages give
  // Narayanan et al. 2021's bubble (p − 1)/(v·m) of the ideal m·t (§2.2.1, §2.2.2). With unequal stages it is exact
  // when the slowest stage is the last; when it sits upstream, work of the later stages that its cool-down backwards
  // hide is still counted (an overstatement of at most Σ_{j>slowest} t_j / v).
  o.bubble_fraction = 0;
  Seconds bubble{};
  if (p > 1 && m > 0 && plan.dualpipe()) {
    // DualPipe (DeepSeek-V3 Table 2): bubble (PP/2 − 1)(F&B + B − 3W) with F, B, W one chunk's forward, full
    // backward and weight-gradient part, and F&B a forward and a backward chunk run overlapped: their compute plus
    // what of their communication stays exposed. The chunk is the bottleneck device's mean micro-batch.
    const Seconds FB = o.stage_max;  // one forward and one backward chunk with their exposed communication
    const Seconds B = bwd.total() + recompute.total();
    const Seconds W = bwd.wgrad;
    bubble = std::max(Seconds(0), (FB + B - W * 3.0) * (double(p) / 2.0 - 1.0));
    o.bubble_fraction = (bubble / (o.stage_max * double(m))).raw();
  } else if (p > 1 && m > 0) {
    bubble = (o.stage_sum - o.stage_max) / double(v);
    o.bubble_fraction = (bubble / (o.stage_max * double(m))).raw();
  }
  return bubble;
}

/// The step's breakdown (o.step), the offload terms and the total.
void step_breakdown(const StepInputs& x, const PassCost& fwd, const PassCost& bwd, const PassCost& recompute,
                    Seconds extra, Seconds bubble, const DpWindow& dw, StepCore& o) {
  const auto& plan = x.plan;
  const StepTerms& t = x.t;
  const std::int64_t m = x.m;
  const Seconds bwd_mb = dw.bwd_mb;
  const double p_train = dw.p_train;
  const Seconds steady = o.stage_max * double(m);

  StepBreakdown& s = o.step;
  s.gemm = (fwd.gemm + bwd.gemm + recompute.gemm) * double(m);
  s.attention = (fwd.attention + bwd.attention + recompute.attention) * double(m);
  s.elementwise = (fwd.elementwise + bwd.elementwise + recompute.elementwise) * double(m);
  s.embedding_loss = extra * double(m);
  s.recompute = recompute.total() * double(m);
  s.moe_host = (fwd.other + bwd.other + recompute.other) * double(m);
  s.comm_exposed = o.tp.exposed + o.cp.exposed + o.ep.exposed + o.pp.exposed + o.dp.exposed;
  s.bubble = bubble;
  s.optimizer = t.optimizer;
  o.offload = CommNumbers{};
  if (plan.offload == wl::Offload::optimizer) {
    // ZeRO-Offload: the gradient shard streams to the host during the last micro-batch's backward (as its reduction
    // does); the CPU step and the copy of the updated weights back to the GPU sit between two steps.
    s.optimizer = t.offload.cpu_step;
    o.offload.time = t.offload.d2h + t.offload.h2d;
    o.offload.exposed = std::max(Seconds(0), t.offload.d2h - bwd_mb) + t.offload.h2d;
    o.offload.bytes = units::bytes(p_train / optimizer_shard(plan) *
                                   (plan.precision.gradient_bytes + plan.precision.weight_bytes));
  }
  if (plan.activation_offload_layers > 0 && t.act_offload_layer > Seconds(0)) {
    // Activation offloading (training_recipes.cpp): N layers' activations down in the forward and back in the
    // backward of every micro-batch, on copy engines beside the compute; what the windows do not hide is exposed.
    const double n = double(plan.activation_offload_layers);
    o.offload.time += t.act_offload_layer * (2.0 * n * double(m));
    o.offload.exposed += activation_offload_exposed(o.bottleneck_layers, plan.activation_offload_layers,
                                                    t.act_offload_layer, fwd.total(), bwd.total()) *
                         double(m);
    o.offload.bytes += t.act_offload_layer_bytes * (2.0 * n * double(m));
  }
  s.offload = o.offload.exposed;
  s.total = steady + bubble + o.dp.exposed + s.optimizer + s.offload;
  o.ok = std::isfinite(s.total.raw()) && s.total.raw() > 0;
  o.has_time_to_train = o.has_cost = o.has_energy = false;
}

/// MFU and HFU, and the time to train, its cost and energy.
void mfu_and_costs(const StepInputs& x, const std::vector<StageShape>& stages, double tokens_per_step, StepCore& o) {
  const auto& a = x.a;
  const auto& plan = x.plan;
  const auto& par = plan.par;
  const TrainingConsts& k = x.k;
  const hw::GpuSpec& gpu = x.gpu;
  const StepBreakdown& s = o.step;
  // ---- MFU / HFU ----
  // Causal attention does half the score work; published MFU tables (Megatron, PaLM) count the full square.
  o.model_flops = k.fpt.training * tokens_per_step;
  // Full recompute repeats the forward of every layer (not the LM head): Megatron's 96·B·s·l·h² counts it so.
  const units::Flops layer_forward = k.fpt.forward - units::flop(2.0 * double(a.vocab) * double(a.hidden));
  double recomputed = 0, layers_all = 0;
  for (const auto& sh : stages) {
    recomputed += double(sh.recomputed);
    layers_all += double(sh.layers);
  }
  const double rec_all = layers_all > 0 ? recomputed / layers_all : 1.0;
  o.hardware_flops = o.model_flops + (plan.recompute == wl::Recompute::full ? layer_forward * (tokens_per_step * rec_all)
                                                                              : units::Flops(0));
  const double gpus = double(par.gpus());
  const units::FlopRate peak = k.d.peak(plan.precision.compute);
  o.mfu = utilisation(o.model_flops, s.total, gpus, peak);
  o.hfu = utilisation(o.hardware_flops, s.total, gpus, peak);

  // ---- time to train, cost, energy ----
  if (plan.tokens_to_train) {
    // The same template as time_at_mfu, with this plan's modelled MFU.
    o.has_time_to_train = true;
    o.time_to_train = time_at_mfu(o.model_flops * (*plan.tokens_to_train / tokens_per_step), gpus,
                                  k.d.peak(plan.precision.compute), o.mfu);
    o.gpu_hours = units::to_hours(o.time_to_train) * gpus;
    if (k.price) {
      o.has_cost = true;
      o.cost = units::usd(units::to_usd_per_hour(*k.price) * o.gpu_hours);
    }
    if (gpu.tdp) {
      // Board power at TDP while computing, idle draw ignored: an estimate, not a measurement.
      const double busy = std::min(1.0, (s.gemm + s.attention + s.elementwise + s.embedding_loss).raw() / s.total.raw());
      o.has_energy = true;
      o.energy = units::Joules(gpu.tdp->raw() * gpus * o.time_to_train.raw() * busy);
    }
  }
}

}  // namespace

void compose_step(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingConsts& k,
                  const StepTerms& t, StepCore& o) {
  const auto& par = plan.par;
  const hw::GpuSpec& gpu = *k.d.gpu;
  const std::int64_t m = plan.micro_batches();
  o.m = m;
  const double tokens_per_step = double(plan.global_batch) * double(plan.seq_len);

  // ---- compute and per-layer communication of each pipeline stage ----
  // Stage i holds its chunks' layers (chunk_layers: the one assignment of layers to stages), the embedding when it is
  // the first stage and the LM head with the loss when it is the last (Megatron builds them there only: pre_process /
  // post_process). One micro-batch on stage i takes t_i = its layers' forward + backward + recompute + its exposed
  // TP/CP/EP/PP communication + its embedding or head.
  const int p = std::max(1, par.pp);
  const int v = plan.model_chunks();
  const std::vector<StageShape>& stages = *t.stages;
  const StepInputs x{a, plan, k, t, gpu, p, v, m, comm_compute_share(k.d)};
  StageTime worst;
  price_stages(x, stages, worst, o);
  o.stage_max = worst.total;
  o.bottleneck_layers = stages[std::size_t(o.bottleneck)].layers;
  const PassCost fwd = worst.fwd, bwd = worst.bwd, recompute = worst.recompute;
  o.fwd = fwd;
  o.bwd = bwd;
  o.recompute = recompute;
  const Seconds extra = worst.extra;
  o.extra = extra;
  o.tp = worst.tp;
  o.cp = worst.cp;
  o.ep = worst.ep;
  o.pp = worst.pp;
  o.dp = CommNumbers{};
  if (o.layout != nullptr) o.layout->dp = DpParts{};
  const DpWindow dw = dp_terms(x, fwd, bwd, recompute, o);

  // ---- step ----
  const Seconds bubble = pipeline_bubble(x, bwd, recompute, o);
  step_breakdown(x, fwd, bwd, recompute, extra, bubble, dw, o);
  if (!o.ok) return;
  o.tokens_per_s = tokens_per_step / o.step.total.raw();
  mfu_and_costs(x, stages, tokens_per_step, o);
}

}  // namespace detail

static double dp_grad_passes(const wl::TrainingPlan& plan) {
  // PyTorch DDP (gradient_as_bucket_view) reduces each bucket as its gradients become ready, during the backward, and
  // divides it in place: one read + write pass. DDP has no reduction after the backward; eager code that reduces
  // after it (overlap_grad_reduce false) does it by hand, as apex's delay_allreduce and our moe_train_step.py do: the
  // gradients flattened into one buffer (a copy), all-reduced, divided in place, and copied back into each .grad —
  // three passes. Measured in the EP 1 x DP 4 step's CUDA-only profile (data/validation/measured/h100-sxm5-80gb/
  // moe_train_L4_s4096_b1_ep1_w4_cudaprof.json, 2.59e9 fp32 gradients): 13.3 ms of device copies (flatten and copy
  // back) and 6.9 ms of the divide, where the one-pass term gave 7.2 ms.
  return plan.overlap_grad_reduce ? 1.0 : 3.0;
}

double dp_copy_bytes(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan) {
  if (plan.kernels != wl::KernelStyle::eager || detail::dense_grad_group_size(plan) <= 1) return 0.0;
  // DDP: each gradient that is reduced into its bucket, read + write: the dense ones (over dp·cp), the routed
  // experts' only where their expert-data-parallel group has more than one GPU (EP = DP·CP leaves nothing to reduce;
  // our EP 4 step on 4 H100s syncs only the dense gradients: data/validation/measured/h100-sxm5-80gb/
  // moe_train_L4_s4096_b1_ep4_w4.json).
  if (plan.zero == wl::ZeroStage::none)
    return 2.0 * dp_grad_passes(plan) * detail::dp_reduced_params(a, params, plan) * plan.precision.gradient_bytes;
  if (plan.zero == wl::ZeroStage::parameters && detail::optimizer_shard(plan) > 1)
    return detail::fsdp_copy_bytes(params, plan);
  return 0.0;
}

PipelineAssignment pipeline_assignment(const wl::TransformerArch& arch, const wl::TrainingPlan& plan) {
  PipelineAssignment r;
  r.chunk_layers = detail::chunk_layers(arch, plan, &r.error);
  if (r.chunk_layers.empty()) return r;
  const std::size_t p = static_cast<std::size_t>(std::max(1, plan.par.pp));
  r.stage_layers.assign(p, 0);
  for (std::size_t j = 0; j < r.chunk_layers.size(); ++j) r.stage_layers[j % p] += r.chunk_layers[j];
  return r;
}

CommGroup training_comm_group(int size, int stride, const TrainingSystem& sys) {
  if (size <= 1 || sys.node == nullptr || sys.db == nullptr) return CommGroup{};
  std::optional<hw::ClusterSpec> cl;
  if (sys.cluster != nullptr) cl = *sys.cluster;
  CommGroup g = resolve_group(size, stride, *sys.node, *sys.db, cl);
  if (sys.scale_up_calibration) apply_calibration(g, *sys.scale_up_calibration);
  return g;
}

namespace {

using detail::LayerCost;
using detail::PassCost;

std::string tier_text(const CommGroup& g) {
  if (g.size <= 1) return "none";
  if (g.domains() <= 1) return g.scale_up.name;
  const std::string out = g.scale_out ? g.scale_out->name : std::string("?");
  if (g.scale_up_size <= 1) return fmt::format("{} across {} scale-up domains", out, g.domains());
  return fmt::format("{} × {} inside, {} across {} domains", g.scale_up_size, g.scale_up.name, out, g.domains());
}

std::string dp_collective_text(const wl::TransformerArch& a, const wl::TrainingPlan& plan, int n_edp) {
  std::string s = plan.zero == wl::ZeroStage::none ? "all-reduce" : "reduce-scatter + all-gather";
  if (a.moe && plan.par.ep > 1) s += fmt::format(" (routed experts over {} GPUs)", n_edp);
  return s;
}

CommCost comm_cost(const char* kind, std::string collective, int group_size, const CommGroup& g,
                   const detail::CommNumbers& n) {
  CommCost c;
  c.kind = kind;
  c.collective = std::move(collective);
  c.group_size = group_size;
  c.tier = tier_text(g);
  c.time = n.time;
  c.exposed = n.exposed;
  c.bytes_per_step = n.bytes;
  return c;
}

}  // namespace

TrainingEstimate estimate_training(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                   const TrainingSystem& sys, Explain explain) {
  return detail::estimate_training_laid_out(arch, plan, sys, explain, nullptr);
}

TrainingEstimate detail::estimate_training_laid_out(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                                    const TrainingSystem& sys, Explain explain, StepLayout* layout) {
  // The model as the framework builds it: the vocabulary padded to a multiple of divisor × tp (training_recipes.cpp).
  const wl::TransformerArch a = wl::with_padded_vocab(arch, plan);
  TrainingEstimate est;
  est.feasibility = check_training_layout(a, plan, sys);
  if (!est.feasibility.ok) return est;
  using units::format;
  const auto& par = plan.par;
  const hw::GpuSpec& gpu = *sys.gpu;
  const detail::TrainingConsts k = detail::training_consts(a, plan, sys);
  const Device& d = k.d;
  const ParameterCounts& params = k.params;

  // ---- the terms: compute of one micro-batch, one collective of each kind, the optimizer pass ----
  detail::StepTerms terms;
  LayerCost first;
  terms.compute = detail::compute_terms(a, plan, d, &first);
  if (plan.mixed_precision == wl::MixedPrecision::amp) terms.amp_casts = detail::amp_cast_time(a, params, plan, d);
  // Megatron-Core rank order (parallel_state.py): the dense grid tp-cp-dp-pp, tp innermost; the expert grid
  // etp-ep-edp-pp over the same GPUs (tp·cp·dp regrouped as etp·ep·edp: parallel folding; etp = tp by default).
  // Gradients: dense over dp·cp (stride tp), routed experts over the expert-data-parallel group (stride etp·ep).
  const int n_dp = detail::dense_grad_group_size(plan), n_edp = detail::expert_grad_group_size(plan);
  const CommGroup tp_g = training_comm_group(par.tp, 1, sys);
  const CommGroup cp_g = training_comm_group(par.cp, par.tp, sys);
  const CommGroup dp_g = training_comm_group(n_dp, par.tp, sys);
  const int etp = par.expert_tp();
  const CommGroup edp_g = training_comm_group(n_edp, etp * par.ep, sys);
  const CommGroup ep_g = training_comm_group(par.ep, etp, sys);
  const CommGroup pp_g = training_comm_group(par.pp > 1 ? 2 : 1, par.tp * par.cp * par.dp, sys);
  if (par.tp > 1) terms.tp_one = detail::tp_collective_time(a, plan, tp_g);
  if (detail::expert_tp_folded(a, plan) && etp > 1)
    terms.etp_one = detail::etp_collective_time(a, plan, training_comm_group(etp, 1, sys));
  if (par.cp > 1) terms.cp_one = detail::cp_collective_time(a, plan, cp_g);
  if (par.ep > 1 && a.moe) {
    terms.ep_one = detail::ep_collective_time(a, plan, ep_g);
    const detail::MoeDispatch md = detail::moe_dispatch(a, plan, ep_g);
    terms.ep_bytes_one = (md.dispatch_bytes + md.combine_bytes) * 0.5;
  }
  if (par.pp > 1) {
    terms.pp_one = detail::pp_collective_time(a, plan, pp_g);
    terms.pp_gather_one = detail::pp_gather_time(a, plan, tp_g);
  }
  const std::vector<detail::StageShape> stages = detail::stage_shapes(a, params, plan);
  terms.stages = &stages;
  if (n_dp > 1) {
    terms.dp = detail::dp_collective_times(a, params, plan, dp_g, edp_g);
    terms.dp_copy = detail::dp_copy_time(a, params, plan, d);
  }
  terms.optimizer = detail::optimizer_time(a, params, plan, d);
  if (plan.offload == wl::Offload::optimizer) terms.offload = detail::offload_times(a, params, plan, sys);
  if (plan.activation_offload_layers > 0) {
    terms.act_offload_layer = detail::activation_offload_layer_time(a, plan, sys);
    terms.act_offload_layer_bytes = units::bytes(detail::activation_offload_layer_bytes(a, plan));
  }

  // ---- the step ----
  detail::StepCore core;
  core.stage_times = &est.stage_time;
  core.layout = layout;
  detail::compose_step(a, plan, k, terms, core);
  const std::int64_t m = core.m;
  est.micro_batches = m;
  est.bottleneck_stage = core.bottleneck;
  est.comm = {comm_cost("tp", par.sequence_parallel ? "all-gather + reduce-scatter" : "all-reduce", par.tp, tp_g, core.tp),
              comm_cost("cp", "all-gather (K,V) + reduce-scatter (dK,dV)", par.cp, cp_g, core.cp),
              comm_cost("ep", "all-to-all", par.ep, ep_g, core.ep),
              comm_cost("pp", "send/recv", par.pp, pp_g, core.pp),
              comm_cost("dp", dp_collective_text(a, plan, n_edp), n_dp, dp_g, core.dp)};
  est.bubble_fraction = core.bubble_fraction;
  est.step = core.step;
  const StepBreakdown& s = est.step;
  est.step_time = s.total;
  if (!core.ok) {
    est.feasibility.fail("the step time could not be evaluated (a communication group has no usable link)");
    est.step_time = Seconds(0);
    return est;
  }
  est.tokens_per_s = core.tokens_per_s;
  est.model_flops_per_step = core.model_flops;
  est.hardware_flops_per_step = core.hardware_flops;
  est.mfu = core.mfu;
  est.hfu = core.hfu;

  // ---- memory ----
  est.memory = training_memory(a, params, plan, gpu, default_training_overheads(), explain);
  if (!est.memory.fits) {
    est.feasibility.fail(detail::does_not_fit_message(a, params, plan, sys, est.memory));
  }

  if (!detail::offload_fits_host(est.memory.host_offloaded.raw(), plan, sys)) {
    const double need = detail::offload_host_bytes_per_node(est.memory.host_offloaded.raw(), plan, sys);
    est.memory.fits = false;  // "fits" covers every memory the plan needs: the GPU's and the host's
    est.feasibility.fail(fmt::format(
        "CPU offload does not fit in host memory: the node's GPUs keep {} of offloaded {} on the host, {} has {}",
        format(units::bytes(need)),
        plan.activation_offload_layers > 0
            ? (plan.offload == wl::Offload::optimizer ? "master weights, optimizer states and activations" : "activations")
            : "master weights and optimizer states",
        sys.node->info.id, format(*sys.node->host_memory)));
  }

  // ---- time to train, cost, energy ----
  if (core.has_time_to_train) {
    est.time_to_train = core.time_to_train;
    est.gpu_hours = core.gpu_hours;
  }
  if (core.has_cost) est.cost = core.cost;
  if (core.has_energy) est.energy = core.energy;
  est.layer_ops = first.ops;

  if (explain == Explain::on) {
    detail::explain_training(a, plan, sys, k, terms, first, core, est);
    detail::explain_vocab_padding(arch.vocab, plan, est.derivation);
    detail::explain_activation_offload(a, plan, sys, terms, core, est.derivation);
  }
  return est;
}

}  // namespace gpuplan::model
