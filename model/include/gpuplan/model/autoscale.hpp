#pragma once
// A fleet of serving replicas under time-varying load, scaled by a policy (`gpuplan autoscale`): each replica is the
// request-level engine of simulate.hpp (vLLM v1's scheduler over forward_cost), requests are routed on arrival to the
// ready replica with the fewest requests in it, and an autoscaler looks at the fleet every `interval_s` and starts or
// drains replicas; a started replica takes `cold_start_s` to serve. Pure: no IO.
//
// Sources:
//  [HPA]    Kubernetes Horizontal Pod Autoscaler, "Algorithm details" (kubernetes.io/docs/tasks/run-application/
//           horizontal-pod-autoscale/): desiredReplicas = ceil(currentReplicas × currentMetricValue /
//           desiredMetricValue), with a tolerance band around the target and a scale-down stabilisation window.
//  [Dynamo] NVIDIA Dynamo's planner (github.com/ai-dynamo/dynamo): scales prefill and decode workers on queue depth
//           and KV-cache utilisation, with adjustment intervals.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/model/simulate.hpp"

namespace gpuplan::model {

/// A request rate over time: a built-in diurnal curve (a raised cosine between trough and peak, the peak at
/// `peak_hour`, period one day) or points (hour, requests/s) joined linearly, held flat before the first and after
/// the last.
struct RateCurve {
  enum class Kind { diurnal, points };
  Kind kind = Kind::diurnal;
  double peak_per_s = 1, trough_per_s = 1, peak_hour = 14;  ///< diurnal
  std::vector<std::pair<double, double>> points;            ///< points: (hour, req/s), hours ascending
  /// λ(t), requests per second at `t_s` seconds from midnight: diurnal λ = trough + (peak − trough)·(1 + cos(2π(h −
  /// peak_hour)/24))/2 with h = t/3600.
  [[nodiscard]] double rate_at(double t_s) const;
  [[nodiscard]] double max_rate() const;
};

/// Requests arriving as a non-homogeneous Poisson process of rate `curve` over [0, duration_s), by thinning (Lewis &
/// Shedler, Naval Research Logistics Quarterly 26(3), 1979: candidates at the peak rate, each kept with probability
/// λ(t)/λ_max), lengths drawn as in generate_requests; the same seed gives the same requests everywhere.
std::vector<SimRequest> generate_curve_requests(const RateCurve& curve, double duration_s, const LengthSampler& input,
                                                const LengthSampler& output, std::uint64_t seed);

/// How the autoscaler decides. Every `interval_s` it reads the metric over the ready replicas (those serving, not
/// draining), the replicas it would need are desired = ⌈ready × metric / target⌉ [HPA], clamped to [min, max]. It
/// scales up to `desired` when metric > scale_up_at and the last scale-up was at least up_cooldown_s ago; it scales down
/// when metric < scale_down_at and the last scale event of either kind was at least down_cooldown_s ago, and then only
/// to the most replicas any evaluation of the last down_cooldown_s recommended (HPA's scale-down stabilisation window:
/// replicas that have just become ready and are still empty are not drained at once). Starting replicas count towards
/// the fleet (they are not started twice); a scale-down cancels starting replicas first (the newest), then drains the
/// ready ones with the fewest requests (they take no new requests and stop when empty).
struct AutoscalePolicy {
  enum class Metric {
    queue,        ///< requests in the replica (waiting + running) per ready replica: the router's load
    utilisation,  ///< KV blocks in use / KV blocks, the mean over ready replicas: the resource that caps the batch
  };
  Metric metric = Metric::queue;
  double target = 1;
  double scale_up_at = 1, scale_down_at = 0.5;
  std::int64_t min_replicas = 1, max_replicas = 1, initial_replicas = 1;
  double cold_start_s = 300;
  double interval_s = 30;
  double up_cooldown_s = 0, down_cooldown_s = 0;
  bool enabled = true;  ///< false: a fixed fleet of initial_replicas, never scaled
};

/// Which requests count as missing the SLA (0 = no target): TTFT, the request's mean inter-token latency (TPOT, (E2E −
/// TTFT)/(out − 1)) and E2E. A minute (by arrival) is in violation when more than 1 − percentile of its requests miss.
struct SlaTargets {
  double ttft_s = 0, tpot_s = 0, e2e_s = 0;
  double percentile = 0.99;
};

struct FleetOptions {
  SimOptions sim;  ///< the engine of each replica (KV blocks, block size, cost memo); its series_interval_s unused
  AutoscalePolicy policy;
  SlaTargets sla;
  std::int64_t gpus_per_replica = 1;
  double horizon_s = 0;           ///< the GPUs are paid at least until then (the end of the day); 0 = last completion
  double series_interval_s = 0;   ///< > 0: a time-series sample every this many seconds
};

struct FleetSeriesPoint {
  double t_s = 0;
  std::int64_t ready = 0, starting = 0, draining = 0;  ///< replicas at t
  std::int64_t running = 0, waiting = 0;               ///< requests in the fleet at t
  double metric = 0;                                   ///< the policy's metric at t
  // Over [t, t + interval), by arrival:
  double arrivals_per_s = 0;
  double ttft_p = 0, e2e_p = 0;  ///< at the SLA percentile
  double missed_share = 0;       ///< of the requests that arrived
};

struct FleetResult {
  std::int64_t requests = 0, completed = 0, refused = 0;
  double end_s = 0;  ///< when the GPUs stop being paid: max(horizon, the last completion)
  LatencyStats ttft, itl, tpot, e2e;
  double gpu_hours = 0;
  double replica_hours = 0;
  std::int64_t peak_replicas = 0;  ///< most replicas paid at once (starting, ready and draining)
  std::int64_t scale_ups = 0, scale_downs = 0;  ///< autoscaler decisions that changed the fleet
  std::int64_t replicas_started = 0;            ///< replicas started after t = 0
  // SLA: requests missing each target (a request may miss several) and any of them.
  std::int64_t missed_ttft = 0, missed_tpot = 0, missed_e2e = 0, missed_any = 0;
  std::int64_t minutes = 0, minutes_in_violation = 0;  ///< minutes with arrivals, and those over 1 − percentile missed
  std::int64_t preemptions = 0, iterations = 0, cost_evaluations = 0;
  std::vector<FleetSeriesPoint> series;
  std::vector<std::string> notes;
};

/// Simulates `requests` (sorted by arrival, times from 0) on a fleet of replicas of one engine (`plan`, PP 1) under
/// `options.policy`. The initial replicas are ready at t = 0. GPU-hours = gpus_per_replica × ∫ replicas paid dt / 3600
/// from 0 to end_s, where a replica is paid from the moment it is started (its cold start included) until it has
/// drained or was cancelled.
FleetResult simulate_fleet(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ServingSystem& sys,
                           const std::vector<SimRequest>& requests, const FleetOptions& options);

}  // namespace gpuplan::model
