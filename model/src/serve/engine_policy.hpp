#pragma once
// The serving engines' memory rules, one policy per engine (issue #20, deliverable 4: adding an engine is one place).
// Each policy says how its memory fraction is applied to one GPU, what lives outside the fraction, when the engine
// refuses to start or runs out of memory, and how its budget is explained. Sources: serving_memory.hpp ([vLLM-mem],
// [vLLM-cg], [SGL-mem]). Internal to gpuplan_model.
#include <set>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/model/serving_memory.hpp"

namespace gpuplan::model::detail {

class EnginePolicy {
 public:
  virtual ~EnginePolicy() = default;
  /// Sets `m.budget`, `m.outside_budget` and `m.kv_pool` of one stage whose capacity, weights, activations, CUDA
  /// graphs, CUDA context and NCCL are set; a start-up refusal or a run-time out-of-memory goes into `refusals`.
  virtual void budget(StageMemory& m, const ServingMemoryPlan& plan, std::set<std::string>& refusals) const = 0;
  /// The fixed overheads counted inside the budget (the textbook's pooled count: usable = budget − these).
  [[nodiscard]] virtual units::Bytes pooled_fixed(const StageMemory& s0, const ServingMemoryPlan& plan) const = 0;
  /// Why no KV cache is left on the binding stage (`on_stage`: "" or " on stage N"), in the engine's own words.
  [[nodiscard]] virtual std::string no_kv_cache(const StageMemory& bind, const ServingMemoryPlan& plan,
                                                const std::string& on_stage) const = 0;
  /// The engine's own message when one sequence does not fit in the pool ("" when it has none).
  [[nodiscard]] virtual std::string sequence_too_long(const StageMemory& bind, const ServingMemoryPlan& plan) const;
  /// Whether the engine refuses a context beyond the model's max_position_embeddings (a plain runtime only notes it).
  [[nodiscard]] virtual bool refuses_long_context() const { return true; }
  /// The engine's own changes to the plan before it is priced (vLLM's MLA block size), each with a note.
  virtual void adjust_plan(const wl::TransformerArch& a, const hw::GpuSpec& gpu, ServingMemoryPlan& plan,
                           std::vector<std::string>& notes) const;
  /// The budget node's formula and notes.
  virtual void explain_budget(Derivation& b, const ServingMemoryPlan& plan) const = 0;
};

const EnginePolicy& engine_policy(MemoryEngine e);

}  // namespace gpuplan::model::detail
