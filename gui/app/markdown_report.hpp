#pragma once
// File → Export Markdown: the current results as a Markdown report. The training and serving sections are those the CLI
// prints (app::training_sections, app::planner_sections: what `gpuplan train/serve --format md` print for the same
// inputs), with the scenario JSON that reproduces them; the compare GPUs and compare mode as tables of the numbers
// on screen. No number is computed here.
#include <string>

#include "gpuplan/json_io/reader.hpp"
#include "serving_job.hpp"
#include "training_job.hpp"

namespace gpuplan::gui {

class CompareModel;

std::string markdown_report(const TrainingResult& t, const json_io::Json& scenario, const ServingResult& s,
                            const CompareModel* compare);

}  // namespace gpuplan::gui
