// The --explain derivation tree of estimate_training: the step, its compute, communication, bubble, optimizer and MFU.
#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "lora_adapter.hpp"
#include "moe_cost.hpp"
#include "moe_layer.hpp"
#include "layer_kinds_text.hpp"
#include "training_core.hpp"
#include "optimizer_rate.hpp"
#include "norm_loss.hpp"
#include "dp_instances.hpp"
#include "parallel_dims.hpp"

namespace gpuplan::model::detail {

namespace {
/// The MoE layer's terms (moe_layer.hpp, the same node serving shows): router, dispatch, expert GEMMs, combine,
/// shared experts, imbalance, one micro-batch forward + backward; then what only training has (parallel folding,
/// the dispatcher's routes, the host syncs, the EP overlap).
Derivation explain_moe_layer(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                             const Device& d, const StepCore& core) {
  using units::format;
  std::int64_t first_moe = 0;
  while (first_moe < a.layers && !a.is_moe_layer(first_moe)) ++first_moe;
  const LayerKind kind = LayerKind::of(a, first_moe);
  const auto& par = plan.par;
  const CommGroup g = training_comm_group(par.ep, par.expert_tp(), sys);
  const MoeDispatch md = moe_dispatch(a, plan, g);
  MoeLayerTerms m = layer_cost(a, plan, kind, d, false).moe;
  // Forward and backward: the backward moves the same bytes the other way (the output gradient dispatched, the
  // input gradient combined).
  m.t[MoeLayerTerms::dispatch] = md.dispatch * 2.0;
  m.t[MoeLayerTerms::combine] = md.combine * 2.0;
  if (plan.moe_load() != 1.0) {
    wl::TrainingPlan flat = plan;
    flat.moe_imbalance = 1.0;
    // The same dispatcher at the balanced load: a padded capacity stays (at f = 1, the fixed splits kept).
    if (flat.moe_pad_to_capacity && flat.moe_capacity_factor) flat.moe_capacity_factor = 1.0;
    else flat.moe_capacity_factor.reset();
    MoeLayerTerms b = layer_cost(a, flat, kind, d, false).moe;
    const MoeDispatch mb = moe_dispatch(a, flat, g);
    b.t[MoeLayerTerms::dispatch] = mb.dispatch * 2.0;
    b.t[MoeLayerTerms::combine] = mb.combine * 2.0;
    m.imbalance = m.total() - b.total();
  }
  const bool deepep = plan.ep_dispatch == wl::EpDispatch::deepep;
  Derivation r = explain_moe_terms(
      "train.moe", "training, one micro-batch, forward + backward", m,
      fmt::format("TP {}, ETP {}, EP {} ({} tokens per GPU)", par.tp, par.expert_tp(), par.ep,
                  units::format_count(double(plan.micro_batch) * double(plan.seq_len / std::max(1, par.cp)))),
      plan.moe_capacity_factor ? Origin::user("--moe-capacity-factor")
      : plan.moe_imbalance > 1.0
          ? Origin::user("--moe-imbalance")
          : Origin::assumption("balanced routing (uniform over the experts); give --moe-imbalance for a skew"));
  if (plan.moe_capacity_factor) {
    const double f = *plan.moe_capacity_factor;
    r.inputs.push_back(
        {"capacity factor", units::format_number(f, 3),
         plan.moe_pad_to_capacity
             ? fmt::format("each expert padded to its capacity f·k·T/E: the expert GEMMs and the all-to-all carry "
                           "{:.3g}× the balanced rows (padding included){}; the split sizes are fixed, so no host sync",
                           f, f < 1.0 ? ", the tokens over the capacity dropped (less expert work)" : "")
             : fmt::format("tokens over each expert's capacity f·k·T/E dropped: the busiest rank carries min(ι, f) = "
                           "{:.3g}× the balanced rows{}; the split sizes still go to the host",
                           plan.moe_load(), f < 1.0 ? " (f < 1 drops tokens even under balanced routing)" : ""),
         Origin::user(plan.moe_pad_to_capacity ? "--moe-capacity-factor, --moe-pad-to-capacity"
                                               : "--moe-capacity-factor")});
  }
  if (par.expert_tp() != par.tp)
    r.inputs.push_back(
        {"expert TP", units::format_count(double(par.expert_tp())),
         fmt::format("parallel folding: the routed experts split {} ways (attention TP {}); expert-DP group {} = "
                     "t·c·d/(etp·ep); expert GEMMs T·k·ep·etp/t rows × i_e/etp columns",
                     par.expert_tp(), par.tp, par.expert_dp()),
         Origin::user("plan.par.etp")});
  if (par.ep > 1)
    r.inputs.push_back(
        {"routes", format(md.dispatch_bytes),
         deepep ? fmt::format("dispatched per GPU each way: {} copies per token over the NIC (distinct remote nodes of "
                              "≤ {} allowed, balanced routing), {} over NVLink (forwarding inside the node); {} B per "
                              "element; the combine {} in BF16",
                              units::format_number(md.ib_copies, 3), units::format_number(md.node_limit, 3),
                              units::format_number(md.nvlink_copies, 3),
                              plan.precision.compute == hw::Precision::fp8 ? "1 + 4/128 (FP8 with tile scales)" : "a_b",
                              format(md.combine_bytes))
                : fmt::format("dispatched per GPU each way, NCCL all-to-all: {} copies per token over the NIC, {} over "
                              "NVLink; the combine the same routes back",
                              units::format_number(md.ib_copies, 3), units::format_number(md.nvlink_copies, 3)),
         deepep ? Origin::derived("DeepSeek-V3 §3.2.2 node-limited dispatch, §3.3.2 FP8 dispatch, BF16 combine")
                : Origin::derived("collectives: all-to-all")});
  const MoeHostSync hs = moe_host_sync(plan.kernels == wl::KernelStyle::eager, par.ep, plan.ep_dispatch, plan.moe_fixed_splits());
  r.inputs.push_back({"host syncs", std::to_string(hs.syncs), hs.what,
                      hs.syncs > 0 ? Origin::measurement("data/validation/measured/h100-sxm5-80gb/moe_layer*.json "
                                                         "(scripts/measure/moe_layer.py)")
                                   : Origin::derived()});
  std::string overlap = plan.ep_a2a_overlap
                            ? "EP A2A overlap (Megatron-Core): in the steady 1F1B phase hidden behind the other "
                              "micro-batch's compute where compute ≥ communication (the hidden part pays the SM "
                              "share); the warm-up and cool-down passes exposed"
                            : "no EP overlap in this schedule: every dispatch and combine is exposed";
  if (plan.dualpipe()) {
    const std::int64_t mb = plan.micro_batches();
    const double pairs = double(std::llround(dualpipe_paired_share(par.pp, mb, core.bottleneck) * double(mb)));
    overlap = fmt::format("DualPipe (device {}): {} of its {} forward and {} backward chunks run in overlapped pairs "
                          "(deepseek-ai/DualPipe DualPipe.step steps 4-5); their all-to-all hides behind the other "
                          "micro-batch's compute where compute ≥ communication and pays the SM share; the {} chunks "
                          "run alone wait for theirs",
                          core.bottleneck, units::format_count(pairs), mb, mb, units::format_count(double(mb) - pairs));
    if (const double share = sys.gpu != nullptr ? paired_gemm_sm_share(plan, *sys.gpu) : 0.0; share > 0.0)
      overlap += fmt::format("; the paired chunks' GEMMs run on the {:.0f}% of the SMs the dispatch kernels leave "
                             "(DeepSeek's profile: every GEMM launched on 112 of 132 SMs), so they take 1/(1 − {:.3f}) "
                             "as long; its FlashAttention kernels all run beside a DeepEP kernel and take {:.2f} of that "
                             "stretch (measured beside 20 held SMs on our H200); the transfers take SMs from the other "
                             "kernels only",
                             100.0 * (1.0 - share), share, kAttentionHeldSmLoss);
  }
  r.inputs.push_back({"EP exposed", fmt::format("{} of {} per step", format(core.ep.exposed), format(core.ep.time)),
                      overlap, Origin::derived()});
  return r;
}
/// What every node of the training explanation reads: explain_training's inputs.
struct ExplainInputs {
  const wl::TransformerArch& a;
  const wl::TrainingPlan& plan;
  const TrainingSystem& sys;
  const TrainingConsts& k;
  const StepTerms& terms;
  const LayerCost& first;  // the first layer of the slowest stage, one micro-batch
  const StepCore& core;
  const TrainingEstimate& est;
};

/// The root node: t_step's formula, its inputs (micro-batches, the slowest stage, tokens, GPU, efficiencies), result.
void explain_step(const ExplainInputs& x, Derivation& root) {
  using units::format;
  using units::format_count;
  const auto& a = x.a;
  const auto& plan = x.plan;
  const auto& par = plan.par;
  const auto& core = x.core;
  const auto& est = x.est;
  const hw::GpuSpec& gpu = *x.sys.gpu;
  const Device& d = x.k.d;
  const std::int64_t m = core.m;
  const StepBreakdown& s = est.step;
  const std::int64_t layers_stage = core.bottleneck_layers;
  const std::int64_t T = plan.micro_batch * plan.seq_len / par.cp;
  root.id = "train";
  root.title = "Training step";
  root.formula = "t_step = m·(t_fwd + t_bwd + t_recompute + t_comm,mb + t_head) of the slowest stage + bubble "
                 "+ t_dp,exposed + t_optimizer (+ t_offload,exposed)";
  root.inputs = {{"m", format_count(double(m)), "micro-batches per step = global / (micro · DP)", Origin::user("--global-batch, --micro-batch")},
                 {"L_stage", format_count(double(layers_stage)),
                  fmt::format("layers on the slowest pipeline stage (stage {} of {})", core.bottleneck, par.pp),
                  plan.split.any() ? Origin::user("the plan's pipeline split") : Origin::model_config(a.source)},
                 {"T", format_count(double(T)), "tokens per micro-batch per GPU = b·s/cp", Origin::user("--micro-batch, --seq")},
                 {"GPU", gpu.info.id, gpu.info.name, Origin::datasheet(gpu.info.cited())},
                 {"efficiency", d.eff.calibrated ? "calibration profile" : "built-in defaults", "GEMM/HBM/attention ceilings",
                  d.eff.calibrated ? Origin::calibration(d.eff.origin) : Origin::measurement(d.eff.origin)}};
  if (plan.attention_kernel == wl::AttentionKernel::fa1)
    root.inputs.push_back({"attention kernel", fmt::format("fa1 ({} of FlashAttention-2's rate)", kFa1RateOfFa2),
                           "FlashAttention-1 or its Triton port (flash-attn <= 1.0.x)",
                           Origin::constant("Dao 2023, arXiv:2307.08691 abstract: FA2 'around 2x' FA1 on A100 "
                                            "(model/efficiency.hpp kFa1RateOfFa2)")});
  root.result = fmt::format("{} per step, {} tokens/s, MFU {}", format(s.total), units::format_number(est.tokens_per_s, 4),
                            format(units::Ratio(est.mfu)));
  root.set(s.total.raw(), Unit::seconds);
}

/// The compute node: one micro-batch on the slowest stage, with one layer's ops and the LM head's.
Derivation explain_compute(const ExplainInputs& x) {
  using units::format;
  const auto& a = x.a;
  const auto& plan = x.plan;
  const auto& first = x.first;
  const auto& terms = x.terms;
  const PassCost& fwd = x.core.fwd;
  const PassCost& bwd = x.core.bwd;
  const PassCost& recompute = x.core.recompute;
  const Seconds extra = x.core.extra;
  const Seconds mb_compute = x.core.compute_mb;  // compose_step's fwd + bwd + recompute of the bottleneck stage
  Derivation comp{"train.compute", "Compute per micro-batch on one GPU (its stage)",
                  "Σ_layers of the stage (GEMM + attention + elementwise), forward + backward (+ recompute)",
                  {{"t_fwd", format(fwd.total()), "forward", Origin::derived()},
                   {"t_bwd", format(bwd.total()), "backward (dgrad + wgrad GEMMs, attention bwd = 2.5 × fwd)", Origin::derived()},
                   {"t_recompute", format(recompute.total()), "activation recomputation", Origin::user("--recompute")},
                   {"t_head", format(extra), "the stage's LM head + loss (last stage) and embedding (first stage)", Origin::derived()}},
                  format(mb_compute),
                  {},
                  {}};
  comp.set(mb_compute.raw(), Unit::seconds);
  if (plan.cuda_graphs != wl::CudaGraphScope::none) {
    // The in-graph fixed cost per kernel against the eager launch (layer_cost.cpp captured, use_launch).
    const Device& d = x.k.d;
    const Device g = detail::graph_launch_device(d);
    const std::string in_graph =
        g.eff.launch_class.measured()
            ? fmt::format("GEMM {}, attention {}, other {}", format(kernel_fixed(g, OpClass::gemm)),
                          format(kernel_fixed(g, OpClass::attention)), format(kernel_fixed(g, OpClass::elementwise)))
            : format(g.eff.kernel_launch);
    comp.inputs.push_back(
        {"t_kernel,graph", in_graph,
         fmt::format("fixed cost per kernel replayed from a CUDA graph (scope {}), against the eager {}",
                     wl::to_string(plan.cuda_graphs), format(d.eff.kernel_launch)),
         g.eff.launch_class.measured() ? Origin::measurement(g.eff.origin)
                                       : Origin::assumption("serving's in-graph per-kernel cost "
                                                            "(ServingPerfPlan::kernel_overhead_graph)")});
    comp.notes.push_back(
        std::string("CUDA graphs: ") +
        (plan.cuda_graphs == wl::CudaGraphScope::attention
             ? "the input norm, attention and its residual add of each layer are replayed from a graph"
             : "each decoder layer's forward and backward is replayed from a graph") +
        (a.moe && !plan.moe_fixed_splits() && plan.cuda_graphs != wl::CudaGraphScope::attention
             ? "; the dropless MoE block (router, experts, shared experts) keeps the eager launch: its split sizes "
               "go to the host each micro-batch"
             : "") +
        (plan.cuda_graphs == wl::CudaGraphScope::full_iteration ? "; the embedding, LM head and loss too" : "") +
        "; the optimizer step, the DP collectives and the pipeline sends stay eager");
  }
  if (detail::names_layer_kinds(a))
    comp.notes.push_back("layer kinds (each priced from its own op graph): " + detail::layer_kinds_text(a));
  Derivation layer{"train.layer", "One layer, one micro-batch",
                   plan.fused_wgrad_accumulation
                       ? "t = Σ ops max(FLOPs/(P·η·u), bytes/(BW·η_hbm)) + t_launch ; a wgrad marked += also adds its "
                         "gradient-buffer traffic, (2·b_g − 2)·weights / (BW·η_hbm), measured not to hide under the GEMM"
                       : "t = Σ ops max(FLOPs/(P·η·u), bytes/(BW·η_hbm)) + t_launch ; a wgrad marked + separate add "
                         "writes a fresh 16-bit gradient that one more kernel adds into the buffer, (2 + 2·b_g)·weights "
                         "/ (BW·η_hbm) + t_launch",
                   {}, "", {}, {}};
  for (const auto& op : first.ops)
    layer.inputs.push_back({op.name, format(op.time),
                            fmt::format("{} · {} · {}-bound{}", format(op.flops), format(op.bytes), to_string(op.bound),
                                        op.cls == OpClass::gemm || op.cls == OpClass::attention
                                            ? fmt::format(" · η {}", units::format_number(op.efficiency, 3))
                                            : std::string()),
                            Origin::derived()});
  layer.result = format(first.fwd.total() + first.bwd.total());
  layer.set((first.fwd.total() + first.bwd.total()).raw(), Unit::seconds);
  comp.children.push_back(layer);
  const LossBytes ce = loss_bytes_per_logit(plan);
  Derivation head{"train.head", "Final norm, LM head and loss, one micro-batch (last stage)",
                  fmt::format("t = Σ ops max(FLOPs/(P·η·u), bytes/(BW·η_hbm)); the loss moves {} B forward and {} B "
                              "backward per logit of the T × V/tp shard ({})",
                              units::format_number(ce.forward, 3), units::format_number(ce.backward, 3), ce.kernel),
                  {}, format(terms.compute->head_time), {}, {}};
  head.set(terms.compute->head_time.raw(), Unit::seconds);
  for (const auto& op : terms.compute->head_ops)
    head.inputs.push_back({op.name, format(op.time),
                           fmt::format("{} · {} · {}-bound{}", format(op.flops), format(op.bytes), to_string(op.bound),
                                       op.cls == OpClass::gemm ? fmt::format(" · η {}", units::format_number(op.efficiency, 3))
                                                               : std::string()),
                           op.cls == OpClass::loss ? Origin::derived(plan.kernels == wl::KernelStyle::eager &&
                                                                     plan.cross_entropy != wl::CrossEntropyKernel::flash
                                                                         ? "the plan's kernels (--kernels)"
                                                                         : "the plan's loss kernels (--cross-entropy)")
                                                   : Origin::derived()});
  if (!head.inputs.empty()) comp.children.push_back(head);
  return comp;
}

/// The communication node: each parallel group's collectives, exposed of total, and the framework's copies.
Derivation explain_comm(const ExplainInputs& x) {
  using units::format;
  const auto& a = x.a;
  const auto& plan = x.plan;
  const auto& terms = x.terms;
  const auto& est = x.est;
  const Device& d = x.k.d;
  const StepBreakdown& s = est.step;
  Derivation comm{"train.comm", "Communication per step",
                  "exposed = Σ_groups exposed ; each group's exposed = its total − what overlaps with compute", {},
                  format(s.comm_exposed), {}, {}};
  comm.set(s.comm_exposed.raw(), Unit::seconds, Fold::sum);
  // One child per parallel group, valued with the exposed time compose_step gave it (est.comm); the groups of one
  // GPU have none (their exposed time is 0).
  for (std::size_t i = 0; i < est.comm.size(); ++i) {
    const CommCost& c = est.comm[i];
    if (c.group_size <= 1) continue;
    Derivation g{"train.comm." + c.kind, fmt::format("{} ({})", c.kind, c.collective),
                 parallel_dims()[i].exposure_rule(a, plan),
                 {{"n", units::format_count(double(c.group_size)), "GPUs of the group: " + c.tier,
                   Origin::derived("collectives")},
                  {"t", format(c.time), fmt::format("total per step, {} moved", format(c.bytes_per_step)),
                   Origin::derived()}},
                 fmt::format("{} exposed of {}", format(c.exposed), format(c.time)), {}, {}};
    if (const int inst = dp_optimizer_instances(plan); c.kind == "dp" && inst > 1) {
      // The hybrid shard group's instance split (dp_terms.cpp dp_collective_times prices it).
      const long long edp = a.moe && plan.par.ep > 1 ? expert_grad_group_size(plan) : 0;
      g.inputs.push_back(
          {"instances",
           fmt::format("{} × {} ranks{}", inst, c.group_size / inst,
                       edp > 0 ? fmt::format(" (routed experts: {} × {})", inst, edp / inst) : std::string()),
           "the dp·cp ranks cut into optimizer instances of consecutive ranks: each gradient bucket is "
           "reduce-scattered inside its instance, the instance's shard all-reduced across the instances (one rank of "
           "each), the updated weights gathered inside the instance; the optimizer states are sharded inside an "
           "instance and held once per instance",
           Origin::user("shard_group = dp·cp / N: Megatron-LM --num-distributed-optimizer-instances N "
                        "(parallel_state.py intra_partial_data_parallel_size, param_and_grad_buffer.py "
                        "start_grad_sync), Megatron-FSDP's HSDP, FSDP HYBRID_SHARD")});
    }
    g.set(c.exposed.raw(), Unit::seconds);
    comm.children.push_back(std::move(g));
  }
  if (const double n = lora_tp_collectives(plan, false); n > 0.0)
    comm.notes.push_back(fmt::format(
        "tp includes the LoRA adapters' own {} collectives per layer and micro-batch, exposed (NeMo "
        "ParallelLinearAdapter: the QKV adapter's sequence gather under TP overlap, the output adapter's all2all_hp2sp)",
        units::format_number(n, 2)));
  if (terms.dp_copy > Seconds(0))
    comm.inputs.push_back(
        {"framework copies", format(terms.dp_copy),
         fmt::format("{} B per step at the streaming rate, counted with the exposed DP time ({})",
                     units::format_count(terms.dp_copy_bytes.raw()),
                     plan.zero == wl::ZeroStage::parameters &&
                             plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking
                         ? "DeepSpeed 0.3.13 ZeRO-3 through PyTorch's list collectives: each gather zero-fills the "
                           "whole tensor and copies the gathered flat buffer into the per-rank views; each "
                           "micro-batch's gradients divided in place and copied into the reduce-scatter's flat input"
                     : plan.zero != wl::ZeroStage::none
                         ? "PyTorch FSDP2: shard cast into the all-gather input, gathered buffer split into the "
                           "parameters (forward and backward), gradients into the reduce-scatter input"
                     : plan.overlap_grad_reduce
                         ? "PyTorch DDP divides each gradient bucket in place: read + write"
                         : "reduction after the backward (no DDP): the gradients flattened into one buffer, divided "
                           "in place and copied back: 3 × read + write"),
         Origin::derived("dp_copy_bytes")});
  if (plan.zero == wl::ZeroStage::parameters && plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking)
    comm.inputs.push_back(
        {"ZeRO-3 gathers",
         fmt::format("{} ring calls per pass × {} passes, not overlapped",
                     units::format_count(x.core.dp_gather_calls_per_pass),
                     units::format_number(x.core.dp_gather_passes, 3)),
         "one all-gather (and one reduce-scatter) per parameter tensor, each a ring over the DP group paying n - 1 "
         "steps of latency; the device synchronised before each gather and the submodule waiting for it; gathered "
         "for the forward, the backward and a recomputed forward",
         Origin::user("zero3_gather per_tensor_blocking: DeepSpeed 0.3.13-0.5.x, partition_parameters.py "
                      "_allgather_param, stage3.py fetch_sub_module")});
  if (plan.zero != wl::ZeroStage::parameters && dense_grad_group_size(plan) > 1) {
    const DpBuckets& bk = terms.dp.buckets;
    comm.inputs.push_back(
        {"DP bucket",
         fmt::format("{} parameters: {} per step ({} dense, {} expert), the last (exposed) {}",
                     units::format_count(bk.size), units::format_count(bk.calls), units::format_count(bk.dense_calls),
                     units::format_count(bk.expert_calls), units::format_count(terms.dp.last_unit)),
         "gradients are reduced bucket by bucket as the backward fills them, tensor by tensor in reverse parameter "
         "order on pipeline rank 0 (a bucket closes at the first tensor boundary at or past its size; later model "
         "chunks and the other stages one bucket each; routed experts in a buffer of their own); the embedding's "
         "bucket comes last, with no backward left to hide it, and is gathered first",
         plan.dp_bucket_size > 0
             ? Origin::user("dp_bucket_size (--dp-bucket-size): Megatron-Core DistributedDataParallelConfig "
                            "bucket_size (--ddp-bucket-size)")
         : plan.kernels == wl::KernelStyle::eager && plan.zero == wl::ZeroStage::none
             ? Origin::assumption("PyTorch DDP's default bucket_cap_mb, 25 MiB of gradients, after a first bucket "
                                  "of 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES), closed at the modules' "
                                  "parameter tensors (reducer.cpp compute_bucket_assignment_by_size)")
             : Origin::assumption("Megatron-Core's default bucket, max(40M, 1M x DP·CP) parameters "
                                  "(training.py get_model)")});
  }
  if (!comm.inputs.empty() || !comm.children.empty()) {
    const double share = x.core.nccl_sm_share;
    const double wait = d.eff.comm_wait_kernels;
    comm.inputs.push_back(
        {"beside compute",
         fmt::format("GEMM loss {}, wait {} kernel durations per call", units::format_number(share, 3),
                     units::format_number(wait, 3)),
         "hidden communication costs (hidden time) × GEMM loss; each DP call beside compute waits for the kernel in "
         "flight (calls: one per DP bucket; FSDP one per layer)",
         d.eff.comm_compute_loss > 0
             ? Origin::calibration(d.eff.origin)
             : Origin::assumption("16 NCCL channels' share of the SMs; the wait is the built-in median of our H100 "
                                  "and H200 overlap items (data/calibration/*/samples-overlap-*.json)")});
    if (dense_grad_group_size(plan) > 1)
      comm.inputs.push_back(
          {"DP beside compute",
           fmt::format("compute lost {} of the hidden DP time (per call: the larger of the SM share over the call and "
                       "a wait of {} of the call, at most the kernel in flight)",
                       units::format_number(x.core.dp_sm_share, 3), units::format_number(kKernelWaitPerCall, 3)),
           "a kernel launched beside a DP collective's kernel waits for it: its CTAs that cannot start beside the "
           "call's kernel start when that kernel ends or when the kernel's own other CTAs drain, whatever NCCL's CTA "
           "count; the loss is the larger of that wait and the SM share, not their sum",
           Origin::measurement("two H200s, torch.matmul beside NCCL calls, the median of 35 points "
                               "(data/validation/measured/h200-sxm-141gb/beside_comm*_2gpu_*.json; "
                               "scripts/validation/beside_comm_law.py)")});
    if (plan.dp_max_ctas > 0)
      comm.inputs.push_back(
          {"DP CTAs", fmt::format("{} (SM share beside the DP collectives {})", plan.dp_max_ctas,
                                  units::format_number(dp_comm_compute_share(d, plan), 3)),
           "the DP communicator's CTAs (NCCL channels) are capped: its reduce-scatter and all-gather move at most "
           "that many CTAs' rate on the scale-up tier (one CTA: 0.778 of an NVLink link, measured on H200), leave a domain through at most that "
           "many NICs, and hold at most that many SMs",
           Origin::user("dp_max_ctas (--dp-max-ctas): NCCL_MAX_CTAS / Megatron-Core nccl_communicator_config_path "
                        "max_ctas of the dp and dp_cp groups")});
    if (plan.dp_sharp)
      comm.inputs.push_back(
          {"SHARP", "on: the DP collectives may run as NCCL CollNet",
           "where the DP group spans domains over a fabric whose switches reduce, NCCL may run its collectives as "
           "CollNet (the fastest algorithm is kept; the DP group's node shows it): an all-reduce sends each rank's "
           "1/s share across once each way (a ring: 2(d−1)/d of it) at 0.85 of the NIC's bus rate; the distributed "
           "optimizer's / FSDP's reduce-scatter and all-gather move a ring's bytes at 0.9 of it, in one network step "
           "instead of d − 1 (NCCL tuning.cc CollNet Direct)",
           Origin::user("dp_sharp (--sharp; Megatron-LM --use-sharp: NCCL_COLLNET_ENABLE=1 on the dp and dp_cp "
                        "groups, parallel_state.py)")});
  }
  return comm;
}

/// The pipeline bubble node: DualPipe's (DeepSeek-V3 Table 2) or the 1F1B / interleaved one.
void explain_bubble(const ExplainInputs& x, Derivation& root) {
  using units::format;
  using units::format_count;
  const auto& plan = x.plan;
  const auto& par = plan.par;
  const auto& core = x.core;
  const auto& est = x.est;
  const std::int64_t m = core.m;
  const PassCost& bwd = core.bwd;
  const Seconds bubble = est.step.bubble;
  if (plan.dualpipe()) {
    root.children.push_back(
        {"train.bubble", "Pipeline bubble (DualPipe)",
         "bubble = (p/2 − 1)·(F&B + B − 3W) (DeepSeek-V3 Table 2); F&B = one forward and one backward chunk run "
         "overlapped (their compute + the communication left exposed), B = a backward chunk run alone (as the bubble "
         "runs it: waiting for its own dispatch, combine and send), W = its weight-gradient GEMMs; device i holds "
         "stages i and p−1−i, each micro-batch passes one of them",
         {{"p", format_count(double(par.pp)), "pipeline ranks", Origin::user("--pp")},
          {"F&B", format(core.stage_max), fmt::format("the slowest device (rank {}), one micro-batch", core.bottleneck),
           Origin::derived()},
          {"B", format(core.dualpipe_b),
           "backward chunk incl. recomputation, its exposed all-to-all and its gradient's pipeline send",
           Origin::derived()},
          {"W", format(bwd.wgrad), "its weight-gradient GEMMs", Origin::derived()},
          {"m", format_count(double(m)), "micro-batches (m/2 each way)", Origin::derived()}},
         fmt::format("{} ({} of steady)", format(bubble), format(units::Ratio(est.bubble_fraction))),
         {"parameters: two stages per device (2×); activations: PP + 1 chunk micro-batches (memory tree)"},
         {}});
  } else {
  root.children.push_back({"train.bubble", "Pipeline bubble",
                           "bubble = (Σ_i t_i − max_i t_i) / v (t_i: one micro-batch on stage i; equal stages: "
                           "(p − 1)/(v·m) · m·t)",
                           {{"p", format_count(double(par.pp)), "pipeline stages", Origin::user("--pp")},
                            {"v", format_count(double(plan.model_chunks())), "chunks per stage", Origin::user("--virtual-stages")},
                            {"m", format_count(double(m)), "micro-batches", Origin::derived()},
                            {"max t_i", format(core.stage_max),
                             fmt::format("one micro-batch on the slowest stage (stage {})", core.bottleneck),
                             Origin::derived()},
                            {"Σ t_i", format(core.stage_sum), "one micro-batch on every stage, summed", Origin::derived()}},
                           fmt::format("{} ({} of ideal)", format(bubble), format(units::Ratio(est.bubble_fraction))),
                           {},
                           {}});
  if (core.deferred_microbatches > 0) {
    Derivation& b = root.children.back();
    b.formula += "; + max(0, N·W_head − D): the deferred LM-head wgrads that outlast the drain";
    b.inputs.push_back({"N", format_count(double(core.deferred_microbatches)),
                        "micro-batches whose LM-head weight gradient the last stage defers to the flush",
                        Origin::user(plan.wgrad_deferral_limit > 0
                                         ? "wgrad_deferral_limit (--wgrad-deferral-limit)"
                                         : "defer_embedding_wgrad (--defer-embedding-wgrad-compute): all m")});
    b.inputs.push_back({"W_head", format(x.terms.compute->head_wgrad),
                        "one micro-batch's LM-head weight-gradient GEMM (taken out of the last stage's t_i)",
                        Origin::derived("roofline")});
    b.inputs.push_back({"D", format(core.deferred_window),
                        "the drain: the other stages' backwards of the last micro-batch, one chunk each (Σ_{i<p−1} "
                        "b_i / v)",
                        Origin::derived()});
    b.notes.push_back(fmt::format(
        "Megatron-LM --defer-embedding-wgrad-compute (tensor_parallel/layers.py, pipeline_parallel/schedules.py "
        "finish_embedding_wgrad_compute): N·W_head = {} run after the last stage's last backward, {} of it hidden by "
        "the drain, {} exposed",
        format(core.deferred_wgrad), format(core.deferred_wgrad - core.deferred_exposed),
        format(core.deferred_exposed)));
  }
  }
  root.children.back().set(bubble.raw(), Unit::seconds);
}

/// The optimizer node(s): offloaded to the CPU (with the host-link transfers), unfused eager kernels, or fused.
void explain_optimizer(const ExplainInputs& x, Derivation& root) {
  using units::format;
  using units::format_count;
  const auto& a = x.a;
  const auto& plan = x.plan;
  const auto& sys = x.sys;
  const auto& terms = x.terms;
  const hw::GpuSpec& gpu = *sys.gpu;
  const ParameterCounts& params = x.k.params;
  const StepBreakdown& s = x.est.step;
  const double p_shard = terms.optimizer_parts.p_shard;  // what the step priced the optimizer from
  const GpuParams p_gpu = trainable_per_gpu(a, params, plan);
  const double shard = optimizer_shard(plan), shard_e = expert_optimizer_shard(plan);
  // The parameters this GPU updates: dense over the dp·cp shard, routed experts over the expert-data-parallel shard.
  const std::string shard_text =
      p_gpu.experts > 0
          ? fmt::format("{} dense / {} + {} routed-expert / {} (expert-data-parallel group)", format_count(p_gpu.dense),
                        format_count(shard), format_count(p_gpu.experts), format_count(shard_e))
          : fmt::format("{} / {}", format_count(p_gpu.dense), format_count(shard));

  if (plan.offload == wl::Offload::optimizer) {
    const OffloadTimes& ot = terms.offload;
    root.children.push_back(
        {"train.optimizer", "Optimizer step on the CPU (offloaded)",
         "t = P_gpu/shard · (2·master + 2·states + grad + w·weight), w = 1 with a master copy, 2 without / (BW_dram · η_dram / GPUs per node)",
         {{"P_gpu/shard", format_count(p_shard), "parameters updated for this GPU: " + shard_text, Origin::derived()},
          {"BW_dram", format(*sys.node->host_memory_bandwidth), "node's peak host DRAM bandwidth",
           Origin::datasheet(sys.node->info.cite("/host/memory_bandwidth_GBps"))},
          {"η_dram", units::format_number(kHostDramEfficiency, 2),
           "sustained fraction of peak a streaming CPU optimizer reaches", Origin::assumption("not calibrated")},
          {"share", fmt::format("{:.1f} GB/s", ot.dram_GBps), "this GPU's share (every GPU's step runs at once)",
           Origin::derived()}},
         format(s.optimizer),
         {"ZeRO-Offload (Ren et al. 2021): fp32 master weights and optimizer states in host memory; DeepSpeed CPU "
          "Adam streams the same bytes as a fused GPU AdamW"},
         {}});
    root.children.push_back(
        {"train.offload", "Host-link transfers of the offload",
         "exposed = max(0, t_d2h − t_bwd,mb) + t_h2d ; t = P_gpu/shard · bytes / (BW_link · η_link)",
         {{"t_d2h", format(ot.d2h), "gradient shard to the host (overlaps the last backward)", Origin::derived()},
          {"t_h2d", format(ot.h2d), "updated weights back to the GPU (before the next forward)", Origin::derived()},
          {"BW_link·η", fmt::format("{:.1f} GB/s", ot.host_link_GBps), "GPU host link (PCIe x16), one direction",
           Origin::datasheet(gpu.info.cite("/pcie"))},
          {"η_link", units::format_number(kHostLinkEfficiency, 2), "DMA fraction of the x16 rate",
           Origin::measurement("pinned copies on PCIe Gen5: 55.4 GB/s on H200, 53.5 on H100, of 63 "
                               "(data/hardware/links/pcie5.json, data/validation/measured/offload/)")}},
         format(s.offload),
         {},
         {}});
    root.children.back().set(s.offload.raw(), Unit::seconds);
  } else if (unfused_optimizer(plan)) {
    const UnfusedOptimizer& u = terms.optimizer_parts.unfused;
    root.children.push_back(
        {"train.optimizer",
         fmt::format("Optimizer step ({}: one kernel per elementwise pass{})", wl::to_string(plan.optimizer_impl),
                     plan.optimizer_impl == wl::OptimizerImpl::foreach ? " and group of tensors" : " and tensor"),
         "t = Σ_passes (bytes / BW + launches · t_launch)  (the CPU's kernels · t_cpu run ahead of the GPU, hidden)",
         {{"P_gpu/shard", format_count(p_shard), "parameters updated by this GPU: " + shard_text, Origin::derived()},
          {"bytes/param", fmt::format("{:.4g} B", u.bytes_per_param),
           plan.optimizer == wl::OptimizerKind::sgd
               ? "SGD momentum's 3 passes (torch/optim/sgd.py _multi_tensor_sgd)"
               : "AdamW's 8 passes (torch/optim/adam.py _multi_tensor_adam: mul_, lerp_, mul_, addcmul_, sqrt, div_, "
                 "add_, addcdiv_), each reading and writing its tensors",
           Origin::constant("pytorch/pytorch torch/optim (2.x)")},
          {"tensors", format_count(u.tensors), "parameter tensors on this GPU (weights, biases, norm vectors)",
           Origin::model_config(a.source)},
          {"kernels", format_count(u.kernels),
           plan.optimizer_impl == wl::OptimizerImpl::foreach
               ? "per pass max(⌈tensors / 110…48⌉, ⌈P / (320 · 65,536)⌉) (MultiTensorApply.cuh limits)"
               : "per pass one kernel per tensor",
           Origin::constant("aten/src/ATen/native/cuda/MultiTensorApply.cuh")},
          {"t_cpu", format(u.cpu_per_kernel), "CPU time to issue one eager kernel (framework dispatch + launch)",
           Origin::assumption("the serving model's cpu_per_kernel")}},
         fmt::format("{} (the CPU issues its kernels in {}, ahead of the GPU)", format(s.optimizer), format(u.cpu)),
         {},
         {}});
  } else {
    root.children.push_back({"train.optimizer", "Optimizer step",
                             "t = bytes / (BW_stream · η_opt) ; bytes = P_gpu/shard · (2·master + 2·states + grad + "
                             "w·weight), w = 1 with a master copy, 2 without",
                             {{"P_gpu/shard", format_count(p_shard), "parameters updated by this GPU: " + shard_text, Origin::derived()},
                              {"η_opt", units::format_number(kFusedOptimizerStreamShare, 3),
                               "fused multi-tensor AdamW rate / streaming rate",
                               Origin::measurement("our H100 step profiles: 2.56 and 2.59 TB/s for 28 B per parameter "
                                                   "(data/validation/measured/h100-sxm5-80gb/profile_*.json); "
                                                   "other parts: the same share (assumption)")}},
                             format(s.optimizer), {}, {}});
  }
  const Seconds fp8w = terms.optimizer_parts.fp8_weights;
  for (Derivation& o : root.children) {
    if (o.id != "train.optimizer") continue;
    if (fp8w > Seconds(0) && plan.offload != wl::Offload::optimizer) {
      o.formula += " ; + t_fp8w";
      o.inputs.push_back({"t_fp8w", format(fp8w),
                          plan.precision.fp8_params
                              ? "the FP8 parameters written from the master shard, then transposed or copied after "
                                "their gather, once per step"
                              : "the GEMM weights quantised in the step's first micro-batch, kept for the others",
                          Origin::derived("weight_quantisation_time (Transformer Engine, cached weight copies)")});
    }
    o.set(s.optimizer.raw(), Unit::seconds);
  }
}

/// The MFU and HFU node.
void explain_mfu(const ExplainInputs& x, Derivation& root) {
  using units::format;
  using units::format_count;
  const auto& plan = x.plan;
  const auto& est = x.est;
  const hw::GpuSpec& gpu = *x.sys.gpu;
  const Device& d = x.k.d;
  const double gpus = double(plan.par.gpus());
  root.children.push_back({"train.mfu", "MFU and HFU",
                           "MFU = F_model / (t_step · N_gpu · P_peak) ; F_model = (6·N + 12·L·h_attn·s)·tokens (no causal halving)",
                           {{"F_model", format(est.model_flops_per_step), "model FLOPs per step", Origin::derived("flops_per_token")},
                            {"F_hw", format(est.hardware_flops_per_step), "with recomputation", Origin::derived()},
                            {"N_gpu", format_count(gpus), "GPUs", Origin::user("--gpus")},
                            {"P_peak", format(d.peak(plan.precision.compute)), "dense peak per GPU", Origin::datasheet(gpu.info.cite("/dense_peak"))}},
                           fmt::format("MFU {}, HFU {}", format(units::Ratio(est.mfu)), format(units::Ratio(est.hfu))),
                           {},
                           {}});
}
}  // namespace

void explain_training(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                      const TrainingConsts& k, const StepTerms& terms, const LayerCost& first, const StepCore& core,
                      TrainingEstimate& est) {
  const ExplainInputs x{a, plan, sys, k, terms, first, core, est};
  Derivation& root = est.derivation;
  explain_step(x, root);
  root.children.push_back(explain_compute(x));
  root.children.push_back(explain_comm(x));
  if (a.moe && a.moe_layer_count() > 0) root.children.push_back(explain_moe_layer(a, plan, sys, k.d, core));
  explain_bubble(x, root);
  explain_optimizer(x, root);
  explain_mfu(x, root);
  root.children.push_back(est.memory.derivation);
}

}  // namespace gpuplan::model::detail
