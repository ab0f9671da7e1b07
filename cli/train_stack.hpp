#pragma once
// `gpuplan train --stack amp,flash,fused-adam,compile,workers=4`: the optimisation stack (model/opt_stack.hpp) of a
// resolved training plan, as text, Markdown or JSON.
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/model/opt_stack.hpp"
#include "gpuplan/app/resolve.hpp"

namespace gpuplan::cli {

/// The steps of `--stack` ("amp,flash,workers=4"): every problem a diagnostic at `flag` (unknown name with the list
/// of names, a bad worker count or recompute mode, a step given twice, an empty list); nullopt after an error.
std::optional<std::vector<model::OptStep>> parse_stack(const std::string& text, const std::string& flag,
                                                       Diagnostics& diags);

/// The names --stack accepts, for help texts and diagnostics.
const char* stack_names();

/// Prints the stack of `r` (its plan's model, layout, batch and sequence) under `steps`; exit 0, or 3 when a row is
/// infeasible (it is still printed).
/// `baseline_optimizer`: the baseline's optimizer step (--optimizer-impl with --stack; PyTorch's foreach otherwise).
int run_train_stack(const GlobalOptions& g, const ResolvedTraining& r, const std::vector<model::OptStep>& steps,
                    std::optional<double> sample_ms, wl::OptimizerImpl baseline_optimizer);

}  // namespace gpuplan::cli
