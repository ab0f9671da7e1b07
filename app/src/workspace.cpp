#include "gpuplan/app/workspace.hpp"

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "gpuplan/hw_io/hardware_io.hpp"

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

Result<Workspace> load_workspace(const std::string& data_dir, WorkspaceParts parts) {
  Workspace ws;
  ws.data_dir = data_dir;
  Diagnostics said;
  if (parts.hardware) {
    auto db = hw_io::load_hardware_db(data_dir);
    if (!db.ok()) return Result<Workspace>(db.diagnostics());
    said.append(db.diagnostics());
    ws.db = std::move(db).value();
  }
  if (parts.models) {
    auto lib = wl_io::load_model_library(data_dir);
    if (!lib.ok()) return Result<Workspace>(lib.diagnostics());
    said.append(lib.diagnostics());
    ws.library = std::move(lib).value();
  }
  return Result<Workspace>(std::move(ws), std::move(said));
}

Result<Workspace> open_workspace(const std::string& flag, WorkspaceParts parts) {
  Diagnostics diags;
  auto dir = find_data_dir(flag, diags);
  if (!dir) return Result<Workspace>(std::move(diags));
  return load_workspace(*dir, parts);
}

}  // namespace gpuplan::app
