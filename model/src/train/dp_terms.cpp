// The data-parallel terms of a training step (training_core.hpp), each priced once and shared by estimate_training
// and the search: the gradient groups and their link tiers, the ZeRO shard counts, the parameters the DP step reduces,
// the unit reduced last and gathered first, the DP collectives (DDP all-reduce; ZeRO's reduce-scatter and all-gather;
// DeepSpeed ZeRO-3's per-tensor calls), the PyTorch wrappers' copies (DDP's bucket copy, FSDP2's copy-in/copy-out) and
// the DP kernels' SM share. compose_step.cpp exposes them; dp_buckets.cpp forms the buckets.
#include "gpuplan/model/training.hpp"

#include <algorithm>
#include <numeric>

#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/params.hpp"
#include "dp_instances.hpp"
#include "training_core.hpp"

namespace gpuplan::model::detail {

using units::Bytes;
using units::Seconds;

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
  g.collnet = plan.dp_sharp;      // SHARP on the dp(·cp) group (--sharp); dp_collective_times clears it for experts
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

double optimizer_shard(const wl::TrainingPlan& plan) {
  // The hybrid shard group at every ZeRO stage: FSDP's HYBRID_SHARD (ZeRO 3), Megatron-Core's partial distributed
  // optimizer (ZeRO 1, --num-distributed-optimizer-instances: the optimizer sharded over dp·cp/N ranks and replicated
  // N times, parallel_state.py intra_partial_data_parallel_size at Megatron-LM d98e8a64) and Megatron-FSDP's HSDP.
  const auto& par = plan.par;
  return plan.zero == wl::ZeroStage::none
             ? 1.0
             : double(par.shard_group > 0 ? par.shard_group : dense_grad_group_size(plan));
}

double expert_optimizer_shard(const wl::TrainingPlan& plan) {
  // The dense shard group (dp·cp, or the hybrid group) regrouped for the experts: × tp / (etp·ep).
  if (plan.zero == wl::ZeroStage::none) return 1.0;
  return std::max(1.0, optimizer_shard(plan) * double(plan.par.tp) / double(plan.par.expert_shard()));
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

namespace {

/// A gradient group cut into `instances` replicas of consecutive shard groups, as Megatron-Core builds them
/// (Megatron-LM d98e8a64, megatron/core/parallel_state.py: the intra-instance group is the slice
/// ranks_with_cp[i·s : (i+1)·s] of the dp-cp group, s = dp·cp/N; the inter-instance group holds one rank of each
/// slice, s members apart). With members of the whole group per scale-up domain u (resolve_group, consecutive), a
/// slice of s lies in gcd(s, u)-member domains, and the inter-instance group has u/s members per domain where s
/// divides u, else one. The tiers are the whole group's (on a fully connected mesh the scale-up rate was scaled for
/// its members, so a smaller slice is priced a little fast there; NVSwitch domains are unaffected).
struct DpHybridSplit {
  CommGroup intra, inter;
  int instances = 1;
};

DpHybridSplit dp_hybrid_split(const CommGroup& g, int instances) {
  DpHybridSplit s{g, g, 1};
  if (instances <= 1 || g.size % instances != 0) return s;
  const int shard = g.size / instances, u = std::max(1, g.scale_up_size);
  s.instances = instances;
  s.intra.size = shard;
  s.intra.scale_up_size = std::gcd(shard, u);
  s.inter.size = instances;
  s.inter.scale_up_size = u % shard == 0 ? std::gcd(instances, u / shard) : 1;
  return s;
}

}  // namespace

int dp_optimizer_instances(const wl::TrainingPlan& plan) {
  const int n = dense_grad_group_size(plan), g = plan.par.shard_group;
  if (plan.zero == wl::ZeroStage::none || g <= 0 || g >= n || n % g != 0) return 1;
  return n / g;
}

DpTimes dp_collective_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                            const CommGroup& dp_group, const CommGroup& expert_group) {
  return dp_collective_times(a, params, plan, dp_group, expert_group, dp_buckets(a, plan));
}

DpTimes dp_collective_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                            const CommGroup& dp_group, const CommGroup& expert_group, const DpBuckets& buckets) {
  DpTimes t;
  // The DP communicators' CTA cap (--dp-max-ctas) and, for the dense dp(·cp) group only, SHARP (--sharp: Megatron-
  // Core sets NCCL_COLLNET_ENABLE=1 while it creates the dp and dp_cp groups and unsets it after, parallel_state.py
  // at d98e8a64; the expert-data-parallel group is built without it), whoever resolved the groups (a group is copied
  // only when it differs: the search prices this per DP term, and a group's copy cost more than its collectives).
  CommGroup dp_capped, expert_capped;
  auto capped = [&plan](const CommGroup& g, CommGroup& copy, bool collnet) -> const CommGroup& {
    if (g.max_ctas == plan.dp_max_ctas && g.collnet == collnet) return g;
    copy = g;
    copy.max_ctas = plan.dp_max_ctas;
    copy.collnet = collnet;
    return copy;
  };
  const CommGroup& dp_g = capped(dp_group, dp_capped, plan.dp_sharp);
  const CommGroup& expert_g = capped(expert_group, expert_capped, false);
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
    // A hybrid shard group (dp_optimizer_instances > 1): Megatron-Core's partial distributed optimizer
    // reduce-scatters each bucket inside its instance and then all-reduces the instance's shard across the instances
    // (param_and_grad_buffer.py start_grad_sync at d98e8a64: the intra-instance reduce-scatter, then "With multiple
    // DistOpt instances, we need to all-reduce across instances"), and gathers the updated weights inside the
    // instance; Megatron-FSDP's HSDP (outer no_shard) the same, its outer all-reduce on the last micro-batch
    // (megatron_fsdp.py, outer_fsdp_group_grad_reduce). The experts' group is cut into as many instances
    // (parallel_state.py intra_partial_expert_data_parallel_size = expert-DP / N).
    const int inst = dp_optimizer_instances(plan);
    const DpHybridSplit hd = dp_hybrid_split(dp_g, inst), he = dp_hybrid_split(expert_g, inst);
    const auto across = [](const DpHybridSplit& h, Bytes b) {
      return h.instances > 1 ? collective_time(Collective::all_reduce, b / double(h.intra.size), h.inter) : Seconds{};
    };
    t.reduce = collective_time(Collective::reduce_scatter, grads, hd.intra) +
               collective_time(Collective::reduce_scatter, expert_grads, he.intra) + across(hd, grads) +
               across(he, expert_grads);
    t.gather = collective_time(Collective::all_gather, weights, hd.intra) +
               collective_time(Collective::all_gather, expert_weights, he.intra);
    t.reduce_last = collective_time(Collective::reduce_scatter, unit_grads, hd.intra) + across(hd, unit_grads);
    t.gather_first = collective_time(Collective::all_gather, unit_weights, hd.intra);
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
  if (plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking) {
    // DeepSpeed 0.3.13-0.5.x through PyTorch's list collectives (ProcessGroupNCCL allgather / reduce_scatter with a
    // list of per-rank views: a flat buffer and one copy per rank, pytorch 6f583bb5 and 00f5dfd5,
    // torch/lib/c10d/ProcessGroupNCCL.cpp):
    //  - every gather (partition_parameters.py _allgather_param at v0.3.13): torch.zeros of the whole tensor (c B
    //    written), then the gathered flat output copied into the list's views (2·c B);
    //  - every micro-batch's gradients: divided in place by the DP size (stage3.py average_tensor, 2·b_g B) and
    //    copied into the reduce-scatter's flat input (_reduce_scatter_gradient's list, 2·b_g B).
    const double cd16 = base_weight_bytes(plan);
    const double m16 = double(std::max<std::int64_t>(1, plan.micro_batches()));
    return m16 * p_gpu.total() * (zero3_gathers_per_microbatch(plan) * 3.0 * cd16 + 4.0 * pr.gradient_bytes);
  }
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
  return streaming_cost(plan.zero == wl::ZeroStage::parameters &&
                                plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking
                            ? "ZeRO-3 list-collective copies"
                        : plan.zero != wl::ZeroStage::none ? "FSDP copy-in/copy-out"
                        : plan.overlap_grad_reduce     ? "DDP bucket copy"
                                                       : "flat gradient buffer copies",
                        OpClass::elementwise, bytes, units::flop(0), d)
      .time;
}

double dp_comm_compute_share(const Device& d, const wl::TrainingPlan& plan) {
  const double share = comm_compute_share(d);
  if (plan.dp_max_ctas <= 0 || d.gpu->compute_units <= 0) return share;
  return std::min(share, double(plan.dp_max_ctas) / double(d.gpu->compute_units));
}

}  // namespace gpuplan::model::detail
