#pragma once
// Internal to gpuplan::model: the training step split into
//  - terms that depend on only a few sizes of the layout (the layer costs of one micro-batch, one collective of each
//    kind, the optimizer pass), each computed by one function here, and
//  - compose_step, the arithmetic that turns those terms into the step time, its breakdown, MFU and time to train.
// estimate_training computes the terms directly; FastTrainingEvaluator (search.cpp) computes each term once per key
// and caches it. Both call the same compose_step and memory_core (memory_core.hpp), so a layout gets bit-identical
// numbers from either path: one formula, one place (DESIGN.md §2.1).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/units.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/model/training.hpp"
#include "layer_cost.hpp"
#include "memory_core.hpp"

namespace gpuplan::model::detail {

using units::Bytes;
using units::Seconds;

/// The layout rules of check_training_layout (training_layout.cpp). With `f`, every failed rule is recorded with its
/// message; without, the first failure returns false and no message is built (the search's inner loop).
/// `host_link`: whether the GPU has a host link (host_link_bandwidth), where the caller knows it; the search looks
/// the link up by name once, not per offload layout (~80 instructions per layout of GPT-3 175B on 128 H100).
bool layout_rules(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                  Feasibility* f, std::optional<bool> host_link = std::nullopt);

/// The feasibility message of a plan whose memory does not fit the GPU (training_layout.cpp): the shortfall and the
/// single changes of the plan (recompute, ZeRO stage, micro-batch, offload, TP or PP) that the memory model says fit.
std::string does_not_fit_message(const wl::TransformerArch& a, const ParameterCounts& params,
                                 const wl::TrainingPlan& plan, const TrainingSystem& sys, const TrainingMemory& memory);

/// The device as the op model sees it for this plan: efficiency overrides (calibration) and the attention kernel.
Device training_device(const wl::TrainingPlan& plan, const TrainingSystem& sys);

/// Quantities of a (model, sequence length, system) that no parallel size changes.
struct TrainingConsts {
  Device d;
  ParameterCounts params;
  FlopsPerToken fpt;                        ///< at plan.seq_len
  /// The LM head's forward FLOPs per token, 2 · its matmul weights: a fold over the head graph (build_head_graph), the
  /// part of fpt.forward that full recompute does not repeat.
  units::Flops head_forward{};
  double moe_layers = 0;                    ///< MoE layers in the model
  /// parameter_tensors(a), a fold over the layer graphs, when the plan gathers tensor by tensor (zero3_gather
  /// per_tensor_blocking, the one reader: compose_step); else 0 (the search and the GUI's studies skip the fold).
  double parameter_tensors = 0;
  std::optional<units::UsdPerSecond> price;  ///< the system's override, else the GPU's indicative price
};
TrainingConsts training_consts(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys);

/// One micro-batch through every layer (forward and backward, not yet split over pipeline stages), the LM head with
/// its loss, and the embedding. Depends on (tp, cp, micro-batch, sequence parallelism, ep) and the fixed plan fields.
/// `first` (optional) receives the first layer's op list for display.
struct ComputeTerms {
  PassCost fwd_all, bwd_all;
  /// One layer of each cost kind [LayerKind::index()] (zero where the model has no such layer): a stage's compute
  /// is Σ_kind (its layers of the kind) × (the kind's cost).
  std::array<PassCost, LayerKind::kCount> kind_fwd{}, kind_bwd{};
  /// One layer of each kind: the forward work its recompute modules repeat (LayerCost::rec).
  std::array<PassCost, LayerKind::kCount> kind_rec{};
  /// The kinds the model has, in ascending index (kind_list[0 .. kind_count)): a stage sums over these only (the
  /// others' costs are zero), in the same order as over every index.
  std::array<std::uint8_t, LayerKind::kCount> kind_list{};
  std::size_t kind_count = 0;
  Seconds head_time{}, embed_time{};
  /// The LM head's weight-gradient GEMM per micro-batch (part of head_time): what Megatron-LM's
  /// --defer-embedding-wgrad-compute moves into the pipeline flush.
  Seconds head_wgrad{};
  /// One multi-token-prediction module beyond its transformer layer (DeepSeek-V3 §2.2.1): the projection of
  /// [norm(h); norm(emb)] (2h → h) forward and backward, and a pass through the shared output head and loss.
  Seconds mtp_extra{};
  std::vector<OpCost> head_ops;  ///< the LM head GEMMs and the loss (filled when `first` is given, for display)
};

ComputeTerms compute_terms(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const Device& d,
                           LayerCost* first);

/// Bytes of the TP activation collective, the CP K/V exchange, the EP dispatch buffer and the PP boundary message of
/// one micro-batch; and the per-GPU parameter count the DP group reduces.
Bytes tp_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
/// The elements of the TP message: the micro-batch's T = b·s/cp tokens × hidden.
double tp_message_elements(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
Bytes cp_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
Bytes ep_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
Bytes pp_message(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
/// Parameters one GPU holds (even stages: the stage's share of the model), by the data-parallel group that replicates
/// them (Megatron-Core parallel_state.py: the dense grid tp-cp-dp-pp and the expert grid etp-ep-edp-pp over the same
/// GPUs, cp folded into ep/edp): `dense` (attention, norms, dense FFN, router, shared experts, embedding, head) split
/// over TP and replicated over the dp·cp group; `experts` (the routed experts) split over TP·EP and replicated over
/// the expert-data-parallel group of dp·cp/ep GPUs.
struct GpuParams {
  double dense = 0.0, experts = 0.0;
  [[nodiscard]] double total() const { return dense + experts; }
};
GpuParams params_per_gpu(const ParameterCounts& params, const wl::TrainingPlan& plan);
/// Parameters per GPU that carry gradients and optimizer states: all of them, or the LoRA adapters (counted as dense).
GpuParams trainable_per_gpu(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan);
/// The gradient groups: dense parameters are reduced over dp·cp GPUs (stride tp), routed experts over the
/// tp·cp·dp/(etp·ep) GPUs of the expert-data-parallel group (stride etp·ep; dp·cp/ep when etp = tp). Sizes 1 when there is nothing to reduce.
/// Under DualPipe both grow × 2: each stage's mirror copy is one more replica (stage_copies).
int dense_grad_group_size(const wl::TrainingPlan& plan);
int expert_grad_group_size(const wl::TrainingPlan& plan);
/// The link tiers of a gradient group of `size` GPUs `stride` ranks apart: training_comm_group, except under DualPipe,
/// whose mirror copies live in other scale-up domains (the group's members per domain stay, its domains double);
/// with the plan's DP CTA cap (dp_max_ctas) on the communicator.
CommGroup grad_comm_group(int size, int stride, const wl::TrainingPlan& plan, const TrainingSystem& sys);
/// The same group's tiers without the cap.
CommGroup grad_comm_group_tiers(int size, int stride, const wl::TrainingPlan& plan, const TrainingSystem& sys);
/// Trainable parameters per GPU whose gradients the DP step reduces: the dense ones (when dp·cp > 1) and the routed
/// experts' only when their expert-data-parallel group has more than one GPU (EP = dp·cp leaves nothing to reduce).
double dp_reduced_params(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan);

/// One TP collective pair (all-reduce, or all-gather + reduce-scatter with SP) of one layer. Key (tp, cp, micro, sp).
Seconds tp_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& tp_g);
/// One all-gather of the TP message over the TP group: sequence parallelism's weight-gradient re-gather of a
/// column-parallel linear's input, and a LoRA adapter's gather (StepTerms::tp_gather_one).
Seconds tp_gather_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& tp_g);
/// The TP collectives of one layer's Transformer Engine linears (the attention's, a dense MLP's) when their
/// all-gathers move quantised operands (quantised_tp_gathers, quant_recipe.hpp tp_gather_bytes): a forward pair
/// (the input's all-gather + the output's 16-bit reduce-scatter), a backward pair (the output gradient's all-gather +
/// the input gradient's reduce-scatter), one reduce-scatter alone, the weight-gradient re-gather, and one amax
/// all-reduce of an fp32 (current scaling, NVFP4: tp_amax_reduction; else 0). All 0 when the gathers are 16-bit.
/// Key (tp, cp, micro).
struct TpQuantTimes {
  Seconds pair_fwd{}, pair_bwd{}, reduce_scatter{}, regather{}, amax{};
  [[nodiscard]] bool on() const { return pair_fwd > Seconds(0); }
};
TpQuantTimes tp_quant_times(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& tp_g);
/// Whether the MoE layers' expert block has its own TP group (parallel folding: etp ≠ tp, an MoE model).
bool expert_tp_folded(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
/// One collective pair of an MoE layer's routed-expert block over the expert-TP group when etp ≠ tp: the
/// dispatcher's gather of the rows the etp ranks hold (gather_from_sequence_parallel_region over the expert-TP group
/// in Megatron-Core's token dispatchers) and its reduce-scatter in the combine, priced as the attention TP pair is
/// (tp_message, here × etp/tp: the unique tokens of etp sequence shards); 0 when etp = 1. Key (etp, tp, cp, micro).
Seconds etp_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& etp_g);
/// One layer's CP exchange: 2 all-gathers (K, V) + 1 reduce-scatter (dK, dV). Key (tp, cp, micro).
Seconds cp_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& cp_g);
/// The MoE dispatch and combine of one micro-batch through one MoE layer on the EP group `g` (moe_dispatch.cpp), each
/// one way; the backward moves the same bytes the other way (the output gradient dispatched, the input gradient
/// combined), so a layer's forward + backward is 2·(dispatch + combine).
struct MoeDispatch {
  units::Seconds dispatch{}, combine{};
  units::Bytes dispatch_bytes{}, combine_bytes{};  ///< per GPU, sent
  double ib_copies = 0;      ///< copies of a token this GPU sends over the scale-out NIC (InfiniBand)
  double nvlink_copies = 0;  ///< copies of a token moved over NVLink (sent, or forwarded inside the node)
  double node_limit = 0;     ///< nodes a token may reach (deepep; 0 = not used)
  double imbalance = 1;      ///< the plan's load imbalance applied
};
MoeDispatch moe_dispatch(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& g);
/// DeepSeek's framework under DualPipe (quant_recipe.hpp one_layout_blockwise, with DeepEP's kernels): while a forward
/// and a backward chunk run as an overlapped pair, the dispatch/combine kernels hold their SMs (20 of the H800's 132,
/// §3.5.1; a2a_sm_share) and the GEMMs are launched on the rest — every GEMM of DeepSeek's profiled pair has 112 CTAs
/// (grids [112, 1], [1, 112], [2, 56]; deepseek-ai/profile-data train.json, docs/deepseek-v3-profile.md) — so a
/// paired GEMM runs on SMs − 20 for the whole pair, not only while a transfer is in flight. FlashAttention's kernels
/// are launched on full grids ([32, 128]), but in the same profile every one of them runs (99-100% of its time) beside
/// a DeepEP kernel (DualPipe's Figure 4 puts each COMBINE beside an ATTN), so the paired attention runs beside the held
/// SMs too, and loses kAttentionHeldSmLoss of the SM-proportional stretch. Returns that share of the SMs, or 0 where
/// the GEMMs take the whole GPU (any other framework or dispatcher).
double paired_gemm_sm_share(const wl::TrainingPlan& plan, const hw::GpuSpec& gpu);
/// What share of the SM-proportional stretch share/(1 − share) causal FlashAttention loses beside a kernel that holds
/// SMs: measured on our H200 beside 20 held SMs of 132, forward 7.6%, 8.5%, 9.2% (spin) and 7.9%, 8.0%, 8.3% (beside a
/// copy at 158 GB/s, a dispatch kernel's rate), backward 7.1% and 8.7%, against the SM share's 17.9%: 0.45
/// (data/validation/measured/h200-sxm-141gb/beside_sms.json, beside_sms_run2.json, beside_sms_attn.json, attention
/// rows; scripts/measure/beside_sms.py).
inline constexpr double kAttentionHeldSmLoss = 0.45;
/// DualPipe's forward-backward pairs (deepseek-ai/DualPipe dualpipe.py, DualPipe.step): of the m forward and m
/// backward chunks a device runs in a step, only those issued by _forward_backward_chunk run overlapped (one
/// micro-batch's forward beside another's backward, each one's all-to-all behind the other's compute; DeepSeek-V3
/// §3.2.1, Figures 4 and 5): step 4's 2·(m/2 − PP + h + 1) and step 5's PP/2 − h − 1, with h = min(i, PP − 1 − i)
/// the device's half rank, less the first of step 4 on the two middle ranks (h = PP/2 − 1: "We don't overlap these
/// two chunks"). That is m − 3·PP/2 + 1 + h pairs (− 1 in the middle); the other chunks (steps 1–3 and 6–7: the
/// warm-up forwards and the zero-bubble backwards) run alone. Returns the paired share of the chunks, in [0, 1].
double dualpipe_paired_share(int pp, std::int64_t m, int device);
/// One EP all-to-all: the mean of the dispatch and the combine (moe_dispatch). Key (tp, cp, ep, micro).
Seconds ep_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& ep_g);
/// One PP send/recv. Key (tp, cp, dp, micro, sp, scatter/gather).
Seconds pp_collective_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& pp_g);
/// The receiver's all-gather over TP of a scattered pipeline message (plan.pp_scatter_gather without sequence
/// parallelism); 0 otherwise. Key (tp, cp, micro, sp, scatter/gather).
Seconds pp_gather_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const CommGroup& tp_g);
/// Whether the pipeline message is split over TP: sequence parallelism (the tensor is sequence-sharded) or the
/// scatter/gather optimisation.
bool pp_message_split(const wl::TrainingPlan& plan);
/// The DP gradient reduction (all-reduce, or reduce-scatter with ZeRO ≥ 1) and one parameter all-gather (ZeRO ≥ 1),
/// and the collectives of the unit reduced last and gathered first; the routed experts' over the expert-data-parallel
/// group (expert_g), the rest over the dp·cp group (dp_g). Key (tp, pp, cp, dp, ep, ZeRO stage).
/// The DP gradient buckets of pipeline rank 0 (dp_buckets.cpp): its first model chunk bucketed, every other chunk one
/// bucket; the routed experts in a buffer of their own.
struct DpBuckets {
  double size = 0.0;          ///< parameters per bucket as configured (dp_bucket_size or the default)
  double dense_calls = 0.0;   ///< buckets of the dense buffer, all chunks
  double expert_calls = 0.0;  ///< buckets of the expert buffer (0 when the experts have no expert-DP peer)
  double calls = 1.0;         ///< collective calls per step: dense + expert, at least 1
  double last = 0.0;          ///< parameters of the first chunk's last dense bucket (the embedding's)
};
/// Megatron-Core's buckets walked tensor by tensor over the op graph's weights in reverse parameter order (a bucket
/// closes at the first tensor boundary at or past its size), or PyTorch DDP's (a 1 MiB first bucket). Key (tp, pp,
/// cp, dp, ep, etp, ZeRO stage, model chunks, the split, LoRA).
DpBuckets dp_buckets(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
/// The layout fields dp_buckets reads, as a cache key (the search's, search_evaluator.cpp): TP, the expert grid (EP
/// and expert TP), PP (negative under DualPipe), model chunks, ZeRO on or off, the bucket size's bits (DP·CP enters
/// only through it: max(40M, 1M·DP·CP)) and whether the experts have an expert-data-parallel peer. Plans with the
/// same base fields and the same key get the same buckets.
using DpBucketsKey = std::array<std::int64_t, 7>;
DpBucketsKey dp_buckets_key(const wl::TrainingPlan& plan);
struct DpTimes {
  Seconds reduce{}, gather{};
  DpBuckets buckets{};     ///< the buckets behind the calls and the last unit (dp_buckets)
  Seconds reduce_last{};   ///< the last-reduced unit's collective (exposed after the backward)
  Seconds gather_first{};  ///< the first-gathered unit's collective (exposed before the first layer), ZeRO ≥ 1
  double last_unit = 0.0;  ///< parameters per GPU of that unit (dp_last_unit_params)
};
DpTimes dp_collective_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                            const CommGroup& dp_g, const CommGroup& expert_g);
/// The same with the plan's buckets already formed (dp_buckets(a, plan); the search caches them by dp_buckets_key,
/// since many DP terms share them: an MoE model's walk over every routed expert's tensors cost ~880 instructions per
/// layout on Qwen3-235B).
DpTimes dp_collective_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                            const CommGroup& dp_g, const CommGroup& expert_g, const DpBuckets& buckets);
/// ZeRO-3 parameter gathers per micro-batch: forward and backward, and the recomputed forward for per-tensor fetch.
double zero3_gathers_per_microbatch(const wl::TrainingPlan& plan);
/// PyTorch FSDP2's copy-in/copy-out bytes per step around its all-gathers and reduce-scatters (ZeRO-3).
double fsdp_copy_bytes(const ParameterCounts& params, const wl::TrainingPlan& plan);
/// The PyTorch data-parallel wrappers' copies (eager kernels): DDP's bucket copy (no ZeRO) or FSDP's copies (ZeRO-3);
/// 0 otherwise. Key (tp, pp, dp, ep, shard group, micro-batches, zero).
Seconds dp_copy_time(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                     const Device& d);
/// The same for `bytes` already folded (dp_copy_bytes).
Seconds dp_copy_time(Bytes bytes, const wl::TrainingPlan& plan, const Device& d);
/// PyTorch AMP's per-step weight casts (mixed_precision amp). Key (tp, pp, ep).
Seconds amp_cast_time(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan, const Device& d);
/// Layers of the pipeline stage that holds the most (chunk_layers' assignment, memory_core.hpp).
std::int64_t heaviest_stage_layers(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
/// Fraction of GEMM throughput a collective running beside compute takes: the calibration profile's measured
/// comm_compute_loss, else 16 NCCL channels' share of the GPU's SMs (an assumption).
double comm_compute_share(const Device& d);
/// Megatron-Core's default gradient bucket in parameters: max(40M, 1M × DP·CP) (training.py get_model).
double megatron_bucket_params(const wl::TrainingPlan& plan);
/// Parameters per GPU of the DP unit reduced last and gathered first, whose collective no compute hides: ZeRO-3 / FSDP
/// the root unit (embedding, positions, untied LM head); buckets: the last bucket of dp_buckets (`buckets`); at most
/// the GPU's dense parameters.
double dp_last_unit_params(const ParameterCounts& params, const wl::TrainingPlan& plan, const DpBuckets& buckets);
/// The SM share of the DP collectives' kernels beside compute: comm_compute_share, at most dp_max_ctas SMs of the GPU
/// when the plan caps the DP communicator's CTAs (one CTA runs on one SM).
double dp_comm_compute_share(const Device& d, const wl::TrainingPlan& plan);
/// ZeRO shard count of the optimizer step over the dense parameters (1 without ZeRO): the dp·cp group (Megatron-Core's
/// distributed optimizer shards over the data-parallel group with context parallelism), or the hybrid shard group.
double optimizer_shard(const wl::TrainingPlan& plan);
/// ZeRO shard count over the routed experts: the expert-data-parallel group, optimizer_shard / ep (at least 1).
double expert_optimizer_shard(const wl::TrainingPlan& plan);
/// Parameters this GPU updates in the optimizer step: dense / optimizer_shard + experts / expert_optimizer_shard.
double optimizer_shard_params(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan);
/// HBM bytes per parameter of the fused optimizer step (training.cpp): master weight, states read and written, the
/// gradient read, the working weight written (read and written without a master copy).
double optimizer_bytes_per_param(const wl::TrainingPlan& plan);
/// HBM bytes per parameter of the unfused step's passes (optimizer_step.cpp), the master → weight copy included.
double unfused_bytes_per_param(const wl::TrainingPlan& plan);
/// The unfused optimizer step (wl::OptimizerImpl foreach / for_loop; optimizer_step.cpp): PyTorch's elementwise
/// passes of the update, each over this GPU's shard, each launched per group of tensors (foreach) or per tensor
/// (for-loop): time = Σ passes (bytes / BW + launches · t_launch). The CPU issues the kernels at cpu_per_kernel each
/// (`cpu`), ahead of the GPU: hidden behind the backward's queued kernels unless the step is host-bound.
struct UnfusedOptimizer {
  Seconds time{}, gpu{}, cpu{};
  double bytes_per_param = 0;  ///< HBM bytes the passes move per parameter updated
  double kernels = 0;          ///< kernels launched per step
  double tensors = 0;          ///< parameter tensors of this GPU
  Seconds cpu_per_kernel{};
};
UnfusedOptimizer unfused_optimizer_step(const wl::TransformerArch& a, double p_shard, const wl::TrainingPlan& plan,
                                        const Device& d);
/// Parameter tensors of the model as PyTorch modules hold them (weights, biases, norm vectors; optimizer_step.cpp).
double parameter_tensors(const wl::TransformerArch& a);
/// Parameter tensors of the heaviest pipeline stage: ⌈parameter_tensors / PP⌉ (a stage holds whole tensors). The one
/// count that the unfused optimizer's launches, DeepSpeed ZeRO-3's per-tensor calls and their explain line use.
double stage_parameter_tensors(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
/// The same from the model's count (TrainingConsts::parameter_tensors).
double stage_parameter_tensors(double model_tensors, const wl::TrainingPlan& plan);
/// Whether the plan's optimizer step is priced pass by pass (foreach / for-loop AdamW or SGD).
inline bool unfused_optimizer(const wl::TrainingPlan& plan) {
  return plan.optimizer_impl != wl::OptimizerImpl::fused && plan.optimizer != wl::OptimizerKind::adamw_8bit;
}
/// The optimizer pass over this GPU's shard with what it was priced from: the parameters it updates (p_shard,
/// optimizer_shard_params) and, for an unfused step, its passes (`unfused`, empty otherwise).
struct OptimizerStep {
  Seconds time{};  ///< the update, plus fp8_weights
  double p_shard = 0.0;
  UnfusedOptimizer unfused{};
  /// The FP8 / FP4 GEMM weights quantised once per step (fp8_quant.hpp weight_quantisation_time), in `time`.
  Seconds fp8_weights{};
};
OptimizerStep optimizer_step(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                             const Device& d);
/// The optimizer pass over this GPU's shard (optimizer_step's time). Key (tp, pp, ep, optimizer_shard).
Seconds optimizer_time(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan, const Device& d);

/// CPU offload of the optimizer (wl::Offload::optimizer), per step: this GPU's gradient shard to the host and the
/// updated weights back over its host link, and the CPU optimizer step over the shard at this GPU's share of the
/// node's DRAM bandwidth. Key (tp, pp, ep, optimizer_shard).
struct OffloadTimes {
  Seconds d2h{}, cpu_step{}, h2d{};
  double host_link_GBps = 0, dram_GBps = 0;  ///< effective rates used (for the derivation)
};
/// Fractions of peak, stated in every derivation: the host link's DMA rate, measured with pinned 1 GiB copies on PCIe
/// Gen5 x16 (63 GB/s): 55.4 GB/s H2D on 8 × H200 (data/hardware/links/pcie5.json) and 53.5 H2D / 54.3 D2H on an
/// H100 (data/validation/measured/offload/), mean 0.86; and the DRAM bandwidth a streaming CPU optimizer sustains
/// (an assumption: the peak DRAM bandwidth of the measured hosts is not known, docs/search.md).
inline constexpr double kHostLinkEfficiency = 0.86;
inline constexpr double kHostDramEfficiency = 0.70;
/// The host link of the system's GPU (its PCIe link's x16 rate), absent when the data does not give one.
std::optional<units::Bandwidth> host_link_bandwidth(const TrainingSystem& sys);
OffloadTimes offload_times(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan, const TrainingSystem& sys);
/// Host memory the offloaded states of one node need: per-GPU host bytes × the node's GPUs in use.
double offload_host_bytes_per_node(double host_per_gpu, const wl::TrainingPlan& plan, const TrainingSystem& sys);
/// Whether the node's host memory holds the offloaded states of its GPUs (true when nothing is offloaded or the node
/// does not give its host memory).
bool offload_fits_host(double host_per_gpu, const wl::TrainingPlan& plan, const TrainingSystem& sys);
/// GPUs of one node the plan uses, which share its host memory and DRAM bandwidth: min(node GPUs, plan GPUs), ≥ 1.
long long offload_node_gpus(const wl::TrainingPlan& plan, const TrainingSystem& sys);

struct PricedStages;

/// Every term compose_step needs (terms of parallelism that is not used are 0 and not read).
struct StepTerms {
  /// The compute terms (compute_terms); required. A pointer, as `stages`: the search prices every layout from its
  /// cached terms, and a copy of their per-kind arrays (~9 KB) per layout cost more than the step itself.
  const ComputeTerms* compute = nullptr;
  Seconds amp_casts{}, tp_one{}, cp_one{}, ep_one{}, pp_one{}, pp_gather_one{}, dp_copy{}, optimizer{};
  Seconds etp_one{};  ///< etp_collective_time: read only when expert_tp_folded
  /// One all-gather of the TP message (tp_message) over the TP group: a LoRA adapter's own collective
  /// (lora_tp_collectives; its reduce-scatter and all-to-all move the same bytes per GPU).
  Seconds tp_gather_one{};
  /// The TP collectives with quantised all-gathers (tp_quant_times); zero when the gathers are 16-bit.
  TpQuantTimes tp_quant{};
  Bytes ep_bytes_one{};  ///< bytes of one EP transfer (mean of dispatch and combine); 0: ep_message's
  const std::vector<StageShape>* stages = nullptr;  ///< every pipeline stage (stage_shapes); required
  DpTimes dp;
  OffloadTimes offload;  ///< read only with wl::Offload::optimizer
  /// What `optimizer` was priced from: estimate_training's, for the explain tree (the search leaves it empty).
  OptimizerStep optimizer_parts{};
  /// The bytes `dp_copy` was priced from (dp_copy_bytes), for the explain tree; 0 when there is no copy.
  Bytes dp_copy_bytes{};
  /// Activation offloading (wl::TrainingPlan::activation_offload_layers): one layer's saved activations of one
  /// micro-batch copied one way over the host link (activation_offload_layer_time); 0 without offloading.
  Seconds act_offload_layer{};
  Bytes act_offload_layer_bytes{};
  /// The search's memo of the stages' pricing (PricedStages): when given, compose_step reads it if `stages_memo_valid`
  /// (the caller's promise: priced by compose_step for a layout that differs from this one in its ZeRO stage or
  /// offload only) and prices into it otherwise. Not used when the stages are recorded (StepCore::stage_times,
  /// StepCore::layout).
  PricedStages* stages_memo = nullptr;
  bool stages_memo_valid = false;
};

/// The numbers of one kind of communication in a step.
struct CommNumbers {
  Seconds time{}, exposed{};
  Bytes bytes{};
};

/// One pipeline stage's micro-batch as compose_step priced it (its t_i and the parts it is the sum of), recorded for
/// the step timeline (timeline.hpp), which lays these terms out without recomputing them.
struct StageParts {
  PassCost fwd, bwd, recompute;
  CommNumbers tp, cp, ep, pp;
  Seconds embed{}, head{}, mtp{}, amp{};  ///< the parts of the stage's `extra` (embedding, LM head + loss, MTP, AMP casts)
  Seconds total{};                        ///< t_i
};
/// One micro-batch on one pipeline stage as compose_step prices it: its parts (what the step timeline records) and
/// their sums.
struct StageTime : StageParts {
  Seconds extra{};            ///< embed + head + mtp + amp
  Seconds compute{}, comm{};  ///< the parts of `total`: fwd + bwd + recompute, and the exposed communication
};
/// What compose_step's pricing of the pipeline stages gives the rest of the step: the slowest stage, its index and
/// the sum over the stages. It depends on the layout but not on its ZeRO stage or CPU offload (those price the DP
/// terms, the optimizer and the memory), so the search keeps it between layouts that differ only there
/// (StepTerms::stages_memo).
struct PricedStages {
  StageTime buf[2];  ///< compose_step's two stage buffers, the slowest stage in buf[slowest]
  int slowest = 0;
  int bottleneck = 0;
  Seconds stage_sum{};
  [[nodiscard]] const StageTime& worst() const { return buf[slowest]; }
};
/// The DP terms as compose_step combined them (exposed = reduce_exposed + gather_exposed + (hidden)·sm_share + copy).
struct DpParts {
  Seconds reduce{}, gather{}, reduce_exposed{}, reduce_hidden{}, gather_exposed{}, gather_hidden{}, copy{};
  double sm_share = 0.0, reduce_calls = 0.0, gather_calls = 0.0;
};
/// What the step timeline needs of compose_step beyond StepCore: every stage's parts and the DP terms.
struct StepLayout {
  std::vector<StageParts> stages;
  DpParts dp;
};

/// What compose_step computes: the numeric part of a TrainingEstimate (no strings, no memory).
struct StepCore {
  bool ok = false;  ///< false: the step time is not finite and positive (a group has no usable link)
  std::int64_t m = 0;
  PassCost fwd, bwd, recompute;  ///< one micro-batch on the bottleneck stage
  Seconds extra{};               ///< the bottleneck stage's embedding / LM head + loss (and AMP casts) per micro-batch
  int bottleneck = 0;            ///< the pipeline stage with the longest time per micro-batch
  std::int64_t bottleneck_layers = 0;
  Seconds stage_max{}, stage_sum{};  ///< per micro-batch: the bottleneck stage's time and the sum over the stages
  /// The bottleneck stage's time per micro-batch in its parts: stage_max = compute_mb + comm_mb + extra, with
  /// compute_mb = fwd + bwd + recompute and comm_mb its exposed TP, CP, EP and PP communication over m.
  Seconds compute_mb{}, comm_mb{};
  /// DualPipe's B, one backward chunk run alone: with its recomputation and its exposed all-to-all (0 otherwise).
  Seconds dualpipe_b{};
  /// The DP gathers as priced: calls per pass (dp_calls) and passes per step (ZeRO-3: zero3_gathers_per_microbatch × m;
  /// otherwise 1), for the explain tree (0 without a DP group).
  double dp_gather_calls_per_pass = 0, dp_gather_passes = 0;
  double nccl_sm_share = 0, dp_sm_share = 0;  ///< the SM shares of communication beside compute: all groups, DP's
  /// Megatron-LM --defer-embedding-wgrad-compute: the last stage's deferred LM-head weight gradients (N·W), the
  /// pipeline drain that hides them (the other stages' backwards of the last micro-batch) and what stays exposed
  /// (counted in the bubble); N the deferred micro-batches. All 0 without deferral.
  Seconds deferred_wgrad{}, deferred_window{}, deferred_exposed{};
  std::int64_t deferred_microbatches = 0;
  std::vector<Seconds>* stage_times = nullptr;  ///< when given (estimate_training), receives every stage's time
  StepLayout* layout = nullptr;  ///< when given (the step timeline), receives every stage's parts and the DP terms
  CommNumbers tp, cp, ep, pp, dp;
  CommNumbers offload;  ///< host-link transfers of the CPU offload (d2h + h2d)
  StepBreakdown step;
  double bubble_fraction = 0, tokens_per_s = 0, mfu = 0, hfu = 0;
  units::Flops model_flops{}, hardware_flops{};
  bool has_time_to_train = false, has_cost = false, has_energy = false;
  Seconds time_to_train{};
  double gpu_hours = 0;
  units::Usd cost{};
  units::Joules energy{};
};

/// The training step from its terms (training.hpp, estimate_training, documents the formulas).
void compose_step(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingConsts& k,
                  const StepTerms& t, StepCore& out);

/// estimate_training, also filling `layout` (when given) with the terms compose_step combined.
TrainingEstimate estimate_training_laid_out(const wl::TransformerArch& a, const wl::TrainingPlan& plan,
                                            const TrainingSystem& sys, Explain explain, StepLayout* layout);

/// The --explain derivation tree of estimate_training (training_explain.cpp): fills est.derivation from the terms, the
/// composed step and the parts of `est` already filled (its step, communication, MFU and memory).
void explain_training(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                      const TrainingConsts& k, const StepTerms& terms, const LayerCost& first, const StepCore& core,
                      TrainingEstimate& est);

/// The host link's effective rate for this GPU: its PCIe x16 rate, or its share of a C2C link (GpuSpec::host_link /
/// host_link_gpus), at kHostLinkEfficiency, capped by its share of the node's DRAM bandwidth where the node gives it.
std::optional<units::Bandwidth> host_link_rate(const wl::TrainingPlan& plan, const TrainingSystem& sys);
/// Bytes of one decoder layer's saved activations for one micro-batch (the stage's mean layer), and the time to copy
/// them one way over the host link (0 without a link or without activation offloading).
double activation_offload_layer_bytes(const wl::TransformerArch& a, const wl::TrainingPlan& plan);
Seconds activation_offload_layer_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan,
                                      const TrainingSystem& sys);
/// Exposed copy time of activation offloading per micro-batch: Megatron-Core's AsyncDoubleBufferGroupOffloadHandler
/// copies layer g's activations while the next ⌊L/N⌋ layers compute (its layer_window_map) and waits for the copy at
/// the window's end; in the backward it reloads a group one window ahead. N · max(0, t_copy − (L/N)·t_layer) each way.
Seconds activation_offload_exposed(std::int64_t layers, std::int64_t offloaded, Seconds copy_one_layer,
                                   Seconds fwd_mb, Seconds bwd_mb);

/// The derivation node of activation offloading (training_recipes.cpp), appended to `root` when the plan offloads.
void explain_activation_offload(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                                const StepTerms& terms, const StepCore& core, Derivation& root);

/// The derivation node of the vocabulary padding (training_recipes.cpp): V as the model gives it, padded by the
/// plan's rule (wl::TrainingPlan::padded_vocab); appended to `root`'s children.
void explain_vocab_padding(std::int64_t vocab, const wl::TrainingPlan& plan, Derivation& root);

}  // namespace gpuplan::model::detail
