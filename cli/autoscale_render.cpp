// `gpuplan autoscale`'s output (autoscale_cmd.hpp): the two fleets priced and compared, the time series, in text,
// Markdown, JSON or CSV.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "autoscale_cmd.hpp"
#include "gpuplan/core/format.hpp"
#include "sim_common.hpp"

namespace gpuplan::cli::autoscale_cmd {

using nlohmann::ordered_json;

namespace {

std::string clock_of(double t_s) {
  const auto m = std::int64_t(std::floor(t_s / 60.0 + 1e-9));
  return fmt::format("{:02}:{:02}", m / 60, m % 60);
}

ordered_json fleet_json(const model::FleetResult& f, double price_h) {
  ordered_json o;
  o["gpu_hours"] = f.gpu_hours;
  o["replica_hours"] = f.replica_hours;
  o["cost_usd"] = price_h > 0 ? ordered_json(f.gpu_hours * price_h) : ordered_json(nullptr);
  o["peak_replicas"] = f.peak_replicas;
  o["scale_ups"] = f.scale_ups;
  o["scale_downs"] = f.scale_downs;
  o["replicas_started"] = f.replicas_started;
  o["requests"] = f.requests;
  o["completed"] = f.completed;
  o["refused"] = f.refused;
  o["sla_missed"] = {{"ttft", f.missed_ttft}, {"tpot", f.missed_tpot}, {"e2e", f.missed_e2e}, {"any", f.missed_any},
                     {"share", f.requests > 0 ? double(f.missed_any) / double(f.requests) : 0.0}};
  o["minutes"] = f.minutes;
  o["minutes_in_violation"] = f.minutes_in_violation;
  o["ttft"] = stats_json(f.ttft);
  o["itl"] = stats_json(f.itl);
  o["tpot"] = stats_json(f.tpot);
  o["e2e"] = stats_json(f.e2e);
  o["preemptions"] = f.preemptions;
  o["iterations"] = f.iterations;
  o["end_s"] = f.end_s;
  ordered_json series = ordered_json::array();
  for (const auto& p : f.series)
    series.push_back({{"t_s", p.t_s},
                      {"arrivals_per_s", p.arrivals_per_s},
                      {"ready", p.ready},
                      {"starting", p.starting},
                      {"draining", p.draining},
                      {"running", p.running},
                      {"waiting", p.waiting},
                      {"metric", p.metric},
                      {"ttft_p_s", p.ttft_p},
                      {"e2e_p_s", p.e2e_p},
                      {"missed_share", p.missed_share}});
  o["series"] = series;
  o["notes"] = f.notes;
  return o;
}

}  // namespace

int render_autoscale(const AutoscaleOutcome& r, Format fmt_) {
  const ResolvedServing& rs = r.rs;
  const model::FleetOptions& fo = r.fo;
  const model::AutoscalePolicy& pol = r.fo.policy;
  const bool util = pol.metric == model::AutoscalePolicy::Metric::utilisation;
  const model::FleetResult& as = r.as;
  const model::FleetResult& fx = r.fx;
  const std::int64_t fixed_replicas = r.fixed_replicas;
  const double peak_rate = r.peak_rate;
  const std::string& workload = r.workload;
  const double horizon = r.horizon;
  const bool trace = r.trace;
  std::vector<std::string> notes = r.notes;
  // ---- price ----
  const hw::GpuSpec* gpu = rs.sys.gpu;
  const std::optional<units::UsdPerSecond> given = rs.sys.price;
  const std::optional<units::UsdPerSecond> price = given ? given : (gpu ? gpu->price : std::nullopt);
  const double price_h = price ? units::to_usd_per_hour(*price) : 0.0;
  const std::string price_text = price ? describe_price(given, gpu) : std::string("no price for this GPU (give --price)");
  const std::string kind = price_kind(given, gpu).value_or("none");

  const std::string metric_name = util ? "KV utilisation" : "requests per replica";
  const std::string policy_text = fmt::format(
      "{} target {}, scale up above {}, down below {}; {}–{} replicas ({} at 00:00); cold start {} s; evaluated every "
      "{} s; cooldown {} s up, {} s down",
      metric_name, plain_number(pol.target), plain_number(pol.scale_up_at), plain_number(pol.scale_down_at),
      pol.min_replicas, pol.max_replicas, pol.initial_replicas, plain_number(pol.cold_start_s),
      plain_number(pol.interval_s), plain_number(pol.up_cooldown_s), plain_number(pol.down_cooldown_s));
  const std::string sla_text = fmt::format(
      "TTFT {}, TPOT {}, E2E {} per request; a minute is in violation when more than {}% of its requests miss",
      fo.sla.ttft_s > 0 ? units::format(units::Seconds(fo.sla.ttft_s)) : std::string("none"),
      fo.sla.tpot_s > 0 ? units::format(units::Seconds(fo.sla.tpot_s)) : std::string("none"),
      fo.sla.e2e_s > 0 ? units::format(units::Seconds(fo.sla.e2e_s)) : std::string("none"),
      plain_number(100.0 - rs.percentile));
  const std::string fixed_text =
      fmt::format("{} replicas (the capacity planner at the peak {:.4g} req/s, TP {}, SLA p{})", fixed_replicas,
                  peak_rate, rs.perf.tp, plain_number(rs.percentile));
  const std::string engine = fmt::format(
      "{} on {} × {} (TP {}), token budget {}, max {} sequences, {} KV blocks of {} tokens", rs.arch.id,
      rs.perf.tp, gpu->info.id, rs.perf.tp, rs.perf.max_batched_tokens, rs.perf.max_batch, fo.sim.kv_blocks,
      fo.sim.block_size);
  notes.insert(notes.end(), as.notes.begin(), as.notes.end());
  for (const auto& n : fx.notes) notes.push_back("fixed fleet: " + n);

  if (fmt_ == Format::json) {
    ordered_json o;
    o["model"] = rs.arch.id;
    o["gpu"] = gpu->info.id;
    o["tp"] = rs.perf.tp;
    o["engine"] = {{"max_num_batched_tokens", rs.perf.max_batched_tokens},
                   {"max_num_seqs", rs.perf.max_batch},
                   {"block_size", fo.sim.block_size},
                   {"kv_blocks", fo.sim.kv_blocks},
                   {"prefix_hit_rate", rs.perf.prefix_hit_rate}};
    o["workload"] = workload;
    o["horizon_s"] = horizon;
    o["peak_rate_per_s"] = peak_rate;
    o["policy"] = {{"metric", util ? "utilisation" : "queue"},
                   {"target", pol.target},
                   {"scale_up_at", pol.scale_up_at},
                   {"scale_down_at", pol.scale_down_at},
                   {"min_replicas", pol.min_replicas},
                   {"max_replicas", pol.max_replicas},
                   {"initial_replicas", pol.initial_replicas},
                   {"cold_start_s", pol.cold_start_s},
                   {"interval_s", pol.interval_s},
                   {"up_cooldown_s", pol.up_cooldown_s},
                   {"down_cooldown_s", pol.down_cooldown_s}};
    o["sla"] = {{"ttft_s", fo.sla.ttft_s}, {"tpot_s", fo.sla.tpot_s}, {"e2e_s", fo.sla.e2e_s},
                {"percentile", rs.percentile}};
    o["price"] = {{"usd_per_gpu_hour", price ? ordered_json(price_h) : ordered_json(nullptr)},
                  {"kind", kind},
                  {"source", price_text}};
    o["autoscaled"] = fleet_json(as, price_h);
    o["fixed"] = fleet_json(fx, price_h);
    o["fixed"]["replicas"] = fixed_replicas;
    o["gpu_hours_saved"] = fx.gpu_hours - as.gpu_hours;
    o["notes"] = notes;
    out(json_text(o));
    return kExitOk;
  }
  if (fmt_ == Format::csv) {
    std::string o =
        "t_s,arrivals_per_s,ready,starting,draining,running,waiting,metric,ttft_p_s,e2e_p_s,missed_share,fixed_ttft_p_s,"
        "fixed_missed_share\n";
    for (std::size_t i = 0; i < as.series.size(); ++i) {
      const auto& p = as.series[i];
      const auto* q = i < fx.series.size() ? &fx.series[i] : nullptr;
      o += fmt::format("{},{:.6g},{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g}\n", plain_number(p.t_s),
                       p.arrivals_per_s, p.ready, p.starting, p.draining, p.running, p.waiting, p.metric, p.ttft_p,
                       p.e2e_p, p.missed_share, q ? q->ttft_p : 0.0, q ? q->missed_share : 0.0);
    }
    out(o);
    return kExitOk;
  }
  auto ms = [](double x) { return units::format(units::Seconds(x)); };
  auto money = [&](double gh) { return price ? fmt::format("${:.2f}", gh * price_h) : std::string("—"); };
  auto share = [](std::int64_t k, std::int64_t n) { return n > 0 ? 100.0 * double(k) / double(n) : 0.0; };
  std::vector<Section> secs;
  secs.push_back({fmt::format("Autoscaling {} on {} (TP {})", rs.arch.name.empty() ? rs.arch.id : rs.arch.name,
                              gpu->info.id, rs.perf.tp),
                  {{"replica", engine},
                   {"load", workload},
                   {"policy", policy_text},
                   {"fixed fleet", fixed_text},
                   {"SLA", sla_text},
                   {"price", price_text}}});
  Section cmp{fmt::format("Over the {} (GPUs paid from 00:00 to {})", trace ? "trace" : "day", hours_text(as.end_s)),
              {}};
  auto row = [&](const std::string& k, const std::string& a, const std::string& b) {
    cmp.rows.emplace_back(k, fmt::format("autoscaled {} | fixed {}", a, b));
  };
  row("GPU-hours", fmt::format("{:.1f}", as.gpu_hours), fmt::format("{:.1f}", fx.gpu_hours));
  row(fmt::format("cost ({})", kind), money(as.gpu_hours), money(fx.gpu_hours));
  row("replicas", fmt::format("{}–{} ({} started, {} scale-ups, {} scale-downs)", pol.min_replicas, as.peak_replicas,
                              as.replicas_started, as.scale_ups, as.scale_downs),
      std::to_string(fixed_replicas));
  row("requests missing the SLA",
      fmt::format("{} of {} ({:.2f}%: TTFT {}, TPOT {}, E2E {})", as.missed_any, as.requests,
                  share(as.missed_any, as.requests), as.missed_ttft, as.missed_tpot, as.missed_e2e),
      fmt::format("{} ({:.2f}%: TTFT {}, TPOT {}, E2E {})", fx.missed_any, share(fx.missed_any, fx.requests),
                  fx.missed_ttft, fx.missed_tpot, fx.missed_e2e));
  row("minutes in violation", fmt::format("{} of {}", as.minutes_in_violation, as.minutes),
      fmt::format("{} of {}", fx.minutes_in_violation, fx.minutes));
  row("TTFT p50 / p99", ms(as.ttft.p50) + " / " + ms(as.ttft.p99), ms(fx.ttft.p50) + " / " + ms(fx.ttft.p99));
  row("TPOT p50 / p99", ms(as.tpot.p50) + " / " + ms(as.tpot.p99), ms(fx.tpot.p50) + " / " + ms(fx.tpot.p99));
  row("E2E p50 / p99", ms(as.e2e.p50) + " / " + ms(as.e2e.p99), ms(fx.e2e.p50) + " / " + ms(fx.e2e.p99));
  cmp.rows.emplace_back("saved", fmt::format("{:.1f} GPU-hours ({:.1f}%){}", fx.gpu_hours - as.gpu_hours,
                                             fx.gpu_hours > 0 ? 100.0 * (1.0 - as.gpu_hours / fx.gpu_hours) : 0.0,
                                             price ? fmt::format(", ${:.2f}", (fx.gpu_hours - as.gpu_hours) * price_h)
                                                   : std::string()));
  secs.push_back(cmp);
  if (!notes.empty()) {
    Section n{"Notes", {}};
    for (const auto& x : notes) n.rows.emplace_back("", x);
    secs.push_back(n);
  }
  std::string text = render_sections(secs, fmt_);
  Table ts;
  ts.columns = {{"time", "time"},
                {"arrivals", "req/s", true},
                {"replicas", "ready (+starting, draining)"},
                {"running", "running", true},
                {"waiting", "waiting", true},
                {"metric", util ? "KV use" : "req/replica", true},
                {"ttft", fmt::format("TTFT p{}", plain_number(rs.percentile))},
                {"missed", "missed %", true},
                {"fixed_ttft", fmt::format("fixed TTFT p{}", plain_number(rs.percentile))},
                {"fixed_missed", "fixed missed %", true}};
  for (std::size_t i = 0; i < as.series.size(); ++i) {
    const auto& p = as.series[i];
    const auto* q = i < fx.series.size() ? &fx.series[i] : nullptr;
    ts.rows.push_back({clock_of(p.t_s), fmt::format("{:.1f}", p.arrivals_per_s),
                       fmt::format("{} (+{}, {})", p.ready, p.starting, p.draining), std::to_string(p.running),
                       std::to_string(p.waiting), fmt::format("{:.3g}", p.metric), ms(p.ttft_p),
                       fmt::format("{:.2f}", 100 * p.missed_share), q ? ms(q->ttft_p) : "",
                       q ? fmt::format("{:.2f}", 100 * q->missed_share) : ""});
  }
  text += fmt_ == Format::md ? fmt::format("\n## Time series (every {} s, by arrival)\n\n", plain_number(fo.series_interval_s))
                             : fmt::format("\nTime series (every {} s; latency and misses by arrival)\n",
                                           plain_number(fo.series_interval_s));
  text += ts.render(fmt_);
  out(text);
  return kExitOk;
}

}  // namespace gpuplan::cli::autoscale_cmd
