// `gpuplan validate`: the training cases and the textbook's worked examples, the summaries and the Markdown table
// (validate.hpp). The inference cases: validate_inference.cpp; the held-out collectives: validate_collectives.cpp.
#include "validate.hpp"
#include "bands.hpp"

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

namespace detail {
std::string shown_path(const std::string& file) {
  const std::filesystem::path p(file);
  if (p.parent_path().filename() == "validation") return "data/validation/" + p.filename().string();
  const auto k = file.rfind("data/validation/");
  return k == std::string::npos ? file : file.substr(k);
}
}  // namespace detail
using detail::shown_path;

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
    // "not_in_bands": a case priced and reported but kept out of the error bands, with the reason: its hardware rests
    // on an assumption its own source calls unknown (the TorchTitan paper's Grand Teton H100, whose peak the authors
    // place "between SXM and NVL"), so its residual measures that assumption, not the model.
    if (c.contains("not_in_bands")) {
      if (!c["not_in_bands"].is_string() || c["not_in_bands"].get<std::string>().empty())
        diags.error(cases_file, ptr + "/not_in_bands", "expected the reason the case is kept out of the error bands "
                                                       "(a non-empty string)");
      else
        r.regime.kind.clear();
    }
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
  o += render_families_markdown(s);
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
