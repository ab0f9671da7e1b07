#pragma once
// The data every evaluation reads: the hardware database and the model library, loaded once from the data directory
// the CLI would use (--data-dir, $GPUPLAN_DATA_DIR, the installed share directory, this tree's data/). Immutable
// after loading and shared with the worker threads.
#include <memory>
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::gui {

struct AppData {
  std::string data_dir;
  hw::HardwareDb db;
  wl_io::ModelLibrary library;
};

/// Loads the data directory found as the CLI finds it (`flag` = --data-dir, may be empty). nullptr with the
/// diagnostics when nothing usable is found.
std::shared_ptr<const AppData> load_app_data(const std::string& flag, Diagnostics& diags);

}  // namespace gpuplan::gui
