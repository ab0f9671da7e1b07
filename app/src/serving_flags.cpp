#include "gpuplan/app/serving_flags.hpp"

#include "gpuplan/app/output.hpp"

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::app {
namespace {
namespace u = gpuplan::units;
}  // namespace

void set_memory_keys(const wl_io::ServingScenario& s, ServingFlags& f) {
  f.model = s.model;
  f.tp = static_cast<int>(s.tp.value_or(1));
  f.pp = static_cast<int>(s.pp.value_or(1));
  f.kv_dtype = s.kv_dtype.value_or(model::StoreDtype::bf16);
  f.kv_scales = s.kv_scales;
  f.kv_scale_bytes = s.kv_scale_bytes;
  f.weight_dtype = s.weight_dtype.value_or(model::StoreDtype::bf16);
  f.weight_group_size = s.weight_group_size;
  f.block_size = s.block_size;
  f.prefix_tokens = s.prefix_tokens.value_or(0);
  f.engine = s.engine;
  f.gpu_memory_utilization = s.gpu_memory_utilization;
  f.mem_fraction_static = s.mem_fraction_static;
  f.usable_fraction = s.usable_fraction;
  f.cudagraph_in_budget = s.cudagraph_in_budget;
  f.enforce_eager = s.enforce_eager;
  f.cuda_graph_gib = s.cuda_graph_GiB;
  f.activation_gib = s.activation_GiB;
  f.max_num_batched_tokens = s.max_num_batched_tokens;
  f.max_num_seqs = s.max_num_seqs;
  f.overheads = s.overheads;
  f.capacity = s.capacity;
}

std::optional<model::ServingMemoryPlan> make_memory_plan(const ServingFlags& f, const hw::HardwareDb& db, const hw::GpuSpec& gpu,
                                                  Diagnostics& diags, const KeyLocator& where) {
  model::ServingMemoryPlan p;
  // Messages name the flag; with a locator, the flag's scenario key is located instead ("plan.json: /kv_dtype").
  auto bad = [&](const std::string& flag, std::string msg) {
    if (!where) return diags.error("", flag, std::move(msg));
    std::string key = flag.substr(2);
    for (auto& c : key)
      if (c == '-') c = '_';
    diags.error("", where(key), std::move(msg));
  };
  p.tp = f.tp;
  p.pp = f.pp;
  if (f.gpus) p.gpus = *f.gpus;
  p.context = f.context;
  p.concurrency = f.concurrency;
  p.prefix_tokens = f.prefix_tokens;
  if (f.prefix_tokens > f.context)
    bad("--prefix-tokens", fmt::format("a shared prefix of {} tokens is longer than the context of {} tokens",
                                       f.prefix_tokens, f.context));

  // Engine and its fraction: the fraction flag names the engine.
  std::optional<model::MemoryEngine> engine = f.engine;
  // Each engine's fraction flag (engine_memory_knob: its name, flag and default).
  auto given = [&f](model::MemoryEngine e) -> std::optional<double> {
    switch (e) {
      case model::MemoryEngine::vllm: return f.gpu_memory_utilization;
      case model::MemoryEngine::sglang: return f.mem_fraction_static;
      case model::MemoryEngine::plain: return f.usable_fraction;
    }
    return std::nullopt;
  };
  int knobs = 0;
  std::string one_of;
  for (auto e : model::kMemoryEngines) {
    const auto& k = model::engine_memory_knob(e);
    knobs += int(given(e).has_value());
    one_of += fmt::format("{}{} ({})", one_of.empty() ? "" : ", ", k.fraction_flag, k.name);
  }
  if (knobs > 1)
    bad(std::string(model::engine_memory_knob(model::kMemoryEngines[0]).fraction_flag), "give one of " + one_of);
  for (auto e : model::kMemoryEngines) {
    if (!given(e)) continue;
    const std::string flag(model::engine_memory_knob(e).fraction_flag);
    if (engine && *engine != e)
      bad(flag, fmt::format("{} is a {} setting but --engine is {}", flag, model::to_string(e),
                            model::to_string(*engine)));
    engine = e;
  }
  if (!engine) engine = f.simple ? model::MemoryEngine::plain : model::MemoryEngine::vllm;
  p.engine = *engine;
  p.memory_fraction = given(p.engine).value_or(model::engine_memory_knob(p.engine).default_fraction);
  for (auto e : model::kMemoryEngines)
    if (const auto v = given(e); v && !(*v > 0.0 && *v <= 1.0))
      bad(std::string(model::engine_memory_knob(e).fraction_flag),
          fmt::format("{} is not a fraction in (0, 1]", plain_number(*v)));

  // KV dtype and scales.
  p.kv = model::default_kv_quant(f.kv_dtype);
  if (f.kv_scales) {
    if (!model::is_quantized(f.kv_dtype) && *f.kv_scales != model::KvScaleGranularity::none)
      bad("--kv-scales", fmt::format("a {} KV cache has no quantisation scales; --kv-scales applies to fp8, int8 and "
                                     "int4",
                                     model::to_string(f.kv_dtype)));
    p.kv.scales = *f.kv_scales;
    p.kv.origin = fmt::format("user: --kv-scales {}", model::to_string(*f.kv_scales));
  }
  if (f.kv_scale_bytes) {
    if (*f.kv_scale_bytes < 0) bad("--kv-scale-bytes", "must be ≥ 0");
    p.kv.scale_bytes = *f.kv_scale_bytes;
    p.kv.origin += "; --kv-scale-bytes " + plain_number(*f.kv_scale_bytes);
  }

  // Weights.
  p.weights = model::default_weight_quant(f.weight_dtype);
  if (f.weight_group_size) {
    if (!model::is_quantized(f.weight_dtype))
      bad("--weight-group-size",
          fmt::format("{} weights have no quantisation groups", model::to_string(f.weight_dtype)));
    if (*f.weight_group_size < 0)
      bad("--weight-group-size", "must be ≥ 1 (or 0 for one scale per output channel)");
    p.weights.group_size = *f.weight_group_size;
    p.weights.origin += fmt::format("; group size {} (--weight-group-size)", *f.weight_group_size);
  }
  if (f.params) {
    if (!(*f.params > 0)) bad("--params", fmt::format("{} is not a positive parameter count", plain_number(*f.params)));
    p.nominal_params = *f.params;
  }
  p.weight_scale_overhead = !(f.no_scale_overhead || f.simple);

  // Simplifications and overheads.
  p.block_size = f.block_size.value_or(f.simple ? 1 : 16);
  if (f.block_size) p.engine_block_size = false;  // the user chose it
  if (f.simple && !f.block_size) p.engine_block_size = false;
  const auto ovh = f.overheads.value_or(f.simple ? wl_io::RuntimeOverheads::none : wl_io::RuntimeOverheads::standard);
  p.overheads = ovh == wl_io::RuntimeOverheads::none ? model::no_serving_overheads() : model::default_serving_overheads();
  if (f.enforce_eager) {
    p.overheads.cuda_graphs = u::Bytes{};
    p.overheads.origin += "; --enforce-eager: no CUDA graphs";
  }
  if (f.cuda_graph_gib) {
    if (*f.cuda_graph_gib < 0) bad("--cuda-graph-GiB", "must be ≥ 0");
    if (f.enforce_eager && *f.cuda_graph_gib > 0) bad("--cuda-graph-GiB", "--enforce-eager captures no CUDA graphs");
    p.overheads.cuda_graphs = u::gibibytes(*f.cuda_graph_gib);
    p.overheads.origin += fmt::format("; CUDA graphs {} GiB (--cuda-graph-GiB)", plain_number(*f.cuda_graph_gib));
  }
  if (f.activation_gib) {
    if (*f.activation_gib < 0) bad("--activation-GiB", "must be ≥ 0");
    p.overheads.activations = u::gibibytes(*f.activation_gib);
  }
  if (f.cudagraph_in_budget) {
    if (p.engine != model::MemoryEngine::vllm)
      bad("--cudagraph-in-budget", "only vLLM's gpu_memory_utilization has this switch");
    p.cuda_graphs_in_budget = *f.cudagraph_in_budget;
  }
  const auto batch = model::vllm_batch_defaults(gpu);
  p.max_num_batched_tokens = f.max_num_batched_tokens.value_or(batch.max_num_batched_tokens);
  p.max_num_seqs = f.max_num_seqs.value_or(batch.max_num_seqs);
  p.capacity = f.capacity.value_or(f.simple ? model::CapacityBasis::label : model::CapacityBasis::device);
  if (f.paging_overhead) {
    if (*f.paging_overhead < 0) bad("--paging-overhead", "must be ≥ 0 (a fraction of the KV, e.g. 0.3)");
    p.paging_overhead = *f.paging_overhead;
  }
  p.gpu_count = f.gpu_count.value_or(f.simple ? "pooled" : "layout") == "pooled" ? model::GpuCountMethod::pooled
                                                                                 : model::GpuCountMethod::layout;
  // The largest TP the GPU-count search tries: the GPU's scale-up domain from the node data.
  int domain = 0;
  std::string node_id;
  for (const auto& n : db.nodes)
    if (n.gpu == gpu.info.id && n.scale_up.domain_gpus > domain) {
      domain = n.scale_up.domain_gpus;
      node_id = n.info.id;
    }
  if (domain > 0) {
    p.max_tp = domain;
    p.max_tp_origin = fmt::format("scale-up domain of node {} ({})", node_id,
                                  db.find_node(node_id)->info.cite("/scale_up/domain_gpus"));
  }
  if (p.gpus && *p.gpus < 1) bad("--gpus", "must be ≥ 1");
  if (diags.has_errors()) return std::nullopt;
  return p;
}

}  // namespace gpuplan::app
