#pragma once
#include <CLI/CLI.hpp>

#include "common.hpp"

namespace gpuplan::cli {
/// Each registers its subcommand tree; the callback stores the exit code in `rc`.
void register_hw(CLI::App& app, GlobalOptions& g, int& rc);
void register_model(CLI::App& app, GlobalOptions& g, int& rc);
}  // namespace gpuplan::cli
