// The parallel dimensions' records (parallel_dims.hpp): each one's group, collective and exposure rule.
#include "parallel_dims.hpp"

#include <fmt/format.h>

namespace gpuplan::model::detail {

namespace {

// ---- tensor parallel: the attention and dense MLP's collectives of every layer ----
int tp_size(const wl::TrainingPlan& plan) { return plan.par.tp; }
CommGroup tp_group(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  return training_comm_group(plan.par.tp, 1, sys);
}
std::string tp_collective(const wl::TransformerArch&, const wl::TrainingPlan& plan) {
  return plan.par.sequence_parallel ? "all-gather + reduce-scatter" : "all-reduce";
}
std::string tp_rule(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  std::string r = plan.recompute == wl::Recompute::full ? "t = t_one · (2 + recomputed share) pairs · layers · m"
                                                         : "t = t_one · 2 pairs · layers · m";
  r += plan.overlap_tp_comm ? " ; exposed = t/(2·tp) (the reduce-scatter's last chunk) + what exceeds the GEMMs + "
                              "hidden · SM share (TP overlap)"
                            : " ; exposed = t (in line with the GEMMs)";
  if (expert_tp_folded(a, plan)) r += " ; + the expert-TP group's pairs of the MoE layers, exposed";
  if (plan.lora.on()) r += " ; + the LoRA adapters' collectives, exposed";
  return r;
}

// ---- context parallel: ring attention's K/V exchange ----
int cp_size(const wl::TrainingPlan& plan) { return plan.par.cp; }
CommGroup cp_group(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  return training_comm_group(plan.par.cp, plan.par.tp, sys);
}
std::string cp_collective(const wl::TransformerArch&, const wl::TrainingPlan&) {
  return "all-gather (K,V) + reduce-scatter (dK,dV)";
}
std::string cp_rule(const wl::TransformerArch&, const wl::TrainingPlan&) {
  return "t = t_one · layers · m ; exposed = max(0, t − m·(attention forward + backward))";
}

// ---- expert parallel: the MoE layers' dispatch and combine ----
int ep_size(const wl::TrainingPlan& plan) { return plan.par.ep; }
CommGroup ep_group(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  return training_comm_group(plan.par.ep, plan.par.expert_tp(), sys);
}
std::string ep_collective(const wl::TransformerArch&, const wl::TrainingPlan&) { return "all-to-all"; }
std::string ep_rule(const wl::TransformerArch&, const wl::TrainingPlan& plan) {
  const std::string t = "t = t_one · 4 (dispatch, combine; forward, backward) · MoE layers · m";
  if (plan.dualpipe())
    return t + " ; DualPipe: exposed = (1 − φ)·t + the paired share's excess over the other direction's compute + "
               "hidden · SM share";
  if (plan.ep_a2a_overlap)
    return t + " ; exposed = the warm-up and cool-down passes' share + the paired rest's excess over the other "
               "micro-batch's compute + hidden · SM share";
  return t + " ; exposed = t";
}

// ---- pipeline parallel: the stage boundary's sends (the group of a send is its two neighbours) ----
int pp_size(const wl::TrainingPlan& plan) { return plan.par.pp; }
CommGroup pp_group(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  const auto& par = plan.par;
  return training_comm_group(par.pp > 1 ? 2 : 1, par.tp * par.cp * par.dp, sys);
}
std::string pp_collective(const wl::TransformerArch&, const wl::TrainingPlan&) { return "send/recv"; }
std::string pp_rule(const wl::TransformerArch&, const wl::TrainingPlan& plan) {
  const std::string t = "t = (t_send + t_gather) · 2·v·m";
  if (plan.dualpipe()) return t + " ; DualPipe: with the paired chunks' all-to-all, beside the other direction's compute";
  if (plan.schedule == wl::PipelineSchedule::interleaved && plan.model_chunks() > 1 && plan.overlap_p2p_comm)
    return t + " ; exposed = what exceeds a chunk's forward (backward) + hidden · SM share";
  return t + " ; exposed = t";
}

// ---- data parallel: the gradients' reduction (and ZeRO's parameter gathers), once per step ----
CommGroup dp_group(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  return grad_comm_group(dense_grad_group_size(plan), plan.par.tp, plan, sys);
}
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
    {"tp", &StepCore::tp, &StageParts::tp, &CommExposed::tp, tp_size, tp_group, tp_collective, tp_rule},
    {"cp", &StepCore::cp, &StageParts::cp, &CommExposed::cp, cp_size, cp_group, cp_collective, cp_rule},
    {"ep", &StepCore::ep, &StageParts::ep, &CommExposed::ep, ep_size, ep_group, ep_collective, ep_rule},
    {"pp", &StepCore::pp, &StageParts::pp, &CommExposed::pp, pp_size, pp_group, pp_collective, pp_rule},
    {"dp", &StepCore::dp, nullptr, &CommExposed::dp, dense_grad_group_size, dp_group, dp_collective, dp_rule},
}};

}  // namespace

const std::array<ParallelDim, kDimCount>& parallel_dims() { return kDims; }

Seconds stage_comm_exposed(const StageParts& s) {
  Seconds sum{};
  for (const ParallelDim& d : kDims)
    if (d.stage != nullptr) sum += (s.*d.stage).exposed;
  return sum;
}

}  // namespace gpuplan::model::detail
