#pragma once
// Internal to the vision commands: what cmd_vision.cpp (the flags, the dispatch, the device setup and `serve`) and
// vision_train.cpp (`train` and its input pipeline) share.
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/model/vision.hpp"
#include "gpuplan/wl_io/vision_io.hpp"
#include "vision_cmd.hpp"

namespace gpuplan::cli::vision_run {

namespace u = gpuplan::units;

inline const CLI::Option* given(const CLI::App& cmd, const std::string& name) {
  const CLI::Option* o = cmd.get_option_no_throw("--" + name);
  return o != nullptr && o->count() > 0 ? o : nullptr;
}

template <class T>
std::optional<T> value(const CLI::App& cmd, const std::string& name) {
  const CLI::Option* o = given(cmd, name);
  if (o == nullptr) return std::nullopt;
  return o->as<T>();
}

double gib(u::Bytes b);
u::Bytes capacity(const hw::GpuSpec& gpu);

struct Setup {
  std::string data_dir;
  hw::HardwareDb db;
  model::TrainingSystem sys;
  model::Device device;
  model::ServingPerfPlan launch;
};

/// Hardware, calibration profile, the sustained device and the per-kernel costs (measured where the profile has them).
bool setup(const GlobalOptions& g, const CLI::App& cmd, const std::string& gpu_name, bool no_calibration,
           Diagnostics& diags, Setup& s, const std::string& node = "");

std::optional<bool> parse_bool(const std::string& s);
nlohmann::json pass_json(const model::VisionPassCost& p);
Section pass_section(const std::string& title, const model::VisionPassCost& p);

/// `gpuplan serve` / `gpuplan train` with the vision model `m` (cmd_vision.cpp / vision_train.cpp).
int run_serve(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v, const wl_io::VisionEntry& m);
int run_train(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v, const wl_io::VisionEntry& m);

}  // namespace gpuplan::cli::vision_run
