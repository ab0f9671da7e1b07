#pragma once
// One training evaluation as the GUI asks for it: the scenario (the same JSON object `gpuplan train --scenario`
// reads), the GPUs to compare, and what to compute besides the estimate (roofline, scaling sweep). Runs on a worker
// thread; every number comes from the model (estimate_training, ridge_point, attainable_performance, strong_scaling).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app_data.hpp"
#include "collectives_job.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/app/studies.hpp"
#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::gui {

struct TrainingRequest {
  json_io::Json scenario = json_io::Json::object();  ///< keys of docs/scenario.md
  std::vector<std::string> compare_gpus;  ///< up to 3 more GPU ids evaluated with the same plan (own default node)
  bool calibration = true;               ///< use data/calibration/<gpu>/profile.json when present
  bool scaling = true;                   ///< sweep DP for the scaling view
  bool collectives = true;               ///< collective cost vs message size on the scenario's tiers
  /// The step timeline's input pipeline (the "Step timeline" tab's DataLoader controls): CPU milliseconds per sample
  /// (0: not priced) and DataLoader workers per GPU (0: loaded in the training process).
  double loader_sample_ms = 0;
  int loader_workers = 0;
};

/// One GPU type evaluated with the request's plan.
struct GpuEvaluation {
  std::string gpu_id, gpu_name;
  std::string node_id;
  bool resolved = false;  ///< false: the hardware did not resolve (see the diagnostics)
  model::TrainingEstimate est;  ///< derivation only for the first (current) GPU
};

struct RooflineCurve {
  std::string gpu_name;
  double peak_FLOPps = 0, bandwidth_Bps = 0, ridge_FLOP_per_B = 0;
  std::vector<std::pair<double, double>> points;  ///< (FLOP/B, attainable FLOP/s), log-spaced, ridge included
  Derivation ridge;
};

// The strong-scaling study is the application layer's (app::strong_scaling_study).
using ScalingSample = app::ScalingSample;
using ScalingSeries = app::ScalingSeries;

struct TrainingResult {
  Diagnostics diags;               ///< decoding and resolution problems, notes (data directory, calibration)
  bool valid = false;              ///< the scenario resolved (the estimate below is meaningful)
  bool layout_ok = false;          ///< the GPU count divides into the layout (else DP is not defined)
  std::string model_name;
  long long gpus = 0;
  wl::TrainingPlan plan;
  std::vector<GpuEvaluation> gpus_evaluated;  ///< [0] = the scenario's own GPU
  std::vector<RooflineCurve> rooflines;       ///< one per evaluated GPU, at the plan's precision
  std::vector<ScalingSeries> scaling;         ///< one per evaluated GPU
  CollectivesResult collectives;              ///< on the scenario's own GPU and fabric
  std::shared_ptr<const app::ResolvedTraining> resolved;  ///< what the estimate ran on (Markdown export)
  /// The step and memory timelines of the scenario's own GPU (model/timeline.hpp); the memory timeline for each
  /// recompute mode (none, selective, full), the plan's own at plan.recompute. Not ok when the layout is invalid.
  model::StepTimeline timeline;
  std::vector<model::MemoryTimeline> memory_timelines;
};

/// Resolves and evaluates a request with the application layer's resolution code, the CLI's too
/// (app::resolve_training, load_calibration).
TrainingResult evaluate_training(const AppData& data, const TrainingRequest& req);

/// The label the panel shows for each scenario key (the training field table's, wl_io::training_key_label), used as
/// the "where" of diagnostics ("TP: error: ...").
std::string scenario_key_label(const std::string& key);

}  // namespace gpuplan::gui
