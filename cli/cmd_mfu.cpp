// `gpuplan mfu`: MFU and HFU of a training step that was measured (its time, or its token throughput), with the
// model FLOPs of the same plan as `gpuplan train` counts them and the GPU's dense peak at the plan's precision, and
// the gap to the model's own prediction of that step. The plan comes from the training scenario keys (a --scenario
// file and/or the layout flags below), decoded and resolved exactly as `train` does.
#include <cmath>
#include <map>
#include <memory>

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
#include "gpuplan/wl_io/scenario_io.hpp"
#include "gpuplan/app/resolve.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

struct MfuFlags {
  std::string scenario;
  std::optional<std::string> model, gpu, node, cluster, precision, recompute, kernels, attention_kernel;
  std::optional<long long> gpus, tp, pp, dp, cp, ep, micro_batch, global_batch, seq, zero;
  std::optional<bool> flash_attention, sequence_parallel;
  std::optional<double> step_s, tokens_per_s, tokens_per_s_per_gpu;
  bool no_calibration = false;
};

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
  auto put = [&](const char* key, const char* flag, const auto& v) {
    if (v) {
      j[key] = *v;
      origin[key] = flag;
    }
  };
  put("model", "--model", f.model);
  put("gpu", "--gpu", f.gpu);
  put("node", "--node", f.node);
  put("cluster", "--cluster", f.cluster);
  put("precision", "--precision", f.precision);
  put("recompute", "--recompute", f.recompute);
  put("kernels", "--kernels", f.kernels);
  put("attention_kernel", "--attention-kernel", f.attention_kernel);
  put("gpus", "--gpus", f.gpus);
  put("tp", "--tp", f.tp);
  put("pp", "--pp", f.pp);
  put("dp", "--dp", f.dp);
  put("cp", "--cp", f.cp);
  put("ep", "--ep", f.ep);
  put("micro_batch", "--micro-batch", f.micro_batch);
  put("global_batch", "--global-batch", f.global_batch);
  put("seq", "--seq", f.seq);
  put("zero", "--zero", f.zero);
  put("flash_attention", "--flash", f.flash_attention);
  put("sequence_parallel", "--sp", f.sequence_parallel);
  auto sc = wl_io::decode_training_scenario(j, file, origin);
  if (!sc.ok()) return report(sc.diagnostics());
  auto db = hw_io::load_hardware_db(*dir);
  if (!db.ok()) return report(db.diagnostics());
  auto lib = wl_io::load_model_library(*dir);
  if (!lib.ok()) return report(lib.diagnostics());
  auto where = [&](const std::string& key) {
    auto it = origin.find(key);
    if (it != origin.end()) return it->second;
    return j.contains(key) ? file + ": /" + key : "--" + key;
  };
  auto r = resolve_training(sc.value(), j.contains("global_batch"), *db, *lib, where, diags);
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
  c->add_option("--model,-m", f->model, "model: library id or path to a config.json");
  c->add_option("--gpu", f->gpu, "GPU id or alias");
  c->add_option("--node", f->node, "node id");
  c->add_option("--cluster", f->cluster, "cluster id");
  c->add_option("--gpus", f->gpus, "total GPUs");
  c->add_option("--tp", f->tp, "tensor parallel");
  c->add_option("--pp", f->pp, "pipeline parallel");
  c->add_option("--dp", f->dp, "data parallel (default: gpus / (tp·pp·cp))");
  c->add_option("--cp", f->cp, "context parallel");
  c->add_option("--ep", f->ep, "expert parallel");
  c->add_option("--micro-batch", f->micro_batch, "sequences per micro-batch");
  c->add_option("--global-batch", f->global_batch, "sequences per step");
  c->add_option("--seq", f->seq, "sequence length");
  c->add_option("--precision", f->precision, "bf16, fp16, fp8, tf32, fp32: the peak MFU is measured against");
  c->add_option("--recompute", f->recompute, "none, selective, full (full adds the recomputed forward to HFU)");
  c->add_option("--zero", f->zero, "ZeRO / FSDP stage 0-3");
  c->add_option("--flash", f->flash_attention, "fused attention (default true)");
  c->add_option("--sp", f->sequence_parallel, "sequence parallelism (default: on when TP > 1)");
  c->add_option("--kernels", f->kernels, "fused (default) or eager");
  c->add_option("--attention-kernel", f->attention_kernel, "fa2 or fa3");
  c->add_flag("--no-calibration", f->no_calibration,
              "ignore data/calibration/<gpu>/profile.json for the predicted step");
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation tree");
  c->callback([&g, f, &rc] { rc = run_mfu(g, *f); });
}

}  // namespace gpuplan::cli
