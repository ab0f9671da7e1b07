// Serving scenarios (scenario_io.hpp): the keys of `gpuplan serve --scenario` and of a plan's serving[].scenario, and
// their decoding (typed further by the CLI's resolution). Training scenarios: scenario_io.cpp.
#include "gpuplan/wl_io/scenario_io.hpp"

#include "scenario_keys.hpp"

namespace gpuplan::wl_io {

using json_io::FieldTable;
using json_io::FieldType;
using json_io::Json;
using json_io::ObjectReader;

namespace {
using scenario_keys::f;
using scenario_keys::rehome;
}  // namespace

const FieldTable& serving_scenario_fields() {
  static const std::vector<std::string> dtypes{"fp32", "bf16", "fp16", "fp8", "int8", "int4"};
  static const FieldTable t{
      f("model", FieldType::string, "library id or path to a model JSON / config.json"),
      f("gpu", FieldType::string, "GPU id or alias (default h100-sxm5-80gb when no node or cluster is given)"),
      f("node", FieldType::string, "node id: the scale-up fabric for TP (default: a node holding the GPU)"),
      f("cluster", FieldType::string, "cluster id: the scale-out fabric for disaggregated KV transfer"),
      f("tp", FieldType::integer, "tensor parallel size of a replica (with a rate: fixed instead of searched)", 1, 1024),
      f("pp", FieldType::integer, "pipeline parallel size of a replica (with a rate: fixed instead of searched)", 1, 1024),
      f("ep", FieldType::integer, "MoE expert parallel inside the TP group", 1, 1024),
      f("attention_dp", FieldType::integer,
        "MoE: attention data-parallel ranks of TP GPUs each (own batch and KV cache) with the experts spread over all "
        "of them, wide EP = attention_dp × tp (SGLang --enable-dp-attention --dp, vLLM --data-parallel-size with "
        "--enable-expert-parallel); the planner sizes whole groups (default 1: off)",
        1, 4096),
      f("moe_imbalance", FieldType::number,
        "MoE hot-expert skew: routed tokens of the busiest expert-parallel rank over the mean (1 = uniform routing, "
        "the default)",
        1, 1024),
      f("moe_a2a_backend", FieldType::string,
        "MoE: the dispatch/combine kernels under expert parallelism: nccl (NCCL's all-to-all, the default) or deepep "
        "(DeepEP's kernels; SGLang --moe-a2a-backend deepep)",
        0, 0, {"nccl", "deepep"}),
      f("deepep_mode", FieldType::string,
        "MoE with moe_a2a_backend deepep: normal (node-deduplicated RDMA + NVLink forwarding), low_latency (one RDMA "
        "message per token-expert row) or auto (normal with prompt tokens, low-latency in pure decode; the default; "
        "SGLang --deepep-mode)",
        0, 0, {"auto", "normal", "low_latency"}),
      f("two_batch_overlap", FieldType::boolean,
        "MoE with EP: the batch as two halves, each half's dispatch and combine beside the other half's compute "
        "(SGLang --enable-two-batch-overlap; default false)"),
      f("input_tokens", FieldType::integer, "prompt tokens per request (default 1024)", 1, 1e7),
      f("output_tokens", FieldType::integer, "output tokens per request (default 256)", 1, 1e7),
      f("images_per_request", FieldType::integer,
        "images per request of a multimodal model: their tokens join the prompt, the vision tower runs before the "
        "prefill (default 0)",
        0, 1e4),
      f("input_dist", FieldType::string, "prompt-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,..."),
      f("output_dist", FieldType::string, "output-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,..."),
      f("batch", FieldType::integer, "concurrent sequences per replica (default: the KV capacity)", 1, 1e7),
      f("rate", FieldType::number, "requests per second to serve: runs the capacity planner"),
      f("concurrency", FieldType::integer,
        "closed-loop users, each with one request in flight (instead of rate): runs the capacity planner", 1, 1e9),
      f("think_time_s", FieldType::number, "closed loop: seconds between a response and the user's next request"),
      f("ttft_ms", FieldType::number, "SLA: time to first token at the percentile, ms"),
      f("itl_ms", FieldType::number, "SLA: inter-token latency (mean iteration), ms"),
      f("percentile", FieldType::number, "SLA percentile for TTFT (default 99)"),
      f("compute", FieldType::string, "GEMM precision (default: fp8 / fp4 with fp8 / fp4 weights where the GPU has them)",
        0, 0, {"bf16", "fp16", "fp8", "fp4"}),
      f("price_usd_per_hour", FieldType::number, "$/GPU-hour (default: the GPU file's indicative price)"),
      f("step_overhead_ms", FieldType::number, "engine CPU time per iteration not hidden (default 0)"),
      f("kernel_overhead_us", FieldType::number, "GPU-side fixed cost per kernel (graphs 2.5, eager 5)"),
      f("cpu_per_kernel_us", FieldType::number, "eager: CPU time to issue one kernel (default 12)"),
      f("disaggregated", FieldType::boolean, "also size separate prefill and decode pools"),
      f("prefill_gpu", FieldType::string,
        "disaggregated: GPU of the prefill pool (default: gpu), priced at its own $/GPU-hour"),
      f("prefill_attention_dp", FieldType::integer,
        "disaggregated, MoE: attention-DP ranks per group of the prefill pool (default attention_dp)", 1, 4096),
      f("decode_attention_dp", FieldType::integer,
        "disaggregated, MoE: attention-DP ranks per group of the decode pool (default attention_dp)", 1, 4096),
      f("decode_gpu", FieldType::string,
        "disaggregated: GPU of the decode pool (default: gpu), priced at its own $/GPU-hour; the KV crosses the "
        "scale-out fabric between the pools"),
      f("spec_acceptance", FieldType::number, "speculative decoding: acceptance rate α"),
      f("spec_tokens", FieldType::integer, "speculative decoding: draft tokens per step γ", 1, 64),
      f("draft_model", FieldType::string, "speculative decoding: draft model (library id or config.json)"),
      f("draft_ms", FieldType::number, "speculative decoding: draft step time in ms (instead of a draft model)"),
      f("block_size", FieldType::integer, "tokens per KV block (default 16; 1 = contiguous)", 1, 1e6),
      f("prefix_tokens", FieldType::integer, "prompt prefix shared by all sequences, stored once", 0, 1e8),
      f("prefix_hit_rate", FieldType::number,
        "share of each prompt's tokens beyond prefix_tokens found in the prefix cache (whole blocks), in [0, 1): not "
        "computed again (default 0)"),
      f("kv_dtype", FieldType::string, "KV cache element type (default bf16)", 0, 0, dtypes),
      f("kv_scales", FieldType::string, "KV scale granularity", 0, 0, {"none", "per-tensor", "per-head", "per-token-head"}),
      f("kv_scale_bytes", FieldType::number, "bytes per per-token-head scale group (default 4)"),
      f("weight_dtype", FieldType::string, "weight element type (default bf16)", 0, 0,
        {"fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"}),
      f("weight_group_size", FieldType::integer, "weights per scale group (int4 default 128; 0 = per channel)"),
      f("engine", FieldType::string, "memory semantics (default vllm)", 0, 0, {"vllm", "sglang", "plain"}),
      f("gpu_memory_utilization", FieldType::number, "vLLM: fraction of device memory for weights, activations, KV"),
      f("mem_fraction_static", FieldType::number, "SGLang: fraction of the pre-load free memory for weights and KV"),
      f("usable_fraction", FieldType::number, "plain: fraction of capacity usable for everything"),
      f("cudagraph_in_budget", FieldType::boolean, "vLLM: CUDA graphs counted inside gpu_memory_utilization"),
      f("enforce_eager", FieldType::boolean, "no CUDA graphs"),
      f("cuda_graph_GiB", FieldType::number, "CUDA-graph memory per GPU (default 1 GiB)"),
      f("activation_GiB", FieldType::number, "peak activation memory per GPU"),
      f("max_num_batched_tokens", FieldType::integer, "chunked-prefill token budget (vLLM default)", 1, 1e8),
      f("max_num_seqs", FieldType::integer, "max concurrent sequences the engine schedules (vLLM default)", 1, 1e6),
      f("overheads", FieldType::string, "runtime overheads", 0, 0, {"default", "none"}),
      f("capacity", FieldType::string, "GPU capacity: device (driver-reported) or label (vendor GB)", 0, 0,
        {"device", "label"}),
  };
  return t;
}

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
