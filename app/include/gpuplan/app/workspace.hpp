#pragma once
// The workspace every front end starts from: the data directory (hardware, models, calibration profiles).
#include <optional>
#include <string>

#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::app {

/// `flag` (--data-dir), then $GPUPLAN_DATA_DIR, then the installed share directory, then the source tree's data/.
/// Returns the first that has a hardware/ or models/ folder, or nullopt with a diagnostic naming all places tried.
std::optional<std::string> find_data_dir(const std::string& flag, Diagnostics& diags);

}  // namespace gpuplan::app
