// `gpuplan mfu`: MFU and HFU of a training step that was measured (its time, or its token throughput), with the
// model FLOPs of the same plan as `gpuplan train` counts them and the GPU's dense peak at the plan's precision, and
// the gap to the model's own prediction of that step. The plan comes from the training scenario keys (a --scenario
// file and/or the layout flags below), decoded and resolved exactly as `train` does.
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/utilisation.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "scenario_flags.hpp"
#include "gpuplan/app/resolve.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

struct MfuFlags {
  std::string scenario;
  ScenarioFlags keys;  ///< the training keys that say what ran (mfu_keys), from the training field table
  std::optional<double> step_s, tokens_per_s, tokens_per_s_per_gpu;
  bool no_calibration = false;
};

/// The training scenario keys `gpuplan mfu` takes: the model, the hardware, the layout and what sets the FLOPs.
const std::set<std::string>& mfu_keys() {
  static const std::set<std::string> k{"model", "gpu", "node", "cluster", "gpus", "tp", "pp", "dp", "cp", "ep",
                                       "micro_batch", "global_batch", "seq", "precision", "recompute", "zero",
                                       "flash_attention", "sequence_parallel", "kernels", "attention_kernel"};
  return k;
}

int run_mfu(const GlobalOptions& g, const MfuFlags& f) {
  Diagnostics diags;
  const int given = int(f.step_s.has_value()) + int(f.tokens_per_s.has_value()) + int(f.tokens_per_s_per_gpu.has_value());
  if (given != 1) {
    diags.error("", "--measured-step-s",
                given == 0 ? "no measurement given: --measured-step-s S, --measured-tokens-per-s T (all GPUs) or "
                             "--measured-tokens-per-s-per-gpu T"
                           : "give exactly one of --measured-step-s, --measured-tokens-per-s and "
                             "--measured-tokens-per-s-per-gpu");
    return report(diags);
  }
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  auto scenario = read_training_scenario(f.scenario, diags);
  if (!scenario) return report(diags);
  nlohmann::json j = std::move(*scenario);
  const std::string file = f.scenario.empty() ? "(flags)" : f.scenario;
  std::map<std::string, std::string> origin;
  f.keys.overlay(j, origin);
  auto sc = wl_io::decode_training_scenario(j, file, origin);
  if (!sc.ok()) return report(sc.diagnostics());
  const auto ws = app::load_workspace(*dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  auto where = [&](const std::string& key) {
    auto it = origin.find(key);
    if (it != origin.end()) return it->second;
    return j.contains(key) ? file + ": /" + key : wl_io::flag_of_key(wl_io::training_fields(), key);
  };
  auto r = resolve_training(sc.value(), j.contains("global_batch"), db, lib, where, diags);
  if (!r) return report(diags);
  if (!load_calibration(*dir, r->sys, f.no_calibration, diags)) return report(diags);
  report(diags);  // notes

  model::TrainingEstimate est;
  if (r->pre.ok) est = model::estimate_training(r->arch, r->plan, r->sys, g.explain ? Explain::on : Explain::off);
  else est.feasibility = r->pre;
  const Format fmt_ = parse_format(g.format);
  if (est.model_flops_per_step.raw() <= 0) {
    // The plan itself does not hold (divisibility, topology): no FLOPs to count.
    if (fmt_ == Format::json) {
      out(json_text(ordered_json{{"feasible", false}, {"reasons", est.feasibility.reasons}}));
    } else {
      std::string s = "The plan cannot run, so its FLOPs are not counted:\n";
      for (const auto& x : est.feasibility.reasons) s += "  - " + x + "\n";
      out(s);
    }
    return kExitInfeasible;
  }
  const auto& plan = r->plan;
  const double gpus = double(plan.par.gpus());
  const double tokens_per_step = double(plan.global_batch) * double(plan.seq_len);
  const u::FlopRate peak = model::make_device(*r->sys.gpu).peak(plan.precision.compute);
  std::optional<u::Seconds> step;
  std::optional<double> tps;
  if (f.step_s) step = u::Seconds(*f.step_s);
  if (f.tokens_per_s) tps = *f.tokens_per_s;
  if (f.tokens_per_s_per_gpu) tps = *f.tokens_per_s_per_gpu * gpus;
  const auto m = model::measured_utilisation(est, tokens_per_step, gpus, peak, step, tps,
                                             g.explain ? Explain::on : Explain::off);
  const std::string precision(hw::to_string(plan.precision.compute));
  std::vector<std::string> notes;
  if (!est.memory.fits)
    notes.push_back("the model says this plan does not fit in memory (see `gpuplan train`); the FLOPs are counted "
                    "all the same");
  if (f.tokens_per_s_per_gpu)
    notes.push_back(fmt::format("tokens/s of all GPUs = {} per GPU × {} GPUs", plain_number(*f.tokens_per_s_per_gpu),
                                plain_number(gpus)));
  if (plan.recompute == wl::Recompute::selective)
    notes.push_back("selective recompute repeats the attention core only; HFU counts recomputation under full "
                    "recompute (the forward of every layer), as Megatron-LM's 96·B·s·l·h² does");
  if (plan.recompute == wl::Recompute::selective_op)
    notes.push_back("selective_op (TorchTitan's op-level policy) repeats wk, wo and w3 of every layer; HFU counts "
                    "recomputation only under full recompute, so these FLOPs are not in it");

  if (fmt_ == Format::json) {
    ordered_json o;
    o["model"] = r->arch.id;
    o["gpu"] = r->sys.gpu->info.id;
    o["gpus"] = gpus;
    o["precision"] = precision;
    o["recompute"] = recompute_key(plan.recompute);
    o["global_batch"] = plan.global_batch;
    o["seq"] = plan.seq_len;
    o["tokens_per_step"] = tokens_per_step;
    o["measured_step_time_s"] = m.step_time.raw();
    o["measured_tokens_per_s"] = m.tokens_per_s;
    o["measured_tokens_per_s_per_gpu"] = m.tokens_per_s / gpus;
    // Which N the 6·N counts: the weights a token multiplies (LM head included; embedding lookups, position tables,
    // norms and biases are not FLOPs), beside the model's total, for comparing with sources that count N = total.
    o["params_total"] = model::parameter_counts(r->arch, Explain::off).total;
    o["matmul_params"] = model::flops_per_token(r->arch, plan.seq_len, Explain::off).matmul_params;
    o["model_flops_per_token"] = m.model_flops_per_step.raw() / tokens_per_step;
    o["model_flops_per_step"] = m.model_flops_per_step.raw();
    o["hardware_flops_per_step"] = m.hardware_flops_per_step.raw();
    o["peak_flops_per_gpu"] = m.peak.raw();
    o["peak_basis"] = fmt::format("dense {} peak of {} (GPU file /dense_peak)", precision, r->sys.gpu->info.id);
    o["model_tflops_per_gpu"] = m.achieved_tflops_per_gpu;
    o["mfu"] = m.mfu;
    o["hfu"] = m.hfu;
    o["predicted_step_time_s"] = m.predicted_step_time.raw();
    o["predicted_mfu"] = m.predicted_mfu;
    o["gap"] = m.gap;
    o["feasible"] = est.feasibility.ok;
    o["reasons"] = est.feasibility.reasons;
    o["notes"] = notes;
    if (g.explain) o["derivation"] = derivation_json(m.derivation);
    out(json_text(o));
    return kExitOk;
  }
  if (fmt_ == Format::csv) {
    Table t;
    t.columns = {{"model", "model"}, {"gpu", "gpu"}, {"gpus", "GPUs", true}, {"precision", "precision"},
                 {"measured_step_time_s", "step (s)", true}, {"measured_tokens_per_s", "tokens/s", true},
                 {"model_tflops_per_gpu", "model TFLOP/s per GPU", true}, {"mfu", "MFU", true}, {"hfu", "HFU", true},
                 {"predicted_step_time_s", "predicted step (s)", true}, {"predicted_mfu", "predicted MFU", true},
                 {"gap", "gap", true}};
    t.rows.push_back({r->arch.id, r->sys.gpu->info.id, plain_number(gpus), precision,
                      fmt::format("{:.6g}", m.step_time.raw()), fmt::format("{:.6g}", m.tokens_per_s),
                      fmt::format("{:.6g}", m.achieved_tflops_per_gpu), fmt::format("{:.6g}", m.mfu),
                      fmt::format("{:.6g}", m.hfu), fmt::format("{:.6g}", m.predicted_step_time.raw()),
                      fmt::format("{:.6g}", m.predicted_mfu), fmt::format("{:.6g}", m.gap)});
    out(t.render(fmt_));
    return kExitOk;
  }
  std::vector<Section> sec;
  Section head{fmt::format("{} on {} × {}", r->arch.name.empty() ? r->arch.id : r->arch.name, plain_number(gpus),
                           r->sys.gpu->info.name),
               {}};
  head.rows = {{"plan", fmt::format("{} × {} tokens per step, {}, recompute {}", plan.global_batch,
                                    u::format_count(double(plan.seq_len)), precision, recompute_key(plan.recompute))},
               {"measured", fmt::format("step {} = {} tokens/s ({} per GPU)", u::format(m.step_time),
                                        u::format_count(m.tokens_per_s), u::format_count(m.tokens_per_s / gpus))}};
  sec.push_back(head);
  Section util{"Utilisation of the measured step", {}};
  util.rows = {{"model FLOPs per step", fmt::format("{} (6·N + attention, no recompute)", u::format(m.model_flops_per_step))},
               {"hardware FLOPs per step", fmt::format("{} (recomputation included)", u::format(m.hardware_flops_per_step))},
               {"peak per GPU", fmt::format("{} dense {} (not the 2:4-sparse figure)", u::format(m.peak), precision)},
               {"model TFLOP/s per GPU", fmt::format("{:.1f}", m.achieved_tflops_per_gpu)},
               {"MFU", u::format(u::Ratio(m.mfu))},
               {"HFU", u::format(u::Ratio(m.hfu))}};
  sec.push_back(util);
  Section gap{"Against the model's prediction (gpuplan train)", {}};
  gap.rows = {{"predicted step", u::format(m.predicted_step_time)},
              {"predicted MFU", u::format(u::Ratio(m.predicted_mfu))},
              {"gap", fmt::format("{:+.1f}% (predicted / measured step time − 1)", m.gap * 100.0)}};
  sec.push_back(gap);
  if (!notes.empty() || !est.feasibility.ok) {
    Section n{"Notes", {}};
    for (const auto& x : est.feasibility.reasons) n.rows.emplace_back("-", x);
    for (const auto& x : notes) n.rows.emplace_back("-", x);
    sec.push_back(n);
  }
  out(render_sections(sec, fmt_));
  if (g.explain) out(render_derivation(m.derivation, fmt_));
  return kExitOk;
}

}  // namespace

void register_mfu(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<MfuFlags>();
  auto* c = app.add_subcommand("mfu", "MFU and HFU of a measured training step (time or tokens/s), and the gap to "
                                      "the model's prediction");
  c->add_option("--measured-step-s", f->step_s, "measured time of one optimizer step, seconds")
      ->check(CLI::Range(1e-9, 1e9));
  c->add_option("--measured-tokens-per-s", f->tokens_per_s, "measured training throughput of all GPUs, tokens/s")
      ->check(CLI::Range(1e-9, 1e15));
  c->add_option("--measured-tokens-per-s-per-gpu", f->tokens_per_s_per_gpu, "measured throughput per GPU, tokens/s")
      ->check(CLI::Range(1e-9, 1e15));
  c->add_option("--scenario", f->scenario, "training scenario JSON (keys of docs/scenario.md); flags override it");
  // The table's flags, precision and recompute with what they mean for MFU.
  const ScenarioFlags::Own own{
      {"precision",
       [f, c](const wl_io::ScenarioField& x) {
         f->keys.add_field(*c, x, "bf16, fp16, fp8, tf32, fp32: the peak MFU is measured against");
       }},
      {"recompute", [f, c](const wl_io::ScenarioField& x) {
         f->keys.add_field(*c, x, "none, selective, full (full adds the recomputed forward to HFU)");
       }}};
  f->keys.add(*c, wl_io::training_fields(), own,
              [](const wl_io::ScenarioField& x) { return mfu_keys().count(x.key()) == 1; });
  c->add_flag("--no-calibration", f->no_calibration,
              "ignore data/calibration/<gpu>/profile.json for the predicted step");
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation tree");
  c->callback([&g, f, &rc] { rc = run_mfu(g, *f); });
}

}  // namespace gpuplan::cli
