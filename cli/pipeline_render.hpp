#pragma once
// Renderings of a pipeline schedule (app/include/gpuplan/app/pipeline.hpp): text or Markdown with a text Gantt chart,
// JSON, and an SVG Gantt chart with the deadline line. Rendering only: every number comes from PipelineResult.
#include <string>

#include <nlohmann/json.hpp>

#include "gpuplan/app/pipeline.hpp"

namespace gpuplan::cli {

using app::PipelineResult;

std::string pipeline_text(const PipelineResult& r, bool markdown, bool explain);
nlohmann::json pipeline_json(const PipelineResult& r, bool explain);
/// One <svg>: a row per stage that ran in frame 0 (a <rect class="stage"> each, coloured by engine), a time axis in
/// ms and the deadline as a <line class="deadline">.
std::string pipeline_svg(const PipelineResult& r);

}  // namespace gpuplan::cli
