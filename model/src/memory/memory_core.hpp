#pragma once
// Internal to gpuplan::model: training memory per GPU as arithmetic over cached inputs. training_memory (memory.cpp)
// builds the inputs, explain_memory (memory_explain.cpp) adds the derivation; FastTrainingEvaluator (search.cpp)
// caches the inputs per key — the layer sums per (tp, sp), the stage shapes per (pp, v) — and calls the same
// memory_core, so both paths give bit-identical numbers.
#include <array>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/memory.hpp"
#include "memory_activations.hpp"

namespace gpuplan::model::detail {

/// PyTorch's cross_entropy forward under autocast: bytes per logit it allocates beside the bf16 logits while it runs
/// (the fp32 log-softmax output and its working copy), measured by the module-hook allocator timelines
/// (data/validation/measured/h100-sxm5-80gb/memseries_*.json: 6.0 B at two batch sizes).
inline constexpr double kLossForwardBytes = 6.0;

/// Parameters of one layer: `dense` is replicated over EP (attention, norms, dense FFN or router + shared experts),
/// `expert` are the routed experts (split over EP).
struct LayerParams {
  double dense = 0.0;
  double expert = 0.0;
};

/// What the memory and the step models need of the layers a pipeline stage holds: how many of each kind, and their
/// parameters (summed in layer order, before the embedding and LM head are added).
struct StageShape {
  int index = 0;
  bool first = false, last = false;
  std::int64_t layers = 0, moe_layers = 0;
  std::array<std::int64_t, LayerKind::kCount> kind_layers{};  ///< [LayerKind::index()]: layers of each cost kind
  double p_dense = 0.0, p_expert = 0.0;
  /// Pipeline stages this device holds: 1, or 2 under DualPipe (stage i and stage PP−1−i, the counts above summed;
  /// each micro-batch passes through one of them on this device).
  int chunks = 1;
  /// DualPipe: the deeper of the two stages (max(i, PP−1−i)), its share of the counts above. Device i holds PP − h
  /// micro-batches of its shallower stage and h + 1 of its deeper one at its peak (h = min(i, PP−1−i);
  /// deepseek-ai/DualPipe DualPipe.step: steps 1-2 run 2(PP/2 − h − 1) + h + 1 forward chunks of the first and h + 1
  /// of the second before step 4's first overlapped pair adds one more of the first): PP + 1 in all (Table 2).
  std::int64_t deep_layers = 0, deep_moe_layers = 0;
  std::array<std::int64_t, LayerKind::kCount> deep_kind_layers{};
  std::int64_t mtp = 0;  ///< multi-token-prediction modules here (their transformer layer is in the counts above)
  /// Full recomputation (wl::RecomputeMethod) summed over this stage's chunks: layers recomputed, checkpoints kept,
  /// and the most layers one backward rebuilds at once (a uniform group).
  std::int64_t recomputed = 0, checkpoints = 0, recompute_group = 1;
  /// How compose_step prices this stage against the one before it, marked once per split (stage_shapes): `all`, the
  /// same t_i (the same layers of every kind, recomputation, MTP modules and ends); `body`, the same layers,
  /// recomputation and communication but other ends (the embedding, LM head or MTP extras differ); `none`: priced on
  /// its own (always correct; DualPipe's devices are, their paired share depending on the index).
  enum class Like : std::uint8_t { none, body, all };
  Like like_prev = Like::none;
};


/// The decoder layers of every model chunk, in chunk order: chunk j = k·p + i is the k-th of the v chunks of pipeline
/// stage i (p = PP, v = plan.model_chunks()); the layers fill the chunks in order. This is the one place that assigns
/// layers to (stage, chunk); it follows Megatron-Core (transformer_block.py get_num_layers_to_build,
/// transformer_layer.py get_transformer_layer_offset, pipeline_parallel_layer_layout.py, and the checks of
/// TransformerConfig.__post_init__ and arguments.py validate_args):
///  - pipeline_model_parallel_layout: the layout's decoder counts (p·v chunks, summing to L);
///  - decoder_first/last_pipeline_num_layers (f, l): the first (last) stage holds f (l) layers, the p − 1 or p − 2
///    middle stages (L − f − l)/(middle stages) each; every stage's layers split evenly over its v chunks (each count
///    divisible by v, the middle layers by the middle stages, middle layers iff middle stages);
///  - account_for_embedding/loss_in_pipeline_split (e, o ∈ {0, 1}): L + e + o split into p·v equal chunks of
///    c = (L + e + o)/(p·v) (divisible by p, then by v), chunk 0 holding c − e decoder layers and chunk p·v − 1 c − o;
///  - none: p·v chunks of ⌊L/(p·v)⌋, the first L mod (p·v) one more (gpuplan's split of uneven 1F1B stages; the
///    interleaved schedule needs L divisible by p·v, as Megatron-LM asserts).
/// Empty, with the reason in `why` (optional), when the plan's split cannot be made on this model.
std::vector<std::int64_t> chunk_layers(const wl::TransformerArch& a, const wl::TrainingPlan& plan, std::string* why);
/// chunk_layers' rules alone: whether the split can be made (no allocation unless `why` is given).
bool chunk_split_ok(const wl::TransformerArch& a, const wl::TrainingPlan& plan, std::string* why);

/// Every pipeline stage's shape, from chunk_layers (a plan whose split cannot be made gets the default split: callers
/// check the layout first, layout_rules).
std::vector<StageShape> stage_shapes(const wl::TransformerArch& a, const ParameterCounts& params,
                                     const wl::TrainingPlan& plan);
struct LayerKinds;
/// The same with the layer kinds the caller has already folded (layer_kinds(a, params)).
std::vector<StageShape> stage_shapes(const wl::TransformerArch& a, const LayerKinds& kinds,
                                     const ParameterCounts& params, const wl::TrainingPlan& plan);

/// Layers of the stage that holds the most (the one ZeRO-3 gathers most often).
std::int64_t most_stage_layers(const std::vector<StageShape>& stages);

/// Parameters of a dense and of an MoE layer (every layer of a kind holds the same), and of the final norm (the last
/// stage holds it beside the LM head).
struct LayerKinds {
  LayerParams dense, moe;
  double final_norm = 0.0;
};
/// The layer kinds of `a` for a caller whose counts are `params`. When they are a's own (parameter_counts, as every
/// estimate passes: their per-layer attention and dense FFN are the dense layer graph's), folds over a's op graphs:
/// the dense and the MoE layer's weights (layer_params), the head graph's final norm. A nominal count that is not a's
/// (the textbook's "7B": app drills, test_memory) has no graph: each layer holds its per-layer counts
/// (attention_per_layer + dense_mlp_per_layer), no routed experts, no final norm.
LayerKinds layer_kinds(const wl::TransformerArch& a, const ParameterCounts& params);

/// Saved activations per token of a dense and of an MoE layer. Depends on (tp, sp) and the fixed plan fields.
/// For models whose layers differ in more than dense/MoE (hybrids' mixers and mixer-only / FFN-only layers, GLM-5.1's
/// shared indexers) `by_kind` is set and `kind[LayerKind::index()]` holds each present kind's sum (StageShape::kind_layers
/// counts them per stage).
struct LayerSums {
  LayerSum dense, moe;
  bool by_kind = false;
  std::array<LayerSum, LayerKind::kCount> kind{};
  HeadTerms head;  ///< the embedding's and the output layer's saved tensors (head_terms)
};
LayerSums layer_sums(const Ctx& c);
/// Whether a's layers differ in more than their FFN (LayerSums::by_kind).
bool layers_differ_beyond_ffn(const wl::TransformerArch& a);
/// The saved-tensor sums of one layer of kind k: LayerSums::kind's entry when the layers differ beyond their FFN,
/// else the dense or the MoE layer's. The peak formula and the memory timeline both price a layer with it.
inline const LayerSum& kind_sum(const LayerSums& s, LayerKind k) {
  if (s.by_kind) return s.kind[static_cast<std::size_t>(k.index())];
  return k.moe ? s.moe : s.dense;
}
/// Parameters of one layer of kind k: its op graph's weights (the routed experts apart) when the layers differ beyond
/// their FFN (a hybrid's mixers, shared indexers), else the dense or the MoE layer's (layer_kinds).
LayerParams kind_params(const wl::TransformerArch& a, const LayerKinds& kinds, LayerKind k);
/// Parameters of one layer of kind k: the fold over its op graph's weights, the routed experts apart
/// (stage_shapes.cpp). The one place a training layer's parameters come from.
LayerParams layer_params(const wl::TransformerArch& a, LayerKind k);
/// NCCL communicators one GPU belongs to under the parallelism (stage_memory.cpp).
int communicators(const wl::Parallelism& par);

/// Bytes per logit the loss keeps on the last stage (its peak, the backward's start): the logits in the activation
/// dtype a_b, plus what the cross entropy allocates beside them. Transformer Engine's parallel_cross_entropy
/// (cross_entropy te) writes the gradient into the logits tensor in place and saves that tensor: a_b alone
/// (TransformerEngine transformer_engine/pytorch/triton/cross_entropy.py up to v2.17, e.g. e9a5fa4e; v2.18's PR #3193
/// allocates an fp32 gradient beside them). Megatron-Core's VocabParallelCrossEntropy, fused or not, upcasts to fp32
/// and keeps the fp32 softmax ([K22] §4.3): a_b + 4. A PyTorch loop (eager kernels): a_b + 4 + 4 (memory.cpp).
double logit_bytes(const wl::TrainingPlan& plan, double activation_bytes);

/// DualPipe's activation multiplier on a device's summed layers (StageShape::chunks == 2): PP − h micro-batches of
/// its shallower stage and h + 1 of its deeper one, h = min(i, PP−1−i), over their sum's bytes per micro-batch
/// ((PP + 1)/2 when the two stages keep the same bytes). memory_dualpipe.cpp.
double dualpipe_layer_factor(const Ctx& c, const LayerSums& sums, const StageShape& shape, int p);

/// The copies of each pipeline stage in one pipeline: 2 under DualPipe, else 1. DualPipe's rank i holds stages i and
/// PP−1−i (DeepSeek-V3 arXiv:2412.19437 §3.2.1, Table 2: "2×" parameters; deepseek-ai/DualPipe
/// examples/example_dualpipe.py builds rank i's modules from full_modules[i] and full_modules[PP−1−i] and sums the
/// two copies' gradients across ranks i and PP−1−i), so ranks i and PP−1−i hold the same parameters: each copy is one
/// more data-parallel replica, and the gradient reduction and the ZeRO shard group span both. memory_dualpipe.cpp.
int stage_copies(const wl::TrainingPlan& plan);

/// One stage's memory (bytes); the fields training_memory reports and explains.
struct StageMemory {
  /// The stage's shape: an element of the `stages` given to memory_core, which must outlive this (a pointer: a copy of
  /// its per-kind counts, ~1 KB, per stage cost the search more than the stage's arithmetic).
  const StageShape* shape = nullptr;
  double p_dense = 0.0, p_expert = 0.0;  // parameters of the stage (before TP/EP), embedding and head included
  double p_gpu = 0.0;                    // P_dense/t + P_experts/(etp·ep): the parameters per GPU the states price
  double largest_layer_gpu = 0.0;        // parameters per GPU of the stage's largest layer
  double inflight_mb = 1.0;              // micro-batches whose activations the stage holds at its peak
  double layer_factor = 1.0;             // multiplier on Σ_stage-layers stored bytes (chunks in flight / v)
  double stored_layers = 0.0, extra_first = 0.0, extra_last = 0.0, working_set = 0.0, logits_b = 0.0;
  double mtp_logits = 0.0;  // the MTP heads' share of logits_b: each depth's cross entropy keeps 4 B per logit
  // --defer-embedding-wgrad-compute: the last stage's buffered LM-head inputs and output gradients of the deferred
  // micro-batches held beside the current one (part of activations); 0 otherwise.
  double deferred_wgrad = 0.0;
  double weights = 0.0, grads = 0.0, master = 0.0, opt = 0.0, gathered_w = 0.0, gathered_g = 0.0;
  double activations = 0.0, nccl = 0.0, ctx = 0.0, frag = 0.0, total = 0.0;
  double host = 0.0;  // master weights + optimizer states kept in host memory (CPU offload), per GPU
  double amp_copies = 0.0;     // PyTorch autocast's bf16 copies of the GEMM weights, kept for the backward
  double amp_layers = 0.0;     // under full recompute: the layers' copies autocast caches through the forward only
  // A PyTorch loop under full recompute whose peak is the loss's forward (the layers' cached copies, the logits and
  // the loss forward's buffers): the activations and logits bytes at that moment; 0 when the peak is elsewhere.
  double loss_fwd_acts = 0.0, loss_fwd_logits = 0.0;
  double fp8_cache = 0.0;      // FP8 GEMMs: the quantised weights (and their transposes) cached across micro-batches
  double fp8_cache_per_weight = 0.0;  // ... its bytes per cached GEMM weight
  double lora_adapters = 0.0;  // LoRA adapter parameters per GPU of the stage (0 without LoRA)
  bool grads_at_peak = true;   // false: a PyTorch loop whose peak is the backward's start (no .grad allocated yet)
  bool acts_at_peak = true;    // false: a PyTorch loop whose peak is the backward's end (every saved tensor freed)
};

struct MemoryCore {
  StageMemory first, last;
  StageMemory middle;        // the heaviest middle stage whose layers differ from the first's (has_middle)
  bool two_stages = false;
  bool has_middle = false;
  double n_dense = 1.0, n_expert = 1.0;  // ZeRO shard groups
  double comms = 0.0;                    // NCCL communicators
  [[nodiscard]] const StageMemory& heaviest() const {
    const StageMemory& fl = two_stages && last.total > first.total ? last : first;
    return has_middle && middle.total > fl.total ? middle : fl;
  }
  [[nodiscard]] double host() const {
    return std::max({first.host, two_stages ? last.host : 0.0, has_middle ? middle.host : 0.0});
  }
};

/// The allocator's fragmentation reserve as a fraction of the allocated peak, by the plan's static-state layout
/// (wl::ParamLayout): per_tensor keeps the overheads' fraction, contiguous the one measured with Megatron-Core's
/// buffers (memory.cpp, kContiguousFragmentation). `origin` receives where the fraction comes from.
double fragmentation_fraction(const RuntimeOverheads& overheads, const wl::TrainingPlan& plan,
                              std::string* origin = nullptr);

/// The memory of the first and the last pipeline stage (training_memory documents the formulas).
/// Every stage is evaluated whose layers differ from the first stage's (a middle stage of an uneven split can be the
/// heaviest); `first`, `last` and `heaviest()` name what is reported.
void memory_core(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                 const RuntimeOverheads& overheads, const Ctx& c, const LayerKinds& kinds, const LayerSums& sums,
                 const std::vector<StageShape>& stages, bool fp8_any_layout, MemoryCore& out);

/// The --explain derivation tree of training_memory (memory_explain.cpp): fills r.derivation from the evaluated stages
/// and the parts of `r` already filled (its totals, capacity and fit).
void explain_memory(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                    const hw::GpuSpec& gpu, const RuntimeOverheads& overheads, ActivationLayout layout, const Ctx& c,
                    const MemoryCore& core, TrainingMemory& r);

}  // namespace gpuplan::model::detail
