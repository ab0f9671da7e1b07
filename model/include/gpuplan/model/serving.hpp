#pragma once
// Serving latency and throughput: one forward pass of a serving engine's iteration (prefill chunks and decode tokens
// in one batch), TTFT, ITL, throughput vs batch under continuous batching, the capacity planner behind
// `gpuplan serve` (replicas, GPUs, $/Mtok under a TTFT/ITL SLA), disaggregated prefill/decode pools, and
// speculative decoding. Built on the same operator costs (ops.hpp), collectives (collectives.hpp) and KV/weight
// memory (kv_cache.hpp, serving_memory.hpp) as the training model: one formula, one place.
//
// Sources (cited again where used):
//  [Orca]   Yu et al., OSDI'22, "Orca: A Distributed Serving System for Transformer-Based Generative Models":
//           iteration-level scheduling (continuous batching).
//  [Sarathi] Agrawal et al., OSDI'24, "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve":
//           chunked prefill piggybacked on decode iterations under a token budget.
//  [DistServe] Zhong et al., OSDI'24: disaggregated prefill and decode pools, KV transfer between them.
//  [SpecDec] Leviathan et al., ICML'23, "Fast Inference from Transformers via Speculative Decoding", eq. (1):
//           E[tokens per step] = (1 − α^(γ+1)) / (1 − α); speedup = E / (γ·c + 1) with c = t_draft / t_target.
//  [FlashDec] Dao et al. 2023, "Flash-Decoding for long-context inference": decode attention split over the KV
//           length so one query per sequence still fills the GPU (the cache streams at HBM speed).
//  [MDc]    M/G/1 waiting time (e.g. Asmussen, "Applied Probability and Queues", 2003, ch. VIII and XIII): the
//           Pollaczek–Khinchine mean W = λ·E[S²] / (2(1 − ρ)) (M/D/1: ρ·S / (2(1 − ρ))), and the Cramér–Lundberg
//           tail P(W > t) ≈ ρ·e^(−θt), θ > 0 solving λ·(E[e^(θS)] − 1) = θ (M/M/1 gives θ = (1 − ρ)/S, the bound
//           used before; deterministic service decays faster).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

/// The hardware a deployment runs on (the same shape as training's: GPU, node for the TP/PP fabric, price).
using ServingSystem = TrainingSystem;

/// The kernels that move MoE tokens to their experts and back under expert parallelism (SGLang --moe-a2a-backend):
/// NCCL's all-to-all (gpuplan's default; SGLang's `none` uses all-reduce/all-gather, vLLM's default is its own
/// all-to-all) or DeepEP's kernels (moe_a2a.hpp).
enum class MoeA2aBackend { nccl, deepep };
/// DeepEP's kernels per pass (SGLang --deepep-mode): normal (node-deduplicated RDMA + NVLink forwarding, for
/// prefill), low_latency (one RDMA message per token-expert row, CUDA-graph compatible, for decode), automatic
/// (normal in a pass with prompt tokens, low-latency in a pure decode pass: SGLang's `auto`).
enum class DeepEpMode { automatic, normal, low_latency };

/// Eager PyTorch's host (CPU) time to issue one single-kernel op: Python, the dispatcher and the launch. The median of
/// the nine single-kernel ops measured for inference in eager_host_ops.json (PyTorch 2.11 on the lent H100 host's
/// 16-vCPU Xeon, chains of 64 calls on tiny tensors so that the GPU never bounds them: conv3x3 19.3, depthwise 21.2,
/// channel mul 20.0, max-pool 26.7, add 23.6 / 22.2, linear 38.4, layer norm 32.9, GELU 12.5 µs): 22.2 µs. The same
/// table prices the eager vision passes module by module (model/src/vision/vision_host.cpp); other hosts and
/// framework versions are an assumption (`--cpu-per-kernel-us` sets it).
[[nodiscard]] units::Seconds eager_cpu_per_kernel();
/// What one eager inference op call is, for its host cost: a GEMM (F.linear), a norm, the attention call (SDPA), an
/// elementwise kernel of one tensor operand (activation, flip, cast, softmax, a reduction), one of two or more (add,
/// mul, addcmul, a copy into another tensor, a gather or scatter), or other (collectives, and what the table lacks).
enum class HostCall { gemm, norm, attention, unary, binary, other };
inline constexpr std::size_t kHostCalls = 6;
/// Eager PyTorch's measured host time for one inference call of `c`, from the same table (eager_host_ops.json, PyTorch
/// 2.11, the lent H100 host): gemm = linear 38.4, norm = layer norm 32.9, attention = nn.MultiheadAttention's core
/// (the module less its two projections) 36.2, unary = GELU 12.5, binary = add 23.6 µs; other = eager_cpu_per_kernel().
[[nodiscard]] units::Seconds eager_host_per_call(HostCall c);
/// The origin text of the default per-kernel costs (graph gap, eager launch, eager CPU issue).
[[nodiscard]] std::string default_overhead_origin();

/// How one replica runs the model.
struct ServingPerfPlan {
  int tp = 1;
  int pp = 1;
  int ep = 1;  ///< MoE: experts spread over `ep` of the TP ranks (ep | tp); each expert's FFN split over tp/ep
  /// Attention data parallelism with wide EP (wide_ep.hpp; SGLang --enable-dp-attention, vLLM --data-parallel-size
  /// with --enable-expert-parallel, DeepSeek's deployment): `attention_dp` ranks of `tp` GPUs each run attention on
  /// their own batch and KV cache, and the routed experts spread over all dp × tp GPUs (EP = dp·tp, expert TP 1).
  /// A forward batch is one rank's. 1: off (`ep` as above).
  int attention_dp = 1;
  /// MoE hot-expert skew: routed rows of the busiest EP rank over the mean (1: uniform routing, the default and an
  /// assumption the derivation states). The busiest rank's expert GEMMs and, with variable-size dispatch, its
  /// all-to-alls set the layer's pace.
  double moe_imbalance = 1.0;
  MoeA2aBackend moe_a2a = MoeA2aBackend::nccl;  ///< MoE dispatch/combine kernels (EP > 1)
  DeepEpMode deepep_mode = DeepEpMode::automatic;  ///< which DeepEP kernels (moe_a2a = deepep)
  /// Two-batch overlap (SGLang --enable-two-batch-overlap, DeepSeek's two micro-batches): the batch runs as two
  /// halves, each half's dispatch and combine beside the other half's compute (serve/two_batch_overlap.cpp). MoE with
  /// EP > 1 only.
  bool two_batch_overlap = false;
  WeightQuant weights = default_weight_quant(StoreDtype::bf16);
  KvQuant kv = default_kv_quant(StoreDtype::bf16);
  /// Tensor-core precision of the GEMMs: fp8 for W8A8 fp8 checkpoints on GPUs with fp8 units, else 16-bit
  /// (weight-only int4/int8 dequantise in the kernel and compute in 16-bit).
  hw::Precision compute = hw::Precision::bf16;
  /// W8A8 / W4A4 with dynamic per-token activation scales (compression.hpp): before each weight GEMM a kernel reads
  /// the 16-bit activations, finds each token's absmax and writes them in the compute type with one fp32 scale per
  /// token (vLLM's scaled_int8_quant / scaled_fp8_quant); the int32 (int8) or fp32 accumulator is dequantised with
  /// the per-token × per-channel scales in the GEMM's epilogue (fused kernels: CUTLASS scaled_mm) or, eager, by a
  /// separate pass that reads the 4-byte accumulator and writes 16-bit (torch._int_mm returns int32). false: no
  /// passes (16-bit, weight-only, or a checkpoint whose scales the engine fuses into the producing kernels).
  bool activation_quant = false;
  double activation_bytes = 2.0;
  /// fused: a serving engine's kernels (residual add fused into the norm, rotary fused with the KV write, one
  /// activation kernel); eager: plain PyTorch ops (separate adds and norms, rotary as flip + mul + addcmul, K and V
  /// copied into the cache one by one, SiLU and the product apart) — more kernels and more bytes per layer.
  wl::KernelStyle kernels = wl::KernelStyle::fused;
  /// Attention kernels: fa3 = what serving engines run on Hopper and later (FlashAttention-3 class prefill; decode
  /// kernels built for GQA that put a KV head's query group in 16-row MMA tiles); fa2 = FlashAttention-2 as in
  /// PyTorch's SDPA (prefill at the FA2 efficiency; decode pads the group to 64-row tiles when it splits the KV
  /// sequence, 128-row when it does not — FA2's num_splits heuristic splits while batch × KV heads < SMs).
  wl::AttentionKernel attention = wl::AttentionKernel::fa3;
  bool cuda_graphs = true;
  /// GPU-side fixed cost per kernel: with CUDA graphs the replay gap between dependent kernels; eager: the launch
  /// latency (the CPU side is `cpu_per_kernel`).
  units::Seconds kernel_overhead_graph = units::microseconds(2.5);
  units::Seconds kernel_overhead_eager = units::microseconds(5.0);
  /// Under CUDA graphs, price each kernel at its class's measured in-graph cost (EfficiencyProfile::graph_class:
  /// GEMM, attention, elementwise) where the GPU's profile has them; kernel_overhead_graph then stands only for GPUs
  /// without. false: one cost for every kernel (the user gave --kernel-overhead-us).
  bool kernel_cost_by_class = true;
  /// Eager mode (no CUDA graph): a step is never faster than the host's time to issue its kernels. true (default):
  /// each call at its kind's measured host cost (eager_host_per_call); false: kernels × cpu_per_kernel (the user gave
  /// --cpu-per-kernel-us).
  bool cpu_cost_by_op = true;
  /// CPU time to issue one kernel in eager mode (framework dispatch + launch) where cpu_cost_by_op is false, and for
  /// what prices a flat per-kernel issue (training's for-loop optimizer). Default: eager_cpu_per_kernel(), measured.
  units::Seconds cpu_per_kernel = eager_cpu_per_kernel();
  /// Engine work per iteration not overlapped with the GPU (scheduling, sampling bookkeeping, detokenisation);
  /// 0 = an engine that overlaps it (async scheduling).
  units::Seconds step_overhead{};
  std::string overhead_origin = default_overhead_origin();
  /// Chunked prefill token budget per iteration (vLLM max_num_batched_tokens, TRT-LLM max_num_tokens); 0 = whole
  /// prompts as their own iterations.
  std::int64_t max_batched_tokens = 8192;
  std::int64_t max_batch = 1024;  ///< max concurrent sequences the engine schedules (max_num_seqs / max_batch_size)
  /// Prompt tokens whose KV the prefix cache already holds when a prompt arrives (a shared system prompt: vLLM's
  /// automatic prefix caching and SGLang's radix cache reuse its full blocks): their prefill is not computed again,
  /// the new tokens attend to them. 0 = no prefix caching.
  std::int64_t cached_prefix_tokens = 0;
  /// Share of each prompt's tokens beyond the shared prefix that the prefix cache already holds when it arrives
  /// (vLLM's prefix-cache hit rate, counted in tokens: earlier turns of a conversation, documents asked about again),
  /// found in whole KV blocks of `kv_block_tokens`: not computed again, the new tokens attend to them. 0 = none.
  double prefix_hit_rate = 0.0;
  std::int64_t kv_block_tokens = 16;  ///< KV block size (prefix-cache hits come in whole blocks)
  /// Images per request of a multimodal model (issue #23): each runs through the vision tower before the prompt's
  /// prefill (vision_encoder_time), and its image tokens are part of the prompt length the caller gives.
  std::int64_t images_per_request = 0;
};

/// The vision tower's forward for the `plan.images_per_request` images of one request (0 without a tower or images):
/// the tower's op list priced by vision_forward on one GPU of the replica in the plan's compute precision (weights
/// stored in it; the tower's TP split and its all-reduces are not modelled: one GPU runs all of it).
units::Seconds vision_encoder_time(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ServingSystem& sys);

/// The EP size the serving pricer uses: dp·tp under attention-DP (wide EP), else `ep` (at least 1).
inline int serving_ep(const ServingPerfPlan& p) {
  return p.attention_dp > 1 ? p.attention_dp * (p.tp > 0 ? p.tp : 1) : (p.ep > 0 ? p.ep : 1);
}

/// Takes the per-kernel costs measured by a calibration profile (graph replay gap, eager launch interval) when it has
/// them; the plan's stated defaults stay otherwise. The origin says which.
void use_measured_overheads(ServingPerfPlan& plan, const EfficiencyProfile& eff);

/// The per-kernel fixed costs of a launch mode on `d` (kernel_fixed, ops.hpp, reads them): under CUDA graphs each
/// kernel class's measured in-graph cost (EfficiencyProfile::graph_class) when the profile has all three and the
/// plan prices by class; otherwise one cost for every kernel (kernel_overhead_graph, or kernel_overhead_eager
/// without graphs). Serving and vision passes take it.
void apply_launch_costs(Device& d, const ServingPerfPlan& plan, bool cuda_graphs);

/// What one forward pass of the engine processes (one iteration).
struct ForwardBatch {
  double decode_seqs = 0;          ///< sequences generating; each contributes `queries_per_seq` tokens
  std::int64_t queries_per_seq = 1;  ///< 1 for decode; γ+1 for speculative verification
  std::int64_t decode_context = 0;   ///< tokens each decoding sequence holds (the KV read per step)
  double prefill_seqs = 0;         ///< prompts (or chunks of prompts) in this pass (may be an average, fractional)
  std::int64_t prefill_tokens = 0;   ///< new tokens per prompt chunk
  std::int64_t prefill_past = 0;     ///< tokens of the same prompt already cached (earlier chunks)
  bool prefill_emits_token = true;   ///< the chunk ends the prompt: the LM head runs on its last token
};

struct ForwardCost {
  units::Seconds total{};  ///< one pass, all pipeline stages in sequence (the latency a token sees)
  units::Seconds stage{};  ///< one pipeline stage (the busiest GPU)
  units::Seconds gemm{}, attention{}, elementwise{}, comm{}, overhead{};  ///< per stage
  units::Seconds pp_transfer{};  ///< stage-to-stage sends on the whole path
  units::Flops flops{};          ///< per GPU, one stage
  units::Bytes weight_bytes{};   ///< weights read per GPU per pass
  units::Bytes kv_bytes{};       ///< KV cache read per GPU per pass
  std::int64_t kernels = 0;      ///< per stage
  /// Kernels that run per stage: `kernels` and what the calls launch beyond their own (cuBLAS's split-K reduces,
  /// flash decode's combines; OpCost::extra_kernels), as a profile counts them.
  std::int64_t gpu_kernels = 0;
  units::Seconds host{};         ///< eager: the host's time to issue one stage's calls (0 under CUDA graphs)
  double tokens = 0;             ///< tokens through the GEMMs (all sequences)
  std::vector<OpCost> ops;       ///< one layer of each kind (for display)
  Derivation derivation;
};

/// Cost of one forward pass on one replica. Per layer on one GPU: fused add+norm, QKV GEMM, rotary + KV write,
/// attention (flash prefill over the chunk's causal triangle + flash-decoding over each decoding sequence's cache),
/// O GEMM, TP all-reduce, add+norm, MLP GEMMs + activation (MoE: router, the experts the tokens touch, permutes,
/// EP all-to-all), TP all-reduce; then the LM head on the tokens that emit. Each op costs
/// max(FLOPs/compute, bytes/bandwidth) + the per-kernel overhead (ops.hpp); eager mode is bounded below by the CPU
/// issuing kernels. MoE: expected experts touched by T tokens with top-k of E (uniform routing) = E·(1 − (1 − k/E)^T).
ForwardCost forward_cost(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ForwardBatch& batch,
                         const ServingSystem& sys, Explain explain = Explain::on);

/// Prompt tokens the prefix cache holds when a prompt of `prompt` tokens arrives: the shared prefix
/// (cached_prefix_tokens) and the share prefix_hit_rate of the rest, rounded down to whole KV blocks; at most
/// prompt − 1 (the last token is always computed: its logits give the first output token).
std::int64_t cached_prompt_tokens(const ServingPerfPlan& plan, std::int64_t prompt);

/// One prompt of `prompt` tokens as a single forward pass: its new tokens (the prompt less the cached prefix,
/// cached_prompt_tokens) attending to the cached ones, the LM head on the last token.
ForwardBatch prompt_pass(const ServingPerfPlan& plan, std::int64_t prompt);

/// Prefill of `batch` prompts of `prompt` tokens as one pass (chunked by the plan's token budget when it is
/// smaller): the time to first token without queueing.
units::Seconds prefill_time(const wl::TransformerArch& arch, const ServingPerfPlan& plan, std::int64_t batch,
                            std::int64_t prompt, const ServingSystem& sys);

/// One decode iteration of `batch` sequences holding `context` tokens. With PP the engine keeps `pp` micro-batches
/// in flight (each of batch/pp): a token waits for every stage, ITL = pp·t_stage(batch/pp) + transfers.
units::Seconds decode_step_time(const wl::TransformerArch& arch, const ServingPerfPlan& plan, std::int64_t batch,
                                std::int64_t context, const ServingSystem& sys);

/// Continuous batching in steady state at `batch` concurrent sequences with prompts of `isl` and outputs of `osl`
/// tokens [Orca, Sarathi]: every iteration advances all `batch` sequences by one token and, on average, admits
/// batch/osl new prompts (their prefill piggybacks on the iteration, split into chunks by the token budget).
struct SteadyState {
  std::int64_t batch = 0;
  units::Seconds iteration{};   ///< mean iteration time = mean ITL
  /// R = E[I²] / (2·E[I]) over the iteration mix (÷ PP: a micro-batch starts every iteration / PP): the mean wait of
  /// a request arriving at a random moment for the iteration then running to end — the engine schedules between
  /// forward passes, so a new prompt joins the batch only at the next step (renewal theory's mean residual life).
  units::Seconds iteration_residual{};
  units::Seconds itl_decode_only{};  ///< an iteration without prefill work (the ITL floor)
  units::Seconds prefill{};     ///< the prompt's own prefill work, alone on the replica
  units::Seconds ttft{};        ///< prefill chunks riding on iterations, without queueing
  units::Seconds request_latency{};  ///< ttft + (osl − 1)·iteration
  double output_tokens_per_s = 0;  ///< whole replica
  double input_tokens_per_s = 0;
  double requests_per_s = 0;       ///< output tokens/s ÷ osl: a sequence holds a decode slot for osl iterations
  bool prefill_bound = false;      ///< the token budget cannot admit prompts as fast as sequences finish
  Derivation derivation;
};
/// `decode_context` overrides the mean context of the decoding sequences (isl + osl/2 for fixed lengths; with length
/// distributions the time average E[isl] + E[osl²]/(2·E[osl]): long outputs stay longer).
SteadyState steady_state(const wl::TransformerArch& arch, const ServingPerfPlan& plan, std::int64_t batch,
                         std::int64_t isl, std::int64_t osl, const ServingSystem& sys, Explain explain = Explain::on,
                         std::optional<std::int64_t> decode_context = std::nullopt);

// ---------------------------------------------------------------------------------------------------------------
// Speculative decoding
// ---------------------------------------------------------------------------------------------------------------

struct Speculation {
  double acceptance = 0.0;   ///< α: probability a draft token is accepted (i.i.d. per position)
  std::int64_t draft_tokens = 0;  ///< γ (k): tokens the draft proposes per step
};
/// E[tokens per target step] = (1 − α^(γ+1)) / (1 − α) (γ + 1 at α = 1) [SpecDec eq. 1].
double expected_tokens_per_step(const Speculation& s);
struct SpeculativeResult {
  double tokens_per_step = 0;
  units::Seconds step{};        ///< γ·t_draft + t_verify
  units::Seconds per_token{};   ///< step / tokens_per_step
  double speedup = 0;           ///< t_target / per_token
  Derivation derivation;
};
/// Speedup = E·t_target / (γ·t_draft + t_verify) [SpecDec]. t_verify is the target's pass over γ+1 tokens per
/// sequence (≈ t_target while decode is bandwidth-bound; the textbook takes it equal).
SpeculativeResult speculative_decoding(const Speculation& s, units::Seconds t_draft, units::Seconds t_target,
                                       units::Seconds t_verify, Explain explain = Explain::on);

// ---------------------------------------------------------------------------------------------------------------
// Capacity planner
// ---------------------------------------------------------------------------------------------------------------

/// A distribution of request lengths: token counts with probabilities (a fixed length is one point).
struct LengthDist {
  std::vector<std::pair<std::int64_t, double>> points;  ///< (tokens, probability), sorted by tokens, summing to 1
  static LengthDist fixed(std::int64_t tokens);
  [[nodiscard]] double mean() const;
  [[nodiscard]] double mean_square() const;
  /// The smallest length with P(L ≤ length) ≥ p.
  [[nodiscard]] std::int64_t quantile(double p) const;
};
/// Lognormal with the given mean and standard deviation (tokens), discretised at `n` equal-probability points (the
/// conditional medians of n equal slices), each at least 1 token.
LengthDist lognormal_lengths(double mean, double sd, int n = 32);

/// Offered load: an open-loop request rate, or (with `concurrency`) a closed loop of N users who each send their
/// next request `think_time` after the previous one completes — how benchmark clients (vLLM's --max-concurrency,
/// GenAI-Perf's concurrency mode) and chat front ends with a fixed number of sessions load a server. The closed
/// loop's rate follows from the interactive response-time law λ = N / (E2E latency + think time).
struct Traffic {
  double requests_per_s = 1.0;                ///< open loop (ignored with `concurrency`)
  std::int64_t input_tokens = 1024;   ///< used when `input` is empty
  std::int64_t output_tokens = 256;   ///< used when `output` is empty
  std::optional<LengthDist> input;    ///< prompt lengths (independent of the output lengths)
  std::optional<LengthDist> output;   ///< output lengths
  std::optional<std::int64_t> concurrency{};  ///< closed loop: users, each with one request at a time
  units::Seconds think_time{};              ///< closed loop: pause between a response and the next request
};
struct Sla {
  std::optional<units::Seconds> ttft;  ///< target time to first token at the percentile
  std::optional<units::Seconds> itl;   ///< target inter-token latency (mean iteration; TPOT)
  double percentile = 0.99;            ///< applied to TTFT's queueing delay
};

/// One candidate replica configuration evaluated by the planner.
struct ServingCandidate {
  int tp = 1, pp = 1;
  int dp = 1;  ///< attention-DP ranks of the group (wide EP); replicas are then groups of dp × tp × pp GPUs
  std::int64_t batch = 0;        ///< concurrent sequences per replica at the operating point
  std::int64_t max_batch_memory = 0;  ///< KV capacity at isl + osl
  SteadyState state;
  units::Seconds queue_wait{};   ///< TTFT queueing at the percentile
  /// The wait for the iteration running when the prompt arrives: SteadyState::iteration_residual. (The prompt queue's
  /// wait is the prefill work of the prompts ahead, which rides on the iterations before the prompt's and on its own.)
  units::Seconds iteration_wait{};
  units::Seconds prefill_service{};  ///< one prompt's prefill work on its replica: the M/G/1 queue's mean service time
  double queue_rho = 0.0;            ///< the prompt queue's load ρ = λ / replicas · prefill_service (0: closed loop)
  units::Seconds ttft{};         ///< at the percentile, queueing included
  units::Seconds itl{};
  double requests_per_s = 0;     ///< the whole deployment's request rate (closed loop: N / (E2E + think time))
  double replica_requests_per_s = 0;  ///< what one replica sustains within the SLA
  std::int64_t replicas = 0;
  std::int64_t gpus = 0;
  units::UsdPerSecond cost_rate{};
  double cost_per_mtok_usd = 0;  ///< per million output tokens
  bool meets_sla = false;
  std::vector<std::string> misses;  ///< what the SLA misses, when it does
};

struct DisaggregatedPlan {
  int prefill_tp = 1, decode_tp = 1;
  std::int64_t prefill_gpus = 0, decode_gpus = 0;
  std::int64_t decode_batch = 0;
  units::Seconds kv_transfer{};  ///< one sequence's KV from a prefill GPU to a decode GPU
  units::Seconds ttft{}, itl{};
  std::int64_t gpus = 0;
  double cost_per_mtok_usd = 0;
  bool meets_sla = false;
  std::string transfer_tier;
  // Pools on their own GPU types and with attention-DP groups (disagg_pools.hpp; empty ids: the plan's GPU).
  std::string prefill_gpu, decode_gpu;        ///< GPU ids of the pools
  int prefill_dp = 1, decode_dp = 1;          ///< attention-DP ranks per group of each pool (wide EP)
  units::UsdPerSecond prefill_cost_rate{}, decode_cost_rate{};  ///< each pool at its own GPU's price
  units::Bytes kv_per_sequence{};             ///< KV one prefill GPU sends per sequence (its shard)
  Derivation derivation;                      ///< serving.disaggregated_pools (heterogeneous or wide-EP pools)
};

struct ServingPlanOptions {
  std::vector<int> tp_options{1, 2, 4, 8};  ///< replica TP sizes to try (limited to the scale-up domain)
  std::vector<int> pp_options;  ///< PP sizes to try; empty = 1, then 2, 4, … 16 only while no TP size fits
  bool disaggregated = false;
  ServingMemoryPlan memory;  ///< engine memory knobs (fraction, block size, overheads); tp/pp/context set per try
  /// Disaggregated pools on other GPU types than the plan's (nullptr: the plan's system): their own GPU, node (TP
  /// domain, NIC), calibration and price (disagg_pools.hpp).
  const ServingSystem* prefill_system = nullptr;
  const ServingSystem* decode_system = nullptr;
  /// Attention-DP ranks per group of each pool (wide EP; DeepSeek-V3 runs DP8 × TP4 in prefill, DP80 × TP4 in
  /// decode); 0: the perf plan's attention_dp.
  int prefill_attention_dp = 0, decode_attention_dp = 0;
};

/// One step of the TTFT–GPU trade-off of a layout: the fewest GPUs whose TTFT (at the SLA percentile) is within
/// `ttft`, at `batch` concurrent sequences per replica.
struct TtftFrontierPoint {
  units::Seconds ttft{};
  std::int64_t gpus = 0;
  std::int64_t batch = 0;
};

struct ServingPlanResult {
  Traffic traffic;
  Sla sla;
  bool feasible = false;
  std::optional<ServingCandidate> best;     ///< cheapest that meets the SLA, else the best achievable
  std::vector<ServingCandidate> per_tp;     ///< the best of each TP size
  std::optional<DisaggregatedPlan> disaggregated;
  /// The best layout's (TP × PP) GPUs against the TTFT target, over its batch sizes that meet the ITL target: TTFT
  /// ascending, GPUs strictly descending (each point the fewest GPUs for any target from its TTFT up to the next
  /// point's). Where a tight target meets a steep step, this is the cliff.
  std::vector<TtftFrontierPoint> ttft_frontier;
  units::Bytes kv_bytes_per_token{};
  std::vector<std::string> reasons;         ///< why no layout meets the SLA
  std::vector<std::string> notes;
  Derivation derivation;
};

/// The wait of a prompt before its prefill starts, at a percentile (0 < p < 1), on a replica whose prefill is busy a
/// fraction ρ of the time with mean service time `service` ∝ prompt length (the distribution `lengths`): M/G/1 [MDc],
/// the larger of the Pollaczek–Khinchine mean and the Cramér–Lundberg tail. ρ ≥ 1: unbounded (1e30 s).
units::Seconds prefill_queue_wait(double rho, units::Seconds service, double percentile, const LengthDist& lengths);

/// Finds, over TP sizes and batch sizes, the replica layout that meets the SLA with the fewest GPUs (then the lowest
/// latency). With length distributions the rates use the mean lengths, the decode context its time average, the
/// KV capacity E[isl] + E[osl], and TTFT the prompt length at the SLA percentile: for each batch B ≤ min(KV capacity, max_batch), steady_state gives ITL and the replica's request rate
/// λ_r = B / latency; TTFT adds the M/G/1 queueing wait at ρ = λ/replicas · S with S = (1 − ITL_decode-only/ITL)/λ_r,
/// the prefill work one prompt adds to the iterations it rides on, service ∝ prompt length (mean and percentile
/// [MDc]), and the wait for the running iteration to end, R = E[I²] / (2·E[I]); replicas = ⌈λ / λ_r⌉ (ρ < 1
/// follows).
ServingPlanResult plan_serving(const wl::TransformerArch& arch, const ParameterCounts& params,
                               const ServingPerfPlan& perf, const Traffic& traffic, const Sla& sla,
                               const ServingSystem& sys, const ServingPlanOptions& options,
                               Explain explain = Explain::on);

/// A serving layout as every front end prints it: "40 replicas × TP 8 × PP 4" (PP always shown, also when 1), so
/// that the CLI, the report and the GUI say the same thing.
std::string replica_layout(std::int64_t replicas, int tp, int pp);

}  // namespace gpuplan::model
