#include "pipeline_job.hpp"

#include <chrono>

namespace gpuplan::gui {

PipelinePageResult evaluate_pipeline_page(const AppData& data, const PipelinePageRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  PipelinePageResult out;
  out.request = req;
  auto spec = app::load_pipeline_spec(data.data_dir, req.file, req.file);
  out.diags.append(spec.diagnostics());
  if (spec.ok()) {
    app::PipelineRequest r;
    r.data_dir = data.data_dir;
    r.db = &data.db;
    r.spec = std::move(spec).value();
    r.gpu = req.gpu;
    r.no_calibration = !req.calibration;
    r.overrides = req.overrides;
    r.rt.frames = req.frames;
    r.rt.seed = req.seed;
    r.explain = Explain::on;  // the page's explain pane shows every stage's pricing
    auto res = app::evaluate_pipeline(r);
    out.diags.append(res.diagnostics());
    if (res.ok()) {
      out.result = std::move(res).value();
      out.valid = true;
    }
  }
  out.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace gpuplan::gui
