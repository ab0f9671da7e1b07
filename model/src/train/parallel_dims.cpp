// The parallel dimensions' records (parallel_dims.hpp): each one's message and one collective (priced once, cached by
// the search under the dimension's key), its group, collective and exposure rule, and its stage communication.
#include "parallel_dims.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/graph.hpp"
#include "dp_instances.hpp"
#include "lora_adapter.hpp"
#include "moe_a2a.hpp"
#include "quant_recipe.hpp"

namespace gpuplan::model::detail {

// ---- the messages of one micro-batch (TP, CP, EP, PP) and one collective of each dimension (training_core.hpp) ----
// The TP, EP and PP messages carry the layer's boundary activation: T tokens of the residual stream's width, what
// every layer graph's first op reads and its last op writes (layer_boundary_width, graph.hpp).
double tp_message_elements(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  const std::int64_t T = plan.micro_batch * plan.seq_len / plan.par.cp;
  return double(T) * double(layer_boundary_width(a));
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
  return units::bytes((double(T) * double(k) * double(layer_boundary_width(a))) * plan.precision.activation_bytes *
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
  return units::bytes((double(T) * double(layer_boundary_width(a))) * plan.precision.activation_bytes /
                      (pp_message_split(plan) ? double(plan.par.tp) : 1.0));
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

namespace {

// ---- tensor parallel: the attention and dense MLP's collectives of every layer ----
using Key = std::array<std::int64_t, 5>;
int unit_stride(const wl::TrainingPlan&) { return 1; }
int tp_size(const wl::TrainingPlan& plan) { return plan.par.tp; }
bool tp_priced(const wl::TransformerArch&, const wl::TrainingPlan& plan) { return plan.par.tp > 1; }
Key tp_key(const wl::TrainingPlan& plan) {
  const auto& par = plan.par;
  return {par.tp, par.cp, plan.micro_batch, par.sequence_parallel ? 1 : 0, 0};
}
std::string tp_collective(const wl::TransformerArch&, const wl::TrainingPlan& plan) {
  return plan.par.sequence_parallel ? "all-gather + reduce-scatter" : "all-reduce";
}
std::string tp_rule(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  // tp_stage: Megatron's 2 collectives forward and 2 backward per layer, SP's 2 re-gathers.
  std::string r = plan.recompute == wl::Recompute::full
                      ? "t = t_one · (2 forward · (1 + recomputed share) + 2 backward) · layers · m"
                      : "t = t_one · (2 forward + 2 backward) · layers · m";
  if (plan.par.sequence_parallel) r += " + t_gather · 2 weight-gradient re-gathers · layers · m";
  r += plan.overlap_tp_comm ? " ; exposed = 1/(2·tp) of the pairs (the reduce-scatter's last chunk) + what exceeds the "
                              "GEMMs + hidden · SM share (TP overlap)"
                            : plan.tp_async_backward
                                  ? " ; exposed = t − the column-parallel backward's t_one · 2 · layers · m, which runs "
                                    "beside the backward GEMMs (+ what exceeds them + their SM share)"
                                  : " ; exposed = t (the column-parallel backward's all-reduce blocks after the "
                                    "linear's backward: Megatron-LM before its async all-reduce)";
  if (quantised_tp_gathers(plan)) {
    const TpGatherBytes b = tp_gather_bytes(plan.precision.recipe);
    r += fmt::format(" ; quantised gathers (Transformer Engine, SP): the attention's and dense MLPs' all-gathers move "
                     "{:.4g} / {:.4g} / {:.4g} B per element (forward input / output gradient / re-gather), the "
                     "reduce-scatters stay 16-bit",
                     b.input, b.grad, b.regather);
    if (tp_amax_reduction(plan.precision.recipe))
      r += " ; + an amax all-reduce (4 B) over TP before each forward input's and output gradient's gather, exposed";
  }
  if (expert_tp_folded(a, plan)) r += " ; + the expert-TP group's pairs of the MoE layers (1 forward, 1 backward), exposed";
  if (plan.lora.on()) r += " ; + the LoRA adapters' collectives, exposed";
  return r;
}

// The forward's 2 collectives of the 2 forward + 2 backward (+ 2 recomputed under full recompute); under SP the 2
// backward re-gathers count as one more pair (an all-gather is about half of an all-gather + reduce-scatter).
double tp_fwd_share(const wl::TrainingPlan& plan) {
  const double pairs = (plan.recompute == wl::Recompute::full ? 6.0 : 4.0) + (plan.par.sequence_parallel ? 1.0 : 0.0);
  return 2.0 / pairs;
}
const char* tp_span(const wl::TrainingPlan& plan, bool) {
  return plan.par.sequence_parallel ? "TP all-gather + reduce-scatter" : "TP all-reduce";
}

// Under FP8 / FP4 with sequence parallelism (quantised_tp_gathers, quant_recipe.hpp): every layer's attention linears
// and a dense layer's MLP linears are Transformer Engine's, whose all-gathers move the quantised shard and whose
// reduce-scatters stay 16-bit (TpQuantTimes); a MoE layer's expert half over TP gathers its 16-bit tokens in the
// dispatcher (t_one, t_gather). Current scaling and NVFP4 all-reduce the amax over TP before each gather of the
// forward's inputs and of the output gradients (2 + 2 per dense layer, 1 + 1 per MoE layer; again under full
// recompute), on the critical path. The rest is exposed as in tp_stage.
void tp_quantised(const StageCommInputs& in, const StageTime& st, double fwd, double tp_layers, CommNumbers& out) {
  const StepTerms& t = in.t;
  const TpQuantTimes& q = t.tp_quant;
  const double m = double(in.m), bwd = 2.0, regather = 2.0;
  const double te = double(in.sh.layers) - 0.5 * double(in.sh.moe_layers);  // layers' worth of TE linears
  const double rest = std::max(0.0, tp_layers - te);                      // MoE expert halves over TP, 16-bit
  const Seconds f = q.pair_fwd * te + t.tp_one * rest, b = q.pair_bwd * te + t.tp_one * rest;
  const Seconds g = q.regather * te + t.tp_gather_one * rest;
  const Seconds amax = q.amax * (te * (fwd + bwd) * m);
  out.time = (f * fwd + b * bwd + g * regather) * m + amax;
  const TpGatherBytes gb = tp_gather_bytes(in.plan.precision.recipe);
  const Bytes act = tp_message(in.a, in.plan);
  const Bytes te_layer =
      units::bytes(tp_message_elements(in.a, in.plan) * (gb.input * fwd + gb.grad * bwd + gb.regather * regather)) +
      act * (fwd + bwd) + units::bytes(q.amax > Seconds(0) ? 4.0 * (fwd + bwd) : 0.0);
  out.bytes = (te_layer * te + act * (((fwd + bwd) * 2.0 + regather) * rest)) * m;
  if (in.plan.overlap_tp_comm) {
    // 1/tp of each reduce-scatter stays exposed (tp_stage); the amax all-reduces too.
    const Seconds rs = q.reduce_scatter * te + t.tp_one * (0.5 * rest);
    const Seconds tail = rs * ((fwd + bwd) * m / double(in.plan.par.tp));
    const Seconds hideable = out.time - amax - tail;
    const Seconds hideable_exposed = std::max(Seconds(0), hideable - (st.fwd.gemm + st.bwd.gemm) * m);
    out.exposed = amax + tail + hideable_exposed + (hideable - hideable_exposed) * in.nccl_sm_share;
    return;
  }
  // Beside the backward GEMMs: the column-parallel linears' input-gradient reduce-scatters and their re-gathers.
  const Seconds beside = in.plan.tp_async_backward
                            ? ((q.reduce_scatter + q.regather) * te + t.tp_one * rest) * (bwd * m)
                            : Seconds(0);
  const Seconds beside_exposed = std::max(Seconds(0), beside - st.bwd.gemm * m);
  out.exposed = out.time - beside + beside_exposed + (beside - beside_exposed) * in.nccl_sm_share;
}

// TP (Narayanan et al. 2021 §3.2; Megatron-Core tensor_parallel/layers.py and mappings.py): per layer 2 all-reduces
// forward (after the attention and MLP row-parallel linears) and 2 backward (the input gradients of the QKV and fc1
// column-parallel linears); under sequence parallelism each is an all-gather + reduce-scatter of the same bytes, and
// the backward all-gathers each column-parallel linear's input once more for its weight gradient
// (LinearWithGradAccumulationAndAsyncCommunication.backward; Transformer Engine's Linear alike): 2 more all-gathers.
// The column-parallel backward's collectives run beside its GEMMs (the re-gather beside the dgrad GEMM, the input
// gradient's all-reduce or reduce-scatter beside the wgrad GEMM, async in the same backward), so they hide behind
// the backward GEMMs at the SM share of their NCCL kernels; the forward's and (sequence parallel) the row-parallel
// backward's gradient all-gathers sit on the critical path.
// Parallel folding (etp ≠ tp): the MoE layers' expert half runs over the expert-TP group instead (etp_one), and
// over TP only for their shared experts (a dense MLP split by TP).
void tp_stage(const StageCommInputs& in, const StageTime& st, CommNumbers& out) {
  const auto& a = in.a;
  const auto& plan = in.plan;
  const auto& par = plan.par;
  const StepTerms& t = in.t;
  const std::int64_t m = in.m;
  const double layers = double(in.sh.layers), moe_layers = double(in.sh.moe_layers);
  const bool folded = expert_tp_folded(a, plan);
  const double moe_tp_half = !folded || (a.moe && a.moe->shared_experts > 0) ? 1.0 : 0.0;
  const double tp_layers = folded ? layers - moe_layers * (1.0 - moe_tp_half) * 0.5 : layers;
  if (par.tp > 1 && tp_layers > 0) {
    const Bytes act = tp_message(a, plan);
    const bool sp = par.sequence_parallel;
    // Per layer and micro-batch: the forward's 2 (full recompute runs them again), the backward's 2, the re-gathers.
    const double fwd = plan.recompute == wl::Recompute::full ? 2.0 * (1.0 + in.rec_share) : 2.0;
    const double bwd = 2.0, regather = sp ? 2.0 : 0.0;
    const double per_mb = tp_layers * double(m);
    if (t.tp_quant.on()) {
      tp_quantised(in, st, fwd, tp_layers, out);
    } else {
      out.time = (t.tp_one * (fwd + bwd) + t.tp_gather_one * regather) * per_mb;
      out.bytes = act * ((fwd + bwd) * 2.0 + regather) * per_mb;
      const Seconds gemm_stage = (st.fwd.gemm + st.bwd.gemm) * double(m);
      if (plan.overlap_tp_comm) {
        // Userbuffers / async TP split each GEMM into TP chunks and move chunk i while chunk i±1 computes: the
        // all-gather's first chunk is local, but the reduce-scatter's last chunk has no GEMM left to hide behind, so
        // 1/tp of the reduce-scatter half of each pair stays exposed; the rest (the re-gathers too: TE's bulk overlap
        // beside the dgrad GEMM) hides behind the GEMMs at its SM cost.
        const Seconds tail = t.tp_one * (fwd + bwd) * per_mb * (0.5 / double(par.tp));
        const Seconds rest = out.time - tail;
        const Seconds rest_exposed = std::max(Seconds(0), rest - gemm_stage);
        out.exposed = tail + rest_exposed + (rest - rest_exposed) * in.nccl_sm_share;
      } else {
        // Beside the backward GEMMs: the column-parallel linears' 2 input-gradient collectives and (SP) their 2
        // re-gathers, t_one·2 per layer either way (all-reduce; or reduce-scatter + all-gather). Megatron-LM before
        // its async all-reduce (tp_async_backward false) issues them after the linear's whole backward, blocking.
        const Seconds beside = plan.tp_async_backward ? t.tp_one * bwd * per_mb : Seconds(0);
        const Seconds beside_exposed = std::max(Seconds(0), beside - st.bwd.gemm * double(m));
        out.exposed = out.time - beside + beside_exposed + (beside - beside_exposed) * in.nccl_sm_share;
      }
    }
    // LoRA: the adapters' own collectives, in line with them (lora_adapter.hpp).
    const double adapter = (lora_tp_collectives(plan, false) * (layers - moe_layers) +
                            lora_tp_collectives(plan, true) * moe_layers) * double(m);
    out.time += t.tp_gather_one * adapter;
    out.bytes += act * adapter;
    out.exposed += t.tp_gather_one * adapter;
  }
  if (folded && par.expert_tp() > 1 && moe_layers > 0) {
    // The expert half of every MoE layer over the expert-TP group: not behind a GEMM (the dispatcher's own
    // gather and reduce-scatter around the grouped GEMMs), so exposed.
    // One all-reduce equivalent forward (again under full recompute) and one backward per MoE layer.
    const double per_mb = (plan.recompute == wl::Recompute::full ? 2.0 + in.rec_share : 2.0) * moe_layers;
    const Bytes act = tp_message(a, plan) * (double(par.expert_tp()) / double(std::max(1, par.tp)));
    out.time += t.etp_one * per_mb * double(m);
    out.bytes += act * (per_mb * 2.0 * double(m));
    out.exposed += t.etp_one * per_mb * double(m);
  }
}

// ---- context parallel: ring attention's K/V exchange ----
int cp_size(const wl::TrainingPlan& plan) { return plan.par.cp; }
bool cp_priced(const wl::TransformerArch&, const wl::TrainingPlan& plan) { return plan.par.cp > 1; }
Key cp_key(const wl::TrainingPlan& plan) { return {plan.par.tp, plan.par.cp, plan.micro_batch, 0, 0}; }
std::string cp_collective(const wl::TransformerArch&, const wl::TrainingPlan&) {
  return "all-gather (K,V) + reduce-scatter (dK,dV)";
}
std::string cp_rule(const wl::TransformerArch&, const wl::TrainingPlan&) {
  return "t = t_one · layers · m ; exposed = max(0, t − m·(attention forward + backward))";
}

// The two K/V all-gathers of three messages.
double cp_fwd_share(const wl::TrainingPlan&) { return 2.0 / 3.0; }
const char* cp_span(const wl::TrainingPlan&, bool) { return "CP K/V exchange"; }

// Ring attention exchanges K and V forward, dK and dV backward; overlapped with attention compute.
void cp_stage(const StageCommInputs& in, const StageTime& st, CommNumbers& out) {
  if (in.plan.par.cp <= 1) return;
  const double layers = double(in.sh.layers);
  const Bytes kv = cp_message(in.a, in.plan);
  out.time = in.t.cp_one * layers * double(in.m);
  out.bytes = kv * (3.0 * layers * double(in.m));
  out.exposed = std::max(Seconds(0), out.time - (st.fwd.attention + st.bwd.attention) * double(in.m));
}

// ---- expert parallel: the MoE layers' dispatch and combine ----
int ep_size(const wl::TrainingPlan& plan) { return plan.par.ep; }
int ep_stride(const wl::TrainingPlan& plan) { return plan.par.expert_tp(); }
bool ep_priced(const wl::TransformerArch& a, const wl::TrainingPlan& plan) { return plan.par.ep > 1 && a.moe; }
Key ep_key(const wl::TrainingPlan& plan) {
  const auto& par = plan.par;
  // EP and expert TP in one entry (the search's "ek").
  return {par.tp, par.cp, std::int64_t(par.ep) * 4096 + par.expert_tp(), plan.micro_batch, 0};
}
std::string ep_collective(const wl::TransformerArch&, const wl::TrainingPlan&) { return "all-to-all"; }
std::string ep_rule(const wl::TransformerArch&, const wl::TrainingPlan& plan) {
  const std::string t = "t = t_one · 4 (dispatch, combine; forward, backward) · MoE layers · m";
  if (plan.dualpipe())
    return t + " ; DualPipe: exposed = (1 − φ)·t + the paired share's excess over the other direction's compute + "
               "hidden · SM share (DeepSeek's framework: the paired GEMMs run on the SMs left, × 1/(1 − share), and "
               "the hidden part's SM share is taken from the other kernels only)";
  if (plan.ep_a2a_overlap)
    return t + " ; exposed = the warm-up and cool-down passes' share + the paired rest's excess over the other "
               "micro-batch's compute + hidden · SM share";
  return t + " ; exposed = t";
}

// Dispatch and combine of the forward: two of the four all-to-alls (PP: one send each way, the same half).
double half(const wl::TrainingPlan&) { return 0.5; }
const char* ep_span(const wl::TrainingPlan&, bool) { return "EP all-to-all (dispatch + combine)"; }

/// Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm with --delay-wgrad-compute;
/// model_parallel_config.py: "Overlap EP A2A communications with independent computations of different micro-batches
/// in 1f1b phase of pipelining or non-pipelining schedule"; pipeline_parallel/combined_1f1b.py): in the steady 1F1B
/// phase the forward of one micro-batch and the backward of another run as one merged schedule, each one's dispatch
/// and combine beside the other's compute (the delayed weight-gradient GEMMs fill the backward's side). Warm-up and
/// cool-down passes have no partner: of the m·v chunk passes per direction, W = min(m·v, 2(p−1) + (v−1)·p) run alone
/// (schedules.py get_pp_rank_microbatches, the first pipeline rank's warm-up; 1 without pipelining), their all-to-all
/// exposed. Of the paired part, what exceeds the partner's compute stays exposed; the hidden part pays the SM share.
void ep_a2a_overlap(const StageCommInputs& x, const StageTime& st, CommNumbers& ep) {
  const double passes = double(x.m) * double(x.v);
  if (passes <= 0 || !(ep.time > Seconds(0))) return;
  const double alone = std::min(passes, x.p > 1 ? 2.0 * double(x.p - 1) + double(x.v - 1) * double(x.p) : 1.0);
  const double paired = (passes - alone) / passes;
  const Seconds comm = ep.time * paired;
  const Seconds window = (st.fwd.total() + st.bwd.total() + st.recompute.total()) * (double(x.m) * paired);
  ep.exposed = ep.time * (1.0 - paired) + overlap_exposed(comm, window, ep_kernel_sm_share(x.plan, x.gpu, x.nccl_sm_share));
}

// Dispatch and combine all-to-all, forward and backward, per MoE layer.
void ep_stage(const StageCommInputs& in, const StageTime& st, CommNumbers& out) {
  if (in.plan.par.ep <= 1 || !in.a.moe) return;
  const double moe_layers = double(in.sh.moe_layers);
  const Bytes buf = in.t.ep_bytes_one.raw() > 0 ? in.t.ep_bytes_one : ep_message(in.a, in.plan);
  out.time = in.t.ep_one * (4.0 * moe_layers * double(in.m));
  out.bytes = buf * (4.0 * moe_layers * double(in.m));
  out.exposed = out.time;
  if (in.plan.ep_a2a_overlap) ep_a2a_overlap(in, st, out);
}

// ---- pipeline parallel: the stage boundary's sends (the group of a send is its two neighbours) ----
int pp_size(const wl::TrainingPlan& plan) { return plan.par.pp; }
int pp_comm_size(const wl::TrainingPlan& plan) { return plan.par.pp > 1 ? 2 : 1; }
int pp_stride(const wl::TrainingPlan& plan) { return plan.par.tp * plan.par.cp * plan.par.dp; }
bool pp_priced(const wl::TransformerArch&, const wl::TrainingPlan& plan) { return plan.par.pp > 1; }
Key pp_key(const wl::TrainingPlan& plan) {
  const auto& par = plan.par;
  return {par.tp, par.cp, par.dp, plan.micro_batch, par.sequence_parallel ? 1 : 0};
}
std::string pp_collective(const wl::TransformerArch&, const wl::TrainingPlan&) { return "send/recv"; }
std::string pp_rule(const wl::TransformerArch&, const wl::TrainingPlan& plan) {
  const std::string t = "t = (t_send + t_gather) · 2·v·m";
  if (plan.dualpipe())
    return t + " ; DualPipe: exposed = (1 − φ)·t (the chunks run alone wait for their sends) + the paired share with "
               "the paired chunks' all-to-all, beside the other direction's compute";
  if (plan.schedule == wl::PipelineSchedule::interleaved && plan.model_chunks() > 1 && plan.overlap_p2p_comm)
    return t + " ; exposed = what exceeds a chunk's forward (backward) + hidden · SM share";
  return t + " ; exposed = t";
}

const char* pp_span(const wl::TrainingPlan&, bool forward) {
  return forward ? "PP send of the activations" : "PP send of the gradients";
}

// Activations forward, gradients backward, at each chunk boundary per micro-batch (plus the receiver's TP all-gather
// under scatter/gather). Interleaved with Megatron's overlap_p2p_comm: each send/recv runs beside the neighbouring
// chunk's compute (schedules.py forward_backward_pipelining_with_interleaving, overlap_p2p_comm: the next chunk's
// input is received while this chunk computes); only the part longer than a chunk's forward (backward) stays
// exposed, and the hidden part pays the SM share of its NCCL kernels.
void pp_stage(const StageCommInputs& in, const StageTime& st, CommNumbers& out) {
  const auto& plan = in.plan;
  if (plan.par.pp <= 1) return;
  const int v = in.v;
  const std::int64_t m = in.m;
  const Bytes msg = pp_message(in.a, plan);
  const double sends = 2.0 * double(v) * double(m);
  const Seconds one = in.t.pp_one + in.t.pp_gather_one;
  out.time = one * sends;
  out.bytes = msg * sends;
  out.exposed = out.time;
  if (plan.schedule == wl::PipelineSchedule::interleaved && v > 1 && plan.overlap_p2p_comm) {
    const Seconds f_chunk = st.fwd.total() / double(v), b_chunk = (st.bwd.total() + st.recompute.total()) / double(v);
    const Seconds ef = std::max(Seconds(0), one - f_chunk), eb = std::max(Seconds(0), one - b_chunk);
    const Seconds exposed = (ef + eb) * (double(v) * double(m));
    out.exposed = exposed + (out.time - exposed) * in.nccl_sm_share;
  }
}

// ---- data parallel: the gradients' reduction (and ZeRO's parameter gathers), once per step ----
int tp_of(const wl::TrainingPlan& plan) { return plan.par.tp; }
std::string dp_collective(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  // With optimizer instances (dp_terms.cpp dp_collective_times): each instance reduce-scatters and gathers over its
  // own ranks, and the shards are all-reduced across the instances.
  const int inst = dp_optimizer_instances(plan);
  std::string s = plan.zero == wl::ZeroStage::none ? "all-reduce"
                  : inst > 1 ? fmt::format("reduce-scatter + all-gather in each of {} optimizer instances of {}, "
                                           "all-reduce across them",
                                           inst, dense_grad_group_size(plan) / inst)
                             : "reduce-scatter + all-gather";
  if (a.moe && plan.par.ep > 1) s += fmt::format(" (routed experts over {} GPUs)", expert_grad_group_size(plan));
  return s;
}
std::string dp_rule(const wl::TransformerArch&, const wl::TrainingPlan& plan) {
  return std::string("exposed = ") +
         (plan.overlap_grad_reduce ? "the reduction beyond the backward window (at least the last bucket)"
                                   : "the reduction (after the backward)") +
         (plan.zero == wl::ZeroStage::none ? ""
          : plan.overlap_param_gather      ? " + the gathers beyond their window (at least the first bucket)"
                                           : " + the gathers") +
         " + hidden · loss beside compute (per call the SM share or the wait for the call, see DP beside compute)"
         " + framework copies";
}

const std::array<ParallelDim, kDimCount> kDims = {{
    {"tp", &StepCore::tp, &StageParts::tp, &CommExposed::tp, tp_size, tp_size, unit_stride, false, &StepTerms::tp_one,
     tp_priced, tp_collective_time, tp_key, tp_collective, tp_rule, tp_fwd_share, SpanKind::comm_tp, tp_span, tp_stage},
    {"cp", &StepCore::cp, &StageParts::cp, &CommExposed::cp, cp_size, cp_size, tp_of, false, &StepTerms::cp_one,
     cp_priced, cp_collective_time, cp_key, cp_collective, cp_rule, cp_fwd_share, SpanKind::comm_cp, cp_span, cp_stage},
    {"ep", &StepCore::ep, &StageParts::ep, &CommExposed::ep, ep_size, ep_size, ep_stride, false, &StepTerms::ep_one,
     ep_priced, ep_collective_time, ep_key, ep_collective, ep_rule, half, SpanKind::comm_ep, ep_span, ep_stage},
    {"pp", &StepCore::pp, &StageParts::pp, &CommExposed::pp, pp_size, pp_comm_size, pp_stride, false,
     &StepTerms::pp_one, pp_priced, pp_collective_time, pp_key, pp_collective, pp_rule, half, SpanKind::comm_pp,
     pp_span, pp_stage},
    {"dp", &StepCore::dp, nullptr, &CommExposed::dp, dense_grad_group_size, dense_grad_group_size, tp_of, true,
     nullptr, nullptr, nullptr, nullptr, dp_collective, dp_rule, nullptr, SpanKind::dp_reduce, nullptr, nullptr},
}};

}  // namespace

const std::array<ParallelDim, kDimCount>& parallel_dims() { return kDims; }

/// The SM share the expert-parallel dispatch/combine kernels take from the compute beside them: DeepSeek's kernels
/// hold 20 of the GPU's SMs while they run (arXiv:2412.19437 §3.5.1: "20 out of the 132 SMs available in the H800";
/// DeepEP's Buffer.num_sms default 20); NCCL's channels the house's share.
double ep_kernel_sm_share(const wl::TrainingPlan& plan, const hw::GpuSpec& gpu, double nccl_sm_share) {
  return a2a_sm_share(plan.ep_dispatch == wl::EpDispatch::deepep ? A2aKernel::deepep_normal : A2aKernel::nccl,
                      gpu.compute_units, nccl_sm_share);
}

// kKernelWaitPerCall (parallel_dims.hpp): scripts/validation/beside_comm_law.py over our two-H200 runs of
// scripts/measure/beside_comm.py (data/validation/measured/h200-sxm-141gb/beside_comm_2gpu_{dsv3,llama8b}.json and
// beside_comm_ctas_2gpu_{dsv3,mid,llama8b}.json: torch.matmul GEMMs of 0.15-1.3 ms beside back-to-back NCCL
// all-reduce, reduce-scatter, all-gather and all-to-all calls of 0.15-0.5 ms): the median of a GEMM's delay over
// the call's own duration, 0.548 (35 points, 0.31-0.69; the 4096^3-class GEMM lowest, 0.31-0.35), the same with
// NCCL pinned to 4, 8, 16 or 32 CTAs. Out of sample, our 4-GPU H200 step profiles
// (profile_h200_llama1b_s2048_b4_{single,ddp4,fsdp4}.json): DDP's 66 all-reduce calls and FSDP2's 50 calls cost
// the GEMMs and attention 14.1 and 9.9 ms per step (0.21 and 0.20 ms per call, against a mean compute kernel of
// 0.23 ms), where this law gives 15.3 and 11.6 ms and the SM share alone 3.4 and 3.6 ms. Not explained by it: the
// calibration's overlap items (gpuplan-bench, a cuBLASLt 8192x8192x4096 GEMM beside 32/256 MiB calls), whose GEMMs
// lose 0.08-0.18 of a 256 MiB call and up to 3.0 of a 32 MiB reduce-scatter: the beside_comm_law.py table.
double dp_beside_compute_share(double sm_share, Seconds call, Seconds kernel_in_flight) {
  if (!(call > Seconds(0)) || !(kernel_in_flight > Seconds(0))) return sm_share;
  return std::max(sm_share, std::min(kKernelWaitPerCall, (kernel_in_flight / call).raw()));
}

CommGroup dim_group(const ParallelDim& dim, const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  const int size = dim.comm_size(plan), stride = dim.stride(plan);
  return dim.gradient ? grad_comm_group(size, stride, plan, sys) : training_comm_group(size, stride, sys);
}

Seconds stage_comm_exposed(const StageParts& s) {
  Seconds sum{};
  for (const ParallelDim& d : kDims)
    if (d.stage != nullptr) sum += (s.*d.stage).exposed;
  return sum;
}

}  // namespace gpuplan::model::detail
