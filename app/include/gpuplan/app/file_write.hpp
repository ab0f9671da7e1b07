#pragma once
// Writing a file the user named (-o, --write-csv, a calibration profile, the GUI's Save and Export): one writer for
// both front ends.
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::app {

/// Writes `text` to `path` atomically: a fresh temporary file in the same folder (mkstemp), then rename; an existing
/// file is never left half-written and keeps its permissions. A symbolic link is written through (the link stays).
/// Refused with a diagnostic: a folder, a device or pipe, and any of `inputs` (the files the command read), so that
/// `-o` naming the input never replaces it. Creates the folder. False with a diagnostic on failure.
bool write_file_atomically(const std::string& path, const std::string& text, Diagnostics& diags,
                           const std::vector<std::string>& inputs = {});

}  // namespace gpuplan::app
