#include "gpuplan/model/efficiency.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace gpuplan::model {
namespace {

using units::microseconds;

// Measured ceilings. Sources (all in ../shared/validation/dev_cases.json, group E, each with its primary source):
//  MAMF  = stas00/ml-engineering compute/accelerator/README.md "Maximum Achievable Matmul FLOPS" (mamf-finder.py):
//          A100 SXM 271.2/312 = 0.869, H100 SXM 794.5/989 = 0.803, GH200 828.6/989 = 0.838, B200 1745/2250 = 0.776,
//          B300 1769/2250 = 0.786, GB200 1822/2500 = 0.729, MI300X 668.4/1300 = 0.514, MI325X 784.9/1300 = 0.604,
//          MI355X 1565/2300 = 0.680; fp8: H100 0.709, H200 0.734, B200 0.763, B300 0.745, GB200 0.723.
//  SUSTAINED GEMM (preferred where measured): MAMF searches for the best shape over short bursts; training runs
//          GEMMs back to back under the power cap. H100: our own kernel profiles of two training steps give
//          232.8 TFLOP of GEMMs in 312.8 ms = 744 TFLOP/s = 0.752 of 989.4 with SM clocks at 1665/1935 MHz median
//          (data/validation/measured/h100-sxm5-80gb/profile_*.json), 0.757 at K = 8192 under the depth law below;
//          H200 (same GH100 die and 700 W cap) uses it too.
//          FP8 on H100/H200: MAMF fp8 0.709 × our measured sustained/burst ratio for bf16 on the same GPU
//          (0.757 / 0.803) = 0.668 — the same power cap throttles both; Azure's cuBLASLt fp8 16384³ gives 0.696
//          in a short run, 8192³ 0.652.
//          A100: cuBLASLt 16384³ sustained 256.5/312 = 0.822 (Azure ND A100 v4 sweep) instead of MAMF's 0.869.
//  HBM   = Azure/AI-benchmarking-guide BabelStream triad: A100 80GB 1.70/2.039 = 0.834, H100 2.97/3.35 = 0.887.
//  ATTN  = Azure/AI-benchmarking-guide flash-attention 2: A100 179.5/312 = 0.575 (fwd, d=64, s=8192),
//          H100 327.9/989 = 0.332 is FA2 on Hopper. Current stacks use Hopper-native fused attention (cuDNN's, which
//          Transformer Engine's FusedAttention and PyTorch's cuDNN SDPA backend run, or FA3): our own measurement of
//          torch SDPA's cuDNN backend (cuDNN 9.19; scripts/measure/attention_sdpa.py, data/validation/measured/
//          <gpu>/attention_sdpa.json), d = 128, causal, s = 4096, 32 heads, 32K tokens per call, after a 10 s load:
//          H100 fwd 614.5 TFLOP/s = 0.621, bwd 440.4 = 0.445; H200 0.611 and 0.440 (fwd 0.49-0.62 and bwd 0.31-0.54
//          over s = 1K-16K causal). These replace 0.75 / 0.55 read from the FA3 paper's figures (Shah et al. 2024,
//          arXiv:2407.08608: up to 740 TFLOP/s, non-causal and at head dim 256, not the d = 128 causal case). Ampere:
//          FA2 fwd measured 0.575; bwd 0.50 from the FA2 abstract's 50-73% of peak range (Dao 2023, arXiv:2307.08691).
//  FA2 on Hopper (PyTorch SDPA flash backend): our H100 profiles, d = 128, causal FLOPs: fwd 275 TFLOP/s = 0.278,
//          bwd 234 = 0.237 (Azure's FA2 0.332 at d = 128, s = 8192 agrees within the head-dim/sequence spread);
//          Blackwell FA2: measured, see BLACKWELL below. Attention rows are at d = 128; ops.cpp scales them by head dim.
//          A100: Azure's FA2 0.575 at d = 64 scaled to d = 128 with the same head-dim law = 0.669 fwd; bwd with the
//          FA2 paper's bwd/fwd ratio 0.87 = 0.582.
//  BLACKWELL (B200, B300, GB200; GB300 and B100 take their family's row). Nothing here is copied from Hopper:
//   GEMM, sustained: Azure's ND GB200 v6 cuBLASLt sweep (Azure/AI-benchmarking-guide Azure_Results/
//          ND_GB200_v6_results.md, fp8, random data, 10,000 warm-up iterations, i.e. after ~30 s under load) gives
//          16384^3 2906.9/5000 = 0.581 (8192^3 0.575) against MAMF's burst fp8 0.723 on the same part: a Blackwell
//          sustained/burst ratio of 0.804 (Hopper: 0.943), the power cap (1,200 W) bringing the SM clock down from
//          the burst clock under back-to-back GEMMs. GB200: fp8 0.581 as measured (the A100 row's precedent: a long
//          cuBLASLt run instead of MAMF), bf16 MAMF 0.729 x 0.804 = 0.586. B200 and B300: their MAMF bursts x the
//          same ratio (B200 0.776 -> 0.624 bf16, 0.763 -> 0.613 fp8; B300 0.786 -> 0.632, 0.745 -> 0.599): an
//          assumption, as the ratio is measured on GB200 only,
//          and B200 (1,000 W, 148 SMs) and B300 (1,100 W, 160 SMs) have less power per SM than GB200 (1,200 W,
//          152 SMs), so they throttle at least as much. The ratio also carries whatever separates Azure's cuBLASLt
//          kernel choice at 16384^3 from MAMF's best shape; Azure publishes no clock trace in text. Its fp4 sweep on
//          the same machine reaches 7627.6/10000 = 0.763 (fp4 draws less power per FLOP).
//   HBM:   meta-pytorch/KernelAgent oink/benchmarks/README.md, measured GB300 STREAM-like bf16 triad (Triton, 1 GB
//          arrays) 7.140 TB/s of 8.0 = 0.893; B300 the same memory system; B200 and GB200 (HBM3e, 8 stacks, the
//          same memory controllers): as GB300 (assumption, no B200/GB200 triad published in text).
//   ATTN (fused, Blackwell-native: FlashAttention-4 / cuDNN SDPA on SM100): Dao-AILab/flash-attention PR #2280
//          (FA4 authors, B200, bf16, d = 128, 16 heads, batch 4, s = 8192, causal): fwd 1418.1 TFLOP/s = 0.630 of
//          2250, bwd 1208.6 = 0.537 (the 2-CTA path the PR enables; 1-CTA 1117.9). Carried to the rows' reference
//          s = 4096 causal with the fused sequence law (efficiency.hpp, 32.5 -> 16.5 key tiles): fwd 0.604, bwd
//          0.493. The stacks' fused path on SM100 is cuDNN's SDPA (Transformer Engine, PyTorch); no cuDNN figure at
//          d = 128 causal on Blackwell is published in text, and FA4's paper puts FA4 up to 1.3x over cuDNN 9.13, so
//          cuDNN takes FA4's figure (assumption: optimistic for cuDNN releases before FA4's techniques). No
//          sustained-clock correction: attention is bound by the exponential units and shared memory, not the
//          tensor-core power draw (assumption). B300 and GB200: B200's fraction of their own peak (assumption;
//          Blackwell Ultra's faster exponentials would raise B300's).
//   FA2 on Blackwell (PyTorch SDPA flash backend: FA2's Ampere-style mma.sync kernel, no tcgen05): tritonbench PR #171
//          (meta-pytorch/tritonbench, B200, d = 128, batch 8, 16 heads, s = 8192, non-causal) fwd 361.6 TFLOP/s =
//          0.161 -> s = 4096 causal with FA2's sequence law (64 -> 16.5 key tiles) 0.155 (Azure's ND GB200 v6 FA2
//          373.9/2500 = 0.150 at d = 128, s = 8192, by the same law 0.144); bwd from Dao-AILab/flash-attention issue #1589 (B200,
//          FA2 2.7.4, d = 64, s = 8192, non-causal) 329.09/2250 = 0.146 -> d = 128 (FA2 d0 = 10) 0.157 -> s = 4096
//          causal 0.133.
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
//          Also seen, not modelled: torch._int_mm (int8) reaches 130 TOP/s = 0.066 of the H100's dense int8 peak in
//          that sweep, a cuBLASLt int8 kernel of the Ampere class; int8 GEMMs keep the bf16 ceiling here, as the
//          CUTLASS int8 kernels of the serving engines are not measured.
//  Launch: ~5 µs per kernel including tail effects, the NVIDIA CUDA best-practices figure for launch latency
//          (assumption until calibrated).
//  GEMM DEPTH (efficiency.hpp): c = 1.8 (bf16) and 2.1 (fp8) main-loop iterations per output tile: `gpuplan
//          calibrate fit` of our H100 samples (data/calibration/h100-sxm5-80gb/profile.json: the suites and sweeps
//          with two depth sweeps, samples-depth-*.json). H200 (same die): as H100; its own depth sweeps, out of
//          sample, fit 2.4 and 2.2 (tests/calibrate). Blackwell, Ampere and the rest: as Hopper (assumption: no sweep). The rows'
//          GEMM ceilings are taken at K = 8192: MAMF and the cuBLASLt sweeps peak at K = 8192-16384, where the law
//          moves η by under 1%; the H100 training-step profiles (K = 2048-128256) give 0.757 at K = 8192 under the
//          law (0.752 as measured), and their sustained/burst ratio 0.757/0.803 carries MAMF's fp8 0.709 to 0.668.
constexpr double kFp8SplitAccumulation = 0.947;
constexpr double kGemmDepthBf16 = 1.8;
constexpr double kGemmDepthFp8 = 2.1;

struct Row {
  std::string_view id;
  double gemm_bf16, gemm_fp8, hbm, attn_fwd, attn_bwd, fa2_fwd, fa2_bwd;
  int tile_m, tile_n;
  std::string_view origin;
};
constexpr std::array<Row, 9> kRows{{
    {"a100-sxm4-80gb", 0.822, 0.0, 0.834, 0.669, 0.582, 0.669, 0.582, 128, 128,
     "cuBLASLt 16384^3 sustained (Azure ND A100 v4); BabelStream triad ND A100 v4; FA2 ND A100 v4 scaled to d=128"},
    {"a100-sxm4-40gb", 0.822, 0.0, 0.834, 0.669, 0.582, 0.669, 0.582, 128, 128, "as a100-sxm4-80gb (same SM array)"},
    {"a100-pcie-80gb", 0.811, 0.0, 0.834, 0.669, 0.582, 0.669, 0.582, 128, 128, "MAMF A100 PCIe; HBM/attention as A100 SXM"},
    {"h100-sxm5-80gb", 0.757, 0.668, 0.887, 0.621, 0.445, 0.278, 0.237, 128, 256,
     "our H100 training-step kernel profiles (bf16 GEMM, FA2); MAMF H100 SXM (fp8); BabelStream triad ND H100 v5; our "
     "cuDNN fused-attention measurement"},
    {"h200-sxm-141gb", 0.757, 0.668, 0.887, 0.611, 0.440, 0.278, 0.237, 128, 256,
     "as H100: our H100 kernel profiles (bf16 GEMM, FA2; same GH100 die, 700 W); MAMF H200 (fp8); HBM as H100; our H200 "
     "cuDNN fused-attention measurement"},
    {"b200-hgx", 0.624, 0.613, 0.893, 0.604, 0.493, 0.155, 0.133, 128, 256,
     "MAMF B200 (bf16, fp8) x GB200's sustained/burst ratio 0.804 (Azure ND GB200 v6 cuBLASLt; assumption: carried to "
     "B200); HBM: GB300 triad (KernelAgent); FA4 on B200 (flash-attention PR #2280); FA2 on B200 (tritonbench, "
     "flash-attention #1589)"},
    {"b300-hgx", 0.632, 0.599, 0.893, 0.604, 0.493, 0.155, 0.133, 128, 256,
     "MAMF B300 (bf16, fp8) x GB200's sustained/burst ratio 0.804 (assumption: carried to B300); HBM: GB300 triad "
     "(KernelAgent); attention: B200's FA4 and FA2 fractions (assumption)"},
    {"gb200-gpu", 0.586, 0.581, 0.893, 0.604, 0.493, 0.155, 0.133, 128, 256,
     "Azure ND GB200 v6 sustained cuBLASLt fp8 16384^3; bf16: MAMF GB200 x the same sustained/burst ratio 0.804; HBM: "
     "GB300 triad (KernelAgent); attention: B200's FA4 and FA2 fractions (assumption)"},
    {"mi300x", 0.514, 0.0, 0.834, 0.40, 0.30, 0.40, 0.30, 128, 128,
     "MAMF MI300X; HBM as A100 (assumption); attention: assumption scaled from the GEMM ceiling"},
}};

// Family fallbacks: the family's best-measured member.
constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kFamily{{
    {"Ampere", "a100-sxm4-80gb"},
    {"Hopper", "h100-sxm5-80gb"},
    {"Blackwell", "b200-hgx"},
    {"Blackwell Ultra", "b300-hgx"},
    {"CDNA3", "mi300x"},
    {"Volta", "a100-sxm4-80gb"},
    {"Ada Lovelace", "a100-sxm4-80gb"},
}};

EfficiencyProfile from_row(const Row& r, const std::string& gpu_id, std::string_view via) {
  EfficiencyProfile e;
  e.gpu_id = gpu_id;
  e.gemm_bf16 = r.gemm_bf16;
  e.gemm_fp8 = r.gemm_fp8;
  // Hopper's measured split-accumulation rate for every GPU with fp8 GEMMs (Blackwell: an assumption, no Blackwell
  // split/fast sweep published); no fp8 GEMMs, no split accumulation.
  e.fp8_split_accumulation = r.gemm_fp8 > 0.0 ? kFp8SplitAccumulation : 1.0;
  e.hbm = r.hbm;
  e.attention_fwd = r.attn_fwd;
  e.attention_bwd = r.attn_bwd;
  e.attention_fwd_fa2 = r.fa2_fwd;
  e.attention_bwd_fa2 = r.fa2_bwd;
  // A row whose fused attention is FlashAttention-2 itself (Ampere: no Hopper kernels) takes FA2's sequence law.
  e.attention_tile = r.attn_fwd == r.fa2_fwd && r.attn_bwd == r.fa2_bwd ? kFa2AttentionTileCost : kFusedAttentionTileCost;
  e.gemm_depth_bf16 = kGemmDepthBf16;
  e.gemm_depth_fp8 = kGemmDepthFp8;
  e.tile_m = r.tile_m;
  e.tile_n = r.tile_n;
  // GEMM shape effects (efficiency.hpp): the leading-dimension kernel classes, measured on our H100
  // (gemm_alignment.json), carried to every part as an assumption (cuBLAS has the same alignment fallbacks from Ampere
  // on; not measured elsewhere). The stream-K decomposition (EfficiencyProfile::stream_k) stays off: see there.
  e.gemm_alignment = kHopperGemmAlignment;
  e.kernel_launch = microseconds(5.0);
  e.origin = std::string("built-in default (") + std::string(r.origin) + ")";
  if (!via.empty()) e.origin += "; " + std::string(via);
  return e;
}

}  // namespace

EfficiencyProfile default_efficiency(const hw::GpuSpec& gpu) {
  for (const auto& r : kRows)
    if (r.id == gpu.info.id) return from_row(r, gpu.info.id, "");
  for (const auto& [family, id] : kFamily) {
    if (family != gpu.family) continue;
    for (const auto& r : kRows)
      if (r.id == id)
        return from_row(r, gpu.info.id,
                        "no measurement for " + gpu.info.id + ": uses its family's (" + std::string(id) + ")");
  }
  // A part with no measured family member: a generic, stated assumption (80% GEMM, 85% HBM, 50% attention).
  return from_row(Row{"", 0.80, 0.0, 0.85, 0.50, 0.375, 0.50, 0.375, 128, 128, "generic assumption: no measurement for this family"},
                  gpu.info.id, "");
}

double gemm_ceiling(const EfficiencyProfile& e, hw::Precision p) {
  // fp4: no fp4 GEMM measurement yet; assumed to reach the fp8 fraction of its own (2×) peak — stated in
  // docs/serving.md.
  if ((p == hw::Precision::fp8 || p == hw::Precision::fp4) && e.gemm_fp8 > 0.0) return e.gemm_fp8;
  return e.gemm_bf16;
}

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
