// A fleet of serving replicas under an autoscaling policy (autoscale.hpp): the replica engine of sim_engine.hpp, a
// least-loaded router and an autoscaler, as one discrete-event loop.
#include "gpuplan/model/autoscale.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

#include <fmt/format.h>

#include "sim_engine.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class State { starting, ready, draining, gone };

struct Replica {
  sim::ReplicaEngine eng;
  State state = State::starting;
  bool pending = false;  ///< a step event of this replica is in the queue
};

/// A replica's next moment: the end of its step (or the start of one, when it was idle and a request came), or
/// the end of its cold start. Ordered by time, then by the order they were queued.
struct Event {
  double t = 0;
  std::uint64_t seq = 0;
  std::size_t rep = 0;
  bool ready = false;  ///< the end of a cold start (else a step event)
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

double percentile_of(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto k = std::size_t(std::max(0.0, std::ceil(p * double(v.size())) - 1.0));
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end());
  return v[k];
}

// The SLA per request (TTFT, TPOT, E2E at the policy's targets; refused requests miss it) and per minute of arrival
// (a minute is in violation when more than (1 − percentile) of its requests miss), and per series interval.
void score_sla(const std::vector<sim::Req>& rq, const FleetOptions& opt, FleetResult& res) {
  const SlaTargets& sla = opt.sla;
  const double last_arrival = rq.empty() ? 0.0 : rq.back().arrival;
  std::vector<std::int64_t> per_min(std::size_t(last_arrival / 60.0) + 1, 0), missed_min(per_min.size(), 0);
  const double dt_series = opt.series_interval_s;
  const std::size_t n_series = dt_series > 0 ? std::size_t(std::max(0.0, last_arrival) / dt_series) + 1 : 0;
  std::vector<std::vector<double>> ttft_in(n_series), e2e_in(n_series);
  std::vector<std::int64_t> missed_in(n_series, 0);
  for (const auto& q : rq) {
    const bool served = q.first >= 0;
    const double ttft = q.first - q.arrival, e2e = q.last - q.arrival;
    const double tpot = q.output > 1 ? (q.last - q.first) / double(q.output - 1) : 0.0;
    const bool m_ttft = served && sla.ttft_s > 0 && ttft > sla.ttft_s;
    const bool m_tpot = served && sla.tpot_s > 0 && tpot > sla.tpot_s;
    const bool m_e2e = served && sla.e2e_s > 0 && e2e > sla.e2e_s;
    const bool miss = !served || m_ttft || m_tpot || m_e2e;
    res.missed_ttft += m_ttft ? 1 : 0;
    res.missed_tpot += m_tpot ? 1 : 0;
    res.missed_e2e += m_e2e ? 1 : 0;
    res.missed_any += miss ? 1 : 0;
    const auto mi = std::size_t(q.arrival / 60.0);
    ++per_min[mi];
    missed_min[mi] += miss ? 1 : 0;
    if (n_series > 0) {
      const auto si = std::min(n_series - 1, std::size_t(q.arrival / dt_series));
      if (served) {
        ttft_in[si].push_back(ttft);
        e2e_in[si].push_back(e2e);
      }
      missed_in[si] += miss ? 1 : 0;
    }
  }
  for (std::size_t i = 0; i < per_min.size(); ++i) {
    if (per_min[i] == 0) continue;
    ++res.minutes;
    if (double(missed_min[i]) > (1.0 - sla.percentile) * double(per_min[i])) ++res.minutes_in_violation;
  }
  if (n_series > 0) {
    std::vector<std::int64_t> arrivals(n_series, 0);  // refused ones included
    for (const auto& q : rq) ++arrivals[std::min(n_series - 1, std::size_t(q.arrival / dt_series))];
    for (auto& p : res.series) {
      const auto si = std::size_t(p.t_s / dt_series);
      if (si >= n_series) continue;
      p.ttft_p = percentile_of(ttft_in[si], sla.percentile);
      p.e2e_p = percentile_of(e2e_in[si], sla.percentile);
      p.arrivals_per_s = double(arrivals[si]) / dt_series;
      p.missed_share = arrivals[si] > 0 ? double(missed_in[si]) / double(arrivals[si]) : 0.0;
    }
  }

}

/// The fleet's state through one simulated day: the replicas, the event queue, the paid-replica integral and the
/// autoscaler's memory. One member function per kind of moment (an evaluation, a series sample, an arrival, a
/// replica's event).
class Fleet {
 public:
  Fleet(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ServingSystem& sys,
        const std::vector<SimRequest>& requests, const FleetOptions& opt, FleetResult& res)
      : opt_(opt), pol_(opt.policy), res_(res), lim_(sim::engine_limits(plan, opt.sim)),
        rq_(sim::make_requests(plan, requests)), cost_(arch, plan, sys, opt.sim.cost_bits) {
    tally_.ttft.reserve(rq_.size());
    tally_.e2e.reserve(rq_.size());
    tally_.tpot.reserve(rq_.size());
  }

  const sim::EngineLimits& limits() const { return lim_; }
  const std::vector<sim::Req>& requests() const { return rq_; }

  /// Until every request is answered, and the autoscaler and the series go on to the horizon (the end of the day).
  void run() {
    const std::int64_t initial =
        pol_.enabled ? pol_.initial_replicas : std::max<std::int64_t>(1, pol_.initial_replicas);
    reps_.reserve(std::size_t(std::max<std::int64_t>(initial, pol_.max_replicas)) + 16);
    for (std::int64_t i = 0; i < initial; ++i) reps_.push_back({sim::ReplicaEngine(lim_), State::ready, false});
    set_paid(0, initial);
    rebuild_ready();
    next_tick_ = pol_.enabled ? pol_.interval_s : kInf;
    next_sample_ = opt_.series_interval_s > 0 ? 0 : kInf;
    while (resolved_ < res_.requests || std::min(next_tick_, next_sample_) < opt_.horizon_s) {
      const double ta = next_arrival_ < rq_.size() ? rq_[next_arrival_].arrival : kInf;
      const double te = events_.empty() ? kInf : events_.top().t;
      const double tt = std::min(next_tick_, next_sample_);
      if (tt <= ta && tt <= te) {
        now_ = std::max(now_, tt);
        if (next_sample_ <= tt) {
          if (opt_.horizon_s <= 0 || tt < opt_.horizon_s) sample(tt);
          next_sample_ += opt_.series_interval_s;
        }
        if (next_tick_ <= tt) {
          tick(tt);
          next_tick_ += pol_.interval_s;
        }
      } else if (ta <= te) {  // an arrival (before a replica's event at the same moment, as in simulate_serving)
        arrive(ta);
      } else {
        replica_event();
      }
    }
    res_.end_s = std::max(opt_.horizon_s, now_);
    set_paid(res_.end_s, 0);
    res_.replica_hours = paid_area_ / 3600.0;
    res_.gpu_hours = res_.replica_hours * double(opt_.gpus_per_replica);
    res_.completed = tally_.completed;
    res_.preemptions = tally_.preemptions;
    res_.iterations = tally_.iterations;
    res_.cost_evaluations = cost_.evaluations();
    res_.ttft = sim::stats_of(tally_.ttft);
    res_.e2e = sim::stats_of(tally_.e2e);
    res_.tpot = sim::stats_of(tally_.tpot);
    res_.itl = tally_.gaps.stats();
  }
  /// Evaluations at which the autoscaler wanted more than max_replicas.
  std::int64_t capped() const { return capped_; }

 private:
  void rebuild_ready() {
    ready_ids_.clear();
    for (std::size_t i = 0; i < reps_.size(); ++i)
      if (reps_[i].state == State::ready) ready_ids_.push_back(i);
  }

  /// Replicas paid (starting, ready, draining): their integral over time is the GPU-hours.
  void set_paid(double t, std::int64_t delta) {
    paid_area_ += double(paid_) * (t - paid_since_);
    paid_since_ = t;
    paid_ += delta;
    res_.peak_replicas = std::max(res_.peak_replicas, paid_);
  }

  double metric_now(std::int64_t& n_ready) const {
    double sum = 0;
    n_ready = std::int64_t(ready_ids_.size());
    for (std::size_t i : ready_ids_) {
      const auto& e = reps_[i].eng;
      sum += pol_.metric == AutoscalePolicy::Metric::queue ? double(e.running() + e.waiting())
                                                           : double(e.used_blocks()) / double(lim_.total_blocks);
    }
    return n_ready > 0 ? sum / double(n_ready) : 0.0;
  }

  void release_if_idle(std::size_t i, double t) {
    Replica& r = reps_[i];
    if (r.state == State::draining && !r.pending && r.eng.idle()) {
      r.state = State::gone;
      set_paid(t, -1);
    }
  }

  /// The ready replica with the fewest requests (running + waiting); the first such in index order.
  std::size_t least_loaded() const {
    std::size_t best = reps_.size();
    std::size_t best_load = std::numeric_limits<std::size_t>::max();
    for (std::size_t i : ready_ids_) {
      if (reps_[i].state != State::ready) continue;
      const std::size_t load = reps_[i].eng.running() + reps_[i].eng.waiting();
      if (load < best_load) {
        best_load = load;
        best = i;
      }
    }
    return best;
  }

  /// One evaluation of the autoscaler.
  void tick(double t) {
    std::int64_t n_ready = 0;
    const double m = metric_now(n_ready);
    if (n_ready == 0) return;
    std::int64_t starting = 0;
    for (const auto& r : reps_) starting += r.state == State::starting ? 1 : 0;
    const std::int64_t active = n_ready + starting;
    const auto want = std::int64_t(std::ceil(double(n_ready) * m / pol_.target - 1e-9));
    const std::int64_t desired = std::clamp(want, pol_.min_replicas, pol_.max_replicas);
    // Scale-down stabilisation [HPA]: down only to the most replicas recommended over the last down_cooldown_s.
    recommended_.emplace_back(t, desired);
    while (!recommended_.empty() && recommended_.front().first < t - pol_.down_cooldown_s) recommended_.pop_front();
    std::int64_t down_to = desired;
    for (const auto& r : recommended_) down_to = std::max(down_to, r.second);
    if (m > pol_.scale_up_at && want > pol_.max_replicas) ++capped_;
    if (m > pol_.scale_up_at && desired > active && t - last_up_ >= pol_.up_cooldown_s) {
      for (std::int64_t k = active; k < desired; ++k) {
        reps_.push_back({sim::ReplicaEngine(lim_), State::starting, false});
        events_.push({t + pol_.cold_start_s, seq_++, reps_.size() - 1, true});
        ++res_.replicas_started;
      }
      set_paid(t, desired - active);
      ++res_.scale_ups;
      last_up_ = t;
    } else if (m < pol_.scale_down_at && down_to < active &&
               t - std::max(last_up_, last_down_) >= pol_.down_cooldown_s) {
      std::int64_t remove = active - down_to;
      for (std::size_t i = reps_.size(); i-- > 0 && remove > 0;)  // cancel the newest starting replicas first
        if (reps_[i].state == State::starting) {
          reps_[i].state = State::gone;
          set_paid(t, -1);
          --remove;
        }
      while (remove > 0) {  // then drain the ready ones with the fewest requests
        const std::size_t best = least_loaded();
        if (best == reps_.size()) break;
        reps_[best].state = State::draining;
        release_if_idle(best, t);
        --remove;
      }
      rebuild_ready();
      ++res_.scale_downs;
      last_down_ = t;
    }
  }

  void sample(double t) {
    FleetSeriesPoint p;
    p.t_s = t;
    for (const auto& r : reps_) {
      if (r.state == State::gone) continue;
      p.ready += r.state == State::ready ? 1 : 0;
      p.starting += r.state == State::starting ? 1 : 0;
      p.draining += r.state == State::draining ? 1 : 0;
      p.running += std::int64_t(r.eng.running());
      p.waiting += std::int64_t(r.eng.waiting());
    }
    std::int64_t n_ready = 0;
    p.metric = metric_now(n_ready);
    res_.series.push_back(p);
  }

  /// The next request arrives: refused if it can never fit a replica's KV, else routed to the least-loaded one.
  void arrive(double ta) {
    now_ = ta;
    const std::size_t id = next_arrival_++;
    if (lim_.refuses(rq_[id])) {
      ++res_.refused;
      ++resolved_;
      return;
    }
    const std::size_t best = least_loaded();
    Replica& r = reps_[best];
    r.eng.enqueue(id);
    if (!r.pending) {
      r.pending = true;
      events_.push({ta, seq_++, best, false});
    }
  }

  /// A replica's event: the end of its cold start, or the end of a step (and the start of the next).
  void replica_event() {
    const Event ev = events_.top();
    events_.pop();
    now_ = ev.t;
    Replica& r = reps_[ev.rep];
    if (ev.ready) {
      if (r.state == State::starting) {
        r.state = State::ready;
        rebuild_ready();
      }
      return;
    }
    r.pending = false;
    if (r.eng.in_step()) resolved_ += r.eng.finish_step(rq_, tally_);
    if (r.eng.begin_step(rq_, now_, cost_, tally_)) {
      r.pending = true;
      events_.push({r.eng.step_end(), seq_++, ev.rep, false});
    } else {
      release_if_idle(ev.rep, now_);
    }
  }

  const FleetOptions& opt_;
  const AutoscalePolicy& pol_;
  FleetResult& res_;
  sim::EngineLimits lim_;
  std::vector<sim::Req> rq_;
  sim::CostMemo cost_;
  sim::Tally tally_;
  std::vector<Replica> reps_;
  std::vector<std::size_t> ready_ids_;  // replicas taking requests, in index order
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  std::int64_t paid_ = 0;
  double paid_area_ = 0, paid_since_ = 0;
  std::int64_t resolved_ = 0;
  std::size_t next_arrival_ = 0;
  double now_ = 0;
  double next_tick_ = kInf, next_sample_ = kInf;
  double last_up_ = -kInf, last_down_ = -kInf;
  std::int64_t capped_ = 0;
  std::deque<std::pair<double, std::int64_t>> recommended_;  // (time, desired replicas) of the evaluations
};

}  // namespace

FleetResult simulate_fleet(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ServingSystem& sys,
                           const std::vector<SimRequest>& requests, const FleetOptions& opt) {
  const detail::GraphMemoScope graphs(arch);  // the layer and head graphs of `arch`: each built once here
  FleetResult res;
  res.requests = std::int64_t(requests.size());
  Fleet fleet(arch, plan, sys, requests, opt, res);
  const sim::EngineLimits& lim = fleet.limits();
  if (lim.total_blocks - lim.shared_blocks <= 0) {
    res.notes.push_back("the KV cache holds no block beyond the shared prefix: nothing can run");
    return res;
  }
  fleet.run();
  const std::vector<sim::Req>& rq = fleet.requests();
  score_sla(rq, opt, res);

  if (res.refused > 0)
    res.notes.push_back(fmt::format("{} requests need more KV than a replica holds (prompt + output over {} blocks of "
                                    "{} tokens): refused, and counted as missing the SLA",
                                    res.refused, lim.total_blocks - lim.shared_blocks, lim.block_size));
  if (fleet.capped() > 0)
    res.notes.push_back(fmt::format("at {} evaluations the autoscaler wanted more than max_replicas = {} replicas",
                                    fleet.capped(), opt.policy.max_replicas));
  if (res.preemptions > 0)
    res.notes.push_back(fmt::format("{} preemptions by recompute (KV blocks ran out on a replica; vLLM v1)",
                                    res.preemptions));
  return res;
}

}  // namespace gpuplan::model
