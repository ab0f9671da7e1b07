#pragma once
// The serving memory knobs of `gpuplan kv`, `gpuplan serve` and the GUI's Serving tab: model, GPU, layout, KV and
// weight formats and the serving engine's memory knobs, typed by the serving scenario decoder, and their translation
// into a
// model::ServingMemoryPlan (diagnostics name the flag or the key). The CLI registers them as flags
// (generated from the serving field table: cli/serve_options.hpp, cli/cmd_kv.cpp).
#include <functional>
#include <optional>
#include <string>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

namespace gpuplan::app {

struct ServingFlags {
  std::string model;
  std::string gpu = "h100-sxm5-80gb";
  int tp = 1, pp = 1;
  std::optional<long long> gpus;
  model::StoreDtype kv_dtype = model::StoreDtype::bf16;
  std::optional<model::KvScaleGranularity> kv_scales;
  std::optional<double> kv_scale_bytes;
  model::StoreDtype weight_dtype = model::StoreDtype::bf16;
  std::optional<long long> weight_group_size;
  std::optional<double> params;
  bool no_scale_overhead = false;
  long long context = 4096;
  long long concurrency = 1;
  std::optional<long long> block_size;
  long long prefix_tokens = 0;
  std::optional<model::MemoryEngine> engine;
  std::optional<double> gpu_memory_utilization, mem_fraction_static, usable_fraction;
  std::optional<bool> cudagraph_in_budget;
  bool enforce_eager = false;
  std::optional<double> cuda_graph_gib, activation_gib;
  std::optional<long long> max_num_batched_tokens, max_num_seqs;
  std::optional<wl_io::RuntimeOverheads> overheads;
  std::optional<model::CapacityBasis> capacity;
  std::optional<std::string> gpu_count;  ///< kv's own flag, "layout" or "pooled" (CLI11 checks the choice)
  std::optional<double> paging_overhead;
  bool simple = false;
};

/// Copies the memory keys of a decoded serving scenario (model, layout, KV and weight formats, the engine's memory
/// knobs) into `f`, each absent key as its documented default; the GPU is the caller's (resolved or as given).
void set_memory_keys(const wl_io::ServingScenario& s, ServingFlags& f);

/// Where a scenario key came from, for diagnostics: "--tp" for a flag, "plan.json: /serving/0/scenario/tp" for a file.
using KeyLocator = std::function<std::string(const std::string&)>;

/// Builds the memory plan from the flags; diagnostics name the flag, or with `where` the key's location.
std::optional<model::ServingMemoryPlan> make_memory_plan(const ServingFlags& f, const hw::HardwareDb& db,
                                                         const hw::GpuSpec& gpu, Diagnostics& diags,
                                                         const KeyLocator& where = {});

}  // namespace gpuplan::app
