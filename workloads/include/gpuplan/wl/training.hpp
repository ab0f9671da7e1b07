#pragma once
// A training plan: batch, sequence, parallel layout, precision, optimizer, memory-saving choices. Pure value type;
// validation of a plan against a model and a cluster (divisibility, fit) is the model's job and yields Feasibility
// reasons, not diagnostics.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::wl {

/// ZeRO (Rajbhandari et al. 2020): what is sharded across the data-parallel group. FSDP FULL_SHARD == parameters;
/// SHARD_GRAD_OP == gradients; HYBRID_SHARD == parameters sharded within `Parallelism::shard_group` GPUs.
enum class ZeroStage { none = 0, optimizer = 1, gradients = 2, parameters = 3 };
/// Activation recomputation (Korthikanti et al. 2022): none, selective (attention core only), full (layer inputs);
/// selective_op: TorchTitan's op-level selective activation checkpointing (`[activation_checkpoint] mode = 'selective',
/// selective_ac_option = 'op'`; pytorch/torchtitan 9dec370ad26b, torchtitan/parallelisms/parallelize_llama.py,
/// `_save_list` and `_apply_ac_to_transformer_block`): each decoder block is checkpointed with a policy that keeps the
/// outputs of aten.mm, the SDPA flash/efficient kernels, the reduce-scatter and max/abs, *except every second mm of the
/// block* (a per-block counter, kept or recomputed as it is odd or even), and recomputes every other op. In a Llama block
/// (mm order wq, wk, wv, wo, w1, w3, w2) the wq, wv, w1 and w2 outputs, the SDPA output and log-sum-exp, and the block
/// input are kept; the norms, wk, RoPE, wo, the first residual add, w3 and the SwiGLU run again in the backward.
enum class Recompute { none, selective, full, selective_op };
/// The mode as the scenario key `recompute` spells it.
constexpr const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
    case Recompute::selective_op: return "selective_op";
  }
  return "none";
}
/// Which layers full recomputation covers (Megatron-Core --recompute-method with --recompute-num-layers N;
/// megatron/core/transformer/transformer_block.py _checkpointed_forward, per model chunk of c layers):
///  - uniform: the chunk's layers in groups of N (the last group cut at the chunk's end), each group checkpointed
///    at its input: ⌈c/N⌉ checkpoints, every layer's forward repeated, a whole group's activations rebuilt at once;
///  - block: the first min(N, c) layers checkpointed one by one and recomputed, the others keep all their
///    activations and are not recomputed (partial recompute).
enum class RecomputeMethod { uniform, block };
/// Pipeline schedules: 1F1B (PipeDream-Flush), Megatron's interleaved 1F1B, and DualPipe (DeepSeek-V3,
/// arXiv:2412.19437 §3.2.1, Table 2; github.com/deepseek-ai/DualPipe): micro-batches fed from both ends of the
/// pipeline, device i holding stage i and stage PP−1−i (two copies of the parameters), a forward and a backward chunk
/// of two micro-batches overlapped so that each one's all-to-all and pipeline traffic runs beside the other's compute;
/// bubble (PP/2 − 1)(F&B + B − 3W), activations of PP + 1 chunk micro-batches.
enum class PipelineSchedule { one_f_one_b, interleaved, dualpipe };
/// Activation recomputation of single modules (Megatron-Core --recompute-granularity selective --recompute-modules;
/// DeepSeek-V3 §3.2.3 recomputes every RMSNorm and the MLA up-projections, §3.3.2 the SwiGLU output in the MoE):
/// their outputs are not kept for the backward but computed again from their inputs. A bit set.
enum RecomputeModule : unsigned {
  recompute_layernorm = 1u << 0,    ///< every norm's output (the next GEMM's input)
  recompute_mla_up_proj = 1u << 1,  ///< MLA's q and kv up-projections (Q, K, V of the attention core)
  recompute_moe_act = 1u << 2,      ///< the routed and shared experts' activation (the down-projection input)
  /// The dense MLP of the non-MoE layers (Megatron-Core "mlp": transformer_layer.py sets recompute_mlp only when the
  /// layer is not an MoE layer; normal checkpointing): only its input is kept, its fc1 output and activation are
  /// rebuilt by running the MLP's forward again in the backward.
  recompute_mlp = 1u << 3,
};
/// How the MoE tokens travel to their experts and back:
///  - all_to_all: NCCL all-to-all, one copy per (token, chosen expert) (Megatron-Core's alltoall dispatcher);
///  - deepep: DeepSeek-V3's dispatch/combine kernels (§3.2.2), open-sourced as DeepEP's normal kernels: a token
///    crosses InfiniBand once per destination node and is forwarded inside that node over NVLink; the dispatch is
///    sent in FP8 when the GEMMs are FP8 and the combine in BF16 (§3.3.2 "Low-Precision Communication").
enum class EpDispatch { all_to_all, deepep };
/// How the attention output (the O projection's input) is kept for the backward under FP8 GEMMs:
///  - separate: as Transformer Engine keeps it — the fused attention kernel saves its 16-bit output for its own
///    backward and the O projection saves its FP8 cast for the weight gradient (a_b + 1 B per element);
///  - e5m6: DeepSeek-V3 (arXiv:2412.19437 §3.3.3 "Low-Precision Activation" (1)): one copy in a 12-bit E5M6 format
///    with 1×128-tile power-of-two scales serves both the attention backward and the O projection's wgrad
///    (1.5 B per element), converted to 128×1 tiles in the backward.
/// Read only with FP8 (or FP4) GEMMs and fused kernels.
enum class AttentionOutputStore { separate, e5m6 };
/// Whether Transformer Engine keeps the quantised copies of the GEMM weights across micro-batches (FP8/FP4 GEMMs):
///  - cached: Megatron-Core passes is_first_microbatch to Transformer Engine's modules (its default), so each module
///    quantises a 16-bit weight once per step into a workspace kept as a module attribute (get_weight_workspace,
///    cache_name "weight"), and an FP8 parameter keeps its transpose (Transformer Engine >= 1.11 allocates it with the
///    parameter; 2.x Float8TensorBase.update_usage keeps it);
///  - per_microbatch: Megatron-Core's disable_parameter_transpose_cache=True under Transformer Engine <= 1.10 (the
///    modules get is_first_microbatch=None): a 16-bit weight is quantised in every micro-batch's forward and the copy
///    is saved for that micro-batch's backward; an FP8 parameter (which 1.10 creates without a transpose) is
///    transposed afresh in each backward dgrad GEMM (Float8Tensor.transpose_2d without fill_cache) and freed;
///  - cached_one_layout: DeepSeek-V3's framework: one FP8 copy of each GEMM weight is kept across micro-batches, and
///    the layout the other GEMM needs (Hopper's FP8 GEMMs take only K-major operands: DeepGEMM README, "the SM90
///    implementation supports only the NT memory layout") is made from it by an FP8-to-FP8 transpose in every
///    micro-batch and freed. deepseek-ai/profile-data train.json (one DualPipe forward/backward pair of 4 MoE layers,
///    EP 64, H800) runs no weight quantisation kernel, and one cuda::batched_transpose over the 128x128 tiles of each
///    GEMM weight per chunk. Needs a recipe whose weight copy transposes exactly (delayed, tensorwise, blockwise).
enum class Fp8WeightCopies { cached, per_microbatch, cached_one_layout };
/// How the framework lays out the static training state in device memory, which sets the caching allocator's
/// fragmentation reserve (issue #22 item 4; data/validation/measured/h200-sxm-141gb/README.md, mem_headroom*.json):
///  - per_tensor: one allocation per parameter, gradient and optimizer state (PyTorch eager loops, DDP, FSDP2 /
///    TorchTitan, DeepSpeed's 16-bit weights): the allocator's blocks churn around them;
///  - contiguous: the 16-bit weights and gradients are views of one buffer each and the fp32 master weights and
///    optimizer states flat (Megatron-Core DDP's param_and_grad_buffer, the distributed optimizer's shards).
enum class ParamLayout { per_tensor, contiguous };
enum class OptimizerKind { adamw, adamw_8bit, sgd };
/// How the optimizer step is implemented (PyTorch 2.x torch/optim/adam.py and sgd.py; issue #27):
///  - fused: one multi-tensor kernel reads each parameter's gradient, weight and states and writes them back once
///    (torch fused=True, Apex/DeepSpeed FusedAdam, Megatron-Core's and Transformer Engine's optimizers);
///  - foreach: PyTorch's default on CUDA (_multi_tensor_adam): each elementwise op of the update is its own
///    multi-tensor pass over all the parameters (AdamW: 8 passes), each launched per group of tensors;
///  - for_loop: foreach=False (_single_tensor_adam): the same ops issued per parameter tensor, one kernel each.
/// adamw-8bit (bitsandbytes) is one fused kernel whatever this says.
enum class OptimizerImpl { fused, foreach, for_loop };
constexpr const char* to_string(OptimizerImpl i) {
  return i == OptimizerImpl::foreach ? "foreach" : i == OptimizerImpl::for_loop ? "for-loop" : "fused";
}
/// Storage of the optimizer's moment states (AdamW m and v, SGD momentum): fp32 (the default everywhere), or bf16 —
/// DeepSeek-V3 (arXiv:2412.19437 §3.3.1: "BF16 ... for the AdamW optimizer's first and second moments"), Apex
/// DistributedFusedAdam's `dtype` (NeMo `optim.dtype: bf16`), Megatron-Core's precision-aware optimizer
/// (`--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`). The master weights stay as `TrainingPrecision::master_bytes`.
enum class StateDtype { fp32, bf16 };
/// Fused attention kernel generation: FlashAttention-1 (flash-attn <= 1.0.x and its Triton port, e.g. llm-foundry's
/// attn_impl triton), FlashAttention-2 (Ampere-era kernels, also what older Hopper stacks ran) or the
/// Hopper/Blackwell-native kernels (FlashAttention-3, cuDNN fused attention). On Ampere fa2 and fa3 are the same.
enum class AttentionKernel { fa2, fa3, fa1 };
/// How the non-GEMM ops are implemented: fused kernels (Megatron-Core / Transformer Engine: fused RoPE, SwiGLU,
/// cross-entropy) or PyTorch eager modules (one kernel per tensor op, fp32 loss passes).
enum class KernelStyle { fused, eager };
/// The LM loss's cross-entropy kernels under fused kernels (KernelStyle::fused), per logit of the vocabulary shard:
///  - te: one fused pass (Transformer Engine's parallel cross entropy, Megatron-LM --cross-entropy-loss-fusion
///    --cross-entropy-fusion-impl te; Liger-style Triton kernels): read the 16-bit logits, keep fp32 row statistics,
///    write the gradient in the forward;
///  - native: Megatron-Core's jit-fused VocabParallelCrossEntropy (--cross-entropy-loss-fusion, impl native): the
///    fp32 upcast with the row max, subtract+exp+sum, the normalisation, and the backward's scale, each one kernel;
///  - unfused: Megatron-Core's VocabParallelCrossEntropy without fusion, Megatron-LM's default (no
///    --cross-entropy-loss-fusion): upcast, max, subtract, exp, sum, divide each one pass over the fp32 logits.
///  - eager: PyTorch's F.cross_entropy over fp32-upcast logits, as under eager kernels: the loss of a stack that
///    compiles only its transformer blocks (pytorch/torchtitan 9dec370ad26b train.py leaves loss_fn uncompiled).
///  - flash: FlashAttention's fused cross entropy (Dao-AILab/flash-attention csrc/xentropy, flash_attn.losses.
///    cross_entropy.CrossEntropyLoss; llm-foundry's default loss_fn fused_crossentropy), also under eager kernels: one
///    kernel reads the 16-bit logits and keeps fp32 row statistics (lse); the backward writes the gradient into a new
///    16-bit buffer (inplace_backward False, the default), so logits and gradient coexist.
/// megatron/core/tensor_parallel/cross_entropy.py and megatron/core/fusions/fused_cross_entropy.py.
enum class CrossEntropyKernel { te, native, unfused, eager, flash };
/// How RMSNorm runs: fused (one kernel each way: Transformer Engine, Apex, PyTorch's fused rms_norm, Inductor) or
/// composite, written as PyTorch ops that each run as a kernel (pytorch/torchtitan 9dec370ad26b
/// torchtitan/models/norms.py RMSNorm, Hugging Face LlamaRMSNorm): the fp32 upcast, pow, mean, rsqrt, the multiply,
/// the cast back and the weight multiply forward, and autograd's backward of each.
enum class NormKernel { fused, composite };
/// Mixed-precision scheme: Megatron keeps bf16 parameters and an fp32 main copy in the optimizer; PyTorch AMP keeps
/// fp32 parameters and gradients and autocast casts every weight to bf16 in each forward.
enum class MixedPrecision { megatron, amp };
/// CPU offload (ZeRO-Offload, Ren et al. 2021; DeepSpeed `offload_optimizer: cpu`): `optimizer` keeps the fp32 master
/// weights and the optimizer states in host memory and runs the optimizer step on the CPU; each step moves this GPU's
/// gradient shard to the host and the updated weights back over the GPU's host link. Needs ZeRO ≥ 1.
enum class Offload { none, optimizer };
/// How a ZeRO-3 framework gathers the sharded parameters (and reduce-scatters their gradients):
///  - per_unit: one flat all-gather and one reduce-scatter per unit (decoder layer), issued ahead of the compute that
///    needs it (PyTorch FSDP; DeepSpeed >= 0.6's all_gather_coalesced);
///  - per_tensor_blocking: DeepSpeed 0.3.13-0.5.x (March-October 2021): one all-gather per parameter tensor, each
///    after a device-wide torch.cuda.synchronize() (partition_parameters.py _allgather_param), and every submodule
///    fetch waiting for its gathers and the device (stage3.py fetch_sub_module -> _synchronize_communication), so
///    no gather overlaps compute; one reduce-scatter per parameter tensor (_reduce_scatter_gradient).
enum class Zero3Gather { per_unit, per_tensor_blocking };

/// CUDA graphs in training: which kernels of each micro-batch are captured once and replayed from a graph
/// (Megatron-LM core_v0.14.0 megatron/training/arguments.py: --enable-cuda-graph with --cuda-graph-scope
/// full | attn | full_iteration, or --external-cuda-graph, Transformer Engine's make_graphed_callables; Megatron-Bridge
/// and NeMo 2 `cuda_graphs`, MLPerf's LAYER_CUDA_GRAPH / MCORE_CUDA_GRAPH / FULL_CUDA_GRAPH). A captured kernel pays
/// the in-graph fixed cost instead of the eager launch; what is not captured keeps eager pricing:
///  - none: every kernel launched eagerly (the default);
///  - layer: each decoder layer's forward and backward (scope "full": the whole TransformerLayer); the MoE router's
///    and dispatcher's host-synchronising part stays eager where the split sizes are data-dependent (dropless);
///  - attention: only the attention half of each layer (scope "attn": TransformerLayer._forward_attention);
///  - full_iteration: the whole forward-backward of all micro-batches (not the optimizer step), which needs every
///    shape static (no dropless MoE host syncs).
enum class CudaGraphScope { none, layer, attention, full_iteration };
constexpr const char* to_string(CudaGraphScope g) {
  switch (g) {
    case CudaGraphScope::none: return "none";
    case CudaGraphScope::layer: return "layer";
    case CudaGraphScope::attention: return "attn";
    case CudaGraphScope::full_iteration: return "full_iteration";
  }
  return "none";
}

/// LoRA fine-tuning (Hu et al. 2021, arXiv:2106.09685): rank-r adapters B·A beside the chosen linear layers; the
/// base model is frozen — no weight gradients, no gradient reduction and no optimizer states for it, and its weight-
/// gradient GEMMs are skipped (the activation gradients still flow through every layer). QLoRA (Dettmers et al. 2023,
/// arXiv:2305.14314 §3) stores the frozen base in NF4 with double quantisation (4.127 bits per weight) and
/// dequantises it to the compute dtype before each GEMM.
enum class LoraTargets {
  qkv,        ///< the fused QKV projection (NeMo's default target, attention_qkv)
  attention,  ///< QKV and the output projection
  mlp,        ///< the MLP (fused up/gate and down; shared and routed experts too)
  all,        ///< every linear layer of the decoder (QLoRA's recommendation), not the router or the LM head
};
enum class LoraBase { same, int8, fp8, nf4 };  ///< storage of the frozen base weights (same = precision.weight_bytes)
constexpr const char* to_string(LoraTargets t) {
  switch (t) {
    case LoraTargets::qkv: return "qkv";
    case LoraTargets::attention: return "attention";
    case LoraTargets::mlp: return "mlp";
    case LoraTargets::all: return "all";
  }
  return "all";
}
constexpr const char* to_string(LoraBase b) {
  switch (b) {
    case LoraBase::same: return "same";
    case LoraBase::int8: return "int8";
    case LoraBase::fp8: return "fp8";
    case LoraBase::nf4: return "nf4";
  }
  return "same";
}
struct Lora {
  int rank = 0;  ///< 0: full fine-tuning (no adapters)
  LoraTargets targets = LoraTargets::all;
  LoraBase base = LoraBase::same;
  /// Dropout probability on the adapter's input (NeMo ParallelLinearAdapter, dropout_position 'pre'; MLPerf's Llama 2
  /// 70B LoRA: 0.1): a dropout pass each way and its 1-byte mask kept for the backward; 0 = none.
  double dropout = 0.0;
  [[nodiscard]] bool on() const { return rank > 0; }
};

/// Sequence packing with per-document attention: each training sequence of s tokens is several documents laid end to
/// end, and the attention kernel sees their boundaries, so a token attends (causally) only to its own document.
/// NeMo's fine-tuning with `packed_sequence_specs.packed_sequence_size` hands the packed batch to Transformer Engine
/// as the THD layout with cu_seqlens (PackedSeqParams); Megatron-LM's pretraining `--reset-attention-mask` (with the
/// THD path of megatron/core) marks document boundaries at end-of-document tokens. The documents' lengths are a
/// distribution over token counts; the GEMMs, norms and memory still see s tokens.
struct DocumentPacking {
  std::vector<std::pair<std::int64_t, double>> lengths;  ///< (tokens, probability), sorted, summing to 1; empty = off
  std::string spec;                                      ///< as typed ("lognormal:MEAN,SD", "TOKENS:WEIGHT,...")
  [[nodiscard]] bool on() const { return !lengths.empty(); }
};

struct Parallelism {
  int tp = 1;   ///< tensor parallel
  int pp = 1;   ///< pipeline parallel (stages)
  int dp = 1;   ///< data parallel (incl. ZeRO/FSDP shards)
  int cp = 1;   ///< context parallel (sequence split across GPUs for attention)
  int ep = 1;   ///< expert parallel (MoE experts split; carved out of dp·cp like Megatron-Core)
  bool sequence_parallel = false;  ///< Megatron SP: norms/dropout split along the sequence across the TP group
  int virtual_stages = 1;          ///< interleaved schedule: model chunks per pipeline stage (v)
  int shard_group = 0;             ///< ZeRO-3 hybrid shard group size; 0 = the whole dp group
  /// Expert tensor parallel (Megatron-Core's expert_tensor_parallel_size, MoE "parallel folding"): the routed experts'
  /// own TP, 0 = the attention's TP (Megatron-LM arguments.py: expert_tensor_parallel_size defaults to
  /// tensor_model_parallel_size). Per pipeline stage the tp·cp·dp ranks are regrouped as etp·ep·edp for the routed
  /// experts (parallel_state.py initialize_model_parallel: the expert rank generator over tp·cp·dp), so EP no longer
  /// has to divide dp·cp: etp·ep divides tp·cp·dp.
  int etp = 0;

  [[nodiscard]] long long gpus() const { return static_cast<long long>(tp) * pp * dp * cp; }
  /// The routed experts' tensor parallel size (etp, else tp).
  [[nodiscard]] int expert_tp() const { return etp > 0 ? etp : tp; }
  /// Ranks one routed expert's weights are split over (etp·ep).
  [[nodiscard]] long long expert_shard() const { return static_cast<long long>(expert_tp()) * (ep > 0 ? ep : 1); }
  /// Expert data parallel: the replicas of each routed-expert shard in a stage, tp·cp·dp / (etp·ep) (at least 1).
  [[nodiscard]] long long expert_dp() const {
    const long long n = static_cast<long long>(tp) * cp * dp, e = expert_shard();
    return e > 0 && n >= e ? n / e : 1;
  }
};

/// How the decoder layers are split over the pipeline's model chunks (Megatron-Core's options; chunk j = k·pp + i is
/// the k-th model chunk of pipeline rank i, k < v; v = 1 without interleaving). Unset (the default): the layers split
/// into pp·v chunks of ⌊L/(pp·v)⌋, the first L mod (pp·v) chunks one more (the interleaved schedule needs them equal,
/// as Megatron-LM does). At most one of the three ways below is set (Megatron-Core TransformerConfig refuses mixes).
struct PipelineSplit {
  /// account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split: the embedding (loss) counts as one
  /// layer of the first (last) chunk when the L (+1) (+1) layers are split into equal chunks.
  bool embedding_as_layer = false;
  bool loss_as_layer = false;
  /// decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers (num_layers_in_first/last_pipeline_stage):
  /// the decoder layers of the first (last) pipeline rank, split evenly over its v chunks; 0 = not set.
  std::int64_t first_stage_layers = 0;
  std::int64_t last_stage_layers = 0;
  /// pipeline_model_parallel_layout: the decoder layers of every chunk in chunk order (pp·v entries), the embedding in
  /// chunk 0 and the loss in the last; empty = not set. `layout` keeps the string as typed (for display).
  std::vector<std::int64_t> chunk_layers;
  std::string layout;
  [[nodiscard]] bool accounts() const { return embedding_as_layer || loss_as_layer; }
  [[nodiscard]] bool first_last() const { return first_stage_layers > 0 || last_stage_layers > 0; }
  [[nodiscard]] bool any() const { return accounts() || first_last() || !chunk_layers.empty(); }
};

/// How low-precision GEMM operands are scaled (Transformer Engine recipes; Megatron-LM --fp8-recipe, --fp4-recipe):
///  - delayed: one scale per tensor from the amax history (DelayedScaling), fused into the cast;
///  - tensorwise: one scale per tensor from the tensor's own amax (Float8CurrentScaling): an amax pass, then the cast;
///  - mxfp8: MXFP8, one E8M0 scale per 32 elements (MXFP8BlockScaling; Blackwell's block-scaled tensor cores);
///  - blockwise: FP8 with one fp32 scale per 1×128 activation tile and 128×128 weight block (Float8BlockScaling,
///    DeepSeek-V3 §3.3.2);
///  - nvfp4: FP4 E2M1 with one E4M3 scale per 16 elements and an fp32 scale per tensor (NVFP4BlockScaling).
enum class QuantRecipe { delayed, tensorwise, mxfp8, blockwise, nvfp4 };
constexpr const char* to_string(QuantRecipe r) {
  switch (r) {
    case QuantRecipe::delayed: return "delayed";
    case QuantRecipe::tensorwise: return "tensorwise";
    case QuantRecipe::mxfp8: return "mxfp8";
    case QuantRecipe::blockwise: return "blockwise";
    case QuantRecipe::nvfp4: return "nvfp4";
  }
  return "delayed";
}

struct TrainingPrecision {
  hw::Precision compute = hw::Precision::bf16;  ///< GEMM precision (fp8 = FP8 GEMMs, bf16 elsewhere)
  double weight_bytes = 2.0;          ///< working copy of the weights
  double gradient_bytes = 2.0;        ///< gradient buffer (4 with fp32 gradient accumulation, as Megatron does)
  double master_bytes = 4.0;          ///< fp32 master weights (0 for pure bf16 training)
  double activation_bytes = 2.0;      ///< stored activations
  /// FP8 parameters (Transformer Engine `fp8_model_init`, NeMo/Megatron `fp8_params`): the working weights are FP8
  /// tensors (weight_bytes 1, no bf16 copy); the fp32 master copy stays in the optimizer. Needs compute fp8.
  bool fp8_params = false;
  /// Scaling recipe of the fp8 / fp4 GEMM operands (read only with compute fp8 or fp4; fp4 is nvfp4).
  QuantRecipe recipe = QuantRecipe::delayed;
};

struct TrainingPlan {
  std::int64_t seq_len = 2048;
  std::int64_t micro_batch = 1;        ///< sequences per micro-batch per model replica
  std::int64_t global_batch = 1;       ///< sequences per optimizer step, all replicas
  Parallelism par;
  TrainingPrecision precision;
  OptimizerKind optimizer = OptimizerKind::adamw;
  StateDtype optimizer_states = StateDtype::fp32;  ///< adamw and sgd; adamw_8bit keeps its own 8-bit states
  OptimizerImpl optimizer_impl = OptimizerImpl::fused;
  ZeroStage zero = ZeroStage::none;
  Recompute recompute = Recompute::none;
  RecomputeMethod recompute_method = RecomputeMethod::uniform;  ///< read only with Recompute::full
  std::int64_t recompute_num_layers = 1;  ///< N of recompute_method (uniform 1: every layer, the classic full)
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  bool flash_attention = true;         ///< attention scores never materialised (FlashAttention-2/3, cuDNN SDPA)
  /// Train with dropout (attention probabilities and block outputs) or without; unset: as the model's config says
  /// (TransformerArch::attention_dropout_on / hidden_dropout_on).
  std::optional<bool> dropout;
  [[nodiscard]] bool attention_dropout(const TransformerArch& a) const { return dropout.value_or(a.attention_dropout_on()); }
  [[nodiscard]] bool hidden_dropout(const TransformerArch& a) const { return dropout.value_or(a.hidden_dropout_on()); }
  AttentionKernel attention_kernel = AttentionKernel::fa3;
  DocumentPacking packing;  ///< packed documents with per-document attention (off: one document per sequence)
  KernelStyle kernels = KernelStyle::fused;
  CudaGraphScope cuda_graphs = CudaGraphScope::none;  ///< which kernels run from a CUDA graph
  CrossEntropyKernel cross_entropy = CrossEntropyKernel::te;  ///< read with fused kernels (flash: with eager too)
  NormKernel norm_kernel = NormKernel::fused;                  ///< RMSNorm models only
  /// The loss runs as PyTorch's eager cross_entropy: under eager kernels (unless it is FlashAttention's, flash), or as
  /// cross_entropy eager.
  [[nodiscard]] bool eager_loss() const {
    return cross_entropy != CrossEntropyKernel::flash &&
           (kernels == KernelStyle::eager || cross_entropy == CrossEntropyKernel::eager);
  }
  MixedPrecision mixed_precision = MixedPrecision::megatron;
  Offload offload = Offload::none;
  Zero3Gather zero3_gather = Zero3Gather::per_unit;  ///< read only with zero 3
  /// Activation CPU offloading (Megatron-Core --cpu-offloading-num-layers N; transformer/cpu_offload.py
  /// AsyncDoubleBufferGroupOffloadHandler): the saved activations of the first N decoder layers are copied to host
  /// memory on a side stream while the following layers compute, and copied back ahead of their backward. Megatron-
  /// Core allows it only with N < L, no pipeline parallelism and no activation recomputation (TransformerConfig).
  std::int64_t activation_offload_layers = 0;
  Lora lora;                           ///< rank 0: full fine-tuning / pre-training
  bool overlap_grad_reduce = true;     ///< DP/FSDP gradient reduction overlapped with backward compute
  bool overlap_param_gather = true;    ///< ZeRO-3/FSDP parameter all-gather prefetched behind compute
  /// The most CTAs (NCCL channels) the data-parallel communicator's kernels may use (NCCL_MAX_CTAS, or per
  /// communicator Megatron-Core's nccl_communicator_config_path `max_ctas` for the dp / dp_cp groups; MLPerf v4.1-v5.1
  /// NeMo recipes: 8). 0 = NCCL's own channel count. Each CTA moves a bounded rate, so a cap bounds the DP
  /// collectives' bandwidth and the SMs they take from compute.
  int dp_max_ctas = 0;
  /// Parameters per data-parallel gradient bucket (Megatron-Core DistributedDataParallelConfig.bucket_size,
  /// `--ddp-bucket-size`; NeMo 2's MegatronCommOverlapCallback: 128 Mi with the distributed optimizer; MLPerf v5.1
  /// Llama 3.1 8B: 768M). 0 = the framework's default: Megatron's max(40M, 1M x DP), PyTorch DDP's 25 MiB. It sets
  /// the DP collective calls per step and the bucket reduced last and gathered first.
  std::int64_t dp_bucket_size = 0;
  /// In-network reduction (SHARP) for the data-parallel gradient reductions: NCCL's CollNet over an InfiniBand fabric
  /// whose switches reduce (Quantum-2 SHARPv3), NCCL_COLLNET_ENABLE=1 on the dp communicator (Megatron-LM
  /// `--use-sharp`, megatron/core/parallel_state.py; NeMo's `sharp: true`). Where the DP group spans scale-out domains
  /// the across-domain reduction sends each gradient byte once instead of a ring's 2(d−1)/d. NVLink SHARP (NVLS)
  /// inside a domain is NCCL's default and needs no flag.
  bool dp_sharp = false;
  /// Megatron-LM `--defer-embedding-wgrad-compute`: the last stage's LM-head weight-gradient GEMMs are buffered and
  /// run in the pipeline flush (megatron/core/tensor_parallel/layers.py, schedules.py); `--wgrad-deferral-limit` N
  /// defers only the first N micro-batches (0 = all).
  bool defer_embedding_wgrad = false;
  int wgrad_deferral_limit = 0;
  bool overlap_tp_comm = false;        ///< TP collectives overlapped with GEMMs (userbuffers / async TP)
  /// The column-parallel linears' backward TP collective (the input gradient's all-reduce, or reduce-scatter under
  /// sequence parallelism) launched asynchronously beside the weight-gradient GEMM (Megatron-LM
  /// async_tensor_model_parallel_allreduce, September 2021; Megatron-Core's
  /// LinearWithGradAccumulationAndAsyncCommunication). false: Megatron-LM before it, whose
  /// _CopyToModelParallelRegion.backward (mpu/mappings.py) all-reduces after the linear's whole backward, blocking.
  bool tp_async_backward = true;
  /// The weight-gradient GEMM accumulates into the gradient buffer in its epilogue (Megatron-LM
  /// gradient_accumulation_fusion from February 2022, Transformer Engine's fuse_wgrad_accumulation). false: it writes
  /// a fresh 16-bit gradient that a separate kernel adds into the buffer (PyTorch autograd's AccumulateGrad, or
  /// Megatron-LM's local-DDP main_grad.add_ hook, as Megatron-LM ran before the fusion). Read where the wgrad
  /// accumulates (megatron mixed precision with fused kernels).
  bool fused_wgrad_accumulation = true;
  PipelineSplit split;                 ///< how the decoder layers are split over the pipeline's chunks
  unsigned recompute_modules = 0;      ///< RecomputeModule bits (with Recompute::none or selective)
  EpDispatch ep_dispatch = EpDispatch::all_to_all;
  AttentionOutputStore attention_output = AttentionOutputStore::separate;
  /// The SwiGLU input kept for the backward in FP8 (Megatron-Core activation_func_fp8_input_store: Transformer
  /// Engine's SwiGLU op with cache_quantized_input), 1 B per element instead of the activation dtype's.
  bool activation_fp8_input_store = false;
  /// FP8 dot-product attention (Megatron-Core TransformerConfig.fp8_dot_product_attention, --fp8-dot-product-attention;
  /// NeMo/MLPerf FP8_DPA): Transformer Engine quantises Q, K and V to FP8, runs the fused attention in FP8 and keeps
  /// FP8 copies of Q, K, V and the output for the backward (the output in 16 bits under current scaling). Needs FP8
  /// GEMMs and fused attention.
  bool fp8_dot_product_attention = false;
  Fp8WeightCopies fp8_weight_copies = Fp8WeightCopies::cached;
  ParamLayout param_layout = ParamLayout::per_tensor;  ///< the static state's allocations (fragmentation reserve)
  /// MoE load imbalance: tokens of the busiest expert-parallel rank over the mean (1 = balanced routing, the default
  /// and an assumption). The slowest rank sets the pace of the expert GEMMs and of the dispatch/combine.
  double moe_imbalance = 1.0;
  /// Megatron-Core's expert capacity (--moe-expert-capacity-factor f; unset = dropless): each expert takes at most
  /// capacity = ⌈f·k·T/E⌉ of the T tokens' k·T routed copies (moe_utils.py get_capacity, Megatron-LM core_v0.14.0), the
  /// rest are dropped (their expert output is zero). With moe_pad_to_capacity (--moe-pad-expert-input-to-capacity;
  /// Megatron-Bridge's apply_moe_token_drop sets f = 1 with padding) every expert gets exactly its capacity, padded
  /// rows included, so the all-to-all split sizes are known on the host without a device→host copy.
  std::optional<double> moe_capacity_factor;
  bool moe_pad_to_capacity = false;
  /// Megatron-Core's fused router kernels (--moe-router-fusion: Transformer Engine's fused_topk_with_score_function,
  /// fused_compute_score_for_moe_aux_loss, fused_moe_aux_loss; TE >= 2.6): fewer, fused kernels for the score
  /// function, top-k and the aux-loss terms. Read with fused kernels only; default on (gpuplan's fused-kernel stack).
  bool moe_router_fusion = true;
  /// Routed rows of the busiest EP rank over the balanced mean k·T/ep after the capacity: f when padded (every expert
  /// exactly its capacity), min(ι, f) when the capacity only drops (f < 1 drops even balanced routing), else ι.
  [[nodiscard]] double moe_load() const {
    if (!moe_capacity_factor) return moe_imbalance;
    return moe_pad_to_capacity ? *moe_capacity_factor : std::min(moe_imbalance, *moe_capacity_factor);
  }
  /// The dispatch's split sizes are fixed by the capacity (token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess,
  /// drop_and_pad: no host synchronisation).
  [[nodiscard]] bool moe_fixed_splits() const { return moe_capacity_factor.has_value() && moe_pad_to_capacity; }
  /// Multi-token-prediction modules trained with the model (DeepSeek-V3 §2.2: depth D = 1; Megatron-Core
  /// --mtp-num-layers): each adds a projection, one transformer layer and a pass through the shared output head and
  /// loss on the stage that holds the output head. At most the model's mtp_layers.
  std::int64_t mtp_layers = 0;
  /// Megatron-LM's overlap_p2p_comm: under the interleaved schedule the pipeline sends and receives run beside the
  /// neighbouring chunks' compute (Megatron-LM's default with interleaving: --no-overlap-p2p-communication turns it
  /// off; it is forced off without interleaving). Read only under the interleaved schedule.
  bool overlap_p2p_comm = true;
  /// Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm, with --delay-wgrad-compute): in the
  /// steady 1F1B phase one micro-batch's dispatch and combine run beside another's forward or backward compute.
  /// Megatron-Core needs expert parallelism, the interleaved schedule when PP > 1, and no full recomputation.
  bool ep_a2a_overlap = false;
  /// The scatter/gather optimisation of pipeline sends (Narayanan et al. 2021 §4.1; Megatron-LM's
  /// scatter_gather_tensors_in_pipeline before pipeline parallelism moved into Megatron-Core in March 2023): without
  /// sequence parallelism each TP rank sends 1/tp of the boundary tensor and the receiver all-gathers it over TP.
  /// Off by default: Megatron-Core sends the whole tensor (1/tp only with sequence parallelism).
  bool pp_scatter_gather = false;
  std::optional<double> tokens_to_train;  ///< token budget for time-to-train and cost
  /// Vocabulary padding (Megatron-LM --make-vocab-size-divisible-by, default 128): the embedding and the LM head get
  /// ⌈V / (d·tp)⌉·(d·tp) rows, so that each TP rank holds an equal shard of a multiple of d
  /// (megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding; Megatron-Bridge calculate_padded_vocab_size,
  /// NeMo 2 get_vocab_size: the same rule). The padded rows cost what real ones do: weights, gradients, optimizer
  /// states, the head's GEMMs, the logits and the loss passes. Unset: 128 with fused kernels (the Megatron family),
  /// 1 with eager kernels (PyTorch modules keep the tokenizer's / config's vocabulary as it is). Megatron-Bridge skips
  /// the padding when the model config sets vocab_size itself (validate_and_set_vocab_size): give 1 for that.
  std::optional<int> vocab_divisible_by;

  [[nodiscard]] int vocab_divisor() const {
    return vocab_divisible_by.value_or(kernels == KernelStyle::eager ? 1 : 128);
  }
  /// The vocabulary the embedding and LM head are built with: V rounded up to a multiple of divisor × tp.
  [[nodiscard]] std::int64_t padded_vocab(std::int64_t vocab) const {
    const std::int64_t multiple = std::int64_t(std::max(1, vocab_divisor())) * std::max(1, par.tp);
    return (vocab + multiple - 1) / multiple * multiple;
  }

  /// Gradient-accumulation micro-batches per step per replica: global / (micro · dp). The model reports a
  /// non-integer as infeasible.
  /// Model chunks per pipeline stage: v under the interleaved schedule, else 1.
  [[nodiscard]] int model_chunks() const {
    return schedule == PipelineSchedule::interleaved ? std::max(1, par.virtual_stages) : 1;
  }
  [[nodiscard]] bool dualpipe() const { return schedule == PipelineSchedule::dualpipe && par.pp > 1; }
  [[nodiscard]] bool recomputes(RecomputeModule m) const { return (recompute_modules & m) != 0; }
  /// Full recomputation of a model chunk of c layers (RecomputeMethod): the layers whose forward the backward
  /// repeats, the checkpoints kept (layer inputs), and the layers rebuilt at once for one backward.
  [[nodiscard]] std::int64_t recomputed_in_chunk(std::int64_t c) const {
    if (recompute != Recompute::full) return 0;
    return recompute_method == RecomputeMethod::block ? std::min(recompute_num_layers, c) : c;
  }
  [[nodiscard]] std::int64_t checkpoints_in_chunk(std::int64_t c) const {
    if (recompute != Recompute::full) return 0;
    const std::int64_t n = std::max<std::int64_t>(1, recompute_num_layers);
    return recompute_method == RecomputeMethod::block ? std::min(n, c) : (c + n - 1) / n;
  }
  [[nodiscard]] std::int64_t recompute_group(std::int64_t c) const {
    if (recompute != Recompute::full || recompute_method == RecomputeMethod::block) return 1;
    return std::max<std::int64_t>(1, std::min(recompute_num_layers, c));
  }
  /// Full recomputation of only part of the layers or in groups (anything but uniform with N = 1).
  [[nodiscard]] bool partial_recompute() const {
    return recompute == Recompute::full && (recompute_method == RecomputeMethod::block || recompute_num_layers > 1);
  }

  [[nodiscard]] std::int64_t micro_batches() const {
    const std::int64_t per_step = micro_batch * par.dp;
    return per_step > 0 ? global_batch / per_step : 0;
  }
};

/// The model as a training plan builds it: the vocabulary padded (TrainingPlan::padded_vocab).
inline TransformerArch with_padded_vocab(const TransformerArch& a, const TrainingPlan& plan) {
  TransformerArch p = a;
  p.vocab = plan.padded_vocab(a.vocab);
  return p;
}

}  // namespace gpuplan::wl
