// The memory of one pipeline stage (memory_core.hpp): model states by ZeRO stage, the eager allocations, the FP8 weight
// cache, the activations in flight, the peak and the overheads; memory_core evaluates the first, the last and any
// heavier middle stage. training_memory (memory.cpp) reports the heaviest; [ZeRO], [K22] and [N21] are its sources.
#include "gpuplan/model/memory.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memory_core.hpp"

#include "quant_recipe.hpp"

namespace gpuplan::model {
namespace detail {

int communicators(const wl::Parallelism& par) {
  // One NCCL communicator per parallel group of more than one GPU this GPU belongs to: TP, PP (p2p), the
  // data-parallel gradient group (dp·cp), CP (ring attention) and EP (all-to-all); under parallel folding also the
  // expert-TP group when it differs from TP.
  return int(par.tp > 1) + int(par.pp > 1) + int(std::int64_t(par.dp) * par.cp > 1) + int(par.cp > 1) + int(par.ep > 1) +
         int(par.expert_tp() != par.tp && par.expert_tp() > 1);
}

double logit_bytes(const wl::TrainingPlan& plan, double activation_bytes) {
  // FlashAttention's xentropy: the saved 16-bit logits and the backward's new 16-bit gradient (any kernel style).
  if (plan.cross_entropy == wl::CrossEntropyKernel::flash) return 2.0 * activation_bytes;
  if (plan.eager_loss()) return activation_bytes + 2.0 * kFp32Bytes;
  if (plan.cross_entropy == wl::CrossEntropyKernel::te) return activation_bytes;
  return activation_bytes + kFp32Bytes;
}

namespace {

/// What every stage's evaluation reads: memory_core's inputs and the quantities derived once from the plan.
struct StageInputs {
  StageInputs(const wl::TransformerArch& arch, const ParameterCounts& counts, const wl::TrainingPlan& training,
              const RuntimeOverheads& runtime, const Ctx& ctx, const LayerKinds& layer_kinds, const LayerSums& layer_sums)
      : a(arch), params(counts), plan(training), overheads(runtime), c(ctx), kinds(layer_kinds), sums(layer_sums) {}
  const wl::TransformerArch& a;
  const ParameterCounts& params;
  const wl::TrainingPlan& plan;
  const RuntimeOverheads& overheads;
  const Ctx& c;
  const LayerKinds& kinds;
  const LayerSums& sums;
  int p = 1;               // pipeline stages
  int v = 1;               // model chunks per stage
  double t = 1.0;          // tensor parallel
  double te = 1.0;         // routed experts are split over etp·ep ranks (etp = tp without parallel folding)
  std::int64_t m = 1;      // micro-batches per step
  bool fp8_any_layout = false;  // the GPU's FP8 GEMMs take either operand layout (quant_recipe.hpp)
  double n_dense = 1.0;    // ZeRO shard group of the dense parameters
  double n_expert = 1.0;   // ... and of the routed experts
  int zero = 0;            // ZeRO stage
  double opt_b = 0.0;      // optimizer-state bytes per parameter
  double unit_norm = 0.0;  // one norm's parameters
  double comms = 0.0;      // NCCL communicators
  double stored_dense = 0.0, stored_moe = 0.0;  // per-token bytes each layer kind keeps
  double ws_dense = 0.0, ws_moe = 0.0;          // its transient recomputation working set

  /// The ZeRO shard group n when ZeRO shards this kind of state (stage ≥ `stage`), else 1.
  [[nodiscard]] double shard(int stage, double n) const { return zero >= stage ? n : 1.0; }
};

/// The stage's embedding and output-layer parameters (not decoder layers). Tied embeddings under PP: the last stage
/// keeps its own copy of the word embeddings for the output layer (Megatron-LM; gradients all-reduced over the
/// embedding group).
double embed_head_params(const StageInputs& x, const StageShape& shape) {
  const auto& a = x.a;
  const auto& params = x.params;
  const int p = x.p;
  return (shape.first ? double(params.embedding + params.position_embedding) : 0.0) +
         (shape.last ? double(params.lm_head) : 0.0) +
         (shape.last && a.tied_embeddings && p > 1 ? double(params.embedding) : 0.0);
}

/// Model states: the stage's parameters per GPU and their weights, gradients, master weights and optimizer states
/// (LoRA: the frozen base plus the adapters; FP8 parameters; CPU offload; ZeRO-3's gathered units).
void model_states(const StageInputs& x, const StageShape& shape, StageMemory& st) {
  const auto& a = x.a;
  const auto& plan = x.plan;
  const auto& pr = plan.precision;
  const auto& kinds = x.kinds;
  const double t = x.t, te = x.te, n_dense = x.n_dense, n_expert = x.n_expert, opt_b = x.opt_b;
  const double unit_norm = x.unit_norm;
  auto shard = [&x](int stage, double n) { return x.shard(stage, n); };
  st.shape = &shape;
  const std::int64_t dense_layers = shape.layers - shape.moe_layers;
  st.p_dense = shape.p_dense;
  st.p_expert = shape.p_expert;
  st.largest_layer_gpu = 0.0;
  if (dense_layers > 0)
    st.largest_layer_gpu = std::max(st.largest_layer_gpu, kinds.dense.dense / t + kinds.dense.expert / te);
  if (shape.moe_layers > 0)
    st.largest_layer_gpu = std::max(st.largest_layer_gpu, kinds.moe.dense / t + kinds.moe.expert / te);
  const double embed_head = embed_head_params(x, shape);
  st.p_dense += embed_head + (shape.last ? unit_norm : 0.0);
  const double pd = st.p_dense / t, pe = st.p_expert / te;
  st.p_gpu = pd + pe;
  st.weights = pd * pr.weight_bytes / shard(3, n_dense) + pe * pr.weight_bytes / shard(3, n_expert);
  st.grads = pd * pr.gradient_bytes / shard(2, n_dense) + pe * pr.gradient_bytes / shard(2, n_expert);
  st.master = pd * pr.master_bytes / shard(1, n_dense) + pe * pr.master_bytes / shard(1, n_expert);
  st.opt = pd * opt_b / shard(1, n_dense) + pe * opt_b / shard(1, n_expert);
  st.lora_adapters = 0.0;
  const double base_b = base_weight_bytes(plan);
  if (plan.lora.on()) {
    // LoRA: the frozen base weights in their storage format, plus the adapters; gradients, master weights and
    // optimizer states exist for the adapters only (sharded by the same ZeRO stages).
    const double n_dl = double(shape.layers - shape.moe_layers), n_ml = double(shape.moe_layers);
    const LoraLayerParams ld = lora_layer_params(a, plan.lora, false), lm = lora_layer_params(a, plan.lora, true);
    const double ad = (n_dl * (ld.dense + ld.expert) + n_ml * lm.dense) / t, ae = n_ml * lm.expert / te;
    st.lora_adapters = ad + ae;
    st.weights = pd * base_b / shard(3, n_dense) + pe * base_b / shard(3, n_expert) +
                 (ad / shard(3, n_dense) + ae / shard(3, n_expert)) * lora_adapter_weight_bytes(plan);
    st.grads = ad * pr.gradient_bytes / shard(2, n_dense) + ae * pr.gradient_bytes / shard(2, n_expert);
    st.master = ad * pr.master_bytes / shard(1, n_dense) + ae * pr.master_bytes / shard(1, n_expert);
    st.opt = ad * opt_b / shard(1, n_dense) + ae * opt_b / shard(1, n_expert);
  }
  if (pr.fp8_params) {
    // FP8 parameters are the Transformer Engine layers' weights; the embedding and the LM head stay bf16.
    st.weights += embed_head / t * (2.0 - pr.weight_bytes) / shard(3, n_dense);
  }
  st.host = 0.0;
  if (plan.offload == wl::Offload::optimizer) {
    // ZeRO-Offload: the fp32 master copy and the optimizer states of this GPU's shard live in host memory.
    st.host = st.master + st.opt;
    st.master = st.opt = 0.0;
  }
  st.gathered_w = st.gathered_g = 0.0;
  if (plan.zero == wl::ZeroStage::parameters && n_dense > 1) {
    // ZeRO-3/FSDP gathers a unit's full parameters for its compute (the next one prefetched when overlapping)
    // and holds its full gradient until the reduce-scatter: DeepSpeed's estimate_zero3 "largest layer" term.
    const double units_gathered = plan.overlap_param_gather ? 2.0 : 1.0;
    st.gathered_w = st.largest_layer_gpu * base_b * units_gathered;
    st.gathered_g = plan.lora.on() ? 0.0 : st.largest_layer_gpu * pr.gradient_bytes;
  }
}

/// A PyTorch training loop's extra allocations (DDP buckets, FSDP2's gathered root and layer, autocast's weight
/// copies).
void eager_allocations(const StageInputs& x, const StageShape& shape, StageMemory& st) {
  const auto& params = x.params;
  const auto& plan = x.plan;
  const auto& pr = plan.precision;
  const auto& c = x.c;
  const double t = x.t, te = x.te, n_dense = x.n_dense;
  const double unit_norm = x.unit_norm;
  const double embed_head = embed_head_params(x, shape);
  const double base_b = base_weight_bytes(plan);
  // A PyTorch training loop (eager modules; plan.kernels == eager). Measured allocator timelines of our H100/H200
  // runs (data/validation/measured/h200-sxm-141gb/mem_*.json, scripts/measure/mem_timeline.py) show:
  //  - DDP keeps its communication buckets allocated across steps, one more copy of every gradient (+4 B/param
  //    with fp32 grads, measured on 2 and 4 H200s);
  //  - FSDP2 keeps the root unit (embedding, final norm and LM head when only the layers are wrapped) gathered from
  //    its forward to its backward, and gathers one layer for the backward; in the compute dtype;
  //  - torch.autocast with fp32 parameters caches a bf16 copy of every GEMM weight for the forward, and each
  //    nn.Linear keeps its copy for the backward: + a_b per GEMM weight until the layer's backward runs.
  st.amp_copies = st.amp_layers = 0.0;
  if (plan.kernels == wl::KernelStyle::eager) {
    const double cd = plan.mixed_precision == wl::MixedPrecision::amp ? c.ab : pr.weight_bytes;
    if (plan.zero == wl::ZeroStage::none && plan.par.dp > 1) st.gathered_g = st.grads;
    if (plan.zero == wl::ZeroStage::parameters && n_dense > 1) {
      double root = 0.0;
      if (shape.first) root += double(params.embedding + params.position_embedding);
      if (shape.last) root += unit_norm + double(params.lm_head);
      st.gathered_w = (root / t + st.largest_layer_gpu) * cd;
      st.gathered_g = 0.0;  // a layer's unsharded gradient exists only between its backward and its reduce-scatter
    }
    if (plan.mixed_precision == wl::MixedPrecision::amp && plan.zero != wl::ZeroStage::parameters &&
        base_b == pr.weight_bytes) {
      const double emb = shape.first ? double(params.embedding + params.position_embedding) : 0.0;
      st.amp_copies = std::max(0.0, (st.p_dense - emb) / t + st.p_expert / te) * c.ab;
      // Full recomputation (torch.utils.checkpoint around each layer): a layer's casts happen inside its
      // checkpointed forward, which saves nothing but its input, so autocast's cache frees them when the forward
      // leaves autocast and the recomputation casts again in the backward; only the GEMMs outside the
      // checkpoints keep their copy (the LM head). Measured on our H100 (data/validation/measured/h100-sxm5-80gb/
      // memseries_llama1b_s2048_b4_full.json): 0.1445 GiB per layer through the forward = the 32 MiB checkpoint +
      // the layer's 113 MiB copy, which is gone by the loss (the peak is 1.81 GiB = 16 layers' copies below the
      // same step without recomputation).
      if (plan.recompute == wl::Recompute::full) {
        const double all = st.amp_copies;
        st.amp_copies = std::min(all, std::max(0.0, embed_head - emb + (shape.last ? unit_norm : 0.0)) / t * c.ab);
        st.amp_layers = all - st.amp_copies;
      }
    }
  }

}

/// The FP8 weight copies Transformer Engine keeps: cached across micro-batches, or per micro-batch in flight
/// (wl::Fp8WeightCopies). Reads the activations' layers in flight (stage_activations runs first).
void fp8_weight_cache(const StageInputs& x, const StageShape& shape, StageMemory& st) {
  const auto& plan = x.plan;
  const auto& pr = plan.precision;
  const double t = x.t, te = x.te, n_dense = x.n_dense;
  const double embed_head = embed_head_params(x, shape);
  // FP8 GEMMs (Transformer Engine, as Megatron-Core and NeMo run them): each linear layer quantises its weight once
  // per step and caches it across the micro-batches (`get_weight_workspace(..., cache_name="weight")` whenever
  // Megatron passes is_first_microbatch), in both layouts Hopper's FP8 GEMMs need: rowwise for the forward and
  // columnwise (the transpose) for the backward's dgrad — 2 B per GEMM weight beside the bf16 weight. With FP8
  // parameters the weight is itself the rowwise FP8 data; only the transpose cache is added (1 B). The cache is a
  // module attribute: alive across steps. Embedding and LM head run in bf16 (not TE layers) and are not cached.
  // Under ZeRO-3 only the gathered layers have one. On a GPU whose FP8 GEMMs take either layout (datacenter
  // Blackwell), a per-tensor-scaled weight needs no transpose: 1 B cached, and none with FP8 parameters.
  // Fp8WeightCopies::per_microbatch (disable_parameter_transpose_cache under Transformer Engine <= 1.10): an FP8
  // parameter's transpose is made in each backward GEMM and freed (none kept); a 16-bit weight's copies are made in
  // each micro-batch's forward and saved for its backward (linear.py saves weight_fp8), so the stage holds one set
  // per layer whose activations it holds: the activations' layers in flight (layer_factor).
  // Fp8WeightCopies::cached_one_layout (DeepSeek-V3's framework, wl/training.hpp): one layout of the copy is kept
  // (half the recipe's two, with its scales) and the other is transposed from it in each micro-batch and freed; an
  // FP8 parameter is itself that copy.
  st.fp8_cache = 0.0;
  st.fp8_cache_per_weight = 0.0;
  if (detail::quantised_gemms(plan)) {
    const bool fp8_stored = pr.fp8_params || (plan.lora.on() && plan.lora.base == wl::LoraBase::fp8);
    const bool dequantised = plan.lora.on() && (plan.lora.base == wl::LoraBase::nf4 || plan.lora.base == wl::LoraBase::int8);
    const bool per_tensor = pr.recipe == wl::QuantRecipe::delayed || pr.recipe == wl::QuantRecipe::tensorwise;
    const bool per_mb = plan.fp8_weight_copies == wl::Fp8WeightCopies::per_microbatch;
    const bool one_layout = plan.fp8_weight_copies == wl::Fp8WeightCopies::cached_one_layout;
    // The recipe's row- and column-wise copies with their scales (quant_recipe.hpp; 1 + 1 B with delayed scaling).
    const detail::QuantBytes q = detail::quant_bytes(pr.recipe, x.fp8_any_layout);
    const double per_weight = dequantised ? 0.0
                              : fp8_stored ? ((x.fp8_any_layout || per_mb) && per_tensor ? 0.0 : one_layout ? 0.0 : 1.0)
                              : one_layout ? (x.fp8_any_layout && per_tensor ? q.weight_cache : q.weight_cache / 2.0)
                                           : q.weight_cache;
    st.fp8_cache_per_weight = per_weight;
    double gemm_params = (st.p_dense - embed_head) / t + st.p_expert / te;
    if (plan.zero == wl::ZeroStage::parameters && n_dense > 1)
      gemm_params = st.largest_layer_gpu * (plan.overlap_param_gather ? 2.0 : 1.0);
    st.fp8_cache = std::max(0.0, gemm_params) * per_weight * (per_mb && !fp8_stored ? st.layer_factor : 1.0);
  }
}

/// Activations: the micro-batches in flight and the layers' saved tensors, the recomputation working set, activation
/// offloading, the embedding's dropout masks and the output layer's inputs and logits.
void stage_activations(const StageInputs& x, const StageShape& shape, StageMemory& st) {
  const auto& plan = x.plan;
  const auto& c = x.c;
  const auto& sums = x.sums;
  const int p = x.p, v = x.v;
  const double t = x.t;
  const std::int64_t m = x.m;
  const double stored_dense = x.stored_dense, stored_moe = x.stored_moe, ws_dense = x.ws_dense, ws_moe = x.ws_moe;
  const std::int64_t dense_layers = shape.layers - shape.moe_layers;
  // Activations. 1F1B: stage i holds min(p − i, m) micro-batches of its layers ([K22] §4.2.3: the first stage holds
  // p micro-batches of L/p layers, i.e. L layers' worth). Interleaved ([N21] §2.2.2, Megatron's warm-up): stage i
  // holds min(2(p−i−1) + (v−1)p + 1, m·v) model chunks, which is L·(1 + (p−1)/(p·v)) layers' worth on stage 0.
  const int i = shape.index;
  st.inflight_mb = double(std::min<std::int64_t>(p - i, m));
  if (p == 1) st.inflight_mb = 1.0;
  if (shape.chunks == 2) {
    // DualPipe (DeepSeek-V3 Table 2): PP + 1 chunk micro-batches of activations, PP − h of the shallower stage and
    // h + 1 of the deeper one (StageShape::deep_layers); layer_factor weighs the stage's summed layers accordingly.
    st.inflight_mb = double(p - std::min(i, p - 1 - i));
    st.layer_factor = detail::dualpipe_layer_factor(c, sums, shape, p);
  } else if (v > 1 && p > 1) {
    const double chunks = std::min<double>(2.0 * (p - i - 1) + double(v - 1) * p + 1.0, double(m) * v);
    st.layer_factor = chunks / v;
  } else {
    st.layer_factor = st.inflight_mb;
  }
  // Layers of one kind keep the same bytes: Σ_stage layers stored = n_dense·stored_dense + n_moe·stored_moe, or
  // Σ_kinds n_kind·stored_kind when the layers differ in their mixer (hybrids) or indexer (shared indexers).
  double per_mb = double(dense_layers) * stored_dense + double(shape.moe_layers) * stored_moe;
  double ws = 0.0, all_max = 0.0, all_sum = 0.0;
  if (dense_layers > 0) ws = std::max(ws, ws_dense);
  if (shape.moe_layers > 0) ws = std::max(ws, ws_moe);
  if (sums.by_kind) {
    per_mb = ws = 0.0;
    for (std::size_t k = 0; k < shape.kind_layers.size(); ++k) {
      if (shape.kind_layers[k] <= 0) continue;
      const LayerSum& ks = sums.kind[k];
      per_mb += double(shape.kind_layers[k]) * stored_per_token(c, ks);
      ws = std::max(ws, working_set_per_token(c, ks));
      all_sum += double(shape.kind_layers[k]) * ks.all;
      all_max = std::max(all_max, ks.all);
    }
  }
  if (plan.partial_recompute()) {
    // Partial full recompute (wl::RecomputeMethod, transformer_block.py _checkpointed_forward): one layer input per
    // checkpoint; the layers not recomputed (block) keep everything; a uniform group of g layers is rebuilt at once
    // for its backward (g − 1 more layers' activations in the working set than one layer at a time).
    const double kept = shape.layers > 0 ? double(shape.layers - shape.recomputed) / double(shape.layers) : 0.0;
    const double stage_all = sums.by_kind ? all_sum
                                          : double(dense_layers) * sums.dense.all + double(shape.moe_layers) * sums.moe.all;
    per_mb = kept * stage_all + double(shape.checkpoints) * detail::checkpoint_per_token(c);
    const double all = sums.by_kind ? all_max
                                    : std::max(dense_layers > 0 ? sums.dense.all : 0.0,
                                               shape.moe_layers > 0 ? sums.moe.all : 0.0);
    ws += double(shape.recompute_group - 1) * all;
  }
  if (plan.activation_offload_layers > 0 && shape.layers > 0) {
    // Activation offloading (Megatron-Core cpu_offload.py, PP 1): the first N layers' saved activations live in
    // host memory once their copy is waited for; at the backward's start one group is reloaded ahead, so the GPU
    // holds L − N + 1 layers' worth (the stage's mean layer) and the host N.
    const double n = double(std::min<std::int64_t>(plan.activation_offload_layers, shape.layers));
    const double mean = per_mb / double(shape.layers);
    st.host += n * mean * c.tokens * st.layer_factor;
    per_mb = mean * (double(shape.layers) - n + 1.0);
  }
  st.stored_layers = per_mb * c.tokens * st.layer_factor;
  st.working_set = ws * c.tokens;
  st.extra_first = st.extra_last = st.logits_b = st.mtp_logits = st.deferred_wgrad = 0.0;
  // The saved tensors of the ops around the layers (head_terms, from the head graph).
  const HeadTerms& head = sums.head;
  auto term_bytes = [&](const Term& term) {
    return c.tokens * term.elements * term.elem_bytes / c.divisor(term.split);
  };
  if (shape.first && c.dropout)  // embedding-output dropout mask ([K22] §4.3), per in-flight micro-batch
    st.extra_first = st.inflight_mb * c.tokens * head.mask.elements * head.mask.elem_bytes / c.divisor(head.mask.split);
  if (shape.last) {
    // [K22] §4.3 output layer: final-norm input and output-projection input (2·s·b·h·a_b, /t with SP); the logits
    // and the loss's buffers (logit_bytes: Megatron's vocab-parallel cross entropy keeps their fp32 upcast, TE's
    // writes the gradient into the logits).
    // PyTorch's cross_entropy under autocast: log_softmax reads the bf16 logits and keeps its fp32 output; its
    // backward's fp32 incoming gradient coexists with both (measured peak, mem_*.json): a_b + 4 + 4 per logit.
    st.extra_last = term_bytes(head.norm_input) + term_bytes(head.head_input);
    st.logits_b = c.tokens * head.vocab / t * logit_bytes(plan, c.ab);
    // Multi-token prediction (DeepSeek-V3 §2.2, "MTP Training Objective"): each depth's module runs the shared
    // output head over its own representation and takes a cross entropy over those logits, so the last stage keeps,
    // beside the main head's, each depth's head inputs (the same 2·s·b·h·a_b) and the fp32 softmax its cross entropy
    // saves for the backward (4 B per logit); Megatron-Core computes the MTP loss in the forward before the main
    // head's (process_mtp_loss), so those are alive while the main loss runs.
    if (shape.mtp > 0) {
      const double depths = double(shape.mtp);
      st.extra_last += depths * c.tokens * (head.norm_input.elements + head.head_input.elements) * c.ab /
                       c.divisor(Split::sequence);
      st.mtp_logits = depths * c.tokens * head.vocab / t * kFp32Bytes;
      st.logits_b += st.mtp_logits;
    }
  }
  // The recomputation working set and the logits/loss buffers do not coexist: the loss buffers, and the final-norm
  // and output-layer inputs, are freed once the output layer's backward has run, before the first layer is
  // recomputed (memory_timeline.cpp replays it). The peak counts the larger of the two.
  // --defer-embedding-wgrad-compute (Megatron-LM d98e8a64 tensor_parallel/layers.py): the output layer appends its
  // input (the sequence shard under SP) to embedding_activation_buffer in the forward and its output gradient
  // ([s, b, V/t], cast to the input dtype) to grad_output_buffer in the backward, for the first N micro-batches (all
  // with wgrad_deferral_limit 0), and frees them only in the flush: at the last deferred backward N − 1 of them sit
  // beside the current micro-batch's (counted above).
  if (shape.last && plan.defer_embedding_wgrad && p > 1 && shape.chunks != 2 && m > 1) {
    const std::int64_t n =
        plan.wgrad_deferral_limit > 0 ? std::min<std::int64_t>(plan.wgrad_deferral_limit, m) : m;
    st.deferred_wgrad =
        double(n - 1) * (term_bytes(head.head_input) + c.tokens * head.vocab / t * c.ab);
  }
  st.activations = st.stored_layers + st.extra_first + st.extra_last +
                   std::max(0.0, st.working_set - st.logits_b - st.extra_last) + st.deferred_wgrad;
}

/// The peak: what is allocated at it (a PyTorch loop's peak is the larger of the backward's start and end), the
/// fragmentation, the CUDA context and the NCCL buffers.
void stage_peak(const StageInputs& x, const StageShape& shape, StageMemory& st) {
  const auto& plan = x.plan;
  const auto& c = x.c;
  const auto& overheads = x.overheads;
  const double comms = x.comms;
  st.nccl = comms * overheads.nccl_buffers.raw();
  st.ctx = overheads.cuda_context.raw();
  double allocated = st.weights + st.gathered_w + st.fp8_cache + st.grads + st.gathered_g + st.master + st.opt +
                     st.activations + st.logits_b;
  st.grads_at_peak = st.acts_at_peak = true;
  if (plan.kernels == wl::KernelStyle::eager) {
    // zero_grad(set_to_none=True) (PyTorch's default): no .grad exists when the backward starts; each layer's
    // gradients appear as its saved tensors are freed. The peak is the larger of the backward's start (every saved
    // tensor, the loss buffers, the autocast copies) and its end (every gradient, no activations).
    const double states = st.weights + st.gathered_w + st.fp8_cache + st.gathered_g + st.master + st.opt;
    double start = states + st.amp_copies + st.activations + st.logits_b;
    // Under full recomputation the loss's forward is the other candidate: every layer's autocast copy is still
    // cached (freed when the forward leaves autocast), beside the checkpoints, the bf16 logits and the loss
    // forward's buffers, 6 B per logit while it runs (measured: the hook after the loss minus the one after the
    // head, 5.87 GiB at 8192 × 128256 logits and 2.94 at 4096 ×; memseries_llama1b_s2048_b{4,2}_none.json) — the
    // step's peak at small batches (memseries_llama1b_s2048_b2_full.json: 23.31 GiB there, 22.47 in the backward).
    st.loss_fwd_acts = st.loss_fwd_logits = 0.0;
    if (st.amp_layers > 0.0 && shape.last) {
      const double logits_fwd = st.logits_b * (c.ab + kLossForwardBytes) / (c.ab + 2.0 * kFp32Bytes);
      const double acts_fwd = st.stored_layers + st.extra_first + st.extra_last;
      const double loss_fwd = states + st.amp_copies + st.amp_layers + acts_fwd + logits_fwd;
      if (loss_fwd > start) {
        start = loss_fwd;
        st.loss_fwd_acts = acts_fwd;
        st.loss_fwd_logits = logits_fwd;
      }
    }
    const double end = states + st.grads;
    st.grads_at_peak = end > start;
    st.acts_at_peak = !st.grads_at_peak;
    if (st.grads_at_peak) st.loss_fwd_acts = st.loss_fwd_logits = 0.0;
    allocated = std::max(start, end);
  }
  st.frag = fragmentation_fraction(overheads, plan) * allocated;
  st.total = allocated + st.ctx + st.nccl + st.frag;
}

/// One stage's memory (StageMemory) from its shape.
void evaluate_stage(const StageInputs& x, const StageShape& shape, StageMemory& st) {
  model_states(x, shape, st);
  eager_allocations(x, shape, st);
  stage_activations(x, shape, st);
  fp8_weight_cache(x, shape, st);
  stage_peak(x, shape, st);
}

}  // namespace

void memory_core(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                 const RuntimeOverheads& overheads, const Ctx& c, const LayerKinds& kinds, const LayerSums& sums,
                 const std::vector<StageShape>& stages, bool fp8_any_layout, MemoryCore& out) {
  const auto& par = plan.par;
  StageInputs x(a, params, plan, overheads, c, kinds, sums);
  x.p = std::max(1, par.pp);
  x.v = plan.model_chunks();
  x.t = c.t;
  x.te = double(par.expert_shard());
  x.m = std::max<std::int64_t>(1, plan.micro_batches());
  x.fp8_any_layout = fp8_any_layout;
  const int p = x.p;

  // ZeRO/FSDP shard group ([ZeRO] §5): the data-parallel replicas (dp·cp: CP ranks hold the same weights, as
  // Megatron-Core's distributed optimizer shards over the dp×cp group), or the hybrid shard group. Routed experts
  // are replicated over the expert-data-parallel ranks only: the group regrouped as etp·ep·edp, N·t/(etp·ep)
  // (dp·cp/ep when etp = tp: EP carved out of dp·cp). Under DualPipe each stage has a second copy on the mirror rank
  // of every pipeline (stage_copies): 2·dp·cp replicas.
  x.n_dense = par.shard_group > 0 ? double(par.shard_group)
                                  : double(par.dp) * double(std::max(1, par.cp)) * double(stage_copies(plan));
  x.n_expert = std::max(1.0, x.n_dense * x.t / x.te);
  x.zero = static_cast<int>(plan.zero);
  x.opt_b = optimizer_state_bytes(plan);
  x.unit_norm = kinds.final_norm;
  x.comms = communicators(par);
  out.n_dense = x.n_dense;
  out.n_expert = x.n_expert;
  out.comms = x.comms;
  // Per-token bytes each layer kind keeps, and its transient recomputation working set.
  x.stored_dense = stored_per_token(c, sums.dense);
  x.stored_moe = stored_per_token(c, sums.moe);
  x.ws_dense = working_set_per_token(c, sums.dense);
  x.ws_moe = working_set_per_token(c, sums.moe);
  auto evaluate = [&x](const StageShape& shape, StageMemory& st) { evaluate_stage(x, shape, st); };

  evaluate(stages.front(), out.first);
  out.two_stages = p > 1;
  if (out.two_stages) evaluate(stages.back(), out.last);
  // An uneven split: a middle stage with other layers than the first's can be the heaviest (more layers or more
  // experts than the first, fewer micro-batches in flight).
  out.has_middle = false;
  StageMemory mid;
  for (std::size_t i = 1; i + 1 < stages.size(); ++i) {
    const StageShape& s = stages[i];
    if (s.layers == stages.front().layers && s.moe_layers == stages.front().moe_layers) continue;
    evaluate(s, mid);
    if (!out.has_middle || mid.total > out.middle.total) {
      out.middle = mid;
      out.has_middle = true;
    }
  }
}

}  // namespace detail
}  // namespace gpuplan::model
