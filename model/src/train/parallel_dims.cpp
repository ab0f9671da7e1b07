// The parallel dimensions' records (parallel_dims.hpp): each one's group, collective and exposure rule.
#include "parallel_dims.hpp"

#include <fmt/format.h>

namespace gpuplan::model::detail {

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
  // compose_step.cpp stage_comm: Megatron's 2 collectives forward and 2 backward per layer, SP's 2 re-gathers.
  std::string r = plan.recompute == wl::Recompute::full
                      ? "t = t_one · (2 forward · (1 + recomputed share) + 2 backward) · layers · m"
                      : "t = t_one · (2 forward + 2 backward) · layers · m";
  if (plan.par.sequence_parallel) r += " + t_gather · 2 weight-gradient re-gathers · layers · m";
  r += plan.overlap_tp_comm ? " ; exposed = 1/(2·tp) of the pairs (the reduce-scatter's last chunk) + what exceeds the "
                              "GEMMs + hidden · SM share (TP overlap)"
                            : " ; exposed = t − the column-parallel backward's t_one · 2 · layers · m, which runs beside "
                              "the backward GEMMs (+ what exceeds them + their SM share)";
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
  if (plan.dualpipe()) return t + " ; DualPipe: with the paired chunks' all-to-all, beside the other direction's compute";
  if (plan.schedule == wl::PipelineSchedule::interleaved && plan.model_chunks() > 1 && plan.overlap_p2p_comm)
    return t + " ; exposed = what exceeds a chunk's forward (backward) + hidden · SM share";
  return t + " ; exposed = t";
}

const char* pp_span(const wl::TrainingPlan&, bool forward) {
  return forward ? "PP send of the activations" : "PP send of the gradients";
}

// ---- data parallel: the gradients' reduction (and ZeRO's parameter gathers), once per step ----
int tp_of(const wl::TrainingPlan& plan) { return plan.par.tp; }
std::string dp_collective(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  std::string s = plan.zero == wl::ZeroStage::none ? "all-reduce" : "reduce-scatter + all-gather";
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
         " + hidden · SM share + framework copies";
}

const std::array<ParallelDim, kDimCount> kDims = {{
    {"tp", &StepCore::tp, &StageParts::tp, &CommExposed::tp, tp_size, tp_size, unit_stride, false, &StepTerms::tp_one,
     tp_priced, tp_collective_time, tp_key, tp_collective, tp_rule, tp_fwd_share, SpanKind::comm_tp, tp_span},
    {"cp", &StepCore::cp, &StageParts::cp, &CommExposed::cp, cp_size, cp_size, tp_of, false, &StepTerms::cp_one,
     cp_priced, cp_collective_time, cp_key, cp_collective, cp_rule, cp_fwd_share, SpanKind::comm_cp, cp_span},
    {"ep", &StepCore::ep, &StageParts::ep, &CommExposed::ep, ep_size, ep_size, ep_stride, false, &StepTerms::ep_one,
     ep_priced, ep_collective_time, ep_key, ep_collective, ep_rule, half, SpanKind::comm_ep, ep_span},
    {"pp", &StepCore::pp, &StageParts::pp, &CommExposed::pp, pp_size, pp_comm_size, pp_stride, false,
     &StepTerms::pp_one, pp_priced, pp_collective_time, pp_key, pp_collective, pp_rule, half, SpanKind::comm_pp,
     pp_span},
    {"dp", &StepCore::dp, nullptr, &CommExposed::dp, dense_grad_group_size, dense_grad_group_size, tp_of, true,
     nullptr, nullptr, nullptr, nullptr, dp_collective, dp_rule, nullptr, SpanKind::dp_reduce, nullptr},
}};

}  // namespace

const std::array<ParallelDim, kDimCount>& parallel_dims() { return kDims; }

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
