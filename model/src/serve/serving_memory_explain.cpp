// The --explain tree of serving_memory (serving_memory.hpp): the KV per sequence, the weights per GPU, the engine's
// overheads, the memory budget and the GPUs the model needs, each a node under the root.
#include "serving_memory_internal.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/memory.hpp"
#include "runtime_context.hpp"
#include "engine_policy.hpp"

namespace gpuplan::model {
namespace {

/// The KV-per-sequence node: blocks per layer kind, the shared prefix, block rounding.
Derivation explain_sequence(const wl::TransformerArch& a, const LayoutEval& e, const ServingMemory& r) {
  const ServingMemoryPlan& plan = r.plan;
  const StageMemory& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  const Origin cfg = Origin::model_config(a.source);
  Derivation sq;
  sq.id = "kv.sequence";
  sq.title = fmt::format("KV per sequence on one GPU{}", plan.pp > 1 ? fmt::format(" (stage {})", bind.layers.stage) : "");
  sq.formula = "per layer: blocks = ⌈s/B⌉ (full) or min(⌈s/B⌉, ⌈(W−1)/B⌉ + 1) (sliding) ; bytes = Σ blocks·B·kv_layer ; "
               "shared prefix ⌊P/B⌋ blocks on full layers stored once ; expected waste (B−1)/2 tokens per layer";
  sq.inputs = {{"B", std::to_string(plan.block_size), "tokens per KV block", Origin::user("--block-size")},
               {"P", format_count(double(plan.prefix_tokens)), "shared prefix tokens", Origin::user("--prefix-tokens")},
               {"L_full", std::to_string(bind.layers.full()), "full-attention layers on this GPU", cfg},
               {"L_sliding", std::to_string(bind.layers.sliding),
                a.local_is_chunked() ? "chunked-attention layers on this GPU" : "sliding-window layers on this GPU", cfg},
               {"W", format_count(double(a.local_span())),
                a.local_is_chunked() ? "attention chunk (a chunked layer holds ⌈W/B⌉ blocks at most)" : "sliding window",
                cfg},
               {"kv_layer", format(e.token.per_layer), "KV per token per layer per GPU", Origin::derived("kv.token")}};
  sq.result = fmt::format("{} per sequence ({} exact + {} in partly filled blocks; {} expected over random "
                          "lengths); shared prefix {}; each further sequence adds {}",
                          both(bind.sequence.per_sequence), format(bind.sequence.exact),
                          format(bind.sequence.block_waste), format(bind.sequence.expected_block_waste),
                          format(bind.sequence.shared_prefix), format(bind.sequence.unique));
  sq.notes.push_back("PagedAttention wastes only the last, partly filled block of a sequence (Kwon et al. 2023, "
                     "arXiv:2309.06180 §4.2); prefix caching shares whole blocks only (§4.3; vLLM hashes full blocks)");
  if (plan.paging_overhead > 0)
    sq.notes.push_back(fmt::format("flat paging overhead {} on the KV (the textbook's allowance; PagedAttention's own "
                                   "waste is the block rounding above)",
                                   format(units::Ratio(plan.paging_overhead))));
  return sq;
}

/// The weights node: per GPU on the binding stage and for the whole model.
Derivation explain_weights(const Ctx& c, const ServingMemory& r) {
  const wl::TransformerArch& a = c.a;
  const ParameterCounts& params = c.p;
  const ServingMemoryPlan& plan = r.plan;
  const StageMemory& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  const Origin cfg = Origin::model_config(a.source);
  Derivation w;
  w.id = "weights";
  w.title = "Weights per GPU";
  if (plan.nominal_params) {
    w.formula = "weights per GPU = N·b_w / (t·p)";
    w.inputs = {{"N", format_number(*plan.nominal_params), "nominal parameters", Origin::user("--params")}};
  } else {
    w.formula = "Σ_layers [(P − P_kv − P_repl)/t + P_kv·heads_gpu/n_kv + P_repl]·b_w + P_small·b_16 + (V·h/t)·b_16 "
                "for the embedding (first stage) and LM head (last stage)";
    w.inputs = {{"P_total", format_count(double(params.total)), "parameters", Origin::derived("params")},
                {"P_repl", format_count(c.dense.replicated),
                 c.a.dsa ? "replicated on every TP rank per layer (MLA down-projections, DSA indexer)"
                         : "replicated on every TP rank per layer (MLA down-projections)",
                 Origin::constant("vllm/model_executor/models/deepseek_v2.py: ReplicatedLinear")},
                {"P_kv", format_count(c.dense.kv_heads), "k/v projection weights per layer", cfg}};
    w.notes.push_back("embeddings, LM head, norms and MoE routers stay 16-bit; experts are split over TP (EP gives "
                      "the same bytes per GPU)");
    if (params.vision > 0)
      w.notes.push_back(fmt::format("the vision tower's {} parameters: 16-bit, split over TP, on the first stage",
                                    format_count(double(params.vision))));
  }
  w.inputs.push_back({"b_w", format_number(c.wq_bytes, 6),
                      fmt::format("bytes per {} weight{}", to_string(plan.weights.dtype),
                                  plan.weight_scale_overhead && is_quantized(plan.weights.dtype)
                                      ? fmt::format(" incl. scales (group {}, {} B per group)",
                                                    plan.weights.group_size > 0 ? std::to_string(plan.weights.group_size)
                                                                                : std::string("= output channel"),
                                                    format_number(plan.weights.group_bytes))
                                      : std::string(" (nominal)")),
                      Origin::assumption(plan.weights.origin)});
  w.result = fmt::format("{} per GPU on stage {}; {} for the whole model", both(bind.weights), bind.layers.stage,
                         both(r.weights_total));
  w.set(bind.weights.raw(), Unit::bytes);
  return w;
}

/// The runtime overheads node: CUDA context, NCCL, CUDA graphs, peak activations.
Derivation explain_overheads(const Ctx& c, const ServingMemory& r) {
  const ServingMemoryPlan& plan = r.plan;
  const StageMemory& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  Derivation o;
  o.id = "overheads";
  o.title = "Runtime overheads per GPU";
  o.formula = "context + NCCL·communicators + CUDA graphs + peak activations";
  o.inputs = {{"context", gib(plan.overheads.cuda_context), "CUDA context + cuBLAS workspace",
               context_origin(plan.overheads.cuda_context, c.gpu, plan.overheads.origin)},
              {"nccl", gib(plan.overheads.nccl_per_communicator), "NCCL buffers per communicator",
               Origin::assumption(plan.overheads.origin)},
              {"comms", std::to_string(communicators(plan.tp, plan.pp)), "communicators (TP, PP)", Origin::derived()},
              {"graphs", gib(plan.overheads.cuda_graphs), "CUDA graphs", Origin::assumption(plan.overheads.origin)},
              {"act", gib(c.activations), "peak activations of the profiling pass",
               plan.overheads.activations ? Origin::user("--activation-GiB")
               : plan.overheads.estimate_activations
                   ? Origin::assumption(fmt::format("estimate (serving_activation_peak): {} batched tokens, {} "
                                                    "sequences (vLLM defaults)",
                                                    plan.max_num_batched_tokens, plan.max_num_seqs))
                   : Origin::assumption(plan.overheads.origin)}};
  o.set((bind.cuda_context + bind.nccl + bind.cuda_graphs + bind.activations).raw(), Unit::bytes_binary);
  return o;
}

/// The engine's memory budget node: what the fraction covers under vLLM, SGLang or a plain runtime.
Derivation explain_budget(const Ctx& c, const ServingMemory& r) {
  const hw::GpuSpec& gpu = c.gpu;
  const ServingMemoryPlan& plan = r.plan;
  const StageMemory& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  const std::string cap_ref = plan.capacity == CapacityBasis::label
                                  ? gpu.info.cite("/memory/capacity_GB")
                                  : (gpu.memory.device_reported ? gpu.info.cite("/memory/device_reported_MiB")
                                                                : gpu.info.cite("/memory/capacity_GB"));
  Derivation b;
  b.id = "budget";
  b.title = fmt::format("Engine memory budget ({})", to_string(plan.engine));
  const EngineMemoryKnob& knob = engine_memory_knob(plan.engine);
  b.inputs = {{"C", gib(c.capacity), plan.capacity == CapacityBasis::label ? "vendor capacity label (asked for)" : capacity_basis(gpu),
               Origin::datasheet(cap_ref)},
              {"f", format_number(plan.memory_fraction), std::string(knob.fraction_label),
               Origin::user(std::string(knob.fraction_flag))}};
  detail::engine_policy(plan.engine).explain_budget(b, plan);
  b.result = fmt::format("budget {}; KV pool {} per GPU ({} tokens)", gib(bind.budget), gib(bind.kv_pool),
                         format_count(double(bind.kv_token_capacity)));
  return b;
}

/// The GPUs-needed node: the best layout and the pooled count.
Derivation explain_gpus(const ServingMemory& r) {
  const ServingMemoryPlan& plan = r.plan;
  Derivation g;
  g.id = "gpus";
  g.title = "GPUs needed by memory";
  g.formula = "layout: min over TP×PP of TP·PP·⌈n / max_concurrency(TP, PP)⌉ ; pooled: ⌈(weights + n·KV_seq·(1 + p_ovh)) / "
              "usable per GPU⌉";
  g.inputs = {{"weights", both(r.weights_total), "all weights", Origin::derived("weights")},
              {"KV", both(r.kv_total), "n sequences at s tokens, whole model", Origin::derived("kv.sequence")},
              {"usable", both(r.usable_per_gpu_pooled), "budget per GPU less its fixed overheads", Origin::derived("budget")},
              {"TP_max", std::to_string(plan.max_tp), "largest TP tried", Origin::assumption(plan.max_tp_origin)}};
  g.result = fmt::format("layout: {}; pooled: {} (memory needed {})",
                         r.best_layout ? fmt::format("{} GPUs (TP {} × PP {} × {} replicas of {} sequences)",
                                                     r.best_layout->gpus(), r.best_layout->tp, r.best_layout->pp,
                                                     r.best_layout->replicas, r.best_layout->max_concurrency)
                                       : std::string("none holds one sequence"),
                         r.gpus_needed_pooled ? std::to_string(*r.gpus_needed_pooled) : std::string("-"),
                         both(r.memory_needed));
  g.notes.push_back("the pooled count lets a sequence's KV spread over GPUs of different replicas; a real replica holds "
                    "whole sequences, so the layout count can be higher");
  return g;
}

}  // namespace

namespace serving_memory_internal {

/// The --explain tree of serving_memory.
void explain_serving_memory(const Ctx& c, const LayoutEval& e, ServingMemory& r) {
  const wl::TransformerArch& a = c.a;
  const hw::GpuSpec& gpu = c.gpu;
  const ServingMemoryPlan& plan = r.plan;
  Derivation& root = r.derivation;
  root.id = "kv";
  root.title = fmt::format("KV cache and serving memory: {} on {}", a.name.empty() ? a.id : a.name, gpu.info.name);
  root.formula = "max concurrency = ⌊(KV pool/(1 + p_ovh) − shared prefix) / KV per sequence⌋ ; KV pool = engine "
                 "budget − weights − overheads inside it";
  root.inputs = {{"t", std::to_string(plan.tp), "tensor parallel", Origin::user("--tp")},
                 {"p", std::to_string(plan.pp), "pipeline parallel", Origin::user("--pp")},
                 {"s", format_count(double(plan.context)), "tokens per sequence", Origin::user("--context")},
                 {"n", format_count(double(plan.concurrency)), "concurrent sequences", Origin::user("--concurrency")}};
  root.result = fmt::format("{} sequences of {} tokens per replica; {} tokens at {} sequences; {} GPUs by memory",
                            r.max_concurrency, format_count(double(plan.context)),
                            format_count(double(r.max_context_tokens)), r.plan.concurrency,
                            r.gpus_needed ? std::to_string(*r.gpus_needed) : std::string("no layout"));
  root.children.push_back(e.token.derivation);
  root.children.push_back(explain_sequence(a, e, r));
  root.children.push_back(explain_weights(c, r));
  root.children.push_back(explain_overheads(c, r));
  root.children.push_back(explain_budget(c, r));
  root.children.push_back(explain_gpus(r));
  root.notes = r.notes;
}

}  // namespace serving_memory_internal

}  // namespace gpuplan::model
