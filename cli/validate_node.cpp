// Whole-host runs in `gpuplan validate` (issue #30): the case files scripts/measure/node_cases.py writes beside a
// run_node.sh measurement, read through the same validators as the shipped sets.
#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "validate.hpp"

namespace gpuplan::cli {

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

void merge_cases(ValidationSummary& into, const ValidationSummary& extra) {
  into.cases.insert(into.cases.end(), extra.cases.begin(), extra.cases.end());
  summarise_validation(into);
}

Result<NodeRunCases> validate_node_runs(const std::string& data_dir, const hw::HardwareDb& db,
                                        const wl_io::ModelLibrary& lib, const std::string& measured_root) {
  namespace fs = std::filesystem;
  Diagnostics diags;
  NodeRunCases out;
  const fs::path root = measured_root.empty() ? fs::path(data_dir) / "validation" / "measured" : fs::path(measured_root);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return Result<NodeRunCases>(std::move(out), std::move(diags));
  std::vector<fs::path> dirs, files;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    std::vector<fs::path> here;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name.rfind("node-x", 0) == 0 && ends_with(name, "-cases.json")) here.push_back(e.path());
    }
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    const bool moe = name.find("-moe-") != std::string::npos;
    if (ends_with(name, "-serving-cases.json")) {
      std::vector<std::pair<std::string, ValidationSummary>> by_source;
      auto v = validate_inference(f.string(), db, lib, &by_source, data_dir);
      for (const auto& d : v.diagnostics().items()) diags.add(d);
      if (!v.ok()) continue;
      auto& into = moe ? out.moe_serving : out.serving;
      into.cases.insert(into.cases.end(), v->cases.begin(), v->cases.end());
      auto& split = moe ? out.moe_serving_by_source : out.serving_by_source;
      for (auto& p : by_source) split.push_back(std::move(p));
    } else if (ends_with(name, "-training-cases.json")) {
      auto v = validate_training(f.string(), db, lib, data_dir);
      for (const auto& d : v.diagnostics().items()) diags.add(d);
      if (!v.ok()) continue;
      auto& into = moe ? out.moe_training : out.training;
      into.cases.insert(into.cases.end(), v->cases.begin(), v->cases.end());
    } else {
      continue;  // another kind of case file: not one node_cases.py writes
    }
    out.files.push_back(f.string());
  }
  for (auto* s : {&out.serving, &out.moe_serving, &out.training, &out.moe_training}) summarise_validation(*s);
  if (diags.has_errors()) return Result<NodeRunCases>(std::move(diags));
  return Result<NodeRunCases>(std::move(out), std::move(diags));
}

}  // namespace gpuplan::cli
