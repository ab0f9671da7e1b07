// `gpuplan report PLAN.json`: the budget report (docs/report.md). Reads a plan of training runs and serving
// deployments and the hardware options to compare, resolves each item on each option, lets model::build_report pick
// the cheapest layout per item × option and the cheapest option per item, and renders the result as Markdown, text,
// JSON, CSV or one self-contained HTML page with SVG charts (the renderers: report_render.*). No model arithmetic
// here (DESIGN.md §2.1).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include <fmt/format.h>

#include "bands.hpp"
#include "commands.hpp"
#include "report_render.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/app/file_write.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/report.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/plan_io.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;

struct ReportFlags {
  std::string plan;
  std::string format = "md";
  std::string output;
  long long threads = 0;
  bool no_calibration = false;
};

// ------------------------------------------------------------------------------------------------------------------
// Resolution: the plan's items on each option
// ------------------------------------------------------------------------------------------------------------------

/// Where a GPU file's price comes from: the file relative to the data directory, the pointer and the source.
void price_source(const hw::GpuSpec& gpu, const std::string& data_dir, OptionContext& o) {
  std::string file = gpu.info.file;
  const std::string prefix = data_dir + "/";
  if (file.rfind(prefix, 0) == 0) file = file.substr(prefix.size());
  for (const auto& s : gpu.info.sources)
    if (std::find(s.fields.begin(), s.fields.end(), "/price_usd_per_hour") != s.fields.end()) o.price_source = s.ref;
  o.price_origin = file + " /price_usd_per_hour" + (o.price_source.empty() ? "" : " (" + o.price_source + ")");
}

/// Errors an item raises on some options only belong to those options (a precision a GPU lacks): the cell is
/// infeasible with the message. Errors it raises on every option are errors in the plan (exit 2).
bool settle_errors(const std::vector<Diagnostics>& per_option, std::vector<std::vector<std::string>>& unresolved,
                   Diagnostics& diags) {
  const bool all = std::all_of(per_option.begin(), per_option.end(), [](const Diagnostics& d) { return d.has_errors(); });
  if (all && !per_option.empty()) {
    for (const auto& d : per_option.front().items())
      if (d.severity == Severity::error) diags.add(d);
    return false;
  }
  unresolved.assign(per_option.size(), {});
  for (std::size_t k = 0; k < per_option.size(); ++k)
    for (const auto& d : per_option[k].items())
      if (d.severity == Severity::error) unresolved[k].push_back(d.message);
  return true;
}

/// Notes (alias, node, calibration) once each, in order.
void collect_notes(const Diagnostics& d, Diagnostics& notes, std::set<std::string>& seen) {
  for (const auto& x : d.items())
    if (x.severity != Severity::error && seen.insert(x.to_string()).second) notes.add(x);
}

std::optional<ReportContext> resolve_plan(const std::string& file, wl_io::Plan plan, const std::string& dir,
                                          bool no_calibration, const hw::HardwareDb& db,
                                          const wl_io::ModelLibrary& lib, Diagnostics& diags) {
  ReportContext ctx;
  ctx.file = file;
  ctx.plan = std::move(plan);
  Diagnostics notes;
  std::set<std::string> seen;
  const auto& opts = ctx.plan.options;
  // Options.
  for (const auto& o : opts) {
    OptionContext oc;
    Diagnostics d;
    auto where = [&](const std::string& key) { return fmt::format("{}: {}/{}", file, o.pointer, key); };
    if (resolve_hardware(o.gpu, o.node, o.cluster, db, where, d, oc.sys) &&
        load_calibration(dir, oc.sys, no_calibration, d)) {
      if (o.price_usd_per_gpu_hour) {
        oc.sys.price = u::usd_per_hour(*o.price_usd_per_gpu_hour);
        oc.price_origin = fmt::format("{} {}/price_usd_per_gpu_hour", file, o.pointer);
        oc.price_source = "the plan";
      } else if (oc.sys.gpu->price) {
        price_source(*oc.sys.gpu, dir, oc);
      }
    }
    collect_notes(d, notes, seen);
    for (const auto& x : d.items())
      if (x.severity == Severity::error) diags.add(x);
    ctx.options.push_back(std::move(oc));
  }
  if (diags.has_errors()) return std::nullopt;

  // Training runs.
  for (const auto& item : ctx.plan.training) {
    model::TrainingRequest tr;
    tr.id = item.id;
    tr.name = item.name;
    tr.tokens = item.tokens;
    tr.deadline_days = item.deadline_days;
    std::vector<Diagnostics> errs(opts.size());
    std::vector<model::TrainingCellInput> cells(opts.size());
    wl::TrainingPlan base;
    bool have_arch = false;
    for (std::size_t k = 0; k < opts.size(); ++k) {
      const auto& oc = ctx.options[k];
      wl_io::TrainingScenario s = item.scenario;
      s.gpu = oc.sys.gpu->info.id;
      s.node = oc.sys.node ? oc.sys.node->info.id : "";
      s.cluster = opts[k].cluster;
      s.gpus.reset();
      s.dp_given = false;
      s.price_usd_per_hour = opts[k].price_usd_per_gpu_hour;
      auto where = [&](const std::string& key) {
        if (key == "gpu" || key == "node" || key == "cluster") return fmt::format("{}: {}/{}", file, opts[k].pointer, key);
        return fmt::format("{}: {}/scenario/{}", file, item.pointer, key);
      };
      auto r = resolve_training(s, true, db, lib, where, errs[k]);
      cells[k].sys = oc.sys;
      cells[k].price_origin = oc.price_origin;
      if (!r) continue;
      if (!have_arch) {
        tr.arch = r->arch;
        base = r->plan;
        have_arch = true;
      }
      cells[k].base = r->plan;
      cells[k].space = fixed_search_space(
          [&](const std::string& key) {
            return std::find(item.scenario_keys.begin(), item.scenario_keys.end(), key) != item.scenario_keys.end();
          },
          r->plan, r->arch, item.gpus);
      if (!r->pre.ok) cells[k].unresolved = r->pre.reasons;
    }
    std::vector<std::vector<std::string>> unresolved;
    if (!settle_errors(errs, unresolved, diags)) continue;
    for (std::size_t k = 0; k < opts.size(); ++k) {
      collect_notes(errs[k], notes, seen);
      for (auto& m : unresolved[k]) cells[k].unresolved.push_back(m);
    }
    tr.cells = std::move(cells);
    ctx.training.push_back(std::move(tr));
    ctx.training_base.push_back(base);
  }

  // Serving deployments.
  for (const auto& item : ctx.plan.serving) {
    model::ServingRequest sr;
    sr.id = item.id;
    sr.name = item.name;
    std::vector<Diagnostics> errs(opts.size());
    std::vector<model::ServingCellInput> cells(opts.size());
    std::vector<std::string> engine(opts.size());
    bool have_arch = false;
    for (std::size_t k = 0; k < opts.size(); ++k) {
      const auto& oc = ctx.options[k];
      wl_io::ServingScenario s = item.scenario;
      s.gpu = oc.sys.gpu->info.id;
      s.node = oc.sys.node ? oc.sys.node->info.id : "";
      s.cluster = opts[k].cluster;
      s.price_usd_per_hour = opts[k].price_usd_per_gpu_hour;
      auto where = [&](const std::string& key) {
        if (key == "gpu" || key == "node" || key == "cluster") return fmt::format("{}: {}/{}", file, opts[k].pointer, key);
        if (key == "price_usd_per_hour") return fmt::format("{}: {}/price_usd_per_gpu_hour", file, opts[k].pointer);
        return fmt::format("{}: {}/scenario/{}", file, item.pointer, key);
      };
      auto r = resolve_serving(s, dir, no_calibration, db, lib, where, errs[k]);
      cells[k].sys = oc.sys;
      cells[k].price_origin = oc.price_origin;
      if (!r) continue;
      if (!have_arch) {
        sr.arch = r->arch;
        sr.params = r->params;
        sr.traffic = r->traffic();
        sr.sla = r->sla;
        have_arch = true;
      }
      cells[k].sys = r->sys;
      cells[k].perf = r->perf;
      cells[k].options = r->plan_options();
      engine[k] = fmt::format("{} weights, {} KV cache, {} GEMMs", model::to_string(r->perf.weights.dtype),
                              model::to_string(r->perf.kv.dtype), hw::to_string(r->perf.compute));
    }
    std::vector<std::vector<std::string>> unresolved;
    if (!settle_errors(errs, unresolved, diags)) continue;
    for (std::size_t k = 0; k < opts.size(); ++k) {
      collect_notes(errs[k], notes, seen);
      for (auto& m : unresolved[k]) cells[k].unresolved.push_back(m);
    }
    sr.cells = std::move(cells);
    ctx.serving.push_back(std::move(sr));
    ctx.serving_engine.push_back(std::move(engine));
  }
  report(notes);
  if (diags.has_errors()) return std::nullopt;
  return ctx;
}

// ------------------------------------------------------------------------------------------------------------------

int run_report(const GlobalOptions& g, const ReportFlags& f) {
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  auto text = json_io::read_text_file(f.plan, diags);
  if (!text) return report(diags);
  auto parsed = json_io::parse(*text, f.plan, diags);
  if (!parsed) return report(diags);
  auto plan = wl_io::decode_plan(*parsed, f.plan);
  if (!plan.ok()) return report(plan.diagnostics());
  const auto ws = app::load_workspace(*dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  auto ctx = resolve_plan(f.plan, plan.value(), *dir, f.no_calibration, db, lib, diags);
  if (!ctx) return report(diags);

  model::ReportRequest req;
  for (std::size_t k = 0; k < ctx->plan.options.size(); ++k) {
    const auto& o = ctx->plan.options[k];
    model::ReportOption ro{o.id, option_label(o), o.max_gpus};
    // A cluster is as many GPUs as one can get.
    if (const auto* cl = ctx->options[k].sys.cluster; cl != nullptr && ctx->options[k].sys.node != nullptr) {
      const long long size = static_cast<long long>(cl->nodes) * ctx->options[k].sys.node->gpus;
      ro.max_gpus = ro.max_gpus ? std::min(*ro.max_gpus, size) : size;
    }
    req.options.push_back(ro);
  }
  req.training = ctx->training;
  req.serving = ctx->serving;
  req.threads = unsigned(f.threads);
  req.explain = g.explain ? Explain::on : Explain::off;
  if (auto bands = load_bands(*dir, diags)) req.bands = std::move(*bands);
  if (diags.has_errors()) return report(diags);
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  bool drew = false;
  req.progress = [&](std::size_t done, std::size_t total, const std::string& what) {
    if (!tty) return;
    drew = true;
    std::fprintf(stderr, "\r\033[K  report [%zu/%zu] %s", done, total, what.c_str());
    std::fflush(stderr);
  };
  const model::ReportResult res = model::build_report(req);
  if (drew) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }

  std::string body;
  if (f.format == "json") body = json_text(report_json(*ctx, res, g.explain));
  else if (f.format == "csv") body = report_csv(*ctx, res);
  else {
    const Doc doc = build_doc(*ctx, res, g.explain, f.format == "html");
    if (f.format == "html") body = render_html(doc, "Budget report: " + ctx->file);
    else if (f.format == "text") body = render_text(doc) + "\n";
    else body = render_md(doc) + "\n";
  }
  if (!f.output.empty()) {
    Diagnostics d;
    if (!app::write_file_atomically(f.output, body, d, {f.plan})) {
      Diagnostics d2;
      for (auto x : d.items()) {
        if (x.pointer.empty()) x.pointer = "--output";
        d2.add(x);
      }
      return report(d2);
    }
  } else {
    out(body);
  }
  return res.all_feasible ? kExitOk : kExitInfeasible;
}

}  // namespace

void register_report(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<ReportFlags>();
  auto* c = app.add_subcommand("report", "budget report: training runs and serving deployments of a plan file on "
                                         "several hardware options — the cheapest that meets each deadline or SLA, "
                                         "and the totals (docs/report.md)");
  c->add_option("PLAN", f->plan, "plan JSON (docs/report.md)")->required();
  c->add_option("--format,-f", f->format, "md (default), text, json, csv or html (one self-contained page with charts)")
      ->check(CLI::IsMember({"md", "text", "json", "csv", "html"}))
      ->capture_default_str();
  c->add_option("--output,-o", f->output, "write the report to this file (atomically) instead of stdout");
  c->add_flag("--explain", g.explain, "append the derivation of every figure");
  c->add_option("--threads", f->threads, "worker threads of the layout searches (default: all cores)")
      ->check(CLI::Range(0, 1024));
  c->add_flag("--no-calibration", f->no_calibration,
              "ignore data/calibration/<gpu>/profile.json: use the built-in efficiency defaults");
  c->callback([&g, f, &rc] { rc = run_report(g, *f); });
}

}  // namespace gpuplan::cli