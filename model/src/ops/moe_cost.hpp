#pragma once
// Internal to gpuplan::model: the parts of an MoE layer's price that training (layer_cost.cpp) and serving
// (serving.cpp) share, so that one formula prices them in both (DESIGN.md §2.1): the grouped expert GEMM, the host
// synchronisations of a dispatcher that sizes its all-to-all on the host, and the all-to-all buffer of a
// fixed-capacity (CUDA-graph) dispatch. The dispatch/combine transfer itself is moe_dispatch.cpp (training) and the
// serving pricer's collective over the same bytes.
#include <cstdint>
#include <string>

#include "gpuplan/core/units.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::model::detail {

/// The grouped expert GEMM (torch._grouped_mm, CUTLASS's grouped kernel for Hopper) against the batched GEMM of the
/// same per-expert shape that gemm_cost prices (batch = experts): t_grouped = a·t_batched + t₀. Measured on our H100
/// (data/validation/measured/h100-sxm5-80gb/moe_grouped_gemm.json, scripts/measure/moe_grouped_gemm.py): 147 bf16
/// points — 8 expert shapes (DeepSeek-V3 up/down and their TP8 shards, Mixtral, Qwen3-235B, Qwen3-30B up/down) ×
/// 8/32/128 experts × 1…4096 rows per expert — timed both as torch.bmm and as torch._grouped_mm; the least-|relative
/// error| line through them is a = 1.065, t₀ = 11 µs (median |error| 3.4%, worst 30% at 8 experts of 1 row, where the
/// grouped call is 1.5× bmm). t₀ is the grouped call's fixed work (the per-group problem descriptors built on the
/// device from the offsets, the group-aware tile scheduler's prologue); a is the grouped kernel's lower rate. The same
/// law for the dgrad and wgrad grouped GEMMs of training (moe_kernels_bwd.json: 0.96–1.04 of the forward's rate at
/// 1024 rows per expert, lower at 256) and for every GPU (an assumption: measured on Hopper only); fp8 grouped GEMMs
/// take it too (torch._scaled_grouped_mm measured 0.55–2.8× the bf16 bmm: too erratic to be a law).
inline constexpr double kGroupedGemmTimeFactor = 1.065;
inline constexpr double kGroupedGemmFixedSeconds = 11.0e-6;
OpCost grouped_gemm(OpCost batched);

/// Host time of an MoE dispatcher that synchronises with the host to size its all-to-all (one MoE layer, one
/// micro-batch), forward and backward. While the host waits for the split sizes the GPU's queue drains; the kernels
/// issued next then run at the host's pace, and at EP > 1 the ranks reach the all-to-all at different times.
/// Sync-free dispatchers (DeepEP; a fixed-capacity CUDA-graph dispatch) have none.
struct MoeHostSync {
  units::Seconds fwd{}, bwd{};
  int syncs = 0;     ///< host synchronisations per layer forward
  std::string what;  ///< for display: the mechanism and its measurement
};
/// `eager`: a PyTorch dispatcher of plain ops (ours: scripts/measure/moe_layer.py); else Megatron-Core's fused
/// all-to-all dispatcher. `fixed_splits`: the split sizes come from an expert capacity with padding (training's
/// moe_capacity_factor with moe_pad_to_capacity), known on the host without a copy.
MoeHostSync moe_host_sync(bool eager, int ep, wl::EpDispatch dispatch, bool fixed_splits);

/// Eager PyTorch kernels that move one element per thread with per-element index arithmetic — index_put of whole
/// rows (index_put_kernel_impl), and TensorIterator's non-vectorised elementwise_kernel<128, 4> that runs on strided
/// or broadcast operands (the SwiGLU's F.silu(h[:, :i]) and its product with h[:, i:], the combine's scale of each
/// row by its weight) — are bound by the SMs' instruction issue, not by HBM. Their rate in elements per SM per cycle
/// of the part's boost clock (GpuSpec::boost_clock_MHz; 1830 MHz for both parts below: at nvidia-smi's 1980 MHz
/// maximum the per-cycle figures would be 0.92×) is measured on our fixed-capacity MoE prefills' CUDA-only kernel
/// profiles (48 layers; the elements from the passes serving_layer.cpp prices): the H100 TP4/EP4 1 × 2048
/// (data/validation/measured/h100-sxm5-80gb/serve_moe_tp4_ep4_profile_graph_tp.json) and the H200 TP2/EP2
/// 1 × 1024/2048/4096 (h200-sxm-141gb/serve_tp2_ep2_qwen3_30b_a3b_prefill_profile_tp.json). Both parts have 132 SMs
/// and the H200 streams 1.43× faster, yet each class runs at the same absolute rate on both:
///  - index_put (one 16-bit element read and written each): H100 0.90, H200 0.92 / 0.86 / 0.87 elements / SM / cycle
///    (0.83–0.89 TB/s read + written: 0.30 of the H100's streaming rate, 0.20 of the H200's) → 0.89;
///  - the non-vectorised product of two bf16 operands (the gate product and the row scale, one kernel name in the
///    profiles): H100 1.28, H200 1.33 / 1.29 / 1.33; the strided SiLU: H100 1.25, H200 1.29 / 1.34 / 1.39 → 1.3.
/// Other GPUs: the same per-SM-cycle rates (an assumption: measured on Hopper only).
inline constexpr double kIndexPutElementsPerSmCycle = 0.89;
inline constexpr double kStridedElementwiseElementsPerSmCycle = 1.3;
/// A streaming kernel of `elements` elements issue-bound at `per_sm_cycle`: max(bytes / streaming rate, elements /
/// (SMs × boost clock × per_sm_cycle)) + the elementwise kernel's fixed cost. A GPU without an SM count or clock in
/// its data: the streaming rate alone.
OpCost issue_bound_cost(const std::string& name, units::Bytes bytes, units::Flops flops, double elements,
                        double per_sm_cycle, const Device& d);
/// index_put of whole rows: `bytes` read + written, each element of `element_bytes` read once and written once.
OpCost index_put_cost(const std::string& name, units::Bytes bytes, double element_bytes, const Device& d);

/// Kernels Transformer Engine runs for one quantisation pass (amax, scale, cast, ...) of a GroupedLinear operand over
/// `groups` local experts. GroupedLinear quantises its input in the forward and the output gradient in the backward
/// with `tex.split_quantize(x, m_splits, quantizers)`, one quantizer per expert (NVIDIA/TransformerEngine v2.7,
/// fedd9ddc, transformer_engine/pytorch/module/grouped_linear.py). split_quantize hands the splits to
/// multi_tensor_quantize_impl (pytorch/csrc/extensions/cast.cpp), whose one fused kernel (nvte_multi_cast_transpose)
/// covers only delayed scaling; every other recipe quantises "individually", expert by expert — for current scaling
/// Float8CurrentScalingQuantizer::quantize_impl (pytorch/csrc/quantizer.cpp) runs nvte_compute_amax,
/// nvte_compute_scale_from_amax and nvte_quantize_v2 for each. So each pass is `groups` kernels over the same bytes
/// (delayed scaling: 1). NVFP4 has a grouped kernel (later releases) and is left at 1.
std::int64_t te_grouped_quant_kernels(wl::QuantRecipe r, std::int64_t groups);

/// A streaming op run as `kernels` kernels over the same bytes (one per expert): the bytes' time once, the kernel's
/// fixed cost (kernel_fixed, elementwise) `kernels` times.
OpCost split_into_kernels(OpCost c, std::int64_t kernels, const Device& d);

/// The small kernels Megatron-Core's TopKRouter launches per MoE layer and micro-batch in training, beyond its gating
/// GEMM (priced as a GEMM), counted from NVIDIA/Megatron-LM core_v0.14.0 (23e00ed0963c)
/// megatron/core/transformer/moe/router.py (TopKRouter.routing, _apply_aux_loss, attach_and_log_load_balancing_loss)
/// and moe_utils.py (topk_routing_with_score_function, group_limited_topk, compute_routing_scores_for_aux_loss,
/// switch_load_balancing_loss_func, apply_router_token_dropping, MoEAuxLossAutoScaler), one PyTorch op = one kernel
/// (an out-of-place scatter is a copy and a scatter; views are free). Forward, unfused (moe_router_fusion off):
///  - scores and top-k: softmax scores: topk, softmax (2); sigmoid scores with the expert bias (DeepSeek-V3): sigmoid,
///    + bias, topk, gather, sum, + eps, divide, scaling factor (8); group-limited top-k replaces the one topk by
///    group_limited_topk's 9 (topk within groups, sum, topk of groups, zeros_like, scatter_, the mask's expand copy,
///    ~mask, masked_fill, topk): +8;
///  - routing_probs = zeros_like(...).scatter(...) (3) and routing_map = zeros_like(...).int().scatter(...).bool() (5);
///  - the load-balancing loss (aux_loss or seq_aux_loss): compute_routing_scores_for_aux_loss (softmax: softmax, topk
///    and the map's 5 = 7; sigmoid: sigmoid, sum, + eps, divide, topk and 5 = 10), routing_map.sum(dim=0) (1), its
///    all-reduce over TP×CP when that group is larger than 1 (1), switch_load_balancing_loss_func (probs.sum, multiply,
///    sum, scale: 4), the tracker's aux_loss / coeff and += (2);
///  - with the expert bias, local_tokens_per_expert += routing_map.sum(dim=0) (2);
///  - token dropping (apply_router_token_dropping): topk over the tokens, zeros_like, scatter (2), bool, probs × mask
///    (6), and logical_and with the routing map when not padded (7).
/// Backward, unfused: the scatter's gather, softmax backward, topk's scatter into zeros (softmax: 4; sigmoid: the
/// gather's zeros + scatter_add, the divide's two gradients, the scale, sigmoid backward: 8); the aux loss through
/// MoEAuxLossAutoScaler (ones_like · scale: 2), the loss's products and the broadcast sum (3) and its score function
/// (softmax 1, sigmoid 4); the logits' two gradients summed (1); token dropping's mask product (1).
/// Fused (moe_router_fusion, Transformer Engine >= 2.6 fused_topk_with_score_function,
/// fused_compute_score_for_moe_aux_loss, fused_moe_aux_loss): the score function, expert bias, group-limited top-k and
/// scaling in one kernel each way; the aux loss's scores one kernel each way, routing_map.sum, the all-reduce, the
/// fused loss one kernel each way, the tracker's 2, the auto-scaler's 2 and the logits' gradient sum; the expert-bias
/// counts and token dropping as unfused. Not counted: the z-loss (moe_z_loss_coeff, off in the recipes gpuplan maps),
/// the expert-bias update (once per step, in finalize_model_grads), dtype casts of the logits (moe_router_dtype).
struct RouterKernels {
  int fwd = 0, bwd = 0;
};
RouterKernels megatron_router_kernels(bool sigmoid_with_bias, bool group_limited, bool fused, bool token_drop,
                                      bool pad_to_capacity, int tp_cp);

/// Token-expert rows one GPU sends in the dispatch of T tokens (top-k) over an EP group of `ep`: the balanced share
/// T·k/ep when the split sizes are exchanged first; with a fixed-capacity dispatch (all-to-all inside a CUDA graph,
/// whose splits are fixed when it is captured) every destination gets the worst case, the rank's T/ep tokens × k
/// slots, so ep × (T/ep)·k = T·k rows travel whatever the routing.
double moe_dispatch_rows(double T, double k, int ep, bool fixed_capacity);

}  // namespace gpuplan::model::detail
