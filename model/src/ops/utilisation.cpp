// MFU / HFU of a measured training step (utilisation.hpp). Definitions: Chowdhery et al. 2022 (PaLM), App. B — model
// FLOPs utilisation = observed throughput × model FLOPs per token / (N · peak); hardware FLOPs utilisation counts the
// recomputed forward too (Korthikanti et al. 2022 §5 use the same split).
#include "gpuplan/model/utilisation.hpp"

#include <cassert>
#include <string>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {

double utilisation(units::Flops flops, units::Seconds step, double gpus, units::FlopRate peak) {
  return flops.raw() / (step.raw() * gpus * peak.raw());
}

MeasuredUtilisation measured_utilisation(const TrainingEstimate& est, double tokens_per_step, double gpus,
                                         units::FlopRate peak, std::optional<units::Seconds> measured_step,
                                         std::optional<double> measured_tokens_per_s, Explain explain) {
  assert(measured_step.has_value() != measured_tokens_per_s.has_value() && "exactly one measurement");
  using units::format;
  MeasuredUtilisation r;
  r.peak = peak;
  r.gpus = gpus;
  r.model_flops_per_step = est.model_flops_per_step;
  r.hardware_flops_per_step = est.hardware_flops_per_step;
  r.step_time = measured_step ? *measured_step : units::Seconds(tokens_per_step / *measured_tokens_per_s);
  r.tokens_per_s = measured_tokens_per_s ? *measured_tokens_per_s : tokens_per_step / measured_step->raw();
  r.mfu = utilisation(est.model_flops_per_step, r.step_time, gpus, peak);
  r.hfu = utilisation(est.hardware_flops_per_step, r.step_time, gpus, peak);
  r.achieved_tflops_per_gpu = est.model_flops_per_step.raw() / (r.step_time.raw() * gpus) / 1e12;
  r.predicted_step_time = est.step_time;
  r.predicted_mfu = est.mfu;
  r.gap = est.step_time.raw() > 0 ? est.step_time.raw() / r.step_time.raw() - 1.0 : 0.0;
  if (explain == Explain::off) return r;

  Derivation& d = r.derivation;
  d.id = "mfu.measured";
  d.title = "MFU and HFU of the measured step";
  d.formula = "MFU = F_model / (t · N · P_peak) ; HFU = F_hw / (t · N · P_peak)";
  d.inputs = {
      {"F_model", format(est.model_flops_per_step), "model FLOPs per step: (6·N + 12·L·h_attn·s)·tokens, no recompute",
       Origin::derived("flops_per_token × global batch × sequence length")},
      {"F_hw", format(est.hardware_flops_per_step), "FLOPs executed per step: F_model + the recomputed forward",
       Origin::derived("estimate_training")},
      {"t", format(r.step_time),
       measured_step ? "measured step time" : fmt::format("tokens per step {} / measured {} tokens/s",
                                                          units::format_count(tokens_per_step),
                                                          units::format_number(*measured_tokens_per_s, 6)),
       Origin::measurement(measured_step ? "--measured-step-s" : "--measured-tokens-per-s")},
      {"N", units::format_number(gpus), "GPUs", Origin::user("the plan")},
      {"P_peak", format(peak), "dense peak per GPU at the plan's compute precision (not the 2:4-sparse figure)",
       Origin::datasheet("GPU file /dense_peak")}};
  d.result = fmt::format("MFU {}, HFU {} ({:.1f} model TFLOP/s per GPU)", format(units::Ratio(r.mfu)),
                         format(units::Ratio(r.hfu)), r.achieved_tflops_per_gpu);
  Derivation gap;
  gap.id = "mfu.gap";
  gap.title = "Gap to the model's own prediction";
  gap.formula = "gap = t_predicted / t_measured − 1";
  gap.inputs = {{"t_predicted", format(est.step_time), "the model's step time for this plan", Origin::derived("estimate_training")},
                {"t_measured", format(r.step_time), "measured", Origin::measurement("as given")}};
  gap.result = fmt::format("{:+.1f}% (predicted MFU {} vs measured {})", r.gap * 100.0, format(units::Ratio(est.mfu)),
                           format(units::Ratio(r.mfu)));
  gap.notes.push_back(r.gap > 0 ? "the model predicts a slower step than was measured"
                                : "the model predicts a faster step than was measured");
  d.children.push_back(std::move(gap));
  return r;
}

}  // namespace gpuplan::model
