#include "resolve.hpp"

#include <filesystem>

#include <fmt/format.h>

#include "gpuplan/calibrate/calibration.hpp"

namespace gpuplan::cli {

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
    for (const auto& n : db.nodes)
      if (n.gpu == sys.gpu->info.id) {
        sys.node = &n;
        diags.note("", where("node"), fmt::format("using node '{}' for {} (give a node to choose)", n.info.id, sys.gpu->info.id));
        break;
      }
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
  sys.efficiency = calib::to_efficiency(*p, *sys.gpu);
  sys.scale_up_calibration = calib::scale_up_calibration(*p);
  diags.note(path, "", "using this calibration profile for " + sys.gpu->info.id +
                           " (--no-calibration for the built-in defaults)");
  return true;
}

std::optional<ResolvedTraining> resolve_training(wl_io::TrainingScenario s, bool global_batch_given,
                                                 const hw::HardwareDb& db, const wl_io::ModelLibrary& lib,
                                                 const std::function<std::string(const std::string&)>& where,
                                                 Diagnostics& diags) {
  if (s.model.empty()) diags.error("", where("model"), "no model given (a library id such as llama-3.1-70b, or a config.json)");
  if (s.gpu.empty() && s.node.empty() && s.cluster.empty()) diags.error("", where("gpu"), "no GPU, node or cluster given");
  if (diags.has_errors()) return std::nullopt;
  auto m = wl_io::resolve_model(lib, s.model);
  if (!m.ok()) {
    for (auto d : m.diagnostics().items()) {
      if (d.pointer == "MODEL") d.pointer = where("model");
      diags.add(d);
    }
    return std::nullopt;
  }
  ResolvedTraining r;
  r.arch = m->arch;
  if (!resolve_hardware(s.gpu, s.node, s.cluster, db, where, diags, r.sys)) return std::nullopt;
  if (s.price_usd_per_hour) r.sys.price = units::usd_per_hour(*s.price_usd_per_hour);

  auto& par = s.plan.par;
  const long long per_replica = static_cast<long long>(par.tp) * par.pp * par.cp;
  if (s.gpus && !s.dp_given) {
    if (*s.gpus % per_replica != 0)
      r.pre.fail(fmt::format("{} GPUs are not divisible by TP × PP × CP = {}", *s.gpus, per_replica));
    else
      par.dp = static_cast<int>(*s.gpus / per_replica);
  } else if (s.gpus && s.dp_given && *s.gpus != per_replica * par.dp) {
    r.pre.fail(fmt::format("{} GPUs ≠ TP × PP × DP × CP = {}", *s.gpus, per_replica * par.dp));
  }
  if (!global_batch_given) s.plan.global_batch = s.plan.micro_batch * par.dp;
  r.plan = s.plan;
  if (!r.pre.ok) {
    // Report every other problem of the layout too, not just the GPU count.
    const auto rest = model::check_training_layout(r.arch, r.plan, r.sys);
    for (const auto& reason : rest.reasons)
      if (reason.find("global batch") == std::string::npos) r.pre.fail(reason);
  }
  return r;
}

}  // namespace gpuplan::cli
