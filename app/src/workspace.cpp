#include "gpuplan/app/workspace.hpp"

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

namespace gpuplan::app {

std::optional<std::string> find_data_dir(const std::string& flag, Diagnostics& diags) {
  namespace fs = std::filesystem;
  auto usable = [](const std::string& p) {
    std::error_code ec;
    return !p.empty() && (fs::is_directory(fs::path(p) / "hardware", ec) || fs::is_directory(fs::path(p) / "models", ec));
  };
  if (!flag.empty()) {
    if (usable(flag)) return flag;
    std::error_code ec_flag;
    diags.error("", "--data-dir", fs::exists(flag, ec_flag) ? fmt::format("'{}' has no hardware/ or models/ folder", flag)
                                                         : fmt::format("'{}' does not exist", flag));
    return std::nullopt;
  }
  if (const char* env = std::getenv("GPUPLAN_DATA_DIR"); env != nullptr && *env != '\0') {
    if (usable(env)) return std::string(env);
    diags.error("", "GPUPLAN_DATA_DIR", fmt::format("'{}' has no hardware/ or models/ folder", env));
    return std::nullopt;
  }
  // The share directory next to the running binary (a relocated install or a .deb), then the configured install
  // prefix, then the source tree this binary was built from.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::string rel = (exe.parent_path().parent_path() / "share" / "gpuplan").string();
    if (usable(rel)) return rel;
  }
  for (const char* candidate : {GPUPLAN_INSTALL_DATA_DIR, GPUPLAN_SOURCE_DATA_DIR})
    if (usable(candidate)) return std::string(candidate);
  diags.error("", "--data-dir",
              fmt::format("no data directory found: tried --data-dir, $GPUPLAN_DATA_DIR, {} and {}",
                          GPUPLAN_INSTALL_DATA_DIR, GPUPLAN_SOURCE_DATA_DIR));
  return std::nullopt;
}

}  // namespace gpuplan::app
