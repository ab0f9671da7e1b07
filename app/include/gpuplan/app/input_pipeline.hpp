#pragma once
// The input pipeline of LLM training as the front ends set it up (issue #27): the per-sample CPU cost a user types and
// the node's cores from the hardware data, for the optimisation stack's workers step and the step timeline's loader lane.
#include <optional>
#include <string>

#include "gpuplan/model/training.hpp"
#include "gpuplan/model/vision_data.hpp"

namespace gpuplan::app {

/// The text input pipeline's loader on `sys`: `sample_ms` CPU milliseconds per sample (none or ≤ 0: not priced),
/// typed at `where`; the node's CPU cores from its data (cited), or uncapped workers where the node has none (stated).
model::TextLoader text_loader(const model::TrainingSystem& sys, std::optional<double> sample_ms, const std::string& where);

}  // namespace gpuplan::app
