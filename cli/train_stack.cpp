// `gpuplan train --stack ...`: the optimisation stack (issue #27 d3).
#include "train_stack.hpp"
#include "gpuplan/app/input_pipeline.hpp"

#include <charconv>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/core/format.hpp"

namespace gpuplan::cli {

namespace {
using nlohmann::ordered_json;

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}
}  // namespace

const char* stack_names() {
  return "amp (alias bf16), fp8, flash (alias sdpa), fused-adam (alias fused-optimizer), compile, workers=N, overlap, "
         "recompute[=selective|full], cuda-graphs";
}

std::optional<std::vector<model::OptStep>> parse_stack(const std::string& text, const std::string& flag,
                                                       Diagnostics& diags) {
  std::vector<model::OptStep> steps;
  std::set<int> seen;
  bool ok = true;
  std::size_t start = 0;
  if (trim(text).empty()) {
    diags.error("", flag, fmt::format("an empty list: name the optimisations in order ({})", stack_names()));
    return std::nullopt;
  }
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string tok = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    const std::size_t eq = tok.find('=');
    const std::string name = tok.substr(0, eq);
    const std::string value = eq == std::string::npos ? std::string() : tok.substr(eq + 1);
    model::OptStep s;
    auto no_value = [&](model::OptKind k) {
      if (eq != std::string::npos) {
        diags.error("", flag, fmt::format("'{}': {} takes no value", tok, name));
        ok = false;
      }
      s.kind = k;
    };
    if (tok.empty()) {
      diags.error("", flag, fmt::format("'{}' has an empty entry: name each optimisation once, separated by commas", text));
      ok = false;
      continue;
    }
    if (name == "amp" || name == "bf16") no_value(model::OptKind::amp);
    else if (name == "fp8") no_value(model::OptKind::fp8);
    else if (name == "flash" || name == "sdpa") no_value(model::OptKind::flash);
    else if (name == "fused-adam" || name == "fused-optimizer") no_value(model::OptKind::fused_optimizer);
    else if (name == "compile") no_value(model::OptKind::compile);
    else if (name == "overlap") no_value(model::OptKind::overlap);
    else if (name == "cuda-graphs") no_value(model::OptKind::cuda_graphs);
    else if (name == "recompute") {
      s.kind = model::OptKind::recompute;
      if (value == "full") s.recompute = wl::Recompute::full;
      else if (value.empty() || value == "selective") s.recompute = wl::Recompute::selective;
      else {
        diags.error("", flag, fmt::format("'{}': the recompute mode is selective or full", tok));
        ok = false;
      }
    } else if (name == "workers") {
      s.kind = model::OptKind::workers;
      long long n = 0;
      const char* e = value.data() + value.size();
      auto [p, ec] = std::from_chars(value.data(), e, n);
      if (value.empty() || ec != std::errc() || p != e || n < 1 || n > 4096) {
        diags.error("", flag, fmt::format("'{}': workers=N takes a DataLoader worker count per GPU from 1 to 4096", tok));
        ok = false;
      } else {
        s.workers = int(n);
      }
    } else {
      diags.error("", flag, fmt::format("'{}' is not an optimisation; the stack knows {}", name, stack_names()));
      ok = false;
      continue;
    }
    if (!seen.insert(int(s.kind)).second) {
      diags.error("", flag, fmt::format("'{}' is in the stack twice: each optimisation applies once", tok));
      ok = false;
    }
    steps.push_back(s);
  }
  if (!ok) return std::nullopt;
  return steps;
}

int run_train_stack(const GlobalOptions& g, const ResolvedTraining& r, const std::vector<model::OptStep>& steps,
                    std::optional<double> sample_ms, wl::OptimizerImpl baseline_optimizer) {
  const Format f = parse_format(g.format);
  const model::TextLoader loader = app::text_loader(r.sys, sample_ms, "--loader-sample-ms");
  const model::OptStack st = model::optimisation_stack(r.arch, r.plan, r.sys, loader, steps,
                                                      g.explain ? Explain::on : Explain::off, baseline_optimizer);
  bool feasible = true;
  for (const auto& row : st.rows) feasible = feasible && row.feasibility.ok;
  const auto& par = r.plan.par;
  const std::string head =
      fmt::format("Optimisation stack: {} on {} × {} (TP {}, PP {}, DP {}), global batch {} × {} tokens",
                  r.arch.name.empty() ? r.arch.id : r.arch.name, par.gpus(), r.sys.gpu->info.id, par.tp, par.pp,
                  par.dp, r.plan.global_batch, r.plan.seq_len);
  if (f == Format::json) {
    ordered_json o;
    o["model"] = r.arch.id;
    o["gpu"] = r.sys.gpu->info.id;
    o["gpus"] = par.gpus();
    o["global_batch"] = r.plan.global_batch;
    o["seq"] = r.plan.seq_len;
    o["loader_sample_s"] = sample_ms ? ordered_json(*sample_ms * 1e-3) : ordered_json(nullptr);
    ordered_json rows = ordered_json::array();
    for (const auto& row : st.rows) {
      ordered_json x;
      x["step"] = row.name;
      x["what"] = row.what;
      x["feasible"] = row.feasibility.ok;
      x["reasons"] = row.feasibility.reasons;
      x["step_time_s"] = row.step_time.raw();
      x["gpu_step_s"] = row.gpu_step.raw();
      x["loader_s"] = row.loader.raw();
      x["loader_bound"] = row.loader_bound;
      x["breakdown_s"] = {{"gemm", row.breakdown.gemm.raw()},
                          {"attention", row.breakdown.attention.raw()},
                          {"elementwise", row.breakdown.elementwise.raw()},
                          {"embedding_loss", row.breakdown.embedding_loss.raw()},
                          {"recompute", row.breakdown.recompute.raw()},
                          {"comm_exposed", row.breakdown.comm_exposed.raw()},
                          {"bubble", row.breakdown.bubble.raw()},
                          {"optimizer", row.breakdown.optimizer.raw()}};
      x["peak_bytes_per_gpu"] = row.peak.raw();
      x["fits"] = row.fits;
      x["tokens_per_s"] = row.tokens_per_s;
      x["mfu"] = row.mfu;
      x["cost_per_step_usd"] = row.cost_per_step ? ordered_json(row.cost_per_step->raw()) : ordered_json(nullptr);
      x["usd_per_million_tokens"] =
          row.usd_per_million_tokens ? ordered_json(*row.usd_per_million_tokens) : ordered_json(nullptr);
      x["speedup"] = row.speedup;
      x["cumulative_speedup"] = row.cumulative_speedup;
      if (g.explain) x["derivation"] = derivation_json(row.derivation);
      rows.push_back(x);
    }
    o["rows"] = rows;
    o["notes"] = st.notes;
    out(json_text(o));
    return feasible ? kExitOk : kExitInfeasible;
  }
  Table t;
  t.columns = {{"step", "step"},           {"step_ms", "ms/step", true},      {"speedup", "× prev", true},
               {"cumulative", "× base", true}, {"peak_GB", "peak GB", true},  {"tokens_per_s", "tokens/s", true},
               {"mfu", "MFU", true},        {"usd_per_mtok", "$/M tokens", true}, {"bound", "input"}};
  for (const auto& row : st.rows)
    t.rows.push_back({row.name + (row.feasibility.ok ? "" : " (infeasible)") + (row.fits ? "" : " (does not fit)"),
                      fmt::format("{:.4g}", row.step_time.raw() * 1e3), fmt::format("{:.3f}", row.speedup),
                      fmt::format("{:.3f}", row.cumulative_speedup), fmt::format("{:.3g}", row.peak.raw() * 1e-9),
                      fmt::format("{:.4g}", row.tokens_per_s), fmt::format("{:.1f}%", 100 * row.mfu),
                      row.usd_per_million_tokens ? fmt::format("{:.4g}", *row.usd_per_million_tokens) : std::string(),
                      row.loader_bound.empty() ? std::string("not priced") : row.loader_bound});
  std::string o = f == Format::md ? "## " + head + "\n\n" : head + "\n\n";
  o += t.render(f);
  Section what{"What each step sets", {}};
  for (const auto& row : st.rows) what.rows.emplace_back(row.name, row.what);
  std::vector<Section> secs{what};
  Section reasons{"Infeasible", {}};
  for (const auto& row : st.rows)
    for (const auto& x : row.feasibility.reasons) reasons.rows.emplace_back(row.name, x);
  if (!reasons.rows.empty()) secs.push_back(reasons);
  if (!st.notes.empty()) {
    Section n{"Notes", {}};
    for (const auto& x : st.notes) n.rows.emplace_back("", x);
    secs.push_back(n);
  }
  o += "\n" + render_sections(secs, f);
  out(o);
  if (g.explain)
    for (const auto& row : st.rows)
      if (!row.derivation.empty()) out(render_derivation(row.derivation, f));
  return feasible ? kExitOk : kExitInfeasible;
}

}  // namespace gpuplan::cli
