#pragma once
// Internal to `gpuplan train` (cmd_train.cpp: its options and the dispatch; train_output.cpp: one plan's report, JSON,
// CSV and timelines; train_search.cpp: --search and --sweep): the flags and the entry points the three files share.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/model/accuracy_band.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "scenario_flags.hpp"
#include "timeline_render.hpp"

namespace gpuplan::cli::train_cmd {

struct TrainFlags {
  std::string scenario;
  ScenarioFlags keys;               ///< one flag per key of the training field table (wl_io::training_fields)
  std::optional<std::string> gpus;  ///< --gpus: one count, or with --search a range (parse_gpu_counts)
  bool no_calibration = false;
  // --search
  bool search = false;
  long long top = 10;
  std::optional<std::string> rank_by, search_csv;
  std::optional<double> deadline_days;
  long long threads = 0;
  std::optional<long long> cancel_after;  ///< test hook: raise SIGINT after this many layouts
  std::vector<std::string> sweep;  ///< --sweep KEY=RANGE (repeatable: a grid)
  std::optional<std::string> megatron_args;  ///< --megatron-args FILE|-
  std::vector<std::string> megatron_typed;   ///< Megatron-LM flags typed among ours (CLI11's extras)
  std::optional<std::string> timeline, memory_timeline;  ///< --timeline / --memory-timeline FORMAT
  std::optional<std::string> stack;          ///< --stack amp,flash,...: the optimisation stack (train_stack.hpp)
  std::optional<double> loader_sample_ms;    ///< --loader-sample-ms: CPU cost of one sample (--stack, --timeline)
  std::optional<long long> loader_workers;   ///< --loader-workers: DataLoader workers per GPU (with --timeline)
};

/// The JSON object of one estimate (the stable keys of docs/cli.md).
nlohmann::ordered_json estimate_json(const wl::TransformerArch& arch, const model::TrainingSystem& sys,
                                     const wl::TrainingPlan& plan, const model::TrainingEstimate& est, bool explain,
                                     const model::Band* band = nullptr);

/// One plan's report in --format (text, Markdown, JSON, CSV), or with `timeline` its step or memory timeline.
int run_single(const GlobalOptions& g, const wl_io::TrainingScenario& s, const ResolvedTraining& r,
               const std::optional<std::pair<bool, TimelineFormat>>& timeline = std::nullopt,
               const model::TextLoader& loader = {}, int loader_workers = 0);

/// `N`, `A..B` (A, 2A, 4A, ... ≤ B) or `A..B:S` (A, A+S, ... ≤ B). Empty with `error` set when it does not parse.
std::vector<long long> parse_gpu_counts(const std::string& text, std::string& error);

/// `train --search`: every valid layout at the GPU counts, ranked.
int run_search(const GlobalOptions& g, const TrainFlags& f, const nlohmann::json& j,
               const std::vector<long long>& gpu_counts, const ResolvedTraining& r, Diagnostics& diags);

/// `train --sweep`: one estimate per point of the grid, one row per point (docs/cli.md).
int run_train_sweep(const GlobalOptions& g, const TrainFlags& f, const nlohmann::json& j,
                    std::map<std::string, std::string> origin, const std::string& file, const std::string& dir);

}  // namespace gpuplan::cli::train_cmd
