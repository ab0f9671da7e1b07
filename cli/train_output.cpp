// `gpuplan train` for one plan: its report (text, Markdown), its JSON object and CSV row (the stable keys of
// docs/cli.md), the error band of its regime, and the --timeline / --memory-timeline views.
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bands.hpp"
#include "gpuplan/app/report_sections.hpp"
#include "gpuplan/core/format.hpp"
#include "train_cmd.hpp"

namespace gpuplan::cli::train_cmd {
namespace {

using nlohmann::ordered_json;

ordered_json bytes_json(const model::TrainingMemory& m) {
  return {{"weights_bytes", m.weights.raw()},
          {"gradients_bytes", m.gradients.raw()},
          {"master_weights_bytes", m.master_weights.raw()},
          {"optimizer_states_bytes", m.optimizer_states.raw()},
          {"activations_bytes", m.activations.raw()},
          {"logits_bytes", m.logits.raw()},
          {"cuda_context_bytes", m.cuda_context.raw()},
          {"nccl_buffers_bytes", m.nccl_buffers.raw()},
          {"fragmentation_bytes", m.fragmentation.raw()},
          {"host_offloaded_bytes", m.host_offloaded.raw()}};
}

}  // namespace

ordered_json estimate_json(const wl::TransformerArch& arch, const model::TrainingSystem& sys,
                           const wl::TrainingPlan& plan, const model::TrainingEstimate& est, bool explain,
                           const model::Band* band) {
  const auto& par = plan.par;
  ordered_json o;
  o["model"] = arch.id;
  o["gpu"] = sys.gpu->info.id;
  o["node"] = sys.node ? sys.node->info.id : "";
  o["gpus"] = par.gpus();
  o["layout"] = {{"tp", par.tp}, {"pp", par.pp}, {"dp", par.dp}, {"cp", par.cp}, {"ep", par.ep},
                 {"sequence_parallel", par.sequence_parallel}, {"virtual_stages", par.virtual_stages},
                 {"micro_batch", plan.micro_batch}, {"global_batch", plan.global_batch}, {"seq", plan.seq_len},
                 {"micro_batches", est.micro_batches},
                 {"offload", plan.offload == wl::Offload::optimizer ? "optimizer" : "none"},
                 {"optimizer_states", plan.optimizer_states == wl::StateDtype::bf16 ? "bf16" : "fp32"},
                 {"fp8_params", plan.precision.fp8_params},
                 {"lora", {{"rank", plan.lora.rank},
                           {"targets", plan.lora.on() ? wl::to_string(plan.lora.targets) : "none"},
                           {"base", wl::to_string(plan.lora.base)}}}};
  if (par.expert_tp() != par.tp) o["layout"]["etp"] = par.expert_tp();
  o["feasible"] = est.feasibility.ok;
  o["reasons"] = est.feasibility.reasons;
  if (est.step_time.raw() > 0) {
    o["step_time_s"] = est.step_time.raw();
    o["tokens_per_s"] = est.tokens_per_s;
    o["tokens_per_s_per_gpu"] = est.tokens_per_s / double(par.gpus());
    o["mfu"] = est.mfu;
    o["hfu"] = est.hfu;
    o["model_flops_per_step"] = est.model_flops_per_step.raw();
    o["breakdown"] = {{"gemm_s", est.step.gemm.raw()}, {"attention_s", est.step.attention.raw()},
                      {"elementwise_s", est.step.elementwise.raw()}, {"embedding_loss_s", est.step.embedding_loss.raw()},
                      {"recompute_s", est.step.recompute.raw()}, {"comm_exposed_s", est.step.comm_exposed.raw()},
                      {"bubble_s", est.step.bubble.raw()}, {"optimizer_s", est.step.optimizer.raw()},
                      {"offload_s", est.step.offload.raw()}};
    ordered_json comm;
    for (const auto& c : est.comm)
      comm[c.kind] = {{"collective", c.collective}, {"group_size", c.group_size}, {"tier", c.tier},
                      {"bytes_per_step", c.bytes_per_step.raw()}, {"time_s", c.time.raw()}, {"exposed_s", c.exposed.raw()}};
    o["comm"] = comm;
    o["memory"] = {{"peak_bytes_per_gpu", est.memory.total.raw()}, {"capacity_bytes", est.memory.capacity.raw()},
                   {"fits", est.memory.fits}, {"breakdown", bytes_json(est.memory)}};
    if (est.time_to_train) o["time_to_train_s"] = est.time_to_train->raw();
    if (est.gpu_hours) o["gpu_hours"] = *est.gpu_hours;
    if (est.cost) {
      o["cost_usd"] = est.cost->raw();
      o["price_kind"] = price_kind(sys.price, sys.gpu).value_or("");
    }
    if (est.energy) o["energy_kWh"] = est.energy->raw() / 3.6e6;
    if (band != nullptr) {
      // A time scales with measured/predicted time, a rate with its inverse.
      auto times = [&](double v) { return ordered_json::array({v * band->p10, v * band->p90}); };
      o["step_time_s_band"] = times(est.step_time.raw());
      o["tokens_per_s_band"] = {est.tokens_per_s / band->p90, est.tokens_per_s / band->p10};
      if (est.time_to_train) o["time_to_train_s_band"] = times(est.time_to_train->raw());
      if (est.gpu_hours) o["gpu_hours_band"] = times(*est.gpu_hours);
      if (est.cost) o["cost_usd_band"] = times(est.cost->raw());
      o["band"] = {{"regime", band->regime}, {"cases", band->cases}, {"p10", band->p10}, {"p50", band->p50},
                   {"p90", band->p90}, {"fallback", band->fallback}};
    }
  }
  if (explain && !est.derivation.empty()) o["derivation"] = derivation_json(est.derivation);
  return o;
}

namespace {

/// The error band of a training estimate's regime, from <data>/accuracy/bands.json (absent file: no band).
std::optional<model::Band> training_band(const GlobalOptions& g, const model::TrainingSystem& sys,
                                         const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                         Diagnostics& diags) {
  const auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return std::nullopt;
  const auto cases = load_bands(*dir, diags);
  if (!cases) return std::nullopt;
  const model::Regime r{"train", model::generation_of(sys.gpu->family), arch.moe.has_value() ? "moe" : "dense",
                        model::scale_bucket(plan.par.gpus(), sys.node ? sys.node->gpus : 1)};
  return model::band_for(*cases, r);
}

/// --timeline / --memory-timeline: the step or memory timeline of the plan instead of the report. Exit 0 (3 when the
/// plan is infeasible: the timeline is still printed), 2 when the plan cannot be laid out.
int run_timeline(const ResolvedTraining& r, const model::TrainingEstimate& est, bool memory, TimelineFormat tf,
                 const model::TextLoader& loader, int loader_workers) {
  const auto& arch = r.arch;
  const std::string title = fmt::format("{} on {} × {}: {}", arch.name.empty() ? arch.id : arch.name, r.plan.par.gpus(),
                                        r.sys.gpu->info.name, layout_text(r.plan));
  const char* flag = memory ? "--memory-timeline" : "--timeline";
  if (memory) {
    const model::MemoryTimeline m = model::training_memory_timeline(arch, r.plan, r.sys);
    if (!m.ok) {
      Diagnostics d;
      d.error("", flag, "cannot lay out this plan: " + m.error);
      return report(d);
    }
    out(tf == TimelineFormat::json ? json_text(memory_timeline_json(m))
        : tf == TimelineFormat::svg ? memory_timeline_svg(m, "Memory timeline — " + title)
                                    : memory_timeline_text(m));
  } else {
    const model::StepTimeline t = model::training_timeline(arch, r.plan, r.sys, loader, loader_workers);
    if (!t.ok) {
      Diagnostics d;
      d.error("", flag, "cannot lay out this plan: " + t.error);
      return report(d);
    }
    out(tf == TimelineFormat::json ? json_text(timeline_json(t))
        : tf == TimelineFormat::svg ? timeline_svg(t, title)
                                    : timeline_text(t));
  }
  return est.feasibility.ok ? kExitOk : kExitInfeasible;
}

}  // namespace

int run_single(const GlobalOptions& g, const wl_io::TrainingScenario& s, const ResolvedTraining& r,
               const std::optional<std::pair<bool, TimelineFormat>>& timeline, const model::TextLoader& loader,
               int loader_workers) {
  const auto& sys = r.sys;
  const auto& arch = r.arch;
  const auto& plan = r.plan;
  const auto& par = plan.par;
  const auto& pre = r.pre;

  const Format fmt_ = parse_format(g.format);
  model::TrainingEstimate est;
  if (pre.ok) est = model::estimate_training(arch, plan, sys, g.explain ? Explain::on : Explain::off);
  else est.feasibility = pre;
  Diagnostics band_diags;
  const auto band = training_band(g, sys, arch, plan, band_diags);
  if (band_diags.has_errors()) return report(band_diags);
  const model::Band* bp = band ? &*band : nullptr;
  if (timeline) {
    if (!pre.ok) {
      Diagnostics d;
      d.error("", timeline->first ? "--memory-timeline" : "--timeline",
              "cannot lay out this plan: " + (pre.reasons.empty() ? std::string("invalid layout") : pre.reasons.front()));
      return report(d);
    }
    return run_timeline(r, est, timeline->first, timeline->second, loader, loader_workers);
  }

  if (fmt_ == Format::json || fmt_ == Format::csv) {
    if (fmt_ == Format::json) {
      out(json_text(estimate_json(arch, sys, plan, est, g.explain, bp)));
    } else {
      Table t;
      t.columns = {{"model", "model"}, {"gpu", "gpu"}, {"gpus", "gpus", true}, {"tp", "tp", true}, {"pp", "pp", true},
                   {"dp", "dp", true}, {"cp", "cp", true}, {"feasible", "feasible"}, {"step_time_s", "step s", true},
                   {"tokens_per_s", "tokens/s", true}, {"mfu", "MFU", true}, {"peak_bytes_per_gpu", "peak B/GPU", true},
                   {"time_to_train_s", "time to train s", true}, {"cost_usd", "cost $", true}};
      auto num = [](double v) { return fmt::format("{:.10g}", v); };
      t.rows.push_back({arch.id, sys.gpu->info.id, std::to_string(par.gpus()), std::to_string(par.tp),
                        std::to_string(par.pp), std::to_string(par.dp), std::to_string(par.cp),
                        est.feasibility.ok ? "true" : "false", est.step_time.raw() > 0 ? num(est.step_time.raw()) : "",
                        est.step_time.raw() > 0 ? num(est.tokens_per_s) : "", est.step_time.raw() > 0 ? num(est.mfu) : "",
                        est.step_time.raw() > 0 ? num(est.memory.total.raw()) : "",
                        est.time_to_train ? num(est.time_to_train->raw()) : "", est.cost ? num(est.cost->raw()) : ""});
      out(t.render(Format::csv));
    }
    return est.feasibility.ok ? kExitOk : kExitInfeasible;
  }

  const long long shown_gpus = s.gpus && !pre.ok ? *s.gpus : par.gpus();
  out(render_sections(training_sections(arch, shown_gpus, sys, plan, est, bp), fmt_));
  if (g.explain && !est.derivation.empty()) out(render_derivation(est.derivation, fmt_));
  return est.feasibility.ok ? kExitOk : kExitInfeasible;
}

}  // namespace gpuplan::cli::train_cmd
