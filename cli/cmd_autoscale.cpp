// `gpuplan autoscale`: a day (or a trace) of time-varying load on a fleet of serving replicas scaled by a policy
// (model/autoscale.hpp), against a fixed fleet that the capacity planner sizes for the peak: GPU-hours, cost and SLA
// misses of both, and a time series. The replica resolves exactly as for `gpuplan simulate` (serve_options.hpp).
#include <cmath>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autoscale_cmd.hpp"
#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/autoscale.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "serve_options.hpp"
#include "sim_common.hpp"
#include "trace_csv.hpp"

namespace gpuplan::cli {

using autoscale_cmd::AutoscaleOutcome;
using autoscale_cmd::hours_text;
using autoscale_cmd::render_autoscale;

namespace {

struct AutoscaleFlags {
  ScenarioFlags load, policy, top;  ///< the flags of the file's load, autoscale and top-level keys (autoscale_fields)
  double series_s = 3600;
};

/// A value from its flag (when given) or the scenario file's key; `where` receives the flag or "file: /pointer".
class Picker {
 public:
  Picker(const ScenarioFlags& flags, const wl_io::ScenarioFieldTable& table, std::string file,
         const std::optional<json_io::ObjectReader>& r)
      : flags_(flags), table_(table), file_(std::move(file)), r_(r) {}
  template <class T>
  std::optional<T> get(const std::string& key, std::string& where) const {
    const std::string flag = wl_io::flag_of_key(table_, key);
    if (flags_.given(key)) {
      where = flag;
      if constexpr (std::is_same_v<T, double>) return flags_.number(key);
      else if constexpr (std::is_same_v<T, long long>) return flags_.integer(key);
      else return flags_.text(key);
    }
    where = r_ ? file_ + ": " + r_->pointer(key) : flag;
    if (!r_ || !r_->has(key)) return std::nullopt;
    if constexpr (std::is_same_v<T, double>) return r_->num(key);
    else if constexpr (std::is_same_v<T, long long>) return r_->integer(key);
    else return r_->str(key);
  }
  [[nodiscard]] const std::optional<json_io::ObjectReader>& reader() const { return r_; }
  [[nodiscard]] const std::string& file() const { return file_; }

 private:
  const ScenarioFlags& flags_;
  const wl_io::ScenarioFieldTable& table_;
  std::string file_;
  const std::optional<json_io::ObjectReader>& r_;
};

int run_autoscale(const GlobalOptions& g, const CLI::App& cmd, ServeFlags& s,
                  const AutoscaleFlags& af) {
  Diagnostics diags;
  // ---- the scenario file: serving, load, autoscale ----
  std::optional<json_io::Json> file_json;
  std::optional<json_io::ObjectReader> top, load_r, pol_r;
  const std::string file = s.scenario;
  if (!s.scenario.empty()) {
    auto text = json_io::read_text_file(s.scenario, diags);
    if (!text) return report(diags);
    file_json = json_io::parse(*text, s.scenario, diags);
    if (!file_json) return report(diags);
    if (!file_json->is_object()) {
      diags.error(s.scenario, "/", "expected an object with serving, load and autoscale (docs/serving.md, Autoscaling)");
      return report(diags);
    }
    top.emplace(*file_json, wl_io::autoscale_file_specs(), s.scenario, "", diags);
    if (diags.has_errors()) return report(diags);
    load_r = top->object("load");
    pol_r = top->object("autoscale");
    s.scenario_json = file_json->contains("serving") ? (*file_json)["serving"] : json_io::Json::object();
    s.scenario_pointer = "/serving";
  }
  ServeContext ctx;
  KeyLocator key_at;
  auto resolved = resolve_serve_command(g, cmd, s, diags, ctx, &key_at);
  if (!resolved) return report(diags);
  ResolvedServing& rs = *resolved;
  const Format fmt_ = parse_format(g.format);
  if (rs.rate)
    diags.error("", key_at("rate"), "the load curve gives the rates: give peak_per_s/trough_per_s or points in "
                                           "load (--peak-rate, --trough-rate, --rate-points), not a rate");
  if (rs.concurrency) diags.error("", key_at("concurrency"), "autoscale runs open-loop arrivals: no concurrency");
  if (rs.perf.pp > 1)
    diags.error("", "--pp", "autoscale runs one pipeline stage per replica: PP micro-batching is not simulated yet "
                            "(give --tp)");
  if (rs.disaggregated || rs.speculation)
    diags.error("", rs.disaggregated ? "disaggregated" : "spec_acceptance",
                "autoscale runs aggregated replicas without speculative decoding");
  if (rs.perf.attention_dp > 1)
    diags.error("", key_at("attention_dp"),
                "autoscale runs replicas of one batch each; attention-DP ranks sharing their experts (wide EP) are not "
                "simulated yet (gpuplan serve prices and plans them)");

  // ---- the load ----
  const Picker lp(af.load, wl_io::autoscale_load_fields(), file, load_r);
  std::string w_trace, w_peak, w_trough, w_hour, w_points, w_hours, w_in, w_out, w_seed;
  const auto trace = lp.get<std::string>("trace", w_trace);
  const auto peak = lp.get<double>("peak_per_s", w_peak);
  const auto trough = lp.get<double>("trough_per_s", w_trough);
  const auto peak_hour = lp.get<double>("peak_hour", w_hour);
  const auto hours = lp.get<double>("hours", w_hours);
  const auto in_spec = lp.get<std::string>("input_lengths", w_in);
  const auto out_spec = lp.get<std::string>("output_lengths", w_out);
  const auto seed = lp.get<long long>("seed", w_seed);
  // Points: the flag "H:R,H:R,..." or the file's [[h, r], ...].
  std::optional<std::vector<std::pair<double, double>>> points;
  if (af.load.given("points")) {
    w_points = "--rate-points";
    std::vector<std::pair<double, double>> v;
    std::size_t pos = 0;
    const std::string t = af.load.text("points").value_or("");
    bool ok = true;
    while (pos <= t.size() && ok) {
      auto comma = t.find(',', pos);
      if (comma == std::string::npos) comma = t.size();
      const std::string item = t.substr(pos, comma - pos);
      const auto colon = item.find(':');
      try {
        std::size_t u1 = 0, u2 = 0;
        if (colon == std::string::npos) throw std::invalid_argument("no colon");
        const double h = std::stod(item.substr(0, colon), &u1);
        const double r = std::stod(item.substr(colon + 1), &u2);
        if (u1 != colon || u2 != item.size() - colon - 1) throw std::invalid_argument("trailing");
        v.emplace_back(h, r);
      } catch (...) {
        diags.error("", w_points, fmt::format("'{}' is not HOUR:RATE (e.g. 0:10,14:50,24:10)", item));
        ok = false;
      }
      pos = comma + 1;
    }
    if (ok) points = v;
  } else if (load_r && load_r->has("points")) {
    w_points = file + ": " + load_r->pointer("points");
    const auto* raw = load_r->raw("points");
    std::vector<std::pair<double, double>> v;
    bool ok = raw != nullptr && raw->is_array();
    if (ok) {
      for (const auto& p : *raw) {
        if (p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number())
          v.emplace_back(p[0].get<double>(), p[1].get<double>());
        else
          ok = false;
      }
    }
    if (!ok)
      diags.error("", w_points, fmt::format("{} is not a list of [hour, requests/s] pairs",
                                            raw ? json_io::describe_value(*raw) : std::string("(none)")));
    else
      points = v;
  }
  const bool curve_diurnal = peak.has_value() || trough.has_value();
  const int sources = (trace ? 1 : 0) + (curve_diurnal ? 1 : 0) + ((points || !w_points.empty()) ? 1 : 0);
  if (sources == 0)
    diags.error("", "--peak-rate", "give the load: a diurnal curve (--peak-rate and --trough-rate), points "
                                   "(--rate-points) or a trace (--trace), or load in the scenario file");
  if (sources > 1)
    diags.error("", trace ? w_trace : w_points,
                "give one load: a diurnal curve (peak and trough), points or a trace, not several");
  model::RateCurve curve;
  if (curve_diurnal) {
    if (!peak) diags.error("", w_peak, "a diurnal curve needs its peak rate (requests/s) as well as the trough");
    if (!trough) diags.error("", w_trough, "a diurnal curve needs its trough rate (requests/s) as well as the peak");
    if (peak && !(*peak > 0 && *peak < 1e6))
      diags.error("", w_peak, fmt::format("{} is not a rate in (0, 10⁶) requests/s", plain_number(*peak)));
    if (trough && !(*trough >= 0 && *trough < 1e6))
      diags.error("", w_trough, fmt::format("{} is not a rate in [0, 10⁶) requests/s", plain_number(*trough)));
    if (peak && trough && *trough > *peak)
      diags.error("", w_trough, fmt::format("the trough {} is above the peak {} requests/s", plain_number(*trough),
                                            plain_number(*peak)));
    if (peak_hour && !(*peak_hour >= 0 && *peak_hour < 24))
      diags.error("", w_hour, fmt::format("{} is not an hour in [0, 24)", plain_number(*peak_hour)));
    curve.kind = model::RateCurve::Kind::diurnal;
    curve.peak_per_s = peak.value_or(1);
    curve.trough_per_s = trough.value_or(0);
    curve.peak_hour = peak_hour.value_or(14);
  } else if (peak_hour) {
    diags.error("", w_hour, "a peak hour shapes the built-in diurnal curve: give its peak and trough rates");
  }
  if (points) {
    if (points->empty()) diags.error("", w_points, "no points: give at least one [hour, requests/s]");
    for (std::size_t i = 0; i < points->size(); ++i) {
      const auto& p = (*points)[i];
      if (!(p.first >= 0 && p.first <= 168))
        diags.error("", w_points, fmt::format("point {}: hour {} is not in [0, 168]", i + 1, plain_number(p.first)));
      if (!(p.second >= 0 && p.second < 1e6))
        diags.error("", w_points, fmt::format("point {}: {} is not a rate in [0, 10⁶) requests/s", i + 1,
                                              plain_number(p.second)));
      if (i > 0 && !(p.first > (*points)[i - 1].first))
        diags.error("", w_points, fmt::format("point {}: hour {} does not come after {}", i + 1,
                                              plain_number(p.first), plain_number((*points)[i - 1].first)));
    }
    curve.kind = model::RateCurve::Kind::points;
    curve.points = *points;
    if (!points->empty() && !(curve.max_rate() > 0)) diags.error("", w_points, "every rate is 0: no load");
  }
  if (hours && !(*hours > 0 && *hours <= 168))
    diags.error("", w_hours, fmt::format("{} is not a duration in (0, 168] hours", plain_number(*hours)));
  if (hours && trace) diags.error("", w_hours, "a trace sets its own duration: give hours for a curve only");
  if (seed && *seed < 0) diags.error("", w_seed, fmt::format("{} is not a seed ≥ 0", *seed));
  model::LengthSampler in_len, out_len;
  in_len.a = in_len.b = double(rs.input_tokens);
  out_len.a = out_len.b = double(rs.output_tokens);
  if (in_spec)
    if (auto l = parse_sampler(*in_spec, w_in, diags)) in_len = *l;
  if (out_spec)
    if (auto l = parse_sampler(*out_spec, w_out, diags)) out_len = *l;
  if (trace && (in_spec || out_spec))
    diags.error("", in_spec ? w_in : w_out,
                "a trace gives each request's lengths: length distributions apply to a rate curve only");

  // ---- the policy ----
  const Picker pp(af.policy, wl_io::autoscale_policy_fields(), file, pol_r);
  std::string w_metric, w_target, w_up, w_down, w_min, w_max, w_init, w_cold, w_int, w_upcd, w_downcd, w_e2e;
  const auto metric = pp.get<std::string>("metric", w_metric);
  const auto target = pp.get<double>("target", w_target);
  const auto up_at = pp.get<double>("scale_up_at", w_up);
  const auto down_at = pp.get<double>("scale_down_at", w_down);
  const auto min_r = pp.get<long long>("min_replicas", w_min);
  const auto max_r = pp.get<long long>("max_replicas", w_max);
  const auto init_r = pp.get<long long>("initial_replicas", w_init);
  const auto cold = pp.get<double>("cold_start_s", w_cold);
  const auto interval = pp.get<double>("interval_s", w_int);
  const auto up_cd = pp.get<double>("up_cooldown_s", w_upcd);
  const auto down_cd = pp.get<double>("down_cooldown_s", w_downcd);
  const auto e2e_ms = Picker(af.top, wl_io::autoscale_fields(), file, top).get<double>("e2e_ms", w_e2e);
  model::AutoscalePolicy pol;
  if (metric && *metric != "queue" && *metric != "utilisation" && *metric != "utilization")
    diags.error("", w_metric, fmt::format("'{}' is not a scaling metric (queue or utilisation)", *metric));
  pol.metric = metric && (*metric == "utilisation" || *metric == "utilization")
                   ? model::AutoscalePolicy::Metric::utilisation
                   : model::AutoscalePolicy::Metric::queue;
  const bool util = pol.metric == model::AutoscalePolicy::Metric::utilisation;
  if (!target)
    diags.error("", w_target, util ? "give the target KV utilisation, e.g. 0.7 (--target)"
                                   : "give the target requests per replica, e.g. 64 (--target)");
  const double tmax = util ? 1.0 : 1e7;
  auto in_range = [&](const std::optional<double>& v, const std::string& where, const char* what) {
    if (v && !(*v > 0 && *v <= tmax))
      diags.error("", where, fmt::format("{} is not a {} in (0, {}]", plain_number(*v), what, util ? "1" : "10⁷"));
  };
  const char* what = util ? "KV utilisation" : "number of requests per replica";
  in_range(target, w_target, what);
  in_range(up_at, w_up, what);
  if (down_at && !(*down_at >= 0 && *down_at <= tmax))
    diags.error("", w_down, fmt::format("{} is not a {} in [0, {}]", plain_number(*down_at), what, util ? "1" : "10⁷"));
  pol.target = target.value_or(1);
  pol.scale_up_at = up_at.value_or(pol.target);
  pol.scale_down_at = down_at.value_or(0.7 * pol.target);
  if (target && up_at && *up_at < *target)
    diags.error("", w_up, fmt::format("{} is below the target {}: scale up at or above the target",
                                      plain_number(*up_at), plain_number(*target)));
  if (target && down_at && *down_at > *target)
    diags.error("", w_down, fmt::format("{} is above the target {}: scale down at or below the target",
                                        plain_number(*down_at), plain_number(*target)));
  auto seconds_in = [&](const std::optional<double>& v, const std::string& where, double lo_excl, const char* rule) {
    if (v && !((lo_excl < 0 ? *v >= 0 : *v > lo_excl) && *v <= 7 * 86400.0))
      diags.error("", where, fmt::format("{} is not {}", plain_number(*v), rule));
  };
  seconds_in(cold, w_cold, -1, "a cold start in [0, 604800] seconds");
  seconds_in(interval, w_int, 0, "an evaluation interval in (0, 604800] seconds");
  seconds_in(up_cd, w_upcd, -1, "a cooldown in [0, 604800] seconds");
  seconds_in(down_cd, w_downcd, -1, "a cooldown in [0, 604800] seconds");
  if (e2e_ms && !(*e2e_ms > 0 && *e2e_ms < 1e9))
    diags.error("", w_e2e, fmt::format("{} is not an E2E target in (0, 10⁹) ms", plain_number(*e2e_ms)));
  auto count = [&](const std::optional<long long>& v, const std::string& where, const char* which) {
    if (v && !(*v >= 1 && *v <= 100000))
      diags.error("", where, fmt::format("{} is not a replica count in [1, 100000] ({})", *v, which));
  };
  count(min_r, w_min, "min_replicas");
  count(max_r, w_max, "max_replicas");
  count(init_r, w_init, "initial_replicas");
  if (min_r && max_r && *min_r > *max_r)
    diags.error("", w_max, fmt::format("max_replicas {} is below min_replicas {}", *max_r, *min_r));
  if (init_r && min_r && *init_r < *min_r)
    diags.error("", w_init, fmt::format("initial_replicas {} is below min_replicas {}", *init_r, *min_r));
  if (init_r && max_r && *init_r > *max_r)
    diags.error("", w_init, fmt::format("initial_replicas {} is above max_replicas {}", *init_r, *max_r));
  if (!(af.series_s > 0 && af.series_s <= 86400))
    diags.error("", "--series-s", fmt::format("{} is not an interval in (0, 86400] seconds", plain_number(af.series_s)));
  if (diags.has_errors()) return report(diags);

  // ---- the requests ----
  std::vector<model::SimRequest> requests;
  std::string workload;
  double horizon = 0;
  if (trace) {
    std::string path = *trace;
    if (cmd.count("--trace") == 0 && !path.empty() && path.front() != '/') {  // relative to the scenario file
      const auto slash = file.find_last_of('/');
      if (slash != std::string::npos) path = file.substr(0, slash + 1) + path;
    }
    auto text = json_io::read_text_file(path, diags, std::size_t{1} << 30);
    if (!text) return report(diags);
    auto t = parse_trace_csv(*text, path, diags);
    if (!t) return report(diags);
    requests = std::move(t->requests);
    horizon = requests.back().arrival_s;
    workload = fmt::format("trace {} ({}), {} requests over {}", path, t->format, requests.size(), hours_text(horizon));
  } else {
    horizon = hours.value_or(24) * 3600.0;
    requests = model::generate_curve_requests(curve, horizon, in_len, out_len, std::uint64_t(seed.value_or(1)));
    const std::string lengths = fmt::format("{} / {} tokens", in_spec.value_or(std::to_string(rs.input_tokens)),
                                            out_spec.value_or(std::to_string(rs.output_tokens)));
    workload = curve.kind == model::RateCurve::Kind::diurnal
                   ? fmt::format("diurnal Poisson arrivals, {} req/s at {:02}:00 to {} req/s 12 h later, {} requests "
                                 "over {} (seed {}), {}",
                                 plain_number(curve.peak_per_s), int(curve.peak_hour), plain_number(curve.trough_per_s),
                                 requests.size(), hours_text(horizon), seed.value_or(1), lengths)
                   : fmt::format("Poisson arrivals along {} points (peak {} req/s), {} requests over {} (seed {}), {}",
                                 curve.points.size(), plain_number(curve.max_rate()), requests.size(),
                                 hours_text(horizon), seed.value_or(1), lengths);
  }
  if (requests.empty()) {
    diags.error("", trace ? w_trace : w_peak, "the load has no request in the simulated time");
    return report(diags);
  }
  report(diags);  // notes

  // ---- the replica's engine ----
  auto sim_opt = replica_sim_options(rs, requests);
  if (!sim_opt) return kExitInfeasible;

  // ---- the fixed fleet: the capacity planner at the peak rate, at this replica's layout ----
  double peak_rate = 0;
  if (trace) {  // the busiest 5 minutes of the trace
    std::size_t lo = 0;
    for (std::size_t hi = 0; hi < requests.size(); ++hi) {
      while (requests[hi].arrival_s - requests[lo].arrival_s > 300.0) ++lo;
      peak_rate = std::max(peak_rate, double(hi - lo + 1) / 300.0);
    }
  } else {
    peak_rate = curve.max_rate();
  }
  double mean_in = 0, mean_out = 0;
  for (const auto& r : requests) {
    mean_in += double(r.input_tokens);
    mean_out += double(r.output_tokens);
  }
  mean_in /= double(requests.size());
  mean_out /= double(requests.size());
  ResolvedServing prs = rs;
  prs.rate = peak_rate;
  prs.input_tokens = std::max<std::int64_t>(1, std::llround(mean_in));
  prs.output_tokens = std::max<std::int64_t>(1, std::llround(mean_out));
  prs.input_dist.reset();
  prs.output_dist.reset();
  if (!trace && in_len.kind == model::LengthSampler::Kind::lognormal)
    prs.input_dist = model::lognormal_lengths(in_len.a, in_len.b);
  if (!trace && out_len.kind == model::LengthSampler::Kind::lognormal)
    prs.output_dist = model::lognormal_lengths(out_len.a, out_len.b);
  model::ServingPlanOptions popt = prs.plan_options();
  popt.tp_options = {rs.perf.tp};
  popt.pp_options = {1};
  const auto plan = model::plan_serving(prs.arch, prs.params, prs.perf, prs.traffic(), prs.sla, prs.sys, popt,
                                        Explain::off);
  std::int64_t fixed_replicas = plan.best ? plan.best->replicas : 1;
  std::vector<std::string> notes;
  if (!plan.best)
    notes.push_back("the planner found no layout at this TP: the fixed fleet is one replica");
  else if (!plan.feasible)
    notes.push_back(fmt::format("the planner's fixed fleet ({} replicas) misses the SLA at the peak rate in the steady "
                                "state: it is the best it could do",
                                fixed_replicas));

  pol.min_replicas = min_r.value_or(1);
  pol.max_replicas = max_r.value_or(std::max<std::int64_t>(pol.min_replicas, 4 * fixed_replicas));
  pol.initial_replicas = init_r.value_or(pol.min_replicas);
  if (!max_r && pol.initial_replicas > pol.max_replicas) pol.max_replicas = pol.initial_replicas;
  pol.cold_start_s = cold.value_or(300);
  pol.interval_s = interval.value_or(30);
  pol.up_cooldown_s = up_cd.value_or(0);
  pol.down_cooldown_s = down_cd.value_or(300);

  model::FleetOptions fo;
  fo.sim = *sim_opt;
  fo.policy = pol;
  fo.gpus_per_replica = rs.perf.tp * rs.perf.pp;
  fo.horizon_s = horizon;
  fo.series_interval_s = af.series_s;
  fo.sla.ttft_s = rs.sla.ttft ? rs.sla.ttft->raw() : 0.0;
  fo.sla.tpot_s = rs.sla.itl ? rs.sla.itl->raw() : 0.0;
  fo.sla.e2e_s = e2e_ms ? *e2e_ms / 1000.0 : 0.0;
  fo.sla.percentile = rs.percentile / 100.0;
  const model::FleetResult as = model::simulate_fleet(rs.arch, rs.perf, rs.sys, requests, fo);
  model::FleetOptions ff = fo;
  ff.policy.enabled = false;
  ff.policy.initial_replicas = fixed_replicas;
  const model::FleetResult fx = model::simulate_fleet(rs.arch, rs.perf, rs.sys, requests, ff);

  return render_autoscale(AutoscaleOutcome{rs, fo, as, fx, fixed_replicas, peak_rate, workload, horizon,
                                          trace.has_value(), notes},
                          fmt_);
}

}  // namespace

void register_autoscale(CLI::App& app, GlobalOptions& g, int& rc) {
  auto s = std::make_shared<ServeFlags>();
  auto af = std::make_shared<AutoscaleFlags>();
  auto* c = app.add_subcommand("autoscale",
                               "a day of time-varying load on a fleet of replicas scaled on queue depth or KV "
                               "utilisation, against the planner's fixed fleet: GPU-hours, cost, SLA misses");
  c->add_option("--scenario", s->scenario,
                "autoscale scenario JSON: serving (scenario keys), load, autoscale, e2e_ms (docs/serving.md); flags "
                "override it");
  add_serve_options(*c, *s, false);
  add_serve_key(*c, *s, "ttft_ms", "SLA: time to first token of a request, ms");
  add_serve_key(*c, *s, "itl_ms", "SLA: mean inter-token latency of a request (TPOT), ms");
  af->top.add(*c, wl_io::autoscale_fields());
  add_serve_key(*c, *s, "percentile",
                "SLA percentile: the planner's TTFT percentile, and a minute is in violation when more than 100 − this "
                "percent of its requests miss (default: 99)");
  add_serve_key(*c, *s, "price_usd_per_hour", "$ per GPU-hour (default: the GPU file's indicative price)");
  af->load.add(*c, wl_io::autoscale_load_fields());
  af->policy.add(*c, wl_io::autoscale_policy_fields());
  c->add_option("--series-s", af->series_s, "time-series interval, seconds")->capture_default_str();
  add_format_option(*c, g);
  accept_engine_spellings(*c, g.data_dir);
  c->callback([&g, s, af, c, &rc] {
    s->engine_typed = c->remaining();
    rc = run_autoscale(g, *c, *s, *af);
  });
}

}  // namespace gpuplan::cli
