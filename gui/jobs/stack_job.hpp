#pragma once
// The optimisation stack (issue #27 d3) of the scenario panel's training plan: model::optimisation_stack on a worker
// thread, resolved by the application layer as the CLI resolves (app::resolve_training, load_calibration), so that
// the same toggles give the numbers of `gpuplan train --scenario S --stack amp,flash,... [--loader-sample-ms X]`.
#include <string>
#include <vector>

#include "app_data.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/opt_stack.hpp"

namespace gpuplan::gui {

struct StackRequest {
  json_io::Json scenario = json_io::Json::object();  ///< keys of docs/scenario.md (the scenario panel's)
  bool calibration = true;
  std::vector<model::OptStep> steps;  ///< applied in order after the baseline
  double sample_ms = 0;               ///< CPU milliseconds per sample of the input pipeline; 0: not priced
};

struct StackResult {
  Diagnostics diags;
  bool valid = false;
  StackRequest request;
  std::string title;  ///< "<model> on <N> × <GPU>, global batch B × S tokens"
  model::OptStack stack;
};

/// The `--stack` spelling of a request's steps ("amp,flash,workers=4").
std::string stack_flag(const StackRequest& req);

StackResult evaluate_stack(const AppData& data, const StackRequest& req);

}  // namespace gpuplan::gui
