#pragma once
// The device the vision pricer (model/vision.hpp) runs on, set up once for `serve` / `train` of a vision model,
// `validate`'s vision cases and the real-time pipeline's model stages (CLI and GUI).
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::app {

/// The GPU (id or alias) and what the vision pricer runs on: its calibration profile (unless `no_calibration`), the
/// sustained device with PyTorch's FA2 attention, and the per-kernel launch costs the profile measured. `node`
/// (optional) names the node the GPU sits in (`--node`; alone it picks the GPU). False after an error diagnostic.
bool vision_device(const std::string& data_dir, const hw::HardwareDb& db, const std::string& gpu, bool no_calibration,
                   Diagnostics& diags, model::TrainingSystem& sys, model::Device& device, model::ServingPerfPlan& launch,
                   const std::string& node = "");

}  // namespace gpuplan::app
