#pragma once
// The application layer of `gpuplan pipeline` and of the GUI's Pipeline tab: resolve a decoded pipeline file on one
// chip — price every model stage with the vision pricer (model/vision.hpp, the same call `gpuplan serve -m <vision model>`
// makes), turn fixed CPU times and the file's jitter into model::RtStage, map engines onto the hardware (a DLA stage
// on a chip without DLAs runs on the GPU, as TensorRT's GPU fallback does) — then schedule it (model/realtime.hpp).
// No CLI11, no Qt, no printing: the CLI renders the result, the GUI calls evaluate_pipeline on a worker thread.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/realtime.hpp"
#include "gpuplan/wl_io/pipeline_io.hpp"

namespace gpuplan::app {

/// Options that override the file's `options` (the GUI's toggles; the CLI's --share-backbone etc.).
struct PipelineOverrides {
  std::optional<bool> share_backbone, int8, fusion, cuda_graphs, temporal_reuse;
};

struct PipelineRequest {
  std::string data_dir;
  const hw::HardwareDb* db = nullptr;
  wl_io::PipelineSpec spec;
  std::string gpu, node;  ///< both empty: the file's `hardware`
  bool no_calibration = false;
  PipelineOverrides overrides;
  model::RtOptions rt;
  Explain explain = Explain::off;
};

struct PipelineStageInfo {
  std::string id;
  std::string engine_asked;  ///< as in the file ("dla0")
  std::size_t rt_index = 0;  ///< index in PipelineResult::rt.stages (npos: not run, merged into its heads)
  units::Flops model_flops{};  ///< 2 × MACs × batch of what it runs (0 for a fixed time)
  std::string precision;     ///< of a model stage ("" for a fixed time)
};

struct PipelineResult {
  wl_io::PipelineSpec spec;  ///< options as run (file + overrides)
  const hw::GpuSpec* gpu = nullptr;
  model::RtPipeline rt;
  model::RtSchedule schedule;
  std::vector<PipelineStageInfo> stages;  ///< one per stage of the file
  /// Backbone sharing: model FLOPs (2·MACs) per frame of all model stages, as run, with every backbone shared and
  /// with a backbone copy per head (equal when no stage is a head).
  units::Flops flops_as_run{}, flops_shared{}, flops_separate{};
  Derivation flops_derivation;
};

/// The pipeline file at `path` decoded against the vision library of `data_dir` (`shown`: the file's name in messages).
/// The library's and the file's diagnostics, in that order.
Result<wl_io::PipelineSpec> load_pipeline_spec(const std::string& data_dir, const std::string& path,
                                               const std::string& shown);

/// Prices and schedules. Errors (unknown GPU, a DLA index the chip lacks, a precision the engine has no rate for)
/// name the file's JSON pointer or the flag.
Result<PipelineResult> evaluate_pipeline(const PipelineRequest& req);

}  // namespace gpuplan::app
