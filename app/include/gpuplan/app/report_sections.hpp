#pragma once
// The text/Markdown sections `gpuplan train` and `gpuplan serve --rate` print, for callers that render the same
// results elsewhere (the GUI's Markdown export): one formatter per report, not one per front end.
#include <string>
#include <vector>

#include "gpuplan/app/output.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/model/accuracy_band.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::app {

/// `gpuplan train`'s sections of one estimate: the head ("<model> on <N> × <GPU>": layout, batch, node), then
/// Infeasible, Throughput, Step breakdown and Memory. `shown_gpus` is the GPU count as given (the layout's when it
/// divides).
std::vector<Section> training_sections(const wl::TransformerArch& arch, long long shown_gpus,
                                       const model::TrainingSystem& sys, const wl::TrainingPlan& plan,
                                       const model::TrainingEstimate& est, const model::Band* band = nullptr);

/// The sections of one training estimate after its head section: Infeasible, Throughput, Step breakdown, Memory.
std::vector<Section> estimate_sections(const model::TrainingSystem& sys, const wl::TrainingPlan& plan,
                                       const model::TrainingEstimate& est, const model::Band* band);

/// A training layout in words: "TP 8 · PP 4 (v=2) · DP 16 · CP 1 · SP", with the uneven pipeline split and LoRA.
std::string layout_text(const wl::TrainingPlan& plan);

/// `gpuplan serve --rate`'s sections (head with SLA and formats, Answer, disaggregated pools, Notes) and its
/// "Best batch per TP size" table.
std::vector<Section> planner_sections(const ResolvedServing& rs, const model::ServingPlanResult& r,
                                      const model::Band* band = nullptr);
Table planner_table(const model::ServingPlanResult& r);

/// "train Hopper dense <=256 GPUs, 24 cases" style tail for a value and its error band.
std::string band_note(const model::Band& b);

}  // namespace gpuplan::app
