#pragma once
// Utilisation from a measurement: MFU and HFU of a training step whose time (or token throughput) was measured, with
// the FLOPs of the model's own count (flops_per_token via estimate_training) and the GPU's dense peak, and the gap to
// the model's own prediction of the same step.
#include <optional>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::model {

/// The fraction of `gpus` GPUs' dense peak `peak` that `flops` per step in `step` seconds is:
/// U = F / (t · N · P_peak). MFU with the model FLOPs (6·N·T + attention, no recompute), HFU with the FLOPs the
/// hardware executes (recomputation included). The one formula of both (estimate_training uses it too).
double utilisation(units::Flops flops, units::Seconds step, double gpus, units::FlopRate peak);

struct MeasuredUtilisation {
  units::Seconds step_time{};  ///< measured (given, or tokens per step / measured tokens/s)
  double tokens_per_s = 0;     ///< measured, all GPUs
  double mfu = 0, hfu = 0;     ///< from the measurement
  double achieved_tflops_per_gpu = 0;  ///< model FLOPs per step / (t · N) in TFLOP/s (the MFU numerator per GPU)
  units::FlopRate peak{};
  double gpus = 0;
  units::Flops model_flops_per_step{}, hardware_flops_per_step{};
  units::Seconds predicted_step_time{};  ///< the model's own estimate of the same step
  double predicted_mfu = 0;
  double gap = 0;  ///< predicted / measured step time − 1 (> 0: the model is slower than the measurement)
  Derivation derivation;
};

/// MFU, HFU and the gap to the prediction of a measured step of the plan `est` was estimated for, on `gpus` GPUs of
/// dense peak `peak` (the plan's compute precision; GpuSpec::dense_peak, never the 2:4-sparse figure). Give the
/// step time or the token throughput of all GPUs (exactly one; tokens per step = global batch × sequence length).
MeasuredUtilisation measured_utilisation(const TrainingEstimate& est, double tokens_per_step, double gpus,
                                         units::FlopRate peak, std::optional<units::Seconds> measured_step,
                                         std::optional<double> measured_tokens_per_s, Explain explain = Explain::on);

}  // namespace gpuplan::model
