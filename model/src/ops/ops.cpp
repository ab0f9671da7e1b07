#include "gpuplan/model/ops.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/gemm_fp16.hpp"

namespace gpuplan::model {

std::string to_string(OpClass c) {
  switch (c) {
    case OpClass::gemm: return "gemm";
    case OpClass::attention: return "attention";
    case OpClass::elementwise: return "elementwise";
    case OpClass::embedding: return "embedding";
    case OpClass::loss: return "loss";
    case OpClass::optimizer: return "optimizer";
    case OpClass::host: return "host";
  }
  return "?";
}

std::string to_string(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::launch: return "launch";
  }
  return "?";
}

units::FlopRate Device::peak(hw::Precision p) const {
  if (auto r = gpu->peak(p)) return *r;
  if (p == hw::Precision::bf16)
    if (auto r = gpu->peak(hw::Precision::fp16)) return *r;  // V100: fp16 tensor cores only
  if (p == hw::Precision::fp8)  // no fp8 units: runs at bf16 rate
    if (auto r = gpu->peak(hw::Precision::bf16)) return *r;
  if (auto r = gpu->peak(hw::Precision::fp16)) return *r;
  if (auto r = gpu->peak(hw::Precision::fp32)) return *r;
  return units::tflops(1.0);  // unreachable for valid data: every GPU file has a peak (decoder enforces it)
}

Device make_device(const hw::GpuSpec& gpu) { return Device{&gpu, default_efficiency(gpu)}; }

units::Seconds kernel_fixed(const Device& d, OpClass c) {
  const KernelClassCosts& k = d.eff.launch_class;
  const units::Seconds attention = k.attention_fused.raw() > 0 ? k.attention_fused : k.attention;
  const units::Seconds s = c == OpClass::gemm ? k.gemm : c == OpClass::attention ? attention : k.elementwise;
  return s.raw() > 0 ? s : d.eff.kernel_launch;
}

units::Seconds norm_fixed(const Device& d, std::int64_t row) {
  const KernelClassCosts& k = d.eff.launch_class;
  if (k.norm.raw() <= 0) return kernel_fixed(d, OpClass::elementwise);
  return k.norm + k.norm_per_element * double(std::max<std::int64_t>(1, row));
}

bool gemm_splits_k(std::int64_t m, std::int64_t n, std::int64_t k) {
  return n >= 1024 && k >= n && double(m) * double(n) / double(k) < 64.0;
}

Device sustained_device(const hw::GpuSpec& gpu, const std::optional<EfficiencyProfile>& eff, wl::AttentionKernel attn) {
  Device d = make_device(gpu);
  if (eff) d.eff = *eff;
  d.eff.gemm_bf16 *= d.eff.gemm_sustained;
  d.eff.gemm_fp8 *= d.eff.gemm_sustained_fp8.value_or(d.eff.gemm_sustained);
  // The compression paths were measured in short sweeps, as the bf16 ceiling: the same sustained ratio (int8 takes
  // fp8's: 8-bit operands, the same tensor-core power draw per FLOP is our assumption).
  d.eff.gemm_int8 *= d.eff.gemm_sustained_fp8.value_or(d.eff.gemm_sustained);
  d.eff.gemm_sparse24 *= d.eff.gemm_sustained;
  d.eff.gemm_w4a16 *= d.eff.gemm_sustained;
  if (attn == wl::AttentionKernel::fa2 || attn == wl::AttentionKernel::fa1) {
    // FlashAttention-1 kernels run at kFa1RateOfFa2 of FlashAttention-2's rate (efficiency.hpp cites it).
    const double rate = attn == wl::AttentionKernel::fa1 ? kFa1RateOfFa2 : 1.0;
    d.eff.attention_fwd = d.eff.attention_fwd_fa2 * rate;
    d.eff.attention_bwd = d.eff.attention_bwd_fa2 * rate;
    d.eff.attention_tile = kFa2AttentionTileCost;
  }
  return d;
}

hw::Precision sixteen_bit_of(hw::Precision compute) {
  return compute == hw::Precision::fp8 || compute == hw::Precision::fp4 ? hw::Precision::bf16 : compute;
}

namespace {
double element_bytes(hw::Precision p) { return hw::bytes_per_element(p); }
/// Attention runs its matmuls in 16-bit when the GEMMs are fp8/fp4 (FlashAttention's bf16 path).
hw::Precision attention_precision(hw::Precision p) { return sixteen_bit_of(p); }

/// Whole tiles: a fused attention kernel runs its 128-row query tiles and 128-wide key tiles whole (the rows and
/// columns past the sequence's end masked), so a length that is not a multiple of 128 pays for the tiles it starts.
/// The sequence law (efficiency.hpp, AttentionTileCost) counts (s_q/128)·(k + c) tile iterations with k key tiles per
/// query tile (attention_key_tiles) and c of fixed cost; counted whole, causal self-attention (s_q = s_kv = s) runs
/// n = ⌈s/128⌉ query tiles of i + 1 key tiles each, n(n+1)/2 + c·n. Returns the ratio (≥ 1; exactly 1 at multiples of
/// 128, where the law was measured). Measured on the H200 (data/validation/measured/h200-sxm-141gb/
/// attention_sdpa_short.json): at the same 32768 tokens a 177-token causal forward takes 1.55x (FlashAttention-2) and
/// 1.39x (cuDNN) the time of a 256-token one, as the whole tiles count (1.45x), where the continuous law gives 0.76x;
/// 23 documents of 177 tokens, forward + backward: FA2 450 µs measured, 421 with whole tiles, 276 without.
/// Non-causal attention and a query block over a longer cache keep the law (1): not measured off the tile grid.
double attention_whole_tile_ratio(double s_q, double s_kv, bool causal, double c) {
  if (s_q <= 0.0 || s_kv <= 0.0 || !causal || s_q != s_kv) return 1.0;
  const double nq = std::ceil(s_q / 128.0);
  const double whole = nq * (nq + 1.0) / 2.0;
  const double counted = (s_q / 128.0) * (attention_key_tiles(s_kv, causal) + c);
  return std::max(1.0, (whole + c * nq) / counted);
}

units::Seconds roofline_time(units::Flops f, units::FlopRate compute, units::Bytes b, units::Bandwidth bw,
                             units::Seconds launch, Bound& bound) {
  const units::Seconds tc = f / compute;
  const units::Seconds tm = b / bw;
  bound = tc >= tm ? Bound::compute : Bound::memory;
  if (launch > std::max(tc, tm)) bound = Bound::launch;
  return std::max(tc, tm) + launch;
}
}  // namespace

OpCost accumulating_wgrad(OpCost wgrad, double weight_elements, double grad_bytes, const Device& d,
                          bool separate_add) {
  if (separate_add) {
    // The fresh 16-bit gradient read back, the buffer read and written: one more elementwise kernel.
    const units::Bytes moved = units::bytes((2.0 + 2.0 * grad_bytes) * weight_elements);
    if (!wgrad.name.empty()) wgrad.name += " (+ separate add into the gradient buffer)";
    wgrad.bytes = wgrad.bytes + moved;
    wgrad.time = wgrad.time + moved / d.stream_bandwidth() + kernel_fixed(d, OpClass::elementwise);
    return wgrad;
  }
  const double extra = std::max(0.0, 2.0 * grad_bytes - 2.0) * weight_elements;
  if (extra <= 0.0) return wgrad;
  const units::Bytes moved = units::bytes(extra);
  if (!wgrad.name.empty()) wgrad.name += " (+= gradient buffer)";
  wgrad.bytes = wgrad.bytes + moved;
  wgrad.time = wgrad.time + moved / d.stream_bandwidth();
  return wgrad;
}

bool wgrad_accumulates(const wl::TrainingPlan& plan) {
  return plan.kernels == wl::KernelStyle::fused && plan.mixed_precision == wl::MixedPrecision::megatron;
}

namespace {
/// The alignment of a leading dimension of `dim` elements: the largest power of two (at most kGemmAlignmentBytes)
/// that divides its byte length; sub-byte formats (fp4, fp6) count whole 16-byte groups only.
double ld_alignment_bytes(double dim, double element_bytes) {
  const double bytes = dim * element_bytes;
  double a = kGemmAlignmentBytes;
  while (a > 1.0 && std::fmod(bytes, a) != 0.0) a /= 2.0;
  return std::fmod(bytes, a) == 0.0 ? a : 0.5;
}

/// How the output tiles of one GEMM spread over the SMs under one tile shape.
struct TilePlan {
  double tm = 0, tn = 0, tiles = 0, splits = 1, waves = 1, util = 1, k_segment = 0, depth = 1;
};

/// The M side of a whole tile in the built-in rows' waves. cuBLAS 13's nvjet kernels cut M into as many tile rows as
/// the tile height needs and size each row to M in steps of 8 (the operands swapped, M along wgmma's n, whose
/// granularity is 8): our H100 trace (gemm_graph_kernels.json) runs 4096×11008 at M = 136 as two rows of 72 (64×72
/// tiles) and 4096×4096 at M = 472 as four rows of 120. So 129 rows run as two tile rows of 72, not two of 128, which
/// doubled the compute time from M = 128 to 129 (the serving cliff of issue #27). A multiple of tile_m keeps it. One
/// row (M ≤ tile_m) keeps the whole tile: sized to M it prices small-M GEMMs faster, and our serving and the
/// published inference families, checked against the whole tile, move the wrong way; so does a choice of one more
/// row where its waves are fuller (our training steps and fp8 GEMMs; docs/gemm-shapes.md).
double tile_rows(double m, double tile_m, double rows) {
  return rows <= 1.0 ? tile_m : std::min(tile_m, 8.0 * std::ceil(m / (8.0 * rows)));
}

/// Whether a 16-bit GEMM of more than tile_m rows runs the tile turned: M along the tile's long side (tile_n, up to
/// 256: wgmma's n, which the nvjet kernels give M with the operands swapped) and N along its short side (tile_m).
/// Our traces show it on both parts: the H200's Llama-3-70B TP 2 shapes (gemm_graph_kernels_llama3_70b_tp2.json:
/// 8192×14336 and 8192×4096 at M = 129…300 run two rows of 72…152 over 128-wide N tiles, 128×88 at M = 175,
/// 128×152 at 289; 28672×8192 one or two rows up to 200 high) and the H100's (gemm_graph_kernels.json: 4096×11008 at
/// M = 136, two rows of 72). gemm_tiles prices the fuller of the two orientations (cuBLAS's heuristic has both
/// kernels; with the turned tile always taken, 4096 + 6 rows cut into 17 rows of 248 fill 5 waves where 33 rows of
/// 128 fill 4). 8-bit kernels keep the built-in orientation (no trace of theirs; the TensorRT-LLM fp8 rows, Llama 3.1
/// 405B on H100 at TP 8, move from +1.4% to +14.3% with it: docs/gemm-shapes.md).
bool swapped_tiles(const EfficiencyProfile& eff, double tile_m, hw::Precision p) {
  return eff.tile_n > tile_m && (p == hw::Precision::bf16 || p == hw::Precision::fp16);
}

/// The turned tile's M side: ⌈M/tile_n⌉ rows, at least two (the traces' N = 8192 shapes run two rows from M = 129;
/// one row of 8·⌈M/8⌉, tried with the turned tile always taken, steps every 8 rows and put throughput falls on our
/// Llama-3-8B batch steps at 153 and 250, where the measured one rises), each 8·⌈M/(8·rows)⌉ high (steps of 8,
/// wgmma's n granularity).
double swapped_tile_height(double m, double tile_n) {
  return tile_rows(m, tile_n, std::max(2.0, std::ceil(m / tile_n)));
}

/// Whole tiles in waves, split-K over idle SMs when there are fewer tiles than SMs (in slices of at least 256).
TilePlan waves_plan(double m, double n, double k, double batch, double sms, double tm, double tn) {
  TilePlan t{tm, tn};
  t.tiles = std::ceil(m / tm) * std::ceil(n / tn) * batch;
  t.splits = sms > 0 && t.tiles < sms ? std::max(1.0, std::min(std::floor(sms / t.tiles), std::floor(k / 256.0))) : 1.0;
  t.waves = sms > 0 ? std::ceil(t.tiles * t.splits / sms) : 1.0;
  t.util = sms > 0 ? std::min(1.0, (m * n * batch * t.splits) / (t.waves * sms * tm * tn)) : 1.0;
  t.k_segment = k / t.splits;
  return t;
}

/// Stream-K: the tiles' main-loop iterations (k_t elements each) dealt out evenly to the SMs, so the last "wave" is
/// as full as the iteration count allows; what is lost is the padding of partial tiles and at most one iteration per
/// SM. An SM's k-range per tile is the whole K when it owns whole tiles, its share of a tile when there are fewer
/// tiles than SMs (at least 256 elements, as split-K).
TilePlan stream_k_plan(double m, double n, double k, double batch, double sms, double tm, double tn, double k_t) {
  TilePlan t{tm, tn};
  t.tiles = std::ceil(m / tm) * std::ceil(n / tn) * batch;
  const double iters = std::max(1.0, std::ceil(k / k_t));
  const double per_sm = std::ceil(t.tiles * iters / sms);
  t.waves = per_sm / iters;
  t.util = std::min(1.0, (m * n * batch * iters) / (sms * per_sm * tm * tn));
  t.k_segment = std::min(k, std::max(std::min(k, 256.0), per_sm * k_t));
  t.splits = k / t.k_segment;
  return t;
}
/// The leading-dimension alignment of a GEMM: the k and n it is priced at and its rate factor, with the reason.
struct GemmAlign {
  double kk = 0, nn = 0, factor = 1.0;
  std::string note;
};
GemmAlign gemm_alignment(double k, double n, double e, hw::Precision p, const Device& d) {
  // Leading-dimension alignment (efficiency.hpp, GemmAlignment): k and n are the leading dimensions. 8-bit and smaller
  // formats have no fallback kernels (cuBLASLt refuses them): the framework pads k and n to 16 bytes and the padded
  // GEMM is priced; 16- and 32-bit ones run the slower kernel class of their alignment.
  // fp32 without TF32 (and fp64) runs cuBLAS's SIMT FFMA kernels, built for 4-byte operands: no alignment class
  // (our H200 probe, optstack_probe.json: GPT-2's 50,257-wide head as fast as the 50,304-wide one, 4096³ at
  // K or N = 4095/4097 within 3%).
  GemmAlign r;
  const bool simt = p == hw::Precision::fp32 || p == hw::Precision::fp64;
  const double align = simt ? kGemmAlignmentBytes : std::min(ld_alignment_bytes(k, e), ld_alignment_bytes(n, e));
  r.kk = k;
  r.nn = n;
  r.note = simt ? "fp32/fp64 SIMT (FFMA) kernels: no leading-dimension alignment class (measured)"
                                : "leading dimensions k and n 16-byte aligned: fast kernel class";
  if (align < kGemmAlignmentBytes) {
    if (e < 2.0) {
      const double step = kGemmAlignmentBytes / e;
      r.kk = std::ceil(k / step) * step;
      r.nn = std::ceil(n / step) * step;
      r.factor = (n * k) / (r.nn * r.kk);
      r.note = fmt::format("k, n not 16-byte aligned and no {} kernel for them: priced as padded to {:g}×{:g}",
                               hw::to_string(p), r.nn, r.kk);
    } else {
      r.factor = align >= 4.0 ? d.eff.gemm_alignment.vector : d.eff.gemm_alignment.element;
      r.note = fmt::format("worst leading dimension {:g}-byte aligned (k = {:g}, n = {:g} of {:g} B): fallback "
                               "kernel class at {:g} of the aligned rate",
                               align, k, n, e, r.factor);
      // The fallback kernels are load-bound: fp16's power-capped tensor rate (gemm_fp16) does not slow them.
      if (p == hw::Precision::fp16) {
        r.factor = std::min(1.0, r.factor / gemm_fp16_rate(d.eff));
        r.note += fmt::format(" of bf16 (÷ the fp16 tensor rate {:g})", gemm_fp16_rate(d.eff));
      }
    }
  }
  return r;
}

/// The tile plan of an m × n × k (× batch) GEMM on `sms` SMs: waves (split-K over idle SMs) or, where the part runs
/// stream-K, the fastest of the candidate tiles; its depth factor for the k-range one SM's tile covers.
TilePlan gemm_tiles(double m, double n, double k, double batch, double sms, double tile_m, bool rows_follow_m,
                    hw::Precision p, const Device& d) {
  const double nn = n, kk = k, k_t = kGemmDepthBytes / element_bytes(p);
  TilePlan plan;
  if (sms <= 0) {
    plan = TilePlan{tile_m, double(d.eff.tile_n), 0, 1, 1, 1, kk, 1};
    plan.depth = gemm_depth_factor(d.eff, p, kk);
  } else if (!d.eff.stream_k) {
    // Whole tiles in waves, their rows following M (tile_rows; weight-only kernels keep their own tile). Cut so, M
    // rows may fill the waves better than the whole tiles of the multiple of tile_m just below (385 rows as four of
    // 104 against 384 as three of 128). The model keeps a GEMM's time from falling as M grows (cuBLAS's does at its
    // kernel switches, docs/gemm-shapes.md class A; no model of them is in the data): u·g is capped at what keeps the
    // compute time M / (u·g) at its value at that multiple.
    // A 16-bit GEMM of more than tile_m rows may run the tile turned (swapped_tiles): the fuller of the two
    // orientations is priced, at M and at the cap's multiple alike.
    const double rows = std::ceil(m / tile_m);
    const bool follow = rows_follow_m && rows > 1.0;
    const bool swapped = follow && swapped_tiles(d.eff, tile_m, p);
    const auto fuller_turned = [&](double mm, TilePlan base) {
      if (!swapped || mm <= tile_m) return base;
      TilePlan turned = waves_plan(mm, nn, kk, batch, sms, swapped_tile_height(mm, d.eff.tile_n), tile_m);
      turned.depth = gemm_depth_factor(d.eff, p, turned.k_segment);
      return turned.util * turned.depth > base.util * base.depth ? turned : base;
    };
    plan = waves_plan(m, nn, kk, batch, sms, follow ? tile_rows(m, tile_m, rows) : tile_m, d.eff.tile_n);
    plan.depth = gemm_depth_factor(d.eff, p, plan.k_segment);
    plan = fuller_turned(m, plan);
    if (follow) {
      const double m_below = (rows - 1.0) * tile_m;
      TilePlan below = waves_plan(m_below, nn, kk, batch, sms, tile_m, d.eff.tile_n);
      below.depth = gemm_depth_factor(d.eff, p, below.k_segment);
      below = fuller_turned(m_below, below);
      const double cap = below.util * below.depth * m / m_below;
      if (plan.util * plan.depth > cap) plan.util = cap / plan.depth;
    }
  } else {
    // Every candidate tile, the fastest kept; a later (smaller) one must gain more than kGemmTileMargin.
    bool first = true;
    for (const GemmTile& tile : kGemmTiles) {
      TilePlan t = stream_k_plan(m, nn, kk, batch, sms, tile.m, tile.n, k_t);
      t.depth = gemm_depth_factor(d.eff, p, t.k_segment);
      if (first || t.util * t.depth > plan.util * plan.depth * (1.0 + kGemmTileMargin)) plan = t;
      first = false;
    }
  }
  return plan;
}
}  // namespace

OpCost gemm_cost(const std::string& name, const GemmShape& s, hw::Precision p, const Device& d, Derivation* why) {
  OpCost c;
  c.name = name;
  c.cls = OpClass::gemm;
  const double m = double(s.m), n = double(s.n), k = double(s.k), batch = double(s.batch);
  c.flops = units::flop(2.0 * m * n * k * batch);
  const double e = element_bytes(p);
  const double b_bytes = s.b_element_bytes > 0 ? s.b_element_bytes : e;
  c.bytes = units::bytes(((m * k + m * n) * e + k * n * b_bytes) * batch);
  // Leading-dimension alignment (efficiency.hpp, GemmAlignment; gemm_alignment): k and n are the leading dimensions.
  const GemmAlign al = gemm_alignment(k, n, e, p, d);
  const double kk = al.kk, nn = al.nn, align_factor = al.factor;
  const std::string& align_note = al.note;
  // Tile/wave quantisation and the tile choice (efficiency.hpp). A part whose SM count is not in the data gets no
  // quantisation penalty (stated in the derivation).
  const double sms = double(d.gpu->compute_units);
  const double k_t = kGemmDepthBytes / e;
  // Weight-only kernels (B narrower than the compute type) are built for decode: they tile the tokens in blocks of
  // the m16n8k16 tensor-core MMA's 16 rows (Marlin, Frantar et al. 2024, arXiv:2408.11743; PyTorch's tinygemm), not
  // in the 128-row tiles of the large 16-bit kernels: the tile's rows are the tokens rounded up to 16, at most the
  // large kernels' tile; below 16 tokens no padding (our H100 sweep, compress_gemm.json: tinygemm at M = 1 takes
  // 0.36-0.39 of its M = 16 time on the three large shapes).
  const bool weight_only = s.b_element_bytes > 0 && s.b_element_bytes < 0.99 * e;
  const double tile_m = !weight_only ? double(d.eff.tile_m)
                        : m < 16.0   ? std::max(1.0, m)
                                     : std::min(16.0 * std::ceil(m / 16.0), double(d.eff.tile_m));
  const TilePlan plan = gemm_tiles(m, nn, kk, batch, sms, tile_m, !weight_only, p, d);
  const double util = plan.util, depth = plan.depth;
  // The compute path: dense tensor cores at the precision's ceiling; 2:4-sparse ones at the sparse peak and its
  // measured ceiling; a weight-only kernel (B narrower than the compute type, dequantised in the main loop) at its
  // own measured ceiling and bandwidth. Unmeasured paths fall back to the dense GEMM, and the derivation says so.
  const std::optional<units::FlopRate> sparse_peak = s.sparse24 ? d.gpu->sparse(p) : std::nullopt;
  const bool sparse = sparse_peak.has_value() && d.eff.gemm_sparse24 > 0;
  double ceiling = gemm_ceiling(d.eff, p);
  units::FlopRate peak = d.peak(p);
  std::string path_note;  // empty: dense tensor cores
  if (sparse) {
    ceiling = d.eff.gemm_sparse24;
    peak = *sparse_peak;
    path_note = fmt::format("2:4-sparse tensor cores: sparse {} peak {} × measured sparse ceiling {:.3g}",
                            hw::to_string(p), units::format(peak), ceiling);
  } else if (s.sparse24) {
    path_note = !sparse_peak ? fmt::format("2:4-sparse weights but no sparse {} peak in the data: priced dense",
                                           hw::to_string(p))
                             : "2:4-sparse weights, no measured sparse GEMM rate on this part: priced dense";
  } else if (weight_only && d.eff.gemm_w4a16 > 0) {
    ceiling = d.eff.gemm_w4a16;
    path_note = fmt::format("weight-only kernel ({:.3g} B weights dequantised in the main loop): measured ceiling "
                            "{:.3g} of the dense {} peak",
                            s.b_element_bytes, ceiling, hw::to_string(p));
  } else if (weight_only) {
    path_note = "weight-only weights dequantised in the main loop: no measured kernel rate, the dense ceiling";
  }
  c.efficiency = ceiling * util * depth * align_factor;
  if (s.split_accumulation && p == hw::Precision::fp8) c.efficiency *= d.eff.fp8_split_accumulation;
  const units::FlopRate compute = peak * c.efficiency;
  // c.efficiency stays a fraction of the dense peak (OpCost::efficiency), whatever path ran.
  c.efficiency = compute.raw() / d.peak(p).raw();
  const double eta_mem = weight_only && d.eff.gemm_w4a16_hbm > 0 ? d.eff.gemm_w4a16_hbm
                         : d.eff.gemm_hbm > 0                   ? d.eff.gemm_hbm
                                                                : d.eff.hbm;
  const units::Bandwidth bw = d.gpu->memory.bandwidth * eta_mem;
  const units::Seconds t_fixed = kernel_fixed(d, OpClass::gemm);
  c.time = roofline_time(c.flops, compute, c.bytes, bw, t_fixed, c.bound);
  if (s.batch == 1 && gemm_splits_k(s.m, s.n, s.k)) c.extra_kernels = 1;  // the splitKreduce, inside t_fixed
  if (why != nullptr) {
    using units::format;
    std::string u_note;
    if (sms <= 0) u_note = "SM count not in the data: no tile/wave quantisation applied";
    else if (d.eff.stream_k)
      u_note = fmt::format("stream-K: {:g} tiles of {:g}×{:g} (the fastest of {} candidates), their {:g}-element "
                           "main-loop iterations spread over {} SMs ({:.3g} tiles' worth each)",
                           plan.tiles, plan.tm, plan.tn, kGemmTiles.size(), k_t, d.gpu->compute_units, plan.waves);
    else
      u_note = fmt::format("tile/wave utilisation ({} tiles of {}×{}{} on {} SMs, {} waves)", plan.tiles, plan.tm,
                           plan.tn, plan.splits > 1 ? fmt::format(", split-K ×{}", plan.splits) : std::string(),
                           d.gpu->compute_units, plan.waves);
    const Origin eff_origin = d.eff.calibrated ? Origin::calibration(d.eff.origin) : Origin::measurement(d.eff.origin);
    *why = {"op." + name,
            "GEMM " + name,
            "t = max(2·m·n·k / (P·η·g·u·a), (m·k + k·n + m·n)·e / (BW·η_hbm)) + t_launch ; g = [k/(k+c)] / [k_ref/(k_ref+c)] ; u = m·n·iterations / (SMs·iterations per SM·tm·tn)",
            {{"m×n×k", fmt::format("{}×{}×{}{}", s.m, s.n, s.k, s.batch > 1 ? fmt::format(" ×{}", s.batch) : ""),
              "shape", Origin::derived()},
             {"P", format(peak), fmt::format("{} {} peak", sparse ? "2:4-sparse" : "dense", hw::to_string(p)),
              Origin::datasheet(d.gpu->info.cite(sparse ? "/sparse_peak" : "/dense_peak"))},
             {"η", units::format_number(ceiling, 3),
              path_note.empty() ? std::string("measured GEMM ceiling") : "measured GEMM ceiling (" + path_note + ")",
              eff_origin},
             {"g", units::format_number(depth, 3),
              fmt::format("depth law k/(k + c) against K = {:g}: k = {:g} main-loop iterations of {:g} elements per tile, "
                          "c = {:g}",
                          kGemmReferenceDepth, gemm_depth_iterations(p, plan.k_segment), k_t, gemm_depth_of(d.eff, p)),
              Origin::derived()},
             {"u", units::format_number(util, 3), u_note, Origin::derived()},
             {"a", units::format_number(align_factor, 3), align_note,
              align_factor < 1.0 && e >= 2.0 ? eff_origin : Origin::derived()},
             {"BW", format(d.gpu->memory.bandwidth), "HBM bandwidth", Origin::datasheet(d.gpu->info.cite("/memory/bandwidth_TBps"))},
             {"η_hbm", units::format_number(eta_mem, 3),
              d.eff.gemm_hbm > 0 ? "measured bandwidth fraction of memory-bound GEMMs" : "measured streaming fraction",
              eff_origin},
             {"t_launch", format(t_fixed),
              d.eff.launch_class.gemm.raw() > 0 ? "a GEMM kernel's fixed cost inside a CUDA graph (per kernel class)"
                                                : "per-kernel fixed cost",
              Origin::assumption(d.eff.origin)}},
            fmt::format("{} ({}-bound, {} achieved)", format(c.time), to_string(c.bound), format(c.achieved())),
            {fmt::format("intensity {} vs ridge {}", format(c.intensity()),
                         format(units::Intensity(d.peak(p).raw() / d.gpu->memory.bandwidth.raw())))},
            {}};
    why->set(c.time.raw(), Unit::seconds);
  }
  return c;
}

std::vector<OpCost> attention_cost(const std::string& name, std::int64_t batch_heads, std::int64_t s_q,
                                   std::int64_t s_kv, std::int64_t d_qk, std::int64_t d_v, bool causal, bool flash,
                                   bool backward, hw::Precision p, const Device& d, bool dropout) {
  std::vector<OpCost> out;
  const double bh = double(batch_heads), sq = double(s_q), skv = double(s_kv);
  const double causal_f = causal ? 0.5 : 1.0;
  const double e = element_bytes(attention_precision(p));
  if (flash) {
    OpCost c;
    c.name = name + (backward ? " (flash bwd)" : " (flash fwd)");
    c.cls = OpClass::attention;
    const double fwd = 2.0 * bh * sq * skv * double(d_qk + d_v) * causal_f;
    c.flops = units::flop(backward ? 2.5 * fwd : fwd);
    // Q, K, V, O (+ dO, dQ, dK, dV in backward) stream once; scores stay on chip.
    const double io = bh * (sq * double(d_qk) + skv * double(d_qk + d_v) + sq * double(d_v)) * e;
    c.bytes = units::bytes(backward ? 2.0 * io : io);
    // Tensor-core utilisation of fused attention grows with the head dim: η(d) = η₁₂₈ · [d/(d+d₀)] / [128/(128+d₀)],
    // d₀ per kernel family and direction from our SDPA sweeps (efficiency.hpp, AttentionTileCost).
    const double d0 = backward ? d.eff.attention_tile.d0_bwd : d.eff.attention_tile.d0_fwd;
    const double dh = double(std::max(d_qk, d_v));
    const double head_factor = (dh / (dh + d0)) / (128.0 / (128.0 + d0));
    // Sequence-length law (efficiency.hpp, AttentionTileCost): k key tiles per 128-row query tile against the rows'
    // reference shape (s = 4096 causal).
    const double tile_c = backward ? d.eff.attention_tile.bwd : d.eff.attention_tile.fwd;
    const double k_tiles = attention_key_tiles(skv, causal);
    const double seq_factor = (k_tiles / (k_tiles + tile_c)) /
                              (kAttentionReferenceKeyTiles / (kAttentionReferenceKeyTiles + tile_c));
    const double whole_tiles = attention_whole_tile_ratio(sq, skv, causal, tile_c);
    if (whole_tiles > 1.0 + 1e-9)
      c.name += fmt::format(" (whole 128-row tiles: {:.3g}x the sequence law's work)", whole_tiles);
    c.efficiency =
        std::min(1.0, (backward ? d.eff.attention_bwd : d.eff.attention_fwd) * head_factor * seq_factor / whole_tiles);
    const units::FlopRate peak = d.peak(attention_precision(p));
    c.time = roofline_time(c.flops, peak * c.efficiency, c.bytes, d.stream_bandwidth(),
                           kernel_fixed(d, OpClass::attention), c.bound);
    // Dropout: the kernel draws a random number per score element (forward) and again in the backward; measured as an
    // added time per element, carried to other parts by SM count × boost clock.
    const double rate = backward ? d.eff.attention_tile.dropout_bwd : d.eff.attention_tile.dropout_fwd;
    if (dropout && rate > 0 && d.gpu->compute_units > 0 && d.gpu->boost_clock_MHz) {
      c.name += " + dropout";
      c.time = c.time + units::Seconds(bh * sq * skv * causal_f /
                                       (rate * double(d.gpu->compute_units) * *d.gpu->boost_clock_MHz * 1e6));
    }
    out.push_back(c);
    return out;
  }
  // Unfused: S = Q·Kᵀ, P = softmax(S), O = P·V; backward: dP, dS, dQ, dK, dV (two GEMMs per product).
  const hw::Precision gp = attention_precision(p);
  const double mult = backward ? 2.0 : 1.0;
  OpCost qk = gemm_cost(name + " QKᵀ", {s_q, s_kv, d_qk, batch_heads}, gp, d);
  OpCost pv = gemm_cost(name + " P·V", {s_q, d_v, s_kv, batch_heads}, gp, d);
  for (OpCost* c : {&qk, &pv}) {
    c->cls = OpClass::attention;
    if (backward) {
      c->flops = c->flops * mult;
      c->bytes = c->bytes * mult;
      const units::Seconds t_fixed = kernel_fixed(d, OpClass::gemm);  // as gemm_cost priced the product
      c->time = (c->time - t_fixed) * mult + t_fixed * mult;
      c->name += " (bwd)";
    }
    out.push_back(*c);
  }
  // softmax (+ scale, + mask: Megatron's fused kernels) reads and writes the scores: fwd 2 passes, bwd 3.
  const double scores = bh * sq * skv;
  out.push_back(streaming_cost(name + (backward ? " softmax (bwd)" : " softmax"), OpClass::attention,
                               units::bytes(scores * e * (backward ? 3.0 : 2.0)), units::flop(5.0 * scores), d));
  // Dropout on the probabilities is a kernel of its own in every unfused stack (Megatron-LM's attention_dropout after
  // FusedScaleMaskSoftmax, whose kernels have no dropout: megatron/fused_kernels/scaled_*masked_softmax*.h; HF's
  // eager nn.functional.dropout): forward it reads the probabilities and writes them and a 1-byte mask, backward it
  // reads the gradient and the mask and writes the gradient (PyTorch's fused_dropout / masked_scale).
  if (dropout)
    out.push_back(streaming_cost(name + (backward ? " dropout (bwd)" : " dropout"), OpClass::attention,
                                 units::bytes(scores * (2.0 * e + 1.0)), units::flop(scores), d));
  return out;
}

OpCost decode_attention_cost(const std::string& name, double seqs, std::int64_t q_per_seq, std::int64_t heads,
                             std::int64_t kv_heads, std::int64_t context, std::int64_t d_qk, std::int64_t d_v,
                             units::Bytes kv_bytes_per_token, std::int64_t tile_q, hw::Precision p, const Device& d,
                             bool split_kv) {
  OpCost c;
  c.name = name;
  c.cls = OpClass::attention;
  c.extra_kernels = split_kv ? 1 : 0;  // the combine of the split pass's partial results
  const hw::Precision ap = attention_precision(p);
  const double q = seqs * double(q_per_seq) * double(heads);
  c.flops = units::flop(2.0 * q * double(context) * double(d_qk + d_v));
  c.bytes = kv_bytes_per_token * (seqs * double(context)) + units::bytes(q * double(d_qk + d_v) * element_bytes(ap));
  // Compute side at the fused-attention forward efficiency (the same kernel family); the KV stream at the measured
  // streaming fraction.
  const double rows = double(q_per_seq) * double(heads) / double(std::max<std::int64_t>(1, kv_heads));
  const double padded = tile_q > 0 ? std::ceil(rows / double(tile_q)) * double(tile_q) : rows;
  const units::FlopRate compute = d.peak(ap) * std::max(1e-3, d.eff.attention_fwd);
  c.time = roofline_time(c.flops * (padded / std::max(1.0, rows)), compute, c.bytes,
                         d.stream_bandwidth(),
                         split_kv && d.eff.launch_class.attention.raw() > 0 ? d.eff.launch_class.attention
                                                                          : kernel_fixed(d, OpClass::attention),
                         c.bound);
  c.efficiency = c.time.raw() > 0 ? (c.flops / c.time).raw() / d.peak(ap).raw() : 0.0;
  return c;
}

OpCost ssd_scan_cost(const std::string& name, std::int64_t heads, std::int64_t head_dim, std::int64_t state,
                     std::int64_t groups, std::int64_t chunk, std::int64_t conv_channels, std::int64_t conv_kernel,
                     double tokens, std::int64_t seq, double act_bytes, bool backward, hw::Precision p,
                     const Device& d) {
  OpCost c;
  c.name = name;
  c.cls = OpClass::attention;
  const double k = backward ? 2.0 : 1.0;
  const double inner = double(heads) * double(head_dim);
  const double Q = double(std::max<std::int64_t>(1, std::min(chunk, seq)));
  const double per_token = ssd_scan_flops_per_token(heads, head_dim, state, groups, chunk, seq) +
                           2.0 * double(conv_kernel) * double(conv_channels);
  c.flops = units::flop(k * tokens * per_token);
  const double elems = 2.0 * inner + 2.0 * double(groups) * double(state) + double(heads) + inner;
  const double chunk_states = 2.0 * inner * double(state) * 4.0 / Q;
  c.bytes = units::bytes(k * tokens * (elems * act_bytes + chunk_states));
  const units::FlopRate peak = d.peak(attention_precision(p));
  c.time = roofline_time(c.flops, peak, c.bytes, d.stream_bandwidth(), kernel_fixed(d, OpClass::elementwise), c.bound);
  c.efficiency = c.time.raw() > 0 ? (c.flops / c.time).raw() / peak.raw() : 0.0;
  return c;
}

OpCost gated_delta_scan_cost(const std::string& name, std::int64_t heads, std::int64_t key_dim,
                             std::int64_t value_dim, std::int64_t chunk, std::int64_t conv_channels,
                             std::int64_t conv_kernel, double tokens, std::int64_t seq, double act_bytes,
                             bool backward, hw::Precision p, const Device& d) {
  OpCost c;
  c.name = name;
  c.cls = OpClass::attention;
  const double k = backward ? 2.0 : 1.0;
  const double C = double(std::max<std::int64_t>(1, std::min(chunk, seq)));
  const double per_token = gated_delta_flops_per_token(heads, key_dim, value_dim, chunk, seq) +
                           2.0 * double(conv_kernel) * double(conv_channels);
  c.flops = units::flop(k * tokens * per_token);
  const double vw = double(heads) * double(value_dim);
  const double elems = double(conv_channels) + 2.0 * vw + 2.0 * double(heads) + vw;  // q k v, z, β a, out
  const double chunk_states = 2.0 * double(heads) * double(key_dim) * double(value_dim) * 4.0 / C;
  c.bytes = units::bytes(k * tokens * (elems * act_bytes + chunk_states));
  const units::FlopRate peak = d.peak(attention_precision(p));
  c.time = roofline_time(c.flops, peak, c.bytes, d.stream_bandwidth(), kernel_fixed(d, OpClass::elementwise), c.bound);
  c.efficiency = c.time.raw() > 0 ? (c.flops / c.time).raw() / peak.raw() : 0.0;
  return c;
}

OpCost gated_delta_state_update_cost(const std::string& name, double seqs, std::int64_t heads, std::int64_t key_dim,
                                     std::int64_t value_dim, std::int64_t conv_channels, std::int64_t conv_kernel,
                                     units::Bytes state_bytes, double act_bytes, const Device& d) {
  const double vw = double(heads) * double(value_dim);
  const double flops = seqs * (2.0 * double(conv_kernel) * double(conv_channels) +
                               7.0 * double(heads) * double(key_dim) * double(value_dim));
  // The state read and written back, plus the token's q, k, v, z, β, a in and its output out.
  const double bytes = seqs * (2.0 * state_bytes.raw() + (double(conv_channels) + 2.0 * vw + 2.0 * double(heads)) * act_bytes);
  return streaming_cost(name, OpClass::attention, units::bytes(bytes), units::flop(flops), d);
}

OpCost indexer_cost(const std::string& name, double queries, double pairs, std::int64_t heads, std::int64_t head_dim,
                    double key_reads, double key_bytes, bool backward, const Device& d) {
  OpCost c;
  c.name = name;
  c.cls = OpClass::attention;
  const double k = backward ? 2.0 : 1.0;
  c.flops = units::flop(k * pairs * 2.0 * double(heads) * double(head_dim));
  c.bytes = units::bytes(k * (pairs * 8.0 + queries * double(heads) * double(head_dim) + key_reads * key_bytes));
  const units::FlopRate peak = d.peak(hw::Precision::fp8);
  c.time = roofline_time(c.flops, peak, c.bytes, d.stream_bandwidth(), kernel_fixed(d, OpClass::elementwise), c.bound);
  c.efficiency = c.time.raw() > 0 ? (c.flops / c.time).raw() / peak.raw() : 0.0;
  return c;
}

OpCost ssm_state_update_cost(const std::string& name, double seqs, std::int64_t heads, std::int64_t head_dim,
                             std::int64_t state, std::int64_t conv_channels, std::int64_t conv_kernel,
                             units::Bytes state_bytes, double act_bytes, const Device& d) {
  const double inner = double(heads) * double(head_dim);
  const double flops = seqs * (2.0 * double(conv_kernel) * double(conv_channels) +
                               5.0 * double(heads) * double(head_dim) * double(state));
  // The state read and written back, plus the token's x, B, C, dt, z in and y out.
  const double bytes = seqs * (2.0 * state_bytes.raw() + (double(conv_channels) + 2.0 * inner + double(heads)) * act_bytes);
  OpCost c = streaming_cost(name, OpClass::attention, units::bytes(bytes), units::flop(flops), d);
  return c;
}

OpCost norm_cost(const std::string& name, units::Bytes bytes, units::Flops flops, std::int64_t row, const Device& d) {
  OpCost c = streaming_cost(name, OpClass::elementwise, bytes, flops, d);
  const units::Flops f = flops;
  c.time = roofline_time(f, d.peak(hw::Precision::fp32), bytes, d.stream_bandwidth(), norm_fixed(d, row), c.bound);
  if (c.time.raw() > 0) c.efficiency = (flops / c.time).raw() / d.peak(hw::Precision::fp32).raw();
  return c;
}

OpCost streaming_cost(const std::string& name, OpClass cls, units::Bytes bytes, units::Flops flops, const Device& d) {
  OpCost c;
  c.name = name;
  c.cls = cls;
  c.flops = flops;
  c.bytes = bytes;
  c.efficiency = 0.0;
  const units::FlopRate vector_peak = d.peak(hw::Precision::fp32);
  // A streaming kernel, whatever op it belongs to (a softmax pass, a recurrent state update): the elementwise class.
  c.time = roofline_time(flops, vector_peak, bytes, d.stream_bandwidth(), kernel_fixed(d, OpClass::elementwise),
                         c.bound);
  if (c.time.raw() > 0) c.efficiency = (flops / c.time).raw() / vector_peak.raw();
  return c;
}

}  // namespace gpuplan::model
