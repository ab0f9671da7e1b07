// Serving scenarios (scenario_io.hpp): the keys of `gpuplan serve --scenario` and of a plan's serving[].scenario,
// decoded into typed values at the edge (dtypes, engines and kernels as enums, length distributions parsed), so that
// resolution (app/resolve.cpp) parses no strings. Training scenarios: scenario_io.cpp.
#include "gpuplan/wl_io/scenario_io.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "scenario_keys.hpp"

namespace gpuplan::wl_io {

using json_io::Json;
using json_io::ObjectReader;

namespace {
using scenario_keys::rehome;

/// `text` split at every `sep` (an empty piece where two separators meet).
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == sep) parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

/// The whole of `text` as a finite number.
bool finite_number(const std::string& text, double& v) {
  try {
    std::size_t used = 0;
    v = std::stod(text, &used);
    return used == text.size() && std::isfinite(v);
  } catch (...) {
    return false;
  }
}

/// A key the reader has checked against its choices, as its enum (`parse` maps the spelling).
template <class Enum, class Parse>
std::optional<Enum> typed(const ObjectReader& r, std::string_view key, Parse&& parse) {
  const auto v = r.str(key);
  if (!v) return std::nullopt;
  const std::optional<Enum> e = parse(*v);
  if (!e) r.error(key, fmt::format("'{}' is not a value gpuplan reads here", *v));  // the table and parse disagree
  return e;
}
}  // namespace

std::optional<model::LengthDist> parse_length_dist(const std::string& text, std::string& error) {
  auto bad = [&](const std::string& why) -> std::optional<model::LengthDist> {
    error = fmt::format("'{}': {} (expected lognormal:MEAN,SD or TOKENS:WEIGHT,TOKENS:WEIGHT,...)", text, why);
    return std::nullopt;
  };
  if (text.rfind("lognormal:", 0) == 0) {
    const auto parts = split(text.substr(10), ',');
    double mean = 0, sd = 0;
    if (parts.size() != 2 || !finite_number(parts[0], mean) || !finite_number(parts[1], sd))
      return bad("lognormal takes MEAN,SD");
    // Within the token range of input_tokens / output_tokens: a larger mean or SD overflows the lengths drawn.
    if (!(mean >= 1 && mean <= double(kMaxLengthTokens)) || !(sd >= 0 && sd <= double(kMaxLengthTokens)))
      return bad(fmt::format("the mean must be 1 to {} tokens and the standard deviation 0 to {}", kMaxLengthTokens,
                             kMaxLengthTokens));
    return model::lognormal_lengths(mean, sd);
  }
  model::LengthDist d;
  double total = 0;
  for (const auto& item : split(text, ',')) {
    const auto kv = split(item, ':');
    double tokens = 0, weight = 0;
    if (kv.size() != 2 || !finite_number(kv[0], tokens) || !finite_number(kv[1], weight))
      return bad(fmt::format("'{}' is not TOKENS:WEIGHT", item));
    if (!(tokens >= 1 && tokens <= double(kMaxLengthTokens)) || tokens != std::floor(tokens) || !(weight > 0))
      return bad(fmt::format("'{}': tokens must be a whole number from 1 to {} and the weight > 0", item,
                             kMaxLengthTokens));
    d.points.emplace_back(std::int64_t(tokens), weight);
    total += weight;
  }
  if (!std::isfinite(total)) return bad("the weights add up to more than a double holds");
  std::sort(d.points.begin(), d.points.end());
  for (auto& pt : d.points) pt.second /= total;
  return d;
}

// serving_scenario_fields(): serving_fields.cpp, the serving scenario's one field table.

Result<ServingScenario> decode_serving_scenario(const Json& j, const std::string& file, const std::string& pointer,
                                                const std::map<std::string, std::string>& origin_of_key) {
  Diagnostics raw;
  ObjectReader r(j, serving_scenario_fields(), file, pointer, raw);
  ServingScenario s;
  s.model = r.str("model").value_or("");
  s.gpu = r.str("gpu").value_or("");
  s.node = r.str("node").value_or("");
  s.cluster = r.str("cluster").value_or("");
  s.tp = r.integer("tp");
  s.pp = r.integer("pp");
  s.ep = r.integer("ep");
  s.attention_dp = r.integer("attention_dp");
  s.prefill_gpu = r.str("prefill_gpu");
  s.decode_gpu = r.str("decode_gpu");
  s.prefill_attention_dp = r.integer("prefill_attention_dp");
  s.decode_attention_dp = r.integer("decode_attention_dp");
  s.moe_imbalance = r.num("moe_imbalance");
  s.moe_a2a_backend = typed<model::MoeA2aBackend>(r, "moe_a2a_backend", [](std::string_view v) {
    return v == "deepep" ? std::optional(model::MoeA2aBackend::deepep)
           : v == "nccl" ? std::optional(model::MoeA2aBackend::nccl)
                         : std::nullopt;
  });
  s.deepep_mode = typed<model::DeepEpMode>(r, "deepep_mode", [](std::string_view v) {
    return v == "auto"          ? std::optional(model::DeepEpMode::automatic)
           : v == "normal"      ? std::optional(model::DeepEpMode::normal)
           : v == "low_latency" ? std::optional(model::DeepEpMode::low_latency)
                                : std::nullopt;
  });
  if (s.deepep_mode && s.moe_a2a_backend.value_or(model::MoeA2aBackend::nccl) != model::MoeA2aBackend::deepep)
    r.error("deepep_mode", fmt::format("'{}' picks DeepEP's kernels: give moe_a2a_backend deepep "
                                       "(--moe-a2a-backend deepep) with it",
                                       *r.str("deepep_mode")));
  s.two_batch_overlap = r.boolean("two_batch_overlap");
  s.input_tokens = r.integer("input_tokens");
  s.output_tokens = r.integer("output_tokens");
  s.images_per_request = r.integer("images_per_request");
  s.batch = r.integer("batch");
  for (auto [key, into] : {std::pair{"input_dist", &s.input_dist}, std::pair{"output_dist", &s.output_dist}}) {
    const auto text = r.str(key);
    if (!text) continue;
    std::string error;
    *into = parse_length_dist(*text, error);
    if (!*into) r.error(key, error);
  }
  s.rate = r.num("rate");
  s.concurrency = r.integer("concurrency");
  s.think_time_s = r.num("think_time_s");
  s.ttft_ms = r.num("ttft_ms");
  s.itl_ms = r.num("itl_ms");
  s.percentile = r.num("percentile");
  s.compute = typed<hw::Precision>(r, "compute", hw::parse_precision);
  s.price_usd_per_hour = r.num("price_usd_per_hour");
  s.step_overhead_ms = r.num("step_overhead_ms");
  s.kernel_overhead_us = r.num("kernel_overhead_us");
  s.cpu_per_kernel_us = r.num("cpu_per_kernel_us");
  s.disaggregated = r.boolean("disaggregated").value_or(false);
  s.spec_acceptance = r.num("spec_acceptance");
  s.spec_tokens = r.integer("spec_tokens");
  s.draft_model = r.str("draft_model");
  s.draft_ms = r.num("draft_ms");
  s.block_size = r.integer("block_size");
  s.prefix_tokens = r.integer("prefix_tokens");
  s.prefix_hit_rate = r.num("prefix_hit_rate");
  s.kv_dtype = typed<model::StoreDtype>(r, "kv_dtype", model::parse_store_dtype);
  s.kv_scales = typed<model::KvScaleGranularity>(r, "kv_scales", model::parse_kv_scale_granularity);
  s.kv_scale_bytes = r.num("kv_scale_bytes");
  s.weight_dtype = typed<model::StoreDtype>(r, "weight_dtype", model::parse_store_dtype);
  s.weight_group_size = r.integer("weight_group_size");
  s.engine = typed<model::MemoryEngine>(r, "engine", model::parse_memory_engine);
  s.gpu_memory_utilization = r.num("gpu_memory_utilization");
  s.mem_fraction_static = r.num("mem_fraction_static");
  s.usable_fraction = r.num("usable_fraction");
  s.cudagraph_in_budget = r.boolean("cudagraph_in_budget");
  s.enforce_eager = r.boolean("enforce_eager").value_or(false);
  s.cuda_graph_GiB = r.num("cuda_graph_GiB");
  s.activation_GiB = r.num("activation_GiB");
  s.max_num_batched_tokens = r.integer("max_num_batched_tokens");
  s.max_num_seqs = r.integer("max_num_seqs");
  s.overheads = typed<RuntimeOverheads>(r, "overheads", [](std::string_view v) -> std::optional<RuntimeOverheads> {
    if (v == "default") return RuntimeOverheads::standard;
    if (v == "none") return RuntimeOverheads::none;
    return std::nullopt;
  });
  s.capacity = typed<model::CapacityBasis>(r, "capacity", [](std::string_view v) -> std::optional<model::CapacityBasis> {
    if (v == "device") return model::CapacityBasis::device;
    if (v == "label") return model::CapacityBasis::label;
    return std::nullopt;
  });
  // Re-home diagnostics of flag-provided keys onto the flag ("--input-dist: error: ...").
  Diagnostics diags = rehome(raw, pointer, origin_of_key);
  if (diags.has_errors()) return Result<ServingScenario>(std::move(diags));
  return Result<ServingScenario>(std::move(s), std::move(diags));
}

}  // namespace gpuplan::wl_io
