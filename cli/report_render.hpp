#pragma once
// The renderers of `gpuplan report` (cmd_report.cpp): the budget report as a small document (report_doc.hpp: rendered
// as Markdown, text or one self-contained HTML page with SVG charts), as JSON and as CSV. cmd_report.cpp resolves the
// plan into a ReportContext, calls model::build_report and picks one of these. No model arithmetic here (DESIGN.md
// §2.1).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "report_doc.hpp"
#include "gpuplan/model/report.hpp"
#include "gpuplan/wl_io/plan_io.hpp"

namespace gpuplan::cli {

/// One hardware option, resolved.
struct OptionContext {
  model::TrainingSystem sys;
  std::string price_origin;  ///< "hardware/gpus/h100-sxm5-80gb.json /price_usd_per_hour (RunPod ...)" or the plan
  std::string price_source;  ///< the cited source text alone
};

/// What the renderers need besides the model's result.
struct ReportContext {
  std::string file;
  wl_io::Plan plan;
  std::vector<OptionContext> options;
  std::vector<model::TrainingRequest> training;
  std::vector<wl::TrainingPlan> training_base;  ///< per training item: its plan as resolved on the first option that resolves
  std::vector<model::ServingRequest> serving;
  std::vector<std::vector<std::string>> serving_engine;  ///< per serving item and option: "bf16 weights, vLLM" etc.
};

/// An option's name as the report shows it (its id when the plan names it no other way).
std::string option_label(const wl_io::PlanOption& o);

/// Each option's price kind as price_kind() words it ("on-demand", "spot", "as given"); "" for an option without a
/// price. Where they mix on-demand and spot, every cost comparison of the report says so (mixed_price_note).
std::vector<std::string> option_kinds(const ReportContext& ctx);

/// The report's content (summary, options, one section per item, how to read it, derivations with `explain`); the
/// charts only when `html`.
Doc build_doc(const ReportContext& ctx, const model::ReportResult& res, bool explain, bool html);

/// The report as JSON (the stable keys of docs/report.md) and as CSV (one row per item × option).
nlohmann::ordered_json report_json(const ReportContext& ctx, const model::ReportResult& res, bool explain);
std::string report_csv(const ReportContext& ctx, const model::ReportResult& res);

}  // namespace gpuplan::cli
