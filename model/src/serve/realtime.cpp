#include "gpuplan/model/realtime.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {

const char* to_string(RtJitter j) {
  switch (j) {
    case RtJitter::lognormal: return "lognormal";
    case RtJitter::normal: return "normal";
    default: return "none";
  }
}

namespace {

/// Engine index of every stage, engines in order of first use.
std::vector<std::size_t> engine_index(const RtPipeline& p, std::vector<std::string>* names) {
  std::vector<std::string> n;
  std::vector<std::size_t> idx;
  for (const auto& s : p.stages) {
    auto it = std::find(n.begin(), n.end(), s.engine);
    if (it == n.end()) {
      n.push_back(s.engine);
      idx.push_back(n.size() - 1);
    } else {
      idx.push_back(static_cast<std::size_t>(it - n.begin()));
    }
  }
  if (names) *names = std::move(n);
  return idx;
}

/// The schedule of one frame; `bound_by[i]`: the stage whose finish released stage i (a dependency or the stage
/// before it on its engine), or npos when it started at t = 0.
constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();
std::vector<RtStageRun> simulate(const RtPipeline& p, const std::vector<double>& dur, const std::vector<bool>& runs,
                                 const std::vector<std::size_t>& eng, std::size_t engines,
                                 std::vector<std::size_t>* bound_by) {
  const std::size_t n = p.stages.size();
  std::vector<RtStageRun> r(n);
  std::vector<double> remaining(n, 0.0), demand(n, 0.0);
  enum State : std::uint8_t { pending, running, done };
  std::vector<State> st(n, pending);
  std::vector<std::size_t> busy(engines, npos), last_on(engines, npos);
  if (bound_by) bound_by->assign(n, npos);
  for (std::size_t i = 0; i < n; ++i) {
    if (!runs[i]) st[i] = done;  // reused output: ready at t = 0
    remaining[i] = dur[i];
    demand[i] = dur[i] > 0 ? p.stages[i].dram_bytes.raw() / dur[i] : 0.0;
  }
  const double bw = p.shared_bandwidth ? p.shared_bandwidth->raw() : 0.0;
  double t = 0;
  for (;;) {
    for (std::size_t i = 0; i < n; ++i) {
      if (st[i] != pending || busy[eng[i]] != npos) continue;
      bool ready = true;
      std::size_t last_dep = npos;
      double dep_t = -1;
      for (std::size_t d : p.stages[i].deps) {
        if (st[d] != done) {
          ready = false;
          break;
        }
        if (runs[d] && r[d].finish_s > dep_t) {
          dep_t = r[d].finish_s;
          last_dep = d;
        }
      }
      if (!ready) continue;
      st[i] = running;
      busy[eng[i]] = i;
      r[i].ran = true;
      r[i].start_s = t;
      if (bound_by) {
        const std::size_t prev = last_on[eng[i]];
        (*bound_by)[i] = (prev != npos && r[prev].finish_s > dep_t) ? prev : last_dep;
      }
    }
    double total_demand = 0;
    std::size_t running_count = 0;
    for (std::size_t e = 0; e < engines; ++e)
      if (busy[e] != npos) {
        total_demand += demand[busy[e]];
        ++running_count;
      }
    if (running_count == 0) break;
    const double stretch = (bw > 0 && total_demand > bw) ? total_demand / bw : 1.0;
    double dt = std::numeric_limits<double>::infinity();
    std::size_t first = npos;
    for (std::size_t e = 0; e < engines; ++e)
      if (busy[e] != npos && remaining[busy[e]] * stretch < dt) {
        dt = remaining[busy[e]] * stretch;
        first = busy[e];
      }
    t += dt;
    for (std::size_t e = 0; e < engines; ++e) {
      const std::size_t i = busy[e];
      if (i == npos) continue;
      remaining[i] -= dt / stretch;
      if (i == first || remaining[i] <= 1e-15 * std::max(1.0, dur[i])) {
        st[i] = done;
        r[i].finish_s = t;
        busy[e] = npos;
        last_on[e] = i;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) assert(st[i] == done);
  return r;
}

double latency_of(const std::vector<RtStageRun>& r) {
  double m = 0;
  for (const auto& s : r)
    if (s.ran) m = std::max(m, s.finish_s);
  return m;
}

/// SplitMix64 (Steele, Lea, Flood 2014): a fixed, portable stream for a given seed.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// Uniform in (0, 1).
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }
  /// Standard normal (Box–Muller, one of the pair).
  double normal() {
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }
};

double draw(RtJitter j, double mean, double cv, Rng& g) {
  if (j == RtJitter::none || cv <= 0 || mean <= 0) return mean;
  if (j == RtJitter::lognormal) {
    const double s2 = std::log1p(cv * cv);
    return std::exp(std::log(mean) - s2 / 2 + std::sqrt(s2) * g.normal());
  }
  return std::max(0.0, mean * (1.0 + cv * g.normal()));
}

/// z with Φ(z) = q, by bisection on Φ(z) = erfc(−z/√2)/2.
double z_of(double q) {
  double lo = -10, hi = 10;
  for (int it = 0; it < 200; ++it) {
    const double mid = (lo + hi) / 2;
    if (0.5 * std::erfc(-mid / std::sqrt(2.0)) < q) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

std::string ms(double s) { return units::format(units::seconds(s)); }

}  // namespace

double rt_quantile(RtJitter j, double mean_s, double cv, double q) {
  if (j == RtJitter::none || cv <= 0) return mean_s;
  const double z = z_of(q);
  if (j == RtJitter::lognormal) {
    const double s2 = std::log1p(cv * cv);
    return std::exp(std::log(mean_s) - s2 / 2 + z * std::sqrt(s2));
  }
  return std::max(0.0, mean_s * (1.0 + z * cv));
}

std::vector<RtStageRun> rt_schedule_frame(const RtPipeline& p, const std::vector<double>& durations_s,
                                          const std::vector<bool>& runs) {
  std::vector<std::string> names;
  const auto eng = engine_index(p, &names);
  return simulate(p, durations_s, runs, eng, names.size(), nullptr);
}

RtSchedule rt_schedule(const RtPipeline& p, const RtOptions& o, Explain explain) {
  RtSchedule r;
  r.options = o;
  const std::size_t n = p.stages.size();
  std::vector<std::string> names;
  const auto eng = engine_index(p, &names);
  std::vector<double> mean(n);
  for (std::size_t i = 0; i < n; ++i) mean[i] = p.stages[i].mean.raw();

  // Frame 0 at mean durations, every stage running.
  std::vector<std::size_t> bound;
  r.frame0 = simulate(p, mean, std::vector<bool>(n, true), eng, names.size(), &bound);
  const double lat0 = latency_of(r.frame0);
  r.latency_mean_frame0 = units::seconds(lat0);
  if (n > 0) {
    std::size_t last = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (r.frame0[i].finish_s >= r.frame0[last].finish_s) last = i;
    for (std::size_t i = last; i != npos; i = bound[i]) r.critical_path.push_back(i);
    std::reverse(r.critical_path.begin(), r.critical_path.end());
  }
  r.slack_mean = p.deadline - r.latency_mean_frame0;
  r.meets_mean = lat0 <= p.deadline.raw();

  // Monte-Carlo over frames.
  Rng g{o.seed};
  const int frames = std::max(1, o.frames);
  std::vector<double> lat(static_cast<std::size_t>(frames));
  std::vector<double> dur(n);
  std::vector<bool> runs(n);
  double sum = 0;
  int missed = 0;
  for (int f = 0; f < frames; ++f) {
    for (std::size_t i = 0; i < n; ++i) {
      runs[i] = f % std::max(1, p.stages[i].every) == 0;
      dur[i] = runs[i] ? draw(p.stages[i].jitter, mean[i], p.stages[i].cv, g) : 0.0;
    }
    const double l = latency_of(simulate(p, dur, runs, eng, names.size(), nullptr));
    lat[static_cast<std::size_t>(f)] = l;
    sum += l;
    if (l > p.deadline.raw()) ++missed;
  }
  std::sort(lat.begin(), lat.end());
  const auto k = static_cast<std::size_t>(std::ceil(o.quantile * frames));
  r.latency_p = units::seconds(lat[std::min(lat.size() - 1, k == 0 ? 0 : k - 1)]);
  r.latency_mc_mean = units::seconds(sum / frames);
  r.slack_p = p.deadline - r.latency_p;
  r.miss_rate = static_cast<double>(missed) / frames;
  r.meets_p = r.latency_p <= p.deadline;

  // Engine loads.
  r.keeps_up = true;
  for (std::size_t e = 0; e < names.size(); ++e) {
    RtEngineLoad l{names[e], {}, 0};
    for (std::size_t i = 0; i < n; ++i)
      if (eng[i] == e) l.busy_per_frame += p.stages[i].mean / static_cast<double>(std::max(1, p.stages[i].every));
    l.utilisation = p.period.raw() > 0 ? l.busy_per_frame.raw() / p.period.raw() : 0;
    if (l.utilisation > 1) r.keeps_up = false;
    r.engines.push_back(l);
  }

  if (explain == Explain::on) {
    std::string path;
    for (std::size_t i : r.critical_path) path += (path.empty() ? "" : " → ") + p.stages[i].id;
    Derivation d{"rt.latency",
                 "End-to-end latency of one frame",
                 "list schedule: start_i = max(max_{j∈deps(i)} finish_j, engine free) ; finish_i = start_i + t_i "
                 "(stretched by Σd/BW while the shared memory is oversubscribed) ; latency = max_i finish_i",
                 {{"deadline", ms(p.deadline.raw()), "end-to-end budget of a frame", Origin::user("pipeline file")},
                  {"period", ms(p.period.raw()), "frame period (fastest sensor)", Origin::user("pipeline file")},
                  {"BW_shared",
                   p.shared_bandwidth ? units::format(*p.shared_bandwidth) : std::string("— (discrete GPU)"),
                   "sustained bandwidth of the one memory every engine shares (datasheet × η_hbm)",
                   Origin::derived("memory.shared_with_cpu")},
                  {"frames", fmt::format("{}", frames), "Monte-Carlo frames", Origin::assumption("fixed")},
                  {"seed", fmt::format("{}", o.seed), "SplitMix64 seed", Origin::assumption("fixed")}},
                 fmt::format("frame 0 {} (slack {}); P{:g} {} (slack {}); {:.2f}% of frames miss", ms(lat0),
                             ms(r.slack_mean.raw()), 100 * o.quantile, ms(r.latency_p.raw()), ms(r.slack_p.raw()),
                             100 * r.miss_rate),
                 {fmt::format("critical path: {}", path)},
                 {}};
    for (std::size_t i = 0; i < n; ++i) {
      const RtStage& s = p.stages[i];
      Derivation c = s.derivation;
      if (c.empty())
        c = {"rt.stage." + s.id, s.id, "t = given", {}, ms(s.mean.raw()), {}, {}};
      c.notes.push_back(fmt::format("{} on {}, every {} frame(s); jitter {} cv {:g}; frame 0: {} → {}", s.what,
                                    s.engine, s.every, to_string(s.jitter), s.cv, ms(r.frame0[i].start_s),
                                    ms(r.frame0[i].finish_s)));
      d.children.push_back(std::move(c));
    }
    r.derivation = std::move(d);
  }
  return r;
}

Estimate<units::Flops> backbone_sharing_flops(units::Flops backbone, units::Flops heads_total, int heads, bool shared,
                                              const Origin& origin) {
  Estimate<units::Flops> e;
  const double copies = shared ? 1.0 : static_cast<double>(heads);
  e.value = backbone * copies + heads_total;
  e.derivation = {shared ? "rt.flops.shared" : "rt.flops.separate",
                  shared ? "FLOPs per frame, one backbone shared by the heads"
                         : "FLOPs per frame, a backbone per head",
                  shared ? "F = B + ΣH" : "F = n·B + ΣH",
                  {{"B", units::format(backbone), "backbone FLOPs", origin},
                   {"ΣH", units::format(heads_total), "all heads' FLOPs", origin},
                   {"n", fmt::format("{}", heads), "heads", origin}},
                  units::format(e.value),
                  {},
                  {}};
  return e;
}

Estimate<units::Seconds> frame_period(double rate_Hz, const Origin& origin) {
  Estimate<units::Seconds> e;
  e.value = units::seconds(rate_Hz > 0 ? 1.0 / rate_Hz : 0.0);
  e.derivation = {"rt.period", "Frame period (the budget of one frame)", "T = 1 / f",
                  {{"f", fmt::format("{:g} Hz", rate_Hz), "sensor frame rate", origin}}, units::format(e.value), {}, {}};
  return e;
}

Estimate<double> deadline_speedup(units::Seconds latency, units::Seconds deadline, const Origin& origin) {
  Estimate<double> e;
  e.value = deadline.raw() > 0 ? latency.raw() / deadline.raw() : 0.0;
  e.derivation = {"rt.speedup_needed", "Speedup needed to meet the deadline", "s = t / D",
                  {{"t", units::format(latency), "latency today", origin},
                   {"D", units::format(deadline), "deadline", origin}},
                  fmt::format("{:.3f}× (cut {})", e.value, units::format(latency - deadline)), {}, {}};
  return e;
}

Estimate<double> scaling_efficiency(units::Seconds t_one, units::Seconds t_n, int n, const Origin& origin) {
  Estimate<double> e;
  e.value = t_n.raw() > 0 && n > 0 ? t_one.raw() / (static_cast<double>(n) * t_n.raw()) : 0.0;
  e.derivation = {"scaling.efficiency", "Scaling efficiency", "E = t_1 / (n · t_n)",
                  {{"t_1", units::format(t_one), "time on one GPU", origin},
                   {"t_n", units::format(t_n), "time on n GPUs", origin},
                   {"n", fmt::format("{}", n), "GPUs", origin}},
                  fmt::format("{:.1f}% (speedup {:.1f}×)", 100 * e.value, e.value * n), {}, {}};
  return e;
}

Estimate<units::Seconds> stage_quantile(RtJitter j, units::Seconds mean, double cv, double q, const Origin& origin) {
  Estimate<units::Seconds> e;
  e.value = units::seconds(rt_quantile(j, mean.raw(), cv, q));
  e.derivation = {"rt.quantile",
                  fmt::format("P{:g} of a {} duration", 100 * q, to_string(j)),
                  j == RtJitter::lognormal ? "σ² = ln(1 + cv²), μ = ln m − σ²/2, Q = exp(μ + z_q·σ)"
                                           : "Q = m · (1 + z_q · cv)",
                  {{"m", units::format(mean), "mean", origin},
                   {"cv", fmt::format("{:g}", cv), "coefficient of variation", origin},
                   {"z_q", fmt::format("{:.4f}", z_of(q)), "standard normal quantile", Origin::constant("Φ⁻¹(q)")}},
                  units::format(e.value), {}, {}};
  return e;
}

}  // namespace gpuplan::model
