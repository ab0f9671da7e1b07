// The serving engines' memory rules, one policy per engine (engine_policy.hpp; sources in serving_memory.hpp:
// [vLLM-mem], [vLLM-cg], [SGL-mem]).
#include "engine_policy.hpp"

#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "serving_memory_internal.hpp"

namespace gpuplan::model {
namespace {

using units::Bytes;
using units::format;
using units::format_number;

using serving_memory_internal::both;
using serving_memory_internal::gib;

/// A plain runtime (the textbook): usable = fraction · capacity, everything (weights, overheads, KV) inside it.
class PlainPolicy final : public detail::EnginePolicy {
 public:
  void budget(StageMemory& m, const ServingMemoryPlan& plan, std::set<std::string>&) const override {
    m.budget = m.capacity * plan.memory_fraction;
    m.kv_pool = m.budget - (m.weights + m.activations + m.cuda_graphs + m.cuda_context + m.nccl);
  }
  Bytes pooled_fixed(const StageMemory& s0, const ServingMemoryPlan&) const override {
    return s0.activations + s0.cuda_graphs + s0.cuda_context + s0.nccl;
  }
  std::string no_kv_cache(const StageMemory& bind, const ServingMemoryPlan&, const std::string& on_stage) const override {
    return fmt::format("the weights {} and overheads {} leave no KV cache in the usable {} per GPU{}",
                       both(bind.weights), both(bind.activations + bind.cuda_graphs + bind.cuda_context + bind.nccl),
                       both(bind.budget), on_stage);
  }
  bool refuses_long_context() const override { return false; }
  void explain_budget(Derivation& b, const ServingMemoryPlan&) const override {
    b.formula = "KV pool = f·C − weights − activations − graphs − context − NCCL";
  }
};

/// vLLM's gpu_memory_utilization [vLLM-mem]: a fraction of the whole device, measured after CUDA and NCCL start;
/// CUDA graphs inside it from v0.21 [vLLM-cg].
class VllmPolicy final : public detail::EnginePolicy {
 public:
  void budget(StageMemory& m, const ServingMemoryPlan& plan, std::set<std::string>& refusals) const override {
    const double f = plan.memory_fraction;
    const Bytes C = m.capacity;
    m.budget = C * f;
    const Bytes inside = m.weights + m.activations + (plan.cuda_graphs_in_budget ? m.cuda_graphs : Bytes{});
    m.outside_budget = m.cuda_context + m.nccl + (plan.cuda_graphs_in_budget ? Bytes{} : m.cuda_graphs);
    m.kv_pool = m.budget - inside;
    const Bytes free_at_start = C - m.cuda_context - m.nccl;
    if (free_at_start < m.budget)
      refusals.insert(fmt::format(
          "vLLM refuses to start: free memory at start-up {} (capacity {} − CUDA context {} − NCCL {}) is less "
          "than gpu_memory_utilization {} × {} = {}; lower it to ≤ {}",
          gib(free_at_start), gib(C), gib(m.cuda_context), gib(m.nccl), format_number(f), gib(C), gib(m.budget),
          format_number(std::floor(free_at_start.raw() / C.raw() * 1000.0) / 1000.0)));
    else if (!plan.cuda_graphs_in_budget && m.outside_budget > C - m.budget)
      refusals.insert(fmt::format(
          "CUDA-graph capture runs out of memory: outside gpu_memory_utilization vLLM needs {} (context + NCCL + "
          "graphs) but only (1 − {}) × {} = {} is left",
          gib(m.outside_budget), format_number(f), gib(C), gib(C - m.budget)));
  }
  Bytes pooled_fixed(const StageMemory& s0, const ServingMemoryPlan& plan) const override {
    return s0.activations + (plan.cuda_graphs_in_budget ? s0.cuda_graphs : Bytes{});
  }
  std::string no_kv_cache(const StageMemory& bind, const ServingMemoryPlan& plan,
                          const std::string& on_stage) const override {
    return fmt::format("no memory left for the KV cache{}: gpu_memory_utilization {} × {} = {} minus "
                       "weights {} and activations {}{} (vLLM: \"No available memory for the cache blocks\")",
                       on_stage, format_number(plan.memory_fraction), gib(bind.capacity), gib(bind.budget),
                       gib(bind.weights), gib(bind.activations),
                       plan.cuda_graphs_in_budget ? fmt::format(" and CUDA graphs {}", gib(bind.cuda_graphs)) : "");
  }
  // vLLM's MLA backends need their own block size [vLLM-mla].
  void adjust_plan(const wl::TransformerArch& a, const hw::GpuSpec& gpu, ServingMemoryPlan& plan,
                   std::vector<std::string>& notes) const override {
    if (!a.mla) return;
    std::int64_t forced = 0;
    if (gpu.family == "Hopper" && plan.block_size % 64 != 0) forced = 64;
    if (gpu.family.rfind("Blackwell", 0) == 0 && plan.block_size % 128 != 0) forced = 128;
    if (forced > 0) {
      notes.push_back(fmt::format("vLLM forces KV block size {} for MLA on {} (FlashMLA on Hopper, CUTLASS MLA on "
                                  "Blackwell; vllm/platforms/cuda.py): block size {} → {}",
                                  forced, gpu.family, plan.block_size, forced));
      plan.block_size = forced;
    }
  }
  std::string sequence_too_long(const StageMemory& bind, const ServingMemoryPlan& plan) const override {
    return fmt::format(" (vLLM: \"The model's max seq len ({}) is larger than the maximum number of "
                       "tokens that can be stored in KV cache ({})\")",
                       plan.context, bind.kv_token_capacity);
  }
  void explain_budget(Derivation& b, const ServingMemoryPlan& plan) const override {
    b.formula = plan.cuda_graphs_in_budget
                    ? "KV pool = f·C − weights − activations − CUDA graphs ; context + NCCL outside f"
                    : "KV pool = f·C − weights − activations ; context + NCCL + CUDA graphs outside f";
    b.notes.push_back("vllm/v1/worker/gpu_worker.py: requested = total·gpu_memory_utilization is measured after "
                      "CUDA and NCCL init; KV = requested − (weights + peak activation + non-torch increase) "
                      "(vllm/utils/mem_utils.py memory_profiling); start-up fails if free < requested");
    b.notes.push_back(plan.cuda_graphs_in_budget
                          ? "CUDA-graph memory is estimated during profiling and counted inside the fraction "
                            "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, PR#30515, default on from v0.21)"
                          : "CUDA graphs are captured after the KV cache is allocated and live outside the fraction "
                            "(vLLM before v0.21, or VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0)");
  }
};

/// SGLang's mem_fraction_static [SGL-mem]: a fraction of the memory free before the weights load, for weights and
/// KV only; activations and CUDA graphs must fit in the rest.
class SglangPolicy final : public detail::EnginePolicy {
 public:
  void budget(StageMemory& m, const ServingMemoryPlan& plan, std::set<std::string>& refusals) const override {
    const Bytes base = m.capacity - m.cuda_context - m.nccl;
    m.budget = base * plan.memory_fraction;
    m.outside_budget = m.cuda_context + m.nccl;
    m.kv_pool = m.budget - m.weights;
    const Bytes reserve = base - m.budget;
    const Bytes act_graphs = m.activations + m.cuda_graphs;
    if (act_graphs > reserve)
      refusals.insert(fmt::format(
          "SGLang leaves (1 − mem_fraction_static) × {} = {} for activations and CUDA graphs but they need {}: "
          "expect an out-of-memory at run time; lower --mem-fraction-static to ≤ {}",
          gib(base), gib(reserve), gib(act_graphs),
          format_number(std::floor((1.0 - act_graphs.raw() / base.raw()) * 1000.0) / 1000.0)));
  }
  Bytes pooled_fixed(const StageMemory&, const ServingMemoryPlan&) const override { return Bytes{}; }
  std::string no_kv_cache(const StageMemory& bind, const ServingMemoryPlan&, const std::string& on_stage) const override {
    return fmt::format("no memory left for the KV cache{}: the mem_fraction_static share {} is less than "
                       "the weights {} (SGLang: \"Not enough memory. Please try to increase "
                       "--mem-fraction-static.\")",
                       on_stage, gib(bind.budget), gib(bind.weights));
  }
  void explain_budget(Derivation& b, const ServingMemoryPlan&) const override {
    b.formula = "base = C − context − NCCL ; KV pool = f·base − weights ; activations + CUDA graphs in (1 − f)·base";
    b.notes.push_back("sglang model_runner profile_max_num_token: rest = available_after_load − total·(1 − "
                      "mem_fraction_static), `total` being the free memory before the weights load");
  }
};

// SGLang derives its default from the GPU memory, chunked prefill and CUDA-graph batch; 0.88 is its fallback.
constexpr EngineMemoryKnob kKnobs[] = {
    {MemoryEngine::plain, "plain", "usable fraction", "usable fraction", "--usable-fraction", 1.0},
    {MemoryEngine::vllm, "vLLM", "gpu_memory_utilization", "gpu_memory_utilization", "--gpu-memory-utilization", 0.9},
    {MemoryEngine::sglang, "SGLang", "mem_fraction_static", "mem_fraction_static", "--mem-fraction-static", 0.88},
};

}  // namespace

std::string detail::EnginePolicy::sequence_too_long(const StageMemory&, const ServingMemoryPlan&) const { return {}; }
void detail::EnginePolicy::adjust_plan(const wl::TransformerArch&, const hw::GpuSpec&, ServingMemoryPlan&,
                                       std::vector<std::string>&) const {}

const detail::EnginePolicy& detail::engine_policy(MemoryEngine e) {
  static const PlainPolicy plain;
  static const VllmPolicy vllm;
  static const SglangPolicy sglang;
  switch (e) {
    case MemoryEngine::plain: return plain;
    case MemoryEngine::sglang: return sglang;
    case MemoryEngine::vllm: break;
  }
  return vllm;
}

const EngineMemoryKnob& engine_memory_knob(MemoryEngine e) {
  for (const auto& k : kKnobs)
    if (k.engine == e) return k;
  return kKnobs[1];
}

std::string_view to_string(MemoryEngine e) {
  switch (e) {
    case MemoryEngine::plain: return "plain";
    case MemoryEngine::vllm: return "vllm";
    case MemoryEngine::sglang: return "sglang";
  }
  return "?";
}

std::optional<MemoryEngine> parse_memory_engine(std::string_view s) {
  for (auto e : kMemoryEngines)
    if (s == to_string(e)) return e;
  return std::nullopt;
}

std::string describe_engine_budget(MemoryEngine e, double fraction, bool cuda_graphs_in_budget) {
  const EngineMemoryKnob& k = engine_memory_knob(e);
  if (e == MemoryEngine::plain) return fmt::format("{} {}", k.fraction_key, format_number(fraction));
  std::string s = fmt::format("{} {} {}", k.name, k.fraction_key, format_number(fraction));
  if (e == MemoryEngine::vllm) s += fmt::format(" (CUDA graphs {} the fraction)", cuda_graphs_in_budget ? "inside" : "outside");
  return s;
}

}  // namespace gpuplan::model
