#pragma once
// Validation against published measurements (data/validation/*.json): runs each case through the same resolution
// and model as `gpuplan train`, compares the metric the source measured, and summarises the errors.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/accuracy_band.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::cli {

struct CaseResult {
  std::string id, source, model, gpu, layout, metric, unit, convention, note;
  std::string dev_case;  ///< the ../shared/validation/dev_cases.json entry the row comes from (a sweep gives many rows)
  double measured = 0;
  std::optional<double> predicted;
  std::optional<double> error;  ///< predicted / measured − 1
  std::optional<double> predicted_calibrated;  ///< with the GPU's calibration profile, where one exists
  std::optional<double> error_calibrated;
  std::string status;           ///< "ok", "infeasible", "not runnable"
  model::Regime regime;         ///< for the error bands (kind empty: not a band case)
  /// Issue #22's structure (uneven pipelines, parallel folding, partial and module recompute, MTP, activation
  /// offload, FP8/FP4 recipes, overlapped or scattered pipeline sends, the EP all-to-all overlap): what of it the case
  /// uses (empty: none), the nearest scenario expressible without it (before_layout, or why there is none) and its
  /// prediction (validate_before.cpp).
  std::string structure, before_layout, before_note;
  std::optional<double> predicted_before;
};

struct ValidationSummary {
  std::vector<CaseResult> cases;
  int evaluated = 0;
  double median_abs_error = 0;
  double max_abs_error = 0;
  double within_10 = 0;  ///< fraction with |error| ≤ 10%
  double within_25 = 0;
  int evaluated_calibrated = 0;  ///< cases predicted with a calibration profile too
  double median_abs_error_calibrated = 0;
  double max_abs_error_calibrated = 0;
  double median_abs_error_same_cases = 0;  ///< built-in defaults, over the calibrated cases only
  double max_abs_error_same_cases = 0;
  /// Scored per dev case instead of per row (inference: a dev case's sweep of rows scored by their median |error|).
  int dev_cases_evaluated = 0;
  double dev_case_median_abs_error = 0;
  double dev_case_max_abs_error = 0;
  int dev_cases_within_15 = 0;
};

/// Runs every case of a training validation set (training_cases.json).
/// With `data_dir`, a case on a GPU that has data/calibration/<gpu>/profile.json is predicted twice: with the
/// built-in defaults and with the profile (before / after calibration).
Result<ValidationSummary> validate_training(const std::string& cases_file, const hw::HardwareDb& db,
                                            const wl_io::ModelLibrary& lib, const std::string& data_dir = "");

/// The structure issue #22 made expressible that `plan` (the case's resolved plan) uses, as a comma-separated list
/// ("" when none), and the case's scenario without it: those keys removed (an interleaved schedule whose chunks then
/// split unevenly falls back to 1F1B, the layout the issue names as the nearest), then the case's own `before` object
/// applied as a JSON merge patch where the nearest layout needs more (an EP that divides DP × CP). Fills
/// `r.structure`, `r.predicted_before`, `r.before_layout` and `r.before_note`; `predict` prices a scenario or says why
/// it cannot (returns nullopt and sets the reason).
struct BeforePrediction {
  std::optional<double> value;
  std::string layout, why;
};
void predict_before(const nlohmann::json& scenario, const nlohmann::json* patch, const wl::TrainingPlan& plan,
                    const std::function<BeforePrediction(const nlohmann::json&)>& predict, CaseResult& r);

/// The moves of issue #22's structure over the priced cases of `s` (a Markdown section; "" when no case uses any).
std::string render_structure_moves(const ValidationSummary& s);

/// Runs the textbook's worked examples (textbook_cases.json) through the model's own formulas, with the textbook's
/// simplifying assumptions as explicit inputs; error = predicted − expected relative to the expected value, and a
/// case passes when it is within the precision the textbook states.
Result<ValidationSummary> validate_textbook(const std::string& cases_file, const wl_io::ModelLibrary& lib);

/// Our own NCCL collective measurements held out from the calibration: every sample of the collectives bench kept in
/// data/validation/measured/<gpu>/heldout-collectives-*.json (op, ranks, bytes, median time; measured after the
/// calibration's sweeps, at sizes between theirs and at theirs again, and never fitted), predicted by the communicator
/// the training and serving models use (the GPU's first node in the database), with the built-in link data and with
/// the GPU's calibration profile (data/calibration/<gpu>/profile.json).
/// `measured_root` replaces data/validation/measured as the folder of the <gpu>/ subfolders (tests' fixtures).
Result<ValidationSummary> validate_collectives(const std::string& data_dir, const hw::HardwareDb& db,
                                               const std::string& measured_root = "");

/// Whole-host runs (scripts/measure/run_node.sh, issue #30; any number of GPUs): the case files that
/// scripts/measure/node_cases.py writes beside the run's measurements in <measured_root>/<gpu>/ (default root:
/// data/validation/measured): node-x<N>-serving-cases.json and node-x<N>-moe-serving-cases.json (the inference case
/// format, run by validate_inference), node-x<N>-training-cases.json and node-x<N>-moe-training-cases.json (the
/// training format, run by validate_training), all with the GPU's calibration profile too. No such file: empty
/// summaries. The collectives of those runs need nothing here: their held-out sweep is a heldout-collectives-*.json
/// file, which validate_collectives reads.
struct NodeRunCases {
  ValidationSummary serving, moe_serving, training, moe_training;
  /// as validate_inference splits them by source
  std::vector<std::pair<std::string, ValidationSummary>> serving_by_source, moe_serving_by_source;
  std::vector<std::string> files;  ///< the case files read, sorted
};
Result<NodeRunCases> validate_node_runs(const std::string& data_dir, const hw::HardwareDb& db,
                                        const wl_io::ModelLibrary& lib, const std::string& measured_root = "");

/// Appends `extra`'s cases to `into` and summarises the union again (a shipped set plus the whole-host runs' cases).
void merge_cases(ValidationSummary& into, const ValidationSummary& extra);

/// Runs every runnable case of the inference set (inference_cases.json) through the serving model: prefill time,
/// decode step time, static-batch request latency, and offline max throughput under continuous batching.
/// `by_source` receives one summary per source key (same cases, split), in file order.
Result<ValidationSummary> validate_inference(const std::string& cases_file, const hw::HardwareDb& db,
                                             const wl_io::ModelLibrary& lib,
                                             std::vector<std::pair<std::string, ValidationSummary>>* by_source = nullptr,
                                             const std::string& data_dir = "");

/// Our own vision measurements (data/validation/measured/<gpu>/vision_*.json: torchvision inference in bf16, eager and
/// CUDA graph, batch 1-256; training steps under bf16 autocast) through the vision pricer with the GPU's calibration
/// profile, as `gpuplan serve` / `gpuplan train` run a vision model. Each case's `convention` says which
/// ("inference-graph", "inference-eager", "training", "training-ddp": PyTorch DDP inside one node).
Result<ValidationSummary> validate_vision(const std::string& data_dir, const hw::HardwareDb& db);

/// The cases of `all` grouped by their convention, each group summarised, in first-seen order.
std::vector<std::pair<std::string, ValidationSummary>> split_by_convention(const ValidationSummary& all);

/// Median and max |error| and the shares within 10% and 25% (the summary every validation set gets).
void summarise_validation(ValidationSummary& sum);

std::string render_validation_markdown(const ValidationSummary& s, const std::string& title);

namespace detail {
/// A case file as diagnostics name it: data/validation/<file> for the shipped sets, the path from data/validation/ on
/// for the whole-host runs' files under measured/<gpu>/, the path as given otherwise (a test's fixture).
std::string shown_path(const std::string& file);
}  // namespace detail

}  // namespace gpuplan::cli
