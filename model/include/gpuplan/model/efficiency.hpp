#pragma once
// How close real kernels get to the datasheet peaks. Accuracy comes from measurement (DESIGN.md §9): these are
// measured ceilings from published microbenchmarks, one row per GPU, plus a physical shape model (tile and wave
// quantization) for GEMMs. A calibration profile (the calibration milestone) replaces the row for its GPU.
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
  double gemm_depth_bf16 = 0.0;  ///< fixed cost per output tile in main-loop iterations, 16-bit GEMMs (0: no K law)
  double gemm_depth_fp8 = 0.0;   ///< the same for fp8 (and fp4) GEMMs
  int tile_m = 128;            ///< GEMM output tile the library typically picks for large bf16 GEMMs
  int tile_n = 128;
  units::Seconds kernel_launch{};  ///< per-kernel fixed cost on the stream (launch + tail), measured or stated
  units::Seconds graph_kernel{};   ///< per-kernel cost inside a replayed CUDA graph (0 = not measured)
  units::Seconds eager_launch{};   ///< back-to-back eager launch interval of an empty kernel (0 = not measured)
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

/// GEMM efficiency ceiling for a precision (fp8 → gemm_fp8 when known), at the reference K.
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
