#pragma once
// Internal to `gpuplan autoscale`: cmd_autoscale.cpp reads the load and the policy, builds the requests and runs the
// autoscaled and the fixed fleet; autoscale_render.cpp prices and renders the outcome (text, Markdown, JSON, CSV).
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common.hpp"
#include "gpuplan/model/autoscale.hpp"
#include "serve_options.hpp"

namespace gpuplan::cli::autoscale_cmd {

inline std::string hours_text(double s) { return fmt::format("{:.2f} h", s / 3600.0); }

/// One autoscale run: the replica, the fleet options (policy, SLA, series interval) and both fleets' results.
struct AutoscaleOutcome {
  const ResolvedServing& rs;
  const model::FleetOptions& fo;  ///< of the autoscaled fleet
  const model::FleetResult& as;   ///< autoscaled
  const model::FleetResult& fx;   ///< fixed at the planner's replica count
  std::int64_t fixed_replicas = 0;
  double peak_rate = 0;           ///< requests/s the fixed fleet is sized for
  std::string workload;           ///< the load in words
  double horizon = 0;             ///< s
  bool trace = false;             ///< the load is a trace (not a curve)
  std::vector<std::string> notes;
};

/// Prints the outcome in `fmt_` (the price from the replica's GPU or --price); the exit code.
int render_autoscale(const AutoscaleOutcome& r, Format fmt_);

}  // namespace gpuplan::cli::autoscale_cmd
