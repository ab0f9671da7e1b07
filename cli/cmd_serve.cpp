// `gpuplan serve`: prefill (TTFT), decode step (ITL), throughput vs batch for one replica; with --rate, the capacity
// planner: the replica layout and GPU count that serve the traffic within the SLA at the lowest cost (exit 3 when
// no layout meets it, with the best achievable numbers); disaggregated pools and speculative decoding on request.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bands.hpp"
#include "commands.hpp"
#include "engine_args.hpp"
#include "gpuplan/app/report_sections.hpp"
#include "gpuplan/app/resolve.hpp"
#include "serve_options.hpp"
#include "sweep.hpp"
#include "vision_cmd.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/disagg_pools.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/wide_ep.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "serve_timeline.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;


std::string ms(u::Seconds s) { return u::format(s); }

/// The planner's JSON output (the stable keys of docs/cli.md), also the result of one point of a sweep.
ordered_json planner_json(const ResolvedServing& rs, const model::ServingPlanResult& r, bool explain,
                          const model::Band* band = nullptr) {
  const auto& arch = rs.arch;
  const auto& gpu = *rs.sys.gpu;
  const model::Traffic tr = rs.traffic();
  const model::Sla& sla = rs.sla;
  const std::int64_t isl = rs.input_tokens, osl = rs.output_tokens;
  ordered_json o;
  o["model"] = arch.id;
  o["gpu"] = gpu.info.id;
  o["traffic"] = {{"requests_per_s", r.traffic.requests_per_s}, {"input_tokens", isl}, {"output_tokens", osl}};
  if (tr.concurrency) {
    o["traffic"]["concurrency"] = *tr.concurrency;
    o["traffic"]["think_time_s"] = tr.think_time.raw();
  }
  o["sla"] = {{"ttft_s", sla.ttft ? ordered_json(sla.ttft->raw()) : ordered_json()},
              {"itl_s", sla.itl ? ordered_json(sla.itl->raw()) : ordered_json()},
              {"percentile", sla.percentile}};
  o["feasible"] = r.feasible;
  o["kv_bytes_per_token"] = r.kv_bytes_per_token.raw();
  auto cand = [](const model::ServingCandidate& c) {
    ordered_json j{{"tp", c.tp},
                        {"pp", c.pp},
                        {"batch", c.batch},
                        {"max_concurrency", c.max_batch_memory},
                        {"ttft_s", c.ttft.raw()},
                        {"itl_s", c.itl.raw()},
                        {"queue_wait_s", c.queue_wait.raw()},
                        {"iteration_wait_s", c.iteration_wait.raw()},
                        {"queue_load", c.queue_rho},
                        {"prefill_service_s", c.prefill_service.raw()},
                        {"tokens_per_s", c.state.output_tokens_per_s},
                        {"replica_requests_per_s", c.replica_requests_per_s},
                        {"replicas", c.replicas},
                        {"gpus", c.gpus},
                        {"cost_per_hour_usd", u::to_usd_per_hour(c.cost_rate)},
                        {"cost_per_mtok_usd", c.cost_per_mtok_usd},
                        {"meets_sla", c.meets_sla},
                        {"misses", c.misses}};
    if (c.dp > 1) {
      // Attention-DP with wide EP: a replica is a group of dp ranks; batch and KV capacity are per rank.
      j["attention_dp"] = c.dp;
      j["ep"] = c.dp * c.tp;
      j["layout"] = model::group_layout(c.replicas, c.dp, c.tp, c.pp);
    }
    return j;
  };
  o["best"] = r.best ? cand(*r.best) : ordered_json();
  if (r.best) {
    o["gpus"] = r.best->gpus;
    o["replicas"] = r.best->replicas;
    o["ttft_s"] = r.best->ttft.raw();
    o["itl_s"] = r.best->itl.raw();
    o["tokens_per_s"] = r.best->state.output_tokens_per_s * double(r.best->replicas) * double(r.best->dp);
    o["max_concurrency"] = r.best->max_batch_memory;
    o["cost_per_mtok_usd"] = r.best->cost_per_mtok_usd;
    if (const auto kind = price_kind(rs.sys.price, rs.sys.gpu); kind && r.best->cost_rate.raw() > 0)
      o["price_kind"] = *kind;
    if (band != nullptr) {
      const auto& b = *r.best;
      auto times = [&](double v) { return ordered_json::array({v * band->p10, v * band->p90}); };
      // GPUs for the same traffic scale with the time per token: whole replicas of TP × PP.
      const double per_replica = double(b.tp) * double(b.pp) * double(b.dp);
      o["gpus_band"] = {std::ceil(double(b.replicas) * band->p10 - 1e-9) * per_replica,
                        std::ceil(double(b.replicas) * band->p90 - 1e-9) * per_replica};
      o["ttft_s_band"] = times(b.ttft.raw());
      o["itl_s_band"] = times(b.itl.raw());
      const double tps = b.state.output_tokens_per_s * double(b.replicas) * double(b.dp);
      o["tokens_per_s_band"] = {tps / band->p90, tps / band->p10};
      o["cost_per_mtok_usd_band"] = times(b.cost_per_mtok_usd);
      o["band"] = {{"regime", band->regime}, {"cases", band->cases}, {"p10", band->p10}, {"p50", band->p50},
                   {"p90", band->p90}, {"fallback", band->fallback}};
    }
  }
  o["per_tp"] = ordered_json::array();
  for (const auto& c : r.per_tp) o["per_tp"].push_back(cand(c));
  o["ttft_frontier"] = ordered_json::array();
  for (const auto& f : r.ttft_frontier)
    o["ttft_frontier"].push_back({{"ttft_s", f.ttft.raw()}, {"gpus", f.gpus}, {"batch", f.batch}});
  if (r.disaggregated) {
    const auto& d = *r.disaggregated;
    o["disaggregated"] = {{"prefill_gpus", d.prefill_gpus}, {"decode_gpus", d.decode_gpus}, {"gpus", d.gpus},
                          {"decode_batch", d.decode_batch}, {"prefill_tp", d.prefill_tp}, {"decode_tp", d.decode_tp}, {"kv_transfer_s", d.kv_transfer.raw()},
                          {"ttft_s", d.ttft.raw()},         {"itl_s", d.itl.raw()},
                          {"cost_per_mtok_usd", d.cost_per_mtok_usd}, {"meets_sla", d.meets_sla},
                          {"transfer_tier", d.transfer_tier}};
    if (!d.prefill_gpu.empty()) {
      // Pools on their own GPU types or of attention-DP groups (disagg_pools.hpp).
      auto& x = o["disaggregated"];
      x["prefill_gpu"] = d.prefill_gpu;
      x["decode_gpu"] = d.decode_gpu;
      x["prefill_dp"] = d.prefill_dp;
      x["decode_dp"] = d.decode_dp;
      x["prefill_cost_per_hour_usd"] = u::to_usd_per_hour(d.prefill_cost_rate);
      x["decode_cost_per_hour_usd"] = u::to_usd_per_hour(d.decode_cost_rate);
      x["kv_per_sequence_bytes"] = d.kv_per_sequence.raw();
      x["layout"] = model::pools_layout(d);
      if (explain && !d.derivation.empty()) x["derivation"] = derivation_json(d.derivation);
    }
  }
  o["reasons"] = r.reasons;
  o["notes"] = r.notes;
  if (explain) o["derivation"] = derivation_json(r.derivation);
  return o;
}

/// `serve --sweep`: the capacity planner at every point of the grid, one row per point (docs/cli.md).
int run_serve_sweep(const GlobalOptions& g, const ServeFlags& s, const nlohmann::json& j,
                    std::map<std::string, std::string> origin, const std::string& file, const std::string& dir) {
  Diagnostics diags;
  std::vector<SweepAxis> axes;
  for (const auto& spec : s.sweep) {
    auto a = parse_sweep(spec, wl_io::serving_scenario_fields(), diags);
    if (!a) return report(diags);
    origin[a->key] = "--sweep";
    axes.push_back(std::move(*a));
  }
  const bool rate = j.contains("rate") || std::any_of(axes.begin(), axes.end(), [](const SweepAxis& a) { return a.key == "rate"; });
  if (!rate) {
    diags.error("", "--sweep", "serve sweeps run the capacity planner: give --rate (or sweep rate)");
    return report(diags);
  }
  const auto ws = app::load_workspace(dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  auto eval = [&](const nlohmann::json& point, Diagnostics& d) -> std::optional<ordered_json> {
    auto sc = wl_io::decode_serving_scenario(point, file, "", origin);
    d.append(sc.diagnostics());
    if (!sc.ok()) return std::nullopt;
    auto where = [&](const std::string& key) {
      auto it = origin.find(key);
      if (it != origin.end()) return it->second;
      if (j.contains(key)) return file + ": /" + key;
      return wl_io::flag_of_key(wl_io::serving_fields(), key);
    };
    auto rs = resolve_serving(sc.value(), dir, s.no_calibration, db, lib, where, d);
    if (!rs) return std::nullopt;
    const auto r = model::plan_serving(rs->arch, rs->params, rs->perf, rs->traffic(), rs->sla, rs->sys,
                                       rs->plan_options(), Explain::off);
    return planner_json(*rs, r, false);
  };
  static const std::vector<SweepColumn> columns{
      {"feasible", "/feasible"},          {"gpus", "/gpus"},
      {"replicas", "/replicas"},          {"tp", "/best/tp"},
      {"pp", "/best/pp"},                 {"batch", "/best/batch"},
      {"ttft_s", "/ttft_s"},              {"itl_s", "/itl_s"},
      {"tokens_per_s", "/tokens_per_s"},  {"cost_per_hour_usd", "/best/cost_per_hour_usd"},
      {"cost_per_mtok_usd", "/cost_per_mtok_usd"}, {"reasons", "/reasons"}};
  // As for training sweeps: across hardware the kind of price goes beside the cost, and run_sweep notes a mix.
  std::vector<SweepColumn> cols = columns;
  if (std::any_of(axes.begin(), axes.end(), [](const SweepAxis& a) {
        return a.key == "gpu" || a.key == "node";
      }))
    cols.insert(cols.end() - 1, SweepColumn{"price_kind", "/price_kind"});
  return run_sweep(axes, j, eval, cols, parse_format(g.format) == Format::json ? Format::json : Format::csv);
}

/// The scenario file (if any) with the flags given on `cmd` overlaid: what serve, its sweeps and simulate decode.
struct Overlaid {
  std::string dir, file = "(flags)", pointer;
  nlohmann::json j = nlohmann::json::object();
  std::map<std::string, std::string> origin;
};
std::optional<Overlaid> read_overlaid(const GlobalOptions& g, const CLI::App& cmd, const ServeFlags& s,
                                      Diagnostics& diags) {
  Overlaid o;
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return std::nullopt;
  o.dir = *dir;
  if (s.scenario_json) {
    o.file = s.scenario;
    o.pointer = s.scenario_pointer;
    o.j = *s.scenario_json;
  } else if (!s.scenario.empty()) {
    o.file = s.scenario;
    auto text = json_io::read_text_file(s.scenario, diags);
    if (!text) return std::nullopt;
    auto parsed = json_io::parse(*text, s.scenario, diags);
    if (!parsed) return std::nullopt;
    o.j = *parsed;
    if (!o.j.is_object()) {
      diags.error(s.scenario, "/", "expected an object of serving scenario keys (docs/scenario.md)");
      return std::nullopt;
    }
  }
  s.keys.overlay(o.j, o.origin);
  if (s.vllm_args || s.sglang_args || !s.engine_typed.empty()) {
    std::vector<std::string> own;
    for (const auto* opt : cmd.get_options())
      for (const auto& n : opt->get_lnames()) own.push_back("--" + n);
    if (!engine_overlay(o.dir, s.vllm_args, s.sglang_args, s.engine_typed, own, o.j, o.origin, diags))
      return std::nullopt;
  }
  return o;
}

int run_serve(const GlobalOptions& g, const CLI::App& cmd, const ServeFlags& s, const ServeTimelineFlags& tl) {
  if (const int bad = check_serve_timeline(tl, s.keys.given("rate") || s.keys.given("concurrency") || !s.sweep.empty()))
    return bad;
  Diagnostics diags;
  if (!s.sweep.empty()) {
    auto o = read_overlaid(g, cmd, s, diags);
    if (!o) return report(diags);
    return run_serve_sweep(g, s, o->j, o->origin, o->file, o->dir);
  }
  ServeContext ctx;
  KeyLocator where;
  auto resolved = resolve_serve_command(g, cmd, s, diags, ctx, &where);
  if (!resolved) return report(diags);
  report(diags);  // notes
  const ResolvedServing& rs = *resolved;
  const auto& arch = rs.arch;
  const auto& params = rs.params;
  const model::ServingSystem& sys = rs.sys;
  const hw::GpuSpec& gpu = *sys.gpu;
  model::ServingPerfPlan perf = rs.perf;
  const Format fmt_ = parse_format(g.format);
  const std::int64_t isl = rs.input_tokens;
  const std::int64_t osl = rs.output_tokens;
  const Explain ex = g.explain ? Explain::on : Explain::off;

  // ---------------- planner ----------------
  if (rs.planner()) {
    const model::Traffic tr = rs.traffic();
    const model::Sla& sla = rs.sla;
    const model::ServingPlanOptions opt = rs.plan_options();
    const auto r = model::plan_serving(arch, params, perf, tr, sla, sys, opt, Explain::on);
    const int rc = r.feasible ? kExitOk : kExitInfeasible;
    // The error band of the chosen layout's regime (<data>/accuracy/bands.json; absent file: no band).
    std::optional<model::Band> band;
    if (r.best) {
      Diagnostics bd;
      if (const auto cases = load_bands(ctx.data_dir, bd)) {
        const model::Regime reg{"serve", model::generation_of(gpu.family), arch.moe.has_value() ? "moe" : "dense",
                                model::scale_bucket(std::int64_t(r.best->tp) * r.best->pp, sys.node ? sys.node->gpus : 1)};
        band = model::band_for(*cases, reg);
      }
      if (bd.has_errors()) return report(bd);
    }
    const model::Band* bp = band ? &*band : nullptr;
    if (fmt_ == Format::json) {
      out(json_text(planner_json(rs, r, g.explain, bp)));
      return rc;
    }
    if (fmt_ == Format::csv) {
      Table t{{{"tp", "TP", true},
               {"pp", "PP", true},
               {"batch", "batch", true},
               {"max_concurrency", "KV capacity", true},
               {"ttft_s", "TTFT s", true},
               {"itl_s", "ITL s", true},
               {"tokens_per_s", "tok/s per replica", true},
               {"replicas", "replicas", true},
               {"gpus", "GPUs", true},
               {"cost_per_mtok_usd", "$/Mtok", true},
               {"meets_sla", "meets SLA", false}},
              {}};
      for (const auto& c : r.per_tp)
        t.rows.push_back({std::to_string(c.tp), std::to_string(c.pp), std::to_string(c.batch),
                          std::to_string(c.max_batch_memory), plain_number(c.ttft.raw()), plain_number(c.itl.raw()),
                          plain_number(c.state.output_tokens_per_s), std::to_string(c.replicas), std::to_string(c.gpus),
                          plain_number(c.cost_per_mtok_usd), c.meets_sla ? "yes" : "no"});
      out(t.render(fmt_));
      return rc;
    }
    const auto sec = planner_sections(rs, r, bp);
    const Table t = planner_table(r);
    out(render_sections(sec, fmt_));
    out((fmt_ == Format::md ? "\n### Best batch per TP size\n\n" : "\nBest batch per TP size\n") + t.render(fmt_));
    if (g.explain) out(render_derivation(r.derivation, fmt_));
    if (g.explain && r.disaggregated && !r.disaggregated->derivation.empty())
      out(render_derivation(r.disaggregated->derivation, fmt_));
    return rc;
  }

  // ---------------- one replica ----------------
  model::ServingMemoryPlan mp = rs.memory;
  if (!rs.tp_given) {
    // The smallest TP (a power of two within the scale-up domain) that holds one sequence.
    for (int tp = 1; tp <= mp.max_tp; tp *= 2) {
      mp.tp = tp;
      mp.context = isl + osl;
      if (arch.heads % tp == 0 && model::serving_memory(arch, params, gpu, mp, Explain::off).max_concurrency >= 1) break;
    }
    perf.tp = mp.tp;
  }
  mp.tp = perf.tp;
  mp.pp = perf.pp;
  mp.context = isl + osl;
  mp.concurrency = 1;
  const auto mem = model::serving_memory(arch, params, gpu, mp, Explain::off);
  const std::int64_t cap = std::min(mem.max_concurrency, perf.max_batch);
  if (cap < 1) {
    Diagnostics d2;
    d2.error("", where("tp"), fmt::format("{} does not fit on TP {} × PP {} of {} with {} tokens of context ({})", arch.id,
                                     perf.tp, perf.pp, gpu.info.id, isl + osl,
                                     mem.reasons.empty() ? std::string("no room for the KV cache") : mem.reasons.front()));
    report(d2);
    return kExitInfeasible;
  }
  const std::int64_t batch = std::min<std::int64_t>(rs.batch.value_or(cap), cap);
  if (rs.batch && *rs.batch > cap) {
    Diagnostics n;
    n.note("", where("batch"), fmt::format("{} exceeds the KV capacity of {} sequences at {} tokens; using {}", *rs.batch, cap,
                                      isl + osl, cap));
    report(n);
  }
  if (tl.format) return run_serve_timeline(tl, arch, perf, sys, batch, isl, osl);
  const auto ss = model::steady_state(arch, perf, batch, isl, osl, sys, ex);
  const auto prefill1 = model::forward_cost(arch, perf, model::prompt_pass(perf, isl), sys, ex);
  const u::Seconds ttft = model::prefill_time(arch, perf, 1, isl, sys);
  const u::Seconds itl = model::decode_step_time(arch, perf, batch, isl + osl / 2, sys);
  if (!std::isfinite(ttft.raw()) || !std::isfinite(ss.iteration.raw()) || !std::isfinite(itl.raw())) {
    // A collective with no link in the data costs +inf: e.g. pipeline stages on different nodes without a scale-out
    // network. That layout cannot run here: say so instead of printing "inf s".
    Diagnostics d2;
    d2.error("", where(perf.pp > 1 ? "pp" : "tp"),
             fmt::format("TP {} × PP {} of {} spans GPUs that no link in the data joins ({} has no scale-out network): "
                         "the stage-to-stage or TP traffic cannot be priced; use a layout inside one {}",
                         perf.tp, perf.pp, gpu.info.id, sys.node != nullptr ? sys.node->info.id : gpu.info.id,
                         sys.node != nullptr ? "node" : "GPU"));
    report(d2);
    return kExitInfeasible;
  }

  std::optional<model::SpeculativeResult> spec;
  if (rs.speculation) {
    u::Seconds t_draft = u::milliseconds(rs.draft_ms.value_or(0));
    if (rs.draft) {
      model::ServingPerfPlan dp = perf;
      dp.tp = rs.draft->heads % perf.tp == 0 ? perf.tp : 1;
      dp.pp = 1;
      t_draft = model::decode_step_time(*rs.draft, dp, batch, isl + osl / 2, sys);
    }
    const auto verify = model::forward_cost(
        arch, perf,
        model::ForwardBatch{std::max(1.0, double(batch) / double(perf.pp)), rs.speculation->draft_tokens + 1, isl + osl / 2, 0, 0, 0,
                            true},
        sys, Explain::off);
    spec = model::speculative_decoding(*rs.speculation, t_draft, itl, verify.total, ex);
  }

  // Throughput vs batch.
  std::vector<std::int64_t> bs;
  for (std::int64_t b = 1; b < cap; b *= 2) bs.push_back(b);
  bs.push_back(cap);
  struct Pt {
    std::int64_t b;
    model::SteadyState st;
  };
  std::vector<Pt> pts;
  for (auto b : bs) pts.push_back({b, model::steady_state(arch, perf, b, isl, osl, sys, Explain::off)});

  if (fmt_ == Format::json) {
    ordered_json o;
    o["model"] = arch.id;
    o["gpu"] = gpu.info.id;
    o["tp"] = perf.tp;
    o["pp"] = perf.pp;
    o["weight_dtype"] = std::string(model::to_string(perf.weights.dtype));
    o["kv_dtype"] = std::string(model::to_string(perf.kv.dtype));
    o["compute"] = hw::to_string(perf.compute);
    o["input_tokens"] = isl;
    o["output_tokens"] = osl;
    if (perf.images_per_request > 0) {
      o["images_per_request"] = perf.images_per_request;
      o["image_tokens"] = perf.images_per_request * arch.vision->tokens_per_image();
      o["vision_encoder_s"] = model::vision_encoder_time(arch, perf, sys).raw();
    }
    o["batch"] = batch;
    o["kv_bytes_per_token"] = mem.kv_bytes_per_token.raw();
    o["max_concurrency"] = mem.max_concurrency;
    o["ttft_s"] = ttft.raw();
    o["itl_s"] = ss.iteration.raw();
    o["decode_step_s"] = itl.raw();
    o["tokens_per_s"] = ss.output_tokens_per_s;
    o["requests_per_s"] = ss.requests_per_s;
    o["request_latency_s"] = ss.request_latency.raw();
    if (perf.attention_dp > 1) {
      // Attention-DP with wide EP: the figures above are one rank's; the group runs dp of them at the same step.
      o["attention_dp"] = perf.attention_dp;
      o["ep"] = model::serving_ep(perf);
      o["group_gpus"] = std::int64_t(perf.attention_dp) * perf.tp * perf.pp;
      o["group_tokens_per_s"] = ss.output_tokens_per_s * double(perf.attention_dp);
    }
    o["feasible"] = true;
    o["reasons"] = ordered_json::array();
    o["points"] = ordered_json::array();
    for (const auto& p : pts)
      o["points"].push_back({{"batch", p.b},
                             {"itl_s", p.st.iteration.raw()},
                             {"decode_step_s", p.st.itl_decode_only.raw()},
                             {"ttft_s", p.st.ttft.raw()},
                             {"tokens_per_s", p.st.output_tokens_per_s},
                             {"requests_per_s", p.st.requests_per_s}});
    if (spec)
      o["speculative"] = {{"tokens_per_step", spec->tokens_per_step},
                          {"step_s", spec->step.raw()},
                          {"per_token_s", spec->per_token.raw()},
                          {"speedup", spec->speedup}};
    if (g.explain) {
      o["derivation"] = {{"prefill", derivation_json(prefill1.derivation)}, {"steady_state", derivation_json(ss.derivation)}};
      if (spec) o["derivation"]["speculative"] = derivation_json(spec->derivation);
    }
    out(json_text(o));
    return kExitOk;
  }
  Table t{{{"batch", "batch", true},
           {"itl_s", "ITL s", true},
           {"decode_step_s", "decode-only step s", true},
           {"ttft_s", "TTFT s", true},
           {"tokens_per_s", "output tok/s", true},
           {"requests_per_s", "req/s", true}},
          {}};
  for (const auto& p : pts)
    t.rows.push_back({std::to_string(p.b), plain_number(p.st.iteration.raw()), plain_number(p.st.itl_decode_only.raw()),
                      plain_number(p.st.ttft.raw()), plain_number(p.st.output_tokens_per_s), plain_number(p.st.requests_per_s)});
  if (fmt_ == Format::csv) {
    out(t.render(fmt_));
    return kExitOk;
  }
  std::vector<Section> sec;
  Section head{fmt::format("Serving {} on {} (TP {} × PP {})", arch.name.empty() ? arch.id : arch.name, gpu.info.id,
                           perf.tp, perf.pp),
               {}};
  head.rows = {
      {"weights / KV / compute", fmt::format("{} / {} / {}", model::to_string(perf.weights.dtype),
                                             model::to_string(perf.kv.dtype), hw::to_string(perf.compute))},
      {"KV per token (whole model)", u::format(mem.kv_bytes_per_token)},
      {fmt::format("max concurrency at {} tokens", isl + osl), fmt::format("{} sequences", mem.max_concurrency)},
      {"CUDA graphs", perf.cuda_graphs ? "yes" : "no (eager)"}};
  if (perf.attention_dp > 1)
    head.rows.emplace_back(
        "attention-DP with wide EP",
        fmt::format("{} ranks × TP {} = {} GPUs, experts over all of them (EP {}); batch, KV capacity, latency and "
                    "throughput below are one rank's; the group: {:.0f} output tok/s",
                    perf.attention_dp, perf.tp, std::int64_t(perf.attention_dp) * perf.tp * perf.pp,
                    model::serving_ep(perf), ss.output_tokens_per_s * double(perf.attention_dp)));
  sec.push_back(head);
  Section lat{fmt::format("Latency at batch {} ({} in / {} out)", batch, isl, osl), {}};
  lat.rows = {{"TTFT (prefill alone, no queueing)", fmt::format("{} ({} GEMM, {} attention, {} comm)", ms(ttft),
                                                                ms(prefill1.gemm), ms(prefill1.attention), ms(prefill1.comm))},
              {"decode step (ITL floor)", fmt::format("{} at context {}", ms(itl), isl + osl / 2)},
              {"ITL with prefill mixed in", ms(ss.iteration)},
              {"throughput", fmt::format("{:.0f} output tok/s, {:.3g} req/s", ss.output_tokens_per_s, ss.requests_per_s)},
              {"request latency", ms(ss.request_latency)}};
  if (perf.images_per_request > 0)
    lat.rows.insert(lat.rows.begin() + 1,
                    {fmt::format("vision tower ({} image{}, in the TTFT)", perf.images_per_request,
                                 perf.images_per_request == 1 ? "" : "s"),
                     fmt::format("{}; {} image tokens in the {}-token prompt",
                                 ms(model::vision_encoder_time(arch, perf, sys)),
                                 perf.images_per_request * arch.vision->tokens_per_image(), isl)});
  sec.push_back(lat);
  if (spec) {
    Section sp{"Speculative decoding", {}};
    sp.rows = {{"tokens per step", fmt::format("{:.2f}", spec->tokens_per_step)},
               {"step", fmt::format("{} (γ·draft + verify)", ms(spec->step))},
               {"per token", ms(spec->per_token)},
               {"speedup", fmt::format("{:.2f}×", spec->speedup)}};
    sec.push_back(sp);
  }
  out(render_sections(sec, fmt_));
  out((fmt_ == Format::md ? "\n### Throughput vs batch\n\n" : "\nThroughput vs batch\n") + t.render(fmt_));
  if (g.explain) {
    out(render_derivation(prefill1.derivation, fmt_));
    out(render_derivation(ss.derivation, fmt_));
    if (spec) out(render_derivation(spec->derivation, fmt_));
  }
  return kExitOk;
}

}  // namespace

std::optional<ResolvedServing> resolve_serve_command(const GlobalOptions& g, const CLI::App& cmd, const ServeFlags& s,
                                                     Diagnostics& diags, ServeContext& ctx, KeyLocator* where_out) {
  auto o = read_overlaid(g, cmd, s, diags);
  if (!o) return std::nullopt;
  ctx.data_dir = o->dir;
  auto sc = wl_io::decode_serving_scenario(o->j, o->file, o->pointer, o->origin);
  diags.append(sc.diagnostics());
  if (!sc.ok()) return std::nullopt;
  auto ws = app::load_workspace(o->dir);
  diags.append(ws.diagnostics());
  if (!ws.ok()) return std::nullopt;
  ctx.db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  // By value: the locator outlives this function (serve names flags and keys in later diagnostics).
  KeyLocator where = [j = o->j, origin = o->origin, file = o->file, ptr = o->pointer](const std::string& key) {
    auto it = origin.find(key);
    if (it != origin.end()) return it->second;
    if (j.contains(key)) return file + ": " + ptr + "/" + key;
    return wl_io::flag_of_key(wl_io::serving_fields(), key);
  };
  if (where_out != nullptr) *where_out = where;
  auto rs = resolve_serving(sc.value(), o->dir, s.no_calibration, *ctx.db, lib, where, diags);
  if (rs) rs->perf.kv_block_tokens = std::max<std::int64_t>(1, rs->memory.block_size);
  return rs;
}

void add_serve_options(CLI::App& c, ServeFlags& s, bool planner) {
  s.keys.add(c, wl_io::serving_fields(), {}, [planner](const wl_io::ScenarioField& f) { return planner || !f.planner_only; });
  c.add_flag("--no-calibration", s.no_calibration,
              "ignore data/calibration/<gpu>/profile.json: use the built-in efficiency defaults");
  c.add_option("--vllm-args", s.vllm_args,
                "a whole 'vllm serve MODEL ...' command line (TEXT, @FILE or - for stdin) read into this scenario; "
                "vLLM's own flags (--tensor-parallel-size 8 ...) are also accepted here directly (docs/cli.md)");
  c.add_option("--sglang-args", s.sglang_args,
                "a whole 'python -m sglang.launch_server ...' command line (TEXT, @FILE or - for stdin); SGLang's own "
                "flags (--tp-size 8 ...) are also accepted here directly (docs/cli.md)");
  if (!planner) return;
  c.add_option("--sweep", s.sweep,
                "vary a scenario key over KEY=A..B (doubling), KEY=A..B:STEP or KEY=V1,V2,...; repeat for a grid. Runs "
                "the planner (needs --rate) at every point: one CSV row (JSON with --format json) per point");
}

void add_serve_key(CLI::App& c, ServeFlags& s, const std::string& key, const std::string& help) {
  const wl_io::ScenarioField* f = wl_io::find_field(wl_io::serving_fields(), key);
  if (f != nullptr) s.keys.add_field(c, *f, help);
}

void accept_engine_spellings(CLI::App& c, std::string& data_dir) {
  // vLLM and SGLang flags arrive as CLI11's extras; engine_args.cpp checks every name against their parsers. They must
  // stay with the command rather than fall through to the top level (which refuses them), so --data-dir, the one
  // top-level option, is repeated here (as train does for Megatron-LM's flags).
  c.allow_extras();
  c.fallthrough(false);
  c.add_option("--data-dir", data_dir, "data directory (as before the subcommand)")->group("");
}

void register_serve(CLI::App& app, GlobalOptions& g, int& rc) {
  auto s = std::make_shared<ServeFlags>();
  auto* c = app.add_subcommand("serve", "serving latency (TTFT, ITL), throughput vs batch; with --rate: GPUs and "
                                        "replicas for a traffic level within a latency SLA");
  c->add_option("--scenario", s->scenario, "serving scenario JSON (keys of docs/scenario.md); flags override it");
  add_serve_options(*c, *s, true);
  auto tl = std::make_shared<ServeTimelineFlags>();
  add_serve_timeline_options(*c, *tl);
  auto v = std::make_shared<VisionFlags>();
  add_vision_options(*c, *v, VisionCommand::serve);
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation of every number");
  accept_engine_spellings(*c, g.data_dir);
  c->callback([&g, s, v, c, tl, &rc] {
    // A vision model (data/models/vision) runs its own forward pass; a transformer the serving model below.
    if (auto vrc = run_vision_if_named(g, *c, *v, VisionCommand::serve)) {
      rc = *vrc;
      return;
    }
    s->engine_typed = c->remaining();
    rc = run_serve(g, *c, *s, *tl);
  });
}

}  // namespace gpuplan::cli
