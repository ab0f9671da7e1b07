// app::open_workspace / load_workspace (app/src/workspace.cpp): the bootstrap both front ends start from.
#include <filesystem>
#include <fstream>

#include <doctest/doctest.h>

#include "gpuplan/app/workspace.hpp"
#include "test_paths.hpp"

using namespace gpuplan;
namespace fs = std::filesystem;

namespace {
/// A data directory whose hardware/ is the source tree's and whose models/ holds one file that is not JSON.
fs::path broken_library_dir() {
  const fs::path dir = fs::temp_directory_path() / "gpuplan-test-app-workspace";
  fs::remove_all(dir);
  fs::create_directories(dir / "models");
  fs::create_directory_symlink(fs::path(GPUPLAN_TEST_DATA_DIR) / "hardware", dir / "hardware");
  std::ofstream(dir / "models" / "broken.json") << "{";
  return dir;
}
}  // namespace

TEST_CASE("the workspace of the source tree's data directory holds its hardware database and model library") {
  auto ws = app::open_workspace(GPUPLAN_TEST_DATA_DIR);
  REQUIRE_MESSAGE(ws.ok(), ws.diagnostics().to_string());
  CHECK(ws->data_dir == GPUPLAN_TEST_DATA_DIR);
  const hw::GpuSpec* h100 = ws->db.find_gpu("h100-sxm5-80gb");
  REQUIRE(h100 != nullptr);
  CHECK(h100->info.id == "h100-sxm5-80gb");
  const wl_io::ModelEntry* m = ws->library.find("llama-2-13b");
  REQUIRE(m != nullptr);
  CHECK(m->arch.layers == 40);  // Llama 2 13B: 40 layers (its config.json, num_hidden_layers)
}

TEST_CASE("a workspace reads only the parts asked for: no models, no failure on a broken library") {
  const fs::path dir = broken_library_dir();
  auto hw_only = app::open_workspace(dir.string(), {.hardware = true, .models = false});
  REQUIRE_MESSAGE(hw_only.ok(), hw_only.diagnostics().to_string());
  CHECK(hw_only->db.find_gpu("h100-sxm5-80gb") != nullptr);
  CHECK(hw_only->library.models.empty());

  auto both = app::open_workspace(dir.string());
  CHECK_FALSE(both.ok());
  REQUIRE_FALSE(both.diagnostics().items().empty());
  // The failing part's diagnostics alone, naming the file (as the commands printed them before the workspace).
  CHECK(both.diagnostics().items().front().file.find("broken.json") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("a --data-dir that does not exist is an error on the flag, with the value as typed") {
  auto ws = app::open_workspace("/nonexistent/gpuplan-data");
  CHECK_FALSE(ws.ok());
  REQUIRE(ws.diagnostics().items().size() == 1);
  const auto& d = ws.diagnostics().items().front();
  CHECK(d.pointer == "--data-dir");
  CHECK(d.message == "'/nonexistent/gpuplan-data' does not exist");
}
