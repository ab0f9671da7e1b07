// Serving scenarios (scenario_io.hpp): the keys of `gpuplan serve --scenario` and of a plan's serving[].scenario, and
// their decoding (typed further by the CLI's resolution). Training scenarios: scenario_io.cpp.
#include "gpuplan/wl_io/scenario_io.hpp"

#include "scenario_keys.hpp"

namespace gpuplan::wl_io {

using json_io::Json;
using json_io::ObjectReader;

namespace {
using scenario_keys::rehome;
}  // namespace

// serving_scenario_fields(): serving_fields.cpp, the serving scenario's one field table.

Result<ServingScenario> decode_serving_scenario(const Json& j, const std::string& file, const std::string& pointer,
                                                const std::map<std::string, std::string>& origin_of_key) {
  Diagnostics raw;
  ObjectReader r(j, serving_scenario_fields(), file, pointer, raw);
  Diagnostics diags = rehome(raw, pointer, origin_of_key);
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
  s.moe_a2a_backend = r.str("moe_a2a_backend");
  s.deepep_mode = r.str("deepep_mode");
  s.two_batch_overlap = r.boolean("two_batch_overlap");
  s.input_tokens = r.integer("input_tokens");
  s.output_tokens = r.integer("output_tokens");
  s.images_per_request = r.integer("images_per_request");
  s.batch = r.integer("batch");
  s.input_dist = r.str("input_dist");
  s.output_dist = r.str("output_dist");
  s.rate = r.num("rate");
  s.concurrency = r.integer("concurrency");
  s.think_time_s = r.num("think_time_s");
  s.ttft_ms = r.num("ttft_ms");
  s.itl_ms = r.num("itl_ms");
  s.percentile = r.num("percentile");
  s.compute = r.str("compute");
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
  s.kv_dtype = r.str("kv_dtype");
  s.kv_scales = r.str("kv_scales");
  s.kv_scale_bytes = r.num("kv_scale_bytes");
  s.weight_dtype = r.str("weight_dtype");
  s.weight_group_size = r.integer("weight_group_size");
  s.engine = r.str("engine");
  s.gpu_memory_utilization = r.num("gpu_memory_utilization");
  s.mem_fraction_static = r.num("mem_fraction_static");
  s.usable_fraction = r.num("usable_fraction");
  s.cudagraph_in_budget = r.boolean("cudagraph_in_budget");
  s.enforce_eager = r.boolean("enforce_eager").value_or(false);
  s.cuda_graph_GiB = r.num("cuda_graph_GiB");
  s.activation_GiB = r.num("activation_GiB");
  s.max_num_batched_tokens = r.integer("max_num_batched_tokens");
  s.max_num_seqs = r.integer("max_num_seqs");
  s.overheads = r.str("overheads");
  s.capacity = r.str("capacity");
  if (diags.has_errors()) return Result<ServingScenario>(std::move(diags));
  return Result<ServingScenario>(std::move(s), std::move(diags));
}

}  // namespace gpuplan::wl_io
