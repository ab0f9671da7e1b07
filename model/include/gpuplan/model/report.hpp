#pragma once
// Budget report (`gpuplan report`, docs/report.md): for each training run and serving deployment of a plan and each
// hardware option, the cheapest way to do it that meets the run's deadline or the deployment's SLA; then the cheapest
// option per item and the totals. The numbers come from search_training (every valid layout on every GPU count of
// the range, ranked by cost under the deadline) and plan_serving (replica layout, batch and replica count under the
// SLA): this file only picks, sums and explains — one formula, one place.
//
// Pure: no IO. The inputs are resolved (typed model, plan and system per option); infeasible options are results
// with reasons, never errors.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/accuracy_band.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/search.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::model {

/// A hardware option to compare: a kind of node (or cluster) at a price.
struct ReportOption {
  std::string id;    ///< "h100"
  std::string name;  ///< "NVIDIA H100 SXM5 80GB (dgx-h100)"
  std::optional<long long> max_gpus;  ///< the most GPUs of this kind one can get (training and serving alike)
};

/// One training run on one option, resolved.
struct TrainingCellInput {
  /// Why the run cannot be set up on this option (e.g. a precision the GPU lacks). Non-empty: nothing is evaluated.
  std::vector<std::string> unresolved;
  TrainingSystem sys;         ///< GPU, node, price, calibration of the option
  wl::TrainingPlan base;      ///< the run's plan with its token budget; the search varies the layout
  SearchSpace space;          ///< the dimensions the run fixes, and the GPU counts to try
  std::string price_origin;   ///< where the price per GPU-hour comes from (file + pointer, or the plan)
};

struct TrainingRequest {
  std::string id, name;
  wl::TransformerArch arch;
  double tokens = 0;          ///< the token budget
  double deadline_days = 0;
  std::vector<TrainingCellInput> cells;  ///< one per option, in the order of ReportRequest::options
};

/// One serving deployment on one option, resolved.
struct ServingCellInput {
  std::vector<std::string> unresolved;
  TrainingSystem sys;
  ServingPerfPlan perf;
  ServingPlanOptions options;
  std::string price_origin;
};

struct ServingRequest {
  std::string id, name;
  wl::TransformerArch arch;
  ParameterCounts params;
  Traffic traffic;
  Sla sla;
  std::vector<ServingCellInput> cells;  ///< one per option
};

struct ReportRequest {
  std::vector<ReportOption> options;
  std::vector<TrainingRequest> training;
  std::vector<ServingRequest> serving;
  unsigned threads = 0;  ///< for the layout searches; 0 = all cores
  /// Called after each item × option: cells done, cells in all, "item on option".
  std::function<void(std::size_t done, std::size_t total, const std::string& what)> progress;
  Explain explain = Explain::off;  ///< on: each cell keeps the full derivation of its numbers
  /// Validation residuals (data/accuracy/bands.json, loaded by the CLI): each cell gets its regime's band, and the
  /// cheapest option is chosen on the expected cost (estimate × the regime's median measured/predicted time).
  std::vector<BandCase> bands;
};

/// The cheapest layout of one training run on one option.
struct TrainingCell {
  bool feasible = false;
  std::vector<std::string> reasons;  ///< why not, when infeasible
  std::optional<Layout> layout;      ///< the chosen layout (absent when infeasible)
  std::string layout_text;           ///< describe(layout)
  long long gpus = 0;
  units::Seconds step_time{}, time_to_train{};
  double gpu_hours = 0;
  std::optional<units::Usd> cost;    ///< absent without a price
  std::optional<units::Joules> energy;  ///< absent without a TDP
  units::Bytes peak_memory{}, capacity{};  ///< per GPU; headroom = capacity − peak
  double mfu = 0;
  double tokens_per_s = 0;
  std::optional<units::UsdPerSecond> price;  ///< per GPU
  std::string price_origin;
  std::vector<long long> gpu_counts;  ///< the GPU counts searched
  std::uint64_t layouts_searched = 0, layouts_meeting_deadline = 0;
  Derivation derivation;  ///< the choice; with Explain::on its child is the estimate's full tree
  std::optional<Band> band;  ///< the error band of its regime (absent without band data)
};

/// The cheapest deployment of one serving item on one option (plan_serving's best).
struct ServingCell {
  bool feasible = false;
  std::vector<std::string> reasons;
  bool has_numbers = false;  ///< a layout was evaluated (the best achievable when infeasible)
  int tp = 1, pp = 1;
  std::int64_t replicas = 0, gpus = 0, batch = 0;
  units::Seconds ttft{}, itl{};
  units::UsdPerSecond cost_rate{};  ///< all GPUs of the deployment
  double cost_per_mtok_usd = 0;     ///< per million output tokens
  double output_tokens_per_s = 0;   ///< whole deployment
  std::optional<units::UsdPerSecond> price;  ///< per GPU
  std::string price_origin;
  Derivation derivation;
  std::optional<Band> band;  ///< the error band of its regime (absent without band data)
};

/// The factor a cell's estimate is multiplied by for its expected value: the median measured/predicted time of its
/// regime (1 without a band).
template <class Cell>
double expected_factor(const Cell& c) {
  return c.band ? c.band->p50 : 1.0;
}

template <class Cell>
struct ItemReport {
  std::string id, name;
  std::vector<Cell> cells;            ///< one per option
  std::optional<std::size_t> cheapest;  ///< index of the cheapest feasible option
};

/// Everything on one option: whether it can do every item, and what that costs.
struct OptionTotal {
  bool covers_all = false;
  units::Usd training_cost{};
  double training_gpu_hours = 0;
  units::UsdPerSecond serving_cost_rate{};
  std::int64_t serving_gpus = 0;
};

struct ReportResult {
  std::vector<ReportOption> options;
  std::vector<ItemReport<TrainingCell>> training;
  std::vector<ItemReport<ServingCell>> serving;
  bool all_feasible = false;  ///< every item has a feasible option
  // Totals over the items, each on its cheapest feasible option (items with none are left out).
  units::Usd training_cost{};
  double training_gpu_hours = 0;
  units::Joules training_energy{};
  units::Seconds training_time_longest{};  ///< the longest of the chosen runs (they may run side by side)
  units::UsdPerSecond serving_cost_rate{};
  std::int64_t serving_gpus = 0;
  /// The totals' range: the sum of each chosen cell's p10 and p90 (a conservative range: errors of one regime move
  /// together). Equal to the totals without band data.
  units::Usd training_cost_p10{}, training_cost_p90{};
  units::UsdPerSecond serving_cost_rate_p10{}, serving_cost_rate_p90{};
  std::vector<OptionTotal> per_option;
  Derivation totals;
};

/// The report: every item on every option, the cheapest feasible option per item (lowest expected training cost —
/// GPU-hours when no price is known — or lowest expected serving cost rate, the estimate × expected_factor; ties go to
/// the earlier option), and the totals.
ReportResult build_report(const ReportRequest& request);

/// Hours in the 30-day month the report uses to turn a serving cost rate into a monthly figure.
inline constexpr double kHoursPerMonth = 720.0;

}  // namespace gpuplan::model
