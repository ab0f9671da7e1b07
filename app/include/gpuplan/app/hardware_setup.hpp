#pragma once
// Hardware and calibration resolution, shared by every front end (the CLI's train / serve / validate / pipeline and
// the GUI's pages).
#include <functional>
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::app {

/// GPU, node and cluster by id or alias (a node holding the GPU is picked when none is given, with a note);
/// `where(key)` names the flag or pointer of "gpu", "node", "cluster". False after an error diagnostic.
bool resolve_hardware(const std::string& gpu, std::string node, const std::string& cluster, const hw::HardwareDb& db,
                      const std::function<std::string(const std::string&)>& where, Diagnostics& diags,
                      model::TrainingSystem& sys);

/// Uses `<data>/calibration/<gpu-id>/profile.json` when it exists (and `disabled` is false): the model's efficiency
/// row and the measured NVLink tier come from it, with a note naming the file. A profile that does not read is an
/// error (exit 2), never silently skipped. Returns false after an error.
bool load_calibration(const std::string& data_dir, model::TrainingSystem& sys, bool disabled, Diagnostics& diags);

}  // namespace gpuplan::app
