#include "validate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/roofline.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "common.hpp"  // the application layer's names (resolution, drills, tables) unqualified
#include "gpuplan/app/drills.hpp"
#include "gpuplan/app/resolve.hpp"

namespace gpuplan::cli {

namespace {
double predicted_metric(const std::string& metric, const std::string& convention, const model::TrainingEstimate& e,
                        const wl::TrainingPlan& plan, bool& known) {
  known = true;
  const double gpus = double(plan.par.gpus());
  if (metric == "mfu") return e.mfu;
  if (metric == "hfu") return e.hfu;
  if (metric == "tokens_per_s") return e.tokens_per_s;
  if (metric == "tokens_per_s_per_gpu") return e.tokens_per_s / gpus;
  if (metric == "step_time_s") return e.step_time.raw();
  if (metric == "gpu_hours") {
    // GPU-hours of a whole run: the case's scenario gives the token budget (tokens).
    known = e.gpu_hours.has_value();
    return e.gpu_hours.value_or(0.0);
  }
  if (metric == "peak_allocated_bytes") {
    // What the framework's caching allocator reports: model states, activations and logits — not the CUDA context,
    // NCCL's own buffers or fragmentation.
    const auto& m = e.memory;
    return (m.weights + m.gradients + m.master_weights + m.optimizer_states + m.activations + m.logits).raw();
  }
  if (metric == "tflops_per_gpu") {
    // Sources that count recomputation (Megatron's eq. 3) report hardware FLOPs; others model FLOPs.
    const bool hw_flops = convention.find("recompute") != std::string::npos && convention.find("excl") == std::string::npos;
    const double f = (hw_flops ? e.hardware_flops_per_step : e.model_flops_per_step).raw();
    return f / e.step_time.raw() / gpus / 1e12;
  }
  known = false;
  return 0;
}

/// A case file as diagnostics name it: data/validation/<file> for the shipped sets, the path from data/validation/ on
/// for the whole-host runs' files under measured/<gpu>/, the path as given otherwise (a test's fixture).
std::string shown_path(const std::string& file) {
  const std::filesystem::path p(file);
  if (p.parent_path().filename() == "validation") return "data/validation/" + p.filename().string();
  const auto k = file.rfind("data/validation/");
  return k == std::string::npos ? file : file.substr(k);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Median and max |error| and the shares within 10% and 25% over the cases that have an error.
void summarise(ValidationSummary& sum) {
  {
    std::vector<double> cal, same;
    for (const auto& c : sum.cases)
      if (c.error_calibrated && c.error) {
        cal.push_back(std::fabs(*c.error_calibrated));
        same.push_back(std::fabs(*c.error));
      }
    sum.evaluated_calibrated = int(cal.size());
    sum.median_abs_error_calibrated = median_of(cal);
    sum.median_abs_error_same_cases = median_of(same);
    sum.max_abs_error_calibrated = cal.empty() ? 0 : *std::max_element(cal.begin(), cal.end());
    sum.max_abs_error_same_cases = same.empty() ? 0 : *std::max_element(same.begin(), same.end());
  }
  std::vector<double> errs;
  for (const auto& c : sum.cases)
    if (c.error) errs.push_back(std::fabs(*c.error));
  std::sort(errs.begin(), errs.end());
  sum.evaluated = static_cast<int>(errs.size());
  if (errs.empty()) return;
  const std::size_t n = errs.size();
  sum.median_abs_error = n % 2 ? errs[n / 2] : 0.5 * (errs[n / 2 - 1] + errs[n / 2]);
  sum.max_abs_error = errs.back();
  sum.within_10 = double(std::count_if(errs.begin(), errs.end(), [](double e) { return e <= 0.10; })) / double(n);
  sum.within_25 = double(std::count_if(errs.begin(), errs.end(), [](double e) { return e <= 0.25; })) / double(n);
  // Per dev case: the rows of one dev case (a sweep) scored by their median |error|.
  std::map<std::string, std::vector<double>> by_dev;
  for (const auto& c : sum.cases)
    if (c.error && !c.dev_case.empty()) by_dev[c.dev_case].push_back(std::fabs(*c.error));
  std::vector<double> dev;
  for (auto& [k, v] : by_dev) dev.push_back(median_of(v));
  sum.dev_cases_evaluated = int(dev.size());
  sum.dev_case_median_abs_error = median_of(dev);
  sum.dev_case_max_abs_error = dev.empty() ? 0 : *std::max_element(dev.begin(), dev.end());
  sum.dev_cases_within_15 = int(std::count_if(dev.begin(), dev.end(), [](double e) { return e <= 0.15; }));
}

std::string layout_text(const wl::TrainingPlan& p) {
  return fmt::format("TP{} PP{}{} DP{}{}{} mb{} gb{} s{}", p.par.tp, p.par.pp,
                     p.schedule == wl::PipelineSchedule::interleaved ? fmt::format("v{}", p.par.virtual_stages) : "",
                     p.par.dp, p.par.cp > 1 ? fmt::format(" CP{}", p.par.cp) : "",
                     p.par.ep > 1 ? fmt::format(" EP{}", p.par.ep) : "", p.micro_batch, p.global_batch, p.seq_len);
}
}  // namespace

Result<ValidationSummary> validate_training(const std::string& cases_file, const hw::HardwareDb& db,
                                            const wl_io::ModelLibrary& lib, const std::string& data_dir) {
  Diagnostics diags;
  auto text = json_io::read_text_file(cases_file, diags);
  if (!text) return Result<ValidationSummary>(std::move(diags));
  auto j = json_io::parse(*text, cases_file, diags);
  if (!j) return Result<ValidationSummary>(std::move(diags));
  if (!j->is_object() || !j->contains("cases") || !(*j)["cases"].is_array()) {
    diags.error(cases_file, "/cases", "expected an object with a 'cases' array");
    return Result<ValidationSummary>(std::move(diags));
  }
  ValidationSummary sum;
  const auto& cases = (*j)["cases"];
  // Messages name the file relative to the data directory, so that the generated accuracy report is the same on
  // every machine.
  const std::string shown = shown_path(cases_file);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string ptr = fmt::format("/cases/{}", i);
    CaseResult r;
    r.id = c.value("id", std::string{});
    r.source = c.value("source", std::string{});
    r.note = c.value("notes", std::string{});
    if (!c.contains("measured") || !c["measured"].is_object()) {
      diags.error(cases_file, ptr + "/measured", "missing 'measured' object");
      continue;
    }
    const auto& meas = c["measured"];
    r.metric = meas.value("metric", std::string{});
    r.unit = meas.value("unit", std::string{});
    r.convention = meas.value("flops_convention", std::string{});
    r.measured = meas.contains("value") && meas["value"].is_number() ? meas["value"].get<double>() : 0.0;
    if (!c.contains("scenario") || !c["scenario"].is_object() || r.note.find("underspecified") != std::string::npos) {
      r.status = "not runnable";
      sum.cases.push_back(r);
      continue;
    }
    const auto& scen = c["scenario"];
    r.model = scen.value("model", std::string{});
    r.gpu = scen.value("gpu", scen.value("node", scen.value("cluster", std::string{})));
    Diagnostics case_diags;
    auto decoded = wl_io::decode_training_scenario(scen, shown);
    if (!decoded.ok()) {
      for (auto d : decoded.diagnostics().items()) {
        d.pointer = ptr + "/scenario" + d.pointer;
        diags.add(d);
      }
      continue;
    }
    auto where = [&](const std::string& key) { return shown + ": " + ptr + "/scenario/" + key; };
    auto resolved = resolve_training(decoded.value(), scen.contains("global_batch"), db, lib, where, case_diags);
    if (!resolved) {
      r.status = "not runnable";
      r.note = case_diags.to_string();
      sum.cases.push_back(r);
      continue;
    }
    r.layout = layout_text(resolved->plan);
    r.regime = {"train", model::generation_of(resolved->sys.gpu->family), resolved->arch.moe.has_value() ? "moe" : "dense",
                model::scale_bucket(resolved->plan.par.gpus(), resolved->sys.node ? resolved->sys.node->gpus : 1)};
    model::TrainingEstimate est;
    if (resolved->pre.ok) est = model::estimate_training(resolved->arch, resolved->plan, resolved->sys, Explain::off);
    else est.feasibility = resolved->pre;
    if (est.step_time.raw() <= 0) {
      r.status = "infeasible";
      r.note = est.feasibility.reasons.empty() ? "" : est.feasibility.reasons.front();
      sum.cases.push_back(r);
      continue;
    }
    bool known = false;
    const double mfu_scale = r.unit.find('%') != std::string::npos && (r.metric == "mfu" || r.metric == "hfu") ? 100.0 : 1.0;
    const double p = predicted_metric(r.metric, r.convention, est, resolved->plan, known) * mfu_scale;
    if (!known || r.measured <= 0) {
      r.status = "not runnable";
      r.note = "metric '" + r.metric + "' not modelled";
      sum.cases.push_back(r);
      continue;
    }
    r.predicted = p;
    r.error = p / r.measured - 1.0;
    if (!data_dir.empty() && resolved->pre.ok) {
      model::TrainingSystem cal = resolved->sys;
      Diagnostics ignore;
      if (load_calibration(data_dir, cal, false, ignore) && cal.efficiency) {
        const auto ec = model::estimate_training(resolved->arch, resolved->plan, cal, Explain::off);
        bool k2 = false;
        const double pc = predicted_metric(r.metric, r.convention, ec, resolved->plan, k2) * mfu_scale;
        if (k2 && ec.step_time.raw() > 0) {
          r.predicted_calibrated = pc;
          r.error_calibrated = pc / r.measured - 1.0;
        }
      }
    }
    r.status = est.feasibility.ok ? "ok" : "ok (model says it does not fit)";
    if (!est.feasibility.ok) r.note = est.feasibility.reasons.front();
    // The same case without issue #22's structure (validate_before.cpp), priced the same way.
    const auto predict = [&](const json_io::Json& b) {
      BeforePrediction bp;
      auto dec = wl_io::decode_training_scenario(b, shown);
      if (!dec.ok()) {
        bp.why = dec.diagnostics().items().empty() ? "not expressible" : dec.diagnostics().items().front().message;
        return bp;
      }
      Diagnostics ignore;
      auto res = resolve_training(dec.value(), b.contains("global_batch"), db, lib, where, ignore);
      if (!res) {
        bp.why = ignore.items().empty() ? "not expressible" : ignore.items().front().message;
        return bp;
      }
      bp.layout = layout_text(res->plan);
      if (!res->pre.ok) {
        bp.why = res->pre.reasons.empty() ? "refused" : res->pre.reasons.front();
        return bp;
      }
      const auto eb = model::estimate_training(res->arch, res->plan, res->sys, Explain::off);
      bool kb = false;
      const double pb = predicted_metric(r.metric, r.convention, eb, res->plan, kb) * mfu_scale;
      if (!kb || eb.step_time.raw() <= 0) bp.why = eb.feasibility.reasons.empty() ? "not priced" : eb.feasibility.reasons.front();
      else bp.value = pb;
      if (bp.value && !eb.feasibility.ok) bp.why = eb.feasibility.reasons.front();  // "does not fit: needs …"
      return bp;
    };
    predict_before(scen, c.contains("before") && c["before"].is_object() ? &c["before"] : nullptr, resolved->plan,
                   predict, r);
    sum.cases.push_back(r);
  }
  summarise(sum);
  if (diags.has_errors()) return Result<ValidationSummary>(std::move(diags));
  return Result<ValidationSummary>(std::move(sum), std::move(diags));
}

Result<ValidationSummary> validate_textbook(const std::string& cases_file, const wl_io::ModelLibrary& lib) {
  Diagnostics diags;
  auto text = json_io::read_text_file(cases_file, diags);
  if (!text) return Result<ValidationSummary>(std::move(diags));
  auto j = json_io::parse(*text, cases_file, diags);
  if (!j) return Result<ValidationSummary>(std::move(diags));
  ValidationSummary sum;
  const std::string shown = shown_path(cases_file);
  if (!j->contains("cases") || !(*j)["cases"].is_array()) {
    diags.error(shown, "/cases", "expected a 'cases' array");
    return Result<ValidationSummary>(std::move(diags));
  }
  for (std::size_t i = 0; i < (*j)["cases"].size(); ++i) {
    const auto& c = (*j)["cases"][i];
    CaseResult r;
    r.id = c.value("id", std::string{});
    r.source = "textbook.md " + r.id;
    r.layout = c.value("question", std::string{});
    const std::string kind = c.value("kind", std::string{});
    const auto& in = c.contains("inputs") ? c["inputs"] : json_io::Json::object();
    const auto& ex = c.contains("expected") ? c["expected"] : json_io::Json::object();
    r.metric = kind;
    r.unit = ex.value("unit", std::string{});
    r.measured = ex.value("value", 0.0);
    // The same computation as the interview drills (drills.hpp), in the case's unit.
    const AnswerUnit* unit = find_unit(r.unit);
    if (unit == nullptr) diags.error(shown, fmt::format("/cases/{}/expected/unit", i), fmt::format("unknown unit '{}'", r.unit));
    const DrillContext ctx{&lib, nullptr, r.source};
    const auto a = evaluate_kind(kind, in, ctx, shown, fmt::format("/cases/{}/inputs", i), diags);
    if (a && unit != nullptr && a->dim != unit->dim)
      diags.error(shown, fmt::format("/cases/{}/expected/unit", i),
                  fmt::format("'{}' measures {}, but kind '{}' computes {}", r.unit, to_string(unit->dim), kind,
                              to_string(a->dim)));
    else if (a && unit != nullptr) {
      const double p = a->value / unit->scale;
      r.predicted = p;
      r.error = r.measured != 0 ? p / r.measured - 1.0 : 0.0;
      const double tol = ex.value("abs_tolerance", 0.0);
      r.status = std::fabs(p - r.measured) <= tol ? "ok" : "outside the textbook's precision";
      r.note = fmt::format("tolerance ±{} {}", tol, r.unit);
    }
    sum.cases.push_back(r);
  }
  summarise(sum);
  if (diags.has_errors()) return Result<ValidationSummary>(std::move(diags));
  return Result<ValidationSummary>(std::move(sum), std::move(diags));
}

void summarise_validation(ValidationSummary& sum) { summarise(sum); }

Result<ValidationSummary> validate_collectives(const std::string& data_dir, const hw::HardwareDb& db,
                                               const std::string& measured_root) {
  namespace fs = std::filesystem;
  Diagnostics diags;
  ValidationSummary sum;
  const fs::path root = fs::path(data_dir) / "calibration";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return Result<ValidationSummary>(std::move(sum), std::move(diags));
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    const std::string gpu_id = dir.filename().string();
    const hw::GpuSpec* gpu = db.find_gpu(gpu_id);
    if (gpu == nullptr) continue;
    model::TrainingSystem sys;
    sys.db = &db;
    sys.gpu = gpu;
    for (const auto& n : db.nodes)
      if (n.gpu == gpu->info.id) {
        sys.node = &n;
        break;
      }
    if (sys.node == nullptr) continue;
    // The reference cases are the held-out sweeps (data/validation/measured/<gpu>/heldout-collectives-*.json): the
    // collectives bench run after the calibration's own sweeps and never fitted, at sizes between the calibration's
    // (offset half a step) and at the same sizes again (a repeat).
    const fs::path held =
        (measured_root.empty() ? fs::path(data_dir) / "validation" / "measured" : fs::path(measured_root)) / gpu_id;
    std::vector<fs::path> files;
    if (fs::is_directory(held, ec))
      for (const auto& e : fs::directory_iterator(held, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && name.rfind("heldout-collectives", 0) == 0 && e.path().extension() == ".json")
          files.push_back(e.path());
      }
    if (files.empty()) continue;
    std::sort(files.begin(), files.end());
    model::TrainingSystem cal = sys;
    const bool have_profile = load_calibration(data_dir, cal, false, diags);
    if (!have_profile) return Result<ValidationSummary>(std::move(diags));
    for (const auto& file : files) {
      auto s = calib::read_samples(file.string());
      if (!s.ok()) {
        for (const auto& d : s.diagnostics().items()) diags.add(d);
        continue;
      }
      std::string tag = file.stem().string().substr(std::string("heldout-collectives-").size());
      for (const auto& c : s->collectives) {
        const auto op = model::parse_collective(c.op);
        CaseResult r;
        r.id = fmt::format("{}-{}-{}gpu-{}-{}", gpu_id, c.op, c.ranks, units::format(units::bytes(c.bytes), units::BytePrefix::binary), tag);
        r.source = measured_root.empty() ? "data/validation/measured/" + gpu_id + "/" + file.filename().string()
                                         : file.string();
        r.gpu = gpu_id;
        r.layout = fmt::format("{} GPUs of {}", c.ranks, sys.node->info.id);
        r.metric = "collective_time_s";
        r.unit = "s";
        r.measured = c.median_s;
        if (!op || c.ranks < 2 || c.median_s <= 0) {
          r.status = "not runnable";
          r.note = "unknown op or fewer than 2 ranks";
          sum.cases.push_back(r);
          continue;
        }
        const auto predict = [&](const model::TrainingSystem& sy) {
          return model::collective_cost(*op, units::bytes(c.bytes), model::training_comm_group(c.ranks, 1, sy),
                                        model::CollectiveAlgorithm::automatic, Explain::off)
              .time.raw();
        };
        const double p = predict(sys);
        r.predicted = p;
        r.error = p / r.measured - 1.0;
        if (cal.scale_up_calibration) {
          const double pc = predict(cal);
          r.predicted_calibrated = pc;
          r.error_calibrated = pc / r.measured - 1.0;
        }
        r.status = "ok";
        sum.cases.push_back(r);
      }
    }
  }
  summarise(sum);
  if (diags.has_errors()) return Result<ValidationSummary>(std::move(diags));
  return Result<ValidationSummary>(std::move(sum), std::move(diags));
}

Result<ValidationSummary> validate_inference(const std::string& cases_file, const hw::HardwareDb& db,
                                             const wl_io::ModelLibrary& lib,
                                             std::vector<std::pair<std::string, ValidationSummary>>* by_source,
                                             const std::string& data_dir) {
  namespace u = units;
  Diagnostics diags;
  auto text = json_io::read_text_file(cases_file, diags);
  if (!text) return Result<ValidationSummary>(std::move(diags));
  auto j = json_io::parse(*text, cases_file, diags);
  if (!j) return Result<ValidationSummary>(std::move(diags));
  const std::string shown = shown_path(cases_file);
  if (!j->is_object() || !j->contains("cases") || !(*j)["cases"].is_array()) {
    diags.error(shown, "/cases", "expected an object with a 'cases' array");
    return Result<ValidationSummary>(std::move(diags));
  }
  ValidationSummary sum;
  for (std::size_t i = 0; i < (*j)["cases"].size(); ++i) {
    const auto& c = (*j)["cases"][i];
    const std::string ptr = fmt::format("/cases/{}", i);
    CaseResult r;
    r.id = c.value("id", std::string{});
    r.dev_case = c.value("dev_case", r.id);
    r.source = c.value("source", std::string{});
    r.model = c.value("model", std::string{});
    r.gpu = c.value("gpu", std::string{});
    r.metric = c.value("metric", std::string{});
    const int tp = c.value("tp", 1), pp = c.value("pp", 1), dp = c.value("attention_dp", 1);
    // Attention-DP with wide EP (wide_ep.hpp): EP = dp·tp unless the case says otherwise.
    const int ep = c.value("ep", dp > 1 ? dp * tp : 1);
    const std::string wdt = c.value("weights", std::string("bf16")), kvdt = c.value("kv", std::string("bf16")),
                      cdt = c.value("compute", std::string("bf16"));
    r.layout = fmt::format("{}TP{}{} PP{} w:{} kv:{} {}", dp > 1 ? fmt::format("DP{} ", dp) : "", tp,
                           ep > 1 ? fmt::format(" EP{}", ep) : "", pp, wdt, kvdt, c.value("engine", std::string{}));
    const auto& in = c.contains("inputs") ? c["inputs"] : json_io::Json::object();
    r.measured = c.contains("measured") ? c["measured"].value("value", 0.0) : 0.0;
    r.unit = r.metric.find("_per_s") != std::string::npos ? "tokens/s" : "s";
    r.note = c.value("notes", std::string{});
    if (!c.value("runnable", false)) {
      r.status = "not runnable";
      r.note = c.value("excluded_reason", std::string{});
      sum.cases.push_back(r);
      continue;
    }
    const auto* m = lib.find(r.model);
    const hw::GpuSpec* gpu = db.find_gpu(r.gpu);
    const auto wd = model::parse_store_dtype(wdt), kd = model::parse_store_dtype(kvdt);
    const auto cp = hw::parse_precision(cdt);
    if (m == nullptr) diags.error(shown, ptr + "/model", fmt::format("unknown model '{}'", r.model));
    if (gpu == nullptr) diags.error(shown, ptr + "/gpu", fmt::format("unknown GPU '{}'", r.gpu));
    if (!wd) diags.error(shown, ptr + "/weights", fmt::format("unknown weight dtype '{}'", wdt));
    if (!kd) diags.error(shown, ptr + "/kv", fmt::format("unknown KV dtype '{}'", kvdt));
    if (!cp) diags.error(shown, ptr + "/compute", fmt::format("unknown precision '{}'", cdt));
    // Expert parallelism as the serving model has it: the experts spread over `ep` of the TP ranks (ep divides tp).
    // With attention-DP (wide EP) the experts spread over all dp·tp GPUs.
    const bool ep_ok = ep >= 1 && tp >= 1 && dp >= 1 && (dp > 1 ? ep == dp * tp : tp % ep == 0) &&
                       ((ep == 1 && dp == 1) || (m != nullptr && m->arch.moe.has_value()));
    if (!ep_ok)
      diags.error(shown, ptr + "/ep",
                  fmt::format("ep {} with tp {} and attention_dp {}: ep must divide tp (or be attention_dp × tp), and "
                              "ep > 1 needs an MoE model",
                              ep, tp, dp));
    if (m == nullptr || gpu == nullptr || !wd || !kd || !cp || !ep_ok) continue;
    model::ServingSystem sys;
    sys.db = &db;
    sys.gpu = gpu;
    for (const auto& n : db.nodes)
      if (n.gpu == gpu->info.id) {
        sys.node = &n;
        break;
      }
    r.regime = {"serve", model::generation_of(gpu->family), m->arch.moe.has_value() ? "moe" : "dense",
                model::scale_bucket(std::int64_t(tp) * pp * dp, sys.node ? sys.node->gpus : 1)};
    model::ServingPerfPlan plan;
    plan.tp = tp;
    plan.pp = pp;
    plan.ep = dp > 1 ? 1 : ep;
    plan.attention_dp = dp;
    plan.weights = model::default_weight_quant(*wd);
    plan.kv = model::default_kv_quant(*kd);
    plan.compute = *cp;
    plan.max_batched_tokens = 0;  // profiles and static batches: whole prompts
    const std::string style = c.value("kernels", std::string("fused"));
    if (style != "fused" && style != "eager")
      diags.error(shown, ptr + "/kernels", fmt::format("'{}' is not one of fused, eager", style));
    plan.kernels = style == "eager" ? wl::KernelStyle::eager : wl::KernelStyle::fused;
    plan.cuda_graphs = c.value("cuda_graphs", true);
    const std::string attn = c.value("attention_kernel", std::string("fa3"));
    if (attn != "fa2" && attn != "fa3")
      diags.error(shown, ptr + "/attention_kernel", fmt::format("'{}' is not one of fa2, fa3", attn));
    plan.attention = attn == "fa2" ? wl::AttentionKernel::fa2 : wl::AttentionKernel::fa3;
    // The MoE dispatcher the run used (SGLang --moe-a2a-backend, --deepep-mode, --enable-two-batch-overlap).
    const std::string a2a = c.value("moe_a2a_backend", std::string("nccl")), mode = c.value("deepep_mode", std::string("auto"));
    if (a2a != "nccl" && a2a != "deepep")
      diags.error(shown, ptr + "/moe_a2a_backend", fmt::format("'{}' is not one of nccl, deepep", a2a));
    if (mode != "auto" && mode != "normal" && mode != "low_latency")
      diags.error(shown, ptr + "/deepep_mode", fmt::format("'{}' is not one of auto, normal, low_latency", mode));
    plan.moe_a2a = a2a == "deepep" ? model::MoeA2aBackend::deepep : model::MoeA2aBackend::nccl;
    plan.deepep_mode = mode == "normal"        ? model::DeepEpMode::normal
                       : mode == "low_latency" ? model::DeepEpMode::low_latency
                                               : model::DeepEpMode::automatic;
    plan.two_batch_overlap = c.value("two_batch_overlap", false);
    const auto& a = m->arch;
    auto in_i = [&](const char* k) -> std::int64_t {
      if (!in.contains(k) || !in[k].is_number()) {
        diags.error(shown, fmt::format("{}/inputs/{}", ptr, k), fmt::format("metric {} needs a number here", r.metric));
        return 1;
      }
      return in[k].get<std::int64_t>();
    };
    // The metric for one system and plan (the built-in defaults, then the calibration profile).
    auto predict = [&](model::ServingPerfPlan pl, const model::ServingSystem& sy) -> std::optional<double> {
      std::optional<double> p;
      if (r.metric == "prefill_time_s") {
        p = model::prefill_time(a, pl, in_i("batch"), in_i("prompt_tokens"), sy).raw();
      } else if (r.metric == "decode_step_time_s") {
        p = model::decode_step_time(a, pl, in_i("batch"), in_i("context_tokens"), sy).raw();
      } else if (r.metric == "request_latency_s") {
        // A static batch: one prefill (emits the first token), then output − 1 decode steps over a growing context.
        const std::int64_t b = in_i("batch"), s = in_i("prompt_tokens"), o = in_i("output_tokens");
        p = (model::prefill_time(a, pl, b, s, sy) +
             model::decode_step_time(a, pl, b, s + o / 2, sy) * double(std::max<std::int64_t>(0, o - 1)))
                .raw();
      } else if (r.metric == "offline_output_tokens_per_s") {
        // Offline max throughput: continuous batching at the largest batch the KV cache holds (each request reserves
        // its whole isl + osl, TensorRT-LLM's default GUARANTEED_NO_EVICT), capped by the engine's max batch.
        const std::int64_t isl = in_i("input_tokens"), osl = in_i("output_tokens");
        model::ServingMemoryPlan mp;
        mp.tp = tp;
        mp.pp = pp;
        mp.expert_dp = dp;
        mp.context = isl + osl;
        mp.kv = pl.kv;
        mp.weights = pl.weights;
        mp.engine = model::MemoryEngine::sglang;
        mp.memory_fraction = in.contains("kv_memory_fraction") && in["kv_memory_fraction"].is_number()
                                 ? in["kv_memory_fraction"].get<double>()
                                 : 0.9;
        const auto mem = model::serving_memory(a, model::parameter_counts(a, Explain::off), *gpu, mp, Explain::off);
        std::int64_t cap = mem.max_concurrency;
        if (in.contains("max_batch") && in["max_batch"].is_number()) cap = std::min(cap, in["max_batch"].get<std::int64_t>());
        pl.max_batched_tokens = 8192;
        pl.max_batch = cap;
        // The engine fills its batch up to what the KV cache holds (in-flight batching never holds sequences back
        // to run faster); an 8192-token budget per iteration.
        if (cap >= 1) p = model::steady_state(a, pl, cap, isl, osl, sy, Explain::off).output_tokens_per_s;
        else r.status = "infeasible";
        r.layout += fmt::format(" B={}", cap);
      }
      return p;
    };
    if (r.metric != "prefill_time_s" && r.metric != "decode_step_time_s" && r.metric != "request_latency_s" &&
        r.metric != "offline_output_tokens_per_s") {
      diags.error(shown, ptr + "/metric", fmt::format("unknown metric '{}'", r.metric));
      continue;
    }
    const std::string layout_before = r.layout;
    if (auto p = predict(plan, sys)) {
      r.predicted = *p;
      r.error = r.measured != 0 ? *p / r.measured - 1.0 : 0.0;
      r.status = "ok";
      model::ServingSystem cal = sys;
      Diagnostics ignore;
      if (!data_dir.empty() && load_calibration(data_dir, cal, false, ignore) && cal.efficiency) {
        model::ServingPerfPlan calibrated_plan = plan;
        model::use_measured_overheads(calibrated_plan, *cal.efficiency);
        r.layout = layout_before;  // the offline metric appends its batch once
        if (auto pc = predict(calibrated_plan, cal)) {
          r.predicted_calibrated = *pc;
          r.error_calibrated = r.measured != 0 ? *pc / r.measured - 1.0 : 0.0;
        }
      }
    }
    sum.cases.push_back(r);
  }
  summarise(sum);
  if (by_source != nullptr) {
    for (const auto& c : sum.cases) {
      auto it = std::find_if(by_source->begin(), by_source->end(), [&](const auto& p) { return p.first == c.source; });
      if (it == by_source->end()) {
        by_source->emplace_back(c.source, ValidationSummary{});
        it = std::prev(by_source->end());
      }
      it->second.cases.push_back(c);
    }
    for (auto& [k, v] : *by_source) summarise(v);
  }
  if (diags.has_errors()) return Result<ValidationSummary>(std::move(diags));
  return Result<ValidationSummary>(std::move(sum), std::move(diags));
}

std::string render_validation_markdown(const ValidationSummary& s, const std::string& title) {
  std::string o = fmt::format("## {}\n\n", title);
  o += fmt::format("{} cases, {} evaluated: median |error| {}, max {}, {} within 10%, {} within 25%.\n\n", s.cases.size(),
                   s.evaluated, units::format(units::Ratio(s.median_abs_error)), units::format(units::Ratio(s.max_abs_error)),
                   units::format(units::Ratio(s.within_10)), units::format(units::Ratio(s.within_25)));
  if (s.dev_cases_evaluated > 0 && s.dev_cases_evaluated < s.evaluated)
    o += fmt::format("Scored per dev case instead (../shared/validation/dev_cases.json; a sweep's rows by their median "
                     "|error|): {} dev cases evaluated, median |error| {}, max {}, {} within 15%.\n\n",
                     s.dev_cases_evaluated, units::format(units::Ratio(s.dev_case_median_abs_error)),
                     units::format(units::Ratio(s.dev_case_max_abs_error)), s.dev_cases_within_15);
  const bool cal = s.evaluated_calibrated > 0;
  if (cal)
    o += fmt::format("With the calibration profiles (data/calibration/), on the {} cases whose GPU has one: median "
                     "|error| {} (built-in defaults on the same cases: {}), max {} (built-in: {}).\n\n",
                     s.evaluated_calibrated, units::format(units::Ratio(s.median_abs_error_calibrated)),
                     units::format(units::Ratio(s.median_abs_error_same_cases)),
                     units::format(units::Ratio(s.max_abs_error_calibrated)),
                     units::format(units::Ratio(s.max_abs_error_same_cases)));
  o += cal ? "| case | model | GPU | layout | metric | measured | predicted | error | calibrated | error (cal.) | status |\n"
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n"
           : "| case | model | GPU | layout | metric | measured | predicted | error | status |\n"
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- |\n";
  for (const auto& c : s.cases) {
    const std::string calcols =
        cal ? fmt::format(" {} | {} |", c.predicted_calibrated ? units::format_number(*c.predicted_calibrated, 4) : "—",
                          c.error_calibrated ? fmt::format("{:+.1f}%", *c.error_calibrated * 100.0) : "—")
            : "";
    o += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |{} {}{} |\n", c.id, c.model, c.gpu, c.layout, c.metric,
                     units::format_number(c.measured, 4), c.predicted ? units::format_number(*c.predicted, 4) : "—",
                     c.error ? fmt::format("{:+.1f}%", *c.error * 100.0) : "—", calcols, c.status,
                     c.note.empty() || c.status == "ok" ? "" : ": " + c.note.substr(0, 120));
  }
  return o + "\n" + render_structure_moves(s);
}

}  // namespace gpuplan::cli
