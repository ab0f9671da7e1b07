#include "serving_memory_flags.hpp"

namespace gpuplan::cli {

void add_serving_memory_options(CLI::App& c, ServingFlags& f, bool for_serve) {
  auto* model = c.add_option("--model,-m", f.model, "model: library id or path to a config.json");
  if (!for_serve) model->required();  // serve: the model may come from --scenario
  c.add_option("--gpu", f.gpu, "GPU id or alias")->capture_default_str();
  c.add_option("--tp", f.tp, "tensor parallel")->check(CLI::Range(1, 1024))->capture_default_str();
  c.add_option("--pp", f.pp, "pipeline parallel")->check(CLI::Range(1, 1024))->capture_default_str();
  if (!for_serve) {
    c.add_option("--gpus", f.gpus, "GPUs available (whole TP×PP replicas): check the concurrency fits on them")
        ->check(CLI::Range(1LL, 10'000'000LL));  // the GPU counts train --gpus takes; replicas × sequences stays in int64
  }
  if (!for_serve) {
    c.add_option("--context", f.context, "tokens per sequence (prompt + output)")
        ->check(CLI::Range(1LL, 100'000'000LL))
        ->capture_default_str();
  }
  if (!for_serve) {
    c.add_option("--concurrency", f.concurrency, "concurrent sequences")
        ->check(CLI::Range(1LL, 1'000'000'000LL))
        ->capture_default_str();
  }
  c.add_option("--block-size", f.block_size, "tokens per KV block (default 16; 1 = contiguous)")
      ->check(CLI::Range(1LL, 1'000'000LL));
  c.add_option("--prefix-tokens", f.prefix_tokens, "prompt prefix shared by all sequences, stored once")
      ->check(CLI::Range(0LL, 100'000'000LL))
      ->capture_default_str();
  c.add_option("--kv-dtype", f.kv_dtype, "KV cache element type")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8", "int8", "int4"}))
      ->capture_default_str();
  c.add_option("--kv-scales", f.kv_scales, "KV scale granularity (default: per-tensor for fp8, per-token-head for int8/int4)")
      ->check(CLI::IsMember({"none", "per-tensor", "per-head", "per-token-head"}));
  c.add_option("--kv-scale-bytes", f.kv_scale_bytes, "bytes per per-token-head scale group (default 4: fp16 scale + zero)");
  c.add_option("--weight-dtype", f.weight_dtype, "weight element type")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"}))
      ->capture_default_str();
  c.add_option("--weight-group-size", f.weight_group_size, "weights per scale group (int4 default 128; 0 = per channel)");
  if (!for_serve) {
    c.add_option("--params", f.params, "nominal parameter count for the weights, e.g. 7e9 (textbook)");
  }
  if (!for_serve) {
    c.add_flag("--no-scale-overhead", f.no_scale_overhead, "nominal bytes per weight, no quantisation scales");
  }
  c.add_option("--engine", f.engine, "memory semantics: vllm (default), sglang, plain")
      ->check(CLI::IsMember({"vllm", "sglang", "plain"}));
  c.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                "vLLM: fraction of total device memory for weights, activations and KV (default 0.9)");
  c.add_option("--mem-fraction-static", f.mem_fraction_static,
                "SGLang: fraction of the pre-load free memory for weights and KV (default 0.88)");
  c.add_option("--usable-fraction", f.usable_fraction, "plain: fraction of capacity usable for everything (default 1)");
  c.add_option("--cudagraph-in-budget", f.cudagraph_in_budget,
                "vLLM: CUDA graphs counted inside gpu_memory_utilization (true from v0.21; false before)");
  c.add_flag("--enforce-eager", f.enforce_eager, "no CUDA graphs");
  c.add_option("--cuda-graph-GiB", f.cuda_graph_gib, "CUDA-graph memory per GPU (default 1 GiB)");
  c.add_option("--activation-GiB", f.activation_gib, "peak activation memory per GPU, e.g. from vLLM's log");
  c.add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "tokens of the profiling pass (vLLM default)")
      ->check(CLI::Range(1LL, 100'000'000LL));
  c.add_option("--max-num-seqs", f.max_num_seqs, "sequences of the profiling sampler pass (vLLM default)")
      ->check(CLI::Range(1LL, 1'000'000LL));
  c.add_option("--overheads", f.overheads, "runtime overheads: default or none")
      ->check(CLI::IsMember({"default", "none"}));
  c.add_option("--capacity", f.capacity, "GPU capacity: device (driver-reported) or label (vendor GB)")
      ->check(CLI::IsMember({"device", "label"}));
  if (!for_serve) {
    c.add_option("--paging-overhead", f.paging_overhead, "flat fraction added to the KV (textbook, e.g. 0.3)");
  }
  if (!for_serve) {
    c.add_option("--gpu-count", f.gpu_count, "layout (whole-sequence replicas) or pooled (textbook)")
        ->check(CLI::IsMember({"layout", "pooled"}));
  }
  if (!for_serve) {
    c.add_flag("--simple", f.simple,
                "textbook back-of-envelope: vendor GB, no overheads, nominal weight bytes, contiguous KV, pooled GPU count");
  }
}

}  // namespace gpuplan::cli
