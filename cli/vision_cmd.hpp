#pragma once
// `gpuplan serve` and `gpuplan train` for vision models (data/models/vision/*.json): the commands dispatch on the
// workload kind of `-m`. A vision model takes the flags that mean something for it and refuses the others by name
// (exit 2); the vision-only flags are refused for a transformer.
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common.hpp"

namespace gpuplan::cli {

enum class VisionCommand { serve, train };

struct VisionFlags {
  std::optional<long long> resolution;
  bool fold_bn = false, fuse_epilogue = false;
  std::optional<std::string> autocast;  ///< "true" / "false"
};

/// Registers the vision-only flags on `serve` or `train`.
void add_vision_options(CLI::App& cmd, VisionFlags& v, VisionCommand which);

/// When `-m` names a vision model of the library, runs the vision command and returns its exit code; otherwise
/// returns nullopt (the transformer command runs), or 2 after a diagnostic when a vision-only flag was given.
std::optional<int> run_vision_if_named(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v,
                                       VisionCommand which);

}  // namespace gpuplan::cli
