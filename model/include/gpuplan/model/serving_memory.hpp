#pragma once
// Serving memory per GPU: weights (quantized, with their group-scale overhead), runtime overheads, the serving
// engine's memory knob (vLLM gpu_memory_utilization, SGLang mem_fraction_static, or a plain usable fraction), and the
// KV cache that fits beside them — max concurrent sequences at a context, max context at a concurrency, and the GPUs
// needed by memory. The latency model and the capacity planner (`gpuplan serve`) build on this.
//
// Sources (cited again where used):
//  [vLLM-mem]   vllm/v1/worker/gpu_worker.py (commit 35d5cda): init_device takes the memory snapshot *after* the CUDA
//               context and NCCL are initialised and requires free ≥ total·gpu_memory_utilization;
//               determine_available_memory: KV = total·util − (weights + peak activation + non-torch increase) as
//               profiled by vllm/utils/mem_utils.py memory_profiling; compile_or_warm_up_model captures CUDA graphs
//               after the KV cache is allocated ("memory_profiling does not consider CUDAGraph memory size").
//  [vLLM-cg]    vllm-project/vllm PR#30515 (estimate CUDA-graph memory during profiling, VLLM_MEMORY_PROFILER_
//               ESTIMATE_CUDAGRAPHS) and its vllm/envs.py comment "Enabled by default as of v0.21.0": from v0.21 the
//               graph estimate is subtracted inside the fraction; before, graphs live outside it (PR#21489, #7553).
//  [SGL-mem]    sglang python/sglang/srt/model_executor/model_runner(_kv_cache_mixin).py profile_max_num_token:
//               rest = available_after_load − total·(1 − mem_fraction_static), where `total` is the free memory
//               measured after distributed init, before the weights load (min over ranks); the (1 − f) share is left
//               for activations and CUDA graphs.
//  [vLLM-def]   vllm/engine/arg_utils.py get_batch_defaults: max_num_batched_tokens 8192 / max_num_seqs 1024 for the
//               API server on GPUs with ≥ 70 GiB (not A100), else 2048 / 256.
//  [vLLM-mla]   vllm/platforms/cuda.py check_and_update_config: "Forcing kv cache block size to 64 for FlashMLA
//               backend" (Hopper), 128 for CUTLASS_MLA (Blackwell).
//  [vLLM-dsv2]  vllm/model_executor/models/deepseek_v2.py: q_a_proj and kv_a_proj_with_mqa are ReplicatedLinear.
//  [GPTQ]       AutoGPTQ / AutoAWQ checkpoint layout: int4 weights packed 8 per int32, `scales` fp16 and `qzeros`
//               4-bit packed, one group per 128 input elements by default (group_size = 128).
//  [FP8W]       llm-compressor FP8_DYNAMIC scheme: fp8 weights with one fp32 scale per output channel.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

// ---------------------------------------------------------------------------------------------------------------
// Weights
// ---------------------------------------------------------------------------------------------------------------

/// Storage of the quantized weights (the linear layers of every block). Embeddings, the LM head, norms and MoE routers
/// stay in 16-bit (fp32 if the weights are fp32), as AWQ/GPTQ/FP8 checkpoints leave them.
/// 2:4 sparsity's index metadata per original weight: a 2-bit position for each of the two kept weights of four.
inline constexpr double kSparse24IndexBytes = 2.0 * 2.0 / 4.0 / 8.0;

struct WeightQuant {
  StoreDtype dtype = StoreDtype::bf16;
  std::int64_t group_size = 0;  ///< weights per scale group along the input dimension; 0 = one group per output row
  double group_bytes = 0.0;     ///< bytes per group: scale (+ zero point)
  /// 2:4 structured sparsity (compression.hpp): two of every four weights along the input dimension kept, each with
  /// a 2-bit position index (NVIDIA A100 whitepaper, "Fine-Grained Structured Sparsity"; cuSPARSELt's compressed
  /// layout): half the values and their scales, plus 1 bit per original weight.
  bool sparse24 = false;
  std::string origin;
};
/// bf16/fp16/fp32: no scales; fp8: one fp32 scale per output channel [FP8W]; int8: one fp32 scale per output channel
/// (assumption); int4: group 128 with an fp16 scale and a 4-bit zero point per group, 2.5 B [GPTQ].
WeightQuant default_weight_quant(StoreDtype d);
/// Bytes per quantized weight: element bytes + group_bytes / group, the group being the input width for per-channel
/// scales (int4 g128: 0.5 + 2.5/128 = 0.5195 B); 2:4-sparse: half of that + 1/8 B of indices (bf16: 1.125 B).
double weight_bytes_per_param(const WeightQuant& w, std::int64_t input_width);

// ---------------------------------------------------------------------------------------------------------------
// Engine, overheads, plan
// ---------------------------------------------------------------------------------------------------------------

/// How the memory fraction a user sets is applied.
enum class MemoryEngine {
  plain,   ///< usable = fraction · capacity; everything (weights, overheads, KV) inside it
  vllm,    ///< gpu_memory_utilization [vLLM-mem]: fraction of total device memory; context + NCCL outside
  sglang,  ///< mem_fraction_static [SGL-mem]: fraction of the free memory before loading, for weights + KV only
};
std::string_view to_string(MemoryEngine e);
std::optional<MemoryEngine> parse_memory_engine(std::string_view s);
/// What a front end needs of an engine's memory knob (its rules live in one policy per engine, model/src/serve/
/// engine_policy.cpp): the engine's name, its fraction's own key and flag, and the default with its source.
struct EngineMemoryKnob {
  MemoryEngine engine = MemoryEngine::vllm;
  std::string_view name;            ///< "vLLM", "SGLang", "plain"
  std::string_view fraction_key;    ///< the engine's own name of the fraction ("gpu_memory_utilization")
  std::string_view fraction_label;  ///< how the derivation labels it
  std::string_view fraction_flag;   ///< gpuplan's flag for it ("--gpu-memory-utilization")
  double default_fraction = 0.9;
};
const EngineMemoryKnob& engine_memory_knob(MemoryEngine e);
/// Every engine (the order in which front ends list their fraction flags).
inline constexpr MemoryEngine kMemoryEngines[] = {MemoryEngine::vllm, MemoryEngine::sglang, MemoryEngine::plain};
/// One line naming the engine's fraction as set ("vLLM gpu_memory_utilization 0.9 (CUDA graphs inside the fraction)").
std::string describe_engine_budget(MemoryEngine e, double fraction, bool cuda_graphs_in_budget);

/// Which capacity one GPU offers: what the driver reports (torch.cuda.mem_get_info total) or the vendor's "80 GB".
enum class CapacityBasis { device, label };
/// How GPUs are counted: the smallest TP×PP×replicas layout that holds the sequences (a sequence cannot span
/// replicas), or the textbook pooled count ⌈(weights + KV) / usable per GPU⌉.
enum class GpuCountMethod { layout, pooled };

/// Non-model memory per GPU, each a stated parameter with its origin.
struct ServingOverheads {
  units::Bytes cuda_context{};           ///< CUDA context + cuBLAS workspace, per GPU process
  units::Bytes nccl_per_communicator{};  ///< per communicator the GPU is in (TP, PP)
  units::Bytes cuda_graphs{};            ///< captured CUDA graphs (0 = eager)
  bool estimate_activations = true;      ///< estimate the profiled activation peak (false: 0)
  std::optional<units::Bytes> activations;  ///< the peak activation, when the user knows it (vLLM logs it)
  std::string origin;
};
/// CUDA context and NCCL per communicator from default_training_overheads() (one place); CUDA graphs 1 GiB, an
/// assumption inside the range vLLM's own log gives ("CUDA graphs can take additional 1~3 GiB memory per GPU") and
/// reported captures (0.36 GiB … 2.4 GiB: gpustack/runner PR#251 log, vllm#7553); activations estimated.
ServingOverheads default_serving_overheads();
/// Everything zero: the textbook's "by memory alone".
ServingOverheads no_serving_overheads();

struct ServingMemoryPlan {
  int tp = 1;
  int pp = 1;
  /// Attention-DP ranks sharing the routed experts (wide EP, serving.hpp attention_dp): each GPU holds 1/(tp·expert_dp)
  /// of the routed experts and 1/tp of the rest; the KV and the batch are one rank's. 1: experts split over TP only.
  int expert_dp = 1;
  std::optional<std::int64_t> gpus;     ///< GPUs available: feasibility then checks the concurrency fits on them
  std::int64_t context = 4096;          ///< tokens per sequence (prompt + output)
  std::int64_t concurrency = 1;         ///< sequences held at once
  std::int64_t block_size = 16;         ///< tokens per KV block (vLLM default 16); 1 = contiguous, no block waste
  bool engine_block_size = true;        ///< apply the engine's forced block size (vLLM MLA backends) [vLLM-mla]
  std::int64_t prefix_tokens = 0;       ///< prompt prefix shared by all sequences (stored once)
  KvQuant kv = default_kv_quant(StoreDtype::bf16);
  WeightQuant weights = default_weight_quant(StoreDtype::bf16);
  bool weight_scale_overhead = true;    ///< false: nominal bytes (the textbook's 0.5 B per int4 weight)
  std::optional<double> nominal_params;  ///< the textbook's "7B": weights = N · bytes, split evenly over TP·PP
  double paging_overhead = 0.0;         ///< flat fraction added to the KV (the textbook's "30% paging overhead")
  MemoryEngine engine = MemoryEngine::vllm;
  double memory_fraction = 0.9;         ///< plain: usable fraction; vllm: gpu_memory_utilization; sglang: mem_fraction_static
  bool cuda_graphs_in_budget = true;    ///< vLLM ≥ 0.21 profiles CUDA graphs inside the fraction [vLLM-cg]
  CapacityBasis capacity = CapacityBasis::device;
  ServingOverheads overheads = default_serving_overheads();
  std::int64_t max_num_batched_tokens = 8192;  ///< tokens of the profiling forward pass [vLLM-def]
  std::int64_t max_num_seqs = 1024;            ///< sequences of the profiling sampler pass [vLLM-def]
  double activation_bytes = 2.0;               ///< bytes per activation element (bf16)
  GpuCountMethod gpu_count = GpuCountMethod::layout;
  int max_tp = 8;      ///< largest TP the GPU-count search tries: the GPU's scale-up domain (from node data)
  std::string max_tp_origin = "assumption: 8 GPUs per NVLink domain (no node of this GPU in the data)";
  int max_pp = 16;     ///< largest PP the GPU-count search tries
};

/// Memory of one GPU of one pipeline stage.
struct StageMemory {
  StageLayers layers;
  units::Bytes capacity{};      ///< the GPU's memory (device-reported or label)
  units::Bytes budget{};        ///< what the engine's fraction grants (vLLM requested; SGLang static; plain usable)
  units::Bytes weights{};
  units::Bytes activations{};
  units::Bytes cuda_graphs{};
  units::Bytes cuda_context{};
  units::Bytes nccl{};
  units::Bytes outside_budget{};  ///< of the above, what lives outside the engine's fraction
  units::Bytes kv_pool{};       ///< KV cache the engine allocates (budget − what it counts inside)
  units::Bytes kv_used{};       ///< KV of the requested concurrency at the context (× paging overhead)
  units::Bytes free{};          ///< kv_pool − kv_used (negative: does not fit)
  SequenceKv sequence;          ///< KV of one sequence at the context on this GPU
  std::int64_t max_concurrency = 0;    ///< sequences of `context` tokens the pool holds
  std::int64_t kv_token_capacity = 0;  ///< tokens the pool holds at full attention (vLLM's "GPU KV cache size")
};

/// A replica layout found by the GPU-count search.
struct ReplicaLayout {
  int tp = 1, pp = 1;
  std::int64_t replicas = 0;
  std::int64_t max_concurrency = 0;  ///< per replica
  [[nodiscard]] std::int64_t gpus() const { return std::int64_t(tp) * pp * replicas; }
};

struct ServingMemory {
  ServingMemoryPlan plan;  ///< as evaluated (after the engine's forced block size)
  KvTokenBytes token;      ///< KV per token per layer per GPU at the plan's TP
  units::Bytes kv_bytes_per_token{};          ///< whole model, one token (every head once, no TP split)
  units::Bytes kv_bytes_per_token_per_gpu{};  ///< one token, the binding GPU's layers and heads
  units::Bytes kv_bytes_per_sequence{};       ///< whole model, one sequence at the context, no paging
  units::Bytes kv_bytes_per_sequence_per_gpu{};  ///< one sequence at the context on the binding GPU, block-rounded
  units::Bytes weights_total{};               ///< all weights of the model, stored once
  units::Bytes kv_total{};                    ///< the concurrency at the context, whole model, × paging overhead
  units::Bytes memory_needed{};               ///< weights_total + kv_total: the textbook's total, before overheads
  std::vector<StageMemory> stages;
  int binding_stage = 0;                      ///< the stage with the fewest sequences (its GPU is shown)
  std::int64_t max_concurrency = 0;           ///< one replica, at the context
  std::int64_t max_context_tokens = 0;        ///< one replica, at the concurrency
  std::string max_context_limit;              ///< "memory", "max_position_embeddings" or "search limit"
  std::int64_t kv_token_capacity = 0;         ///< one replica (binding stage)
  std::optional<std::int64_t> gpus_needed;    ///< by the plan's method; nullopt when no layout holds one sequence
  std::optional<std::int64_t> gpus_needed_pooled;
  std::optional<ReplicaLayout> best_layout;   ///< the layout method's answer
  units::Bytes usable_per_gpu_pooled{};       ///< budget − fixed overheads inside it, for the pooled count
  bool ok = true;
  std::vector<std::string> reasons;           ///< why the plan cannot work (exit 3)
  std::vector<std::string> notes;             ///< assumptions and engine behaviour worth knowing
  Derivation derivation;
};

/// Peak activation memory of the engine's profiling forward pass on one GPU (what vLLM subtracts as "peak
/// activation"): N·b·(2h + max(attention, FFN working set per token / t)) for N = max_num_batched_tokens, plus the
/// sampler's fp32 logits and probabilities, 2·S·V·4 B for S = max_num_seqs (the LM head output is gathered over TP).
/// An estimate, stated as such; the user can give the value vLLM logs instead.
units::Bytes serving_activation_peak(const wl::TransformerArch& arch, int tp, std::int64_t batched_tokens,
                                     std::int64_t max_seqs, double activation_bytes);

/// vLLM's API-server batch defaults, which size its profiling pass [vLLM-def]: 8192 tokens and 1024 sequences on GPUs
/// with ≥ 70 GiB that are not A100s, else 2048 and 256.
struct EngineBatchDefaults {
  std::int64_t max_num_batched_tokens = 8192;
  std::int64_t max_num_seqs = 1024;
};
EngineBatchDefaults vllm_batch_defaults(const hw::GpuSpec& gpu);

/// Serving memory of `arch` under `plan` on `gpu`.
///
/// Per GPU of stage k (TP rank): weights = Σ_layers [(P_layer − P_repl − P_kv)/t + P_kv·heads_gpu/n_kv + P_repl]·b_w
/// (+ embedding / LM head over t on the first / last stage, 16-bit); KV pool by the engine:
///   plain:  f·C − (weights + activations + graphs + context + NCCL)
///   vLLM:   f·C − (weights + activations [+ graphs from v0.21]); context + NCCL (+ graphs before v0.21) outside,
///           and vLLM refuses to start unless C − context − NCCL ≥ f·C
///   SGLang: f·(C − context − NCCL) − weights; activations + graphs must fit in (1 − f)·(C − context − NCCL)
/// max concurrency = ⌊(pool/(1 + p_ovh) − shared prefix) / per-sequence unique KV⌋ (min over stages); max context
/// at a concurrency by bisection on the same inequality (capped at max_position_embeddings).
ServingMemory serving_memory(const wl::TransformerArch& arch, const ParameterCounts& params, const hw::GpuSpec& gpu,
                             const ServingMemoryPlan& plan, Explain explain = Explain::on);

}  // namespace gpuplan::model
