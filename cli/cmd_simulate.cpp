// `gpuplan simulate`: a request-level discrete-event simulation of one serving replica (model/simulate.hpp) under
// synthetic arrivals (Poisson, Gamma) or a replayed trace (Azure 2023, BurstGPT). The model, hardware and engine
// resolve exactly as for `gpuplan serve` (serve_options.hpp); the KV blocks come from the serving memory model.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/simulate.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "serve_options.hpp"
#include "sim_common.hpp"
#include "trace_csv.hpp"

namespace gpuplan::cli {
namespace {

using nlohmann::ordered_json;

/// simulate's own options: generated from wl_io::simulate_fields() (`keys`), then read over the defaults the table
/// states (test_serving_fields.cpp checks that simulate runs them).
struct SimFlags {
  ScenarioFlags keys;
  std::string trace;
  std::string arrival = "poisson";
  double cv = 1.0;
  long long requests = 1000;
  std::optional<std::string> input_lengths, output_lengths;
  long long seed = 1;
  std::optional<double> series_s;
  std::string batching = "continuous";
  std::optional<long long> static_batch;
  double batch_timeout_s = 0;

  void read() {
    trace = keys.text("trace").value_or(trace);
    arrival = keys.text("arrival").value_or(arrival);
    cv = keys.number("cv").value_or(cv);
    requests = keys.integer("requests").value_or(requests);
    input_lengths = keys.text("input_lengths");
    output_lengths = keys.text("output_lengths");
    seed = keys.integer("seed").value_or(seed);
    series_s = keys.number("series_s");
    batching = keys.text("batching").value_or(batching);
    static_batch = keys.integer("static_batch");
    batch_timeout_s = keys.number("batch_timeout_s").value_or(batch_timeout_s);
  }
};

int run_simulate(const GlobalOptions& g, const CLI::App& cmd, const ServeFlags& s,
                 const SimFlags& sf) {
  Diagnostics diags;
  ServeContext ctx;
  auto resolved = resolve_serve_command(g, cmd, s, diags, ctx);
  if (!resolved) return report(diags);
  ResolvedServing& rs = *resolved;
  const bool trace = !sf.trace.empty();
  // Flag checks (exit 2): arrivals, lengths, options.
  if (trace && cmd.count("--rate") > 0)
    diags.error("", "--rate", "a trace sets its own arrival times: give --trace or --rate, not both");
  if (!trace && !rs.rate)
    diags.error("", "--rate", "give the arrival rate in requests per second (or --trace FILE to replay a trace)");
  if (rs.rate && !(*rs.rate > 0 && *rs.rate < 1e9))
    diags.error("", "--rate", fmt::format("{} is not a rate in (0, 10⁹) requests/s", plain_number(*rs.rate)));
  if (sf.arrival != "poisson" && sf.arrival != "gamma")
    diags.error("", "--arrival", fmt::format("'{}' is not an arrival process (poisson or gamma)", sf.arrival));
  if (!(sf.cv > 0 && sf.cv <= 100))
    diags.error("", "--cv", fmt::format("{} is not a coefficient of variation in (0, 100]", plain_number(sf.cv)));
  if (sf.arrival == "poisson" && cmd.count("--cv") > 0 && sf.cv != 1.0)
    diags.error("", "--cv", "Poisson gaps have a coefficient of variation of 1: give --arrival gamma for bursts");
  if (sf.requests < 1 || sf.requests > 100'000'000)
    diags.error("", "--requests", fmt::format("{} is not a request count in [1, 10⁸]", sf.requests));
  if (sf.seed < 0) diags.error("", "--seed", fmt::format("{} is not a seed ≥ 0", sf.seed));
  if (sf.series_s && !(*sf.series_s > 0 && *sf.series_s < 1e9))
    diags.error("", "--series-s", fmt::format("{} is not an interval in (0, 10⁹) seconds", plain_number(*sf.series_s)));
  if (sf.batching != "continuous" && sf.batching != "static")
    diags.error("", "--batching", fmt::format("'{}' is not a batching policy (continuous or static)", sf.batching));
  const bool static_batching = sf.batching == "static";
  if (!static_batching && (sf.static_batch || cmd.count("--batch-timeout-s") > 0))
    diags.error("", sf.static_batch ? "--static-batch" : "--batch-timeout-s",
                "applies to static batching only: add --batching static");
  if (sf.static_batch && (*sf.static_batch < 1 || *sf.static_batch > 1'000'000))
    diags.error("", "--static-batch", fmt::format("{} is not a batch size in [1, 10⁶] requests", *sf.static_batch));
  if (!(sf.batch_timeout_s >= 0 && sf.batch_timeout_s < 1e9))
    diags.error("", "--batch-timeout-s",
                fmt::format("{} is not a timeout in [0, 10⁹) seconds", plain_number(sf.batch_timeout_s)));
  if (rs.perf.pp > 1)
    diags.error("", "--pp", "simulate runs one pipeline stage per replica: PP micro-batching is not simulated yet "
                            "(give --tp)");
  if (rs.disaggregated || rs.speculation)
    diags.error("", rs.disaggregated ? "disaggregated" : "spec_acceptance",
                "simulate runs one aggregated replica without speculative decoding");
  if (rs.perf.attention_dp > 1)
    diags.error("", "attention_dp",
                "simulate runs one replica's batch; attention-DP ranks sharing their experts (wide EP) are not "
                "simulated yet (gpuplan serve prices and plans them)");
  const Format fmt_ = parse_format(g.format);
  if (fmt_ == Format::csv && !sf.series_s)
    diags.error("", "--format", "csv prints the time series: give --series-s SECONDS");
  model::LengthSampler in_len, out_len;
  in_len.a = in_len.b = double(rs.input_tokens);
  out_len.a = out_len.b = double(rs.output_tokens);
  if (sf.input_lengths)
    if (auto l = parse_sampler(*sf.input_lengths, "--input-lengths", diags)) in_len = *l;
  if (sf.output_lengths)
    if (auto l = parse_sampler(*sf.output_lengths, "--output-lengths", diags)) out_len = *l;
  if (trace && (sf.input_lengths || sf.output_lengths))
    diags.error("", sf.input_lengths ? "--input-lengths" : "--output-lengths",
                "a trace gives each request's lengths: length distributions apply to synthetic arrivals only");
  if (diags.has_errors()) return report(diags);

  std::vector<model::SimRequest> requests;
  std::string workload;
  if (trace) {
    auto text = json_io::read_text_file(sf.trace, diags, std::size_t{1} << 30);  // traces run to hundreds of MB
    if (!text) return report(diags);
    auto t = parse_trace_csv(*text, sf.trace, diags);
    if (!t) return report(diags);
    requests = std::move(t->requests);
    workload = fmt::format("trace {} ({}), {} requests over {:.4g} s", sf.trace, t->format, requests.size(),
                           requests.back().arrival_s);
    if (t->skipped_zero_output > 0)
      diags.note(sf.trace, "", fmt::format("{} rows with no generated token skipped", t->skipped_zero_output));
  } else {
    model::ArrivalSpec a;
    a.kind = sf.arrival == "gamma" ? model::ArrivalSpec::Kind::gamma : model::ArrivalSpec::Kind::poisson;
    a.rate_per_s = *rs.rate;
    a.cv = sf.cv;
    a.count = sf.requests;
    a.input = in_len;
    a.output = out_len;
    a.seed = std::uint64_t(sf.seed);
    requests = model::generate_requests(a);
    workload = fmt::format("{} arrivals at {} req/s{}, {} requests, seed {}", sf.arrival, plain_number(*rs.rate),
                           sf.arrival == "gamma" ? fmt::format(" (CV {})", plain_number(sf.cv)) : std::string(),
                           sf.requests, sf.seed);
  }
  report(diags);  // notes

  auto sim_opt = replica_sim_options(rs, requests);
  if (!sim_opt) return kExitInfeasible;
  model::SimOptions opt = *sim_opt;
  const std::int64_t block = opt.block_size;
  opt.series_interval_s = sf.series_s.value_or(0.0);
  if (static_batching) {
    opt.batching = model::Batching::static_;
    opt.static_batch = sf.static_batch.value_or(rs.perf.max_batch);
    opt.static_timeout_s = sf.batch_timeout_s;
  }
  const model::SimResult r = model::simulate_serving(rs.arch, rs.perf, rs.sys, requests, opt);

  const std::string engine =
      static_batching
          ? fmt::format("static batching: batches of up to {} requests, a partial batch after {} s, prompts padded to "
                        "the longest and every batch run to its longest output; {} KV blocks of {} tokens ({} tokens)",
                        opt.static_batch, plain_number(opt.static_timeout_s), opt.kv_blocks, block, opt.kv_blocks * block)
          : fmt::format("continuous batching (vLLM v1): token budget {}, max {} sequences, {} KV blocks of {} tokens "
                        "({} tokens){}",
                        rs.perf.max_batched_tokens, rs.perf.max_batch, opt.kv_blocks, block, opt.kv_blocks * block,
                        rs.perf.cached_prefix_tokens > 0
                            ? fmt::format(", shared prefix {} tokens", rs.perf.cached_prefix_tokens)
                            : std::string());
  if (fmt_ == Format::csv) {
    std::string o = "t_s,running,waiting,kv_utilisation,output_tokens_per_s\n";
    for (const auto& p : r.series)
      o += fmt::format("{},{},{},{:.4f},{:.6g}\n", plain_number(p.t_s), p.running, p.waiting, p.kv_utilisation,
                       p.tokens_per_s);
    out(o);
    return kExitOk;
  }
  if (fmt_ == Format::json) {
    ordered_json o;
    o["model"] = rs.arch.id;
    o["gpu"] = rs.sys.gpu->info.id;
    o["tp"] = rs.perf.tp;
    o["batching"] = model::to_string(opt.batching);
    if (static_batching)
      o["static"] = {{"batch", opt.static_batch},
                     {"timeout_s", opt.static_timeout_s},
                     {"batches", r.batches},
                     {"mean_batch", r.mean_batch},
                     {"padding_fraction", r.padding_fraction}};
    o["engine"] = {{"max_num_batched_tokens", rs.perf.max_batched_tokens},
                   {"max_num_seqs", rs.perf.max_batch},
                   {"block_size", block},
                   {"kv_blocks", opt.kv_blocks},
                   {"shared_prefix_tokens", rs.perf.cached_prefix_tokens},
                   {"prefix_hit_rate", rs.perf.prefix_hit_rate}};
    o["workload"] = workload;
    o["requests"] = r.requests;
    o["completed"] = r.completed;
    o["duration_s"] = r.duration_s;
    o["queue"] = stats_json(r.queue);
    o["ttft"] = stats_json(r.ttft);
    o["itl"] = stats_json(r.itl);
    o["tpot"] = stats_json(r.tpot);
    o["e2e"] = stats_json(r.e2e);
    o["requests_per_s"] = r.requests_per_s;
    o["output_tokens_per_s"] = r.output_tokens_per_s;
    o["input_tokens_per_s"] = r.input_tokens_per_s;
    o["kv_utilisation_mean"] = r.kv_utilisation_mean;
    o["kv_utilisation_peak"] = r.kv_utilisation_peak;
    o["mean_running"] = r.mean_running;
    o["preemptions"] = r.preemptions;
    o["iterations"] = r.iterations;
    o["mean_iteration_s"] = r.iterations > 0 ? r.busy_s / double(r.iterations) : 0.0;
    o["busy_fraction"] = r.duration_s > 0 ? r.busy_s / r.duration_s : 0.0;
    o["cost_evaluations"] = r.cost_evaluations;
    o["notes"] = r.notes;
    if (sf.series_s) {
      ordered_json series = ordered_json::array();
      for (const auto& p : r.series)
        series.push_back({{"t_s", p.t_s},
                          {"running", p.running},
                          {"waiting", p.waiting},
                          {"kv_utilisation", p.kv_utilisation},
                          {"output_tokens_per_s", p.tokens_per_s}});
      o["series"] = series;
    }
    out(json_text(o));
    return kExitOk;
  }
  std::vector<Section> secs;
  secs.push_back({fmt::format("Simulated serving of {} on {} (TP {})",
                              rs.arch.name.empty() ? rs.arch.id : rs.arch.name, rs.sys.gpu->info.id, rs.perf.tp),
                  {{"engine", engine},
                   {"workload", workload},
                   {"completed", fmt::format("{} of {} requests in {:.4g} s simulated", r.completed, r.requests,
                                             r.duration_s)}}});
  secs.push_back({"Latency",
                  {{"queueing (arrival to first step)", stats_text(r.queue)},
                   {"TTFT", stats_text(r.ttft)},
                   {"ITL (every token gap)", stats_text(r.itl)},
                   {"TPOT (per request)", stats_text(r.tpot)},
                   {"E2E", stats_text(r.e2e)}}});
  secs.push_back({"Engine",
                  {{"throughput", fmt::format("{:.4g} req/s, {:.0f} output tok/s, {:.0f} prompt tok/s computed",
                                              r.requests_per_s, r.output_tokens_per_s, r.input_tokens_per_s)},
                   {"running sequences", fmt::format("{:.1f} on average over iterations", r.mean_running)},
                   {"KV utilisation", fmt::format("{:.1f}% mean, {:.1f}% peak", 100 * r.kv_utilisation_mean,
                                                  100 * r.kv_utilisation_peak)},
                   {"preemptions", std::to_string(r.preemptions)},
                   {"batches", static_batching ? fmt::format("{}, {:.1f} requests each on average; {:.1f}% of the "
                                                             "token slots computed were padding",
                                                             r.batches, r.mean_batch, 100 * r.padding_fraction)
                                               : std::string("continuous: requests join and leave at every step")},
                   {"iterations", fmt::format("{}, mean {}, busy {:.1f}% of the time ({} priced by forward_cost, the "
                                              "rest from the memo)",
                                              r.iterations,
                                              units::format(units::Seconds(r.iterations > 0 ? r.busy_s / double(r.iterations) : 0.0)),
                                              r.duration_s > 0 ? 100 * r.busy_s / r.duration_s : 0.0,
                                              r.cost_evaluations)}}});
  if (!r.notes.empty()) {
    Section n{"Notes", {}};
    for (const auto& x : r.notes) n.rows.emplace_back("", x);
    secs.push_back(n);
  }
  if (sf.series_s) {
    Section ts{fmt::format("Time series (every {} s)", plain_number(*sf.series_s)), {}};
    for (const auto& p : r.series)
      ts.rows.emplace_back(fmt::format("t = {} s", plain_number(p.t_s)),
                           fmt::format("{} running, {} waiting, KV {:.1f}%, {:.0f} output tok/s", p.running, p.waiting,
                                       100 * p.kv_utilisation, p.tokens_per_s));
    secs.push_back(ts);
  }
  out(render_sections(secs, fmt_));
  return kExitOk;
}

}  // namespace

void register_simulate(CLI::App& app, GlobalOptions& g, int& rc) {
  auto s = std::make_shared<ServeFlags>();
  auto sf = std::make_shared<SimFlags>();
  auto* c = app.add_subcommand("simulate", "request-level simulation of one serving replica (vLLM v1 scheduler): "
                                           "TTFT/ITL/E2E percentiles under Poisson, bursty or traced arrivals");
  c->add_option("--scenario", s->scenario, "serving scenario JSON (keys of docs/scenario.md); flags override it");
  add_serve_options(*c, *s, false);
  add_serve_key(*c, *s, "rate", "arrival rate, requests per second (synthetic arrivals)");
  sf->keys.add(*c, wl_io::simulate_fields());
  add_format_option(*c, g);
  accept_engine_spellings(*c, g.data_dir);
  c->callback([&g, s, sf, c, &rc] {
    s->engine_typed = c->remaining();
    sf->read();
    rc = run_simulate(g, *c, *s, *sf);
  });
}

}  // namespace gpuplan::cli
