#pragma once
// Training scenarios: a JSON object with the keys of `gpuplan train`'s flags (docs/scenario.md), decoded with the
// same strict field table whether it comes from --scenario FILE.json, from flags, or both (flags override the file).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::wl_io {

struct TrainingScenario {
  std::string model;
  std::string gpu, node, cluster;
  std::optional<long long> gpus;
  wl::TrainingPlan plan;
  bool dp_given = false;  ///< false: dp = gpus / (tp·pp·cp), filled in by resolve
  std::optional<double> price_usd_per_hour;
};

const json_io::FieldTable& training_scenario_fields();

/// Decodes a scenario object. `origin_of_key` maps keys that came from flags to the flag name, so that a bad flag
/// value is reported as "--tp: error: ..." and a bad file value as "file.json: /tp: error: ...".
/// `pointer` locates the object inside its file ("/training/0/scenario" in a plan; empty for a scenario file).
Result<TrainingScenario> decode_training_scenario(const json_io::Json& j, const std::string& file,
                                                  const std::map<std::string, std::string>& origin_of_key = {},
                                                  const std::string& pointer = "");

/// The runtime overheads a serving scenario counts (key `overheads`: "default" or "none"): the default set (CUDA
/// context, NCCL, CUDA graphs, activations: model::default_serving_overheads) or none.
enum class RuntimeOverheads { standard, none };

/// Serving scenarios: the keys of `gpuplan serve`'s flags (docs/scenario.md, "Serving scenario keys"), every one
/// optional. The decoder types every value at the edge (dtypes, engines, kernels and capacity basis as enums, length
/// distributions parsed), so a bad value is reported against its file and pointer or its flag; the checks that depend
/// on the hardware or on the model (fp8 compute on a GPU without fp8, EP needing an MoE model) happen when the
/// scenario is resolved against them (app/resolve.hpp: resolve_serving), with the same messages whether a key came
/// from a flag or a file.
struct ServingScenario {
  std::string model;
  std::string gpu, node, cluster;
  std::optional<long long> tp, pp, ep;
  std::optional<long long> attention_dp;  ///< attention-DP ranks with wide EP = attention_dp × tp (wide_ep.hpp)
  std::optional<double> moe_imbalance;  ///< MoE hot-expert skew (busiest EP rank's tokens over the mean)
  std::optional<model::MoeA2aBackend> moe_a2a_backend;  ///< MoE dispatcher: nccl | deepep
  std::optional<model::DeepEpMode> deepep_mode;         ///< DeepEP's kernels: auto | normal | low_latency
  std::optional<bool> two_batch_overlap;                     ///< SGLang's two-batch overlap
  // Traffic and SLA.
  std::optional<long long> input_tokens, output_tokens, batch;
  std::optional<long long> images_per_request;  ///< a multimodal model's images per request (issue #23)
  std::optional<model::LengthDist> input_dist, output_dist;  ///< lognormal:MEAN,SD or TOKENS:WEIGHT,... (parsed)
  std::optional<double> rate, ttft_ms, itl_ms, percentile;
  std::optional<long long> concurrency;  ///< closed-loop users (instead of a rate)
  std::optional<double> think_time_s;    ///< closed loop: pause between a response and the next request
  // Engine and precision.
  std::optional<hw::Precision> compute;  ///< bf16, fp16, fp8, fp4 or int8 (W8A8)
  std::optional<double> price_usd_per_hour;
  std::optional<double> step_overhead_ms, kernel_overhead_us, cpu_per_kernel_us;
  bool disaggregated = false;
  std::optional<std::string> prefill_gpu, decode_gpu;  ///< disaggregated pools on their own GPU types
  std::optional<long long> prefill_attention_dp, decode_attention_dp;  ///< each pool's attention-DP ranks
  std::optional<double> spec_acceptance, draft_ms;
  std::optional<long long> spec_tokens;
  std::optional<std::string> draft_model;
  // Memory (the same knobs as `gpuplan kv`).
  std::optional<long long> block_size, prefix_tokens, weight_group_size, max_num_batched_tokens, max_num_seqs;
  std::optional<model::StoreDtype> kv_dtype, weight_dtype;
  std::optional<model::KvScaleGranularity> kv_scales;
  std::optional<model::MemoryEngine> engine;
  std::optional<RuntimeOverheads> overheads;
  std::optional<model::CapacityBasis> capacity;
  std::optional<double> prefix_hit_rate;  ///< prefix-cache hits on the rest of each prompt, [0, 1)
  std::optional<double> kv_scale_bytes, gpu_memory_utilization, mem_fraction_static, usable_fraction, cuda_graph_GiB,
      activation_GiB;
  std::optional<bool> cudagraph_in_budget;
  bool enforce_eager = false;
};

const json_io::FieldTable& serving_scenario_fields();

/// Decodes a serving scenario object at `pointer` of `file` (the empty pointer for a whole file; "/serving/0/scenario"
/// inside a plan). `origin_of_key` as for training scenarios.
Result<ServingScenario> decode_serving_scenario(const json_io::Json& j, const std::string& file,
                                                const std::string& pointer = "",
                                                const std::map<std::string, std::string>& origin_of_key = {});

/// The longest request a length distribution may give, tokens (input_tokens / output_tokens take 1 to 1e7 too).
inline constexpr long long kMaxLengthTokens = 10000000;

/// A request-length distribution as a scenario spells it: "lognormal:MEAN,SD" (1 ≤ MEAN ≤ kMaxLengthTokens,
/// 0 ≤ SD ≤ kMaxLengthTokens) or "TOKENS:WEIGHT,TOKENS:WEIGHT,..." (whole token counts, weights > 0, normalised).
/// nullopt with `error` set (the value and the rule) when it does not parse.
std::optional<model::LengthDist> parse_length_dist(const std::string& text, std::string& error);

/// "N", "A..B" (A, 2A, 4A, … ≤ B) or "A..B:STEP" (A, A+STEP, … ≤ B) as a list of counts, 1 ≤ A ≤ B ≤ 10⁷, at most
/// 4096 of them. Empty with `error` set when it does not parse.
std::vector<long long> parse_count_range(const std::string& text, std::string& error);

/// Encodes a scenario as the object decode_training_scenario reads (the keys of docs/scenario.md, in field-table
/// order): decode(encode(s)) gives `s` back. Empty strings and absent optionals are left out; `dp` only when given.
json_io::Json encode_training_scenario(const TrainingScenario& s);

}  // namespace gpuplan::wl_io
