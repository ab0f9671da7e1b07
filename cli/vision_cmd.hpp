#pragma once
// `gpuplan serve` and `gpuplan train` for vision models (data/models/vision/*.json): the commands dispatch on the
// workload kind of `-m`. A vision model takes the flags that mean something for it and refuses the others by name
// (exit 2); the vision-only flags are refused for a transformer.
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "common.hpp"
#include "gpuplan/app/vision_setup.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/vision_io.hpp"

namespace gpuplan::cli {

enum class VisionCommand { serve, train };

struct VisionFlags {
  std::optional<long long> resolution;
  bool fold_bn = false, fuse_epilogue = false;
  bool fused_training = false;  ///< train: the fused conv-BN-ReLU engine
  std::optional<std::string> autocast;  ///< "true" / "false"
  // train: the input pipeline (model/vision_data.hpp) and the epoch
  std::optional<long long> loader_workers;
  std::optional<std::string> decode;  ///< "cpu" / "gpu"
  std::optional<double> decode_rate, storage_GBps, image_kB, epochs;
  std::optional<long long> epoch_images;
};

// The vision pricer's device setup lives in the application layer (app/), shared with the GUI's pipeline page.
using app::vision_device;

/// Registers the vision-only flags on `serve` or `train`.
void add_vision_options(CLI::App& cmd, VisionFlags& v, VisionCommand which);

/// `gpuplan model show NAME` for a vision model (a library id or alias, or an ONNX file); nullopt when NAME is
/// neither (the transformer `show` runs).
std::optional<int> show_vision_model(const GlobalOptions& g, const std::string& name);

/// An ONNX file as a vision entry (family onnx, its imported op list); nullopt after the import's diagnostics.
std::optional<wl_io::VisionEntry> import_onnx_entry(const std::string& path, Diagnostics& diags);

/// When `-m` names a vision model (of the library, or an ONNX file: a path ending in .onnx), runs the vision command
/// and returns its exit code; otherwise returns nullopt (the transformer command runs), or 2 after a diagnostic when a
/// vision-only flag was given.
std::optional<int> run_vision_if_named(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v,
                                       VisionCommand which);

}  // namespace gpuplan::cli
