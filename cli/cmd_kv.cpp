// `gpuplan kv`: KV cache per token, per sequence and per GPU; memory per GPU beside the weights under the serving
// engine's memory knob; max concurrency at a context, max context at a concurrency, and GPUs needed by memory.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

struct KvFlags {
  std::string model;
  std::string gpu = "h100-sxm5-80gb";
  int tp = 1, pp = 1;
  std::optional<long long> gpus;
  std::string kv_dtype = "bf16";
  std::optional<std::string> kv_scales;
  std::optional<double> kv_scale_bytes;
  std::string weight_dtype = "bf16";
  std::optional<long long> weight_group_size;
  std::optional<double> params;
  bool no_scale_overhead = false;
  long long context = 4096;
  long long concurrency = 1;
  std::optional<long long> block_size;
  long long prefix_tokens = 0;
  std::optional<std::string> engine;
  std::optional<double> gpu_memory_utilization, mem_fraction_static, usable_fraction;
  std::optional<bool> cudagraph_in_budget;
  bool enforce_eager = false;
  std::optional<double> cuda_graph_gib, activation_gib;
  std::optional<long long> max_num_batched_tokens, max_num_seqs;
  std::optional<std::string> overheads, capacity, gpu_count;
  std::optional<double> paging_overhead;
  bool simple = false;
};

std::string num(double v) { return fmt::format("{:.10g}", v); }
std::string both(u::Bytes b) { return fmt::format("{} ({})", u::format(b), u::format(b, u::BytePrefix::binary)); }
std::string gib(u::Bytes b) { return u::format(b, u::BytePrefix::binary); }
std::string count(std::int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", u::format_count(double(n)), n == 1 ? one : many);
}
std::string replicas_text(const model::ReplicaLayout& l) {
  return fmt::format("TP {} × PP {} × {} of {}", l.tp, l.pp, count(l.replicas, "replica", "replicas"),
                     count(l.max_concurrency, "sequence", "sequences"));
}

/// Builds the plan from the flags; diagnostics name the flag.
std::optional<model::ServingMemoryPlan> make_plan(const KvFlags& f, const hw::HardwareDb& db, const hw::GpuSpec& gpu,
                                                  Diagnostics& diags) {
  model::ServingMemoryPlan p;
  auto bad = [&](const char* flag, std::string msg) { diags.error("", flag, std::move(msg)); };
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
  std::optional<model::MemoryEngine> engine;
  if (f.engine) engine = model::parse_memory_engine(*f.engine);
  int knobs = int(f.gpu_memory_utilization.has_value()) + int(f.mem_fraction_static.has_value()) +
              int(f.usable_fraction.has_value());
  if (knobs > 1)
    bad("--gpu-memory-utilization",
        "give one of --gpu-memory-utilization (vLLM), --mem-fraction-static (SGLang), --usable-fraction (plain)");
  auto knob_engine = [&](model::MemoryEngine want, const char* flag) {
    if (engine && *engine != want)
      bad(flag, fmt::format("{} is a {} setting but --engine is {}", flag, model::to_string(want),
                            model::to_string(*engine)));
    engine = want;
  };
  if (f.gpu_memory_utilization) knob_engine(model::MemoryEngine::vllm, "--gpu-memory-utilization");
  if (f.mem_fraction_static) knob_engine(model::MemoryEngine::sglang, "--mem-fraction-static");
  if (f.usable_fraction) knob_engine(model::MemoryEngine::plain, "--usable-fraction");
  if (!engine) engine = f.simple ? model::MemoryEngine::plain : model::MemoryEngine::vllm;
  p.engine = *engine;
  switch (p.engine) {
    case model::MemoryEngine::vllm: p.memory_fraction = f.gpu_memory_utilization.value_or(0.9); break;
    // SGLang derives its default from the GPU memory, chunked prefill and CUDA-graph batch; 0.88 is its fallback.
    case model::MemoryEngine::sglang: p.memory_fraction = f.mem_fraction_static.value_or(0.88); break;
    case model::MemoryEngine::plain: p.memory_fraction = f.usable_fraction.value_or(1.0); break;
  }
  for (auto [flag, v] : {std::pair{"--gpu-memory-utilization", f.gpu_memory_utilization},
                         std::pair{"--mem-fraction-static", f.mem_fraction_static},
                         std::pair{"--usable-fraction", f.usable_fraction}})
    if (v && !(*v > 0.0 && *v <= 1.0)) bad(flag, fmt::format("{} is not a fraction in (0, 1]", num(*v)));

  // KV dtype and scales.
  const auto kvd = model::parse_store_dtype(f.kv_dtype);
  p.kv = model::default_kv_quant(*kvd);
  if (f.kv_scales) {
    const auto g = model::parse_kv_scale_granularity(*f.kv_scales);
    if (!model::is_quantized(*kvd) && *g != model::KvScaleGranularity::none)
      bad("--kv-scales", fmt::format("a {} KV cache has no quantisation scales; --kv-scales applies to fp8, int8 and "
                                     "int4",
                                     f.kv_dtype));
    p.kv.scales = *g;
    p.kv.origin = "user: --kv-scales " + *f.kv_scales;
  }
  if (f.kv_scale_bytes) {
    if (*f.kv_scale_bytes < 0) bad("--kv-scale-bytes", "must be ≥ 0");
    p.kv.scale_bytes = *f.kv_scale_bytes;
    p.kv.origin += "; --kv-scale-bytes " + num(*f.kv_scale_bytes);
  }

  // Weights.
  const auto wd = model::parse_store_dtype(f.weight_dtype);
  p.weights = model::default_weight_quant(*wd);
  if (f.weight_group_size) {
    if (!model::is_quantized(*wd))
      bad("--weight-group-size", fmt::format("{} weights have no quantisation groups", f.weight_dtype));
    if (*f.weight_group_size < 0)
      bad("--weight-group-size", "must be ≥ 1 (or 0 for one scale per output channel)");
    p.weights.group_size = *f.weight_group_size;
    p.weights.origin += fmt::format("; group size {} (--weight-group-size)", *f.weight_group_size);
  }
  if (f.params) {
    if (!(*f.params > 0)) bad("--params", fmt::format("{} is not a positive parameter count", num(*f.params)));
    p.nominal_params = *f.params;
  }
  p.weight_scale_overhead = !(f.no_scale_overhead || f.simple);

  // Simplifications and overheads.
  p.block_size = f.block_size.value_or(f.simple ? 1 : 16);
  if (f.block_size) p.engine_block_size = false;  // the user chose it
  if (f.simple && !f.block_size) p.engine_block_size = false;
  const std::string ovh = f.overheads.value_or(f.simple ? "none" : "default");
  p.overheads = ovh == "none" ? model::no_serving_overheads() : model::default_serving_overheads();
  if (f.enforce_eager) {
    p.overheads.cuda_graphs = u::Bytes{};
    p.overheads.origin += "; --enforce-eager: no CUDA graphs";
  }
  if (f.cuda_graph_gib) {
    if (*f.cuda_graph_gib < 0) bad("--cuda-graph-GiB", "must be ≥ 0");
    if (f.enforce_eager && *f.cuda_graph_gib > 0) bad("--cuda-graph-GiB", "--enforce-eager captures no CUDA graphs");
    p.overheads.cuda_graphs = u::gibibytes(*f.cuda_graph_gib);
    p.overheads.origin += fmt::format("; CUDA graphs {} GiB (--cuda-graph-GiB)", num(*f.cuda_graph_gib));
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
  p.capacity = f.capacity.value_or(f.simple ? "label" : "device") == "label" ? model::CapacityBasis::label
                                                                               : model::CapacityBasis::device;
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

ordered_json memory_json(const model::StageMemory& m) {
  return {{"stage", m.layers.stage},
          {"layers", m.layers.count},
          {"capacity_bytes", m.capacity.raw()},
          {"budget_bytes", m.budget.raw()},
          {"weights_bytes", m.weights.raw()},
          {"activations_bytes", m.activations.raw()},
          {"cuda_graphs_bytes", m.cuda_graphs.raw()},
          {"cuda_context_bytes", m.cuda_context.raw()},
          {"nccl_bytes", m.nccl.raw()},
          {"outside_budget_bytes", m.outside_budget.raw()},
          {"kv_pool_bytes", m.kv_pool.raw()},
          {"kv_used_bytes", m.kv_used.raw()},
          {"free_bytes", m.free.raw()},
          {"max_concurrency", m.max_concurrency},
          {"kv_token_capacity", m.kv_token_capacity}};
}

std::string engine_text(const model::ServingMemoryPlan& p) {
  switch (p.engine) {
    case model::MemoryEngine::vllm:
      return fmt::format("vLLM gpu_memory_utilization {} (CUDA graphs {} the fraction)", u::format_number(p.memory_fraction),
                         p.cuda_graphs_in_budget ? "inside" : "outside");
    case model::MemoryEngine::sglang:
      return fmt::format("SGLang mem_fraction_static {}", u::format_number(p.memory_fraction));
    case model::MemoryEngine::plain:
      return fmt::format("usable fraction {}", u::format_number(p.memory_fraction));
  }
  return "";
}

int run_kv(const GlobalOptions& g, const KvFlags& f) {
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  auto db = hw_io::load_hardware_db(*dir);
  if (!db.ok()) return report(db.diagnostics());
  auto lib = wl_io::load_model_library(*dir);
  if (!lib.ok()) return report(lib.diagnostics());
  auto m = wl_io::resolve_model(*lib, f.model);
  if (!m.ok()) return report(m.diagnostics());
  const hw::GpuSpec* gpu = db->find_gpu(f.gpu);
  if (gpu == nullptr) {
    diags.error("", "--gpu", fmt::format("unknown GPU '{}'{}", f.gpu, did_you_mean(f.gpu, db->gpu_names())));
    return report(diags);
  }
  const auto& arch = m->arch;
  auto plan = make_plan(f, *db, *gpu, diags);
  if (!plan) return report(diags);
  report(m.diagnostics());  // notes

  const Explain ex = g.explain ? Explain::on : Explain::off;
  const auto params = model::parameter_counts(arch, Explain::off);
  const auto r = model::serving_memory(arch, params, *gpu, *plan, ex);
  // With --simple, the same question without the simplifications, to show what they hide.
  std::optional<model::ServingMemory> fuller;
  if (f.simple) {
    model::ServingMemoryPlan full = *plan;
    full.engine = model::MemoryEngine::vllm;
    full.memory_fraction = 0.9;
    full.capacity = model::CapacityBasis::device;
    full.overheads = model::default_serving_overheads();
    full.weight_scale_overhead = true;
    full.nominal_params.reset();
    full.paging_overhead = 0.0;
    full.block_size = 16;
    full.engine_block_size = true;
    full.gpu_count = model::GpuCountMethod::layout;
    full.gpus.reset();
    fuller = model::serving_memory(arch, params, *gpu, full, Explain::off);
  }
  const auto& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  const auto& pl = r.plan;
  const Format fmt_ = parse_format(g.format);
  const int rc = r.ok ? kExitOk : kExitInfeasible;
  auto opt = [](const std::optional<std::int64_t>& v) -> ordered_json { return v ? ordered_json(*v) : ordered_json(); };

  if (fmt_ == Format::json) {
    ordered_json o;
    o["model"] = arch.id;
    o["gpu"] = gpu->info.id;
    o["layout"] = {{"tp", pl.tp}, {"pp", pl.pp}, {"gpus", pl.gpus ? ordered_json(*pl.gpus) : ordered_json()}};
    o["engine"] = {{"name", std::string(model::to_string(pl.engine))},
                   {"memory_fraction", pl.memory_fraction},
                   {"cuda_graphs_in_budget", pl.cuda_graphs_in_budget},
                   {"capacity_basis", pl.capacity == model::CapacityBasis::label ? "label" : "device"},
                   {"max_num_batched_tokens", pl.max_num_batched_tokens},
                   {"max_num_seqs", pl.max_num_seqs}};
    o["kv_dtype"] = std::string(model::to_string(pl.kv.dtype));
    o["kv_scales"] = std::string(model::to_string(pl.kv.scales));
    o["weight_dtype"] = std::string(model::to_string(pl.weights.dtype));
    o["context"] = pl.context;
    o["concurrency"] = pl.concurrency;
    o["block_size"] = pl.block_size;
    o["prefix_tokens"] = pl.prefix_tokens;
    o["kv_bytes_per_token"] = r.kv_bytes_per_token.raw();
    o["kv_bytes_per_token_per_gpu"] = r.kv_bytes_per_token_per_gpu.raw();
    o["kv_bytes_per_sequence"] = r.kv_bytes_per_sequence.raw();
    o["kv_bytes_per_sequence_per_gpu"] = r.kv_bytes_per_sequence_per_gpu.raw();
    o["kv_block_waste_bytes_per_sequence_per_gpu"] = bind.sequence.block_waste.raw();
    o["kv_expected_block_waste_bytes_per_sequence_per_gpu"] = bind.sequence.expected_block_waste.raw();
    o["kv_shared_prefix_bytes_per_gpu"] = bind.sequence.shared_prefix.raw();
    o["kv_heads_per_gpu"] = r.token.kv_heads_per_gpu;
    o["kv_replication"] = r.token.replication;
    o["kv_token_capacity"] = r.kv_token_capacity;
    o["max_concurrency"] = r.max_concurrency;
    o["max_context_tokens"] = r.max_context_tokens;
    o["max_context_limited_by"] = r.max_context_limit;
    o["gpus_needed"] = opt(r.gpus_needed);
    o["gpus_needed_pooled"] = opt(r.gpus_needed_pooled);
    o["gpus_needed_layout"] = r.best_layout ? ordered_json{{"tp", r.best_layout->tp}, {"pp", r.best_layout->pp},
                                                           {"replicas", r.best_layout->replicas},
                                                           {"sequences_per_replica", r.best_layout->max_concurrency},
                                                           {"gpus", r.best_layout->gpus()}}
                                            : ordered_json();
    o["weights_bytes_total"] = r.weights_total.raw();
    o["kv_bytes_total"] = r.kv_total.raw();
    o["memory_needed_bytes"] = r.memory_needed.raw();
    o["weights_bytes_per_gpu"] = bind.weights.raw();
    o["binding_stage"] = r.binding_stage;
    o["memory_per_gpu"] = memory_json(bind);
    ordered_json stages = ordered_json::array();
    for (const auto& s : r.stages) stages.push_back(memory_json(s));
    o["stages"] = stages;
    o["feasible"] = r.ok;
    o["reasons"] = r.reasons;
    o["notes"] = r.notes;
    if (fuller)
      o["fuller_model"] = {{"gpus_needed", opt(fuller->gpus_needed)},
                           {"memory_needed_bytes", fuller->memory_needed.raw()},
                           {"weights_bytes_total", fuller->weights_total.raw()},
                           {"kv_bytes_total", fuller->kv_total.raw()},
                           {"max_concurrency", fuller->max_concurrency},
                           {"weights_bytes_per_gpu", fuller->stages[std::size_t(fuller->binding_stage)].weights.raw()}};
    if (g.explain) o["derivation"] = derivation_json(r.derivation);
    out(o.dump(2) + "\n");
    return rc;
  }
  if (fmt_ == Format::csv) {
    Table t;
    t.columns = {{"model", "model"}, {"gpu", "gpu"}, {"tp", "tp", true}, {"pp", "pp", true},
                 {"kv_dtype", "kv dtype"}, {"weight_dtype", "weight dtype"}, {"context", "context", true},
                 {"concurrency", "concurrency", true}, {"kv_bytes_per_token", "KV B/token", true},
                 {"kv_bytes_per_sequence", "KV B/seq", true}, {"kv_bytes_per_sequence_per_gpu", "KV B/seq/GPU", true},
                 {"weights_bytes_per_gpu", "weights B/GPU", true}, {"kv_pool_bytes_per_gpu", "KV pool B/GPU", true},
                 {"kv_token_capacity", "KV tokens", true}, {"max_concurrency", "max concurrency", true},
                 {"max_context_tokens", "max context", true}, {"gpus_needed", "GPUs", true},
                 {"memory_needed_bytes", "memory needed B", true}, {"feasible", "feasible"}};
    t.rows.push_back({arch.id, gpu->info.id, std::to_string(pl.tp), std::to_string(pl.pp),
                      std::string(model::to_string(pl.kv.dtype)), std::string(model::to_string(pl.weights.dtype)),
                      std::to_string(pl.context), std::to_string(pl.concurrency), num(r.kv_bytes_per_token.raw()),
                      num(r.kv_bytes_per_sequence.raw()), num(r.kv_bytes_per_sequence_per_gpu.raw()),
                      num(bind.weights.raw()), num(bind.kv_pool.raw()), std::to_string(r.kv_token_capacity),
                      std::to_string(r.max_concurrency), std::to_string(r.max_context_tokens),
                      r.gpus_needed ? std::to_string(*r.gpus_needed) : "", num(r.memory_needed.raw()),
                      r.ok ? "true" : "false"});
    out(t.render(Format::csv));
    return rc;
  }

  // text / md
  std::vector<Section> sec;
  Section head{fmt::format("{} on {}", arch.name.empty() ? arch.id : arch.name, gpu->info.name), {}};
  head.rows = {{"layout", fmt::format("TP {} · PP {}{}", pl.tp, pl.pp,
                                      pl.gpus ? fmt::format(" · {} GPUs", *pl.gpus) : std::string())},
               {"engine", engine_text(pl)},
               {"workload", fmt::format("{} × {} tokens{}", count(pl.concurrency, "sequence", "sequences"),
                                        u::format_count(double(pl.context)),
                                        pl.prefix_tokens > 0 ? fmt::format(", {} shared prefix tokens",
                                                                           u::format_count(double(pl.prefix_tokens)))
                                                             : std::string())},
               {"dtypes", fmt::format("KV {}{}, weights {}{}", model::to_string(pl.kv.dtype),
                                      model::is_quantized(pl.kv.dtype)
                                          ? fmt::format(" ({} scales)", model::to_string(pl.kv.scales))
                                          : std::string(),
                                      model::to_string(pl.weights.dtype),
                                      pl.nominal_params ? fmt::format(" × {}B nominal parameters",
                                                                      u::format_number(*pl.nominal_params / 1e9, 4))
                                                        : std::string())}};
  sec.push_back(head);
  if (!r.ok) {
    Section s{"Infeasible", {}};
    for (const auto& x : r.reasons) s.rows.emplace_back("-", x);
    sec.push_back(s);
  }
  Section kv{"KV cache", {}};
  kv.rows = {{"per token (whole model)", both(r.kv_bytes_per_token)},
             {"per token per GPU",
              r.token.mla ? fmt::format("{} (the MLA latent, whole on each of the {} TP ranks)",
                                        both(r.kv_bytes_per_token_per_gpu), pl.tp)
                          : fmt::format("{} ({} of {} KV heads per GPU{})", both(r.kv_bytes_per_token_per_gpu),
                                        u::format_number(r.token.kv_heads_per_gpu),
                                        u::format_number(r.token.kv_heads_total),
                                        r.token.replication > 1
                                            ? fmt::format(", each on {} ranks", r.token.replication)
                                            : std::string())},
             {fmt::format("per sequence of {}", u::format_count(double(pl.context))), both(r.kv_bytes_per_sequence)},
             {"per sequence per GPU", fmt::format("{} in blocks of {} ({} in the last, partly filled blocks; {} "
                                                  "expected over random lengths)",
                                                  both(r.kv_bytes_per_sequence_per_gpu), pl.block_size,
                                                  u::format(bind.sequence.block_waste),
                                                  u::format(bind.sequence.expected_block_waste))}};
  if (pl.prefix_tokens > 0)
    kv.rows.emplace_back("shared prefix per GPU", fmt::format("{} stored once; each sequence adds {}",
                                                              both(bind.sequence.shared_prefix),
                                                              both(bind.sequence.unique)));
  if (pl.paging_overhead > 0)
    kv.rows.emplace_back("paging overhead", u::format(u::Ratio(pl.paging_overhead)) + " added to the KV");
  sec.push_back(kv);

  Section mem{pl.pp > 1 ? fmt::format("Memory per GPU (stage {} of {}, the one that holds the fewest sequences)",
                                      r.binding_stage, pl.pp)
                        : std::string("Memory per GPU"),
              {}};
  mem.rows = {{"capacity", fmt::format("{}{}", both(bind.capacity),
                                       pl.capacity == model::CapacityBasis::label ? " (vendor label)" : " (device)")},
              {"engine budget", both(bind.budget)},
              {"weights", both(bind.weights)},
              {"activations (peak)", gib(bind.activations)},
              {"CUDA graphs", gib(bind.cuda_graphs)},
              {"CUDA context", gib(bind.cuda_context)},
              {"NCCL buffers", gib(bind.nccl)}};
  if (bind.outside_budget.raw() > 0) mem.rows.emplace_back("  of which outside the fraction", gib(bind.outside_budget));
  mem.rows.emplace_back("KV pool", fmt::format("{} = {} tokens", both(bind.kv_pool),
                                               u::format_count(double(bind.kv_token_capacity))));
  mem.rows.emplace_back(fmt::format("KV of {}", count(pl.concurrency, "sequence", "sequences")), both(bind.kv_used));
  mem.rows.emplace_back("KV pool left", both(bind.free));
  mem.rows.emplace_back("total with this workload",
                        fmt::format("{} of {}", both(bind.weights + bind.activations + bind.cuda_graphs +
                                                     bind.cuda_context + bind.nccl + bind.kv_used),
                                    both(bind.capacity)));
  sec.push_back(mem);

  Section cap{"Capacity", {}};
  cap.rows = {{fmt::format("max concurrency at {} tokens", u::format_count(double(pl.context))),
               fmt::format("{} per replica (TP {} × PP {})", count(r.max_concurrency, "sequence", "sequences"),
                           pl.tp, pl.pp)},
              {fmt::format("max context at {}", count(pl.concurrency, "sequence", "sequences")),
               fmt::format("{} tokens (limited by {})", u::format_count(double(r.max_context_tokens)),
                           r.max_context_limit)},
              {"memory needed (weights + KV)", fmt::format("{} = {} + {}", both(r.memory_needed), u::format(r.weights_total),
                                                           u::format(r.kv_total))}};
  std::string layout_line = r.best_layout ? fmt::format("{} ({})", r.best_layout->gpus(), replicas_text(*r.best_layout))
                                          : "no layout holds one sequence";
  std::string pooled_line = r.gpus_needed_pooled ? fmt::format("{} (⌈{} / {} usable per GPU⌉)", *r.gpus_needed_pooled,
                                                               u::format(r.memory_needed), u::format(r.usable_per_gpu_pooled))
                                                  : "-";
  if (pl.gpu_count == model::GpuCountMethod::pooled) {
    cap.rows.emplace_back("GPUs needed by memory", pooled_line);
    cap.rows.emplace_back("  as whole-sequence replicas", layout_line);
  } else {
    cap.rows.emplace_back("GPUs needed by memory", layout_line);
    cap.rows.emplace_back("  pooled (textbook)", pooled_line);
  }
  sec.push_back(cap);
  if (fuller) {
    Section fs{"Without the simplifications (vLLM 0.9, device memory, overheads, scales, blocks of 16)", {}};
    const auto& fb = fuller->stages[std::size_t(fuller->binding_stage)];
    fs.rows = {{"weights", fmt::format("{} (here {})", u::format(fuller->weights_total), u::format(r.weights_total))},
               {"KV", fmt::format("{} (here {})", u::format(fuller->kv_total), u::format(r.kv_total))},
               {"KV pool per GPU", fmt::format("{} at TP {} × PP {}", both(fb.kv_pool), pl.tp, pl.pp)},
               {"max concurrency", u::format_count(double(fuller->max_concurrency))},
               {"GPUs needed by memory",
                fuller->best_layout ? fmt::format("{} ({})", fuller->best_layout->gpus(),
                                                  replicas_text(*fuller->best_layout))
                                    : std::string("no layout holds one sequence")}};
    sec.push_back(fs);
  }
  if (!r.notes.empty()) {
    Section n{"Notes", {}};
    for (const auto& x : r.notes) n.rows.emplace_back("-", x);
    sec.push_back(n);
  }
  out(render_sections(sec, fmt_));
  if (g.explain) out(render_derivation(r.derivation, fmt_));
  return rc;
}

}  // namespace

void register_kv(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<KvFlags>();
  auto* c = app.add_subcommand("kv", "KV cache per token/sequence/GPU, memory beside the weights, max concurrency and "
                                     "context, GPUs needed by memory");
  c->add_option("--model,-m", f->model, "model: library id or path to a config.json")->required();
  c->add_option("--gpu", f->gpu, "GPU id or alias")->capture_default_str();
  c->add_option("--tp", f->tp, "tensor parallel")->check(CLI::Range(1, 1024))->capture_default_str();
  c->add_option("--pp", f->pp, "pipeline parallel")->check(CLI::Range(1, 1024))->capture_default_str();
  c->add_option("--gpus", f->gpus, "GPUs available (whole TP×PP replicas): check the concurrency fits on them");
  c->add_option("--context", f->context, "tokens per sequence (prompt + output)")
      ->check(CLI::Range(1LL, 100'000'000LL))
      ->capture_default_str();
  c->add_option("--concurrency", f->concurrency, "concurrent sequences")
      ->check(CLI::Range(1LL, 1'000'000'000LL))
      ->capture_default_str();
  c->add_option("--block-size", f->block_size, "tokens per KV block (default 16; 1 = contiguous)")
      ->check(CLI::Range(1LL, 1'000'000LL));
  c->add_option("--prefix-tokens", f->prefix_tokens, "prompt prefix shared by all sequences, stored once")
      ->check(CLI::Range(0LL, 100'000'000LL))
      ->capture_default_str();
  c->add_option("--kv-dtype", f->kv_dtype, "KV cache element type")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8", "int8", "int4"}))
      ->capture_default_str();
  c->add_option("--kv-scales", f->kv_scales, "KV scale granularity (default: per-tensor for fp8, per-token-head for int8/int4)")
      ->check(CLI::IsMember({"none", "per-tensor", "per-head", "per-token-head"}));
  c->add_option("--kv-scale-bytes", f->kv_scale_bytes, "bytes per per-token-head scale group (default 4: fp16 scale + zero)");
  c->add_option("--weight-dtype", f->weight_dtype, "weight element type")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp8", "int8", "int4"}))
      ->capture_default_str();
  c->add_option("--weight-group-size", f->weight_group_size, "weights per scale group (int4 default 128; 0 = per channel)");
  c->add_option("--params", f->params, "nominal parameter count for the weights, e.g. 7e9 (textbook)");
  c->add_flag("--no-scale-overhead", f->no_scale_overhead, "nominal bytes per weight, no quantisation scales");
  c->add_option("--engine", f->engine, "memory semantics: vllm (default), sglang, plain")
      ->check(CLI::IsMember({"vllm", "sglang", "plain"}));
  c->add_option("--gpu-memory-utilization", f->gpu_memory_utilization,
                "vLLM: fraction of total device memory for weights, activations and KV (default 0.9)");
  c->add_option("--mem-fraction-static", f->mem_fraction_static,
                "SGLang: fraction of the pre-load free memory for weights and KV (default 0.88)");
  c->add_option("--usable-fraction", f->usable_fraction, "plain: fraction of capacity usable for everything (default 1)");
  c->add_option("--cudagraph-in-budget", f->cudagraph_in_budget,
                "vLLM: CUDA graphs counted inside gpu_memory_utilization (true from v0.21; false before)");
  c->add_flag("--enforce-eager", f->enforce_eager, "no CUDA graphs");
  c->add_option("--cuda-graph-GiB", f->cuda_graph_gib, "CUDA-graph memory per GPU (default 1 GiB)");
  c->add_option("--activation-GiB", f->activation_gib, "peak activation memory per GPU, e.g. from vLLM's log");
  c->add_option("--max-num-batched-tokens", f->max_num_batched_tokens, "tokens of the profiling pass (vLLM default)")
      ->check(CLI::Range(1LL, 100'000'000LL));
  c->add_option("--max-num-seqs", f->max_num_seqs, "sequences of the profiling sampler pass (vLLM default)")
      ->check(CLI::Range(1LL, 1'000'000LL));
  c->add_option("--overheads", f->overheads, "runtime overheads: default or none")
      ->check(CLI::IsMember({"default", "none"}));
  c->add_option("--capacity", f->capacity, "GPU capacity: device (driver-reported) or label (vendor GB)")
      ->check(CLI::IsMember({"device", "label"}));
  c->add_option("--paging-overhead", f->paging_overhead, "flat fraction added to the KV (textbook, e.g. 0.3)");
  c->add_option("--gpu-count", f->gpu_count, "layout (whole-sequence replicas) or pooled (textbook)")
      ->check(CLI::IsMember({"layout", "pooled"}));
  c->add_flag("--simple", f->simple,
              "textbook back-of-envelope: vendor GB, no overheads, nominal weight bytes, contiguous KV, pooled GPU count");
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation of every number");
  c->callback([&g, f, &rc] { rc = run_kv(g, *f); });
}

}  // namespace gpuplan::cli
