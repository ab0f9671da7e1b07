#pragma once
// What `gpuplan serve` and `gpuplan simulate` share: serve's flags beyond the memory ones (serving_memory_flags.hpp), their
// registration, and the resolution of scenario file + flags into a ResolvedServing (one path for both commands).
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common.hpp"
#include "gpuplan/app/resolve.hpp"
#include "serving_memory_flags.hpp"

namespace gpuplan::cli {

struct ServeFlags {
  std::string scenario;
  /// The serving scenario already read from the file `scenario`, at `scenario_pointer` ("/serving" of an autoscale
  /// file): used instead of reading `scenario` as a whole serving scenario; diagnostics point into the file there.
  std::optional<nlohmann::json> scenario_json;
  std::string scenario_pointer;
  std::vector<std::string> sweep;
  std::string node, cluster;
  long long input_tokens = 1024, output_tokens = 256;
  std::optional<long long> images_per_request;
  std::optional<long long> batch;
  std::optional<double> rate;
  std::optional<long long> concurrency;
  std::optional<double> think_time_s;
  std::optional<double> ttft_ms, itl_ms;
  double percentile = 99.0;
  std::optional<std::string> compute;
  std::optional<double> price;
  std::optional<double> step_overhead_ms, kernel_overhead_us, cpu_per_kernel_us;
  std::optional<int> ep;
  std::optional<long long> attention_dp;
  std::optional<std::string> prefill_gpu, decode_gpu;
  std::optional<long long> prefill_attention_dp, decode_attention_dp;
  std::optional<double> moe_imbalance;
  bool disaggregated = false;
  std::optional<double> spec_acceptance;
  std::optional<long long> spec_tokens;
  std::optional<std::string> draft_model;
  std::optional<double> draft_ms;
  std::optional<std::string> input_dist, output_dist;
  std::optional<double> prefix_hit_rate;
  bool no_calibration = false;
  /// A whole `vllm serve ...` / `python -m sglang.launch_server ...` line (TEXT, @FILE or - for stdin) and the vLLM or
  /// SGLang spellings typed among gpuplan's flags (CLI11's extras): engine_args.hpp.
  std::optional<std::string> vllm_args, sglang_args;
  std::vector<std::string> engine_typed;
};

/// Registers serve's options on `c`; `planner` false leaves out what only the planner reads (SLA, sweeps, batch,
/// closed loop, price, disaggregation, speculative decoding, length distributions).
void add_serve_options(CLI::App& c, ServingFlags& f, ServeFlags& s, bool planner);

/// Lets `c` take vLLM's and SGLang's spellings among its own flags (as CLI11's extras, which the callback copies into
/// ServeFlags::engine_typed); `data_dir` is the top-level --data-dir, repeated here because extras stay with `c`.
void accept_engine_spellings(CLI::App& c, std::string& data_dir);

/// What a resolved serving scenario points into (the hardware database holds the GPU and node the system names):
/// keep it alive as long as the ResolvedServing.
struct ServeContext {
  std::string data_dir;
  std::optional<hw::HardwareDb> db;
};

/// Reads --scenario, overlays the flags given on `cmd`, decodes and resolves it (model library, hardware,
/// calibration); diagnostics (errors and notes) go to `diags`. `ctx` receives the data directory and the database, `where` (if
/// given) the locator of scenario keys (the flag or file pointer each came from).
std::optional<ResolvedServing> resolve_serve_command(const GlobalOptions& g, const CLI::App& cmd, const ServingFlags& f,
                                                     const ServeFlags& s, Diagnostics& diags, ServeContext& ctx,
                                                     KeyLocator* where = nullptr);

}  // namespace gpuplan::cli
