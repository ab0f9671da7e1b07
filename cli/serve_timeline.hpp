#pragma once
// gpuplan serve --timeline FORMAT [--timeline-pass decode|prefill]: one engine iteration of the replica the serve
// command evaluates, laid out kernel by kernel (model/serving_timeline.hpp), in text, SVG or JSON.
#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "gpuplan/model/serving.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::cli {

struct ServeTimelineFlags {
  std::optional<std::string> format;  ///< --timeline
  std::string pass = "decode";        ///< --timeline-pass
};

void add_serve_timeline_options(CLI::App& c, ServeTimelineFlags& f);

/// Checks the flags: 0 when they are good (or absent), else the exit code of the reported diagnostic (2). `planner`:
/// the command runs the capacity planner (--rate / --concurrency), which the timeline does not lay out.
int check_serve_timeline(const ServeTimelineFlags& f, bool planner);

/// Prints the iteration: decode = `batch` sequences (÷ PP micro-batches) at context isl + osl/2, the decode-only step
/// serve reports as the ITL floor; prefill = one prompt of isl tokens (the prefix cache's share not computed), serve's
/// TTFT pass.
int run_serve_timeline(const ServeTimelineFlags& f, const wl::TransformerArch& arch, const model::ServingPerfPlan& perf,
                       const model::ServingSystem& sys, std::int64_t batch, std::int64_t isl, std::int64_t osl);

}  // namespace gpuplan::cli
