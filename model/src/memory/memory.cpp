// Training memory per GPU (model/include/gpuplan/model/memory.hpp): training_memory over the stages that
// stage_shapes.cpp lays out and stage_memory.cpp evaluates, the optimizer's state bytes, the runtime overheads, one
// layer's activations and the capacity basis. The sources below are cited in this file and in stage_memory.cpp.
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
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memory_core.hpp"
#include "runtime_context.hpp"
#include "quant_recipe.hpp"

namespace gpuplan::model {
namespace {

using detail::Ctx;
using detail::LayerSums;
using detail::MemoryCore;
using detail::StageMemory;
using detail::kFp32Bytes;
using detail::make_ctx;
using detail::stored_per_token;

using units::Bytes;

/// AdamW keeps two fp32 states (m, v) per parameter ([ZeRO] §3.1: K = 12 = 4 master + 4 m + 4 v).
constexpr double kAdamStateBytes = 2 * kFp32Bytes;
/// bitsandbytes 8-bit AdamW: two uint8 states plus one fp32 absmax per block of 2048 values per state ([D22] §2).
constexpr double kBnbBlock = 2048.0;
constexpr double kAdam8bitStateBytes = 2 * (1.0 + kFp32Bytes / kBnbBlock);
/// SGD with momentum: one fp32 momentum buffer.
constexpr double kSgdStateBytes = kFp32Bytes;

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

namespace {
// One cuBLASLt workspace of 32 MiB, the size cuBLAS recommends for Hopper and PyTorch allocates on sm90 (pytorch
// PR#120925; 4 MiB on earlier GPUs), beside the context on every part.
constexpr double kCublasWorkspaceMiB = 32;

RuntimeOverheads overheads_with_context(double context_MiB, const std::string& context_origin) {
  RuntimeOverheads o;
  o.cuda_context = units::mebibytes(context_MiB + kCublasWorkspaceMiB);
  // NCCL per communicator: 367 MB, the midpoint of the 342–392 MB aiconfigurator ships per TP communicator
  // (systems/h800_sxm.yaml, user_needs.md N9 / #14). Consistent with NCCL_BUFFSIZE's 4 MiB default (NCCL
  // environment-variable docs, docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-buffsize) × up to 32
  // channels × 2 ring peers = 256 MiB of Simple-protocol buffers, plus the LL/LL128 buffers and proxy FIFOs.
  o.nccl_buffers = units::megabytes(367);
  // Caching-allocator fragmentation with one tensor per parameter (wl::ParamLayout::per_tensor; the contiguous
  // layout's reserve is detail::fragmentation_fraction's): 5% of the allocated peak, the reserve
  // vllm-project/compressed-tensors PR#587 adopted after measuring 1.83 GiB on a 70B model (user_needs.md N9 / #15). An assumption: pathological cases
  // reach far more (pytorch#35901); our H200 steps at the capacity limit need 5.3-9.9% (mem_headroom.json).
  o.fragmentation = 0.05;
  o.origin = context_origin +
             " + 32 MiB cuBLASLt workspace (pytorch PR#120925); NCCL 367 MB per communicator (aiconfigurator "
             "h800_sxm.yaml 342-392 MB, NCCL_BUFFSIZE 4 MiB × channels); fragmentation 5% "
             "(vllm-project/compressed-tensors PR#587)";
  return o;
}
}  // namespace

namespace detail {
// The reserve with the static state in a few buffers (wl::ParamLayout::contiguous): the H200 bisection of the smallest
// per-process memory cap a training step runs under, with Megatron-Core's layout emulated in PyTorch (bf16 weights and
// gradients one buffer each, flat fp32 master and AdamW states; data/validation/measured/h200-sxm-141gb/
// mem_headroom_contiguous.json, README "The same cap with Megatron-Core's static buffers") needed 0.14% (llama1b
// s2048 b4) and 0.48% (w7b L8 s4096 b4) of the allocated peak above it, against 4.97% and 6.61% per tensor. The larger
// of the two, rounded up: 0.5%. The bisection's step is 64 MiB, so the measured caps are upper bounds already.
constexpr double kContiguousFragmentation = 0.005;

double fragmentation_fraction(const RuntimeOverheads& overheads, const wl::TrainingPlan& plan, std::string* origin) {
  if (plan.param_layout == wl::ParamLayout::contiguous) {
    if (origin != nullptr)
      *origin = "param_layout contiguous: 0.5%, the larger of 0.14% and 0.48% of the allocated peak measured on an "
                "H200 with Megatron-Core's buffer layout (data/validation/measured/h200-sxm-141gb/"
                "mem_headroom_contiguous.json; 4.97-6.61% per tensor in the same run)";
    return kContiguousFragmentation;
  }
  if (origin != nullptr) *origin = "param_layout per_tensor: " + overheads.origin;
  return overheads.fragmentation;
}
}  // namespace detail

RuntimeOverheads default_training_overheads() {
  // CUDA context + kernel images: 1343 MiB measured by NVML after the first CUDA tensor in a Hugging Face training
  // process on a V100 (HF docs "Model training anatomy", printed as "1343 MB" from info.used // 1024**2, i.e. MiB;
  // dev case B-hf-bert-large-v100-memory). user_needs.md N9 / #13 brackets it: ~300 MB per process with lazy module
  // loading, >1000 MB before CUDA 11.7 (pytorch#107667). The generic figure, for generations without their own.
  return overheads_with_context(1343, "CUDA context 1343 MiB (generic: HF 'Model training anatomy', NVML after first "
                                      "CUDA tensor, V100)");
}

RuntimeOverheads training_overheads(const hw::GpuSpec& gpu) {
  // The GPU file's own figure (memory.context_MiB with its context_basis: measured or published for the part's
  // generation), else the generic one.
  if (!gpu.memory.context) return default_training_overheads();
  const double MiB = gpu.memory.context->raw() / 1048576.0;
  return overheads_with_context(MiB, fmt::format("CUDA context {:.0f} MiB ({}: {})", MiB, gpu.info.id,
                                                 gpu.memory.context_basis));
}

bool context_from_gpu_file(units::Bytes cuda_context, const hw::GpuSpec& gpu) {
  if (!gpu.memory.context) return false;
  const double file = (*gpu.memory.context + units::mebibytes(kCublasWorkspaceMiB)).raw();
  return std::abs(cuda_context.raw() - file) < 1.0;  // bytes: the MiB round trip of training_overheads()
}

Origin context_origin(units::Bytes cuda_context, const hw::GpuSpec& gpu, const std::string& origin) {
  if (!context_from_gpu_file(cuda_context, gpu)) return Origin::assumption(origin);
  return Origin::measurement(gpu.info.cite("/memory/context_MiB") + ": " + gpu.memory.context_basis +
                             " + 32 MiB cuBLASLt workspace (pytorch PR#120925)");
}

units::Bytes activation_bytes_per_layer(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                        ActivationLayout layout) {
  const Ctx c = make_ctx(arch, plan, layout);
  if (arch.layers <= 0) return units::bytes(0);
  const LayerSums sums = detail::layer_sums(c);
  const double n_moe = double(arch.moe_layer_count()), L = double(arch.layers);
  double total = (L - n_moe) * stored_per_token(c, sums.dense) + n_moe * stored_per_token(c, sums.moe);
  if (sums.by_kind) {
    total = 0.0;
    for_each_layer_kind(arch, [&](LayerKind k, std::int64_t n) {
      total += double(n) * stored_per_token(c, sums.kind[static_cast<std::size_t>(k.index())]);
    });
  }
  return units::bytes(total / L * c.tokens);
}


/// Per-GPU training memory on the heaviest pipeline stage (the first and the last are evaluated; the larger total is
/// reported, the other named in a note).
///  - Model states ([ZeRO] §3.1, §5): P_gpu = P_stage,dense/t + P_stage,experts/(t·ep); weights P_gpu·b_w, gradients
///    P_gpu·b_g, master weights P_gpu·b_m, optimizer states P_gpu·b_o, each divided by the shard group N from the
///    ZeRO stage that shards it (1: optimizer + master, 2: + gradients, 3: + weights). ZeRO-3 adds the gathered
///    largest layer: two units of weights when prefetching (one otherwise) and one of gradients.
///  - Activations ([K22]): in_flight · Σ_stage layers stored(layer) + first-stage embedding dropout + last-stage final
///    norm and output-projection inputs + max(0, recomputation working set − logits buffers − those inputs);
///    stored(layer) is the sum of the layer's saved tensors (layer_terms) per token × (s/c)·b, under the
///    recomputation mode.
///  - Logits ([K22] §4.3): (s/c)·b·V/t·logit_bytes on the last stage (a_b + 4; a_b with TE's cross entropy).
///  - Overheads: CUDA context + communicators·NCCL buffers + fragmentation·(everything the allocator holds).
TrainingMemory training_memory(const wl::TransformerArch& a, const ParameterCounts& params,
                               const wl::TrainingPlan& plan, const hw::GpuSpec& gpu, const RuntimeOverheads& overheads,
                               Explain explain, ActivationLayout layout) {
  const Ctx c = make_ctx(a, plan, layout);

  MemoryCore core;
  const detail::LayerKinds kinds = detail::layer_kinds(a, params);
  const std::vector<detail::StageShape> stages = detail::stage_shapes(a, kinds, params, plan);  // core's stages point here
  detail::memory_core(a, params, plan, overheads, c, kinds, detail::layer_sums(c), stages,
                      detail::fp8_any_layout(gpu), core);
  const StageMemory& h = core.heaviest();

  TrainingMemory r;
  // What is alive at the peak: a PyTorch loop peaks either at the backward's start (no gradients yet) or its end.
  const bool loss_fwd = h.loss_fwd_logits > 0.0;  // the peak is the loss's forward (full recompute, autocast)
  r.weights = units::bytes(h.weights + h.gathered_w + h.fp8_cache + (h.acts_at_peak ? h.amp_copies : 0.0) +
                           (loss_fwd ? h.amp_layers : 0.0));
  r.gradients = units::bytes((h.grads_at_peak ? h.grads : 0.0) + h.gathered_g);
  r.master_weights = units::bytes(h.master);
  r.optimizer_states = units::bytes(h.opt);
  r.activations = units::bytes(loss_fwd ? h.loss_fwd_acts : h.acts_at_peak ? h.activations : 0.0);
  r.logits = units::bytes(loss_fwd ? h.loss_fwd_logits : h.acts_at_peak ? h.logits_b : 0.0);
  r.cuda_context = units::bytes(h.ctx);
  r.nccl_buffers = units::bytes(h.nccl);
  r.fragmentation = units::bytes(h.frag);
  r.total = units::bytes(h.total);
  r.capacity = gpu.memory_capacity();
  r.host_offloaded = units::bytes(core.host());
  r.stage = h.shape->index;
  r.fits = r.total <= r.capacity;

  if (explain == Explain::off) return r;

  detail::explain_memory(a, params, plan, gpu, overheads, layout, c, core, r);
  return r;
}

std::string capacity_basis(const hw::GpuSpec& gpu) {
  if (!gpu.memory.device_reported)
    return "vendor label (no device-reported figure is sourced for this GPU; CUDA sees less than the label's GiB "
           "on most parts)";
  switch (gpu.memory.reported_by) {
    case hw::MemoryReportedBy::cuda: return "device-reported: CUDA's total memory";
    case hw::MemoryReportedBy::nvidia_smi:
      return "device-reported: nvidia-smi's memory.total, which counts the driver's reserved memory (CUDA sees a few "
             "hundred MiB less), so the check is that much optimistic";
    case hw::MemoryReportedBy::mlperf:
      return "device-reported: an MLPerf system description's accelerator memory (as nvidia-smi counts it, with the "
             "driver's reserved memory; CUDA sees a few hundred MiB less)";
    case hw::MemoryReportedBy::rocminfo:
      return "device-reported: the ROCm runtime's GPU memory pool (rocminfo; HIP's totalGlobalMem, PyTorch's "
             "total_memory on ROCm)";
  }
  return "device-reported";
}

}  // namespace gpuplan::model
