// `gpuplan train`: step time, throughput, MFU, memory, communication, time to train and cost for one plan. This file
// declares its options, checks the flags that combine, builds the scenario and dispatches: one plan's report
// (train_output.cpp), --search and --sweep (train_search.cpp), --stack (train_stack.cpp).
#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/app/input_pipeline.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "megatron_args.hpp"
#include "scenario_flags.hpp"
#include "train_cmd.hpp"
#include "train_stack.hpp"
#include "vision_cmd.hpp"

namespace gpuplan::cli {
namespace {

using namespace train_cmd;

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
    // --gpus N (set into j below) sizes what the Megatron flags derive from the GPU count (the optimizer instances).
    std::optional<long long> typed_gpus;
    if (long long n = 0; f.gpus && !f.search) {
      const auto* e = f.gpus->data() + f.gpus->size();
      auto [p, ec] = std::from_chars(f.gpus->data(), e, n);
      if (ec == std::errc() && p == e) typed_gpus = n;
    }
    megatron = megatron_overlay(*dir, f.megatron_args, f.megatron_typed, j, origin, diags, typed_gpus);
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
  const auto ws = app::load_workspace(*dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  auto where = [&](const std::string& key) {
    auto it = origin.find(key);
    if (it != origin.end()) return it->second;
    return j.contains(key) ? file + ": /" + key : "--" + key;
  };
  auto resolved = resolve_training(s, j.contains("global_batch"), db, lib, where, diags);
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
    // Megatron-LM's --recompute-modules has gpuplan's spelling. Typed beside Megatron's --recompute-granularity or
    // --recompute-activations it is Megatron's: its vocabulary (core_attn, ...) and its rule (the attention core is
    // recomputed only when core_attn is named), which the Megatron mapping applies; so it goes there with them.
    const auto& typed = f->megatron_typed;
    if (std::find_if(typed.begin(), typed.end(), [](const std::string& w) {
          return w == "--recompute-granularity" || w.rfind("--recompute-granularity=", 0) == 0 ||
                 w == "--recompute-activations";
        }) != typed.end()) {
      if (auto mods = f->keys.take_list("recompute_modules"); !mods.empty()) {
        f->megatron_typed.emplace_back("--recompute-modules");
        f->megatron_typed.insert(f->megatron_typed.end(), mods.begin(), mods.end());
      }
    }
    f->loader_workers = v->loader_workers;  // one flag: a vision model's decode workers, a transformer's loader lane
    rc = run_train(g, *f);
  });
}

}  // namespace gpuplan::cli
