#pragma once
// Internal to gpuplan::model: training memory per GPU as arithmetic over cached inputs. training_memory (memory.cpp)
// builds the inputs, explain_memory (memory_explain.cpp) adds the derivation; FastTrainingEvaluator (search.cpp)
// caches the inputs per key — the layer sums per (tp, sp), the stage shapes per (pp, v) — and calls the same
// memory_core, so both paths give bit-identical numbers.
#include <cstdint>

#include "gpuplan/model/memory.hpp"
#include "memory_activations.hpp"

namespace gpuplan::model::detail {

/// Parameters of one layer: `dense` is replicated over EP (attention, norms, dense FFN or router + shared experts),
/// `expert` are the routed experts (split over EP).
struct LayerParams {
  double dense = 0.0;
  double expert = 0.0;
};

/// What the memory model needs of the layers a pipeline stage holds: how many of each kind, and their parameters
/// (summed in layer order, before the embedding and LM head are added).
struct StageShape {
  int index = 0;
  bool first = false, last = false;
  std::int64_t layers = 0, moe_layers = 0;
  double p_dense = 0.0, p_expert = 0.0;
};

/// Stage `i` of `p` with `v` model chunks per stage (Megatron's interleaved assignment; v = 1 is plain 1F1B).
StageShape stage_shape(const wl::TransformerArch& a, const ParameterCounts& params, int p, int v, int i);

/// Parameters of a dense and of an MoE layer (every layer of a kind holds the same).
struct LayerKinds {
  LayerParams dense, moe;
};
LayerKinds layer_kinds(const wl::TransformerArch& a, const ParameterCounts& params);

/// Saved activations per token of a dense and of an MoE layer. Depends on (tp, sp) and the fixed plan fields.
struct LayerSums {
  LayerSum dense, moe;
};
LayerSums layer_sums(const Ctx& c);

/// One stage's memory (bytes); the fields training_memory reports and explains.
struct StageMemory {
  StageShape shape;
  double p_dense = 0.0, p_expert = 0.0;  // parameters of the stage (before TP/EP), embedding and head included
  double largest_layer_gpu = 0.0;        // parameters per GPU of the stage's largest layer
  double inflight_mb = 1.0;              // micro-batches whose activations the stage holds at its peak
  double layer_factor = 1.0;             // multiplier on Σ_stage-layers stored bytes (chunks in flight / v)
  double stored_layers = 0.0, extra_first = 0.0, extra_last = 0.0, working_set = 0.0, logits_b = 0.0;
  double weights = 0.0, grads = 0.0, master = 0.0, opt = 0.0, gathered_w = 0.0, gathered_g = 0.0;
  double activations = 0.0, nccl = 0.0, ctx = 0.0, frag = 0.0, total = 0.0;
  double host = 0.0;  // master weights + optimizer states kept in host memory (CPU offload), per GPU
  double amp_copies = 0.0;     // PyTorch autocast's bf16 copies of the GEMM weights, kept for the backward
  double fp8_cache = 0.0;      // FP8 GEMMs: the quantised weights (and their transposes) cached across micro-batches
  double lora_adapters = 0.0;  // LoRA adapter parameters per GPU of the stage (0 without LoRA)
  bool grads_at_peak = true;   // false: a PyTorch loop whose peak is the backward's start (no .grad allocated yet)
  bool acts_at_peak = true;    // false: a PyTorch loop whose peak is the backward's end (every saved tensor freed)
};

struct MemoryCore {
  StageMemory first, last;
  bool two_stages = false;
  double n_dense = 1.0, n_expert = 1.0;  // ZeRO shard groups
  double comms = 0.0;                    // NCCL communicators
  [[nodiscard]] const StageMemory& heaviest() const { return two_stages && last.total > first.total ? last : first; }
};

/// The memory of the first and the last pipeline stage (training_memory documents the formulas).
void memory_core(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                 const RuntimeOverheads& overheads, const Ctx& c, const LayerKinds& kinds, const LayerSums& sums,
                 const StageShape& first, const StageShape& last, MemoryCore& out);

/// The --explain derivation tree of training_memory (memory_explain.cpp): fills r.derivation from the evaluated stages
/// and the parts of `r` already filled (its totals, capacity and fit).
void explain_memory(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                    const hw::GpuSpec& gpu, const RuntimeOverheads& overheads, ActivationLayout layout, const Ctx& c,
                    const MemoryCore& core, TrainingMemory& r);

}  // namespace gpuplan::model::detail
