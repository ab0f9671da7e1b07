#pragma once
// The flags of the serving memory knobs (app/serving_flags.hpp) shared by `gpuplan kv` and `gpuplan serve`.
#include <CLI/CLI.hpp>

#include "common.hpp"
#include "gpuplan/app/serving_flags.hpp"

namespace gpuplan::cli {

/// Registers the flags on `c`. `for_serve` leaves out the ones the planner sets itself (context, concurrency, GPU
/// count) and the textbook simplifications.
void add_serving_memory_options(CLI::App& c, ServingFlags& f, bool for_serve);

}  // namespace gpuplan::cli
