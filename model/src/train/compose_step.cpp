// compose_step: the training step from its terms (step_terms.cpp): each pipeline stage's compute and exposed TP, CP,
// EP and PP communication, the DP reduce/gather beside the backward, the pipeline bubble, the step's breakdown, MFU and
// cost. estimate_training and the search's FastTrainingEvaluator both call it, so their numbers agree bit for bit.
#include "gpuplan/model/training.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/model/utilisation.hpp"
#include "lora_adapter.hpp"
#include "moe_a2a.hpp"
#include "training_core.hpp"
#include "optimizer_rate.hpp"
#include "parallel_dims.hpp"

namespace gpuplan::model {

using units::Bytes;
using units::Seconds;

namespace detail {

namespace {
/// Collective calls of one step's DP communication, from the frameworks' bucketing:
///  - PyTorch DDP (eager kernels, no ZeRO): gradient buckets of 25 MiB (`bucket_cap_mb` = 25, the default of
///    torch.nn.parallel.DistributedDataParallel);
///  - FSDP / ZeRO-3: one reduce-scatter and one all-gather per layer (one unit per decoder layer);
///  - Megatron-LM DDP and distributed optimizer: its buckets (default max(40M, 1M × DP·CP) parameters, or the plan's
///    dp_bucket_size), formed tensor by tensor on pipeline rank 0: dp_buckets.
struct DpCalls {
  double reduce = 1, gather = 1;  ///< reduce: per step; gather: per pass (ZeRO-3 gathers twice per micro-batch)
};
DpCalls dp_calls(const TrainingConsts& k, const wl::TrainingPlan& plan, const std::vector<StageShape>& stages,
                 const DpBuckets& buckets) {
  if (plan.zero == wl::ZeroStage::parameters) {
    // DeepSpeed 0.3.13-0.5.x: one call per parameter tensor.
    const double tensors = stage_parameter_tensors(k.parameter_tensors, plan);
    if (plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking) return {tensors, tensors};
    const double layers_stage = double(std::max<std::int64_t>(1, most_stage_layers(stages)));
    return {layers_stage, layers_stage};
  }
  const double n = buckets.calls;
  return {n, plan.zero == wl::ZeroStage::none ? 1.0 : n};
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

namespace {

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

/// The stage's compute per micro-batch: its layers' forward and backward (from the layer kinds it holds) and the
/// recomputation (the extras: stage_extras). Returns the share of its layers recomputed.
double stage_compute(const StepInputs& x, const StageShape& sh, StageTime& st) {
  const auto& plan = x.plan;
  const StepTerms& t = x.t;
  const int p = x.p;
  if (p == 1) {
    st.fwd = t.compute->fwd_all;
    st.bwd = t.compute->bwd_all;
  } else {
    st.fwd = st.bwd = PassCost{};
    for (std::size_t j = 0; j < t.compute->kind_count; ++j)
      if (const std::size_t ki = t.compute->kind_list[j]; sh.kind_layers[ki] > 0) {
        st.fwd += t.compute->kind_fwd[ki].scaled(double(sh.kind_layers[ki]));
        st.bwd += t.compute->kind_bwd[ki].scaled(double(sh.kind_layers[ki]));
      }
  }
  st.recompute = PassCost{};
  // Full recompute repeats the forward of the recomputed layers (all of them, or the first N of each chunk under
  // --recompute-method block: StageShape::recomputed).
  const double rec_share = sh.layers > 0 ? double(sh.recomputed) / double(sh.layers) : 1.0;
  if (plan.recompute == wl::Recompute::full) st.recompute = st.fwd.scaled(rec_share);
  else if (plan.recompute == wl::Recompute::selective && !plan.flash_attention) st.recompute.attention = st.fwd.attention;
  // Recompute modules and TorchTitan's op-level policy: the ops each layer runs again (LayerCost::rec).
  if (plan.recompute != wl::Recompute::full &&
      (plan.recompute_modules != 0 || plan.recompute == wl::Recompute::selective_op))
    for (std::size_t j = 0; j < t.compute->kind_count; ++j)
      if (const std::size_t ki = t.compute->kind_list[j]; sh.kind_layers[ki] > 0)
        st.recompute += t.compute->kind_rec[ki].scaled(double(sh.kind_layers[ki]));
  return rec_share;
}

/// Megatron-LM --defer-embedding-wgrad-compute (megatron/core/tensor_parallel/layers.py at d98e8a64,
/// LinearWithGradAccumulationAndAsyncCommunication.backward): the last stage buffers the LM head's input and output
/// gradient instead of running its weight-gradient GEMM, for the first `wgrad_deferral_limit` micro-batches (0: all
/// of them), and runs the buffered GEMMs after its last backward (schedules.py finish_embedding_wgrad_compute, before
/// finalize_model_grads). Megatron allows it only with pipeline parallelism (model_parallel_config.py); DualPipe is
/// not Megatron's schedule. Returns the deferred micro-batches N (0: nothing deferred).
std::int64_t deferred_head_wgrads(const StepInputs& x) {
  const auto& plan = x.plan;
  if (!plan.defer_embedding_wgrad || x.p <= 1 || plan.dualpipe() || x.m <= 0) return 0;
  return plan.wgrad_deferral_limit > 0 ? std::min<std::int64_t>(plan.wgrad_deferral_limit, x.m) : x.m;
}

/// The stage's extras per micro-batch: the embedding (first stage), the LM head with the loss (last stage; without
/// the N deferred weight-gradient GEMMs, spread over the m micro-batches), the MTP modules and the AMP casts.
void stage_extras(const StepInputs& x, const StageShape& sh, StageTime& st) {
  const StepTerms& t = x.t;
  st.embed = sh.first ? t.compute->embed_time : Seconds(0);
  st.head = sh.last ? t.compute->head_time : Seconds(0);
  if (sh.last)
    if (const std::int64_t n = deferred_head_wgrads(x); n > 0)
      st.head -= t.compute->head_wgrad * (double(n) / double(x.m));
  st.mtp = t.compute->mtp_extra * double(sh.mtp);
  st.amp = x.plan.mixed_precision == wl::MixedPrecision::amp ? t.amp_casts : Seconds(0);
  st.extra = st.embed + st.head + st.mtp + st.amp;
}

/// The stage's TP, CP, EP and PP communication over the step: time, bytes and the part left exposed, each by its
/// dimension's record (parallel_dims.hpp ParallelDim::price_stage).
void stage_comm(const StepInputs& x, const StageShape& sh, double rec_share, StageTime& st) {
  const StageCommInputs in{x.a, x.plan, x.t, x.gpu, sh, x.p, x.v, x.m, x.nccl_sm_share, rec_share};
  for (const ParallelDim& dim : parallel_dims())
    if (dim.stage != nullptr) {
      st.*dim.stage = CommNumbers{};
      dim.price_stage(in, st, st.*dim.stage);
    }
}

/// DualPipe under DeepSeek's framework (paired_gemm_sm_share): the GEMMs of the paired share φ of the chunks run on
/// SMs − the dispatch kernels' SMs, so they take 1/(1 − share) as long; the attention kernels run beside those held
/// SMs for the whole pair too and lose the measured part of that stretch (kAttentionHeldSmLoss). Stretches the stage's
/// GEMM time (and its wgrad part) and its attention time, and returns their paired time of one micro-batch.
Seconds confine_paired_compute(const wl::TrainingPlan& plan, const hw::GpuSpec& gpu, double phi, StageTime& st) {
  const double share = paired_gemm_sm_share(plan, gpu);
  if (!(share > 0.0) || share >= 1.0) return Seconds(0);
  const double stretch = phi * share / (1.0 - share);
  for (PassCost* pc : {&st.fwd, &st.bwd, &st.recompute}) {
    pc->gemm += pc->gemm * stretch;
    pc->wgrad += pc->wgrad * stretch;
    pc->attention += pc->attention * (stretch * kAttentionHeldSmLoss);
  }
  const Seconds gemm = st.fwd.gemm + st.bwd.gemm + st.recompute.gemm;
  const Seconds attention = st.fwd.attention + st.bwd.attention + st.recompute.attention;
  return (gemm + attention) * phi;
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
  for (const ParallelDim& dim : parallel_dims()) {
    // The pipeline sends are per micro-batch, not per layer: each of the m micro-batches passes one of the device's
    // two stages and sends its activations and its gradients once there (deepseek-ai/DualPipe dualpipe.py
    // _forward_chunk / _backward_chunk / _forward_backward_chunk: one _send_forward per forward chunk, one
    // _send_backward per backward chunk), the 2·v·m sends pp_stage prices; only the layer-proportional terms halve.
    if (dim.stage == nullptr || dim.stage == &StageParts::pp) continue;
    CommNumbers& c = st.*dim.stage;
    c.time = c.time * 0.5;
    c.exposed = c.exposed * 0.5;
    c.bytes = c.bytes * 0.5;
  }
  // DualPipe overlaps a forward chunk of one micro-batch with a backward chunk of another (§3.2.1, Figure 4): the
  // all-to-all dispatch/combine and the pipeline sends of each run beside the other's attention and MLP compute, so
  // what exceeds the compute stays exposed and the hidden part costs the SM share of the communication kernels
  // (comm_compute_share). Only the paired share φ of the chunks runs so (dualpipe_paired_share); a chunk run alone
  // waits for its own dispatch and combine, and for its own pipeline send and receive (deepseek-ai/DualPipe
  // dualpipe.py: _forward_chunk and _backward_chunk post their receive, wait for it and for the previous chunk's
  // sends in _commit_and_wait_comm, then compute; no other chunk runs beside them), so (1 − φ) of the all-to-all and
  // of the pipeline sends is exposed. The paired chunks' sends are rearranged into the pair (§3.2.1, Figure 4: "both
  // all-to-all and PP communication can be fully hidden").
  const double phi = detail::dualpipe_paired_share(x.p, m, sh.index);
  const Seconds confined = confine_paired_compute(plan, gpu, phi, st) * double(m);
  const Seconds window = (st.fwd.total() + st.bwd.total() + st.recompute.total() + st.extra) * double(m) * phi;
  const Seconds comm = (st.ep.time + st.pp.time) * phi;
  st.ep.exposed = st.ep.time * (1.0 - phi);
  st.pp.exposed = st.pp.time * (1.0 - phi);
  if (comm > Seconds(0)) {
    const Seconds exposed = std::max(Seconds(0), comm - window);
    const Seconds hidden = comm - exposed;
    const double ep_part = (st.ep.time * phi / comm).raw();
    // DeepSeek's dispatch/combine kernels hold 20 of the GPU's SMs while they run (§3.5.1: "20 out of the 132
    // SMs available in the H800"; DeepEP's Buffer.num_sms default 20; ep_kernel_sm_share); NCCL's channels the
    // house's share.
    const double ep_share = ep_kernel_sm_share(plan, gpu, nccl_sm_share);
    // Where the paired GEMMs and attention already run on the SMs the transfers leave, the transfers take SMs from
    // the window's other kernels only.
    const double beside = confined > Seconds(0) && window > Seconds(0)
                              ? 1.0 - std::min(1.0, (confined / window).raw())
                              : 1.0;
    st.ep.exposed += (exposed + hidden * ep_share * beside) * ep_part;
    st.pp.exposed += (exposed + hidden * nccl_sm_share) * (1.0 - ep_part);
  }
}

/// t_i: one micro-batch on the stage, with its parts.
void stage_time(const StepInputs& x, const StageShape& sh, StageTime& st) {
  const std::int64_t m = x.m;
  const double rec_share = stage_compute(x, sh, st);
  stage_extras(x, sh, st);
  stage_comm(x, sh, rec_share, st);
  if (sh.chunks == 2) dualpipe_halves(x, sh, st);
  st.compute = st.fwd.total() + st.bwd.total() + st.recompute.total();
  st.comm = stage_comm_exposed(st) / double(m);
  st.total = st.compute + st.comm + st.extra;
}

/// Every stage's t_i (recorded when asked), their sum, and the slowest stage (`worst`, o.bottleneck). A stage priced
/// like the one before it (StageShape::like_prev, marked once by stage_shapes: the middle stages of most splits) takes
/// that stage's t_i; one whose body is priced alike (the last stage after the middle ones, the second after the
/// first) takes its layers' compute and communication and adds its own extras: the same numbers bit for bit.
/// `buf` holds the stage being priced and the slowest so far, so that no stage's numbers are copied unless its body
/// is taken over; returns the slowest.
const StageTime& price_stages(const StepInputs& x, const std::vector<StageShape>& stages, StageTime (&buf)[2],
                              StepCore& o) {
  o.bottleneck = 0;
  o.stage_sum = Seconds(0);
  if (o.stage_times != nullptr) o.stage_times->clear();
  if (o.layout != nullptr) o.layout->stages.clear();
  StageTime* worst = &buf[0];
  StageTime* prev = &buf[0];  // the stage before this one
  const bool deferring = deferred_head_wgrads(x) > 0;
  o.deferred_window = Seconds(0);
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const StageShape& sh = stages[i];
    StageTime* st = prev;
    if (i == 0) {
      stage_time(x, sh, *st);
    } else if (sh.like_prev != StageShape::Like::all) {
      // A buffer that does not hold the slowest stage.
      st = prev != worst ? prev : worst == &buf[0] ? &buf[1] : &buf[0];
      if (sh.like_prev == StageShape::Like::body) {
        if (st != prev) *st = *prev;
        stage_extras(x, sh, *st);
        st->total = st->compute + st->comm + st->extra;
      } else {
        stage_time(x, sh, *st);
      }
    }
    o.stage_sum += st->total;
    // The stages before the last run the backward of the last micro-batch one after another while the last stage,
    // done with its own, runs its deferred LM-head wgrads (one chunk each under interleaving: / v in pipeline_bubble).
    if (deferring && i + 1 < stages.size()) o.deferred_window += st->bwd.total() + st->recompute.total();
    if (o.stage_times != nullptr) o.stage_times->push_back(st->total);
    if (o.layout != nullptr) o.layout->stages.push_back(*st);  // its StageParts
    if (i > 0 && st->total > worst->total) {
      worst = st;
      o.bottleneck = int(i);
    }
    prev = st;
  }
  return *worst;
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
  // The DP kernels' SM share: at most the DP communicator's CTA cap (dp_comm_compute_share).
  const double nccl_sm_share = dp_comm_compute_share(k.d, plan);
  o.dp_sm_share = nccl_sm_share;
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
      // FSDP/ZeRO-3: parameters gathered for forward and again for backward in every micro-batch (and for the
      // recomputed forward under DeepSpeed's per-tensor fetch: zero3_gathers_per_microbatch).
      const double passes = zero3_gathers_per_microbatch(plan) * double(m);
      gather = gather * passes;
      o.dp.bytes = grads + weights * passes;
    }
    o.dp.time = reduce + gather;
    // Each collective call beside compute also waits for SMs: a GEMM grid holds them all, so the call's kernel starts
    // when the kernel in flight drains, (wait_kernels) × (that kernel's duration) per call, measured by the
    // calibration profile's overlap items (0 without one). Calls: dp_calls (the frameworks' bucket sizes).
    const DpCalls calls = dp_calls(k, plan, *t.stages, t.dp.buckets);
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
    o.dp_gather_calls_per_pass = calls.gather;
    o.dp_gather_passes = plan.zero == wl::ZeroStage::parameters ? zero3_gathers_per_microbatch(plan) * double(m) : 1.0;
    const double gather_calls = calls.gather * o.dp_gather_passes;
    // DeepSpeed's per-tensor fetch synchronises the device before each gather and waits for it before the submodule
    // runs (zero3_gather per_tensor_blocking): no gather overlaps compute.
    const bool gather_blocking = plan.zero == wl::ZeroStage::parameters &&
                                 plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking;
    const BesideCompute gat = plan.overlap_param_gather && !gather_blocking
                                  ? beside_compute(gather, gather_window, gather_calls, tk_all, wait, t.dp.gather_first)
                                  : BesideCompute{gather, Seconds(0)};
    // The hidden part costs the compute beside it: per call its SM share over the call or, when larger, the compute
    // kernel's wait for the call's kernel, at most the kernel in flight (dp_beside_compute_share): the mirror of the
    // call's wait above. o.dp_sm_share: the loss per unit of hidden DP time, both collectives together.
    const double red_share = dp_beside_compute_share(
        nccl_sm_share, calls.reduce > 0 ? reduce / calls.reduce : Seconds(0), tk_bwd);
    const double gat_share =
        dp_beside_compute_share(nccl_sm_share, gather_calls > 0 ? gather / gather_calls : Seconds(0), tk_all);
    const Seconds beside_loss = red.hidden * red_share + gat.hidden * gat_share;
    const Seconds hidden = red.hidden + gat.hidden;
    o.dp_sm_share = hidden > Seconds(0) ? (beside_loss / hidden).raw() : std::max(red_share, gat_share);
    o.dp.exposed = red.exposed + gat.exposed + beside_loss;
    // PyTorch DDP copies each gradient into its communication bucket (read + write per element), PyTorch FSDP moves
    // parameters and gradients through its copy-in/copy-out buffers (dp_copy_time); Megatron's contiguous buffers
    // avoid both.
    o.dp.exposed += t.dp_copy;
    if (o.layout != nullptr)
      o.layout->dp = {reduce,      gather,        red.exposed,   red.hidden,   gat.exposed,
                      gat.hidden,  t.dp_copy,     o.dp_sm_share, calls.reduce, gather_calls};
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
    // B is a backward chunk as the bubble runs it: the bubble's chunks are DualPipe's unpaired ones (DualPipe.step
    // steps 1-3 and 6-8), so a backward chunk waits for its own dispatch and combine (two of an MoE layer's four
    // all-to-alls: o.ep.time / m per micro-batch, half of it the backward's) and for its gradient's pipeline send
    // (one of the micro-batch's two: o.pp.time / m, half), with no partner to hide them.
    const Seconds B = bwd.total() + recompute.total() + (o.ep.time + o.pp.time) / double(m) * 0.5;
    const Seconds W = bwd.wgrad;
    o.dualpipe_b = B;
    bubble = std::max(Seconds(0), (FB + B - W * 3.0) * (double(p) / 2.0 - 1.0));
    o.bubble_fraction = (bubble / (o.stage_max * double(m))).raw();
  } else if (p > 1 && m > 0) {
    bubble = (o.stage_sum - o.stage_max) / double(v);
    // Deferred LM-head wgrads (deferred_head_wgrads): the last stage runs N·W after its last backward, beside the
    // pipeline drain (the other stages' backwards of the last micro-batch, one chunk each); what outlasts the drain
    // delays the step's end (finalize_model_grads waits for it).
    o.deferred_microbatches = deferred_head_wgrads(x);
    if (o.deferred_microbatches > 0) {
      o.deferred_wgrad = x.t.compute->head_wgrad * double(o.deferred_microbatches);
      o.deferred_window = o.deferred_window / double(v);
      o.deferred_exposed = std::max(Seconds(0), o.deferred_wgrad - o.deferred_window);
      bubble += o.deferred_exposed;
    } else {
      o.deferred_window = Seconds(0);
    }
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
  s.comm_exposed = Seconds(0);
  for (const ParallelDim& dim : parallel_dims()) s.comm_exposed += (o.*dim.step).exposed;
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
  const auto& plan = x.plan;
  const auto& par = plan.par;
  const TrainingConsts& k = x.k;
  const hw::GpuSpec& gpu = x.gpu;
  const StepBreakdown& s = o.step;
  // ---- MFU / HFU ----
  // Causal attention does half the score work; published MFU tables (Megatron, PaLM) count the full square.
  o.model_flops = k.fpt.training * tokens_per_step;
  // Full recompute repeats the forward of every layer (not the LM head): Megatron's 96·B·s·l·h² counts it so.
  const units::Flops layer_forward = k.fpt.forward - k.head_forward;
  o.hardware_flops = o.model_flops;
  if (plan.recompute == wl::Recompute::full) {
    double recomputed = 0, layers_all = 0;
    for (const auto& sh : stages) {
      recomputed += double(sh.recomputed);
      layers_all += double(sh.layers);
    }
    const double rec_all = layers_all > 0 ? recomputed / layers_all : 1.0;
    o.hardware_flops = o.model_flops + layer_forward * (tokens_per_step * rec_all);
  }
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
  // The stages' pricing, or the search's memo of it (StepTerms::stages_memo).
  PricedStages* memo = o.stage_times == nullptr && o.layout == nullptr ? t.stages_memo : nullptr;
  std::optional<PricedStages> local;
  PricedStages& ps = memo != nullptr ? *memo : local.emplace();
  if (memo == nullptr || !t.stages_memo_valid) {
    ps.slowest = &price_stages(x, stages, ps.buf, o) == &ps.buf[0] ? 0 : 1;
    ps.bottleneck = o.bottleneck;
    ps.stage_sum = o.stage_sum;
  } else {
    o.bottleneck = ps.bottleneck;
    o.stage_sum = ps.stage_sum;
  }
  const StageTime& worst = ps.worst();
  o.stage_max = worst.total;
  o.compute_mb = worst.compute;
  o.comm_mb = worst.comm;
  o.nccl_sm_share = x.nccl_sm_share;
  o.bottleneck_layers = stages[std::size_t(o.bottleneck)].layers;
  const PassCost fwd = worst.fwd, bwd = worst.bwd, recompute = worst.recompute;
  o.fwd = fwd;
  o.bwd = bwd;
  o.recompute = recompute;
  const Seconds extra = worst.extra;
  o.extra = extra;
  for (const ParallelDim& dim : parallel_dims()) o.*dim.step = dim.stage != nullptr ? worst.*dim.stage : CommNumbers{};
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

}  // namespace gpuplan::model
