#pragma once
// How close real kernels get to the datasheet peaks. Accuracy comes from measurement (DESIGN.md §9): these are
// measured ceilings from published microbenchmarks, one row per GPU, plus a physical shape model (tile and wave
// quantization) for GEMMs. A calibration profile (the calibration milestone) replaces the row for its GPU.
#include <array>
#include <optional>
#include <string>

#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"

namespace gpuplan::model {

/// How fused attention's efficiency moves with the shape (ops.cpp attention_cost); the efficiency rows hold η at the
/// reference shape d = 128, s = 4096, causal.
/// - Sequence length: each 128-row query tile costs c key-tile iterations on top of its k (prologue, softmax
///   normalisation and epilogue; backward also the dQ accumulation and the dK/dV writes), so η ∝ k/(k + c), against
///   the reference k = 16.5. c fitted to our H100 torch-SDPA sweep at d = 128, causal, s = 1K–16K
///   (data/validation/measured/h100-sxm5-80gb/attention_sdpa.json); the law carries to d = 64, to non-causal and to
///   the H200 sweep within ±14% (a flat η misses those points by up to 58%).
/// - Head dim: the tensor-core work per tile grows with d against a fixed per-tile cost, η ∝ d/(d + d₀); d₀ is the
///   median over the same sweep's ten (s, causal) pairs of the d = 64 / d = 128 ratio (the H200 sweep gives the same
///   values within 4).
/// - Dropout on the attention probabilities (in-kernel Philox random numbers and masking): an added time per score
///   element that does not depend on the head dim, the sequence or causality, expressed as score elements per SM per
///   cycle of the data's boost clock so that SM count and clock carry it to other parts. Our H100 sweep of torch SDPA
///   with dropout_p 0.1 against 0 (d = 64 and 128, causal and not, s = 2K-8K; data/validation/measured/
///   h100-sxm5-80gb/attention_sdpa_dropout.json), median over the 12 pairs: cuDNN 1.18e12 elements/s forward
///   (0.73-0.93 ps each) and 2.25e12 backward; FA2 3.79e12 and 2.75e12. That is ×2.0-2.6 the cuDNN forward without
///   dropout, ×1.1-1.3 its backward (FA2: ×1.1-1.3 and ×1.05-1.17).
struct AttentionTileCost {
  double fwd = 0.0;     ///< key-tile iterations of fixed cost per query tile, forward
  double bwd = 0.0;     ///< the same, backward
  double d0_fwd = 0.0;  ///< head-dim constant of η ∝ d/(d + d₀), forward
  double d0_bwd = 0.0;  ///< the same, backward
  double dropout_fwd = 0.0;  ///< score elements per SM per boost-clock cycle of dropout's added cost, forward
  double dropout_bwd = 0.0;  ///< the same, backward
};
inline constexpr AttentionTileCost kFusedAttentionTileCost{1.5, 3.3, 66.0, 34.0, 4.87, 9.32};  ///< cuDNN (Hopper fused)
inline constexpr AttentionTileCost kFa2AttentionTileCost{0.9, 4.3, 18.0, 10.0, 15.7, 11.4};    ///< FlashAttention-2
/// FlashAttention-1's rate (flash-attn <= 1.0.x and its Triton port) as a fraction of FlashAttention-2's on the same
/// GPU: Dao 2023, "FlashAttention-2" (arXiv:2307.08691), abstract: "around 2x speedup compared to FlashAttention"
/// (A100; FA1 "reaching only 25-40% of the theoretical maximum FLOPs/s", FA2 50-73%). Taken on other GPUs as well.
inline constexpr double kFa1RateOfFa2 = 0.5;
/// Key tiles (128 wide) per query tile: as many as the FLOP count gives each query (s_kv, or s_kv/2 when causal),
/// plus the half-masked diagonal tile when causal.
constexpr double attention_key_tiles(double s_kv, bool causal) {
  const double k = (causal ? s_kv / 2.0 : s_kv) / 128.0 + (causal ? 0.5 : 0.0);
  return k > 1.0 ? k : 1.0;
}
inline constexpr double kAttentionReferenceKeyTiles = attention_key_tiles(4096.0, true);  ///< the rows' shape: 16.5

/// How a GEMM's efficiency moves with its reduction length K (ops.cpp gemm_cost). Each output tile runs K/k_t
/// main-loop iterations (k_t = 128 bytes of K: 64 bf16 or 128 fp8 elements) plus a fixed cost of c iterations that
/// do not scale with K (filling the operand pipeline before the first MMA, the part of the epilogue the next tile's
/// main loop does not hide), so η ∝ k/(k + c), k = K/k_t (per split under split-K). The ceilings (gemm_bf16, gemm_fp8)
/// are at the reference K = 8192. c is fitted by `gpuplan calibrate fit` with `gpuplan-bench depth` among the samples
/// (K = 256 .. 32768 at 8192 × 8192 and 16384 × 2048 outputs): H100 bf16 1.8 and fp8 2.1 iterations (the built-in
/// value, efficiency.cpp), H200 2.4 and 2.2. On the depth sweeps alone a flat η misses by about 12% rms, the law by 5%.
inline constexpr double kGemmReferenceDepth = 8192.0;
inline constexpr double kGemmDepthBytes = 128.0;  ///< bytes of K per main-loop iteration (k_t × element bytes)

/// How a GEMM's leading dimensions change the kernel class (ops.cpp gemm_cost). In the row-major layouts frameworks
/// use (A[m×k]·B[k×n] and nn.Linear's X[m×k]·W[n×k]ᵀ) the leading dimensions are k and n, never m. cuBLAS/cuBLASLt's
/// fast kernels (TMA and wgmma on Hopper, cp.async of 16-byte vectors before it) need every leading dimension to be a
/// multiple of 16 bytes; otherwise the library falls back to kernels that load 8-, 4- or 2-byte pieces. Our H100
/// sweep (data/validation/measured/h100-sxm5-80gb/gemm_alignment.json: 4096³ with K, N or M at 4088…4104, bf16 and
/// fp16, torch.matmul and F.linear) gives, against the aligned neighbours 4088/4096/4104 of the same series:
/// - 4- or 8-byte aligned (an even 16-bit dimension not a multiple of 8): 0.368 of the aligned rate (median of 48
///   points; the 8-byte and 4-byte classes measure alike, 0.31-0.39);
/// - element-aligned only (an odd 16-bit dimension): 0.176 (64 points, 0.12-0.21; 5.4× slower at K = 4097);
/// - m at any value: no class change (≤ 4% beyond the tile padding), as the layouts say.
/// fp8 (cuBLASLt, torch._scaled_mm) and int8 (torch._int_mm) refuse such shapes outright: frameworks pad k and n to
/// 16 bytes, and the model prices the padded GEMM.
struct GemmAlignment {
  double vector = 1.0;   ///< fallback rate / aligned rate when the worst leading dimension is 4- or 8-byte aligned
  double element = 1.0;  ///< the same when it is only 2-byte (element) aligned
};
inline constexpr double kGemmAlignmentBytes = 16.0;  ///< what the fast kernel class needs of every leading dimension
inline constexpr GemmAlignment kHopperGemmAlignment{0.368, 0.176};  ///< the H100 sweep above

/// One output-tile shape a GEMM library can choose (ops.cpp gemm_cost prices every candidate and keeps the fastest,
/// as cuBLAS's heuristics do).
struct GemmTile {
  int m = 128, n = 128;
};
/// The candidate tiles: the reference 128×256 / 256×128 and 128×128 of the large kernels, 64-row tiles (a Hopper
/// warpgroup's wgmma is 64 rows), and 32- and 16-row ones: for small m the libraries swap the operands (Cᵀ = Bᵀ·Aᵀ) so
/// that m lies along the tile side whose instruction granularity is 8-16 (wgmma's n, mma.sync's m16). A smaller tile
/// re-reads more operand bytes per FLOP; the sweeps cannot tell the candidates' rates apart (any per-tile penalty
/// fits them worse), so a smaller tile is taken only where it gains more than kGemmTileMargin over a larger one.
inline constexpr std::array<GemmTile, 9> kGemmTiles{
    {{128, 256}, {256, 128}, {128, 128}, {64, 256}, {64, 128}, {32, 256}, {32, 128}, {16, 256}, {16, 128}}};
inline constexpr double kGemmTileMargin = 0.01;

/// Fixed cost per kernel by kernel class (issue #27): a kernel's time is its roofline time plus its class's fixed cost.
/// Inside a replayed CUDA graph the cost is the kernel's ramp, tail and the replay gap, and it differs by class
/// (H200, data/validation/measured/h200-sxm-141gb/kernel_class_cost.json, graphed decode steps): a dense GEMM call
/// 4.0-5.1 µs beyond its bytes (cuBLAS's split-K reduce inside the call), PyTorch's flash decode (split-KV pass and
/// its combine) 10.7-10.8, a single fused attention kernel (cuDNN's SDPA decode kernel) 4.2-5.4, every other small
/// kernel 2.4, and a norm the latency of its row (one block per row). 0 = not measured.
struct KernelClassCosts {
  units::Seconds gemm{};         ///< a dense GEMM call (its split-K reduce inside; the batched GEMM of a grouped one)
  units::Seconds attention{};    ///< a split-KV decode attention call: the split pass and its combine kernel
  /// One fused attention kernel without a combine pass: prefill kernels, engines' decode kernels (cuDNN-type);
  /// 0: as `attention`.
  units::Seconds attention_fused{};
  units::Seconds elementwise{};  ///< every other kernel: elementwise, routing, scans, copies
  /// A norm kernel (one block per row): norm + row × norm_per_element, the latency of one row of that many elements;
  /// 0: as `elementwise`.
  units::Seconds norm{};
  units::Seconds norm_per_element{};
  [[nodiscard]] bool measured() const { return gemm.raw() > 0 && attention.raw() > 0 && elementwise.raw() > 0; }
};

struct EfficiencyProfile {
  std::string gpu_id;
  double gemm_bf16 = 0.0;      ///< max achievable matmul / dense peak, bf16 (MAMF)
  double gemm_fp8 = 0.0;       ///< same for fp8 (0 = unknown: falls back to gemm_bf16)
  double fp8_split_accumulation = 1.0;  ///< fp8 GEMM rate with fast accumulation off / with it (1 = not measured)
  double hbm = 0.0;            ///< achieved streaming bandwidth / datasheet bandwidth (BabelStream copy/triad)
  double gemm_hbm = 0.0;       ///< bandwidth of memory-bound GEMMs (decode: weights streamed once) / datasheet; 0 = hbm
  double attention_fwd = 0.0;  ///< flash-attention forward TFLOP/s / dense peak
  double attention_bwd = 0.0;  ///< flash-attention backward TFLOP/s / dense peak
  double attention_fwd_fa2 = 0.0;  ///< FlashAttention-2 forward (older stacks on Hopper; = attention_fwd on Ampere)
  double attention_bwd_fa2 = 0.0;
  AttentionTileCost attention_tile = kFusedAttentionTileCost;  ///< the sequence-length law of attention_fwd/_bwd's kernel
  /// Compression compute paths (compression.hpp), each 0 when not measured on this part (hw::EfficiencyRow):
  double gemm_int8 = 0.0;       ///< int8 GEMM rate / dense int8 peak (0: the bf16 ceiling, stated)
  double gemm_sparse24 = 0.0;   ///< 2:4-sparse GEMM rate (dense-equivalent FLOPs) / sparse peak (0: priced dense)
  double gemm_w4a16 = 0.0;      ///< weight-only (dequantising) GEMM rate at compute-bound shapes / dense 16-bit peak
  double gemm_w4a16_hbm = 0.0;  ///< the same kernel's bandwidth at memory-bound shapes / memory bandwidth
  double gemm_depth_bf16 = 0.0;  ///< fixed cost per output tile in main-loop iterations, 16-bit GEMMs (0: no K law)
  double gemm_depth_fp8 = 0.0;   ///< the same for fp8 (and fp4) GEMMs
  int tile_m = 128;            ///< GEMM output tile the library typically picks for large bf16 GEMMs (the reference)
  int tile_n = 128;
  /// Whether the GEMM library splits the main loop's iterations evenly over the SMs (persistent, stream-K kernels:
  /// no wave quantisation, a tile's k-range may be shared by two SMs) and picks among kGemmTiles; false: whole tiles
  /// of tile_m × tile_n in waves, split-K when there are fewer tiles than SMs. Our H100 staircase sweep
  /// (gemm_staircase.json, F.linear M×N×K for M = 1…1024 step 8 at the Llama-2-7B layer shapes) rises smoothly with M
  /// where whole waves of 128×256 tiles step every 128 rows: over M ≥ 192 the waves miss by 25% (median |error|), the
  /// decomposition by 7.5% (8% with the level taken out); the n = 4097…4104 points of the alignment sweep lose 2-4%,
  /// not the wave cliff's 25%. It is OFF in every built-in row for now: the rows' GEMM ceilings (gemm_bf16/fp8) were
  /// derived from whole kernels' achieved rates under the wave model, so switching the shape model alone makes
  /// training and serving 1-3% faster and moved the validation the wrong way (published training median |error|
  /// 16.2% -> 17.8%, our H100 steps 0.33% -> 1.3%, published inference 29.8% -> 40.1%, most on decode-heavy
  /// cases, whose small-m GEMMs it prices faster than the whole-tile padding did). Re-deriving the ceilings under it,
  /// and a measurement of small-m decode GEMMs, come first.
  bool stream_k = false;
  GemmAlignment gemm_alignment{};  ///< leading-dimension kernel classes (1 = no penalty known)
  units::Seconds kernel_launch{};  ///< per-kernel fixed cost on the stream (launch + tail), measured or stated
  units::Seconds graph_kernel{};   ///< per-kernel cost inside a replayed CUDA graph (0 = not measured)
  units::Seconds eager_launch{};   ///< back-to-back eager launch interval of an empty kernel (0 = not measured)
  /// Per-class fixed costs inside a replayed CUDA graph at this profile's rates: the data row's (measured.json
  /// graph_*_us), the calibration's own GEMM and streaming fits where it has them. All 0: not measured.
  KernelClassCosts graph_class{};
  /// The per-class costs in force (apply_launch_costs, serving.hpp: CUDA graphs with graph_class measured); all 0:
  /// every kernel pays kernel_launch. kernel_fixed (ops.hpp) reads it.
  KernelClassCosts launch_class{};
  /// Communication beside compute, measured by the collectives bench's overlap items (0 = not measured: the model
  /// then states its assumption, 16 NCCL channels' share of the SMs, and no wait).
  double comm_compute_loss = 0.0;   ///< fraction of GEMM throughput lost while a collective runs beside it
  double comm_wait_kernels = 0.0;   ///< extra time per collective call beside compute, in compute-kernel durations
  /// Sustained / swept GEMM throughput (calibration profile's sustained bench; 1 = not measured). Training applies it
  /// to the GEMM ceilings: a step keeps the tensor cores busy for as long as the run lasts, the sweep for ~40 ms.
  double gemm_sustained = 1.0;
  /// The same for fp8 GEMMs, measured apart (fp8 draws more power per second of tensor-core work); unset: fp8 GEMMs
  /// take gemm_sustained.
  std::optional<double> gemm_sustained_fp8;
  std::string origin;          ///< citations of the numbers above
  bool calibrated = false;     ///< true when it comes from our own calibration profile
};

/// The built-in default for a GPU: its own measured row when one exists, else its family's, else a stated generic
/// assumption (origin says which).
EfficiencyProfile default_efficiency(const hw::GpuSpec& gpu);

/// GEMM efficiency ceiling for a precision (fp8 → gemm_fp8 when known; int8 → gemm_int8 when measured, else the bf16
/// ceiling), at the reference K.
double gemm_ceiling(const EfficiencyProfile& e, hw::Precision p);

/// The depth law's c for a precision's GEMMs: sub-16-bit operands (fp8, int8, fp6, fp4) take the fp8 sweep's, 16- and
/// 32-bit ones the bf16 sweep's.
double& gemm_depth_of(EfficiencyProfile& e, hw::Precision p);
double gemm_depth_of(const EfficiencyProfile& e, hw::Precision p);

/// Main-loop iterations of a tile that reduces over k_per_tile elements of a precision: k = K / (128 B / element bytes),
/// at least 1.
double gemm_depth_iterations(hw::Precision p, double k_per_tile);

/// The depth law's factor for a GEMM whose tiles each reduce over k_per_tile elements: [k/(k + c)] / [k_ref/(k_ref + c)]
/// (1 when the profile has no c for the precision).
double gemm_depth_factor(const EfficiencyProfile& e, hw::Precision p, double k_per_tile);

}  // namespace gpuplan::model
