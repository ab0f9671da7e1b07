#include "gpuplan/model/training.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/topology.hpp"
#include "layer_cost.hpp"

namespace gpuplan::model {

using units::Bytes;
using units::Seconds;

units::Seconds time_at_mfu(units::Flops total, double gpus, units::FlopRate peak, double mfu) {
  return total / (peak * (gpus * mfu));
}

double pipeline_bubble_fraction(int pp, int virtual_stages, std::int64_t micro_batches) {
  if (pp <= 1 || micro_batches <= 0) return 0.0;
  return static_cast<double>(pp - 1) / (static_cast<double>(std::max(1, virtual_stages)) * double(micro_batches));
}

Feasibility check_training_layout(const wl::TransformerArch& a, const wl::TrainingPlan& plan,
                                  const TrainingSystem& sys) {
  Feasibility f;
  const auto& p = plan.par;
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.cp < 1 || p.ep < 1) f.fail("every parallel size must be at least 1");
  if (!f.ok) return f;
  if (a.heads % p.tp != 0) {
    std::string options;
    for (std::int64_t t = 1; t <= std::min<std::int64_t>(a.heads, 64); ++t)
      if (a.heads % t == 0 && (a.mla || a.kv_heads % t == 0 || t % a.kv_heads == 0))
        options += (options.empty() ? "" : ", ") + std::to_string(t);
    f.fail(fmt::format("TP {} does not divide the {} attention heads (TP sizes that work: {})", p.tp, a.heads, options));
  }
  if (!a.mla && a.kv_heads % p.tp != 0 && p.tp % a.kv_heads != 0)
    f.fail(fmt::format("TP {} neither divides nor is a multiple of the {} KV heads", p.tp, a.kv_heads));
  if (a.intermediate % p.tp != 0) f.fail(fmt::format("TP {} does not divide the FFN width {}", p.tp, a.intermediate));
  const int chunks = p.pp * std::max(1, p.virtual_stages);
  if (p.pp > a.layers) f.fail(fmt::format("PP {} exceeds the {} layers", p.pp, a.layers));
  else if (a.layers % chunks != 0)
    f.fail(fmt::format("{} layers do not split evenly into PP {} × {} chunks", a.layers, p.pp,
                       std::max(1, p.virtual_stages)));
  if (plan.schedule == wl::PipelineSchedule::interleaved && (p.pp < 2 || p.virtual_stages < 2))
    f.fail("the interleaved schedule needs PP ≥ 2 and virtual stages ≥ 2");
  if (plan.micro_batch < 1 || plan.global_batch < 1 || plan.seq_len < 1) f.fail("batch sizes and sequence length must be ≥ 1");
  else if (plan.global_batch % (plan.micro_batch * p.dp) != 0)
    f.fail(fmt::format("global batch {} is not divisible by micro-batch {} × DP {} = {}", plan.global_batch,
                       plan.micro_batch, p.dp, plan.micro_batch * p.dp));
  if (p.cp > 1 && plan.seq_len % (2 * p.cp) != 0)
    f.fail(fmt::format("sequence {} is not divisible by 2·CP = {} (load-balanced causal context parallelism)",
                       plan.seq_len, 2 * p.cp));
  if (p.ep > 1) {
    if (!a.moe) f.fail("EP > 1 needs a mixture-of-experts model");
    else if (a.moe->num_experts % p.ep != 0)
      f.fail(fmt::format("EP {} does not divide the {} experts", p.ep, a.moe->num_experts));
    if ((p.dp * p.cp) % p.ep != 0) f.fail(fmt::format("EP {} must divide DP × CP = {}", p.ep, p.dp * p.cp));
  }
  if (plan.zero == wl::ZeroStage::parameters && p.shard_group > 0 && p.dp % p.shard_group != 0)
    f.fail(fmt::format("hybrid shard group {} does not divide DP {}", p.shard_group, p.dp));
  if (sys.gpu == nullptr) f.fail("no GPU given");
  if (p.gpus() > 1 && sys.node == nullptr)
    f.fail("more than one GPU needs a node shape (give --node, or a GPU that a shipped node uses)");
  if (sys.node != nullptr && !sys.node->scale_out &&
      p.gpus() > std::max<long long>(sys.node->gpus, sys.node->scale_up.domain_gpus))
    f.fail(fmt::format("{} GPUs span several {} nodes, but the node data has no scale-out network (its NICs are not "
                       "sourced): use at most {} GPUs or a node with a scale-out network",
                       p.gpus(), sys.node->info.id, std::max(sys.node->gpus, sys.node->scale_up.domain_gpus)));
  return f;
}

namespace {

using detail::LayerCost;
using detail::PassCost;
using detail::layer_cost;

Seconds collective_time(Collective op, Bytes bytes, const CommGroup& g) {
  if (g.size <= 1 || bytes.raw() <= 0) return Seconds(0);
  return collective_cost(op, bytes, g, CollectiveAlgorithm::automatic, Explain::off).time;
}

std::string tier_text(const CommGroup& g) {
  if (g.size <= 1) return "none";
  if (g.domains() <= 1) return g.scale_up.name;
  const std::string out = g.scale_out ? g.scale_out->name : std::string("?");
  if (g.scale_up_size <= 1) return fmt::format("{} across {} scale-up domains", out, g.domains());
  return fmt::format("{} × {} inside, {} across {} domains", g.scale_up_size, g.scale_up.name, out, g.domains());
}

}  // namespace

TrainingEstimate estimate_training(const wl::TransformerArch& a, const wl::TrainingPlan& plan,
                                   const TrainingSystem& sys, Explain explain) {
  TrainingEstimate est;
  est.feasibility = check_training_layout(a, plan, sys);
  if (!est.feasibility.ok) return est;
  using units::format;
  const auto& par = plan.par;
  const hw::GpuSpec& gpu = *sys.gpu;
  Device d = make_device(gpu);
  if (sys.efficiency) d.eff = *sys.efficiency;
  if (plan.attention_kernel == wl::AttentionKernel::fa2) {
    d.eff.attention_fwd = d.eff.attention_fwd_fa2;
    d.eff.attention_bwd = d.eff.attention_bwd_fa2;
  }
  const ParameterCounts params = parameter_counts(a, Explain::off);
  const std::int64_t m = plan.micro_batches();
  est.micro_batches = m;
  const double tokens_per_step = double(plan.global_batch) * double(plan.seq_len);

  // ---- compute: one micro-batch through each layer kind ----
  const std::int64_t L = a.layers;
  PassCost fwd_all, bwd_all;
  units::Flops flops_fwd_all{}, flops_bwd_all{};
  LayerCost first;
  bool have_first = false;
  // Cache per (moe, sliding) kind: layers of one kind cost the same.
  LayerCost kinds[2][2];
  bool have_kind[2][2] = {{false, false}, {false, false}};
  for (std::int64_t l = 0; l < L; ++l) {
    const bool moe = a.is_moe_layer(l);
    const bool sliding = a.is_sliding_layer(l);
    if (!have_kind[moe][sliding]) {
      kinds[moe][sliding] = layer_cost(a, plan, moe, sliding, d);
      have_kind[moe][sliding] = true;
    }
    const LayerCost& lc = kinds[moe][sliding];
    if (!have_first) {
      first = lc;
      have_first = true;
    }
    fwd_all += lc.fwd;
    bwd_all += lc.bwd;
    flops_fwd_all += lc.flops_fwd;
    flops_bwd_all += lc.flops_bwd;
  }
  // Layers are spread evenly over the pipeline stages; each GPU runs L / pp of them per micro-batch.
  const double stage_share = 1.0 / double(par.pp);
  PassCost fwd = fwd_all.scaled(stage_share), bwd = bwd_all.scaled(stage_share);
  PassCost recompute{};
  if (plan.recompute == wl::Recompute::full) recompute = fwd;
  else if (plan.recompute == wl::Recompute::selective && !plan.flash_attention) recompute.attention = fwd.attention;

  // Embedding (first stage) and LM head + loss (last stage): the last stage is the critical one with the head.
  const std::int64_t T = plan.micro_batch * plan.seq_len / par.cp;
  const double e = plan.precision.activation_bytes;
  const std::int64_t v_local = a.vocab / par.tp;
  OpCost head_f = gemm_cost("LM head", {T, v_local, a.hidden, 1}, plan.precision.compute, d);
  OpCost head_dg = gemm_cost("LM head dgrad", {T, a.hidden, v_local, 1}, plan.precision.compute, d);
  OpCost head_wg = gemm_cost("LM head wgrad", {a.hidden, v_local, T, 1}, plan.precision.compute, d);
  // Fused cross-entropy reads the logits and writes fp32 softmax statistics; its backward writes the gradient.
  // Eager: upcast (2 + 4 B), log_softmax (4 + 4 B) forward; fill (4 B), log_softmax_backward (4 + 4 + 4 B) and the
  // cast back (4 + 2 B) backward, per logit.
  const bool eager_ops = plan.kernels == wl::KernelStyle::eager;
  const double ce_f = eager_ops ? 14.0 : e + 4.0, ce_b = eager_ops ? 22.0 : 4.0 + e;
  OpCost loss_f = streaming_cost("cross-entropy", OpClass::loss, units::bytes(double(T * v_local) * ce_f),
                                 units::flop(5.0 * double(T * v_local)), d);
  OpCost loss_b = streaming_cost("cross-entropy bwd", OpClass::loss, units::bytes(double(T * v_local) * ce_b),
                                 units::flop(3.0 * double(T * v_local)), d);
  OpCost embed = streaming_cost("embedding", OpClass::embedding, units::bytes(double(T * a.hidden) * e * 2.0),
                                units::flop(0), d);
  const Seconds head_time = head_f.time + head_dg.time + head_wg.time + loss_f.time + loss_b.time;
  const Seconds embed_time = embed.time * 3.0;  // lookup + gradient scatter-add
  const Seconds extra_last = head_time + (par.pp == 1 ? embed_time : Seconds(0));
  const Seconds extra_first = par.pp == 1 ? Seconds(0) : embed_time;
  Seconds extra = std::max(extra_last, extra_first);
  if (plan.mixed_precision == wl::MixedPrecision::amp) {
    // PyTorch AMP: autocast casts every fp32 weight to bf16 in each forward (read 4 B, write 2 B per parameter) and
    // each bf16 weight gradient is copied into the fp32 .grad (read 2 B, write 4 B). (FSDP with a bf16 param_dtype
    // policy folds the cast into its all-gather: that is mixed_precision "megatron" here, bf16 parameters.)
    const double p_stage = double(parameter_counts(a, Explain::off).total) / double(par.tp * par.pp);
    const OpCost casts = streaming_cost("autocast weight casts", OpClass::elementwise, units::bytes(p_stage * 12.0),
                                        units::flop(0), d);
    extra += casts.time;
  }

  // ---- communication ----
  const CommGroup none{};
  auto group = [&](int size, int stride) -> CommGroup {
    if (size <= 1 || sys.node == nullptr || sys.db == nullptr) return none;
    std::optional<hw::ClusterSpec> cl;
    if (sys.cluster != nullptr) cl = *sys.cluster;
    CommGroup g = resolve_group(size, stride, *sys.node, *sys.db, cl);
    if (sys.scale_up_calibration) apply_calibration(g, *sys.scale_up_calibration);
    return g;
  };
  // Megatron rank order: tp innermost, then cp, then dp (ep carved out of dp·cp), pp outermost.
  const CommGroup tp_g = group(par.tp, 1);
  const CommGroup cp_g = group(par.cp, par.tp);
  const CommGroup dp_g = group(par.dp, par.tp * par.cp);
  const CommGroup ep_g = group(par.ep, par.tp * par.cp);
  const CommGroup pp_g = group(par.pp > 1 ? 2 : 1, par.tp * par.cp * par.dp);
  const std::int64_t layers_stage = L / par.pp;
  const double moe_layers_stage = double(a.moe_layer_count()) / double(par.pp);

  // TP: Megatron — 2 all-reduces forward and 2 backward per layer (SP: all-gather + reduce-scatter, same bytes).
  CommCost tp;
  tp.kind = "tp";
  tp.collective = par.sequence_parallel ? "all-gather + reduce-scatter" : "all-reduce";
  tp.group_size = par.tp;
  tp.tier = tier_text(tp_g);
  if (par.tp > 1) {
    const Bytes act = units::bytes(double(T * a.hidden) * e);
    const Seconds one = par.sequence_parallel
                            ? collective_time(Collective::all_gather, act, tp_g) +
                                  collective_time(Collective::reduce_scatter, act, tp_g)
                            : collective_time(Collective::all_reduce, act, tp_g);
    // Per layer: a forward pair and a backward pair; full recompute repeats the forward pair.
    const double pairs = plan.recompute == wl::Recompute::full ? 3.0 : 2.0;
    const double per_mb = pairs * double(layers_stage);
    tp.time = one * per_mb * double(m);
    tp.bytes_per_step = act * (per_mb * 2.0 * double(m));
    const Seconds gemm_stage = (fwd.gemm + bwd.gemm) * double(m);
    tp.exposed = plan.overlap_tp_comm ? std::max(Seconds(0), tp.time - gemm_stage) : tp.time;
  }
  // CP: ring attention exchanges K and V forward, dK and dV backward; overlapped with attention compute.
  CommCost cp;
  cp.kind = "cp";
  cp.collective = "all-gather (K,V) + reduce-scatter (dK,dV)";
  cp.group_size = par.cp;
  cp.tier = tier_text(cp_g);
  if (par.cp > 1) {
    const std::int64_t kv_dim = a.mla ? a.mla->kv_lora_rank + a.mla->qk_rope_head_dim : 2 * a.kv_heads * a.head_dim / par.tp;
    const Bytes kv = units::bytes(double(plan.micro_batch * plan.seq_len * kv_dim) * e);
    const Seconds one = collective_time(Collective::all_gather, kv, cp_g) * 2.0 +
                        collective_time(Collective::reduce_scatter, kv, cp_g);
    cp.time = one * double(layers_stage) * double(m);
    cp.bytes_per_step = kv * (3.0 * double(layers_stage) * double(m));
    cp.exposed = std::max(Seconds(0), cp.time - (fwd.attention + bwd.attention) * double(m));
  }
  // EP: dispatch and combine all-to-all, forward and backward, per MoE layer.
  CommCost ep;
  ep.kind = "ep";
  ep.collective = "all-to-all";
  ep.group_size = par.ep;
  ep.tier = tier_text(ep_g);
  if (par.ep > 1 && a.moe) {
    const Bytes buf = units::bytes(double(T * a.moe->experts_per_token * a.hidden) * e);
    ep.time = collective_time(Collective::all_to_all, buf, ep_g) * (4.0 * moe_layers_stage * double(m));
    ep.bytes_per_step = buf * (4.0 * moe_layers_stage * double(m));
    ep.exposed = ep.time;
  }
  // PP: activations forward, gradients backward, at each stage boundary per micro-batch.
  CommCost pp;
  pp.kind = "pp";
  pp.collective = "send/recv";
  pp.group_size = par.pp;
  pp.tier = tier_text(pp_g);
  if (par.pp > 1) {
    const Bytes act = units::bytes(double(T * a.hidden) * e / (par.sequence_parallel ? double(par.tp) : 1.0));
    const double sends = 2.0 * double(std::max(1, par.virtual_stages)) * double(m);
    pp.time = collective_time(Collective::send_recv, act, pp_g) * sends;
    pp.bytes_per_step = act * sends;
    pp.exposed = pp.time;
  }
  // DP: gradient reduction of this GPU's parameters (ZeRO ≥ 1: reduce-scatter + parameter all-gather).
  const double p_gpu = double(params.total) / double(par.tp * par.pp);  // approx: even stages
  CommCost dp;
  dp.kind = "dp";
  dp.collective = plan.zero == wl::ZeroStage::none ? "all-reduce" : "reduce-scatter + all-gather";
  dp.group_size = par.dp;
  dp.tier = tier_text(dp_g);
  const Seconds bwd_mb = (bwd.total() + recompute.total());
  const Seconds fwd_mb = fwd.total();
  if (par.dp > 1) {
    const Bytes grads = units::bytes(p_gpu * plan.precision.gradient_bytes);
    const Bytes weights = units::bytes(p_gpu * plan.precision.weight_bytes);
    Seconds reduce{}, gather{};
    if (plan.zero == wl::ZeroStage::none) {
      reduce = collective_time(Collective::all_reduce, grads, dp_g);
      dp.bytes_per_step = grads;
    } else {
      reduce = collective_time(Collective::reduce_scatter, grads, dp_g);
      gather = collective_time(Collective::all_gather, weights, dp_g);
      dp.bytes_per_step = grads + weights;
    }
    if (plan.zero == wl::ZeroStage::parameters) {
      // FSDP/ZeRO-3: parameters gathered for forward and again for backward in every micro-batch.
      gather = gather * (2.0 * double(m));
      dp.bytes_per_step = grads + weights * (2.0 * double(m));
    }
    dp.time = reduce + gather;
    // Bucketed reduction overlaps the backward of the last micro-batch; the last bucket stays exposed.
    const Seconds last_bucket = reduce / double(std::max<std::int64_t>(1, layers_stage));
    const Seconds reduce_exposed =
        plan.overlap_grad_reduce ? std::max(last_bucket, reduce - bwd_mb) : reduce;
    const Seconds gather_window = plan.zero == wl::ZeroStage::parameters ? (fwd_mb + bwd_mb) * double(m) : fwd_mb;
    const Seconds gather_exposed = plan.overlap_param_gather ? std::max(Seconds(0), gather - gather_window) : gather;
    // Overlap is not free: while NCCL runs it holds SMs (one per channel) that the GEMMs lose, so the hidden part
    // of the communication still costs (hidden time) × (NCCL's SM share). Assumption until calibrated: 16 channels,
    // NCCL's usual ring width on NVLink-connected Hopper/Ampere nodes.
    // (Parts whose SM count is not in the data get no contention term.)
    const double nccl_sm_share = gpu.compute_units > 0 ? std::min(1.0, 16.0 / double(gpu.compute_units)) : 0.0;
    const Seconds hidden = (reduce - reduce_exposed) + (gather - gather_exposed);
    dp.exposed = reduce_exposed + gather_exposed + hidden * nccl_sm_share;
    // PyTorch DDP copies each gradient into its communication bucket (read + write per element); Megatron's
    // contiguous gradient buffer and FSDP avoid the copy.
    if (plan.kernels == wl::KernelStyle::eager && plan.zero == wl::ZeroStage::none)
      dp.exposed += streaming_cost("DDP bucket copy", OpClass::elementwise, grads * 2.0, units::flop(0), d).time;
  }
  est.comm = {tp, cp, ep, pp, dp};

  // ---- step ----
  const Seconds mb_compute = fwd.total() + bwd.total() + recompute.total();
  const Seconds per_mb_comm = (tp.exposed + cp.exposed + ep.exposed + pp.exposed) / double(m);
  const Seconds mb_time = mb_compute + per_mb_comm;
  est.bubble_fraction = pipeline_bubble_fraction(par.pp, plan.schedule == wl::PipelineSchedule::interleaved ? par.virtual_stages : 1, m);
  const Seconds steady = mb_time * double(m) + extra * double(m);
  const Seconds bubble = (mb_time + extra) * (est.bubble_fraction * double(m));

  // Optimizer: a fused AdamW streams master weights, m, v (read + write fp32), the gradient and the new weights.
  const double shard = plan.zero == wl::ZeroStage::none ? 1.0 : double(par.shard_group > 0 && plan.zero == wl::ZeroStage::parameters ? par.shard_group : par.dp);
  const double state_bytes = plan.optimizer == wl::OptimizerKind::adamw ? 16.0 : plan.optimizer == wl::OptimizerKind::adamw_8bit ? 4.0 : 8.0;
  const double opt_bytes = p_gpu / shard * (2.0 * plan.precision.master_bytes + state_bytes + plan.precision.gradient_bytes + plan.precision.weight_bytes);
  const OpCost opt = streaming_cost("optimizer step", OpClass::optimizer, units::bytes(opt_bytes), units::flop(p_gpu / shard * 12.0), d);

  StepBreakdown& s = est.step;
  s.gemm = (fwd.gemm + bwd.gemm + recompute.gemm) * double(m);
  s.attention = (fwd.attention + bwd.attention + recompute.attention) * double(m);
  s.elementwise = (fwd.elementwise + bwd.elementwise + recompute.elementwise) * double(m);
  s.embedding_loss = extra * double(m);
  s.recompute = recompute.total() * double(m);
  s.comm_exposed = tp.exposed + cp.exposed + ep.exposed + pp.exposed + dp.exposed;
  s.bubble = bubble;
  s.optimizer = opt.time;
  s.total = steady + bubble + dp.exposed + opt.time;
  est.step_time = s.total;
  if (!std::isfinite(s.total.raw()) || s.total.raw() <= 0) {
    est.feasibility.fail("the step time could not be evaluated (a communication group has no usable link)");
    est.step_time = Seconds(0);
    return est;
  }
  est.tokens_per_s = tokens_per_step / s.total.raw();

  // ---- MFU / HFU ----
  const FlopsPerToken fpt = flops_per_token(a, plan.seq_len, Explain::off);
  // Causal attention does half the score work; published MFU tables (Megatron, PaLM) count the full square.
  est.model_flops_per_step = fpt.training * tokens_per_step;
  // Full recompute repeats the forward of every layer (not the LM head): Megatron's 96·B·s·l·h² counts it so.
  const units::Flops layer_forward = fpt.forward - units::flop(2.0 * double(a.vocab) * double(a.hidden));
  est.hardware_flops_per_step =
      est.model_flops_per_step + (plan.recompute == wl::Recompute::full ? layer_forward * tokens_per_step : units::Flops(0));
  const double gpus = double(par.gpus());
  const double peak = d.peak(plan.precision.compute).raw();
  est.mfu = est.model_flops_per_step.raw() / (s.total.raw() * gpus * peak);
  est.hfu = est.hardware_flops_per_step.raw() / (s.total.raw() * gpus * peak);

  // ---- memory ----
  est.memory = training_memory(a, params, plan, gpu, default_training_overheads(), explain);
  if (!est.memory.fits) {
    const Bytes over = est.memory.total - est.memory.capacity;
    // What would make it fit: single changes to the plan, each checked with the memory model.
    std::vector<std::string> fixes;
    auto try_fix = [&](const std::string& what, wl::TrainingPlan alt) {
      if (!check_training_layout(a, alt, sys).ok) return;
      const TrainingMemory mm = training_memory(a, params, alt, gpu, default_training_overheads(), Explain::off);
      if (mm.fits) fixes.push_back(fmt::format("{} ({})", what, format(mm.total, units::BytePrefix::binary)));
    };
    if (plan.recompute != wl::Recompute::full) {
      auto alt = plan;
      alt.recompute = wl::Recompute::full;
      try_fix("--recompute full", alt);
    }
    if (par.dp > 1)
      for (int z = static_cast<int>(plan.zero) + 1; z <= 3; ++z) {
        auto alt = plan;
        alt.zero = static_cast<wl::ZeroStage>(z);
        try_fix(fmt::format("--zero {}", z), alt);
      }
    if (plan.micro_batch > 1) {
      auto alt = plan;
      alt.micro_batch = 1;
      try_fix("--micro-batch 1", alt);
    }
    if (par.dp % 2 == 0) {
      for (const char* dim : {"pp", "tp"}) {
        auto alt = plan;
        (dim[0] == 'p' ? alt.par.pp : alt.par.tp) *= 2;
        alt.par.dp /= 2;
        if (alt.par.tp > 1) alt.par.sequence_parallel = true;
        try_fix(fmt::format("--{} {} with DP {}", dim, dim[0] == 'p' ? alt.par.pp : alt.par.tp, alt.par.dp), alt);
      }
    }
    est.feasibility.fail(fmt::format("does not fit: needs {} per GPU, {} available ({} over). {}",
                                     format(est.memory.total, units::BytePrefix::binary),
                                     format(est.memory.capacity, units::BytePrefix::binary),
                                     format(over, units::BytePrefix::binary),
                                     fixes.empty() ? std::string("No single change of recompute, ZeRO stage, micro-batch, "
                                                                 "TP or PP makes it fit: use more GPUs or a GPU with more memory")
                                                   : "It would fit with: " + [&] {
                                                       std::string j;
                                                       for (const auto& f : fixes) j += (j.empty() ? "" : "; ") + f;
                                                       return j;
                                                     }()));
  }

  // ---- time to train, cost, energy ----
  if (plan.tokens_to_train) {
    // The same template as time_at_mfu, with this plan's modelled MFU.
    est.time_to_train = time_at_mfu(est.model_flops_per_step * (*plan.tokens_to_train / tokens_per_step), gpus,
                                    d.peak(plan.precision.compute), est.mfu);
    est.gpu_hours = units::to_hours(*est.time_to_train) * gpus;
    std::optional<units::UsdPerSecond> price = sys.price ? sys.price : gpu.price;
    if (price) est.cost = units::usd(units::to_usd_per_hour(*price) * *est.gpu_hours);
    if (gpu.tdp) {
      // Board power at TDP while computing, idle draw ignored: an estimate, not a measurement.
      const double busy = std::min(1.0, (s.gemm + s.attention + s.elementwise + s.embedding_loss).raw() / s.total.raw());
      est.energy = units::Joules(gpu.tdp->raw() * gpus * est.time_to_train->raw() * busy);
    }
  }
  est.layer_ops = first.ops;

  if (explain == Explain::on) {
    using units::format_count;
    Derivation& root = est.derivation;
    root.id = "train";
    root.title = "Training step";
    root.formula = "t_step = m·(t_fwd + t_bwd + t_recompute + t_comm,mb) + m·t_head + bubble + t_dp,exposed + t_optimizer";
    root.inputs = {{"m", format_count(double(m)), "micro-batches per step = global / (micro · DP)", Origin::user("--global-batch, --micro-batch")},
                   {"L/pp", format_count(double(layers_stage)), "layers per pipeline stage", Origin::model_config(a.source)},
                   {"T", format_count(double(T)), "tokens per micro-batch per GPU = b·s/cp", Origin::user("--micro-batch, --seq")},
                   {"GPU", gpu.info.id, gpu.info.name, Origin::datasheet(gpu.info.file)},
                   {"efficiency", d.eff.origin, "GEMM/HBM/attention ceilings",
                    d.eff.calibrated ? Origin::calibration(d.eff.origin) : Origin::measurement(d.eff.origin)}};
    root.result = fmt::format("{} per step, {} tokens/s, MFU {}", format(s.total), units::format_number(est.tokens_per_s, 4),
                              format(units::Ratio(est.mfu)));
    Derivation comp{"train.compute", "Compute per micro-batch on one GPU (its stage)",
                    "Σ_layers of the stage (GEMM + attention + elementwise), forward + backward (+ recompute)",
                    {{"t_fwd", format(fwd.total()), "forward", Origin::derived()},
                     {"t_bwd", format(bwd.total()), "backward (dgrad + wgrad GEMMs, attention bwd = 2.5 × fwd)", Origin::derived()},
                     {"t_recompute", format(recompute.total()), "activation recomputation", Origin::user("--recompute")},
                     {"t_head", format(extra), "LM head + loss (last stage) or embedding (first stage)", Origin::derived()}},
                    format(mb_compute),
                    {},
                    {}};
    Derivation layer{"train.layer", "One layer, one micro-batch", "t = Σ ops max(FLOPs/(P·η·u), bytes/(BW·η_hbm)) + t_launch", {}, "", {}, {}};
    for (const auto& op : first.ops)
      layer.inputs.push_back({op.name, format(op.time),
                              fmt::format("{} · {} · {}-bound{}", format(op.flops), format(op.bytes), to_string(op.bound),
                                          op.cls == OpClass::gemm || op.cls == OpClass::attention
                                              ? fmt::format(" · η {}", units::format_number(op.efficiency, 3))
                                              : std::string()),
                              Origin::derived()});
    layer.result = format(first.fwd.total() + first.bwd.total());
    comp.children.push_back(layer);
    root.children.push_back(comp);
    Derivation comm{"train.comm", "Communication per step", "exposed = total − what overlaps with compute", {}, format(s.comm_exposed), {}, {}};
    for (const auto& c : est.comm) {
      if (c.group_size <= 1) continue;
      comm.inputs.push_back({c.kind, fmt::format("{} exposed of {}", format(c.exposed), format(c.time)),
                             fmt::format("{} over {} GPUs ({}), {} per step", c.collective, c.group_size, c.tier,
                                         format(c.bytes_per_step)),
                             Origin::derived("collectives")});
    }
    root.children.push_back(comm);
    root.children.push_back({"train.bubble", "Pipeline bubble", "bubble = (p − 1)/(v·m) · m·t_mb",
                             {{"p", format_count(double(par.pp)), "pipeline stages", Origin::user("--pp")},
                              {"v", format_count(double(plan.schedule == wl::PipelineSchedule::interleaved ? par.virtual_stages : 1)), "chunks per stage", Origin::user("--virtual-stages")},
                              {"m", format_count(double(m)), "micro-batches", Origin::derived()}},
                             fmt::format("{} ({} of ideal)", format(bubble), format(units::Ratio(est.bubble_fraction))),
                             {},
                             {}});
    root.children.push_back({"train.optimizer", "Optimizer step", "bytes = P_gpu/shard · (2·master + states + grad + weight)",
                             {{"P_gpu/shard", format_count(p_gpu / shard), "parameters updated by this GPU", Origin::derived()}},
                             format(opt.time), {}, {}});
    root.children.push_back({"train.mfu", "MFU and HFU",
                             "MFU = F_model / (t_step · N_gpu · P_peak) ; F_model = (6·N + 12·L·h_attn·s)·tokens (no causal halving)",
                             {{"F_model", format(est.model_flops_per_step), "model FLOPs per step", Origin::derived("flops_per_token")},
                              {"F_hw", format(est.hardware_flops_per_step), "with recomputation", Origin::derived()},
                              {"N_gpu", format_count(gpus), "GPUs", Origin::user("--gpus")},
                              {"P_peak", format(d.peak(plan.precision.compute)), "dense peak per GPU", Origin::datasheet(gpu.info.cite("/dense_peak"))}},
                             fmt::format("MFU {}, HFU {}", format(units::Ratio(est.mfu)), format(units::Ratio(est.hfu))),
                             {},
                             {}});
    root.children.push_back(est.memory.derivation);
  }
  return est;
}

}  // namespace gpuplan::model
