// `gpuplan calibrate`: fit raw benchmark samples into a profile (data/calibration/<gpu-id>/profile.json) that the
// training and serving models use for that GPU; show a profile against the built-in defaults.
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/app/file_write.hpp"
#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;

struct FitFlags {
  std::vector<std::string> samples;
  std::optional<std::string> gpu;
  std::optional<std::string> out;
  bool dry_run = false;
};

std::string pct(double x) { return fmt::format("{:.1f}%", x * 100.0); }

std::vector<Section> profile_sections(const calib::Profile& p, const hw::GpuSpec& gpu) {
  const auto builtin = model::default_efficiency(gpu);
  std::vector<Section> sec;
  Section head{fmt::format("Calibration profile of {} ({})", p.gpu_id, p.gpu_name.empty() ? "?" : p.gpu_name), {}};
  std::string files;
  for (const auto& f : p.samples) files += (files.empty() ? "" : ", ") + f;
  head.rows = {{"samples", files}, {"driver", p.driver.empty() ? "?" : p.driver}};
  sec.push_back(head);
  Section fits{"Fitted parameters (measured vs built-in default)", {}};
  for (const auto& g : p.gemm) {
    const double def = g.dtype == "fp8"    ? model::gemm_ceiling(builtin, hw::Precision::fp8)
                       : g.dtype == "fp16" ? model::gemm_ceiling(builtin, hw::Precision::fp16)
                                           : builtin.gemm_bf16;
    fits.rows.emplace_back(
        fmt::format("{} GEMM ceiling η", g.dtype),
        fmt::format("{:.3f} (built-in {:.3f}); t₀ {}; fit over {} compute-bound shapes: median {} max {}; whole "
                    "roofline over {} shapes: median {} max {}",
                    g.ceiling, def, u::format(g.t0), g.fit.points, pct(g.fit.median_rel_error), pct(g.fit.max_rel_error),
                    g.all.points, pct(g.all.median_rel_error), pct(g.all.max_rel_error)));
  }
  if (p.hbm)
    fits.rows.emplace_back("HBM streaming η",
                           fmt::format("{:.3f} of {} (built-in {:.3f}); t₀ {}; {} points, median {} max {}",
                                       p.hbm->efficiency, u::format(gpu.memory.bandwidth), builtin.hbm,
                                       u::format(p.hbm->t0), p.hbm->fit.points, pct(p.hbm->fit.median_rel_error),
                                       pct(p.hbm->fit.max_rel_error)));
  if (p.gemm_memory)
    fits.rows.emplace_back("memory-bound GEMM streaming η",
                           fmt::format("{:.3f} of {}; t₀ {}; {} points, median {} max {}", p.gemm_memory->efficiency,
                                       u::format(gpu.memory.bandwidth), u::format(p.gemm_memory->t0),
                                       p.gemm_memory->fit.points, pct(p.gemm_memory->fit.median_rel_error),
                                       pct(p.gemm_memory->fit.max_rel_error)));
  if (p.launch) fits.rows.emplace_back("eager kernel launch", u::format(*p.launch));
  if (p.graph_kernel) fits.rows.emplace_back("CUDA-graph replay per kernel", u::format(*p.graph_kernel));
  for (const auto& l : p.links)
    fits.rows.emplace_back(
        fmt::format("NCCL {} on {} GPUs", l.op, l.ranks),
        fmt::format("bus {} (η {:.3f} of the link), empty call {}, step α {}; {} points, median {} max {}",
                    u::format(l.bus_bandwidth), l.bus_efficiency, u::format(l.intercept), u::format(l.step_latency),
                    l.fit.points, pct(l.fit.median_rel_error), pct(l.fit.max_rel_error)));
  if (p.sustained_ratio)
    fits.rows.emplace_back("sustained GEMM", fmt::format("×{:.3f} of the swept bf16 8192³ GEMM after tens of seconds at "
                                                         "it (power cap; built-in: ×1); applied to training",
                                                         *p.sustained_ratio));
  if (p.sustained_ratio_fp8)
    fits.rows.emplace_back("sustained fp8 GEMM", fmt::format("×{:.3f} of the swept fp8 8192³ GEMM after tens of seconds "
                                                             "at it (power cap; without it: the bf16 ratio); applied "
                                                             "to training",
                                                             *p.sustained_ratio_fp8));
  if (p.overlap)
    fits.rows.emplace_back(
        "collective beside compute",
        fmt::format("GEMM throughput lost {} (range {}–{}; built-in: {:.1f}% = 16 channels' share of {} SMs); each "
                    "call waits {:.2f} compute-kernel durations (range {:.2f}–{:.2f}; built-in: 0); medians of {} "
                    "overlap items",
                    pct(p.overlap->compute_loss), pct(p.overlap->compute_loss_min), pct(p.overlap->compute_loss_max),
                    gpu.compute_units > 0 ? 100.0 * std::min(1.0, 16.0 / gpu.compute_units) : 0.0, gpu.compute_units,
                    p.overlap->wait_kernels, p.overlap->wait_kernels_min, p.overlap->wait_kernels_max,
                    p.overlap->points));
  sec.push_back(fits);
  if (!p.notes.empty()) {
    Section n{"Notes", {}};
    for (const auto& x : p.notes) n.rows.emplace_back("-", x);
    sec.push_back(n);
  }
  return sec;
}

int run_fit(const GlobalOptions& g, const FitFlags& f) {
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir, {.hardware = true, .models = false});
  if (!ws.ok()) return report(ws.diagnostics());
  const std::string& dir = ws->data_dir;
  const hw::HardwareDb& db = ws->db;
  std::vector<calib::Samples> samples;
  for (const auto& path : f.samples) {
    auto s = calib::read_samples(path);
    if (!s.ok()) {
      for (const auto& d : s.diagnostics().items()) diags.add(d);
      continue;
    }
    samples.push_back(s.value());
  }
  if (diags.has_errors()) return report(diags);
  // The GPU: --gpu, else the name the driver gave (resolved through the database's names and aliases).
  std::string want = f.gpu.value_or(samples.front().gpu_name);
  const hw::GpuSpec* gpu = db.find_gpu(want);
  if (gpu == nullptr) {
    diags.error("", f.gpu ? "--gpu" : samples.front().file + ": /device/name",
                fmt::format("no GPU '{}' in the database{}{}", want, did_you_mean(want, db.gpu_names()),
                            f.gpu ? "" : "; give --gpu ID"));
    return report(diags);
  }
  for (const auto& s : samples)
    if (!s.gpu_name.empty() && db.find_gpu(s.gpu_name) != nullptr && db.find_gpu(s.gpu_name) != gpu)
      diags.error(s.file, "/device/name",
                  fmt::format("taken on {} ({}), not on {}", s.gpu_name, db.find_gpu(s.gpu_name)->info.id, gpu->info.id));
  if (diags.has_errors()) return report(diags);
  auto p = calib::fit_profile(samples, *gpu, db);
  for (const auto& d : p.diagnostics().items()) diags.add(d);
  if (!p.ok()) return report(diags);
  const std::string out_path = f.out.value_or(dir + "/calibration/" + gpu->info.id + "/profile.json");
  const std::string text = calib::profile_json(*p);
  if (!f.dry_run) {
    if (!app::write_file_atomically(out_path, text, diags, f.samples)) return report(diags);
    diags.note(out_path, "", "profile written");
  }
  report(diags);
  const Format fmt_ = parse_format(g.format);
  if (fmt_ == Format::json) {
    out(text);
  } else {
    out(render_sections(profile_sections(*p, *gpu), fmt_));
  }
  return kExitOk;
}

int run_show(const GlobalOptions& g, const std::string& id) {
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir, {.hardware = true, .models = false});
  if (!ws.ok()) return report(ws.diagnostics());
  const std::string& dir = ws->data_dir;
  const hw::HardwareDb& db = ws->db;
  const hw::GpuSpec* gpu = db.find_gpu(id);
  if (gpu == nullptr) {
    diags.error("", "GPU", fmt::format("unknown GPU '{}'{}", id, did_you_mean(id, db.gpu_names())));
    return report(diags);
  }
  const std::string path = dir + "/calibration/" + gpu->info.id + "/profile.json";
  auto p = calib::read_profile(path);
  if (!p.ok()) {
    for (const auto& d : p.diagnostics().items()) diags.add(d);
    return report(diags);
  }
  const Format fmt_ = parse_format(g.format);
  if (fmt_ == Format::json) out(calib::profile_json(*p));
  else out(render_sections(profile_sections(*p, *gpu), fmt_));
  return kExitOk;
}

struct RunFlags {
  std::optional<std::string> out_dir;
  std::optional<std::string> bench;
  std::optional<std::string> gpus;
  bool no_collectives = false;
  bool quick = false;
  bool no_fit = false;
};

/// Runs a command and returns its standard output (empty on failure).
std::string capture(const std::string& cmd) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), int(buf.size()), pipe.get()) != nullptr) out += buf.data();
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// The benches: --bench, else next to this executable (installed), else the build tree's calibrate/bench/.
std::optional<std::string> find_bench(const std::optional<std::string>& flag) {
  namespace fs = std::filesystem;
  if (flag) return *flag;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  for (const fs::path& p : {exe.parent_path() / "gpuplan-bench", exe.parent_path().parent_path() / "calibrate" / "bench" /
                                                                  "gpuplan-bench"})
    if (fs::exists(p, ec)) return p.string();
  return std::nullopt;
}

int run_run(const GlobalOptions& g, const RunFlags& f) {
  namespace fs = std::filesystem;
  Diagnostics diags;
  const auto ws = app::open_workspace(g.data_dir, {.hardware = true, .models = false});
  if (!ws.ok()) return report(ws.diagnostics());
  const std::string& dir = ws->data_dir;
  const hw::HardwareDb& db = ws->db;
  // --gpus first: a malformed flag is reported before anything about this machine.
  std::vector<int> gpus;
  if (f.gpus) {
    std::string cur;
    for (char c : *f.gpus + ",") {
      if (c == ',') {
        int index = 0;
        const auto [end, err] = std::from_chars(cur.data(), cur.data() + cur.size(), index);
        if (cur.empty() || err != std::errc() || end != cur.data() + cur.size() || index < 0 || index > 1023) {
          diags.error("", "--gpus",
                      fmt::format("'{}' is not a comma-separated list of GPU indices (0 to 1023)", *f.gpus));
          return report(diags);
        }
        gpus.push_back(index);
        cur.clear();
      } else {
        cur += c;
      }
    }
  }
  const auto bench = find_bench(f.bench);
  std::error_code ec;
  if (f.bench && !fs::exists(*f.bench, ec)) {
    diags.error("", "--bench", fmt::format("'{}' does not exist", *f.bench));
    return report(diags);
  }
  if (!bench) {
    diags.error("", "--bench",
                "gpuplan-bench not found next to gpuplan or in the build tree: build with a CUDA compiler "
                "(GPUPLAN_BUILD_BENCHES, on when nvcc is found), give --bench PATH, or run "
                "scripts/calibrate/run_all.sh, which builds it");
    return report(diags);
  }
  // GPUs: --gpus (parsed above), else every GPU nvidia-smi lists.
  if (!f.gpus) {
    const std::string list = capture("nvidia-smi -L 2>/dev/null");
    for (std::size_t pos = 0; (pos = list.find("GPU ", pos)) != std::string::npos; pos += 4)
      if (pos == 0 || list[pos - 1] == '\n') gpus.push_back(int(gpus.size()));
    if (gpus.empty()) {
      diags.error("", "", "no NVIDIA GPU is visible (nvidia-smi -L lists none): calibration runs on the GPU it measures");
      return report(diags);
    }
  }
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::array<char, 32> stamp{};
  std::strftime(stamp.data(), stamp.size(), "%Y%m%dT%H%M%SZ", std::gmtime(&now));
  const fs::path out_dir = f.out_dir.value_or(fs::temp_directory_path() / ("gpuplan-calibration-" + std::string(stamp.data())));
  fs::create_directories(out_dir, ec);
  if (ec) {
    diags.error(out_dir.string(), "--out-dir", "cannot create: " + ec.message());
    return report(diags);
  }
  std::vector<std::string> files;
  int rc = 0;
  for (int i : gpus) {
    const std::string file = (out_dir / fmt::format("samples-gpu{}-{}.json", i, stamp.data())).string();
    const std::string cmd = fmt::format("{} suite --device {} --out {}{}", shell_quote(*bench), i, shell_quote(file),
                                        f.quick ? " --quick" : "");
    std::fprintf(stderr, "calibrate: GPU %d: %s\n", i, cmd.c_str());
    const int r = std::system(cmd.c_str());
    if (r != 0) rc = r;
    if (fs::exists(file, ec)) files.push_back(file);
  }
  if (!f.no_collectives && gpus.size() > 1) {
    const std::string file = (out_dir / fmt::format("samples-collectives-{}gpu-{}.json", gpus.size(), stamp.data())).string();
    const std::string cmd = fmt::format("NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 "
                                        "{} collectives --nranks {} --out {}",
                                        shell_quote(*bench), gpus.size(), shell_quote(file));
    std::fprintf(stderr, "calibrate: collectives: %s\n", cmd.c_str());
    const int r = std::system(cmd.c_str());
    if (r != 0) rc = r;
    if (fs::exists(file, ec)) files.push_back(file);
  }
  if (files.empty()) {
    diags.error(out_dir.string(), "", fmt::format("the benches wrote no samples (exit status {})", rc));
    return report(diags);
  }
  if (rc != 0)
    diags.warning(out_dir.string(), "", fmt::format("a bench exited with status {}; fitting what it wrote", rc));
  if (f.no_fit) {
    diags.note(out_dir.string(), "", fmt::format("{} samples files written; fit them with gpuplan calibrate fit", files.size()));
    return report(diags);
  }
  // Fit one profile per GPU model among the samples (collectives go with the GPU they ran on).
  std::map<std::string, std::vector<calib::Samples>> by_gpu;
  for (const auto& file : files) {
    auto s = calib::read_samples(file);
    if (!s.ok()) {
      for (const auto& d : s.diagnostics().items()) diags.add(d);
      continue;
    }
    const hw::GpuSpec* gpu = db.find_gpu(s->gpu_name);
    if (gpu == nullptr) {
      diags.error(file, "/device/name",
                  fmt::format("'{}' is not in the hardware database: add it under data/hardware/gpus, then run "
                              "gpuplan calibrate fit {} --gpu ID",
                              s->gpu_name, out_dir.string() + "/samples-*.json"));
      continue;
    }
    by_gpu[gpu->info.id].push_back(s.value());
  }
  if (diags.has_errors()) return report(diags);
  const Format fmt_ = parse_format(g.format);
  for (const auto& [id, samples] : by_gpu) {
    const hw::GpuSpec* gpu = db.find_gpu(id);
    auto p = calib::fit_profile(samples, *gpu, db);
    for (const auto& d : p.diagnostics().items()) diags.add(d);
    if (!p.ok()) return report(diags);
    const std::string path = dir + "/calibration/" + id + "/profile.json";
    if (!app::write_file_atomically(path, calib::profile_json(*p), diags)) return report(diags);
    diags.note(path, "", "profile written (the samples stay in " + out_dir.string() + ")");
    out(render_sections(profile_sections(*p, *gpu), fmt_));
  }
  return report(diags);
}

}  // namespace

void register_calibrate(CLI::App& app, GlobalOptions& g, int& rc) {
  auto* c = app.add_subcommand("calibrate", "fit benchmark samples from a real GPU into the profile the model uses");
  c->require_subcommand(1);
  auto f = std::make_shared<FitFlags>();
  auto* fit = c->add_subcommand("fit", "fit samples (calibrate/bench output) into data/calibration/<gpu>/profile.json");
  fit->add_option("samples", f->samples, "samples JSON files (single-GPU suites and collectives)")->required();
  fit->add_option("--gpu", f->gpu, "GPU id (default: the name the samples carry)");
  fit->add_option("--out", f->out, "profile path (default: <data>/calibration/<gpu-id>/profile.json)");
  fit->add_flag("--dry-run", f->dry_run, "fit and print, write nothing");
  add_format_option(*fit, g);
  fit->callback([&g, f, &rc] { rc = run_fit(g, *f); });
  auto rf = std::make_shared<RunFlags>();
  auto* run = c->add_subcommand("run", "run the CUDA benches on this machine's GPUs, then fit and write the profile");
  run->add_option("--out-dir", rf->out_dir, "where the samples go (default: a new folder under the temp directory)");
  run->add_option("--bench", rf->bench, "gpuplan-bench executable (default: next to gpuplan, or the build tree's)");
  run->add_option("--gpus", rf->gpus, "GPU indices, e.g. 0,1 (default: every GPU nvidia-smi lists)");
  run->add_flag("--no-collectives", rf->no_collectives, "skip the NCCL collectives (run on 2+ GPUs by default)");
  run->add_flag("--quick", rf->quick, "short sweeps (a smoke test, not a calibration)");
  run->add_flag("--no-fit", rf->no_fit, "only write the samples");
  add_format_option(*run, g);
  run->callback([&g, rf, &rc] { rc = run_run(g, *rf); });
  auto id = std::make_shared<std::string>();
  auto* show = c->add_subcommand("show", "a GPU's calibration profile against the built-in defaults");
  show->add_option("gpu", *id, "GPU id or alias")->required();
  add_format_option(*show, g);
  show->callback([&g, id, &rc] { rc = run_show(g, *id); });
  register_calibrate_import(*c, g, rc);
}

}  // namespace gpuplan::cli
