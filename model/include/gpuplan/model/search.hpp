#pragma once
// Parallel-layout search (DESIGN.md §6 "search"): enumerate every valid layout of a model on N GPUs — TP, PP, DP,
// CP, EP, virtual pipeline stages, micro-batch, recomputation, ZeRO stage, sequence parallelism — evaluate each with
// the training model, prune by memory and rank by step time, cost or tokens per dollar.
//
// Speed: a FastTrainingEvaluator computes each term of the step (the layer costs of one micro-batch, one collective of
// each kind, the optimizer pass, the activation sums, the pipeline stage shapes) once per key of the few layout sizes
// it depends on and caches it; a layout is then plain arithmetic, derivations off and no allocation. It calls the same
// composition code as estimate_training, so its step time and memory are bit-identical to estimate_training's
// (tests/model/test_search.cpp checks it on random layouts). search_training spreads the work over threads; its
// result does not depend on the thread count (a total order ranks the points: objective, then peak memory, then the
// layout tuple).
//
// Pure: no IO. Progress and cancellation are a callback and an atomic flag the caller owns (the CLI maps Ctrl-C onto
// the flag). CPU offload of the optimizer is a dimension (with ZeRO ≥ 1); activation offload is not modelled.
#include <atomic>
#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/units.hpp"
#include "gpuplan/model/training.hpp"

namespace gpuplan::model {

/// The sizes and switches the search varies; everything else comes from the base plan. Ordered member-wise in the
/// order of declaration: the last tie-break of the ranking.
struct Layout {
  long long gpus = 1;
  int tp = 1, pp = 1, dp = 1, cp = 1, ep = 1;
  int virtual_stages = 1;  ///< > 1: the interleaved schedule with this many model chunks per stage
  std::int64_t micro_batch = 1;
  bool sequence_parallel = false;
  wl::Recompute recompute = wl::Recompute::none;
  wl::ZeroStage zero = wl::ZeroStage::none;
  wl::Offload offload = wl::Offload::none;  ///< CPU offload of the optimizer (needs ZeRO ≥ 1)
  bool dualpipe = false;   ///< the DualPipe schedule (virtual_stages 1)
  /// The routed experts' tensor parallel size under MoE parallel folding (Parallelism::etp): 0 = the attention's TP.
  /// Last, so that layouts without folding keep their order.
  int etp = 0;
  /// The layer split over the pipeline stages, as Megatron-LM sets it (wl::PipelineSplit): the decoder layers of the
  /// first and last stage (--decoder-first/last-pipeline-num-layers; 0 = not set) or the embedding and the loss
  /// counted as a layer each (--account-for-embedding/loss-in-pipeline-split). All unset: the even split, or the base
  /// plan's pipeline layout string, which a layout then keeps. Last, so that layouts at one split keep their order.
  int first_stage_layers = 0, last_stage_layers = 0;
  bool embedding_as_layer = false, loss_as_layer = false;
  [[nodiscard]] bool split_set() const {
    return first_stage_layers > 0 || last_stage_layers > 0 || embedding_as_layer || loss_as_layer;
  }
  friend auto operator<=>(const Layout&, const Layout&) = default;
};

/// `base` with the layout's sizes (schedule DualPipe when the layout says so, else interleaved iff virtual_stages > 1).
wl::TrainingPlan with_layout(const wl::TrainingPlan& base, const Layout& l);
/// with_layout in place: the layout's fields of `plan` set, every other field kept (the search's evaluator keeps one
/// plan and sets each layout on it: a whole plan copied per layout cost more than the layout's rules).
void apply_layout(wl::TrainingPlan& plan, const Layout& l);
/// The layout of a plan.
Layout layout_of(const wl::TrainingPlan& plan);
/// "TP 8 · PP 4 (v=2) · DP 32 · CP 1 · SP · micro 1 · recompute selective · ZeRO 1" (and the layer split when set).
std::string describe(const Layout& l);
/// The layout's layer split as the Megatron-LM flags that set it ("--decoder-last-pipeline-num-layers 1"); "" for
/// the even split.
std::string megatron_split_flags(const Layout& l);

/// Exposed communication per kind, in the order of TrainingEstimate::comm.
struct CommExposed {
  units::Seconds tp{}, cp{}, ep{}, pp{}, dp{};
};

/// What the fast evaluator reports for one layout: the same numbers estimate_training gives, without strings.
struct LayoutScore {
  bool valid = false;  ///< check_training_layout passes and the step time evaluates
  bool fits = false;   ///< peak memory per GPU ≤ capacity (the memory model of training_memory)
  units::Seconds step_time{};
  StepBreakdown step;
  CommExposed comm;
  std::int64_t micro_batches = 0;
  double tokens_per_s = 0;
  double mfu = 0;
  units::Bytes memory{};    ///< peak per GPU on the heaviest pipeline stage
  units::Bytes capacity{};
  bool has_time_to_train = false;  ///< the base plan has a token budget
  units::Seconds time_to_train{};
  bool has_cost = false;           ///< ... and a price is known
  units::Usd cost{};
  bool has_price = false;          ///< a price per GPU-hour is known (the system's, else the GPU file's)
  double tokens_per_usd = 0;       ///< tokens/s ÷ (GPUs · price per second)
};

/// Evaluates layouts of one (model, base plan, system) fast. Not thread-safe (its caches are mutable): one per
/// thread. `arch` and `sys` must outlive it.
class FastTrainingEvaluator {
 public:
  FastTrainingEvaluator(const wl::TransformerArch& arch, const wl::TrainingPlan& base, const TrainingSystem& sys);
  ~FastTrainingEvaluator();
  FastTrainingEvaluator(const FastTrainingEvaluator&) = delete;
  FastTrainingEvaluator& operator=(const FastTrainingEvaluator&) = delete;
  FastTrainingEvaluator(FastTrainingEvaluator&&) noexcept;
  FastTrainingEvaluator& operator=(FastTrainingEvaluator&&) noexcept;

  /// The score of with_layout(base, l): step time, breakdown, memory and fit exactly as
  /// estimate_training(arch, with_layout(base, l), sys, Explain::off) computes them.
  LayoutScore evaluate(const Layout& l);
  /// Cached terms so far (for tests and the benchmark).
  [[nodiscard]] std::size_t cached_terms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

enum class RankBy { time, cost, tokens_per_usd };
std::string to_string(RankBy r);

/// Which layouts to enumerate. Every list empty = every valid value; a non-empty list restricts that dimension.
struct SearchSpace {
  std::vector<long long> gpus;  ///< GPU counts (at least one)
  std::vector<int> tp, pp, dp, cp, ep, virtual_stages;
  /// Expert TP values to try (0 = the attention's TP); empty: 0 and, for an MoE model at TP > 1, 1 (full folding:
  /// Megatron-Bridge's MoE recipes run expert TP 1 beside attention TP 2-8).
  std::vector<int> etp;
  std::vector<std::int64_t> micro_batch;
  std::vector<wl::Recompute> recompute;  ///< empty: none, full, and selective unless flash attention makes it none
  std::vector<wl::ZeroStage> zero;       ///< empty: 0–3 where DP·CP > 1, else 0
  std::vector<bool> sequence_parallel;   ///< empty: off, and on where TP > 1
  std::vector<wl::Offload> offload;      ///< empty: off, and CPU offload with ZeRO ≥ 1 where the system allows it
  /// DualPipe or not (with virtual stages 1). Empty: both for MoE models where PP is even (DualPipe's gain is hiding
  /// the expert-parallel all-to-all), only not otherwise.
  std::vector<bool> dualpipe;
  /// The layer split as a dimension (Layout's split fields), at each PP and virtual-stage count: the even split, the
  /// embedding and/or the loss counted as a layer, and the first and/or last stage carrying up to max_stage_deficit
  /// layers fewer than the middle stages, which divide the rest evenly; each assignment of layers to chunks once.
  /// Off, or a base plan that sets a split: the base plan's split only.
  bool vary_split = true;
  /// The most layers the first or last stage carries below a middle stage: the embedding, the output head with the
  /// loss, and an MTP module each weigh about a layer (Megatron-LM's account_for_embedding/loss count one each;
  /// Megatron-Bridge's DeepSeek-V3 recipe at PP 16 takes 3 off the last stage, which holds the head, loss and MTP).
  int max_stage_deficit = 4;
};

struct SearchOptions {
  RankBy rank_by = RankBy::time;
  /// With a token budget in the base plan: only layouts that train it within the deadline rank.
  std::optional<units::Seconds> deadline;
  int top = 10;            ///< best layouts to return
  bool keep_all = false;   ///< also return every evaluated layout (for CSV)
  unsigned threads = 0;    ///< 0: std::thread::hardware_concurrency()
  /// Set by the caller to stop early (e.g. on SIGINT): the result then holds the best so far, `cancelled` true.
  const std::atomic<bool>* cancel = nullptr;
  /// Called on the calling thread between units of work: layouts evaluated so far, layouts in the space.
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
};

/// Every layout search_training would evaluate, in its enumeration order.
/// `sys` decides whether CPU offload is enumerated when the space leaves it open (nullptr: not enumerated).
std::vector<Layout> enumerate_layouts(const wl::TransformerArch& arch, const wl::TrainingPlan& base,
                                      const SearchSpace& space, const TrainingSystem* sys = nullptr);

/// One evaluated layout. `rank_class`: 0 eligible (valid, fits, meets the deadline), 1 fits but misses the deadline,
/// 2 does not fit, 3 invalid.
struct SearchPoint {
  Layout layout;
  LayoutScore score;
  double objective = 0;  ///< what the ranking sorts by, ascending (rank_by time: step seconds; cost: USD per token;
                         ///< tokens per USD: its negative)
  int rank_class = 3;
};

/// An evaluated layout without its numbers (FastTrainingEvaluator::evaluate gives them again, bit for bit): what
/// keep_all returns, a fifth of a SearchPoint's size.
struct RankedLayout {
  Layout layout;
  double objective = 0;
  int rank_class = 3;
  double memory_bytes = 0;  ///< peak per GPU (the tie-break before the layout tuple)
};

/// The ranking's total order: rank_class, then objective, then peak memory (more headroom first), then the layout
/// tuple.
bool ranks_before(const SearchPoint& a, const SearchPoint& b);
bool ranks_before(const RankedLayout& a, const RankedLayout& b);

struct SearchResult {
  std::string error;                  ///< the search could not run (e.g. ranking by cost without a price)
  std::vector<SearchPoint> top;       ///< best first, eligible layouts only, at most options.top
  std::vector<RankedLayout> all;      ///< keep_all: every evaluated layout in rank order
  std::optional<SearchPoint> least_memory;  ///< the valid layout with the smallest peak memory (when none fits)
  std::optional<SearchPoint> fastest_fitting;  ///< the fitting layout with the shortest time to train (deadline)
  std::vector<std::string> notes;     ///< what the space left out and why nothing may rank
  std::uint64_t total = 0;            ///< layouts in the space
  std::uint64_t evaluated = 0, valid = 0, fitting = 0, eligible = 0;
  unsigned threads = 1;
  bool cancelled = false;
};

/// Enumerates `space` over `base` (its seq, global batch, precision, optimizer, kernels, overlap switches and token
/// budget stay fixed), evaluates every layout with FastTrainingEvaluator and ranks them.
SearchResult search_training(const wl::TransformerArch& arch, const wl::TrainingPlan& base, const TrainingSystem& sys,
                             const SearchSpace& space, const SearchOptions& options = {});

/// One term of the step where two layouts differ: its seconds in the first and in the second.
struct TermDelta {
  std::string term;
  units::Seconds first{}, second{};
};

/// Why one layout beats another: the step-time terms that differ (they sum to the step-time difference), largest
/// difference first, and the memory headroom of each.
struct LayoutComparison {
  std::vector<std::string> changes;  ///< "PP 4 → 8", ...
  std::vector<TermDelta> terms;
  units::Seconds step_first{}, step_second{};
  units::Bytes headroom_first{}, headroom_second{};
};
LayoutComparison compare_layouts(const Layout& la, const TrainingEstimate& a, const Layout& lb,
                                 const TrainingEstimate& b);

}  // namespace gpuplan::model
