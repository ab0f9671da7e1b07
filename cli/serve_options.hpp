#pragma once
// What `gpuplan serve`, simulate, compress and autoscale share: their serving flags (generated from the serving field
// table, wl_io::serving_fields) and the resolution of scenario file + flags into a ResolvedServing (one path for all).
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/app/serving_flags.hpp"
#include "scenario_flags.hpp"

namespace gpuplan::cli {

struct ServeFlags {
  std::string scenario;
  /// The serving scenario already read from the file `scenario`, at `scenario_pointer` ("/serving" of an autoscale
  /// file): used instead of reading `scenario` as a whole serving scenario; diagnostics point into the file there.
  std::optional<nlohmann::json> scenario_json;
  std::string scenario_pointer;
  std::vector<std::string> sweep;
  /// One flag per key of the serving field table (wl_io::serving_fields) that the command takes; the given ones go over
  /// the scenario file's keys.
  ScenarioFlags keys;
  bool no_calibration = false;
  /// A whole `vllm serve ...` / `python -m sglang.launch_server ...` line (TEXT, @FILE or - for stdin) and the vLLM or
  /// SGLang spellings typed among gpuplan's flags (CLI11's extras): engine_args.hpp.
  std::optional<std::string> vllm_args, sglang_args;
  std::vector<std::string> engine_typed;
};

/// Registers serve's options on `c`: one per key of the serving field table, then the command's own; `planner` false
/// leaves out the keys only the planner reads (the table's planner_only: SLA, batch, closed loop, price,
/// disaggregation, speculative decoding, length distributions) and the sweeps.
void add_serve_options(CLI::App& c, ServeFlags& s, bool planner);

/// Adds the flag of one planner key to a command that leaves the planner's keys out, with the command's own help
/// (simulate's --rate: the arrival rate of its synthetic requests).
void add_serve_key(CLI::App& c, ServeFlags& s, const std::string& key, const std::string& help);

/// Lets `c` take vLLM's and SGLang's spellings among its own flags (as CLI11's extras, which the callback copies into
/// ServeFlags::engine_typed); `data_dir` is the top-level --data-dir, repeated here because extras stay with `c`.
void accept_engine_spellings(CLI::App& c, std::string& data_dir);

/// What a resolved serving scenario points into (the hardware database holds the GPU and node the system names):
/// keep it alive as long as the ResolvedServing.
struct ServeContext {
  std::string data_dir;
  std::optional<hw::HardwareDb> db;
};

/// Reads --scenario, overlays the flags given (`s.keys`, then the engines' spellings on `cmd`), decodes and resolves it (model library, hardware,
/// calibration); diagnostics (errors and notes) go to `diags`. `ctx` receives the data directory and the database, `where` (if
/// given) the locator of scenario keys (the flag or file pointer each came from).
std::optional<ResolvedServing> resolve_serve_command(const GlobalOptions& g, const CLI::App& cmd, const ServeFlags& s,
                                                     Diagnostics& diags, ServeContext& ctx, KeyLocator* where = nullptr);

}  // namespace gpuplan::cli
