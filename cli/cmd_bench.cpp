// `gpuplan bench`: speed of the layout search (docs/search.md). For each GPU count it measures the wall time of a
// full `train --search` (enumeration, evaluation, ranking; fresh caches) on one thread and on all threads, and the
// warm-cache evaluation rate of FastTrainingEvaluator alone. Median of --repeat runs.
#include <algorithm>
#include <chrono>
#include <ctime>
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
#include "gpuplan/app/resolve.hpp"

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

int run_bench(const GlobalOptions& g, const BenchFlags& f) {
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  auto db = hw_io::load_hardware_db(*dir);
  if (!db.ok()) return report(db.diagnostics());
  auto lib = wl_io::load_model_library(*dir);
  if (!lib.ok()) return report(lib.diagnostics());
  auto m = wl_io::resolve_model(*lib, f.model);
  if (!m.ok()) return report(m.diagnostics());
  auto where = [](const std::string& key) { return "--" + key; };
  model::TrainingSystem sys;
  if (!resolve_hardware(f.gpu, "", "", *db, where, diags, sys)) return report(diags);
  if (!load_calibration(*dir, sys, f.no_calibration, diags)) return report(diags);
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
  add_format_option(*c, g);
  c->callback([&g, f, c, &rc] {
    if (f->simulate > 0 && c->count("--model") == 0) f->model = "llama-3.1-8b";
    rc = run_bench(g, *f);
  });
}

}  // namespace gpuplan::cli
