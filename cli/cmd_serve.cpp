// `gpuplan serve`: prefill (TTFT), decode step (ITL), throughput vs batch for one replica; with --rate, the capacity
// planner: the replica layout and GPU count that serve the traffic within the SLA at the lowest cost (exit 3 when
// no layout meets it, with the best achievable numbers); disaggregated pools and speculative decoding on request.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "resolve.hpp"
#include "serving_flags.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

struct ServeFlags {
  std::string node, cluster;
  long long input_tokens = 1024, output_tokens = 256;
  std::optional<long long> batch;
  std::optional<double> rate;
  std::optional<double> ttft_ms, itl_ms;
  double percentile = 99.0;
  std::optional<std::string> compute;
  std::optional<double> price;
  std::optional<double> step_overhead_ms, kernel_overhead_us, cpu_per_kernel_us;
  std::optional<int> ep;
  bool disaggregated = false;
  std::optional<double> spec_acceptance;
  std::optional<long long> spec_tokens;
  std::optional<std::string> draft_model;
  std::optional<double> draft_ms;
  std::optional<std::string> input_dist, output_dist;
  bool tp_given = false;
  bool pp_given = false;
  bool no_calibration = false;
};

std::string ms(u::Seconds s) { return u::format(s); }

/// "lognormal:MEAN,SD" or "TOKENS:WEIGHT,TOKENS:WEIGHT,..." (weights normalised); diagnostics name the flag.
std::optional<model::LengthDist> parse_lengths(const std::string& spec, const char* flag, Diagnostics& diags) {
  auto bad = [&](const std::string& why) {
    diags.error("", flag,
                fmt::format("'{}': {} (expected lognormal:MEAN,SD or TOKENS:WEIGHT,TOKENS:WEIGHT,...)", spec, why));
    return std::nullopt;
  };
  auto number = [](const std::string& t, double& v) {
    try {
      std::size_t used = 0;
      v = std::stod(t, &used);
      return used == t.size() && std::isfinite(v);
    } catch (...) {
      return false;
    }
  };
  auto split = [](const std::string& t, char sep) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : t) {
      if (c == sep) {
        parts.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    parts.push_back(cur);
    return parts;
  };
  if (spec.rfind("lognormal:", 0) == 0) {
    const auto parts = split(spec.substr(10), ',');
    double mean = 0, sd = 0;
    if (parts.size() != 2 || !number(parts[0], mean) || !number(parts[1], sd)) return bad("lognormal takes MEAN,SD");
    if (!(mean >= 1) || !(sd >= 0)) return bad("the mean must be ≥ 1 token and the standard deviation ≥ 0");
    return model::lognormal_lengths(mean, sd);
  }
  model::LengthDist d;
  double total = 0;
  for (const auto& item : split(spec, ',')) {
    const auto kv = split(item, ':');
    double tokens = 0, weight = 0;
    if (kv.size() != 2 || !number(kv[0], tokens) || !number(kv[1], weight)) return bad(fmt::format("'{}' is not TOKENS:WEIGHT", item));
    if (!(tokens >= 1) || tokens != std::floor(tokens) || !(weight > 0))
      return bad(fmt::format("'{}': tokens must be a whole number ≥ 1 and the weight > 0", item));
    d.points.emplace_back(std::int64_t(tokens), weight);
    total += weight;
  }
  std::sort(d.points.begin(), d.points.end());
  for (auto& pt : d.points) pt.second /= total;
  return d;
}

int run_serve(const GlobalOptions& g, const ServingFlags& f, const ServeFlags& s) {
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  auto db = hw_io::load_hardware_db(*dir);
  if (!db.ok()) return report(db.diagnostics());
  auto lib = wl_io::load_model_library(*dir);
  if (!lib.ok()) return report(lib.diagnostics());
  auto m = wl_io::resolve_model(*lib, f.model);
  if (!m.ok()) {
    Diagnostics d2;
    for (auto d : m.diagnostics().items()) {
      if (d.pointer == "MODEL") d.pointer = "--model";
      d2.add(d);
    }
    return report(d2);
  }
  const auto& arch = m->arch;
  model::ServingSystem sys;
  auto where = [](const std::string& k) { return "--" + k; };
  if (!resolve_hardware(f.gpu, s.node, s.cluster, *db, where, diags, sys)) return report(diags);
  if (!load_calibration(*dir, sys, s.no_calibration, diags)) return report(diags);
  const hw::GpuSpec& gpu = *sys.gpu;
  if (s.price) {
    if (!(*s.price >= 0)) diags.error("", "--price", fmt::format("{} is not a price in $/GPU-hour", plain_number(*s.price)));
    sys.price = u::usd_per_hour(*s.price);
  }
  auto memplan = make_memory_plan(f, *db, gpu, diags);
  // Serving plan.
  model::ServingPerfPlan perf;
  if (memplan) {
    perf.weights = memplan->weights;
    perf.kv = memplan->kv;
    perf.max_batched_tokens = memplan->max_num_batched_tokens;
    perf.max_batch = memplan->max_num_seqs;
  }
  perf.tp = f.tp;
  perf.pp = f.pp;
  perf.cuda_graphs = !f.enforce_eager;
  if (sys.efficiency) model::use_measured_overheads(perf, *sys.efficiency);
  const auto wd = model::parse_store_dtype(f.weight_dtype);
  const bool gpu_fp8 = gpu.peak(hw::Precision::fp8).has_value();
  const bool gpu_fp4 = gpu.peak(hw::Precision::fp4).has_value();
  if (s.compute) {
    perf.compute = *s.compute == "fp8"    ? hw::Precision::fp8
                   : *s.compute == "fp4"  ? hw::Precision::fp4
                   : *s.compute == "fp16" ? hw::Precision::fp16
                                          : hw::Precision::bf16;
    if (perf.compute == hw::Precision::fp8 && !gpu_fp8)
      diags.error("", "--compute", fmt::format("{} has no fp8 tensor cores", gpu.info.id));
    if (perf.compute == hw::Precision::fp4 && !gpu_fp4)
      diags.error("", "--compute", fmt::format("{} has no fp4 tensor cores", gpu.info.id));
    if (perf.compute == hw::Precision::fp8 && wd && *wd != model::StoreDtype::fp8)
      diags.error("", "--compute", fmt::format("fp8 GEMMs need fp8 weights (--weight-dtype fp8), not {}", f.weight_dtype));
    if (perf.compute == hw::Precision::fp4 && wd && *wd != model::StoreDtype::fp4)
      diags.error("", "--compute", fmt::format("fp4 GEMMs need fp4 weights (--weight-dtype fp4), not {}", f.weight_dtype));
  } else {
    perf.compute = (wd && *wd == model::StoreDtype::fp8 && gpu_fp8)   ? hw::Precision::fp8
                   : (wd && *wd == model::StoreDtype::fp4 && gpu_fp4) ? hw::Precision::fp4
                                                                      : hw::Precision::bf16;
  }
  if (s.ep) {
    if (!arch.moe) diags.error("", "--ep", "EP needs a mixture-of-experts model");
    else if (arch.moe->num_experts % *s.ep != 0 || f.tp % *s.ep != 0)
      diags.error("", "--ep", fmt::format("EP {} must divide the {} experts and TP {}", *s.ep, arch.moe->num_experts, f.tp));
    perf.ep = *s.ep;
  }
  std::vector<std::string> overhead_notes;
  if (s.step_overhead_ms) {
    if (*s.step_overhead_ms < 0) diags.error("", "--step-overhead-ms", "must be ≥ 0");
    perf.step_overhead = u::milliseconds(*s.step_overhead_ms);
    overhead_notes.push_back(fmt::format("engine step overhead {} ms (--step-overhead-ms)", plain_number(*s.step_overhead_ms)));
  }
  if (s.kernel_overhead_us) {
    if (*s.kernel_overhead_us < 0) diags.error("", "--kernel-overhead-us", "must be ≥ 0");
    (perf.cuda_graphs ? perf.kernel_overhead_graph : perf.kernel_overhead_eager) = u::microseconds(*s.kernel_overhead_us);
    overhead_notes.push_back(fmt::format("per-kernel overhead {} µs (--kernel-overhead-us)", plain_number(*s.kernel_overhead_us)));
  }
  if (s.cpu_per_kernel_us) {
    if (*s.cpu_per_kernel_us < 0) diags.error("", "--cpu-per-kernel-us", "must be ≥ 0");
    perf.cpu_per_kernel = u::microseconds(*s.cpu_per_kernel_us);
  }
  if (!overhead_notes.empty()) {
    for (const auto& n : overhead_notes) perf.overhead_origin += "; " + n;
  }
  if (s.ttft_ms && !(*s.ttft_ms > 0)) diags.error("", "--ttft-ms", "must be > 0");
  if (s.itl_ms && !(*s.itl_ms > 0)) diags.error("", "--itl-ms", "must be > 0");
  if (!(s.percentile > 0 && s.percentile < 100)) diags.error("", "--percentile", "must be in (0, 100), e.g. 99");
  if (s.rate && !(*s.rate > 0)) diags.error("", "--rate", "must be > 0 requests/s");
  if ((s.spec_acceptance.has_value()) != (s.spec_tokens.has_value()))
    diags.error("", s.spec_acceptance ? "--spec-tokens" : "--spec-acceptance",
                "speculative decoding needs both --spec-acceptance and --spec-tokens");
  if (s.spec_acceptance && !(*s.spec_acceptance >= 0 && *s.spec_acceptance <= 1))
    diags.error("", "--spec-acceptance", "must be a probability in [0, 1]");
  if (s.spec_acceptance && !s.draft_model && !s.draft_ms)
    diags.error("", "--draft-model", "speculative decoding needs the draft's cost: --draft-model ID or --draft-ms");
  const auto params = model::parameter_counts(arch, Explain::off);
  if (diags.has_errors() || !memplan) return report(diags);
  report(diags);  // notes

  std::optional<model::LengthDist> in_dist, out_dist;
  if (s.input_dist) in_dist = parse_lengths(*s.input_dist, "--input-dist", diags);
  if (s.output_dist) out_dist = parse_lengths(*s.output_dist, "--output-dist", diags);
  if (diags.has_errors()) return report(diags);
  const Format fmt_ = parse_format(g.format);
  // One replica: the mean lengths (the planner uses the distributions whole).
  const std::int64_t isl = in_dist ? std::max<std::int64_t>(1, std::llround(in_dist->mean())) : s.input_tokens;
  const std::int64_t osl = out_dist ? std::max<std::int64_t>(1, std::llround(out_dist->mean())) : s.output_tokens;
  const Explain ex = g.explain ? Explain::on : Explain::off;

  // ---------------- planner ----------------
  if (s.rate) {
    model::Traffic tr{*s.rate, isl, osl, in_dist, out_dist};
    model::Sla sla;
    if (s.ttft_ms) sla.ttft = u::milliseconds(*s.ttft_ms);
    if (s.itl_ms) sla.itl = u::milliseconds(*s.itl_ms);
    sla.percentile = s.percentile / 100.0;
    model::ServingPlanOptions opt;
    opt.memory = *memplan;
    if (s.tp_given) opt.tp_options = {f.tp};
    if (s.pp_given) opt.pp_options = {f.pp};
    opt.disaggregated = s.disaggregated;
    const auto r = model::plan_serving(arch, params, perf, tr, sla, sys, opt, Explain::on);
    const int rc = r.feasible ? kExitOk : kExitInfeasible;
    if (fmt_ == Format::json) {
      ordered_json o;
      o["model"] = arch.id;
      o["gpu"] = gpu.info.id;
      o["traffic"] = {{"requests_per_s", tr.requests_per_s}, {"input_tokens", isl}, {"output_tokens", osl}};
      o["sla"] = {{"ttft_s", sla.ttft ? ordered_json(sla.ttft->raw()) : ordered_json()},
                  {"itl_s", sla.itl ? ordered_json(sla.itl->raw()) : ordered_json()},
                  {"percentile", sla.percentile}};
      o["feasible"] = r.feasible;
      o["kv_bytes_per_token"] = r.kv_bytes_per_token.raw();
      auto cand = [](const model::ServingCandidate& c) {
        return ordered_json{{"tp", c.tp},
                            {"pp", c.pp},
                            {"batch", c.batch},
                            {"max_concurrency", c.max_batch_memory},
                            {"ttft_s", c.ttft.raw()},
                            {"itl_s", c.itl.raw()},
                            {"queue_wait_s", c.queue_wait.raw()},
                            {"tokens_per_s", c.state.output_tokens_per_s},
                            {"replica_requests_per_s", c.replica_requests_per_s},
                            {"replicas", c.replicas},
                            {"gpus", c.gpus},
                            {"cost_per_hour_usd", u::to_usd_per_hour(c.cost_rate)},
                            {"cost_per_mtok_usd", c.cost_per_mtok_usd},
                            {"meets_sla", c.meets_sla},
                            {"misses", c.misses}};
      };
      o["best"] = r.best ? cand(*r.best) : ordered_json();
      if (r.best) {
        o["gpus"] = r.best->gpus;
        o["replicas"] = r.best->replicas;
        o["ttft_s"] = r.best->ttft.raw();
        o["itl_s"] = r.best->itl.raw();
        o["tokens_per_s"] = r.best->state.output_tokens_per_s * double(r.best->replicas);
        o["max_concurrency"] = r.best->max_batch_memory;
        o["cost_per_mtok_usd"] = r.best->cost_per_mtok_usd;
      }
      o["per_tp"] = ordered_json::array();
      for (const auto& c : r.per_tp) o["per_tp"].push_back(cand(c));
      if (r.disaggregated) {
        const auto& d = *r.disaggregated;
        o["disaggregated"] = {{"prefill_gpus", d.prefill_gpus}, {"decode_gpus", d.decode_gpus}, {"gpus", d.gpus},
                              {"decode_batch", d.decode_batch}, {"prefill_tp", d.prefill_tp}, {"decode_tp", d.decode_tp}, {"kv_transfer_s", d.kv_transfer.raw()},
                              {"ttft_s", d.ttft.raw()},         {"itl_s", d.itl.raw()},
                              {"cost_per_mtok_usd", d.cost_per_mtok_usd}, {"meets_sla", d.meets_sla},
                              {"transfer_tier", d.transfer_tier}};
      }
      o["reasons"] = r.reasons;
      o["notes"] = r.notes;
      if (g.explain) o["derivation"] = derivation_json(r.derivation);
      out(o.dump(2) + "\n");
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
    std::vector<Section> sec;
    Section head{fmt::format("Serving {} on {} — {} req/s, {} in / {} out", arch.name.empty() ? arch.id : arch.name,
                             gpu.info.id, plain_number(tr.requests_per_s), isl, osl),
                 {}};
    head.rows.emplace_back("SLA", fmt::format("TTFT p{} {}, ITL {}", plain_number(s.percentile),
                                              sla.ttft ? ms(*sla.ttft) : std::string("none"),
                                              sla.itl ? ms(*sla.itl) : std::string("none")));
    head.rows.emplace_back("weights / KV / compute",
                           fmt::format("{} / {} / {}", model::to_string(perf.weights.dtype), model::to_string(perf.kv.dtype),
                                       hw::to_string(perf.compute)));
    head.rows.emplace_back("KV per token (whole model)", u::format(r.kv_bytes_per_token));
    sec.push_back(head);
    if (r.best) {
      const auto& b = *r.best;
      Section ans{r.feasible ? "Answer" : "No layout meets the SLA — best achievable", {}};
      ans.rows = {{"GPUs", fmt::format("{} = {} replicas × TP {} × PP {}", b.gpus, b.replicas, b.tp, b.pp)},
                  {"per replica", fmt::format("{} concurrent sequences (KV holds {}), {:.3g} req/s, {:.0f} output tok/s",
                                              b.batch, b.max_batch_memory, b.replica_requests_per_s,
                                              b.state.output_tokens_per_s)},
                  {"TTFT", fmt::format("{} at p{} ({} prefill, {} queueing)", ms(b.ttft), plain_number(s.percentile),
                                       ms(b.ttft - b.queue_wait), ms(b.queue_wait))},
                  {"ITL", fmt::format("{} (decode-only step {})", ms(b.itl), ms(b.state.itl_decode_only))},
                  {"cost", b.cost_rate.raw() > 0 ? fmt::format("${:.2f}/hour, ${:.3g} per million output tokens",
                                                               u::to_usd_per_hour(b.cost_rate), b.cost_per_mtok_usd)
                                                 : std::string("no price for this GPU (give --price)")}};
      for (const auto& reason : r.reasons) ans.rows.emplace_back("reason", reason);
      sec.push_back(ans);
    }
    Table t{{{"tp", "TP", true},
             {"batch", "batch", true},
             {"cap", "KV cap", true},
             {"ttft", "TTFT", false},
             {"itl", "ITL", false},
             {"rps", "req/s/replica", true},
             {"gpus", "GPUs", true},
             {"cost", "$/Mtok", true},
             {"ok", "SLA", false}},
            {}};
    for (const auto& c : r.per_tp)
      t.rows.push_back({std::to_string(c.tp), std::to_string(c.batch), std::to_string(c.max_batch_memory), ms(c.ttft),
                        ms(c.itl), fmt::format("{:.3g}", c.replica_requests_per_s), std::to_string(c.gpus),
                        fmt::format("{:.3g}", c.cost_per_mtok_usd), c.meets_sla ? "meets" : "misses"});
    if (r.disaggregated) {
      const auto& d = *r.disaggregated;
      Section ds{"Disaggregated prefill / decode pools", {}};
      ds.rows = {{"GPUs", fmt::format("{} = {} prefill (TP {}) + {} decode (TP {})", d.gpus, d.prefill_gpus,
                                      d.prefill_tp, d.decode_gpus, d.decode_tp)},
                 {"TTFT", fmt::format("{} incl. KV transfer {} over {}", ms(d.ttft), ms(d.kv_transfer), d.transfer_tier)},
                 {"ITL", fmt::format("{} at decode batch {}", ms(d.itl), d.decode_batch)},
                 {"cost", fmt::format("${:.3g} per million output tokens", d.cost_per_mtok_usd)},
                 {"SLA", d.meets_sla ? "meets" : "misses"}};
      sec.push_back(ds);
    }
    if (!r.notes.empty()) {
      Section n{"Notes", {}};
      for (const auto& x : r.notes) n.rows.emplace_back("-", x);
      sec.push_back(n);
    }
    out(render_sections(sec, fmt_));
    out((fmt_ == Format::md ? "\n### Best batch per TP size\n\n" : "\nBest batch per TP size\n") + t.render(fmt_));
    if (g.explain) out(render_derivation(r.derivation, fmt_));
    return rc;
  }

  // ---------------- one replica ----------------
  model::ServingMemoryPlan mp = *memplan;
  if (!s.tp_given) {
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
    d2.error("", "--tp", fmt::format("{} does not fit on TP {} × PP {} of {} with {} tokens of context ({})", arch.id,
                                     perf.tp, perf.pp, gpu.info.id, isl + osl,
                                     mem.reasons.empty() ? std::string("no room for the KV cache") : mem.reasons.front()));
    report(d2);
    return kExitInfeasible;
  }
  const std::int64_t batch = std::min<std::int64_t>(s.batch.value_or(cap), cap);
  if (s.batch && *s.batch > cap) {
    Diagnostics n;
    n.note("", "--batch", fmt::format("{} exceeds the KV capacity of {} sequences at {} tokens; using {}", *s.batch, cap,
                                      isl + osl, cap));
    report(n);
  }
  const auto ss = model::steady_state(arch, perf, batch, isl, osl, sys, ex);
  const auto prefill1 = model::forward_cost(arch, perf, model::ForwardBatch{0, 1, 0, 1.0, isl, 0, true}, sys, ex);
  const u::Seconds ttft = model::prefill_time(arch, perf, 1, isl, sys);
  const u::Seconds itl = model::decode_step_time(arch, perf, batch, isl + osl / 2, sys);

  std::optional<model::SpeculativeResult> spec;
  if (s.spec_acceptance) {
    u::Seconds t_draft = u::milliseconds(s.draft_ms.value_or(0));
    if (s.draft_model) {
      auto dm = wl_io::resolve_model(*lib, *s.draft_model);
      if (!dm.ok()) {
        Diagnostics d2;
        for (auto d : dm.diagnostics().items()) {
          if (d.pointer == "MODEL") d.pointer = "--draft-model";
          d2.add(d);
        }
        return report(d2);
      }
      model::ServingPerfPlan dp = perf;
      dp.tp = dm->arch.heads % perf.tp == 0 ? perf.tp : 1;
      dp.pp = 1;
      t_draft = model::decode_step_time(dm->arch, dp, batch, isl + osl / 2, sys);
    }
    const auto verify = model::forward_cost(
        arch, perf,
        model::ForwardBatch{std::max(1.0, double(batch) / double(perf.pp)), *s.spec_tokens + 1, isl + osl / 2, 0, 0, 0,
                            true},
        sys, Explain::off);
    spec = model::speculative_decoding({*s.spec_acceptance, *s.spec_tokens}, t_draft, itl, verify.total, ex);
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
    o["batch"] = batch;
    o["kv_bytes_per_token"] = mem.kv_bytes_per_token.raw();
    o["max_concurrency"] = mem.max_concurrency;
    o["ttft_s"] = ttft.raw();
    o["itl_s"] = ss.iteration.raw();
    o["decode_step_s"] = itl.raw();
    o["tokens_per_s"] = ss.output_tokens_per_s;
    o["requests_per_s"] = ss.requests_per_s;
    o["request_latency_s"] = ss.request_latency.raw();
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
    out(o.dump(2) + "\n");
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
  sec.push_back(head);
  Section lat{fmt::format("Latency at batch {} ({} in / {} out)", batch, isl, osl), {}};
  lat.rows = {{"TTFT (prefill alone, no queueing)", fmt::format("{} ({} GEMM, {} attention, {} comm)", ms(ttft),
                                                                ms(prefill1.gemm), ms(prefill1.attention), ms(prefill1.comm))},
              {"decode step (ITL floor)", fmt::format("{} at context {}", ms(itl), isl + osl / 2)},
              {"ITL with prefill mixed in", ms(ss.iteration)},
              {"throughput", fmt::format("{:.0f} output tok/s, {:.3g} req/s", ss.output_tokens_per_s, ss.requests_per_s)},
              {"request latency", ms(ss.request_latency)}};
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

void register_serve(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<ServingFlags>();
  auto s = std::make_shared<ServeFlags>();
  auto* c = app.add_subcommand("serve", "serving latency (TTFT, ITL), throughput vs batch; with --rate: GPUs and "
                                        "replicas for a traffic level within a latency SLA");
  add_serving_memory_options(*c, *f, true);
  c->add_option("--node", s->node, "node id (scale-up fabric for TP; default: a node holding the GPU)");
  c->add_option("--cluster", s->cluster, "cluster id (scale-out fabric for disaggregated KV transfer)");
  c->add_option("--input-tokens", s->input_tokens, "prompt tokens per request")
      ->check(CLI::Range(1LL, 10'000'000LL))
      ->capture_default_str();
  c->add_option("--output-tokens", s->output_tokens, "output tokens per request")
      ->check(CLI::Range(1LL, 10'000'000LL))
      ->capture_default_str();
  c->add_option("--input-dist", s->input_dist,
                "prompt-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,... (replaces --input-tokens)");
  c->add_option("--output-dist", s->output_dist,
                "output-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,... (replaces --output-tokens)");
  c->add_option("--batch", s->batch, "concurrent sequences per replica (default: the KV capacity)")
      ->check(CLI::Range(1LL, 10'000'000LL));
  c->add_option("--rate", s->rate, "requests per second to serve: runs the capacity planner");
  c->add_option("--ttft-ms", s->ttft_ms, "SLA: time to first token at the percentile");
  c->add_option("--itl-ms", s->itl_ms, "SLA: inter-token latency (mean iteration)");
  c->add_option("--percentile", s->percentile, "SLA percentile for TTFT")->capture_default_str();
  c->add_option("--compute", s->compute,
                "GEMM precision (default: fp8 / fp4 with fp8 / fp4 weights on GPUs that have them, else bf16)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "fp4"}));
  c->add_option("--ep", s->ep, "MoE expert parallel inside the TP group")->check(CLI::Range(1, 1024));
  c->add_option("--price", s->price, "$ per GPU-hour (default: the GPU file's indicative price)");
  c->add_option("--step-overhead-ms", s->step_overhead_ms, "engine CPU time per iteration not hidden (default 0)");
  c->add_option("--kernel-overhead-us", s->kernel_overhead_us, "GPU-side fixed cost per kernel (graphs 2.5, eager 5)");
  c->add_option("--cpu-per-kernel-us", s->cpu_per_kernel_us, "eager: CPU time to issue one kernel (default 12)");
  c->add_flag("--no-calibration", s->no_calibration,
              "ignore data/calibration/<gpu>/profile.json: use the built-in efficiency defaults");
  c->add_flag("--disaggregated", s->disaggregated, "also size separate prefill and decode pools");
  c->add_option("--spec-acceptance", s->spec_acceptance, "speculative decoding: acceptance rate α");
  c->add_option("--spec-tokens", s->spec_tokens, "speculative decoding: draft tokens per step γ")
      ->check(CLI::Range(1LL, 64LL));
  c->add_option("--draft-model", s->draft_model, "speculative decoding: draft model (library id or config.json)");
  c->add_option("--draft-ms", s->draft_ms, "speculative decoding: draft step time in ms (instead of a draft model)");
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation of every number");
  c->callback([&g, f, s, c, &rc] {
    s->tp_given = c->count("--tp") > 0;
    s->pp_given = c->count("--pp") > 0;
    rc = run_serve(g, *f, *s);
  });
}

}  // namespace gpuplan::cli
