#pragma once
// Resolution of a decoded training scenario into model, plan and hardware — shared by `train` and `validate` so
// that a validation case runs exactly what the user would run.
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

namespace gpuplan::cli {

struct ResolvedTraining {
  wl::TransformerArch arch;
  wl::TrainingPlan plan;
  model::TrainingSystem sys;
  model::Feasibility pre;  ///< layout problems found while resolving (e.g. GPUs not divisible)
};

/// GPU, node and cluster by id or alias (a node holding the GPU is picked when none is given, with a note);
/// `where(key)` names the flag or pointer of "gpu", "node", "cluster". False after an error diagnostic.
bool resolve_hardware(const std::string& gpu, std::string node, const std::string& cluster, const hw::HardwareDb& db,
                      const std::function<std::string(const std::string&)>& where, Diagnostics& diags,
                      model::TrainingSystem& sys);

/// Uses `<data>/calibration/<gpu-id>/profile.json` when it exists (and `disabled` is false): the model's efficiency
/// row and the measured NVLink tier come from it, with a note naming the file. A profile that does not read is an
/// error (exit 2), never silently skipped. Returns false after an error.
bool load_calibration(const std::string& data_dir, model::TrainingSystem& sys, bool disabled, Diagnostics& diags);

/// `where(key)` names the flag or file pointer of a key for diagnostics.
std::optional<ResolvedTraining> resolve_training(wl_io::TrainingScenario s, bool global_batch_given,
                                                 const hw::HardwareDb& db, const wl_io::ModelLibrary& lib,
                                                 const std::function<std::string(const std::string&)>& where,
                                                 Diagnostics& diags);

}  // namespace gpuplan::cli
