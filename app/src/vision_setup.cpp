#include "gpuplan/app/vision_setup.hpp"

#include "gpuplan/app/hardware_setup.hpp"
#include "gpuplan/model/vision.hpp"

namespace gpuplan::app {

bool vision_device(const std::string& data_dir, const hw::HardwareDb& db, const std::string& gpu, bool no_calibration,
                   Diagnostics& diags, model::TrainingSystem& sys, model::Device& device, model::ServingPerfPlan& launch,
                   const std::string& node) {
  auto where = [](const std::string& key) { return "--" + key; };
  if (!resolve_hardware(gpu, node, "", db, where, diags, sys)) return false;
  if (!load_calibration(data_dir, sys, no_calibration, diags)) return false;
  // PyTorch's scaled_dot_product_attention runs FlashAttention-2 kernels (ViT's attention).
  device = model::sustained_device(*sys.gpu, sys.efficiency, wl::AttentionKernel::fa2);
  if (sys.efficiency) model::use_measured_overheads(launch, *sys.efficiency);
  return true;
}

}  // namespace gpuplan::app
