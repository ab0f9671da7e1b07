// The terms of one training step, each priced once and shared by estimate_training and the search
// (training_core.hpp): the device and constants, one micro-batch's compute per layer kind with the embedding, head and
// loss (its kernels: norm_loss.cpp), the parameters per GPU, the AMP casts, the optimizer step and the host offload. Each parallel dimension's
// message and collective is parallel_dims.cpp's, the DP/ZeRO/FSDP terms dp_terms.cpp's; compose_step.cpp composes
// them into the step.
#include "gpuplan/model/training.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/topology.hpp"
#include "fp8_quant.hpp"
#include "norm_loss.hpp"
#include "quant_recipe.hpp"
#include "training_core.hpp"
#include "optimizer_rate.hpp"
#include "graph_memo.hpp"

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
  k.head_forward = units::flop(2.0 * double(detail::head_graph(a)->matmul_per_token()));
  k.moe_layers = double(a.moe_layer_count());
  k.parameter_tensors = plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking ? parameter_tensors(a) : 0.0;
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
  // Embedding (first stage) and final norm, LM head + loss (last stage): the head graph's ops (graph.hpp
  // build_head_graph), each priced once here.
  const std::int64_t T = plan.micro_batch * plan.seq_len / par.cp;
  const std::int64_t T_norm = par.sequence_parallel ? T / par.tp : T;
  const double e = plan.precision.activation_bytes;
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
  // LoRA: the LM head and the embedding are frozen: no weight-gradient GEMM, no gradient scatter-add.
  const bool frozen = plan.lora.on();
  double lookups = 0;  // the token embedding, and a learned position embedding beside it
  Seconds output_and_loss{};  // the LM head's GEMMs and the loss (an MTP module's shared head runs them again)
  for (const Op& o : detail::head_graph(a)) {
    if (o.kind == OpKind::embedding) {
      lookups += 1.0;
    } else if (o.kind == OpKind::norm) {
      // The final norm, on the sequence shard under sequence parallelism (Megatron's final_layernorm), as the
      // layers' norms (norm_loss.hpp).
      NormCost fn = training_norm_cost(o.name, names, norm_impl(a, plan), double(T_norm) * double(o.in), o.in, e, hd);
      if (!fn.priced) continue;
      c.head_time += fn.fwd.time + fn.bwd.time;
      if (names) {
        c.head_ops.push_back(std::move(fn.fwd));
        c.head_ops.push_back(std::move(fn.bwd));
      }
    } else if (o.kind == OpKind::linear && o.linear == LinearKind::lm_head) {
      // The vocabulary-parallel output layer: T tokens (gathered under sequence parallelism) × its shard of the
      // vocabulary, and the loss over those logits (norm_loss.hpp cross_entropy_cost).
      const std::int64_t n = o.out / par.tp, k = o.in;
      const OpCost head_f = gemm_cost(names ? std::string(o.name) : none, {T, n, k, 1}, head_p, hd);
      const OpCost head_dg = gemm_cost(names ? std::string(o.name) + " dgrad" : none, {T, k, n, 1}, head_p, hd);
      OpCost head_wg = gemm_cost(names ? std::string(o.name) + " wgrad" : none, {k, n, T, 1}, head_p, hd);
      if (wgrad_accumulates(plan) && !frozen)
        head_wg = accumulating_wgrad(head_wg, double(k) * double(n), plan.precision.gradient_bytes, hd,
                                     !plan.fused_wgrad_accumulation);
      const LossCost loss = cross_entropy_cost(plan, double(T) * double(n), names, hd);
      output_and_loss = head_f.time + head_dg.time + (frozen ? Seconds(0) : head_wg.time) + loss.fwd.time + loss.bwd.time;
      c.head_time += output_and_loss;
      c.head_wgrad = frozen ? Seconds(0) : head_wg.time;
      if (names) {
        c.head_ops.push_back(head_f);
        c.head_ops.push_back(head_dg);
        if (!frozen) c.head_ops.push_back(head_wg);
        c.head_ops.push_back(loss.fwd);
        c.head_ops.push_back(loss.bwd);
      }
    }
  }
  // Each lookup reads and writes T·h (+ the gradient's scatter-add: ×3 when trained).
  const OpCost embed = streaming_cost(none, OpClass::embedding, units::bytes(lookups * double(T) * double(layer_boundary_width(a)) * e * 2.0),
                                      units::flop(0), hd);
  c.embed_time = embed.time * (frozen ? 1.0 : 3.0);
  if (plan.mtp_layers > 0) {
    // DeepSeek-V3 §2.2.1: h' = M·[RMSNorm(h); RMSNorm(Emb(t))], M of h × 2h, then one transformer block (priced with
    // the stage's layers), the module's norm and the shared output head with its loss (the main model's GEMMs and
    // loss). The module's own ops come from its graph (build_mtp_graph): the two input norms and the norm before the
    // shared head, priced as the layers' norms on the sequence shard (Megatron-Core's MTP layer: enorm, hnorm,
    // final_layernorm), and the projection M.
    c.mtp_extra = output_and_loss;
    for (const Op& o : build_mtp_graph(a)) {
      if (o.kind == OpKind::norm) {
        const NormCost mn = training_norm_cost(o.name, false, norm_impl(a, plan), double(T_norm) * double(o.in), o.in,
                                               e, hd);
        if (mn.priced) c.mtp_extra = mn.fwd.time + mn.bwd.time + c.mtp_extra;
        continue;
      }
      if (o.kind != OpKind::linear) continue;
      const OpCost pf = gemm_cost(none, {T, o.out, o.in, 1}, plan.precision.compute, hd);
      const OpCost pd = gemm_cost(none, {T, o.in, o.out, 1}, plan.precision.compute, hd);
      const OpCost pw = gemm_cost(none, {o.in, o.out, T, 1}, plan.precision.compute, hd);
      c.mtp_extra = pf.time + pd.time + pw.time + c.mtp_extra;
    }
  }
  return c;
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
