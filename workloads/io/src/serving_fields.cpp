// The serving scenario's field table (scenario_fields.hpp): every key of `gpuplan serve` and its scenario files, once.
// The reader (serving_scenario_io.cpp decode_serving_scenario) checks the `spec` part; cli/serve_options.cpp generates
// serve's, simulate's, compress's, autoscale's and kv's flags and the overlay from `flags`; the GUI's serving page takes
// `label`, the tooltip and the range; `gpuplan schema` prints the whole row.
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "scenario_row.hpp"

namespace gpuplan::wl_io {

using json_io::FieldType;

namespace {
using scenario_row::row;

/// The identity, layout and MoE keys.
void add_system(ScenarioFieldTable& t) {
  t.insert(t.end(), {
      row("model", FieldType::string, "Model")
          .flags({"--model", "-m"})
          .help("model: library id or path to a config.json")
          .doc("library id or path to a model JSON / config.json"),
      row("gpu", FieldType::string, "GPU")
          .flags({"--gpu"})
          .help("GPU id or alias")
          .otherwise("h100-sxm5-80gb without a node or cluster")
          .doc("GPU id or alias (default h100-sxm5-80gb when no node or cluster is given)"),
      row("node", FieldType::string, "Node")
          .flags({"--node"})
          .help("node id (scale-up fabric for TP)")
          .otherwise("a node holding the GPU")
          .doc("node id: the scale-up fabric for TP (default: a node holding the GPU)"),
      row("cluster", FieldType::string, "Cluster")
          .flags({"--cluster"})
          .planner()
          .help("cluster id (scale-out fabric for disaggregated KV transfer)")
          .doc("cluster id: the scale-out fabric for disaggregated KV transfer"),
      row("tp", FieldType::integer, "TP")
          .flags({"--tp"})
          .help("tensor parallel")
          .otherwise("1; with a rate: searched")
          .range(1, 1024)
          .doc("tensor parallel size of a replica (with a rate: fixed instead of searched)"),
      row("pp", FieldType::integer, "PP")
          .flags({"--pp"})
          .help("pipeline parallel")
          .otherwise("1; with a rate: searched")
          .range(1, 1024)
          .doc("pipeline parallel size of a replica (with a rate: fixed instead of searched)"),
      row("ep", FieldType::integer, "EP")
          .flags({"--ep"})
          .help("MoE expert parallel inside the TP group")
          .range(1, 1024)
          .doc("MoE expert parallel inside the TP group"),
      row("attention_dp", FieldType::integer, "Attention DP")
          .flags({"--attention-dp"})
          .help("MoE: attention data-parallel ranks of --tp GPUs each (own batch and KV cache), the experts spread "
                "over all of them (wide EP = attention-dp × tp; SGLang --enable-dp-attention, vLLM "
                "--data-parallel-size with --enable-expert-parallel); the planner sizes whole groups")
          .otherwise("1, off")
          .range(1, 4096)
          .doc("MoE: attention data-parallel ranks of TP GPUs each (own batch and KV cache) with the experts spread "
               "over all of them, wide EP = attention_dp × tp (SGLang --enable-dp-attention --dp, vLLM "
               "--data-parallel-size with --enable-expert-parallel); the planner sizes whole groups (default 1: off)"),
      row("moe_imbalance", FieldType::number, "MoE imbalance")
          .flags({"--moe-imbalance"})
          .help("MoE hot-expert skew: routed tokens of the busiest expert-parallel rank over the mean")
          .otherwise("1, uniform routing")
          .range(1, 1024)
          .doc("MoE hot-expert skew: routed tokens of the busiest expert-parallel rank over the mean (1 = uniform "
               "routing, the default)"),
      // SGLang's own spellings (--moe-a2a-backend, --deepep-mode, --enable-two-batch-overlap) set these three; a
      // gpuplan option of the same name would shadow them.
      row("moe_a2a_backend", FieldType::string, "MoE dispatch kernels")
          .help("MoE dispatch/combine under expert parallelism: nccl or deepep (SGLang --moe-a2a-backend)")
          .otherwise("nccl")
          .choices({"nccl", "deepep"})
          .doc("MoE: the dispatch/combine kernels under expert parallelism: nccl (NCCL's all-to-all, the default) "
               "or deepep (DeepEP's kernels; SGLang --moe-a2a-backend deepep)"),
      row("deepep_mode", FieldType::string, "DeepEP mode")
          .help("DeepEP kernels: normal, low_latency or auto (SGLang --deepep-mode)")
          .otherwise("auto")
          .choices({"auto", "normal", "low_latency"})
          .doc("MoE with moe_a2a_backend deepep: normal (node-deduplicated RDMA + NVLink forwarding), low_latency "
               "(one RDMA message per token-expert row) or auto (normal with prompt tokens, low-latency in pure "
               "decode; the default; SGLang --deepep-mode)"),
      row("two_batch_overlap", FieldType::boolean, "Two-batch overlap")
          .help("MoE with EP: each half batch's dispatch and combine beside the other half's compute (SGLang "
                "--enable-two-batch-overlap)")
          .otherwise("false")
          .doc("MoE with EP: the batch as two halves, each half's dispatch and combine beside the other half's "
               "compute (SGLang --enable-two-batch-overlap; default false)"),
  });
}

/// The requests, the traffic and the SLA.
void add_traffic(ScenarioFieldTable& t) {
  t.insert(t.end(), {
      row("input_tokens", FieldType::integer, "Prompt")
          .flags({"--input-tokens"})
          .help("prompt tokens per request")
          .otherwise("1024")
          .range(1, 1e7)
          .doc("prompt tokens per request (default 1024)"),
      row("output_tokens", FieldType::integer, "Output")
          .flags({"--output-tokens"})
          .help("output tokens per request")
          .otherwise("256")
          .range(1, 1e7)
          .doc("output tokens per request (default 256)"),
      row("images_per_request", FieldType::integer, "Images per request")
          .flags({"--images-per-request"})
          .help("images per request of a multimodal model: their tokens join the prompt (--input-tokens is the "
                "text), the vision tower runs before the prefill")
          .otherwise("0")
          .range(0, 1e4)
          .doc("images per request of a multimodal model: their tokens join the prompt, the vision tower runs "
               "before the prefill (default 0)"),
      row("input_dist", FieldType::string, "Prompt lengths")
          .flags({"--input-dist"})
          .planner()
          .help("prompt-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,... (replaces --input-tokens)")
          .doc("prompt-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,..."),
      row("output_dist", FieldType::string, "Output lengths")
          .flags({"--output-dist"})
          .planner()
          .help("output-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,... (replaces --output-tokens)")
          .doc("output-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,..."),
      row("batch", FieldType::integer, "Batch")
          .flags({"--batch"})
          .planner()
          .help("concurrent sequences per replica")
          .otherwise("the KV capacity")
          .range(1, 1e7)
          .doc("concurrent sequences per replica (default: the KV capacity)"),
      row("rate", FieldType::number, "Rate")
          .flags({"--rate"})
          .planner()
          .help("requests per second to serve: runs the capacity planner")
          .doc("requests per second to serve: runs the capacity planner"),
      row("concurrency", FieldType::integer, "Concurrency")
          .flags({"--concurrency"})
          .planner()
          .help("closed-loop users, each with one request in flight (instead of --rate): runs the capacity "
                "planner; the rate follows from the latency")
          .range(1, 1e9)
          .doc("closed-loop users, each with one request in flight (instead of rate): runs the capacity planner"),
      row("think_time_s", FieldType::number, "Think time")
          .flags({"--think-time-s"})
          .planner()
          .help("closed loop: seconds between a response and the next request")
          .doc("closed loop: seconds between a response and the user's next request"),
      row("ttft_ms", FieldType::number, "SLA TTFT")
          .flags({"--ttft-ms"})
          .planner()
          .help("SLA: time to first token at the percentile, ms")
          .doc("SLA: time to first token at the percentile, ms"),
      row("itl_ms", FieldType::number, "SLA ITL")
          .flags({"--itl-ms"})
          .planner()
          .help("SLA: inter-token latency (mean iteration), ms")
          .doc("SLA: inter-token latency (mean iteration), ms"),
      row("percentile", FieldType::number, "SLA percentile")
          .flags({"--percentile"})
          .planner()
          .help("SLA percentile for TTFT")
          .otherwise("99")
          .doc("SLA percentile for TTFT (default 99)"),
  });
}

/// Precision, price, the engine's per-iteration costs, disaggregation and speculative decoding.
void add_engine(ScenarioFieldTable& t) {
  t.insert(t.end(), {
      row("compute", FieldType::string, "Compute")
          .flags({"--compute"})
          .help("GEMM precision (a transformer's int8 is W8A8: it needs --weight-dtype int8; a vision model: bf16, "
                "fp16, fp8 or int8)")
          .otherwise("fp8 / fp4 with fp8 / fp4 weights on GPUs that have them, else bf16")
          .choices({"bf16", "fp16", "fp8", "fp4", "int8"})
          .doc("GEMM precision (default: fp8 / fp4 with fp8 / fp4 weights where the GPU has them); `int8` is W8A8: "
               "int8 weights (`weight_dtype` `int8`), per-token activation quantisation, int8 tensor cores"),
      row("price_usd_per_hour", FieldType::number, "$/GPU-h")
          .flags({"--price"})
          .planner()
          .help("$ per GPU-hour")
          .otherwise("the GPU file's indicative price")
          .doc("$/GPU-hour (default: the GPU file's indicative price)"),
      row("step_overhead_ms", FieldType::number, "Step overhead")
          .flags({"--step-overhead-ms"})
          .help("engine CPU time per iteration not hidden, ms")
          .otherwise("0")
          .doc("engine CPU time per iteration not hidden (default 0)"),
      row("kernel_overhead_us", FieldType::number, "Kernel overhead")
          .flags({"--kernel-overhead-us"})
          .help("GPU-side fixed cost per kernel, µs")
          .otherwise("graphs 2.5, eager 5")
          .doc("GPU-side fixed cost per kernel (graphs 2.5, eager 5)"),
      row("cpu_per_kernel_us", FieldType::number, "CPU per kernel")
          .flags({"--cpu-per-kernel-us"})
          .help("eager: CPU time to issue one kernel, µs, the same for every op")
          .otherwise("per op: GEMM 38.4, norm 32.9, attention 36.2, elementwise 12.5 / 23.6")
          .doc("eager: CPU time to issue one kernel, the same for every op (default per op, measured, "
               "eager_host_ops.json: GEMM 38.4, norm 32.9, attention 36.2, one-operand elementwise 12.5, other "
               "elementwise 23.6, collectives 22.2)"),
      row("disaggregated", FieldType::boolean, "Disaggregated")
          .flags({"--disaggregated"})
          .switch_flag()
          .planner()
          .help("also size separate prefill and decode pools")
          .otherwise("false")
          .doc("also size separate prefill and decode pools"),
      row("prefill_gpu", FieldType::string, "Prefill GPU")
          .flags({"--prefill-gpu"})
          .planner()
          .help("with --disaggregated: the prefill pool's GPU, at its own price")
          .otherwise("--gpu")
          .doc("disaggregated: GPU of the prefill pool (default: gpu), priced at its own $/GPU-hour"),
      row("prefill_attention_dp", FieldType::integer, "Prefill attention DP")
          .flags({"--prefill-attention-dp"})
          .planner()
          .help("with --disaggregated, MoE: attention-DP ranks per group of the prefill pool")
          .otherwise("--attention-dp")
          .range(1, 4096)
          .doc("disaggregated, MoE: attention-DP ranks per group of the prefill pool (default attention_dp)"),
      row("decode_attention_dp", FieldType::integer, "Decode attention DP")
          .flags({"--decode-attention-dp"})
          .planner()
          .help("with --disaggregated, MoE: attention-DP ranks per group of the decode pool")
          .otherwise("--attention-dp")
          .range(1, 4096)
          .doc("disaggregated, MoE: attention-DP ranks per group of the decode pool (default attention_dp)"),
      row("decode_gpu", FieldType::string, "Decode GPU")
          .flags({"--decode-gpu"})
          .planner()
          .help("with --disaggregated: the decode pool's GPU, at its own price; the KV crosses the scale-out fabric "
                "between the pools")
          .otherwise("--gpu")
          .doc("disaggregated: GPU of the decode pool (default: gpu), priced at its own $/GPU-hour; the KV crosses "
               "the scale-out fabric between the pools"),
      row("spec_acceptance", FieldType::number, "Speculative acceptance")
          .flags({"--spec-acceptance"})
          .planner()
          .help("speculative decoding: acceptance rate α")
          .doc("speculative decoding: acceptance rate α"),
      row("spec_tokens", FieldType::integer, "Draft tokens")
          .flags({"--spec-tokens"})
          .planner()
          .help("speculative decoding: draft tokens per step γ")
          .range(1, 64)
          .doc("speculative decoding: draft tokens per step γ"),
      row("draft_model", FieldType::string, "Draft model")
          .flags({"--draft-model"})
          .planner()
          .help("speculative decoding: draft model (library id or config.json)")
          .doc("speculative decoding: draft model (library id or config.json)"),
      row("draft_ms", FieldType::number, "Draft step")
          .flags({"--draft-ms"})
          .planner()
          .help("speculative decoding: draft step time in ms (instead of a draft model)")
          .doc("speculative decoding: draft step time in ms (instead of a draft model)"),
  });
}

/// The memory knobs (what `gpuplan kv` takes too): KV blocks and formats, weights, the engine's memory semantics.
void add_memory(ScenarioFieldTable& t) {
  static const std::vector<std::string> kv_dtypes{"fp32", "bf16", "fp16", "fp8", "int8", "int4"};
  t.insert(t.end(), {
      row("block_size", FieldType::integer, "KV block")
          .flags({"--block-size"})
          .help("tokens per KV block (1 = contiguous)")
          .otherwise("16")
          .range(1, 1e6)
          .doc("tokens per KV block (default 16; 1 = contiguous)"),
      row("prefix_tokens", FieldType::integer, "Shared prefix")
          .flags({"--prefix-tokens"})
          .help("prompt prefix shared by all sequences, stored once")
          .otherwise("0")
          .range(0, 1e8)
          .doc("prompt prefix shared by all sequences, stored once"),
      row("prefix_hit_rate", FieldType::number, "Prefix hit rate")
          .flags({"--prefix-hit-rate"})
          .help("fraction of each prompt's tokens beyond --prefix-tokens found in the prefix cache (whole blocks): "
                "not computed again")
          .otherwise("0")
          .doc("share of each prompt's tokens beyond prefix_tokens found in the prefix cache (whole blocks), in [0, "
               "1): not computed again (default 0)"),
      row("kv_dtype", FieldType::string, "KV cache")
          .flags({"--kv-dtype"})
          .help("KV cache element type")
          .otherwise("bf16")
          .choices(kv_dtypes)
          .doc("KV cache element type (default bf16)"),
      row("kv_scales", FieldType::string, "KV scales")
          .flags({"--kv-scales"})
          .help("KV scale granularity")
          .otherwise("per-tensor for fp8, per-token-head for int8/int4")
          .choices({"none", "per-tensor", "per-head", "per-token-head"})
          .doc("KV scale granularity"),
      row("kv_scale_bytes", FieldType::number, "KV scale bytes")
          .flags({"--kv-scale-bytes"})
          .help("bytes per per-token-head scale group")
          .otherwise("4, an fp16 scale + zero")
          .doc("bytes per per-token-head scale group (default 4)"),
      row("weight_dtype", FieldType::string, "Weights")
          .flags({"--weight-dtype"})
          .help("weight element type")
          .otherwise("bf16")
          .choices({"fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"})
          .doc("weight element type (default bf16)"),
      row("weight_group_size", FieldType::integer, "Weight group")
          .flags({"--weight-group-size"})
          .help("weights per scale group (0 = per channel)")
          .otherwise("128 for int4")
          .doc("weights per scale group (int4 default 128; 0 = per channel)"),
      row("engine", FieldType::string, "Engine")
          .flags({"--engine"})
          .help("memory semantics: vllm, sglang, plain")
          .otherwise("vllm")
          .choices({"vllm", "sglang", "plain"})
          .doc("memory semantics (default vllm)"),
      row("gpu_memory_utilization", FieldType::number, "GPU memory utilization")
          .flags({"--gpu-memory-utilization"})
          .help("vLLM: fraction of total device memory for weights, activations and KV")
          .otherwise("0.9")
          .doc("vLLM: fraction of device memory for weights, activations, KV"),
      row("mem_fraction_static", FieldType::number, "Static memory fraction")
          .flags({"--mem-fraction-static"})
          .help("SGLang: fraction of the pre-load free memory for weights and KV")
          .otherwise("0.88")
          .doc("SGLang: fraction of the pre-load free memory for weights and KV"),
      row("usable_fraction", FieldType::number, "Usable fraction")
          .flags({"--usable-fraction"})
          .help("plain: fraction of capacity usable for everything")
          .otherwise("1")
          .doc("plain: fraction of capacity usable for everything"),
      row("cudagraph_in_budget", FieldType::boolean, "CUDA graphs in budget")
          .flags({"--cudagraph-in-budget"})
          .help("vLLM: CUDA graphs counted inside gpu_memory_utilization")
          .otherwise("true from v0.21; false before")
          .doc("vLLM: CUDA graphs counted inside gpu_memory_utilization"),
      row("enforce_eager", FieldType::boolean, "Enforce eager")
          .flags({"--enforce-eager"})
          .switch_flag()
          .help("no CUDA graphs")
          .otherwise("false")
          .doc("no CUDA graphs"),
      row("cuda_graph_GiB", FieldType::number, "CUDA-graph memory")
          .flags({"--cuda-graph-GiB"})
          .help("CUDA-graph memory per GPU, GiB")
          .otherwise("1")
          .doc("CUDA-graph memory per GPU (default 1 GiB)"),
      row("activation_GiB", FieldType::number, "Activation memory")
          .flags({"--activation-GiB"})
          .help("peak activation memory per GPU, GiB, e.g. from vLLM's log")
          .doc("peak activation memory per GPU"),
      row("max_num_batched_tokens", FieldType::integer, "Max batched tokens")
          .flags({"--max-num-batched-tokens"})
          .help("tokens of the profiling pass (chunked-prefill budget)")
          .otherwise("vLLM's")
          .range(1, 1e8)
          .doc("chunked-prefill token budget (vLLM default)"),
      row("max_num_seqs", FieldType::integer, "Max sequences")
          .flags({"--max-num-seqs"})
          .help("sequences of the profiling sampler pass (max concurrent sequences)")
          .otherwise("vLLM's")
          .range(1, 1e6)
          .doc("max concurrent sequences the engine schedules (vLLM default)"),
      row("overheads", FieldType::string, "Runtime overheads")
          .flags({"--overheads"})
          .help("runtime overheads: default or none")
          .otherwise("default")
          .choices({"default", "none"})
          .doc("runtime overheads"),
      row("capacity", FieldType::string, "GPU capacity")
          .flags({"--capacity"})
          .help("GPU capacity: device (driver-reported) or label (vendor GB)")
          .choices({"device", "label"})
          .doc("GPU capacity: device (driver-reported) or label (vendor GB)"),
  });
}

ScenarioFieldTable make_serving_fields() {
  ScenarioFieldTable t;
  add_system(t);
  add_traffic(t);
  add_engine(t);
  add_memory(t);
  return t;
}
}  // namespace

const ScenarioFieldTable& serving_fields() {
  static const ScenarioFieldTable t = make_serving_fields();
  return t;
}

const json_io::FieldTable& serving_scenario_fields() {
  static const json_io::FieldTable t = field_specs(serving_fields());
  return t;
}

}  // namespace gpuplan::wl_io
