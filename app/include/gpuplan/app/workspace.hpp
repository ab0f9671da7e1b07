#pragma once
// The workspace every front end starts from: the data directory (hardware, models, calibration profiles).
#include <optional>
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::app {

/// `flag` (--data-dir), then $GPUPLAN_DATA_DIR, then the installed share directory, then the source tree's data/.
/// Returns the first that has a hardware/ or models/ folder, or nullopt with a diagnostic naming all places tried.
std::optional<std::string> find_data_dir(const std::string& flag, Diagnostics& diags);

/// What a front end reads from the data directory: the hardware database and the model library. Calibration
/// profiles are per GPU and read when the GPU is resolved (`load_calibration`, hardware_setup.hpp).
struct Workspace {
  std::string data_dir;
  hw::HardwareDb db;             ///< empty unless asked for
  wl_io::ModelLibrary library;   ///< empty unless asked for
};

/// The parts of the workspace a command reads; a command that needs no models does not fail on a broken library.
struct WorkspaceParts {
  bool hardware = true;
  bool models = true;
};

/// Loads the parts asked for from `data_dir`, hardware first. On failure: no value, and the diagnostics of the part
/// that failed (file, JSON pointer, rule), nothing else. On success the loaders' warnings and notes come with it.
Result<Workspace> load_workspace(const std::string& data_dir, WorkspaceParts parts = {});

/// `find_data_dir(flag)`, then `load_workspace`: the bootstrap every command and the GUI start from.
Result<Workspace> open_workspace(const std::string& flag, WorkspaceParts parts = {});

}  // namespace gpuplan::app
