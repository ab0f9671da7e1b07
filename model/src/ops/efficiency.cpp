#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/model/gemm_fp16.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace gpuplan::model {
namespace {

using units::microseconds;

// The measured ceilings of each part (GEMM, HBM, fused and FA2 attention, GEMM tile) are data:
// data/hardware/efficiency/measured.json, each row with its sources, resolved onto the GPUs when the database loads
// (hw::GpuSpec::efficiency: the part's own row, else its family's measured member's). The constants below apply to
// every part.
//  FP8 SPLIT ACCUMULATION (Transformer Engine's dgrad/wgrad GEMMs run with cuBLASLt's fast accumulation off): our
//          H100 fp8 sweeps, twice each way (data/validation/measured/h100-sxm5-80gb/gemm-fp8-{fast,split}-*.json,
//          gpuplan-bench gemm --fp8-split-accumulation): over the 47 shapes of at least 68 GFLOP the split rate is
//          0.947 of the fast one (median; 0.84-1.09, where the same sweep repeated moves by up to ±10% per shape).
//          H200: as H100 (same die); Blackwell: as Hopper (assumption).
//  GEMM SHAPE (efficiency.hpp: GemmAlignment, stream_k, kGemmTiles): our H100 sweeps of 2026-11-27
//          (data/validation/measured/h100-sxm5-80gb/gemm_alignment.json, gemm_staircase.json; torch 2.11, cuBLAS of
//          CUDA 13.0). Alignment: a 16-bit GEMM whose worst leading dimension is 4- or 8-byte aligned runs at 0.368 of
//          its aligned neighbours (median of 48 points, 0.31-0.39), an element-aligned one at 0.176 (64 points,
//          0.12-0.21); fp8 and int8 refuse unaligned k and n. Every part takes these (assumption outside H100/H200,
//          which share the die). Staircase: F.linear at M = 1…1024 rises smoothly with M (stream-K), not in 128-row
//          steps; the decomposition that follows it is in ops.cpp but off in these rows (efficiency.hpp, stream_k).
//          int8: the 4096³ torch._int_mm of that sweep reached 130 TOP/s; the compressed-GEMM sweep of the same day
//          (compress_gemm.json, B column-major as nn.Linear holds it) 0.418 of the dense int8 peak at the Llama-2-7B
//          shapes: the row's gemm_int8 (measured.json, H100-COMPRESS). A part without it keeps the bf16 ceiling.
//  Launch: ~5 µs per kernel including tail effects, the NVIDIA CUDA best-practices figure for launch latency
//          (assumption until calibrated).
//  GEMM DEPTH (efficiency.hpp): c = 1.8 (bf16) and 2.1 (fp8) main-loop iterations per output tile: `gpuplan
//          calibrate fit` of our H100 samples (data/calibration/h100-sxm5-80gb/profile.json: the suites and sweeps
//          with two depth sweeps, samples-depth-*.json). H200 (same die): as H100; its own depth sweeps, out of
//          sample, fit 2.4 and 2.2 (tests/calibrate). Blackwell, Ampere and the rest: as Hopper (assumption: no sweep). The rows'
//          GEMM ceilings are taken at K = 8192: MAMF and the cuBLASLt sweeps peak at K = 8192-16384, where the law
//          moves η by under 1%; the H100 training-step profiles (K = 2048-128256) give 0.757 at K = 8192 under the
//          law (0.752 as measured), and their sustained/burst ratio 0.757/0.803 carries MAMF's fp8 0.709 to 0.668.
//  COLLECTIVE BESIDE A GEMM (comm_wait_kernels): the collectives bench's overlap items on two H100 hosts (2 and 4 GPUs,
//          data/calibration/h100-sxm5-80gb/samples-overlap-{2,4}gpu-2026-11-26.json) and two H200 hosts
//          (data/calibration/h200-sxm-141gb/samples-overlap-{2,4}gpu-2026-11-22.json): a 32 or 256 MiB all-reduce,
//          reduce-scatter or all-gather on its NCCL stream beside a loop of 0.83 ms bf16 GEMMs takes longer per call
//          by 0.36-1.97 GEMM durations, independent of its size — a GEMM grid holds every SM, so the collective's kernel
//          starts only when the kernel in flight drains. Median of the 21 accepted items of both parts: 0.864 (H100
//          alone 0.959, H200 alone 0.819; the calibration profiles keep their own). Every part takes it: the cause is
//          the CUDA block scheduler's (no pre-emption of a running grid), not a Hopper property — an assumption
//          outside H100/H200.
//  FP16 AGAINST BF16 (gemm_fp16.hpp): `gpuplan calibrate fit` of our H100 GEMM sweep gives fp16 a
//          ceiling of 0.7076 against bf16's 0.7366 over the same shapes (data/calibration/h100-sxm5-80gb/profile.json:
//          80 and 200 points), 0.961; our two CUDA-graph sweeps of 2026-11-27 agree (gemm_graph_staircase.json: fp16
//          takes 1.037-1.047× the bf16 time at M ≥ 512 on all four Llama-2-7B layer shapes, 1.000 at M ≤ 64 where the
//          weights' streaming bounds both; gemm_graph_alignment.json: 1.034 on the aligned 4096³ points; the sweeps'
//          nvidia-smi samples show the power cap active; our kernel probe, gemm_kernel_probe.json: 0.955-0.967 in rate
//          and clock at the 700 W cap). H200: its own calibration fits give 0.7293 / 0.7578 = 0.962 (out of sample).
//          With this term in the model the fitter's fp16 ceilings come out at bf16's level (H100 0.7363, H200
//          0.7589: profile.json). Every part with fp8 tensor cores takes it (Blackwell: an assumption); older parts 1
//          (not measured).
constexpr double kFp8SplitAccumulation = 0.947;
constexpr double kFp16TensorRate = 0.961;
constexpr double kCommWaitKernels = 0.864;
constexpr double kGemmDepthBf16 = 1.8;
constexpr double kGemmDepthFp8 = 2.1;

EfficiencyProfile from_row(const hw::EfficiencyRow& r, const std::string& gpu_id, std::string_view via) {
  EfficiencyProfile e;
  e.gpu_id = gpu_id;
  e.gemm_bf16 = r.gemm_bf16;
  e.gemm_fp8 = r.gemm_fp8;
  // Hopper's measured split-accumulation rate for every GPU with fp8 GEMMs (Blackwell: an assumption, no Blackwell
  // split/fast sweep published); no fp8 GEMMs, no split accumulation.
  e.fp8_split_accumulation = r.gemm_fp8 > 0.0 ? kFp8SplitAccumulation : 1.0;
  e.hbm = r.hbm;
  e.attention_fwd = r.attention_fwd;
  e.attention_bwd = r.attention_bwd;
  e.attention_fwd_fa2 = r.fa2_fwd;
  e.attention_bwd_fa2 = r.fa2_bwd;
  // A row whose fused attention is FlashAttention-2 itself (Ampere: no Hopper kernels) takes FA2's sequence law.
  e.attention_tile =
      r.attention_fwd == r.fa2_fwd && r.attention_bwd == r.fa2_bwd ? kFa2AttentionTileCost : kFusedAttentionTileCost;
  // A row swept over s carries its own fused sequence law (Blackwell's cuDNN: a fixed cost of several times
  // Hopper's key tiles per query tile); the head-dim and dropout terms stay the family's.
  if (r.attention_tile_fwd > 0.0) e.attention_tile.fwd = r.attention_tile_fwd;
  if (r.attention_tile_bwd > 0.0) e.attention_tile.bwd = r.attention_tile_bwd;
  e.gemm_int8 = r.gemm_int8;
  e.gemm_sparse24 = r.gemm_sparse24;
  e.gemm_w4a16 = r.gemm_w4a16;
  e.gemm_w4a16_hbm = r.gemm_w4a16_hbm;
  e.gemm_depth_bf16 = kGemmDepthBf16;
  e.gemm_depth_fp8 = kGemmDepthFp8;
  e.tile_m = r.tile_m;
  e.tile_n = r.tile_n;
  // GEMM shape effects (efficiency.hpp): the leading-dimension kernel classes, measured on our H100
  // (gemm_alignment.json), carried to every part as an assumption (cuBLAS has the same alignment fallbacks from Ampere
  // on; not measured elsewhere). The stream-K decomposition (EfficiencyProfile::stream_k) stays off: see there.
  e.gemm_alignment = kHopperGemmAlignment;
  e.kernel_launch = microseconds(5.0);
  // In-graph fixed cost per kernel class (the row's measured graph_*_us; 0 where not measured: serving then prices
  // every kernel at the plan's single cost, ServingPerfPlan::kernel_overhead_graph).
  e.graph_class.gemm = microseconds(r.graph_gemm_us);
  e.graph_class.attention = microseconds(r.graph_attention_us);
  e.graph_class.attention_fused = microseconds(r.graph_attention_fused_us);
  e.graph_class.elementwise = microseconds(r.graph_elementwise_us);
  e.graph_class.norm = microseconds(r.graph_norm_us);
  e.graph_class.norm_per_element = microseconds(r.graph_norm_ns_per_element * 1e-3);
  e.comm_wait_kernels = kCommWaitKernels;
  e.origin = std::string("built-in default (") + std::string(r.origin) + ")";
  if (!via.empty()) e.origin += "; " + std::string(via);
  return e;
}

}  // namespace

EfficiencyProfile default_efficiency(const hw::GpuSpec& gpu) {
  if (gpu.efficiency) return from_row(*gpu.efficiency, gpu.info.id, gpu.efficiency_via);
  // A part with no measured family member: a generic, stated assumption (80% GEMM, 85% HBM, 50% attention).
  hw::EfficiencyRow generic;
  generic.gemm_bf16 = 0.80;
  generic.hbm = 0.85;
  generic.attention_fwd = generic.fa2_fwd = 0.50;
  generic.attention_bwd = generic.fa2_bwd = 0.375;
  generic.origin = "generic assumption: no measurement for this family";
  return from_row(generic, gpu.info.id, "");
}

double gemm_ceiling(const EfficiencyProfile& e, hw::Precision p) {
  // fp4: no fp4 GEMM measurement yet; assumed to reach the fp8 fraction of its own (2×) peak — stated in
  // docs/serving.md.
  if ((p == hw::Precision::fp8 || p == hw::Precision::fp4) && e.gemm_fp8 > 0.0) return e.gemm_fp8;
  if (p == hw::Precision::int8 && e.gemm_int8 > 0.0) return e.gemm_int8;
  if (p == hw::Precision::fp16) return e.gemm_bf16 * gemm_fp16_rate(e);
  return e.gemm_bf16;
}

double gemm_fp16_rate(const EfficiencyProfile& e) { return e.gemm_fp8 > 0.0 ? kFp16TensorRate : 1.0; }

double& gemm_depth_of(EfficiencyProfile& e, hw::Precision p) {
  return hw::bytes_per_element(p) < 2.0 ? e.gemm_depth_fp8 : e.gemm_depth_bf16;
}
double gemm_depth_of(const EfficiencyProfile& e, hw::Precision p) {
  return hw::bytes_per_element(p) < 2.0 ? e.gemm_depth_fp8 : e.gemm_depth_bf16;
}

double gemm_depth_iterations(hw::Precision p, double k_per_tile) {
  return std::max(1.0, k_per_tile / (kGemmDepthBytes / hw::bytes_per_element(p)));
}

double gemm_depth_factor(const EfficiencyProfile& e, hw::Precision p, double k_per_tile) {
  const double c = gemm_depth_of(e, p);
  if (!(c > 0.0)) return 1.0;
  const double k = gemm_depth_iterations(p, k_per_tile), k_ref = gemm_depth_iterations(p, kGemmReferenceDepth);
  return (k / (k + c)) / (k_ref / (k_ref + c));
}

}  // namespace gpuplan::model
