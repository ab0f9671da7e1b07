#pragma once
// Real-time multi-model pipelines (issue #25, deliverable 4): the stages of a perception stack — models priced by the
// vision pricer (model/vision.hpp), fixed CPU times — scheduled on the engines of one chip for one sensor frame, with
// the critical path, the deadline at the mean and at P99, and the slack. docs/pipelines.md states the model.
//
// - Engines: each stage runs on one engine ("gpu", "dla0", "dla1", "cpu0", "cpu1", …). Stages on one engine
//   serialise (non-preemptive, in file order among those ready: TensorRT runs one engine's contexts on one stream
//   each, a CPU thread runs its stages in order); different engines run in parallel.
// - List scheduling: a stage starts when every stage it depends on has finished and its engine is free; when several
//   are ready for a free engine the first in file order starts. All sensors' frames arrive at t = 0 (the capture
//   and transfer, where they matter, are stages of their own).
// - Shared memory bandwidth (a system-on-chip: GPU, DLAs and CPU share one LPDDR5 interface): a fluid model. Each
//   running stage demands d_i = bytes_i / t_i (its DRAM traffic over its isolated duration); while Σ d_i over the
//   stages running at once exceeds the memory's bandwidth BW, every running stage progresses at BW / Σ d_i of its
//   isolated rate (bandwidth shared in proportion to demand), otherwise at full rate. A discrete GPU has its own
//   HBM: no shared resource (the host CPU's DRAM is apart from it).
// - Temporal reuse: a stage with `every` = k runs on frames f ≡ 0 (mod k) and its consumers read its last output on
//   the others. The Gantt chart and the "mean" verdict are for frame 0, where every stage runs (the worst frame).
// - P99: Monte-Carlo over `frames` frames f = 0, 1, …, each stage's duration drawn from its jitter distribution
//   (lognormal, or normal truncated at 0, with the stage's mean and coefficient of variation), each frame scheduled
//   as above; P99 is the ⌈0.99·N⌉-th smallest end-to-end latency (the finish of the last stage that ran). The
//   generator is SplitMix64 seeded with `seed` and Box–Muller, written here, so the result is the same on every
//   platform and compiler (std::normal_distribution is not). Not mean × a constant: the P99 of a max over parallel
//   branches and a sum along the path comes out of the schedule.
// - One frame in flight: the model does not overlap frame f + 1 with frame f. `keeps_up` says whether every
//   engine's average work per frame fits in the sensor period (otherwise frames queue without bound).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"

namespace gpuplan::model {

enum class RtJitter : std::uint8_t { none, lognormal, normal };
const char* to_string(RtJitter j);

struct RtStage {
  std::string id;
  std::string engine;          ///< "gpu", "dla0", "cpu1", … (stages with the same engine serialise)
  units::Seconds mean{};       ///< isolated mean duration
  units::Bytes dram_bytes{};   ///< traffic to the shared memory (used only with RtPipeline::shared_bandwidth)
  RtJitter jitter = RtJitter::none;
  double cv = 0;               ///< coefficient of variation of the duration (σ / mean)
  std::vector<std::size_t> deps;  ///< indices of stages listed before this one
  int every = 1;               ///< runs on frames f with f mod every == 0
  std::string what;            ///< what it computes, for the report ("efficientnet-b4, int8, batch 4")
  Derivation derivation;       ///< how `mean` was priced
};

struct RtPipeline {
  std::vector<RtStage> stages;
  units::Seconds deadline{};  ///< end-to-end latency a frame must meet
  units::Seconds period{};    ///< the frame period (the fastest sensor's)
  std::optional<units::Bandwidth> shared_bandwidth;  ///< one memory shared by every engine (SoC)
};

struct RtOptions {
  int frames = 20000;
  std::uint64_t seed = 1;
  double quantile = 0.99;
};

struct RtStageRun {
  bool ran = false;
  double start_s = 0, finish_s = 0;
};

struct RtEngineLoad {
  std::string engine;
  units::Seconds busy_per_frame{};  ///< Σ mean / every over its stages (isolated durations)
  double utilisation = 0;           ///< busy_per_frame / period
};

struct RtSchedule {
  std::vector<RtStageRun> frame0;          ///< frame 0 (every stage runs) at mean durations
  units::Seconds latency_mean_frame0{};    ///< its end-to-end latency (the Gantt's makespan)
  std::vector<std::size_t> critical_path;  ///< stage indices, first to last
  units::Seconds slack_mean{};             ///< deadline − latency_mean_frame0
  units::Seconds latency_mc_mean{};        ///< mean end-to-end latency over the Monte-Carlo frames
  units::Seconds latency_p{};              ///< the quantile (P99) over the Monte-Carlo frames
  units::Seconds slack_p{};                ///< deadline − latency_p
  double miss_rate = 0;                    ///< fraction of Monte-Carlo frames over the deadline
  bool meets_mean = false, meets_p = false, keeps_up = false;
  std::vector<RtEngineLoad> engines;       ///< in order of first use
  RtOptions options;
  Derivation derivation;
};

/// One frame: which stages run (`runs`) and how long each takes alone (`durations_s`, isolated), scheduled as the
/// header says. Preconditions: deps name earlier stages; sizes match.
std::vector<RtStageRun> rt_schedule_frame(const RtPipeline& p, const std::vector<double>& durations_s,
                                          const std::vector<bool>& runs);

/// The schedule of frame 0 at mean durations, its critical path, the Monte-Carlo quantile and the verdicts.
RtSchedule rt_schedule(const RtPipeline& p, const RtOptions& o, Explain explain);

/// The q-quantile of a duration with mean `mean_s` and coefficient of variation `cv` under `j` (analytic; the
/// Monte-Carlo's check): lognormal σ² = ln(1 + cv²), μ = ln mean − σ²/2, Q = exp(μ + z_q·σ); normal mean·(1 + z_q·cv).
double rt_quantile(RtJitter j, double mean_s, double cv, double q);

/// FLOPs per frame of `heads` task heads on one backbone: shared, the backbone runs once (B + ΣH); separate, each
/// head has its own copy (heads·B + ΣH). The one formula the pipeline's sharing option and the drill use.
Estimate<units::Flops> backbone_sharing_flops(units::Flops backbone, units::Flops heads_total, int heads, bool shared,
                                              const Origin& origin);

/// The frame period of a sensor at `rate_Hz`: 1 / rate (30 FPS: 33.3 ms), the budget of a frame when one frame is in
/// flight.
Estimate<units::Seconds> frame_period(double rate_Hz, const Origin& origin);

/// The speedup a stage that takes `latency` needs to meet `deadline`: latency / deadline (> 1: it misses).
Estimate<double> deadline_speedup(units::Seconds latency, units::Seconds deadline, const Origin& origin);

/// Data-parallel scaling efficiency from measured times: t_1 / (n · t_n) (1 = perfect: n GPUs n times faster).
Estimate<double> scaling_efficiency(units::Seconds t_one, units::Seconds t_n, int n, const Origin& origin);

/// rt_quantile as an estimate with its derivation (the drill's and the docs' P99 of one stage).
Estimate<units::Seconds> stage_quantile(RtJitter j, units::Seconds mean, double cv, double q, const Origin& origin);

}  // namespace gpuplan::model
