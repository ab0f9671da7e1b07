#include "gpuplan/app/hardware_setup.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/hw/lookup.hpp"

namespace gpuplan::app {

bool resolve_hardware(const std::string& gpu, std::string node, const std::string& cluster, const hw::HardwareDb& db,
                      const std::function<std::string(const std::string&)>& where, Diagnostics& diags,
                      model::TrainingSystem& sys) {
  sys.db = &db;
  if (!cluster.empty()) {
    sys.cluster = db.find_cluster(cluster);
    if (sys.cluster == nullptr) {
      diags.error("", where("cluster"), fmt::format("unknown cluster '{}'{}", cluster, did_you_mean(cluster, db.cluster_ids())));
      return false;
    }
    if (node.empty()) node = sys.cluster->node;
  }
  if (!node.empty()) {
    sys.node = db.find_node(node);
    if (sys.node == nullptr) {
      diags.error("", where("node"), fmt::format("unknown node '{}'{}", node, did_you_mean(node, db.node_ids())));
      return false;
    }
  }
  const std::string gpu_name = !gpu.empty() ? gpu : sys.node->gpu;
  sys.gpu = db.find_gpu(gpu_name);
  if (sys.gpu == nullptr) {
    diags.error("", where("gpu"), fmt::format("unknown GPU '{}'{}", gpu_name, did_you_mean(gpu_name, db.gpu_names())));
    return false;
  }
  if (sys.gpu->info.id != gpu_name) diags.note("", where("gpu"), fmt::format("'{}' is {}", gpu_name, sys.gpu->info.id));
  if (sys.node != nullptr && sys.node->gpu != sys.gpu->info.id) {
    diags.error("", where("gpu"),
                fmt::format("node '{}' holds {}, not {}", sys.node->info.id, sys.node->gpu, sys.gpu->info.id));
    return false;
  }
  if (sys.node == nullptr) {
    sys.node = hw::first_node_of(db, sys.gpu->info.id);
    if (sys.node != nullptr)
      diags.note("", where("node"),
                 fmt::format("using node '{}' for {} (give a node to choose)", sys.node->info.id, sys.gpu->info.id));
  }
  return true;
}

bool load_calibration(const std::string& data_dir, model::TrainingSystem& sys, bool disabled, Diagnostics& diags) {
  if (disabled || sys.gpu == nullptr) return true;
  const std::string path = data_dir + "/calibration/" + sys.gpu->info.id + "/profile.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return true;
  auto p = calib::read_profile(path);
  if (!p.ok()) {
    for (const auto& d : p.diagnostics().items()) diags.add(d);
    return false;
  }
  // Cited relative to the data directory (as the hardware files are), not by this machine's absolute path.
  calib::Profile profile = std::move(*p);
  profile.file = "calibration/" + sys.gpu->info.id + "/profile.json";
  sys.efficiency = calib::to_efficiency(profile, *sys.gpu);
  sys.scale_up_calibration = calib::scale_up_calibration(profile);
  diags.note(profile.file, "", "using this calibration profile (in the data directory) for " + sys.gpu->info.id +
                                   " (--no-calibration for the built-in defaults)");
  return true;
}

}  // namespace gpuplan::app
