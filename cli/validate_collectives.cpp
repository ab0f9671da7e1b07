// `gpuplan validate`: our own NCCL collective measurements held out from the calibration
// (data/validation/measured/<gpu>/heldout-collectives-*.json) predicted by the communicator the training and serving
// models use, with the built-in link data and with the GPU's calibration profile (validate.hpp validate_collectives).
#include "validate.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw/lookup.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/training.hpp"
#include "common.hpp"  // the application layer's names (resolution, drills, tables) unqualified
#include "gpuplan/app/resolve.hpp"

namespace gpuplan::cli {

Result<ValidationSummary> validate_collectives(const std::string& data_dir, const hw::HardwareDb& db,
                                               const std::string& measured_root) {
  namespace fs = std::filesystem;
  Diagnostics diags;
  ValidationSummary sum;
  const fs::path root = fs::path(data_dir) / "calibration";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return Result<ValidationSummary>(std::move(sum), std::move(diags));
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    const std::string gpu_id = dir.filename().string();
    const hw::GpuSpec* gpu = db.find_gpu(gpu_id);
    if (gpu == nullptr) continue;
    model::TrainingSystem sys;
    sys.db = &db;
    sys.gpu = gpu;
    sys.node = hw::first_node_of(db, gpu->info.id);
    if (sys.node == nullptr) continue;
    // The reference cases are the held-out sweeps (data/validation/measured/<gpu>/heldout-collectives-*.json): the
    // collectives bench run after the calibration's own sweeps and never fitted, at sizes between the calibration's
    // (offset half a step) and at the same sizes again (a repeat).
    const fs::path held =
        (measured_root.empty() ? fs::path(data_dir) / "validation" / "measured" : fs::path(measured_root)) / gpu_id;
    std::vector<fs::path> files;
    if (fs::is_directory(held, ec))
      for (const auto& e : fs::directory_iterator(held, ec)) {
        const std::string name = e.path().filename().string();
        if (e.is_regular_file() && name.rfind("heldout-collectives", 0) == 0 && e.path().extension() == ".json")
          files.push_back(e.path());
      }
    if (files.empty()) continue;
    std::sort(files.begin(), files.end());
    model::TrainingSystem cal = sys;
    const bool have_profile = load_calibration(data_dir, cal, false, diags);
    if (!have_profile) return Result<ValidationSummary>(std::move(diags));
    for (const auto& file : files) {
      auto s = calib::read_samples(file.string());
      if (!s.ok()) {
        for (const auto& d : s.diagnostics().items()) diags.add(d);
        continue;
      }
      std::string tag = file.stem().string().substr(std::string("heldout-collectives-").size());
      for (const auto& c : s->collectives) {
        const auto op = model::parse_collective(c.op);
        CaseResult r;
        r.id = fmt::format("{}-{}-{}gpu-{}-{}", gpu_id, c.op, c.ranks, units::format(units::bytes(c.bytes), units::BytePrefix::binary), tag);
        r.source = measured_root.empty() ? "data/validation/measured/" + gpu_id + "/" + file.filename().string()
                                         : file.string();
        r.gpu = gpu_id;
        r.layout = fmt::format("{} GPUs of {}", c.ranks, sys.node->info.id);
        r.metric = "collective_time_s";
        r.unit = "s";
        r.measured = c.median_s;
        if (!op || c.ranks < 2 || c.median_s <= 0) {
          r.status = "not runnable";
          r.note = "unknown op or fewer than 2 ranks";
          sum.cases.push_back(r);
          continue;
        }
        const auto predict = [&](const model::TrainingSystem& sy) {
          return model::collective_cost(*op, units::bytes(c.bytes), model::training_comm_group(c.ranks, 1, sy),
                                        model::CollectiveAlgorithm::automatic, Explain::off)
              .time.raw();
        };
        const double p = predict(sys);
        r.predicted = p;
        r.error = p / r.measured - 1.0;
        if (cal.scale_up_calibration) {
          const double pc = predict(cal);
          r.predicted_calibrated = pc;
          r.error_calibrated = pc / r.measured - 1.0;
        }
        r.status = "ok";
        sum.cases.push_back(r);
      }
    }
  }
  summarise_validation(sum);
  if (diags.has_errors()) return Result<ValidationSummary>(std::move(diags));
  return Result<ValidationSummary>(std::move(sum), std::move(diags));
}

}  // namespace gpuplan::cli
