#include "training_job.hpp"
#include "gpuplan/app/input_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/roofline.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "gpuplan/app/studies.hpp"
#include "gpuplan/app/resolve.hpp"  // one place for "scenario -> model, plan, hardware", the CLI's too

namespace gpuplan::gui {
namespace {

constexpr std::size_t kMaxCompare = 3;

RooflineCurve roofline_of(const hw::GpuSpec& gpu, hw::Precision prec) {
  RooflineCurve c;
  c.gpu_name = gpu.info.name.empty() ? gpu.info.id : gpu.info.name;
  const auto dev = model::make_device(gpu);
  const units::FlopRate peak = dev.peak(prec);
  const units::Bandwidth bw = gpu.memory.bandwidth;
  auto ridge = model::ridge_point(peak, bw,
                                  Origin::datasheet(gpu.info.cite(fmt::format("/dense_peak/{}_TFLOPs", hw::to_string(prec)))),
                                  Origin::datasheet(gpu.info.cite("/memory/bandwidth_TBps")));
  c.peak_FLOPps = peak.raw();
  c.bandwidth_Bps = bw.raw();
  c.ridge_FLOP_per_B = ridge.value.raw();
  c.ridge = std::move(ridge.derivation);
  c.ridge.title = c.gpu_name + ": roofline ridge point";
  // Log-spaced intensities over the range LLM ops span (0.1 … 10^5 FLOP/B), with the ridge itself so the corner
  // is drawn sharp.
  std::vector<double> xs;
  for (int k = -4; k <= 20; ++k) xs.push_back(std::pow(10.0, k / 4.0));
  xs.push_back(c.ridge_FLOP_per_B);
  std::sort(xs.begin(), xs.end());
  for (double x : xs)
    c.points.emplace_back(x, model::attainable_performance(peak, bw, units::Intensity(x)).raw());
  return c;
}


}  // namespace

std::string scenario_key_label(const std::string& key) { return wl_io::training_key_label(key); }

TrainingResult evaluate_training(const AppData& data, const TrainingRequest& req) {
  TrainingResult out;
  // Panel values are reported under their labels; a loaded file's values the same way (the panel shows them).
  std::map<std::string, std::string> origin;
  if (req.scenario.is_object())
    for (const auto& [k, v] : req.scenario.items()) origin[k] = scenario_key_label(k);
  auto decoded = wl_io::decode_training_scenario(req.scenario, "", origin);
  out.diags.append(decoded.diagnostics());
  if (!decoded.ok()) return out;
  const bool global_batch_given = req.scenario.contains("global_batch");
  auto where = [](const std::string& k) { return scenario_key_label(k); };
  auto r = app::resolve_training(decoded.value(), global_batch_given, data.db, data.library, where, out.diags);
  if (!r) return out;
  if (!app::load_calibration(data.data_dir, r->sys, !req.calibration, out.diags)) return out;
  out.valid = true;
  out.resolved = std::make_shared<const app::ResolvedTraining>(*r);
  out.layout_ok = r->pre.ok;
  out.model_name = r->arch.name.empty() ? r->arch.id : r->arch.name;
  out.plan = r->plan;
  out.gpus = decoded->gpus && !r->pre.ok ? *decoded->gpus : r->plan.par.gpus();

  auto evaluate = [&](const model::TrainingSystem& sys, Explain explain) {
    GpuEvaluation g;
    g.gpu_id = sys.gpu->info.id;
    g.gpu_name = sys.gpu->info.name.empty() ? sys.gpu->info.id : sys.gpu->info.name;
    g.node_id = sys.node != nullptr ? sys.node->info.id : "";
    g.resolved = true;
    if (r->pre.ok) g.est = model::estimate_training(r->arch, r->plan, sys, explain);
    else g.est.feasibility = r->pre;
    return g;
  };
  std::vector<model::TrainingSystem> systems{r->sys};
  out.gpus_evaluated.push_back(evaluate(r->sys, Explain::on));
  if (r->pre.ok) {
    if (!(req.loader_sample_ms >= 0 && req.loader_sample_ms <= 1e6))
      out.diags.error("", "Loader ms/sample",
                      fmt::format("{} is not a CPU time per sample in [0, 10⁶] ms", req.loader_sample_ms));
    else if (req.loader_workers < 0 || req.loader_workers > 4096)
      out.diags.error("", "DataLoader workers",
                      fmt::format("{} is not a worker count (0 to 4096 per GPU)", req.loader_workers));
    else
      out.timeline = model::training_timeline(r->arch, r->plan, r->sys,
                                              app::text_loader(r->sys, req.loader_sample_ms, "Loader ms/sample"),
                                              req.loader_workers);
    for (auto mode : {wl::Recompute::none, wl::Recompute::selective, wl::Recompute::full}) {
      wl::TrainingPlan p = r->plan;
      p.recompute = mode;
      out.memory_timelines.push_back(model::training_memory_timeline(r->arch, p, r->sys));
    }
  }
  for (std::size_t i = 0; i < req.compare_gpus.size() && i < kMaxCompare; ++i) {
    const auto& id = req.compare_gpus[i];
    if (id.empty()) continue;
    model::TrainingSystem sys;
    Diagnostics local;  // the compare GPU's own notes ("using node ...") would drown the scenario's
    auto cmp_where = [](const std::string&) { return std::string("Compare GPU"); };
    if (!app::resolve_hardware(id, "", "", data.db, cmp_where, local, sys) ||
        !app::load_calibration(data.data_dir, sys, !req.calibration, local)) {
      for (const auto& d : local.items())
        if (d.severity == Severity::error) out.diags.add(d);
      continue;
    }
    sys.price = r->sys.price;
    systems.push_back(sys);
    out.gpus_evaluated.push_back(evaluate(sys, Explain::off));
  }
  if (req.collectives) {
    wl::Parallelism par = r->plan.par;
    if (!r->pre.ok) par.dp = 1;  // DP is not defined for a layout that does not divide
    out.collectives = evaluate_collectives(r->sys, par);
  }
  for (std::size_t i = 0; i < systems.size(); ++i) {
    out.rooflines.push_back(roofline_of(*systems[i].gpu, r->plan.precision.compute));
    if (req.scaling && r->pre.ok)
      out.scaling.push_back(app::strong_scaling_study(r->arch, r->plan, systems[i], out.gpus_evaluated[i].gpu_name));
  }
  return out;
}

}  // namespace gpuplan::gui
