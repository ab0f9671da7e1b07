// `gpuplan train --search` (every valid layout at one or more GPU counts, ranked; Ctrl-C prints the best so far) and
// `train --sweep` (one estimate per point of a grid of scenario keys). The tables they print: train_search_output.cpp.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/app/report_sections.hpp"
#include "gpuplan/app/file_write.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/search.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "sweep.hpp"
#include "train_cmd.hpp"
#include "train_search_output.hpp"

namespace gpuplan::cli::train_cmd {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

/// Exit code of a search stopped by Ctrl-C (128 + SIGINT, the shell's convention), after printing the best so far.
constexpr int kExitInterrupted = 130;

/// Ctrl-C during a search: the flag the search polls. Lock-free, so setting it is async-signal-safe.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

/// A progress bar on stderr when it is a terminal; silent when piped (and in the tests).
class ProgressBar {
 public:
  ProgressBar() : enabled_(::isatty(STDERR_FILENO) == 1), start_(Clock::now()), last_(start_) {}
  void update(std::uint64_t done, std::uint64_t total) {
    if (!enabled_ || total == 0) return;
    const auto now = Clock::now();
    // Nothing for quick searches; then at most ten redraws a second.
    if (now - start_ < std::chrono::milliseconds(300) || (drawn_ && now - last_ < std::chrono::milliseconds(100)))
      return;
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 30;
    const double f = std::min(1.0, double(done) / double(total));
    const int filled = int(f * kWidth);
    std::string bar(std::size_t(filled), '#');
    bar += std::string(std::size_t(kWidth - filled), '.');
    std::fprintf(stderr, "\r  searching [%s] %3d%%  %s / %s layouts  (Ctrl-C: best so far)", bar.c_str(),
                 int(f * 100.0), u::format_count(double(done)).c_str(), u::format_count(double(total)).c_str());
    std::fflush(stderr);
  }
  void finish() {
    if (drawn_) std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_ = false, drawn_ = false;
  Clock::time_point start_, last_;
};

}  // namespace

std::vector<long long> parse_gpu_counts(const std::string& text, std::string& error) {
  if (text.find("..") == std::string::npos) return {};  // not a range: the caller decodes it as one integer
  return wl_io::parse_count_range(text, error);
}

int run_search(const GlobalOptions& g, const TrainFlags& f, const nlohmann::json& j,
               const std::vector<long long>& gpu_counts, const ResolvedTraining& r, Diagnostics& diags) {
  const Format fmt_ = parse_format(g.format);
  const auto& arch = r.arch;
  const auto& sys = r.sys;
  const auto& base = r.plan;

  // Dimensions given as flags or scenario keys are fixed; the others are searched.
  const model::SearchSpace space =
      fixed_search_space([&](const std::string& key) { return j.contains(key); }, base, arch, gpu_counts);

  model::SearchOptions opt;
  opt.top = int(f.top);
  opt.threads = unsigned(f.threads);
  opt.keep_all = f.search_csv.has_value();
  if (f.rank_by) opt.rank_by = *f.rank_by == "cost"   ? model::RankBy::cost
                               : *f.rank_by == "time" ? model::RankBy::time
                                                      : model::RankBy::tokens_per_usd;
  else if (f.deadline_days) opt.rank_by = model::RankBy::cost;
  if (f.deadline_days) {
    if (!base.tokens_to_train) {
      diags.error("", "--deadline-days", "needs a token budget: give --tokens");
      return report(diags);
    }
    opt.deadline = u::days(*f.deadline_days);
  }
  g_interrupted.store(false);
  opt.cancel = &g_interrupted;
  ProgressBar bar;
  bool raised = false;
  opt.progress = [&](std::uint64_t done, std::uint64_t total) {
    bar.update(done, total);
    // Test hook: behave as if Ctrl-C were pressed once `--cancel-after` layouts are done.
    if (f.cancel_after && !raised && done >= std::uint64_t(*f.cancel_after) && done < total) {
      raised = true;
      std::raise(SIGINT);
    }
  };
  report(diags);  // notes so far (GPU alias, node, calibration)

  auto* previous = std::signal(SIGINT, on_sigint);
  const auto t0 = std::chrono::steady_clock::now();
  model::SearchResult res = model::search_training(arch, base, sys, space, opt);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::signal(SIGINT, previous == SIG_ERR ? SIG_DFL : previous);
  bar.finish();
  const bool interrupted = res.cancelled;

  if (!res.error.empty()) {
    Diagnostics d;
    d.error("", "--search", res.error);
    return report(d);
  }

  if (f.search_csv) {
    // Atomically (a temporary file beside it, then rename): a failed or interrupted write never leaves a half-written
    // file, and an existing one stays as it was. A missing folder is an error here (no folder is created).
    const std::string& path = *f.search_csv;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::error_code ec;
    Diagnostics d;
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      d.error("", "--search-csv", fmt::format("cannot write '{}': no folder '{}'", path, parent.string()));
      return report(d);
    }
    std::ostringstream csv;
    write_points_csv(csv, res.all, opt.deadline.has_value(), arch, base, sys);
    Diagnostics wd;
    if (!app::write_file_atomically(path, csv.str(), wd, {f.scenario, f.keys.text("model").value_or("")})) {
      std::string why;
      for (const auto& x : wd.items()) why += (why.empty() ? "" : "; ") + x.message;
      d.error("", "--search-csv", fmt::format("cannot write '{}': {}", path, why));
      return report(d);
    }
  }

  // The best and the runner-up, evaluated again with everything (and the derivation when asked).
  std::optional<model::TrainingEstimate> best, second;
  std::optional<model::LayoutComparison> why;
  if (!res.top.empty())
    best = model::estimate_training(arch, model::with_layout(base, res.top[0].layout), sys,
                                    g.explain ? Explain::on : Explain::off);
  if (res.top.size() > 1) {
    second = model::estimate_training(arch, model::with_layout(base, res.top[1].layout), sys, Explain::off);
    why = model::compare_layouts(res.top[0].layout, *best, res.top[1].layout, *second);
  }
  const int rc = interrupted ? kExitInterrupted : res.top.empty() ? kExitInfeasible : kExitOk;
  const bool tokens = base.tokens_to_train.has_value();
  const bool price = !res.top.empty() && res.top[0].score.has_price;

  if (fmt_ == Format::csv) {
    out(points_table(res.top, opt.deadline.has_value()).render(Format::csv));
    return rc;
  }
  std::string counts;
  for (long long n : gpu_counts) counts += (counts.empty() ? "" : ", ") + std::to_string(n);
  if (fmt_ == Format::json) {
    ordered_json o;
    o["model"] = arch.id;
    o["gpu"] = sys.gpu->info.id;
    o["node"] = sys.node ? sys.node->info.id : "";
    o["search"] = {{"gpus", gpu_counts}, {"ranked_by", model::to_string(opt.rank_by)},
                   {"layouts", res.total}, {"evaluated", res.evaluated}, {"valid", res.valid},
                   {"fitting", res.fitting}, {"eligible", res.eligible}, {"threads", res.threads},
                   {"wall_s", wall_s}, {"interrupted", interrupted}};
    if (f.deadline_days) o["search"]["deadline_days"] = *f.deadline_days;
    ordered_json top = ordered_json::array();
    for (std::size_t i = 0; i < res.top.size(); ++i) top.push_back(point_json(res.top[i], i + 1));
    o["top"] = top;
    if (why) {
      ordered_json terms = ordered_json::array();
      for (const auto& d : why->terms)
        terms.push_back({{"term", d.term}, {"first_s", d.first.raw()}, {"second_s", d.second.raw()}});
      o["why"] = {{"changes", why->changes}, {"terms", terms}, {"headroom_first_bytes", why->headroom_first.raw()},
                  {"headroom_second_bytes", why->headroom_second.raw()}};
    }
    if (best) o["best"] = estimate_json(arch, sys, model::with_layout(base, res.top[0].layout), *best, g.explain);
    if (res.least_memory && res.fitting == 0) o["least_memory"] = point_json(*res.least_memory, 0);
    if (res.fastest_fitting && res.eligible == 0) o["fastest_fitting"] = point_json(*res.fastest_fitting, 0);
    o["notes"] = res.notes;
    out(json_text(o));
    return rc;
  }

  std::vector<Section> sec;
  Section head{fmt::format("Layout search: {} on {} × {}", arch.name.empty() ? arch.id : arch.name, counts,
                           sys.gpu->info.name),
               {}};
  head.rows = {{"batch", fmt::format("{} sequences × {} tokens per step", base.global_batch, base.seq_len)},
               {"node", sys.node ? sys.node->info.id : "single GPU"},
               {"ranked by", opt.rank_by == model::RankBy::time   ? std::string("step time")
                             : opt.rank_by == model::RankBy::cost ? std::string("cost per token")
                                                                  : std::string("tokens per dollar")}};
  if (f.deadline_days)
    head.rows.emplace_back("deadline", fmt::format("{} tokens within {} days", u::format_number(*base.tokens_to_train, 3),
                                                   u::format_number(*f.deadline_days, 4)));
  head.rows.emplace_back(
      "searched", fmt::format("{} of {} layouts in {} on {} thread{}{}: {} fit in memory{}", u::format_count(double(res.evaluated)),
                              u::format_count(double(res.total)), u::format(u::Seconds(wall_s)), res.threads,
                              res.threads == 1 ? "" : "s", interrupted ? " (interrupted)" : "",
                              u::format_count(double(res.fitting)),
                              f.deadline_days ? fmt::format(", {} meet the deadline", u::format_count(double(res.eligible)))
                                              : std::string()));
  sec.push_back(head);
  if (interrupted)
    sec.push_back({"Interrupted", {{"-", "Ctrl-C: the best of the layouts evaluated so far"}}});
  std::string o = render_sections(sec, fmt_);
  sec.clear();
  if (!res.top.empty()) {
    o += fmt_ == Format::md ? fmt::format("## Top {}\n\n", res.top.size()) : fmt::format("Top {}\n", res.top.size());
    o += top_table(res.top, gpu_counts.size() > 1, arch.moe.has_value(), tokens, price).render(fmt_) + "\n";
    if (why) sec.push_back(why_section(*why, res.top[0], res.top[1], opt.rank_by));
    const wl::TrainingPlan best_plan = model::with_layout(base, res.top[0].layout);
    Section b{fmt::format("Best: {} GPUs, {}", res.top[0].layout.gpus, layout_text(best_plan)), {}};
    b.rows = {{"batch", fmt::format("micro-batch {}, {} micro-batches, recompute {}, ZeRO {}{}", best_plan.micro_batch,
                                    best->micro_batches, recompute_key(best_plan.recompute),
                                    static_cast<int>(best_plan.zero),
                                    best_plan.offload == wl::Offload::optimizer ? ", CPU offload of the optimizer"
                                                                                : "")}};
    if (const std::string flags = model::megatron_split_flags(res.top[0].layout); !flags.empty())
      b.rows.emplace_back("layer split", fmt::format("{} (Megatron-LM)", flags));
    sec.push_back(b);
    for (auto& x : estimate_sections(sys, best_plan, *best, nullptr)) sec.push_back(std::move(x));
  } else {
    Section none{"No layout ranks", {}};
    if (res.valid == 0) none.rows.emplace_back("-", "no valid layout (see the notes)");
    else if (res.fitting == 0 && res.least_memory)
      none.rows.emplace_back(
          "-", fmt::format("none fits in memory: the smallest peak is {} per GPU against {} ({} GPUs, {})",
                           u::format(res.least_memory->score.memory, u::BytePrefix::binary),
                           u::format(res.least_memory->score.capacity, u::BytePrefix::binary),
                           res.least_memory->layout.gpus, model::describe(res.least_memory->layout)));
    else if (res.fastest_fitting && f.deadline_days)
      none.rows.emplace_back(
          "-", fmt::format("none trains the tokens within {} days: the fastest that fits takes {} ({} GPUs, {})",
                           u::format_number(*f.deadline_days, 4), u::format(res.fastest_fitting->score.time_to_train),
                           res.fastest_fitting->layout.gpus, model::describe(res.fastest_fitting->layout)));
    sec.push_back(none);
  }
  Section notes{"Notes", {}};
  for (const auto& n : res.notes) notes.rows.emplace_back("-", n);
  sec.push_back(notes);
  o += render_sections(sec, fmt_);
  out(o);
  if (g.explain && best && !best->derivation.empty()) out(render_derivation(best->derivation, fmt_));
  return rc;
}

int run_train_sweep(const GlobalOptions& g, const TrainFlags& f, const nlohmann::json& j,
                    std::map<std::string, std::string> origin, const std::string& file, const std::string& dir) {
  Diagnostics diags;
  std::vector<SweepAxis> axes;
  for (const auto& spec : f.sweep) {
    auto a = parse_sweep(spec, wl_io::training_scenario_fields(), diags);
    if (!a) return report(diags);
    origin[a->key] = "--sweep";
    axes.push_back(std::move(*a));
  }
  const auto ws = app::load_workspace(dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  auto eval = [&](const nlohmann::json& point, Diagnostics& d) -> std::optional<ordered_json> {
    auto sc = wl_io::decode_training_scenario(point, file, origin);
    d.append(sc.diagnostics());
    if (!sc.ok()) return std::nullopt;
    auto where = [&](const std::string& key) {
      auto it = origin.find(key);
      if (it != origin.end()) return it->second;
      return j.contains(key) ? file + ": /" + key : "--" + key;
    };
    auto r = resolve_training(sc.value(), point.contains("global_batch"), db, lib, where, d);
    if (!r || !load_calibration(dir, r->sys, f.no_calibration, d)) return std::nullopt;
    model::TrainingEstimate est;
    if (r->pre.ok) est = model::estimate_training(r->arch, r->plan, r->sys, Explain::off);
    else est.feasibility = r->pre;
    return estimate_json(r->arch, r->sys, r->plan, est, false);
  };
  static const std::vector<SweepColumn> columns{
      {"feasible", "/feasible"},         {"gpus", "/gpus"},
      {"tp", "/layout/tp"},              {"pp", "/layout/pp"},
      {"dp", "/layout/dp"},              {"cp", "/layout/cp"},
      {"step_time_s", "/step_time_s"},   {"tokens_per_s", "/tokens_per_s"},
      {"mfu", "/mfu"},                   {"peak_bytes_per_gpu", "/memory/peak_bytes_per_gpu"},
      {"time_to_train_s", "/time_to_train_s"}, {"gpu_hours", "/gpu_hours"},
      {"cost_usd", "/cost_usd"},         {"energy_kWh", "/energy_kWh"},
      {"reasons", "/reasons"}};
  // A sweep over the hardware can cost points at different kinds of price (on-demand, spot): the kind goes beside
  // the cost, and run_sweep notes a mix.
  std::vector<SweepColumn> cols = columns;
  if (std::any_of(axes.begin(), axes.end(), [](const SweepAxis& a) {
        return a.key == "gpu" || a.key == "node" || a.key == "cluster";
      }))
    cols.insert(std::find_if(cols.begin(), cols.end(), [](const SweepColumn& c) { return c.key == "energy_kWh"; }),
                SweepColumn{"price_kind", "/price_kind"});
  return run_sweep(axes, j, eval, cols, parse_format(g.format) == Format::json ? Format::json : Format::csv);
}

}  // namespace gpuplan::cli::train_cmd
