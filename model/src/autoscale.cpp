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

}  // namespace

FleetResult simulate_fleet(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ServingSystem& sys,
                           const std::vector<SimRequest>& requests, const FleetOptions& opt) {
  FleetResult res;
  res.requests = std::int64_t(requests.size());
  const AutoscalePolicy& pol = opt.policy;
  const sim::EngineLimits lim = sim::engine_limits(plan, opt.sim);
  if (lim.total_blocks - lim.shared_blocks <= 0) {
    res.notes.push_back("the KV cache holds no block beyond the shared prefix: nothing can run");
    return res;
  }
  std::vector<sim::Req> rq = sim::make_requests(plan, requests);
  sim::CostMemo cost(arch, plan, sys, opt.sim.cost_bits);
  sim::Tally tally;
  tally.ttft.reserve(rq.size());
  tally.e2e.reserve(rq.size());
  tally.tpot.reserve(rq.size());

  std::vector<Replica> reps;
  std::vector<std::size_t> ready_ids;  // replicas taking requests, in index order
  auto rebuild_ready = [&] {
    ready_ids.clear();
    for (std::size_t i = 0; i < reps.size(); ++i)
      if (reps[i].state == State::ready) ready_ids.push_back(i);
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::uint64_t seq = 0;

  // Replicas paid (starting, ready, draining): their integral over time is the GPU-hours.
  std::int64_t paid = 0;
  double paid_area = 0, paid_since = 0;
  auto set_paid = [&](double t, std::int64_t delta) {
    paid_area += double(paid) * (t - paid_since);
    paid_since = t;
    paid += delta;
    res.peak_replicas = std::max(res.peak_replicas, paid);
  };

  const std::int64_t initial = pol.enabled ? pol.initial_replicas : std::max<std::int64_t>(1, pol.initial_replicas);
  reps.reserve(std::size_t(std::max<std::int64_t>(initial, pol.max_replicas)) + 16);
  for (std::int64_t i = 0; i < initial; ++i) reps.push_back({sim::ReplicaEngine(lim), State::ready, false});
  set_paid(0, initial);
  rebuild_ready();

  std::int64_t resolved = 0;
  std::size_t next_arrival = 0;
  double now = 0;
  double next_tick = pol.enabled ? pol.interval_s : kInf;
  double next_sample = opt.series_interval_s > 0 ? 0 : kInf;
  double last_up = -kInf, last_down = -kInf;
  std::int64_t capped = 0;
  std::deque<std::pair<double, std::int64_t>> recommended;  // (time, desired replicas) of the evaluations

  auto metric_now = [&](std::int64_t& n_ready) {
    double sum = 0;
    n_ready = std::int64_t(ready_ids.size());
    for (std::size_t i : ready_ids) {
      const auto& e = reps[i].eng;
      sum += pol.metric == AutoscalePolicy::Metric::queue ? double(e.running() + e.waiting())
                                                          : double(e.used_blocks()) / double(lim.total_blocks);
    }
    return n_ready > 0 ? sum / double(n_ready) : 0.0;
  };
  auto release_if_idle = [&](std::size_t i, double t) {
    Replica& r = reps[i];
    if (r.state == State::draining && !r.pending && r.eng.idle()) {
      r.state = State::gone;
      set_paid(t, -1);
    }
  };

  auto tick = [&](double t) {
    std::int64_t n_ready = 0;
    const double m = metric_now(n_ready);
    if (n_ready == 0) return;
    std::int64_t starting = 0;
    for (const auto& r : reps) starting += r.state == State::starting ? 1 : 0;
    const std::int64_t active = n_ready + starting;
    const auto want = std::int64_t(std::ceil(double(n_ready) * m / pol.target - 1e-9));
    const std::int64_t desired = std::clamp(want, pol.min_replicas, pol.max_replicas);
    // Scale-down stabilisation [HPA]: down only to the most replicas recommended over the last down_cooldown_s.
    recommended.emplace_back(t, desired);
    while (!recommended.empty() && recommended.front().first < t - pol.down_cooldown_s) recommended.pop_front();
    std::int64_t down_to = desired;
    for (const auto& r : recommended) down_to = std::max(down_to, r.second);
    if (m > pol.scale_up_at && want > pol.max_replicas) ++capped;
    if (m > pol.scale_up_at && desired > active && t - last_up >= pol.up_cooldown_s) {
      for (std::int64_t k = active; k < desired; ++k) {
        reps.push_back({sim::ReplicaEngine(lim), State::starting, false});
        events.push({t + pol.cold_start_s, seq++, reps.size() - 1, true});
        ++res.replicas_started;
      }
      set_paid(t, desired - active);
      ++res.scale_ups;
      last_up = t;
    } else if (m < pol.scale_down_at && down_to < active && t - std::max(last_up, last_down) >= pol.down_cooldown_s) {
      std::int64_t remove = active - down_to;
      for (std::size_t i = reps.size(); i-- > 0 && remove > 0;)  // cancel the newest starting replicas first
        if (reps[i].state == State::starting) {
          reps[i].state = State::gone;
          set_paid(t, -1);
          --remove;
        }
      while (remove > 0) {  // then drain the ready ones with the fewest requests
        std::size_t best = reps.size();
        std::size_t best_load = std::numeric_limits<std::size_t>::max();
        for (std::size_t i : ready_ids) {
          if (reps[i].state != State::ready) continue;
          const std::size_t load = reps[i].eng.running() + reps[i].eng.waiting();
          if (load < best_load) {
            best_load = load;
            best = i;
          }
        }
        if (best == reps.size()) break;
        reps[best].state = State::draining;
        release_if_idle(best, t);
        --remove;
      }
      rebuild_ready();
      ++res.scale_downs;
      last_down = t;
    }
  };

  auto sample = [&](double t) {
    FleetSeriesPoint p;
    p.t_s = t;
    for (const auto& r : reps) {
      if (r.state == State::gone) continue;
      p.ready += r.state == State::ready ? 1 : 0;
      p.starting += r.state == State::starting ? 1 : 0;
      p.draining += r.state == State::draining ? 1 : 0;
      p.running += std::int64_t(r.eng.running());
      p.waiting += std::int64_t(r.eng.waiting());
    }
    std::int64_t n_ready = 0;
    p.metric = metric_now(n_ready);
    res.series.push_back(p);
  };

  // Until every request is answered, and the autoscaler and the series go on to the horizon (the end of the day).
  while (resolved < res.requests || std::min(next_tick, next_sample) < opt.horizon_s) {
    const double ta = next_arrival < rq.size() ? rq[next_arrival].arrival : kInf;
    const double te = events.empty() ? kInf : events.top().t;
    const double tt = std::min(next_tick, next_sample);
    if (tt <= ta && tt <= te) {
      now = std::max(now, tt);
      if (next_sample <= tt) {
        if (opt.horizon_s <= 0 || tt < opt.horizon_s) sample(tt);
        next_sample += opt.series_interval_s;
      }
      if (next_tick <= tt) {
        tick(tt);
        next_tick += pol.interval_s;
      }
      continue;
    }
    if (ta <= te) {  // an arrival (before a replica's event at the same moment, as in simulate_serving)
      now = ta;
      const std::size_t id = next_arrival++;
      if (lim.refuses(rq[id])) {
        ++res.refused;
        ++resolved;
        continue;
      }
      std::size_t best = ready_ids.front();
      std::size_t best_load = std::numeric_limits<std::size_t>::max();
      for (std::size_t i : ready_ids) {
        const std::size_t load = reps[i].eng.running() + reps[i].eng.waiting();
        if (load < best_load) {
          best_load = load;
          best = i;
        }
      }
      Replica& r = reps[best];
      r.eng.enqueue(id);
      if (!r.pending) {
        r.pending = true;
        events.push({ta, seq++, best, false});
      }
      continue;
    }
    const Event ev = events.top();
    events.pop();
    now = ev.t;
    Replica& r = reps[ev.rep];
    if (ev.ready) {
      if (r.state == State::starting) {
        r.state = State::ready;
        rebuild_ready();
      }
      continue;
    }
    r.pending = false;
    if (r.eng.in_step()) resolved += r.eng.finish_step(rq, tally);
    if (r.eng.begin_step(rq, now, cost, tally)) {
      r.pending = true;
      events.push({r.eng.step_end(), seq++, ev.rep, false});
    } else {
      release_if_idle(ev.rep, now);
    }
  }

  res.end_s = std::max(opt.horizon_s, now);
  set_paid(res.end_s, 0);
  res.replica_hours = paid_area / 3600.0;
  res.gpu_hours = res.replica_hours * double(opt.gpus_per_replica);
  res.completed = tally.completed;
  res.preemptions = tally.preemptions;
  res.iterations = tally.iterations;
  res.cost_evaluations = cost.evaluations();
  res.ttft = sim::stats_of(tally.ttft);
  res.e2e = sim::stats_of(tally.e2e);
  res.tpot = sim::stats_of(tally.tpot);
  res.itl = tally.gaps.stats();

  // ---- the SLA, per request and per minute of arrival ----
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

  if (res.refused > 0)
    res.notes.push_back(fmt::format("{} requests need more KV than a replica holds (prompt + output over {} blocks of "
                                    "{} tokens): refused, and counted as missing the SLA",
                                    res.refused, lim.total_blocks - lim.shared_blocks, lim.block_size));
  if (capped > 0)
    res.notes.push_back(fmt::format("at {} evaluations the autoscaler wanted more than max_replicas = {} replicas",
                                    capped, pol.max_replicas));
  if (res.preemptions > 0)
    res.notes.push_back(fmt::format("{} preemptions by recompute (KV blocks ran out on a replica; vLLM v1)",
                                    res.preemptions));
  return res;
}

}  // namespace gpuplan::model
