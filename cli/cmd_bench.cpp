// `gpuplan bench`: speed of the layout search (docs/search.md). For each GPU count it measures the wall time of a
// full `train --search` (enumeration, evaluation, ranking; fresh caches) on one thread and on all threads, and the
// warm-cache evaluation rate of FastTrainingEvaluator alone. Median of --repeat runs. `--gui-recompute` times instead
// what the GUI's Training page recomputes on an edit, through the application layer (docs/gui.md); `--simulate` the
// serving simulator.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <map>
#include <time.h>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/search.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/simulate.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/app/input_pipeline.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/app/studies.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;

struct BenchFlags {
  std::string model = "gpt3-175b", gpu = "h100";
  std::vector<long long> gpus{1024, 4096};
  long long global_batch = 1536, seq = 2048;
  long long threads = 0, repeat = 5;
  bool no_calibration = false;
  long long simulate = 0;  ///< > 0: benchmark the serving simulator on this many requests instead of the search
  double rate = 10;
  bool gui_recompute = false;          ///< time the GUI's recompute of a training scenario instead of the search
  std::vector<std::string> scenarios;  ///< --gui-recompute: training scenario files (default: two, below)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// "AMD EPYC 9554 64-Core Processor" from /proc/cpuinfo, or "" where there is none.
std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "";
}

/// `bench --simulate N`: simulated requests per CPU-second of `simulate_serving` on one thread (one replica at TP 1 of the
/// GPU, Poisson arrivals at --rate, fixed 1024/256 and lognormal lengths of the same means), median of --repeat runs.
/// The arrivals are generated before the clock starts; the memo of iteration costs starts empty in every run.
int run_simulate_bench(const GlobalOptions& g, const BenchFlags& f, const wl::TransformerArch& arch,
                       const model::TrainingSystem& sys) {
  using Clock = std::chrono::steady_clock;
  model::ServingMemoryPlan mp;
  mp.context = 1024 + 256;
  const auto mem = model::serving_memory(arch, model::parameter_counts(arch, Explain::off), *sys.gpu, mp, Explain::off);
  model::SimOptions so;
  so.block_size = mem.plan.block_size;
  so.kv_blocks = mem.kv_token_capacity / std::max<std::int64_t>(1, mem.plan.block_size);
  model::ServingPerfPlan perf;
  if (sys.efficiency) model::use_measured_overheads(perf, *sys.efficiency);
  Table t;
  t.columns = {{"model", "model"},
               {"gpu", "gpu"},
               {"lengths", "lengths"},
               {"requests", "requests", true},
               {"rate", "req/s offered", true},
               {"iterations", "iterations", true},
               {"seconds", "wall (s)", true},
               {"cpu_seconds", "CPU (s)", true},
               {"requests_per_s", "simulated requests/s per core", true},
               {"iterations_per_s", "iterations/s", true}};
  using K = model::LengthSampler::Kind;
  for (bool lognormal : {false, true}) {
    model::ArrivalSpec a;
    a.rate_per_s = f.rate;
    a.count = f.simulate;
    a.input = lognormal ? model::LengthSampler{K::lognormal, 1024, 1024} : model::LengthSampler{K::fixed, 1024, 1024};
    a.output = lognormal ? model::LengthSampler{K::lognormal, 256, 256} : model::LengthSampler{K::fixed, 256, 256};
    const auto reqs = model::generate_requests(a);
    // CPU time of this process (one thread) besides the wall time: the speed per core on a shared machine.
    std::vector<double> times, cpu;
    model::SimResult r;
    for (long long i = 0; i < f.repeat; ++i) {
      const auto t0 = Clock::now();
      const std::clock_t c0 = std::clock();
      r = model::simulate_serving(arch, perf, sys, reqs, so);
      cpu.push_back(double(std::clock() - c0) / CLOCKS_PER_SEC);
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double s = median(cpu), wall = median(times);
    t.rows.push_back({arch.id, sys.gpu->info.id, lognormal ? "lognormal 1024±1024 / 256±256" : "fixed 1024 / 256",
                      std::to_string(r.requests), plain_number(f.rate), std::to_string(r.iterations),
                      fmt::format("{:.4g}", wall), fmt::format("{:.4g}", s),
                      fmt::format("{:.4g}", s > 0 ? double(r.completed) / s : 0.0),
                      fmt::format("{:.4g}", s > 0 ? double(r.iterations) / s : 0.0)});
  }
  const Format fmt_ = parse_format(g.format);
  if (fmt_ == Format::text || fmt_ == Format::md) {
    const std::string cpu = cpu_name();
    out(fmt::format("{}Serving simulator speed (median of {} runs){}machine: {}\n\n", fmt_ == Format::md ? "## " : "",
                    f.repeat, fmt_ == Format::md ? "\n\n" : "\n", cpu.empty() ? "unknown CPU" : cpu));
  }
  out(t.render(fmt_));
  return kExitOk;
}

/// This thread's CPU time in seconds (user + system): the cost of a computation on a machine shared with others.
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// The dense default of `bench --gui-recompute`: GPT-3 175B on 1024 H100 as Megatron-LM trains it (TP 8, PP 8
/// interleaved, DP 16, sequence parallelism), the search bench's batch.
nlohmann::json gui_bench_dense_scenario() {
  return {{"model", "gpt3-175b"}, {"gpu", "h100"},        {"gpus", 1024},         {"tp", 8},
          {"pp", 8},              {"virtual_stages", 2},  {"sequence_parallel", true}, {"micro_batch", 1},
          {"global_batch", 1536}, {"seq", 2048}};
}

/// `bench --gui-recompute`: what the GUI's Training page recomputes on each edit (gui/jobs/training_job.cpp
/// evaluate_training, on its worker thread), stage by stage through the same application-layer and model calls: the
/// scenario decoded and resolved with its calibration (app::resolve_training, app::load_calibration), the estimate
/// with its explain tree (estimate_training, Explain::on), the step timeline (training_timeline with the page's
/// default loader, none), the three memory timelines (one per recompute mode) and the strong-scaling study
/// (app::strong_scaling_study). Left out: the GUI-only collective chart and roofline (gui/jobs) and the Qt models
/// that display the results. CPU time of this thread and wall time, median of --repeat runs per stage.
int run_gui_bench(const GlobalOptions& g, const BenchFlags& f, const std::string& dir, const hw::HardwareDb& db,
                  const wl_io::ModelLibrary& lib) {
  struct Input {
    std::string name;
    nlohmann::json scenario;
  };
  std::vector<Input> inputs;
  Diagnostics diags;
  if (f.scenarios.empty()) {
    inputs.push_back({"gpt3-175b 1024 h100 (TP 8, PP 8 v2, SP)", gui_bench_dense_scenario()});
    auto ds = read_training_scenario(dir + "/scenarios/deepseek-v3-h800.json", diags);
    if (!ds) return report(diags);
    inputs.push_back({"scenarios/deepseek-v3-h800.json", std::move(*ds)});
  }
  for (const auto& file : f.scenarios) {
    auto j = read_training_scenario(file, diags);
    if (!j) return report(diags);
    inputs.push_back({file, std::move(*j)});
  }
  Table t;
  t.columns = {{"scenario", "scenario"},
               {"stage", "stage"},
               {"cpu_ms", "CPU (ms)", true},
               {"wall_ms", "wall (ms)", true}};
  using Clock = std::chrono::steady_clock;
  for (const auto& in : inputs) {
    std::optional<app::ResolvedTraining> r;
    Diagnostics local;
    // Stage by stage, each --repeat times; the stages after the first use the last resolution.
    const std::vector<std::pair<std::string, std::function<void()>>> stages{
        {"decode, resolve, calibration",
         [&] {
           Diagnostics d;
           std::map<std::string, std::string> origin;
           for (const auto& [k, v] : in.scenario.items()) origin[k] = wl_io::training_key_label(k);
           auto decoded = wl_io::decode_training_scenario(in.scenario, "", origin);
           if (!decoded.ok()) {
             local.append(decoded.diagnostics());
             return;
           }
           auto where = [](const std::string& k) { return wl_io::training_key_label(k); };
           r = app::resolve_training(decoded.value(), in.scenario.contains("global_batch"), db, lib, where, d);
           if (r && !app::load_calibration(dir, r->sys, f.no_calibration, d)) r.reset();
           if (!r) local.append(d);
         }},
        {"estimate + explain tree",
         [&] { (void)model::estimate_training(r->arch, r->plan, r->sys, Explain::on); }},
        {"step timeline",
         [&] {
           (void)model::training_timeline(r->arch, r->plan, r->sys,
                                          app::text_loader(r->sys, 0.0, "Loader ms/sample"), 0);
         }},
        {"memory timelines (3 recompute modes)",
         [&] {
           for (auto mode : {wl::Recompute::none, wl::Recompute::selective, wl::Recompute::full}) {
             wl::TrainingPlan p = r->plan;
             p.recompute = mode;
             (void)model::training_memory_timeline(r->arch, p, r->sys);
           }
         }},
        {"strong-scaling study",
         [&] { (void)app::strong_scaling_study(r->arch, r->plan, r->sys, r->sys.gpu->info.id); }}};
    double total_cpu = 0, total_wall = 0;
    for (const auto& [stage, run] : stages) {
      std::vector<double> cpu, wall;
      for (long long i = 0; i < f.repeat; ++i) {
        const auto t0 = Clock::now();
        const double c0 = thread_cpu_s();
        run();
        cpu.push_back(thread_cpu_s() - c0);
        wall.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        if (!r) return report(local);  // the scenario did not resolve: its diagnostics
        if (!r->pre.ok) {
          for (const auto& why : r->pre.reasons) local.error("", in.name, why);
          return report(local);
        }
      }
      const double c = median(cpu), w = median(wall);
      total_cpu += c;
      total_wall += w;
      t.rows.push_back({in.name, stage, fmt::format("{:.4g}", 1e3 * c), fmt::format("{:.4g}", 1e3 * w)});
    }
    t.rows.push_back({in.name, "total", fmt::format("{:.4g}", 1e3 * total_cpu), fmt::format("{:.4g}", 1e3 * total_wall)});
  }
  const Format fmt_ = parse_format(g.format);
  if (fmt_ == Format::text || fmt_ == Format::md) {
    const std::string cpu = cpu_name();
    out(fmt::format("{}GUI recompute on an edit, Training page (median of {} runs){}machine: {}\n\n",
                    fmt_ == Format::md ? "## " : "", f.repeat, fmt_ == Format::md ? "\n\n" : "\n",
                    cpu.empty() ? "unknown CPU" : cpu));
  }
  out(t.render(fmt_));
  return kExitOk;
}

int run_bench(const GlobalOptions& g, const BenchFlags& f) {
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const std::string& dir = ws->data_dir;
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  if (f.gui_recompute) return run_gui_bench(g, f, dir, db, lib);
  auto m = wl_io::resolve_model(lib, f.model);
  if (!m.ok()) return report(m.diagnostics());
  auto where = [](const std::string& key) { return "--" + key; };
  model::TrainingSystem sys;
  if (!resolve_hardware(f.gpu, "", "", db, where, diags, sys)) return report(diags);
  if (!load_calibration(dir, sys, f.no_calibration, diags)) return report(diags);
  report(diags);
  const wl::TransformerArch& arch = m->arch;
  if (f.simulate > 0) return run_simulate_bench(g, f, arch, sys);
  wl::TrainingPlan base;
  base.seq_len = f.seq;
  base.global_batch = f.global_batch;
  const unsigned all = f.threads > 0 ? unsigned(f.threads) : std::max(1u, std::thread::hardware_concurrency());
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };

  Table t;
  t.columns = {{"model", "model"},
               {"gpu", "gpu"},
               {"gpus", "GPUs", true},
               {"layouts", "layouts", true},
               {"search_1_thread_s", "search, 1 thread (s)", true},
               {"layouts_per_s_1_thread", "layouts/s, 1 thread", true},
               {"threads", "threads", true},
               {"search_s", "search, all threads (s)", true},
               {"layouts_per_s_per_thread", "layouts/s/thread", true},
               {"warm_layouts_per_s", "warm evaluator layouts/s", true},
               {"best", "best layout"}};
  for (long long n : f.gpus) {
    model::SearchSpace space;
    space.gpus = {n};
    const std::vector<model::Layout> layouts = model::enumerate_layouts(arch, base, space, &sys);
    auto full_search = [&](unsigned threads, model::SearchResult& last) {
      std::vector<double> times;
      for (long long r = 0; r < f.repeat; ++r) {
        model::SearchOptions o;
        o.threads = threads;
        const auto t0 = Clock::now();
        last = model::search_training(arch, base, sys, space, o);
        times.push_back(seconds(t0, Clock::now()));
      }
      return median(times);
    };
    model::SearchResult r1, rn;
    const double s1 = full_search(1, r1);
    const double sn = full_search(all, rn);
    // The evaluator alone with warm caches: one pass to fill them, then timed passes.
    model::FastTrainingEvaluator ev(arch, base, sys);
    double sink = 0;
    for (const auto& l : layouts) sink += ev.evaluate(l).step_time.raw();
    std::vector<double> warm;
    for (long long r = 0; r < f.repeat; ++r) {
      const auto t0 = Clock::now();
      for (const auto& l : layouts) sink += ev.evaluate(l).step_time.raw();
      warm.push_back(seconds(t0, Clock::now()));
    }
    const double w = median(warm);
    const double count = double(layouts.size());
    t.rows.push_back({arch.id, sys.gpu->info.id, std::to_string(n), std::to_string(layouts.size()),
                      fmt::format("{:.6g}", s1), fmt::format("{:.6g}", s1 > 0 ? count / s1 : 0.0),
                      std::to_string(rn.threads), fmt::format("{:.6g}", sn),
                      fmt::format("{:.6g}", sn > 0 ? count / sn / rn.threads : 0.0),
                      fmt::format("{:.6g}", w > 0 && sink != 0 ? count / w : 0.0),
                      rn.top.empty() ? std::string("none fits") : model::describe(rn.top.front().layout)});
  }
  const Format fmt_ = parse_format(g.format);
  if (fmt_ == Format::text || fmt_ == Format::md) {
    const std::string cpu = cpu_name();
    out(fmt::format("{}Layout search speed: {}, global batch {} × {} tokens (median of {} runs)\n{}machine: {}{} "
                    "hardware threads\n\n",
                    fmt_ == Format::md ? "## " : "", arch.name.empty() ? arch.id : arch.name, f.global_batch, f.seq,
                    f.repeat, fmt_ == Format::md ? "\n" : "", cpu.empty() ? "" : cpu + ", ",
                    std::thread::hardware_concurrency()));
  }
  out(t.render(fmt_));
  return kExitOk;
}

}  // namespace

void register_bench(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<BenchFlags>();
  auto* c = app.add_subcommand("bench", "speed of the layout search: full-search wall time and layouts per second");
  c->add_option("--model,-m", f->model, "model (default gpt3-175b)");
  c->add_option("--gpu", f->gpu, "GPU (default h100)");
  c->add_option("--gpus", f->gpus, "GPU counts, one search each (default 1024,4096)")
      ->delimiter(',')
      ->check(CLI::Range(1LL, 10'000'000LL));
  c->add_option("--global-batch", f->global_batch, "sequences per step (default 1536)")
      ->check(CLI::Range(1LL, 1'000'000'000LL));
  c->add_option("--seq", f->seq, "sequence length (default 2048)")->check(CLI::Range(1LL, 100'000'000LL));
  c->add_option("--threads", f->threads, "threads of the multi-threaded search (default: all cores)")
      ->check(CLI::Range(0, 1024));
  c->add_option("--repeat", f->repeat, "runs per measurement; the median is reported (default 5)")
      ->check(CLI::Range(1, 1000));
  c->add_flag("--no-calibration", f->no_calibration, "ignore data/calibration/<gpu>/profile.json");
  c->add_option("--simulate", f->simulate,
                "benchmark the serving simulator on this many requests instead of the search (model default "
                "llama-3.1-8b)")
      ->check(CLI::Range(1LL, 100'000'000LL));
  c->add_option("--rate", f->rate, "bench --simulate: offered requests per second (default 10)")
      ->check(CLI::Range(1e-6, 1e9));
  c->add_flag("--gui-recompute", f->gui_recompute,
              "time what the GUI's Training page recomputes on an edit (resolve, estimate with its explain tree, "
              "timelines, scaling study) instead of the search");
  c->add_option("--scenario", f->scenarios,
                "bench --gui-recompute: a training scenario file (repeatable; default GPT-3 175B on 1024 H100 and "
                "scenarios/deepseek-v3-h800.json)");
  add_format_option(*c, g);
  c->callback([&g, f, c, &rc] {
    if (f->simulate > 0 && c->count("--model") == 0) f->model = "llama-3.1-8b";
    rc = run_bench(g, *f);
  });
}

}  // namespace gpuplan::cli
