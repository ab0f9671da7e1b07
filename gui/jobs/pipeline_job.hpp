#pragma once
// One real-time pipeline evaluation for the Pipeline tab (issue #25, deliverable 4): the file decoded against the
// vision library, every model stage priced and the frame scheduled by the application layer's app::evaluate_pipeline
// — the code behind `gpuplan pipeline FILE [--gpu G] [--share-backbone on|off] [--int8 …] [--fusion …]
// [--cuda-graphs …] [--temporal-reuse …] [--frames N] [--seed S]`, so the page shows the CLI's numbers.
#include <cstdint>
#include <string>

#include "app_data.hpp"
#include "gpuplan/app/pipeline.hpp"
#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::gui {

struct PipelinePageRequest {
  std::string file;                 ///< the pipeline file's path
  std::string gpu;                  ///< GPU id or alias; "" = the file's `hardware`
  app::PipelineOverrides overrides; ///< the page's toggles (unset: the file's `options`)
  int frames = 20000;               ///< Monte-Carlo frames of the P99 (the CLI's --frames default)
  std::uint64_t seed = 1;
  bool calibration = true;
};

struct PipelinePageResult {
  Diagnostics diags;
  bool valid = false;
  PipelinePageRequest request;
  app::PipelineResult result;  ///< valid only
  double total_ms = 0;         ///< wall time of the job on the worker
};

PipelinePageResult evaluate_pipeline_page(const AppData& data, const PipelinePageRequest& req);

}  // namespace gpuplan::gui
