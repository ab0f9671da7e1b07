// Training memory per GPU (model/include/gpuplan/model/memory.hpp).
//
// Sources:
//  [ZeRO]   Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
//           SC'20, arXiv:1910.02054, §3.1 (mixed-precision Adam: 2Ψ + 2Ψ + KΨ, K = 12) and §5 (P_os, P_os+g, P_os+g+p).
//  [K22]    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
//           arXiv:2205.05198: §4.1 eq. 1 (per layer s·b·h·(34 + 5as/h)), §4.2.1-4.2.2 (tensor and sequence
//           parallelism: 10 + 24/t + 5as/(ht), 34/t + 5as/(ht)), §4.2.3 (pipeline: the first stage holds p
//           micro-batches of L/p layers = L layers' worth; interleaving × (1 + (p−1)/(p·v))), §4.3 (embedding dropout,
//           output layer and fp32 cross entropy 4sbv/t), §5 (selective recomputation keeps 34/t), Table 2 (summary).
//  [N21]    Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
//           SC'21, arXiv:2104.04473, §2.2.2 (interleaved schedule, v model chunks per device).
//  [D22]    Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization", ICLR'22, §2 (block size 2048, one
//           fp32 absmax scale per block) — as implemented in bitsandbytes' 8-bit AdamW.
//  [HF]     Hugging Face transformers modeling code (LlamaRMSNorm, repeat_kv + sdpa_attention_forward, LlamaMLP) under
//           eager PyTorch autograd; measured per-layer footprints in stas00/ml-engineering
//           training/performance/README.md (activation-memory-per-layer.py).
#include "gpuplan/model/memory.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "memory_core.hpp"

namespace gpuplan::model {
namespace {

using detail::Ctx;
using detail::LayerKinds;
using detail::LayerSums;
using detail::MemoryCore;
using detail::StageMemory;
using detail::StageShape;
using detail::kFp32Bytes;
using detail::kMaskBytes;
using detail::LayerSum;
using detail::layer_derivation;
using detail::layer_terms;
using detail::make_ctx;
using detail::Split;
using detail::stored_per_token;
using detail::sum_terms;
using detail::working_set_per_token;

using units::Bytes;
using units::format;
using units::format_count;
using units::format_number;

/// AdamW keeps two fp32 states (m, v) per parameter ([ZeRO] §3.1: K = 12 = 4 master + 4 m + 4 v).
constexpr double kAdamStateBytes = 2 * kFp32Bytes;
/// bitsandbytes 8-bit AdamW: two uint8 states plus one fp32 absmax per block of 2048 values per state ([D22] §2).
constexpr double kBnbBlock = 2048.0;
constexpr double kAdam8bitStateBytes = 2 * (1.0 + kFp32Bytes / kBnbBlock);
/// SGD with momentum: one fp32 momentum buffer.
constexpr double kSgdStateBytes = kFp32Bytes;

// ------------------------------------------------------------------------------------------------------------------
// Model states and pipeline stages
// ------------------------------------------------------------------------------------------------------------------

double norm_unit(const wl::TransformerArch& a, const ParameterCounts& p) {
  const double n = double(a.layers * a.norms_per_layer + 1);
  return n > 0 ? double(p.norms) / n : 0.0;
}

detail::LayerParams layer_params(const wl::TransformerArch& a, const ParameterCounts& p, bool moe_layer) {
  detail::LayerParams lp;
  lp.dense = double(p.attention_per_layer) + double(a.norms_per_layer) * norm_unit(a, p);
  const std::int64_t moe_layers = a.moe_layer_count();
  if (moe_layer && moe_layers > 0) {
    lp.dense += double(p.router + p.shared_experts) / double(moe_layers);
    lp.expert = double(p.routed_experts) / double(moe_layers);
  } else {
    lp.dense += double(p.dense_mlp_per_layer);
  }
  return lp;
}

const char* optimizer_formula(const wl::TrainingPlan& plan) {
  const bool bf16 = plan.optimizer_states == wl::StateDtype::bf16;
  switch (plan.optimizer) {
    case wl::OptimizerKind::adamw:
      return bf16 ? "AdamW with bf16 moments: 2 bf16 states (m, v) = 4 B/param" : "AdamW: 2 fp32 states (m, v) = 8 B/param";
    case wl::OptimizerKind::adamw_8bit:
      return "8-bit AdamW (bitsandbytes): 2 states × (1 B + 4 B fp32 absmax / 2048-value block) = 2.0039 B/param";
    case wl::OptimizerKind::sgd:
      return bf16 ? "SGD with a bf16 momentum: 1 bf16 state = 2 B/param" : "SGD with momentum: 1 fp32 state = 4 B/param";
  }
  return "";
}

int communicators(const wl::Parallelism& par) {
  // One NCCL communicator per parallel group of more than one GPU this GPU belongs to: TP, PP (p2p), the
  // data-parallel gradient group (dp·cp), CP (ring attention) and EP (all-to-all).
  return int(par.tp > 1) + int(par.pp > 1) + int(std::int64_t(par.dp) * par.cp > 1) + int(par.cp > 1) + int(par.ep > 1);
}

}  // namespace

double optimizer_state_bytes(const wl::TrainingPlan& plan) {
  const double half = plan.optimizer_states == wl::StateDtype::bf16 ? 0.5 : 1.0;  // bf16 moments: 2 B, not 4
  switch (plan.optimizer) {
    case wl::OptimizerKind::adamw: return kAdamStateBytes * half;
    case wl::OptimizerKind::adamw_8bit: return kAdam8bitStateBytes;
    case wl::OptimizerKind::sgd: return kSgdStateBytes * half;
  }
  return kAdamStateBytes;
}

// --------------------------------------------------------------------------------------------------------------------

RuntimeOverheads default_training_overheads() {
  RuntimeOverheads o;
  // CUDA context + kernel images: 1343 MiB measured by NVML after the first CUDA tensor in a Hugging Face training
  // process on a V100 (HF docs "Model training anatomy", printed as "1343 MB" from info.used // 1024**2, i.e. MiB;
  // dev case B-hf-bert-large-v100-memory). user_needs.md N9 /
  // #13 brackets it: ~300 MB per process with lazy module loading, >1000 MB before CUDA 11.7 (pytorch#107667).
  // Plus one cuBLASLt workspace of 32 MiB, the size cuBLAS recommends for Hopper and PyTorch allocates on sm90
  // (pytorch PR#120925; 4 MiB on earlier GPUs).
  o.cuda_context = units::mebibytes(1343) + units::mebibytes(32);
  // NCCL per communicator: 367 MB, the midpoint of the 342–392 MB aiconfigurator ships per TP communicator
  // (systems/h800_sxm.yaml, user_needs.md N9 / #14). Consistent with NCCL_BUFFSIZE's 4 MiB default (NCCL
  // environment-variable docs, docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-buffsize) × up to 32
  // channels × 2 ring peers = 256 MiB of Simple-protocol buffers, plus the LL/LL128 buffers and proxy FIFOs.
  o.nccl_buffers = units::megabytes(367);
  // Caching-allocator fragmentation: 5% of the allocated peak, the reserve vllm-project/compressed-tensors PR#587
  // adopted after measuring 1.83 GiB on a 70B model (user_needs.md N9 / #15). An assumption: pathological cases
  // reach far more (pytorch#35901).
  o.fragmentation = 0.05;
  o.origin =
      "CUDA context 1343 MiB (HF 'Model training anatomy', NVML after first CUDA tensor, V100) + 32 MiB cuBLASLt "
      "workspace (pytorch PR#120925); NCCL 367 MB per communicator (aiconfigurator h800_sxm.yaml 342-392 MB, "
      "NCCL_BUFFSIZE 4 MiB × channels); fragmentation 5% (vllm-project/compressed-tensors PR#587)";
  return o;
}

units::Bytes activation_bytes_per_layer(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                        ActivationLayout layout) {
  const Ctx c = make_ctx(arch, plan, layout);
  if (arch.layers <= 0) return units::bytes(0);
  const LayerSum dense = sum_terms(c, layer_terms(c, false));
  const LayerSum moe = arch.moe ? sum_terms(c, layer_terms(c, true)) : dense;
  const double n_moe = double(arch.moe_layer_count()), L = double(arch.layers);
  const double mean = ((L - n_moe) * stored_per_token(c, dense) + n_moe * stored_per_token(c, moe)) / L;
  return units::bytes(mean * c.tokens);
}

namespace detail {

/// Layers of pipeline stage `i`: p·v model chunks of ⌊L/(p·v)⌋ layers (the first L mod (p·v) chunks one more);
/// stage i holds chunks i, i+p, ..., i+(v−1)p (Megatron's interleaved assignment; v = 1 is plain 1F1B).
StageShape stage_shape(const wl::TransformerArch& a, const ParameterCounts& params, int p, int v, int i) {
  StageShape st;
  st.index = i;
  st.first = i == 0;
  st.last = i == p - 1;
  const LayerKinds kinds = layer_kinds(a, params);
  const std::int64_t C = std::int64_t(p) * v;
  const std::int64_t base = a.layers / C, rem = a.layers % C;
  for (int k = 0; k < v; ++k) {
    const std::int64_t j = i + std::int64_t(k) * p;
    const std::int64_t start = j * base + std::min(j, rem);
    const std::int64_t n = base + (j < rem ? 1 : 0);
    for (std::int64_t l = start; l < start + n; ++l) {
      const bool moe = a.is_moe_layer(l);
      const LayerParams& lp = moe ? kinds.moe : kinds.dense;
      ++st.layers;
      st.moe_layers += moe ? 1 : 0;
      st.p_dense += lp.dense;
      st.p_expert += lp.expert;
    }
  }
  return st;
}

LayerKinds layer_kinds(const wl::TransformerArch& a, const ParameterCounts& params) {
  return {layer_params(a, params, false), layer_params(a, params, true)};
}

LayerSums layer_sums(const Ctx& c) {
  LayerSums s;
  s.dense = sum_terms(c, layer_terms(c, false));
  s.moe = c.a.moe ? sum_terms(c, layer_terms(c, true)) : s.dense;
  return s;
}

void memory_core(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                 const RuntimeOverheads& overheads, const Ctx& c, const LayerKinds& kinds, const LayerSums& sums,
                 const StageShape& first, const StageShape& last, MemoryCore& out) {
  const auto& par = plan.par;
  const auto& pr = plan.precision;
  const int p = std::max(1, par.pp);
  const int v = plan.schedule == wl::PipelineSchedule::interleaved ? std::max(1, par.virtual_stages) : 1;
  const double t = c.t;
  const double ep = std::max(1, par.ep);
  const std::int64_t m = std::max<std::int64_t>(1, plan.micro_batches());

  // ZeRO/FSDP shard group ([ZeRO] §5): the data-parallel replicas (dp·cp: CP ranks hold the same weights, as
  // Megatron-Core's distributed optimizer shards over the dp×cp group), or the hybrid shard group. Routed experts
  // are replicated over dp·cp/ep ranks only (EP is carved out of dp·cp).
  const double n_dense = par.shard_group > 0 ? double(par.shard_group) : double(par.dp) * double(std::max(1, par.cp));
  const double n_expert = std::max(1.0, n_dense / ep);
  const int zero = static_cast<int>(plan.zero);
  auto shard = [&](int stage, double n) { return zero >= stage ? n : 1.0; };
  const double opt_b = optimizer_state_bytes(plan);
  const double unit_norm = norm_unit(a, params);
  const double comms = communicators(par);
  out.n_dense = n_dense;
  out.n_expert = n_expert;
  out.comms = comms;
  // Per-token bytes each layer kind keeps, and its transient recomputation working set.
  const double stored_dense = stored_per_token(c, sums.dense), stored_moe = stored_per_token(c, sums.moe);
  const double ws_dense = working_set_per_token(c, sums.dense), ws_moe = working_set_per_token(c, sums.moe);

  auto evaluate = [&](const StageShape& shape, StageMemory& st) {
    st.shape = shape;
    const std::int64_t dense_layers = shape.layers - shape.moe_layers;
    st.p_dense = shape.p_dense;
    st.p_expert = shape.p_expert;
    st.largest_layer_gpu = 0.0;
    if (dense_layers > 0)
      st.largest_layer_gpu = std::max(st.largest_layer_gpu, kinds.dense.dense / t + kinds.dense.expert / (t * ep));
    if (shape.moe_layers > 0)
      st.largest_layer_gpu = std::max(st.largest_layer_gpu, kinds.moe.dense / t + kinds.moe.expert / (t * ep));
    // The stage's embedding and output-layer parameters (not decoder layers). Tied embeddings under PP: the last
    // stage keeps its own copy of the word embeddings for the output layer (Megatron-LM; gradients all-reduced over
    // the embedding group).
    const double embed_head = (shape.first ? double(params.embedding + params.position_embedding) : 0.0) +
                              (shape.last ? double(params.lm_head) : 0.0) +
                              (shape.last && a.tied_embeddings && p > 1 ? double(params.embedding) : 0.0);
    st.p_dense += embed_head + (shape.last ? unit_norm : 0.0);
    const double pd = st.p_dense / t, pe = st.p_expert / (t * ep);
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
      const double ad = (n_dl * (ld.dense + ld.expert) + n_ml * lm.dense) / t, ae = n_ml * lm.expert / (t * ep);
      st.lora_adapters = ad + ae;
      st.weights = pd * base_b / shard(3, n_dense) + pe * base_b / shard(3, n_expert) +
                   ad * pr.weight_bytes / shard(3, n_dense) + ae * pr.weight_bytes / shard(3, n_expert);
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
    // A PyTorch training loop (eager modules; plan.kernels == eager). Measured allocator timelines of our H100/H200
    // runs (data/validation/measured/h200-sxm-141gb/mem_*.json, scripts/measure/mem_timeline.py) show:
    //  - DDP keeps its communication buckets allocated across steps, one more copy of every gradient (+4 B/param
    //    with fp32 grads, measured on 2 and 4 H200s);
    //  - FSDP2 keeps the root unit (embedding, final norm and LM head when only the layers are wrapped) gathered from
    //    its forward to its backward, and gathers one layer for the backward; in the compute dtype;
    //  - torch.autocast with fp32 parameters caches a bf16 copy of every GEMM weight for the forward, and each
    //    nn.Linear keeps its copy for the backward: + a_b per GEMM weight until the layer's backward runs.
    st.amp_copies = 0.0;
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
        st.amp_copies = std::max(0.0, (st.p_dense - emb) / t + st.p_expert / (t * ep)) * c.ab;
      }
    }

    // FP8 GEMMs (Transformer Engine, as Megatron-Core and NeMo run them): each linear layer quantises its weight once
    // per step and caches it across the micro-batches (`get_weight_workspace(..., cache_name="weight")` whenever
    // Megatron passes is_first_microbatch), in both layouts Hopper's FP8 GEMMs need: rowwise for the forward and
    // columnwise (the transpose) for the backward's dgrad — 2 B per GEMM weight beside the bf16 weight. With FP8
    // parameters the weight is itself the rowwise FP8 data; only the transpose cache is added (1 B). The cache is a
    // module attribute: alive across steps. Embedding and LM head run in bf16 (not TE layers) and are not cached.
    // Under ZeRO-3 only the gathered layers have one.
    st.fp8_cache = 0.0;
    if (pr.compute == hw::Precision::fp8) {
      const bool fp8_stored = pr.fp8_params || (plan.lora.on() && plan.lora.base == wl::LoraBase::fp8);
      const bool dequantised = plan.lora.on() && (plan.lora.base == wl::LoraBase::nf4 || plan.lora.base == wl::LoraBase::int8);
      const double per_weight = dequantised ? 0.0 : fp8_stored ? 1.0 : 2.0;
      double gemm_params = (st.p_dense - embed_head) / t + st.p_expert / (t * ep);
      if (plan.zero == wl::ZeroStage::parameters && n_dense > 1)
        gemm_params = st.largest_layer_gpu * (plan.overlap_param_gather ? 2.0 : 1.0);
      st.fp8_cache = std::max(0.0, gemm_params) * per_weight;
    }

    // Activations. 1F1B: stage i holds min(p − i, m) micro-batches of its layers ([K22] §4.2.3: the first stage holds
    // p micro-batches of L/p layers, i.e. L layers' worth). Interleaved ([N21] §2.2.2, Megatron's warm-up): stage i
    // holds min(2(p−i−1) + (v−1)p + 1, m·v) model chunks, which is L·(1 + (p−1)/(p·v)) layers' worth on stage 0.
    const int i = shape.index;
    st.inflight_mb = double(std::min<std::int64_t>(p - i, m));
    if (p == 1) st.inflight_mb = 1.0;
    if (v > 1 && p > 1) {
      const double chunks = std::min<double>(2.0 * (p - i - 1) + double(v - 1) * p + 1.0, double(m) * v);
      st.layer_factor = chunks / v;
    } else {
      st.layer_factor = st.inflight_mb;
    }
    // Layers of one kind keep the same bytes: Σ_stage layers stored = n_dense·stored_dense + n_moe·stored_moe.
    const double per_mb = double(dense_layers) * stored_dense + double(shape.moe_layers) * stored_moe;
    double ws = 0.0;
    if (dense_layers > 0) ws = std::max(ws, ws_dense);
    if (shape.moe_layers > 0) ws = std::max(ws, ws_moe);
    st.stored_layers = per_mb * c.tokens * st.layer_factor;
    st.working_set = ws * c.tokens;
    st.extra_first = st.extra_last = st.logits_b = 0.0;
    if (shape.first && c.dropout)  // embedding-output dropout mask ([K22] §4.3), per in-flight micro-batch
      st.extra_first = st.inflight_mb * c.tokens * double(a.hidden) * kMaskBytes / c.divisor(Split::sequence);
    if (shape.last) {
      // [K22] §4.3 output layer: final-norm input and output-projection input (2·s·b·h·a_b, /t with SP); logits in
      // the activation dtype plus their fp32 upcast for the vocab-parallel cross entropy (Megatron fuses it in place).
      st.extra_last = c.tokens * 2.0 * double(a.hidden) * c.ab / c.divisor(Split::sequence);
      st.logits_b = c.tokens * double(a.vocab) / t * (c.ab + kFp32Bytes);
      // PyTorch's cross_entropy under autocast: log_softmax reads the bf16 logits and keeps its fp32 output; its
      // backward's fp32 incoming gradient coexists with both (measured peak, mem_*.json): a_b + 4 + 4 per logit.
      if (plan.kernels == wl::KernelStyle::eager) st.logits_b += c.tokens * double(a.vocab) / t * kFp32Bytes;
    }
    // The recomputation working set and the logits/loss buffers do not coexist: the loss buffers are freed once the
    // output layer's backward has run, before the first layer is recomputed. The peak counts the larger of the two.
    st.activations = st.stored_layers + st.extra_first + st.extra_last + std::max(0.0, st.working_set - st.logits_b);
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
      const double start = states + st.amp_copies + st.activations + st.logits_b;
      const double end = states + st.grads;
      st.grads_at_peak = end > start;
      st.acts_at_peak = !st.grads_at_peak;
      allocated = std::max(start, end);
    }
    st.frag = overheads.fragmentation * allocated;
    st.total = allocated + st.ctx + st.nccl + st.frag;
  };

  evaluate(first, out.first);
  out.two_stages = p > 1;
  if (out.two_stages) evaluate(last, out.last);
}

}  // namespace detail

/// Per-GPU training memory on the heaviest pipeline stage (the first and the last are evaluated; the larger total is
/// reported, the other named in a note).
///  - Model states ([ZeRO] §3.1, §5): P_gpu = P_stage,dense/t + P_stage,experts/(t·ep); weights P_gpu·b_w, gradients
///    P_gpu·b_g, master weights P_gpu·b_m, optimizer states P_gpu·b_o, each divided by the shard group N from the
///    ZeRO stage that shards it (1: optimizer + master, 2: + gradients, 3: + weights). ZeRO-3 adds the gathered
///    largest layer: two units of weights when prefetching (one otherwise) and one of gradients.
///  - Activations ([K22]): in_flight · Σ_stage layers stored(layer) + first-stage embedding dropout + last-stage final
///    norm and output-projection inputs + max(0, recomputation working set − logits buffers); stored(layer) is the
///    sum of the layer's saved tensors (layer_terms) per token × (s/c)·b, under the recomputation mode.
///  - Logits ([K22] §4.3): (s/c)·b·V/t·(a_b + 4) on the last stage.
///  - Overheads: CUDA context + communicators·NCCL buffers + fragmentation·(everything the allocator holds).
TrainingMemory training_memory(const wl::TransformerArch& a, const ParameterCounts& params,
                               const wl::TrainingPlan& plan, const hw::GpuSpec& gpu, const RuntimeOverheads& overheads,
                               Explain explain, ActivationLayout layout) {
  const Ctx c = make_ctx(a, plan, layout);
  const auto& par = plan.par;
  const auto& pr = plan.precision;
  const int p = std::max(1, par.pp);
  const int v = plan.schedule == wl::PipelineSchedule::interleaved ? std::max(1, par.virtual_stages) : 1;
  const double t = c.t;
  const double ep = std::max(1, par.ep);
  const std::int64_t m = std::max<std::int64_t>(1, plan.micro_batches());
  const int zero = static_cast<int>(plan.zero);
  const double opt_b = optimizer_state_bytes(plan);

  MemoryCore core;
  const StageShape first_shape = detail::stage_shape(a, params, p, v, 0);
  const StageShape last_shape = p > 1 ? detail::stage_shape(a, params, p, v, p - 1) : first_shape;
  detail::memory_core(a, params, plan, overheads, c, detail::layer_kinds(a, params), detail::layer_sums(c),
                      first_shape, last_shape, core);
  const double n_dense = core.n_dense, n_expert = core.n_expert, comms = core.comms;
  const StageMemory& first = core.first;
  const StageMemory& last = core.two_stages ? core.last : core.first;
  const StageMemory& h = core.heaviest();

  TrainingMemory r;
  // What is alive at the peak: a PyTorch loop peaks either at the backward's start (no gradients yet) or its end.
  r.weights = units::bytes(h.weights + h.gathered_w + h.fp8_cache + (h.acts_at_peak ? h.amp_copies : 0.0));
  r.gradients = units::bytes((h.grads_at_peak ? h.grads : 0.0) + h.gathered_g);
  r.master_weights = units::bytes(h.master);
  r.optimizer_states = units::bytes(h.opt);
  r.activations = units::bytes(h.acts_at_peak ? h.activations : 0.0);
  r.logits = units::bytes(h.acts_at_peak ? h.logits_b : 0.0);
  r.cuda_context = units::bytes(h.ctx);
  r.nccl_buffers = units::bytes(h.nccl);
  r.fragmentation = units::bytes(h.frag);
  r.total = units::bytes(h.total);
  r.capacity = gpu.memory_capacity();
  r.host_offloaded = units::bytes(std::max(first.host, last.host));
  r.fits = r.total <= r.capacity;

  if (explain == Explain::off) return r;

  // ---------------------------------------------------------------- derivation
  const Origin cfg = Origin::model_config(a.source);
  const Origin par_o = Origin::user("plan.par");
  const Origin prec_o = Origin::user("plan.precision");
  const Origin cnt = Origin::derived("parameter_counts");
  auto B = [](double b) { return format(units::bytes(b)); };
  const std::string stage_name =
      p == 1 ? std::string("the only pipeline stage")
             : fmt::format("pipeline stage {} of {} ({})", h.shape.index, p, h.shape.first ? "first" : "last");

  Derivation& d = r.derivation;
  d.id = "memory";
  d.title = "Training memory per GPU";
  d.formula =
      "total = weights + gradients + master weights + optimizer states + activations + logits + CUDA context "
      "+ NCCL buffers + fragmentation";
  d.inputs = {{"capacity", fmt::format("{} ({})", format(r.capacity), format(r.capacity, units::BytePrefix::binary)),
               "memory the device exposes",
               Origin::datasheet(
                   gpu.info.cite(gpu.memory.device_reported ? "/memory/device_reported_MiB" : "/memory/capacity_GB"))},
              {"t·p·d·c·e", fmt::format("{}·{}·{}·{}·{}", par.tp, par.pp, par.dp, par.cp, par.ep),
               "tensor·pipeline·data·context·expert parallel", par_o},
              {"ZeRO", fmt::format("stage {}", zero), "ZeRO/FSDP sharding stage", Origin::user("plan.zero")},
              {"recompute",
               plan.recompute == wl::Recompute::none        ? "none"
               : plan.recompute == wl::Recompute::selective ? "selective"
                                                            : "full",
               "activation recomputation", Origin::user("plan.recompute")}};
  d.result = fmt::format("{} of {} ({}): {}", format(r.total), format(r.capacity), stage_name,
                         r.fits ? "fits" : "does not fit");
  if (p > 1) {
    d.notes.push_back(
        fmt::format("heaviest stage: {} — first stage {} (holds {} in-flight micro-batches of its {} "
                    "layers and the embedding), last stage {} (holds the LM head and the logits)",
                    stage_name, format(units::bytes(first.total)), format_number(first.layer_factor),
                    first.shape.layers, format(units::bytes(last.total))));
  }

  // model states
  const std::string shard_note =
      fmt::format("ZeRO shard group N = {} ({}); routed experts over N/ep = {}", format_number(n_dense),
                  par.shard_group > 0 ? "hybrid shard group" : "dp·cp", format_number(n_expert));
  auto states_inputs = [&](double bytes_per, const std::string& b_sym, const std::string& b_meaning, Origin bo) {
    std::vector<DerivationInput> in = {
        {"P_stage", format_count(h.p_dense + h.p_expert),
         fmt::format("parameters of {} ({} in routed experts)", stage_name, format_count(h.p_expert)), cnt},
        {"t", format_count(t), "tensor parallel", par_o},
        {"ep", format_count(ep), "expert parallel (routed experts only)", par_o},
        {b_sym, format_number(bytes_per), b_meaning, std::move(bo)},
        {"N", format_number(n_dense), "ZeRO shard group", par_o}};
    return in;
  };
  const double p_gpu = h.p_dense / t + h.p_expert / (t * ep);
  d.children.push_back({"memory.weights",
                        "Weights",
                        fmt::format("P_gpu·b_w{} ; P_gpu = P_dense/t + P_experts/(t·ep) = {}", zero >= 3 ? " / N" : "",
                                    format_count(p_gpu)),
                        states_inputs(pr.weight_bytes, "b_w", "bytes per working weight", prec_o),
                        B(r.weights.raw()),
                        {shard_note},
                        {}});
  if (params.mtp > 0)
    d.children.back().notes.push_back(
        fmt::format("{} multi-token-prediction parameters are not counted (as in parameter_counts' total)",
                    format_count(double(params.mtp))));
  const bool torch_loop = plan.kernels == wl::KernelStyle::eager;
  if (h.gathered_w > 0.0 && torch_loop) {
    d.children.back().notes.push_back(fmt::format(
        "includes {} of gathered parameters in the compute dtype: PyTorch FSDP keeps the root unit (embedding, final "
        "norm, LM head) gathered from its forward to its backward and gathers one layer ({} params per GPU) for the "
        "backward (measured allocator timelines, data/validation/measured/h200-sxm-141gb/mem_*.json)",
        B(h.gathered_w), format_count(h.largest_layer_gpu)));
  } else if (h.gathered_w > 0.0) {
    d.children.back().notes.push_back(fmt::format(
        "includes {} of gathered parameters: ZeRO-3/FSDP materialises the largest layer ({} params per GPU) × {} "
        "(current + prefetched unit)",
        B(h.gathered_w), format_count(h.largest_layer_gpu), plan.overlap_param_gather ? 2 : 1));
  }
  if (plan.lora.on())
    d.children.back().notes.push_back(fmt::format(
        "LoRA rank {} on {}: the frozen base at {} B per weight ({}) plus {} adapter parameters per GPU at {} B; only "
        "the adapters have gradients, master weights and optimizer states (Hu et al. 2021; QLoRA NF4: Dettmers et "
        "al. 2023 §3)",
        plan.lora.rank, wl::to_string(plan.lora.targets),
        format_number(base_weight_bytes(plan), 4), wl::to_string(plan.lora.base),
        format_count(h.lora_adapters), format_number(pr.weight_bytes)));
  if (pr.fp8_params)
    d.children.back().notes.push_back(
        "FP8 parameters: the Transformer Engine layers' weights at 1 B; the embedding and the LM head stay bf16 (2 B)");
  if (h.fp8_cache > 0.0)
    d.children.back().notes.push_back(fmt::format(
        "includes {}: the FP8 GEMM weights Transformer Engine caches across micro-batches, {} B per weight ({}; "
        "TransformerEngine transformer_engine/pytorch/module/linear.py get_weight_workspace)",
        B(h.fp8_cache), pr.fp8_params ? 1 : 2,
        pr.fp8_params ? "the transpose for the backward; the FP8 parameter is the forward's copy"
                      : "the FP8 copy for the forward and its transpose for the backward's dgrad"));
  if (h.amp_copies > 0.0 && h.acts_at_peak)
    d.children.back().notes.push_back(fmt::format(
        "includes {}: torch.autocast's {}-byte copies of the GEMM weights, cached in the forward and kept by each "
        "nn.Linear for its backward (measured allocator timelines)",
        B(h.amp_copies), format_number(c.ab)));
  d.children.push_back({"memory.gradients",
                        "Gradients",
                        fmt::format("P_gpu·b_g{}", zero >= 2 ? " / N" : ""),
                        states_inputs(pr.gradient_bytes, "b_g", "bytes per gradient", prec_o),
                        B(h.grads + h.gathered_g),
                        {},
                        {}});
  if (h.gathered_g > 0.0)
    d.children.back().notes.push_back(
        fmt::format("includes {}: {}", B(h.gathered_g),
                    plan.zero == wl::ZeroStage::parameters
                        ? "the unsharded gradient of one layer before its reduce-scatter"
                        : "PyTorch DDP's gradient buckets, allocated across steps (one more copy of the gradients)"));
  if (!h.grads_at_peak)
    d.children.back().notes.push_back(fmt::format(
        "the per-parameter gradients ({}) are not alive at the peak: PyTorch's zero_grad(set_to_none=True) frees them "
        "and the backward allocates them as it frees the saved activations, so the peak is the backward's start",
        B(h.grads)));
  if (!h.acts_at_peak)
    d.children.back().notes.push_back(fmt::format(
        "the peak is the backward's end: every gradient ({}) is allocated and every saved activation ({} + logits {}) "
        "freed; at the backward's start the activations would weigh less than the gradients",
        B(h.grads), B(h.activations), B(h.logits_b)));
  d.children.push_back({"memory.master_weights",
                        "Master weights",
                        fmt::format("P_gpu·b_m{}", zero >= 1 ? " / N" : ""),
                        states_inputs(pr.master_bytes, "b_m", "bytes per master weight (fp32 copy)", prec_o),
                        B(h.master),
                        {"[ZeRO] §5: P_os shards the fp32 master weights with the optimizer states"},
                        {}});
  const bool offloaded = plan.offload == wl::Offload::optimizer;
  if (offloaded)
    d.children.back().notes.push_back(
        fmt::format("CPU offload: 0 on the GPU; the shard's master weights and optimizer states ({}) are in host "
                    "memory (ZeRO-Offload, Ren et al. 2021)",
                    B(h.host)));
  d.children.push_back({"memory.optimizer_states",
                        "Optimizer states",
                        fmt::format("P_gpu·b_o{} ; {}", zero >= 1 ? " / N" : "", optimizer_formula(plan)),
                        states_inputs(opt_b, "b_o", "optimizer-state bytes per parameter",
                                      Origin::constant(optimizer_formula(plan))),
                        B(h.opt),
                        {},
                        {}});
  if (offloaded) d.children.back().notes.push_back("CPU offload: kept in host memory, 0 on the GPU");
  if (plan.optimizer == wl::OptimizerKind::adamw_8bit)
    d.children.back().notes.push_back(
        "[D22] §2: block-wise quantisation, 2048 values per block, one fp32 absmax per "
        "block; tensors under 4096 elements stay 32-bit (negligible)");

  // activations
  Derivation act;
  act.id = "memory.activations";
  act.title = "Activations";
  act.formula =
      "in_flight · Σ_stage layers stored(layer) + embedding dropout (first) + final norm/LM-head inputs "
      "(last) + max(0, recomputation working set − logits buffers)";
  const char* rmode = plan.recompute == wl::Recompute::none        ? "none: every saved tensor"
                      : plan.recompute == wl::Recompute::selective ? "selective: all but the attention core"
                                                                   : "full: the layer input only (s·b·h·a_b)";
  act.inputs = {
      {"s", format_count(double(plan.seq_len)), "sequence length", Origin::user("plan.seq_len")},
      {"b", format_count(double(plan.micro_batch)), "micro-batch (sequences)", Origin::user("plan.micro_batch")},
      {"c", format_count(double(std::max(1, par.cp))), "context parallel (divides the sequence)", par_o},
      {"t", format_count(t), "tensor parallel", par_o},
      {"SP", c.sp ? "on" : "off", "sequence parallelism", par_o},
      {"h", format_count(double(a.hidden)), "hidden size", cfg},
      {"a", format_count(double(a.heads)), "attention heads", cfg},
      {"a_b", format_number(c.ab), "bytes per stored activation", prec_o},
      {"recompute", rmode, "what each layer keeps", Origin::user("plan.recompute")},
      {"in_flight", format_number(h.layer_factor), "micro-batches of the stage's layers held at the peak",
       Origin::derived(v > 1 ? "interleaved: min(2(p−i−1) + (v−1)p + 1, m·v) chunks / v" : "1F1B: min(p − i, m)")},
      {"m", format_count(double(m)), "micro-batches per step (global / (micro·dp))",
       Origin::user("plan.global_batch")}};
  act.result = B(h.activations);
  act.notes.push_back(fmt::format("stored by the stage's {} layers: {}", h.shape.layers, B(h.stored_layers)));
  if (h.extra_first > 0) act.notes.push_back(fmt::format("embedding dropout masks: {}", B(h.extra_first)));
  if (h.extra_last > 0)
    act.notes.push_back(fmt::format("final norm and output-projection inputs: {}", B(h.extra_last)));
  if (h.working_set > 0)
    act.notes.push_back(fmt::format(
        "recomputation working set (one layer, one micro-batch, during its backward): {}; it does not coexist with the "
        "logits/loss buffers ({}), so the peak adds max(0, working set − logits) = {}",
        B(h.working_set), B(h.logits_b), B(std::max(0.0, h.working_set - h.logits_b))));
  if (p > 1)
    act.notes.push_back(
        v > 1 ? "interleaved schedule: the first stage holds L·(1 + (p−1)/(p·v)) layers' worth ([K22] §4.2.3, [N21])"
              : "1F1B: the first pipeline stage is the heaviest in activations: it holds p in-flight "
                "micro-batches of its L/p layers, L layers' worth ([K22] §4.2.3)");
  if (m < p && p > 1)
    act.notes.push_back(
        fmt::format("only m = {} micro-batches exist, fewer than p = {}: at most m are in flight", m, p));
  {
    // The textbook rule of thumb (12·s·b·h·2 bytes per layer, one GPU, no recomputation) next to this count for the
    // same layer (textbook T6).
    wl::TrainingPlan single = plan;
    single.par.tp = single.par.cp = 1;
    single.par.sequence_parallel = false;
    single.recompute = wl::Recompute::none;
    const double tokens1 = double(plan.seq_len) * double(plan.micro_batch);
    const double thumb = 12.0 * tokens1 * double(a.hidden) * 2.0;
    const double ours1 = activation_bytes_per_layer(a, single, layout).raw();
    act.notes.push_back(fmt::format(
        "one GPU (t = c = 1), no recomputation: rule of thumb 12·s·b·h·2 B per layer gives {} per layer, {} "
        "for {} layers; the term-by-term count gives {} per layer, {} for {} layers",
        B(thumb), B(thumb * double(a.layers)), a.layers, B(ours1), B(ours1 * double(a.layers)), a.layers));
  }
  if (a.moe)
    act.notes.push_back(
        "MoE: balanced routing assumed (each GPU receives k copies of its tokens); expert tensor "
        "parallelism = t (the Megatron-Core default), so expert intermediates split by t");
  if (a.layers > a.moe_layer_count()) act.children.push_back(layer_derivation(c, false, "memory.activations.layer"));
  if (a.moe && a.moe_layer_count() > 0)
    act.children.push_back(layer_derivation(c, true, "memory.activations.moe_layer"));
  d.children.push_back(std::move(act));

  d.children.push_back(
      {"memory.logits",
       "Logits and loss buffers",
       torch_loop ? "(s/c)·b·V/t·(a_b + 4 + 4): logits, log_softmax's fp32 output and its fp32 incoming gradient"
                  : "(s/c)·b·V/t·(a_b + 4): logits in the activation dtype + their fp32 upcast for the cross entropy",
       {{"V", format_count(double(a.vocab)), "vocabulary", cfg},
        {"(s/c)·b", format_count(c.tokens), "tokens of one micro-batch on this GPU", Origin::user("plan")},
        {"t", format_count(t), "tensor parallel (vocab-parallel output layer)", par_o}},
       B(h.logits_b),
       {h.logits_b <= 0 ? "the heaviest stage is not the last: it holds no logits"
        : torch_loop     ? "PyTorch's cross_entropy under autocast: log_softmax reads the bf16 logits and keeps its fp32 "
                           "output; its backward's fp32 incoming gradient coexists with both (measured allocator "
                           "timelines, data/validation/measured/h200-sxm-141gb/mem_*.json)"
                         : "Megatron's vocab-parallel cross entropy upcasts to fp32 and computes the softmax in place "
                           "([K22] §4.3: 4sbv/t); the bf16 logits are alive while it runs"},
       {}});
  d.children.push_back({"memory.cuda_context",
                        "CUDA context and cuBLAS workspace",
                        "constant per process",
                        {{"ctx", format(overheads.cuda_context), "CUDA context + kernels + cuBLASLt workspace",
                          Origin::assumption(overheads.origin)}},
                        B(h.ctx),
                        {},
                        {}});
  d.children.push_back(
      {"memory.nccl",
       "NCCL buffers",
       "communicators · buffers per communicator",
       {{"communicators", format_number(comms), "TP, PP, DP·CP, CP and EP groups with more than one GPU", par_o},
        {"per communicator", format(overheads.nccl_buffers), "NCCL buffers", Origin::assumption(overheads.origin)}},
       B(h.nccl),
       {},
       {}});
  d.children.push_back(
      {"memory.fragmentation",
       "Allocator fragmentation",
       "f · (weights + gradients + master + optimizer + activations + logits)",
       {{"f", format_number(overheads.fragmentation), "fragmentation fraction", Origin::assumption(overheads.origin)}},
       B(h.frag),
       {},
       {}});
  return r;
}

}  // namespace gpuplan::model
