// `gpuplan train`: step time, throughput, MFU, memory, communication, time to train and cost for one plan.
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bands.hpp"
#include "gpuplan/app/input_pipeline.hpp"
#include "commands.hpp"
#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/search.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "megatron_args.hpp"
#include "scenario_flags.hpp"
#include "gpuplan/app/report_sections.hpp"
#include "gpuplan/app/resolve.hpp"
#include "sweep.hpp"
#include "timeline_render.hpp"
#include "train_search_output.hpp"
#include "train_stack.hpp"
#include "vision_cmd.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

/// Exit code of a search stopped by Ctrl-C (128 + SIGINT, the shell's convention), after printing the best so far.
constexpr int kExitInterrupted = 130;

struct TrainFlags {
  std::string scenario;
  ScenarioFlags keys;               ///< one flag per key of the training field table (wl_io::training_fields)
  std::optional<std::string> gpus;  ///< --gpus: one count, or with --search a range (parse_gpu_counts)
  bool no_calibration = false;
  // --search
  bool search = false;
  long long top = 10;
  std::optional<std::string> rank_by, search_csv;
  std::optional<double> deadline_days;
  long long threads = 0;
  std::optional<long long> cancel_after;  ///< test hook: raise SIGINT after this many layouts
  std::vector<std::string> sweep;  ///< --sweep KEY=RANGE (repeatable: a grid)
  std::optional<std::string> megatron_args;  ///< --megatron-args FILE|-
  std::vector<std::string> megatron_typed;   ///< Megatron-LM flags typed among ours (CLI11's extras)
  std::optional<std::string> timeline, memory_timeline;  ///< --timeline / --memory-timeline FORMAT
  std::optional<std::string> stack;          ///< --stack amp,flash,...: the optimisation stack (train_stack.hpp)
  std::optional<double> loader_sample_ms;    ///< --loader-sample-ms: CPU cost of one sample (--stack, --timeline)
  std::optional<long long> loader_workers;   ///< --loader-workers: DataLoader workers per GPU (with --timeline)
};

/// The input pipeline's flags: --loader-sample-ms prices it in the optimisation stack and the step timeline,
/// --loader-workers sets the timeline's workers (the stack's come from its workers=N step). False after an error.
bool check_loader_flags(const TrainFlags& f, Diagnostics& diags) {
  if (f.loader_sample_ms && !f.stack && !f.timeline)
    diags.error("", "--loader-sample-ms",
                "prices the input pipeline of the optimisation stack or the step timeline: give --stack or --timeline too");
  if (f.loader_sample_ms && !(*f.loader_sample_ms > 0 && *f.loader_sample_ms <= 1e6))
    diags.error("", "--loader-sample-ms",
                fmt::format("{} is not a CPU time per sample in (0, 10⁶] ms", plain_number(*f.loader_sample_ms)));
  if (f.loader_workers) {
    if (f.stack)
      diags.error("", "--loader-workers", "the optimisation stack sets the workers with its workers=N step");
    else if (!f.timeline)
      diags.error("", "--loader-workers", "lays the data loader out in the step timeline: give --timeline too");
    else if (!f.loader_sample_ms)
      diags.error("", "--loader-workers",
                  "the loader needs its CPU cost per sample to be priced: give --loader-sample-ms too");
    if (*f.loader_workers < 0 || *f.loader_workers > 4096)
      diags.error("", "--loader-workers",
                  fmt::format("{} is not a worker count (0 to 4096 per GPU; 0: loaded in the training process)",
                              *f.loader_workers));
  }
  return !diags.has_errors();
}

/// --stack's flag checks: it owns the knobs its steps set (from its fp32 eager baseline), and does not combine with
/// --search or --sweep. False after an error.
bool check_stack_flags(const TrainFlags& f, Diagnostics& diags) {
  if (!f.stack) return !diags.has_errors();
  if (f.search) diags.error("", "--stack", "--stack and --search do not combine: the stack evaluates one layout");
  if (!f.sweep.empty()) diags.error("", "--stack", "--stack and --sweep do not combine");
  // The keys the stack's steps set, reported by their flags.
  for (const char* key : {"precision", "kernels", "flash_attention", "attention_kernel", "mixed_precision", "recompute",
                          "overlap_grad_reduce", "overlap_param_gather", "overlap_tp_comm", "cross_entropy",
                          "gradient_bytes", "fp8_params", "recompute_modules"}) {
    if (!f.keys.given(key)) continue;
    const std::string flag = wl_io::find_field(wl_io::training_fields(), key)->flag();
    diags.error("", flag,
                fmt::format("the optimisation stack starts from its fp32 eager baseline and sets this itself: leave "
                            "{} out, or put the step that sets it in --stack ({})",
                            flag, stack_names()));
  }
  return !diags.has_errors();
}
ordered_json bytes_json(const model::TrainingMemory& m) {
  return {{"weights_bytes", m.weights.raw()},
          {"gradients_bytes", m.gradients.raw()},
          {"master_weights_bytes", m.master_weights.raw()},
          {"optimizer_states_bytes", m.optimizer_states.raw()},
          {"activations_bytes", m.activations.raw()},
          {"logits_bytes", m.logits.raw()},
          {"cuda_context_bytes", m.cuda_context.raw()},
          {"nccl_buffers_bytes", m.nccl_buffers.raw()},
          {"fragmentation_bytes", m.fragmentation.raw()},
          {"host_offloaded_bytes", m.host_offloaded.raw()}};
}

/// The JSON object of one estimate (the stable keys of docs/cli.md).
ordered_json estimate_json(const wl::TransformerArch& arch, const model::TrainingSystem& sys,
                           const wl::TrainingPlan& plan, const model::TrainingEstimate& est, bool explain,
                           const model::Band* band = nullptr) {
  const auto& par = plan.par;
  ordered_json o;
  o["model"] = arch.id;
  o["gpu"] = sys.gpu->info.id;
  o["node"] = sys.node ? sys.node->info.id : "";
  o["gpus"] = par.gpus();
  o["layout"] = {{"tp", par.tp}, {"pp", par.pp}, {"dp", par.dp}, {"cp", par.cp}, {"ep", par.ep},
                 {"sequence_parallel", par.sequence_parallel}, {"virtual_stages", par.virtual_stages},
                 {"micro_batch", plan.micro_batch}, {"global_batch", plan.global_batch}, {"seq", plan.seq_len},
                 {"micro_batches", est.micro_batches},
                 {"offload", plan.offload == wl::Offload::optimizer ? "optimizer" : "none"},
                 {"optimizer_states", plan.optimizer_states == wl::StateDtype::bf16 ? "bf16" : "fp32"},
                 {"fp8_params", plan.precision.fp8_params},
                 {"lora", {{"rank", plan.lora.rank},
                           {"targets", plan.lora.on() ? wl::to_string(plan.lora.targets) : "none"},
                           {"base", wl::to_string(plan.lora.base)}}}};
  if (par.expert_tp() != par.tp) o["layout"]["etp"] = par.expert_tp();
  o["feasible"] = est.feasibility.ok;
  o["reasons"] = est.feasibility.reasons;
  if (est.step_time.raw() > 0) {
    o["step_time_s"] = est.step_time.raw();
    o["tokens_per_s"] = est.tokens_per_s;
    o["tokens_per_s_per_gpu"] = est.tokens_per_s / double(par.gpus());
    o["mfu"] = est.mfu;
    o["hfu"] = est.hfu;
    o["model_flops_per_step"] = est.model_flops_per_step.raw();
    o["breakdown"] = {{"gemm_s", est.step.gemm.raw()}, {"attention_s", est.step.attention.raw()},
                      {"elementwise_s", est.step.elementwise.raw()}, {"embedding_loss_s", est.step.embedding_loss.raw()},
                      {"recompute_s", est.step.recompute.raw()}, {"comm_exposed_s", est.step.comm_exposed.raw()},
                      {"bubble_s", est.step.bubble.raw()}, {"optimizer_s", est.step.optimizer.raw()},
                      {"offload_s", est.step.offload.raw()}};
    ordered_json comm;
    for (const auto& c : est.comm)
      comm[c.kind] = {{"collective", c.collective}, {"group_size", c.group_size}, {"tier", c.tier},
                      {"bytes_per_step", c.bytes_per_step.raw()}, {"time_s", c.time.raw()}, {"exposed_s", c.exposed.raw()}};
    o["comm"] = comm;
    o["memory"] = {{"peak_bytes_per_gpu", est.memory.total.raw()}, {"capacity_bytes", est.memory.capacity.raw()},
                   {"fits", est.memory.fits}, {"breakdown", bytes_json(est.memory)}};
    if (est.time_to_train) o["time_to_train_s"] = est.time_to_train->raw();
    if (est.gpu_hours) o["gpu_hours"] = *est.gpu_hours;
    if (est.cost) {
      o["cost_usd"] = est.cost->raw();
      o["price_kind"] = price_kind(sys.price, sys.gpu).value_or("");
    }
    if (est.energy) o["energy_kWh"] = est.energy->raw() / 3.6e6;
    if (band != nullptr) {
      // A time scales with measured/predicted time, a rate with its inverse.
      auto times = [&](double v) { return ordered_json::array({v * band->p10, v * band->p90}); };
      o["step_time_s_band"] = times(est.step_time.raw());
      o["tokens_per_s_band"] = {est.tokens_per_s / band->p90, est.tokens_per_s / band->p10};
      if (est.time_to_train) o["time_to_train_s_band"] = times(est.time_to_train->raw());
      if (est.gpu_hours) o["gpu_hours_band"] = times(*est.gpu_hours);
      if (est.cost) o["cost_usd_band"] = times(est.cost->raw());
      o["band"] = {{"regime", band->regime}, {"cases", band->cases}, {"p10", band->p10}, {"p50", band->p50},
                   {"p90", band->p90}, {"fallback", band->fallback}};
    }
  }
  if (explain && !est.derivation.empty()) o["derivation"] = derivation_json(est.derivation);
  return o;
}

}  // namespace

std::optional<nlohmann::json> read_training_scenario(const std::string& path, Diagnostics& diags) {
  if (path.empty()) return nlohmann::json::object();
  auto text = json_io::read_text_file(path, diags);
  if (!text) return std::nullopt;
  auto parsed = json_io::parse(*text, path, diags);
  if (!parsed) return std::nullopt;
  if (!parsed->is_object()) {
    diags.error(path, "/", "expected an object of training scenario keys (docs/scenario.md)");
    return std::nullopt;
  }
  return std::move(*parsed);
}

namespace {

/// The error band of a training estimate's regime, from <data>/accuracy/bands.json (absent file: no band).
std::optional<model::Band> training_band(const GlobalOptions& g, const model::TrainingSystem& sys,
                                         const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                         Diagnostics& diags) {
  const auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return std::nullopt;
  const auto cases = load_bands(*dir, diags);
  if (!cases) return std::nullopt;
  const model::Regime r{"train", model::generation_of(sys.gpu->family), arch.moe.has_value() ? "moe" : "dense",
                        model::scale_bucket(plan.par.gpus(), sys.node ? sys.node->gpus : 1)};
  return model::band_for(*cases, r);
}

/// --timeline / --memory-timeline: the step or memory timeline of the plan instead of the report. Exit 0 (3 when the
/// plan is infeasible: the timeline is still printed), 2 when the plan cannot be laid out.
int run_timeline(const ResolvedTraining& r, const model::TrainingEstimate& est, bool memory, TimelineFormat tf,
                 const model::TextLoader& loader, int loader_workers) {
  const auto& arch = r.arch;
  const std::string title = fmt::format("{} on {} × {}: {}", arch.name.empty() ? arch.id : arch.name, r.plan.par.gpus(),
                                        r.sys.gpu->info.name, layout_text(r.plan));
  const char* flag = memory ? "--memory-timeline" : "--timeline";
  if (memory) {
    const model::MemoryTimeline m = model::training_memory_timeline(arch, r.plan, r.sys);
    if (!m.ok) {
      Diagnostics d;
      d.error("", flag, "cannot lay out this plan: " + m.error);
      return report(d);
    }
    out(tf == TimelineFormat::json ? json_text(memory_timeline_json(m))
        : tf == TimelineFormat::svg ? memory_timeline_svg(m, "Memory timeline — " + title)
                                    : memory_timeline_text(m));
  } else {
    const model::StepTimeline t = model::training_timeline(arch, r.plan, r.sys, loader, loader_workers);
    if (!t.ok) {
      Diagnostics d;
      d.error("", flag, "cannot lay out this plan: " + t.error);
      return report(d);
    }
    out(tf == TimelineFormat::json ? json_text(timeline_json(t))
        : tf == TimelineFormat::svg ? timeline_svg(t, title)
                                    : timeline_text(t));
  }
  return est.feasibility.ok ? kExitOk : kExitInfeasible;
}

int run_single(const GlobalOptions& g, const wl_io::TrainingScenario& s, const ResolvedTraining& r,
               const std::optional<std::pair<bool, TimelineFormat>>& timeline = std::nullopt,
               const model::TextLoader& loader = {}, int loader_workers = 0) {
  const auto& sys = r.sys;
  const auto& arch = r.arch;
  const auto& plan = r.plan;
  const auto& par = plan.par;
  const auto& pre = r.pre;

  const Format fmt_ = parse_format(g.format);
  model::TrainingEstimate est;
  if (pre.ok) est = model::estimate_training(arch, plan, sys, g.explain ? Explain::on : Explain::off);
  else est.feasibility = pre;
  Diagnostics band_diags;
  const auto band = training_band(g, sys, arch, plan, band_diags);
  if (band_diags.has_errors()) return report(band_diags);
  const model::Band* bp = band ? &*band : nullptr;
  if (timeline) {
    if (!pre.ok) {
      Diagnostics d;
      d.error("", timeline->first ? "--memory-timeline" : "--timeline",
              "cannot lay out this plan: " + (pre.reasons.empty() ? std::string("invalid layout") : pre.reasons.front()));
      return report(d);
    }
    return run_timeline(r, est, timeline->first, timeline->second, loader, loader_workers);
  }

  if (fmt_ == Format::json || fmt_ == Format::csv) {
    if (fmt_ == Format::json) {
      out(json_text(estimate_json(arch, sys, plan, est, g.explain, bp)));
    } else {
      Table t;
      t.columns = {{"model", "model"}, {"gpu", "gpu"}, {"gpus", "gpus", true}, {"tp", "tp", true}, {"pp", "pp", true},
                   {"dp", "dp", true}, {"cp", "cp", true}, {"feasible", "feasible"}, {"step_time_s", "step s", true},
                   {"tokens_per_s", "tokens/s", true}, {"mfu", "MFU", true}, {"peak_bytes_per_gpu", "peak B/GPU", true},
                   {"time_to_train_s", "time to train s", true}, {"cost_usd", "cost $", true}};
      auto num = [](double v) { return fmt::format("{:.10g}", v); };
      t.rows.push_back({arch.id, sys.gpu->info.id, std::to_string(par.gpus()), std::to_string(par.tp),
                        std::to_string(par.pp), std::to_string(par.dp), std::to_string(par.cp),
                        est.feasibility.ok ? "true" : "false", est.step_time.raw() > 0 ? num(est.step_time.raw()) : "",
                        est.step_time.raw() > 0 ? num(est.tokens_per_s) : "", est.step_time.raw() > 0 ? num(est.mfu) : "",
                        est.step_time.raw() > 0 ? num(est.memory.total.raw()) : "",
                        est.time_to_train ? num(est.time_to_train->raw()) : "", est.cost ? num(est.cost->raw()) : ""});
      out(t.render(Format::csv));
    }
    return est.feasibility.ok ? kExitOk : kExitInfeasible;
  }

  const long long shown_gpus = s.gpus && !pre.ok ? *s.gpus : par.gpus();
  out(render_sections(training_sections(arch, shown_gpus, sys, plan, est, bp), fmt_));
  if (g.explain && !est.derivation.empty()) out(render_derivation(est.derivation, fmt_));
  return est.feasibility.ok ? kExitOk : kExitInfeasible;
}

// ------------------------------------------------------------------------------------------------------------------
// --search
// ------------------------------------------------------------------------------------------------------------------

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

/// `N`, `A..B` (A, 2A, 4A, ... ≤ B) or `A..B:S` (A, A+S, ... ≤ B). Empty with `error` set when it does not parse.
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
    if (!calib::write_file_atomically(path, csv.str(), wd, {f.scenario, f.keys.text("model").value_or("")})) {
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

/// `train --sweep`: one estimate per point of the grid, one row per point (docs/cli.md).
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
  auto db = hw_io::load_hardware_db(dir);
  if (!db.ok()) return report(db.diagnostics());
  auto lib = wl_io::load_model_library(dir);
  if (!lib.ok()) return report(lib.diagnostics());
  auto eval = [&](const nlohmann::json& point, Diagnostics& d) -> std::optional<ordered_json> {
    auto sc = wl_io::decode_training_scenario(point, file, origin);
    d.append(sc.diagnostics());
    if (!sc.ok()) return std::nullopt;
    auto where = [&](const std::string& key) {
      auto it = origin.find(key);
      if (it != origin.end()) return it->second;
      return j.contains(key) ? file + ": /" + key : "--" + key;
    };
    auto r = resolve_training(sc.value(), point.contains("global_batch"), *db, *lib, where, d);
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

int run_train(const GlobalOptions& g, const TrainFlags& f) {
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  std::optional<std::vector<model::OptStep>> stack;
  if (!check_stack_flags(f, diags) || !check_loader_flags(f, diags)) return report(diags);
  if (f.stack) {
    stack = parse_stack(*f.stack, "--stack", diags);
    if (!stack) return report(diags);
  }
  auto scenario = read_training_scenario(f.scenario, diags);
  if (!scenario) return report(diags);
  nlohmann::json j = std::move(*scenario);
  const std::string file = f.scenario.empty() ? "(flags)" : f.scenario;
  std::map<std::string, std::string> origin;
  f.keys.overlay(j, origin);
  std::optional<MegatronMapping> megatron;
  if (f.megatron_args || !f.megatron_typed.empty()) {
    megatron = megatron_overlay(*dir, f.megatron_args, f.megatron_typed, j, origin, diags);
    if (!megatron) return report(diags);
  }
  // --gpus: one count (decoded with the scenario's field table), or with --search a range.
  std::vector<long long> gpu_range;
  if (f.gpus) {
    std::string error;
    gpu_range = parse_gpu_counts(*f.gpus, error);
    if (!error.empty()) {
      diags.error("", "--gpus", error);
      return report(diags);
    }
    if (!gpu_range.empty() && !f.search) {
      diags.error("", "--gpus", fmt::format("a range of GPU counts ('{}') needs --search", *f.gpus));
      return report(diags);
    }
    long long n = 0;
    const auto* e = f.gpus->data() + f.gpus->size();
    auto [p, ec] = std::from_chars(f.gpus->data(), e, n);
    if (!gpu_range.empty()) j.erase("gpus");
    else if (ec == std::errc() && p == e) j["gpus"] = n;
    else j["gpus"] = *f.gpus;  // the decoder names the flag and the type
    origin["gpus"] = "--gpus";
  }
  // --timeline / --memory-timeline: one plan's view, in text, SVG or JSON.
  std::optional<std::pair<bool, TimelineFormat>> timeline;
  for (const auto& tv : {std::pair{false, &f.timeline}, std::pair{true, &f.memory_timeline}}) {
    if (!*tv.second) continue;
    const char* flag = tv.first ? "--memory-timeline" : "--timeline";
    TimelineFormat tf{};
    if (!parse_timeline_format(**tv.second, tf))
      diags.error("", flag, fmt::format("'{}' is not a timeline format: give {}", **tv.second, kTimelineFormats));
    else if (timeline)
      diags.error("", flag, "give one of --timeline and --memory-timeline per run");
    else if (f.search || !f.sweep.empty())
      diags.error("", flag, fmt::format("lays out one plan: it does not combine with {}", f.search ? "--search" : "--sweep"));
    else
      timeline = std::pair{tv.first, tf};
  }
  if (diags.has_errors()) return report(diags);
  if (!f.sweep.empty()) {
    if (f.search) {
      diags.error("", "--sweep", "--sweep and --search do not combine: sweep the GPU count with --search's range instead");
      return report(diags);
    }
    return run_train_sweep(g, f, j, origin, file, *dir);
  }
  auto sc = wl_io::decode_training_scenario(j, file, origin);
  if (!sc.ok()) return report(sc.diagnostics());
  wl_io::TrainingScenario s = sc.value();
  if (f.search) {
    if (gpu_range.empty() && s.gpus) gpu_range = {*s.gpus};
    if (gpu_range.empty()) diags.error("", "--gpus", "--search needs the GPU count: --gpus N, or a range A..B");
    if (!j.contains("global_batch"))
      diags.error("", "--global-batch", "--search needs the global batch (sequences per step): the layouts divide it");
    if (diags.has_errors()) return report(diags);
    s.gpus.reset();  // the search picks DP for every layout
    s.dp_given = false;
  }
  auto db = hw_io::load_hardware_db(*dir);
  if (!db.ok()) return report(db.diagnostics());
  auto lib = wl_io::load_model_library(*dir);
  if (!lib.ok()) return report(lib.diagnostics());
  auto where = [&](const std::string& key) {
    auto it = origin.find(key);
    if (it != origin.end()) return it->second;
    return j.contains(key) ? file + ": /" + key : "--" + key;
  };
  auto resolved = resolve_training(s, j.contains("global_batch"), *db, *lib, where, diags);
  if (!resolved) return report(diags);
  if (megatron && !f.search && !check_megatron_batch(*megatron, resolved->plan, diags)) return report(diags);
  if (!load_calibration(*dir, resolved->sys, f.no_calibration, diags)) return report(diags);
  if (f.search) return run_search(g, f, j, gpu_range, *resolved, diags);
  report(diags);  // notes
  if (stack) {
    if (j.contains("optimizer_impl") && resolved->plan.optimizer_impl == wl::OptimizerImpl::fused)
      diags.error("", where("optimizer_impl"),
                  "the stack's baseline runs PyTorch's unfused optimizer (foreach or for-loop); the fused one is its "
                  "fused-adam step");
    if (diags.has_errors()) return report(diags);
    return run_train_stack(g, *resolved, *stack, f.loader_sample_ms,
                           j.contains("optimizer_impl") ? resolved->plan.optimizer_impl : wl::OptimizerImpl::foreach);
  }
  return run_single(g, s, *resolved, timeline, app::text_loader(resolved->sys, f.loader_sample_ms, "--loader-sample-ms"),
                    int(f.loader_workers.value_or(0)));
}

}  // namespace

void register_train(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<TrainFlags>();
  auto* c = app.add_subcommand("train", "training step time, MFU, memory, communication, time to train and cost");
  c->add_option("--scenario", f->scenario, "scenario JSON (keys of docs/scenario.md); flags override it");
  // One option per key of the training field table; --gpus also takes a range with --search.
  f->keys.add(*c, wl_io::training_fields(),
              {{"gpus", [&](const wl_io::ScenarioField& k) {
                  c->add_option(k.flag(), f->gpus,
                                k.help + "; with --search also a range: A..B (A, 2A, 4A, ... up to B) or A..B:STEP");
                }}});
  c->add_option("--stack", f->stack,
                "optimisation stack: apply these in order from a PyTorch fp32 eager baseline and show each step's time, "
                "memory, cost and speed-up (amp, fp8, flash, fused-adam, compile, workers=N, overlap, recompute[=full], "
                "cuda-graphs)");
  c->add_option("--loader-sample-ms", f->loader_sample_ms,
                "with --stack: CPU milliseconds to produce one sample (read, tokenise, collate) for the input pipeline");
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation tree");
  c->add_flag("--no-calibration", f->no_calibration,
              "ignore data/calibration/<gpu>/profile.json: use the built-in efficiency defaults");
  c->add_flag("--search", f->search,
              "search every valid layout (TP, PP, DP, CP, EP, virtual stages, micro-batch, recompute, ZeRO, SP); layout "
              "flags that are given stay fixed");
  c->add_option("--top", f->top, "with --search: how many layouts to list (default 10)")->check(CLI::Range(1, 1000));
  c->add_option("--rank-by", f->rank_by, "with --search: time (default), cost or tokens-per-usd")
      ->check(CLI::IsMember({"time", "cost", "tokens-per-usd"}));
  c->add_option("--search-csv", f->search_csv, "with --search: write every evaluated layout to this CSV file");
  c->add_option("--deadline-days", f->deadline_days,
                "with --search and --tokens: only layouts that train the tokens within this many days rank (by cost "
                "unless --rank-by says otherwise)")
      ->check(CLI::PositiveNumber);
  c->add_option("--threads", f->threads, "with --search: worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  c->add_option("--sweep", f->sweep,
                "vary a scenario key over KEY=A..B (doubling), KEY=A..B:STEP or KEY=V1,V2,...; repeat for a grid: one CSV "
                "row (JSON with --format json) per point");
  c->add_option("--timeline", f->timeline,
                "print the step's timeline instead of the report: a Gantt chart per pipeline stage and stream (text, "
                "svg or json)");
  c->add_option("--memory-timeline", f->memory_timeline,
                "print the allocator's bytes over the step per pipeline stage instead of the report (text, svg or "
                "json)");
  c->add_option("--megatron-args", f->megatron_args,
                "a Megatron-LM command line or launch script (FILE, or - for stdin) read into this plan; Megatron-LM's "
                "own flags (--tensor-model-parallel-size 8 ...) are also accepted here directly (docs/cli.md)");
  // Megatron-LM flags arrive as CLI11's extras; megatron_args.cpp checks every name against Megatron-LM's parser.
  // They must stay with train rather than fall through to the top level (which refuses them), so --data-dir, the one
  // top-level option, is repeated here.
  c->allow_extras();
  c->fallthrough(false);
  c->add_option("--data-dir", g.data_dir, "data directory (as before the subcommand)")->group("");
  c->add_option("--cancel-after", f->cancel_after, "test hook: act as if Ctrl-C came after this many layouts")
      ->group("");
  auto v = std::make_shared<VisionFlags>();
  add_vision_options(*c, *v, VisionCommand::train);
  c->callback([&g, f, v, c, &rc] {
    // A vision model (data/models/vision) prices its own training step; a transformer the training model below.
    if (auto vrc = run_vision_if_named(g, *c, *v, VisionCommand::train)) {
      rc = *vrc;
      return;
    }
    f->megatron_typed = c->remaining();
    f->loader_workers = v->loader_workers;  // one flag: a vision model's decode workers, a transformer's loader lane
    rc = run_train(g, *f);
  });
}

}  // namespace gpuplan::cli
