#pragma once
// Operator costs on one GPU (roofline): FLOPs, bytes moved, and time = max(FLOPs / effective compute,
// bytes / effective bandwidth) + a fixed per-kernel cost. Effective compute = dense peak × measured GEMM ceiling ×
// tile/wave utilisation of the shape; effective bandwidth = datasheet × measured streaming fraction.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::model {

/// host: time the GPU waits for the host (a dispatcher's synchronisations), not a kernel.
enum class OpClass { gemm, attention, elementwise, embedding, loss, optimizer, host };
std::string to_string(OpClass c);

enum class Bound { compute, memory, launch };
std::string to_string(Bound b);

struct OpCost {
  std::string name;
  OpClass cls = OpClass::gemm;
  units::Flops flops{};
  units::Bytes bytes{};
  units::Seconds time{};
  Bound bound = Bound::compute;
  double efficiency = 1.0;  ///< achieved FLOP/s ÷ dense peak for compute-bound ops (incl. shape utilisation)
  /// Kernels the same call launches beyond its own, priced inside its fixed cost: cuBLAS's split-K reduce
  /// (gemm_splits_k), flash decode's split-KV combine. Counted, not launched by the host.
  int extra_kernels = 0;
  [[nodiscard]] units::Intensity intensity() const { return flops / bytes; }
  [[nodiscard]] units::FlopRate achieved() const { return flops / time; }
};

/// The GPU as the op model sees it: peaks, bandwidth and the efficiency row.
struct Device {
  const hw::GpuSpec* gpu = nullptr;
  EfficiencyProfile eff;
  [[nodiscard]] units::FlopRate peak(hw::Precision p) const;  ///< dense peak; bf16 falls back to fp16 (V100)
  /// The rate streaming kernels reach: datasheet bandwidth × the measured streaming fraction η_hbm.
  [[nodiscard]] units::Bandwidth stream_bandwidth() const { return gpu->memory.bandwidth * eff.hbm; }
};
Device make_device(const hw::GpuSpec& gpu);
/// The fixed cost one kernel of class `c` pays on `d`, for every pricer (one place): its class's cost in force
/// (EfficiencyProfile::launch_class — gemm, attention, and every other class as elementwise) where the launch mode
/// set one, else the device's single per-kernel cost (kernel_launch).
units::Seconds kernel_fixed(const Device& d, OpClass c);
/// The fixed cost of a norm kernel over rows of `row` elements on `d` (RMSNorm / LayerNorm, one thread block per row):
/// under per-class costs the latency of one row, norm + row × norm_per_element (H200, inside graphed decode steps:
/// 6.0-6.5 µs at row = 4096, kernel_class_cost*.json, parts step); otherwise kernel_fixed(d, elementwise).
units::Seconds norm_fixed(const Device& d, std::int64_t row);
/// Whether cuBLAS splits K of an m × n × k GEMM (one matrix) and adds its splitKreduce kernel: m·n/k < 64 with
/// n ≥ 1024 and k ≥ n. From the H200's kernels: the staircase trace (docs/gemm-shapes.md, "Split-K": m·n/k < 64 at
/// 91 of 96 points, n 1024-8192) and the six decode GEMMs of kernel_class_cost.json at m = 1, split exactly where
/// k ≥ n (O and down projections; not QKV, gate/up or the 128-wide router). The heuristic is the library's, per GPU.
bool gemm_splits_k(std::int64_t m, std::int64_t n, std::int64_t k);
/// The device for sustained work — a training step, or an engine's back-to-back forward passes — with `eff` (a
/// calibration profile) when given: the GEMM ceilings at the sustained rate (gemm_sustained: 30 s of GEMMs under the
/// power cap vs the sweep's short bursts) and the attention ceilings of the kernel the plan names.
Device sustained_device(const hw::GpuSpec& gpu, const std::optional<EfficiencyProfile>& eff, wl::AttentionKernel attn);

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;  ///< independent GEMMs of the same shape in one launch (grouped/batched)
  double b_element_bytes = 0;  ///< bytes per element of B (the weights) when they are stored in another format than
                               ///< the compute precision (weight-only int4/int8, with group scales); 0 = same
  /// fp8 with cuBLASLt's fast accumulation off ("split accumulator": partial sums promoted to fp32 at intervals), as
  /// Transformer Engine runs its dgrad and wgrad GEMMs (_2X_ACC_DGRAD, _2X_ACC_WGRAD); its rate is
  /// EfficiencyProfile::fp8_split_accumulation of the fast-accumulation one.
  bool split_accumulation = false;
  /// 2:4 structured-sparse weights (cuSPARSELt / sparse tensor cores): the dense-equivalent 2·m·n·k FLOPs at the
  /// part's sparse peak × its measured sparse ceiling (EfficiencyProfile::gemm_sparse24); priced dense, with a note,
  /// where the part has no sparse peak or no measurement. B's bytes are b_element_bytes as given (the caller's
  /// compressed size: serving_memory.hpp weight_bytes_per_param).
  bool sparse24 = false;
};

/// C[m×n] = A[m×k]·B[k×n] (× batch): 2·m·n·k FLOPs; bytes = (m·k + k·n + m·n)·element bytes.
/// Utilisation with EfficiencyProfile::stream_k (off in the built-in rows): the tiles' main-loop iterations (128 B of k each) dealt evenly to the
/// SMs, u = m·n·batch·iters / (SMs · ⌈tiles·iters / SMs⌉ · tile_m · tile_n), the fastest of kGemmTiles; otherwise
/// whole tiles of tile_m × tile_n in waves, u = m·n·batch / (waves · SMs · tile_m · tile_n), waves =
/// ⌈tiles / SMs⌉. Leading dimensions k and n not 16-byte aligned: the fallback kernel class's rate
/// (EfficiencyProfile::gemm_alignment), or for 8-bit formats the padded shape.
/// Weight-only quantisation (B stored in fewer bytes than the compute precision: int4/int8 weights, 16-bit compute):
/// the kernel dequantises B in its main loop; where measured (EfficiencyProfile::gemm_w4a16, _hbm) its compute
/// ceiling and its bandwidth replace the plain GEMM's — compute-bound shapes gain nothing from the smaller weights.
OpCost gemm_cost(const std::string& name, const GemmShape& s, hw::Precision p, const Device& d,
                 Derivation* why = nullptr);

/// The precision of the output layer (LM head) GEMMs: 16-bit when the transformer's GEMMs are fp8 or fp4. Megatron-core's
/// output layer is its own ColumnParallelLinear, outside Transformer Engine's fp8 autocast, and serving engines
/// (TensorRT-LLM, vLLM) keep lm_head unquantised; attention's matmuls run in 16-bit too (FlashAttention's path).
hw::Precision sixteen_bit_of(hw::Precision compute);

/// A weight-gradient GEMM that accumulates into the gradient buffer in its epilogue (β = 1: Megatron-LM's
/// gradient_accumulation_fusion, Transformer Engine's fuse_wgrad_accumulation) instead of writing a fresh 16-bit
/// output: it reads and writes the buffer, 2·b_g bytes per weight element where a plain wgrad writes 2. The extra
/// traffic adds to the GEMM's time at the streaming rate, t += (2·b_g − 2)·elements / (BW·η_hbm): our H100
/// measurement of 39 bf16 and fp8 weight-gradient GEMMs accumulating into fp32 (K = 1K–8K tokens;
/// data/validation/measured/h100-sxm5-80gb/accumulate.json) finds the extra time 1.08× (median) that of the extra
/// bytes at the streaming rate: the epilogue does not hide under the mainloop; on the H200 (out of sample) 1.15×,
/// and the law predicts the 40 accumulating GEMMs with a median error of 4.9%. `weight_elements` = k·n·batch.
/// `separate_add` (TrainingPlan::fused_wgrad_accumulation false): the GEMM writes a fresh 16-bit gradient and a separate
/// elementwise kernel reads it and the buffer and writes the buffer, (2 + 2·b_g) bytes per element beyond the plain
/// wgrad's write, at the streaming rate, plus that kernel's fixed cost.
OpCost accumulating_wgrad(OpCost wgrad, double weight_elements, double grad_bytes, const Device& d,
                          bool separate_add = false);

/// Whether the plan's weight-gradient GEMMs accumulate into the gradient buffer (Megatron-style training: fused
/// kernels with its mixed precision; frozen LoRA bases have no weight gradient).
bool wgrad_accumulates(const wl::TrainingPlan& plan);

/// Fused (flash) attention over `batch_heads` = b·n_q heads with s_q queries and s_kv keys: forward FLOPs
/// 2·b·n_q·s_q·s_kv·(d_qk + d_v) (× ½ causal); backward = 2.5 × forward (FlashAttention-2, Dao 2023 §3.1: five
/// matmuls against two, softmax recomputed). Unfused attention: two batched GEMMs plus a softmax over the
/// materialised b·n_q·s_q·s_kv scores. `dropout`: training applies dropout to the attention probabilities; the fused
/// kernel then adds its measured random-number cost per score element (efficiency.hpp, AttentionTileCost); unfused,
/// dropout is a kernel of its own over the probabilities (read, write, 1-byte mask; the same back).
std::vector<OpCost> attention_cost(const std::string& name, std::int64_t batch_heads, std::int64_t s_q,
                                   std::int64_t s_kv, std::int64_t d_qk, std::int64_t d_v, bool causal, bool flash,
                                   bool backward, hw::Precision p, const Device& d, bool dropout = false);

/// Attention of `q_per_seq` new queries per sequence against a KV cache of `context` tokens (decode; speculative
/// verification), one kernel over `seqs` sequences and `heads` query heads of this GPU (flash-decoding): FLOPs
/// 2·seqs·q·heads·context·(d_qk + d_v); bytes = the cache it reads, seqs·context·kv_bytes_per_token (this GPU's
/// heads of one layer, with scales), + Q and O. Memory-bound except at large q·heads per KV head (MLA absorbed).
///
/// Tensor cores multiply whole tiles: the queries that share one KV head (q_per_seq × heads / kv_heads) fill
/// `tile_q` rows of an MMA tile, so the compute side runs ⌈rows / tile_q⌉ · tile_q / rows times the useful FLOPs
/// (tile quantisation, as for GEMMs; 0 = no padding).
/// `split_kv`: the kernel splits the context over blocks and a second kernel combines their partial results
/// (PyTorch's flash decode when the sequences × KV heads do not fill the SMs): the call counts two kernels and pays
/// the split-KV class's fixed cost (KernelClassCosts::attention); otherwise one fused kernel.
OpCost decode_attention_cost(const std::string& name, double seqs, std::int64_t q_per_seq, std::int64_t heads,
                             std::int64_t kv_heads, std::int64_t context, std::int64_t d_qk, std::int64_t d_v,
                             units::Bytes kv_bytes_per_token, std::int64_t tile_q, hw::Precision p, const Device& d,
                             bool split_kv = false);

/// The Mamba-2 mixer core of one layer on one GPU (the graph's SSM op, `heads` of them on this GPU after TP) over
/// `tokens` tokens in sequences of `seq` tokens, chunked (training forward, prefill): the depthwise conv1d
/// (2·d_conv MACs per channel and token) and the SSD scan (flops.hpp ssd_scan_flops_per_token, chunk
/// min(Q, seq)), run on tensor cores in the 16-bit compute type; it reads x, B, C, dt and z and writes y
/// (2·d_inner + 2·n_g·N + n_h + d_inner elements per token) and the fp32 chunk states (2·n_h·P·N·4 B per chunk).
/// A roofline bound (dense peak, streaming bandwidth; no measured SSD efficiency yet). `backward`: 2 × the
/// forward's FLOPs and bytes (the scan's backward runs the same matmuls against the output gradient twice).
OpCost ssd_scan_cost(const std::string& name, std::int64_t heads, std::int64_t head_dim, std::int64_t state,
                     std::int64_t groups, std::int64_t chunk, std::int64_t conv_channels, std::int64_t conv_kernel,
                     double tokens, std::int64_t seq, double act_bytes, bool backward, hw::Precision p,
                     const Device& d);

/// One decode step of a Mamba-2 layer for `seqs` sequences on one GPU: each reads and writes its conv state and its
/// SSM state (`state_bytes` per sequence), FLOPs per token 2·d_conv·channels (conv) + 5·n_h·P·N (decay, outer
/// product x·Bᵀ added, output C·h: Dao & Gu 2024, arXiv:2405.21060 §3 recurrent form). Memory-bound.
OpCost ssm_state_update_cost(const std::string& name, double seqs, std::int64_t heads, std::int64_t head_dim,
                             std::int64_t state, std::int64_t conv_channels, std::int64_t conv_kernel,
                             units::Bytes state_bytes, double act_bytes, const Device& d);

/// The gated DeltaNet mixer core of one layer on one GPU (`heads` value heads on this GPU after TP) over `tokens`
/// tokens in sequences of `seq` tokens, chunked (training forward, prefill): the depthwise conv1d (2·d_conv MACs per
/// channel and token) and the chunked gated delta rule (flops.hpp gated_delta_flops_per_token, chunk min(C, seq)) on
/// tensor cores in the 16-bit compute type; it reads q, k, v, z, β, a and writes the output (conv channels + 2·n_v·d_v
/// + 2·n_v elements per token) and the fp32 chunk states (2·n_v·d_k·d_v·4 B per chunk). A roofline bound, as
/// ssd_scan_cost; `backward` 2 × the forward.
OpCost gated_delta_scan_cost(const std::string& name, std::int64_t heads, std::int64_t key_dim,
                             std::int64_t value_dim, std::int64_t chunk, std::int64_t conv_channels,
                             std::int64_t conv_kernel, double tokens, std::int64_t seq, double act_bytes,
                             bool backward, hw::Precision p, const Device& d);

/// One decode step of a gated DeltaNet layer for `seqs` sequences on one GPU (the recurrent form, transformers'
/// torch_recurrent_gated_delta_rule / fla's fused_recurrent_gated_delta_rule): each reads and writes its conv state
/// and its d_k × d_v state per value head (`state_bytes` per sequence); FLOPs per token 2·d_conv·channels (conv) +
/// 7·n_v·d_k·d_v (decay, Sᵀk, the rank-1 delta update, Sᵀq). Memory-bound.
OpCost gated_delta_state_update_cost(const std::string& name, double seqs, std::int64_t heads, std::int64_t key_dim,
                                     std::int64_t value_dim, std::int64_t conv_channels, std::int64_t conv_kernel,
                                     units::Bytes state_bytes, double act_bytes, const Device& d);

/// DeepSeek sparse attention's lightning indexer scoring `pairs` (query, key) pairs on one GPU: each pair costs
/// 2·n_i·d_i FLOPs (n_i heads of d_i, FP8: DeepGEMM's fp8_mqa_logits; the ReLU and the weighted head sum are
/// elementwise) and its fp32 logit is written and read back by the top-k (8 B); the queries (n_i·d_i FP8 bytes each)
/// and the keys it reads (`key_reads` × `key_bytes`, the FP8 key cache with its scale) stream once. On fp8 tensor
/// cores where the GPU has them (Device::peak falls back to bf16). `backward`: 2 × (the indexer's KL-loss training).
OpCost indexer_cost(const std::string& name, double queries, double pairs, std::int64_t heads, std::int64_t head_dim,
                    double key_reads, double key_bytes, bool backward, const Device& d);

/// A memory-bound op that streams `bytes` and does `flops` (norms, activations, residuals, rotary, softmax, loss).
OpCost streaming_cost(const std::string& name, OpClass cls, units::Bytes bytes, units::Flops flops, const Device& d);
/// A norm kernel (RMSNorm / LayerNorm) over rows of `row` elements: streaming_cost with the norm's fixed cost
/// (norm_fixed: the latency of one row under per-class in-graph costs).
OpCost norm_cost(const std::string& name, units::Bytes bytes, units::Flops flops, std::int64_t row, const Device& d);

}  // namespace gpuplan::model
