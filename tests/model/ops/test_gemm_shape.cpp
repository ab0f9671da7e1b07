// GEMM shape effects (#27 item 6): leading-dimension alignment and the tile/wave staircase, against our H100 sweeps
// (data/validation/measured/h100-sxm5-80gb/gemm_alignment.json and gemm_staircase.json), and the formulas of
// ops.cpp gemm_cost by hand. The sweeps' absolute level (torch at 1980 MHz) sits a few percent above the calibration
// samples the profile was fitted to; what is checked here is the shape: ratios between neighbouring shapes, and the
// staircase with its level taken out.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.hpp"
#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/model/gemm_fp16.hpp"
#include "gpuplan/model/ops.hpp"
#include "library.hpp"

namespace {

using namespace gpuplan;
using hw::Precision;

const model::Device& h100() {
  static const model::Device d = model::make_device(*test::hardware().find_gpu("h100-sxm5-80gb"));
  return d;
}
/// The same parts with the stream-K decomposition on (EfficiencyProfile::stream_k: measured, off in the built-in rows).
model::Device stream_k(const model::Device& base) {
  model::Device d = base;
  d.eff.stream_k = true;
  return d;
}
const model::Device& h100_sk() {
  static const model::Device d = stream_k(h100());
  return d;
}
const model::Device& a100() {
  static const model::Device d = stream_k(model::make_device(*test::hardware().find_gpu("a100-sxm4-80gb")));
  return d;
}

nlohmann::json measured(const std::string& file) {
  std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured/h100-sxm5-80gb/" + file);
  REQUIRE_MESSAGE(in.good(), file);
  return nlohmann::json::parse(in);
}

double t(std::int64_t m, std::int64_t n, std::int64_t k, Precision p = Precision::bf16,
         const model::Device& d = h100()) {
  return model::gemm_cost("g", {m, n, k, 1}, p, d).time.raw();
}

/// Whether cuBLAS ran a split-K kernel at a bf16 staircase point (gemm_graph_kernels.json, the kernels of each point;
/// fp16 runs were not traced: the bf16 kernels stand for both).
bool split_k_at(const std::string& layer, int m) {
  static const nlohmann::json k = [] {
    std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured/h100-sxm5-80gb/gemm_graph_kernels.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in).at("kernels");
  }();
  const std::string key = layer + "|" + std::to_string(m);
  if (!k.contains(key)) return false;
  for (const auto& kernel : k.at(key))
    if (kernel.at(0).get<std::string>().find("splitK") != std::string::npos) return true;
  return false;
}

/// The most points of one series (in M order) that a model whose time never falls as M grows can hold within ±tol
/// of their measured times. A set is reachable iff no earlier point's lower bound (1 − tol)·t_i exceeds a later
/// point's upper bound (1 + tol)·t_j (then f(M_j) = the running maximum of the lower bounds is such a model), so a
/// dynamic programme over that running maximum finds the largest set: its states are (lower bound, points held),
/// keeping only those no state with a smaller bound holds as many points as.
int monotone_reachable(const std::vector<double>& times, double tol) {
  std::vector<std::pair<double, int>> states{{0.0, 0}};  // ascending bound, strictly rising count
  for (double t : times) {
    std::vector<std::pair<double, int>> next = states;
    for (const auto& [bound, held] : states)
      if (bound <= (1.0 + tol) * t) next.emplace_back(std::max(bound, (1.0 - tol) * t), held + 1);
    std::sort(next.begin(), next.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    states.clear();
    for (const auto& s : next)
      if (states.empty() || s.second > states.back().second) states.push_back(s);
  }
  return states.back().second;
}

double median(std::vector<double> v) {
  REQUIRE(!v.empty());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

TEST_SUITE("GEMM leading-dimension alignment") {
  TEST_CASE("4096×4096×4097 bf16 runs in the element-aligned fallback class: η × 0.176, not as aligned") {
    const auto& d = h100();
    const auto aligned = model::gemm_cost("a", {4096, 4096, 4096, 1}, Precision::bf16, d);
    const auto odd = model::gemm_cost("u", {4096, 4096, 4097, 1}, Precision::bf16, d);
    // Same tiles and depth (k = 4097 is one more 64-element iteration per tile: 65 against 64, a 0.03% depth change);
    // the efficiency falls by the element class's factor.
    CHECK(odd.efficiency / aligned.efficiency == gptest::approx(d.eff.gemm_alignment.element).epsilon(0.002));
    CHECK(d.eff.gemm_alignment.element == gptest::approx(0.176));
    // Measured: 782 against 145 TFLOP/s, 5.4× (gemm_alignment.json, bf16 nn); the model within 10%.
    const double slowdown = odd.time.raw() / aligned.time.raw();
    CHECK(slowdown == gptest::approx(5.4).epsilon(0.10));
  }

  TEST_CASE("the alignment class is the largest power of two dividing the leading dimension's bytes, up to 16") {
    const auto& d = h100_sk();  // whole-tile waves would add a wave at n = 4104 (see the sweep test)
    const double e0 = model::gemm_cost("a", {4096, 4096, 4096, 1}, Precision::bf16, d).efficiency;
    // n = 4104 (8208 B, 16-byte aligned): no class change, only a partial tile column.
    CHECK(model::gemm_cost("a", {4096, 4104, 4096, 1}, Precision::bf16, d).efficiency > 0.9 * e0);
    // k = 4100 (8200 B: 8-byte), k = 4098 (8196 B: 4-byte): the vector class; k = 4099: the element class.
    for (const auto& [k, factor] : {std::tuple{4100, 0.368}, std::tuple{4098, 0.368}, std::tuple{4099, 0.176}}) {
      const auto& captured_k = k;  // clang 14: no structured binding in CAPTURE's lambda
      CAPTURE(captured_k);
      const auto c = model::gemm_cost("k", {4096, 4096, k, 1}, Precision::bf16, d);
      CHECK(c.efficiency / e0 == gptest::approx(factor).epsilon(0.002));
    }
    // m is never a leading dimension: m = 4097 changes the tiles, not the class.
    CHECK(model::gemm_cost("m", {4097, 4096, 4096, 1}, Precision::bf16, d).efficiency > 0.95 * e0);
    // tf32 (4-byte elements on tensor cores): an odd dimension is 4-byte aligned, the vector class (our H200 probe:
    // GPT-2's 50,257-wide head at 0.36 of the 50,304-wide one, optstack_probe.json).
    const double f0 = model::gemm_cost("f", {4096, 4096, 4096, 1}, Precision::tf32, d).efficiency;
    CHECK(model::gemm_cost("f", {4096, 4096, 4097, 1}, Precision::tf32, d).efficiency / f0 ==
          gptest::approx(0.368).epsilon(0.002));
    // fp32 without TF32 runs SIMT FFMA kernels: no class (the same probe: the 50,257-wide head as fast as 50,304,
    // 4096³ at k = 4097 within 3%).
    const double s0 = model::gemm_cost("s", {4096, 4096, 4096, 1}, Precision::fp32, d).efficiency;
    CHECK(model::gemm_cost("s", {4096, 4096, 4097, 1}, Precision::fp32, d).efficiency / s0 > 0.99);
  }

  TEST_CASE("fp8 has no fallback kernels: an unaligned k or n is priced as the GEMM padded to 16 bytes") {
    const auto& d = h100();
    // k = 4097 fp8 -> padded to 4112 (the next multiple of 16): the efficiency carries 4097/4112 of useful work.
    const auto u = model::gemm_cost("u", {4096, 4096, 4097, 1}, Precision::fp8, d);
    const auto p = model::gemm_cost("p", {4096, 4096, 4112, 1}, Precision::fp8, d);
    CHECK(u.efficiency == gptest::approx(p.efficiency * 4097.0 / 4112.0).epsilon(1e-12));
    // Measured: torch._scaled_mm refuses every k, n not a multiple of 16 (gemm_alignment.json, "refused").
    const auto j = measured("gemm_alignment.json");
    int refused = 0;
    for (const auto& r : j.at("results"))
      if (r.at("dtype") == "fp8" && r.at("varied") != "M" && r.at(r.at("varied").get<std::string>()).get<int>() % 16 != 0)
        refused += r.at("status") == "refused" ? 1 : 0;
    CHECK(refused == 32);
  }

  TEST_CASE("the alignment sweep: per class, the model's slowdown against the 4096 neighbour within 10% (median)") {
    // With the stream-K decomposition: whole-tile waves would add their cliff at n = 4097…4104 (a 17th tile column:
    // 5 waves instead of 4, +25%), which the sweep does not show (2-4%). For every bf16/fp16 point of gemm_alignment.json: model t(shape)/t(4096³) against measured t/t(4096³), grouped
    // by what was varied and its class. Spread inside a class (layouts, K vs N) is up to ±30%: the per-class factor
    // is one number, not a per-shape fit.
    const auto j = measured("gemm_alignment.json");
    std::map<std::string, std::map<int, double>> series;  // dtype/layout/varied -> value -> time
    for (const auto& r : j.at("results")) {
      if (r.at("status") != "ok" || (r.at("dtype") != "bf16" && r.at("dtype") != "fp16")) continue;
      const std::string v = r.at("varied");
      series[r.at("dtype").get<std::string>() + "/" + r.at("layout").get<std::string>() + "/" + v][r.at(v).get<int>()] =
          r.at("time_median_s").get<double>();
    }
    REQUIRE(series.size() == 12);
    std::map<std::string, std::vector<double>> err;  // class -> model/measured ratio errors
    std::vector<double> all_unaligned;
    for (const auto& [key, s] : series) {
      const char varied = key.back();
      const double base = s.at(4096);
      for (const auto& [x, time] : s) {
        const std::int64_t m = varied == 'M' ? x : 4096, n = varied == 'N' ? x : 4096, k = varied == 'K' ? x : 4096;
        const Precision p = key.rfind("fp16", 0) == 0 ? Precision::fp16 : Precision::bf16;
        const double model_ratio = t(m, n, k, p, h100_sk()) / t(4096, 4096, 4096, p, h100_sk());
        const double e = model_ratio / (time / base) - 1.0;
        const int bytes = 2 * x;
        const std::string cls = varied == 'M' ? "m varied" : bytes % 16 == 0 ? "16-byte" : bytes % 4 == 0 ? "4/8-byte" : "2-byte";
        err[cls].push_back(e);
        if (cls == "4/8-byte" || cls == "2-byte") all_unaligned.push_back(std::fabs(e));
      }
    }
    for (const auto& [cls, e] : err) {
      const auto& captured_cls = cls;  // clang 14: no structured binding in CAPTURE's lambda
      CAPTURE(captured_cls);
      std::vector<double> a;
      for (double x : e) a.push_back(std::fabs(x));
      CHECK(median(a) < 0.10);
    }
    // Every m-varied point within 12%: m is no leading dimension, the class never changes; the sweep is at most 11%
    // slower at m = 4103 (fp16 nn, a heuristic's kernel switch), the model 0-2% from tile padding.
    for (double e : err.at("m varied")) CHECK(std::fabs(e) < 0.12);
    CHECK(median(all_unaligned) < 0.10);
  }
}

TEST_SUITE("GEMM tile staircase") {
  TEST_CASE("stream-K by hand: 384×22016×4096 bf16 on 132 SMs keeps the 128×256 tile") {
    // 64 main-loop iterations of 64 elements per tile; u = m·n·64 / (132 · ⌈tiles·64/132⌉ · tm · tn):
    //   128×256: 3·86 = 258 tiles, 16,512 iterations, 126 per SM: u = 541,065,216 / 544,997,376 = 0.99278
    //   256×128: 2·172 = 344 tiles, 167 per SM: u = 0.74905 (half its second tile row is padding)
    //   128×128 and 64×256: 33,024 iterations, 251 per SM: u = 0.99674; 64×128 and 32×256: 0.99873; 32×128 and
    //   16×256: 0.99973; 16×128: 0.99973
    // None gains more than kGemmTileMargin (1%) over 128×256, which stays. Every candidate owns whole tiles (k-range =
    // K), so the depth law is the same for all.
    const auto& d = h100_sk();
    const double u = 541065216.0 / (132.0 * 126.0 * 128.0 * 256.0);
    CHECK(u == gptest::approx(0.99278).epsilon(1e-5));
    const auto c = model::gemm_cost("g", {384, 22016, 4096, 1}, Precision::bf16, d);
    const double g = model::gemm_depth_factor(d.eff, Precision::bf16, 4096.0);
    CHECK(c.efficiency == gptest::approx(model::gemm_ceiling(d.eff, Precision::bf16) * u * g).epsilon(1e-12));
  }

  TEST_CASE("a smaller tile wins where it saves padding: 136×4096×4096 takes 16-row tiles") {
    // 128-row tiles pad 136 rows to 256; 16-row tiles to 144. With 128×256: 2·16 = 32 tiles, 2,048 iterations, 16 per
    // SM, u = 136·4096·64/(132·16·32768) = 0.5152. Down the list each step must gain 1%: 64×256 0.6869, 64×128 0.7015,
    // 32×256 0.8454, then 16×256: 9·16 = 144 tiles, 9,216 iterations, 70 per SM, u = 136·4096·64/(132·70·16·256) =
    // 0.9420 (16×128 gives the same and is not taken). 70 iterations per SM > 64: whole tiles, depth law at K.
    const auto& d = h100_sk();
    const auto c = model::gemm_cost("g", {136, 4096, 4096, 1}, Precision::bf16, d);
    const double u = (136.0 * 4096.0 * 64.0) / (132.0 * 70.0 * 16.0 * 256.0);
    CHECK(u == gptest::approx(0.94199).epsilon(1e-4));
    const double g = model::gemm_depth_factor(d.eff, Precision::bf16, 4096.0);
    CHECK(c.efficiency == gptest::approx(model::gemm_ceiling(d.eff, Precision::bf16) * u * g).epsilon(1e-12));
  }

  TEST_CASE("Llama-3-70B's TP 2 GEMMs on the H200 above 256 rows: the tile turned as cuBLAS ran it, and the layer within 10%") {
    // cuBLAS 13 on our H200 (gemm_graph_kernels_llama3_70b_tp2.json) runs the down projection 289×8192×14336 as
    // nvjet 128×152 tiles: two rows of 152 over 128-wide N tiles, a [2, 64] grid of 128 CTAs. The built-in rows'
    // orientation (three rows of 104 over 256-wide tiles, 96 tiles on 132 SMs) has u = 289·8192 / (132·104·256) =
    // 0.674; the turned tile, 128 tiles in one wave, u = 289·8192 / (132·152·128) = 0.922, and is priced (ops.cpp
    // swapped_tiles). Before it the model's layer (the four shapes) was 10-24% slow at M = 257…300.
    const model::Device h200 = model::make_device(*test::hardware().find_gpu("h200-sxm-141gb"));
    const double u = 289.0 * 8192.0 / (132.0 * 152.0 * 128.0);
    CHECK(u == gptest::approx(0.9219).epsilon(1e-4));
    const auto c = model::gemm_cost("g", {289, 8192, 14336, 1}, Precision::bf16, h200);
    const double g = model::gemm_depth_factor(h200.eff, Precision::bf16, 14336.0);
    CHECK(c.efficiency == gptest::approx(model::gemm_ceiling(h200.eff, Precision::bf16) * u * g).epsilon(1e-12));
    // The four per-GPU shapes alone in CUDA graphs (gemm_graph_staircase_llama3_70b_tp2.json, every M 257…300),
    // summed per layer, against the model at the graph's per-kernel cost (the built-in 2.5 µs of a graphed kernel,
    // ServingPerfPlan::kernel_overhead_graph, in place of the eager 5): every point within 10% (−0.7% … +8.7%).
    std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) +
                     "/validation/measured/h200-sxm-141gb/gemm_graph_staircase_llama3_70b_tp2.json");
    REQUIRE(in.good());
    const auto j = nlohmann::json::parse(in);
    std::map<int, std::pair<double, double>> layer;  // M -> (measured, model), s
    std::map<int, int> shapes;
    for (const auto& r : j.at("results")) {
      const int m = r.at("M");
      if (r.at("status") != "ok" || m < 257 || m > 300) continue;
      const double model_s = model::gemm_cost("g", {m, r.at("N"), r.at("K"), 1}, Precision::bf16, h200).time.raw() -
                             h200.eff.kernel_launch.raw() + 2.5e-6;
      layer[m].first += r.at("time_median_s").get<double>();
      layer[m].second += model_s;
      ++shapes[m];
    }
    REQUIRE(layer.size() == 44);
    int within = 0;
    for (const auto& [m, tm] : layer) {
      CAPTURE(m);
      REQUIRE(shapes[m] == 4);
      within += std::fabs(tm.second / tm.first - 1.0) <= 0.10 ? 1 : 0;
    }
    CHECK(within == 44);
  }

  TEST_CASE("no flat step from M = 256 to 384 and no jump after it: M×22016×4096 time rises with M") {
    // Before (whole 128×256 tiles in waves): 101.5 µs flat from M = 257 to 384, 150.8 µs at 392. Measured
    // (gemm_staircase.json): 78.1, 91.4, 96.1, 99.6 µs at M = 256, 320, 384, 392.
    const auto& d = h100_sk();
    const double t256 = t(256, 22016, 4096, Precision::bf16, d), t320 = t(320, 22016, 4096, Precision::bf16, d),
                 t384 = t(384, 22016, 4096, Precision::bf16, d), t392 = t(392, 22016, 4096, Precision::bf16, d);
    // The built-in rows (whole tiles in waves): before the turned tile (2026-11-30) flat at 101 µs from 256 to 384
    // (two rows of 128-row tiles over 256-wide N: 172 tiles in 2 waves of 132, u = 256·22016 / (264·128·256) =
    // 0.651). Now the fuller orientation (ops.cpp swapped_tiles): at M = 256 the tile turned, two rows of 128 over
    // 128-wide N tiles, 344 tiles in 3 waves, u = 256·22016 / (396·128·128) = 0.8687; at M = 384 the built-in one,
    // three rows of 128 over 256-wide N, 258 tiles in 2 waves, u = 384·22016 / (264·128·256) = 0.977 (turned, 0.8687
    // again). The compute terms then stand at (256/0.8687) / (384/0.977) = 0.75 (measured 78.1 / 96.1 = 0.81).
    // M = 257 (two rows of 136, u = 0.821) costs M = 256's time: the cap keeps u·g at M/256 of M = 256's.
    const auto& b = h100();
    const double u256 = 256.0 * 22016.0 / (396.0 * 128.0 * 128.0), u384 = 384.0 * 22016.0 / (264.0 * 128.0 * 256.0);
    CHECK(u256 == gptest::approx(0.8687).epsilon(1e-4));
    CHECK(u384 == gptest::approx(0.9773).epsilon(1e-4));
    const double cg = model::gemm_ceiling(b.eff, Precision::bf16) * model::gemm_depth_factor(b.eff, Precision::bf16, 4096.0);
    CHECK(model::gemm_cost("g", {256, 22016, 4096, 1}, Precision::bf16, b).efficiency ==
          gptest::approx(cg * u256).epsilon(1e-12));
    CHECK(model::gemm_cost("g", {384, 22016, 4096, 1}, Precision::bf16, b).efficiency ==
          gptest::approx(cg * u384).epsilon(1e-12));
    const double fixed = b.eff.kernel_launch.raw();
    CHECK((t(256, 22016, 4096) - fixed) / (t(384, 22016, 4096) - fixed) ==
          gptest::approx((256.0 / u256) / (384.0 / u384)).epsilon(1e-9));
    CHECK(t(257, 22016, 4096) == gptest::approx(t(256, 22016, 4096)).epsilon(1e-9));
    CHECK(t256 < t320);
    CHECK(t320 < t384);
    CHECK(t392 / t384 < 1.10);
    CHECK(t392 >= t384);
  }

  TEST_CASE("time does not fall as M rises (beyond the 1% tile margin), and throughput M/t rises on the 64-row grid wherever the measured one does") {
    const auto j = measured("gemm_staircase.json");
    std::map<std::string, std::map<int, std::tuple<int, int, double>>> by_layer;  // layer -> M -> (N, K, time)
    for (const auto& r : j.at("results"))
      if (r.at("status") == "ok")
        by_layer[r.at("layer")][r.at("M").get<int>()] = {r.at("N").get<int>(), r.at("K").get<int>(),
                                                         r.at("time_median_s").get<double>()};
    REQUIRE(by_layer.size() == 4);
    for (const auto& [layer, s] : by_layer) {
      const auto& captured_layer = layer;  // clang 14: no structured binding in CAPTURE's lambda
      CAPTURE(captured_layer);
      const int n = std::get<0>(s.begin()->second), k = std::get<1>(s.begin()->second);
      // Never by more than the tile margin: at m + 1 a smaller tile may win by more than kGemmTileMargin where at m
      // the larger one was kept within it.
      double prev = 0.0;
      for (int m = 1; m <= 1024; ++m) {
        const double now = t(m, n, k, Precision::bf16, h100_sk());
        CHECK(now >= prev * (1.0 - model::kGemmTileMargin));
        prev = now;
      }
      for (int m = 64; m + 64 <= 1024; m += 64) {
        if (!s.count(m) || !s.count(m + 64)) continue;
        const bool measured_rises = (m + 64) / std::get<2>(s.at(m + 64)) >= m / std::get<2>(s.at(m));
        if (measured_rises)
          CHECK((m + 64) / t(m + 64, n, k, Precision::bf16, h100_sk()) >=
                (1.0 - model::kGemmTileMargin) * m / t(m, n, k, Precision::bf16, h100_sk()));
      }
    }
  }

  TEST_CASE("the staircase sweep, M ≥ 192, level taken out: median error within 10% (whole-tile waves: 25%)") {
    // Model over measured time for every point of gate_up (22016×4096), down (4096×11008), qkv (12288×4096) and out
    // (4096×4096); the median ratio is the level (calibration conditions against this sweep's), the rest the shape.
    // out_7b is the one layer cuBLAS runs on few SMs at small M (≈35 µs flat where the weights stream in 12): its
    // errors stay in the median, not in a fit.
    const auto j = measured("gemm_staircase.json");
    std::vector<double> ratio;
    for (const auto& r : j.at("results")) {
      if (r.at("status") != "ok" || r.at("M").get<int>() < 192) continue;
      ratio.push_back(t(r.at("M"), r.at("N"), r.at("K"), Precision::bf16, h100_sk()) / r.at("time_median_s").get<double>());
    }
    REQUIRE(ratio.size() > 400);
    const double level = median(ratio);
    CHECK(level == gptest::approx(1.0).epsilon(0.10));
    std::vector<double> shape;
    for (double x : ratio) shape.push_back(std::fabs(x / level - 1.0));
    CHECK(median(shape) < 0.10);
    // The built-in rows' whole-tile waves on the same points, for the record: 25% with whole 128-row tiles, 22.3%
    // with the tile rows following M (ops.cpp tile_rows), 20.6% with the fuller of the two tile orientations
    // (swapped_tiles, 2026-11-30).
    std::vector<double> waves;
    for (const auto& r : j.at("results")) {
      if (r.at("status") != "ok" || r.at("M").get<int>() < 192) continue;
      waves.push_back(std::fabs(t(r.at("M"), r.at("N"), r.at("K")) / r.at("time_median_s").get<double>() - 1.0));
    }
    CHECK(median(waves) == gptest::approx(0.206).epsilon(0.01));
  }

  TEST_CASE("the CUDA-graph staircase: every one of its 2,214 points priced, 1,850 within 10% with stream-K (whole-tile waves: 832)") {
    // gemm_graph_staircase.json (scripts/measure/gemm_graph_sweep.py, our H100, 2026-11-27): F.linear bf16 and fp16 on
    // the four Llama-2-7B layer shapes, every M from 1 to 512 on 22016×4096 and M = 1…16, 120…160 and every 8th to
    // 1024 on the others, each timed inside a CUDA graph (no host in the loop). Every point is compared; none is
    // skipped. 2026-11-27: 1,845 within 10% (bf16 917 of 1,107, fp16 928); with fp16's power-capped tensor rate
    // (gemm_fp16.hpp, 0.961) 1,850 (bf16 917, fp16 933). The 364 misses, each put in the first class
    // that holds it (docs/gemm-shapes.md says why each class misses; kernels from gemm_graph_kernels.json):
    //  A  the measured time is more than 1.21× the time of a larger M of the same layer and type (a heuristic kernel
    //     switch, e.g. 22016×4096 at M = 209…240 but 224: 512×72 cooperative tiles at 95 µs against 74-77 µs at
    //     M = 241…256): no model whose time rises with M can be within 10% of both points — 75;
    //  A2 the model is too slow where the measured time is under 1/1.21 of a smaller M's (4096×4096 at M ≥ 472 falls
    //     back below M = 448's 73 µs kernel) — 28;
    //  B  4096×11008 (K = 11,008, 172 main-loop iterations) run without split-K: 128 CTAs of small data-parallel tiles
    //     (64×72 … 128×128) at 41-83 µs where the decomposition needs 37-60 µs — 112;
    //  C  other points where the kernel cuBLAS picked is slower than the decomposition (model faster) — 77;
    //  D  the model slower, no switch: 4096×4096 (12-46 µs), where the built-in 5 µs per kernel is 1-3 µs too much —
    //     the memory-bound points (M = 8…72) take 3.3-4.5 µs over bytes/(0.887·BW), the compute-bound ones (M = 408…824)
    //     1-2 µs over the compute time. Not the graph's replay gap: priced with 0.79 µs the sweep loses 641 points
    //     (the next test); a memory-bound GEMM in a graph pays 3.2 µs over the measured GEMM bandwidth — 72.
    const auto j = measured("gemm_graph_staircase.json");
    std::map<std::string, std::map<int, double>> t_meas;  // dtype/layer -> M -> time
    for (const auto& r : j.at("results")) {
      REQUIRE(r.at("status") == "ok");  // every point was measured and checked against its fp32 reference
      t_meas[r.at("dtype").get<std::string>() + "/" + r.at("layer").get<std::string>()][r.at("M").get<int>()] =
          r.at("time_median_s").get<double>();
    }
    int n = 0, within_waves = 0;
    std::map<std::string, int> within_sk, misses;
    std::vector<double> err;
    for (const auto& r : j.at("results")) {
      const std::string dt = r.at("dtype"), layer = r.at("layer");
      const int m = r.at("M");
      const Precision p = dt == "fp16" ? Precision::fp16 : Precision::bf16;
      const double meas = r.at("time_median_s").get<double>();
      const double e_sk = t(m, r.at("N"), r.at("K"), p, h100_sk()) / meas - 1.0;
      const double e_w = t(m, r.at("N"), r.at("K"), p) / meas - 1.0;
      ++n;
      within_sk[dt] += std::fabs(e_sk) <= 0.10 ? 1 : 0;
      within_waves += std::fabs(e_w) <= 0.10 ? 1 : 0;
      err.push_back(std::fabs(e_sk));
      if (std::fabs(e_sk) <= 0.10) continue;
      const auto& s = t_meas.at(dt + "/" + layer);
      double later_min = 1e9, earlier_max = 0.0;
      for (const auto& [mm, tt] : s) {
        if (mm > m) later_min = std::min(later_min, tt);
        if (mm < m) earlier_max = std::max(earlier_max, tt);
      }
      if (e_sk < 0 && meas > 1.21 * later_min) ++misses["A"];
      else if (e_sk > 0 && 1.21 * meas < earlier_max) ++misses["A2"];
      else if (e_sk > 0) ++misses["D"];
      else if (layer == "down_7b" && !split_k_at(layer, m)) ++misses["B"];
      else ++misses["C"];
    }
    CHECK(n == 2214);
    CHECK(within_sk["bf16"] == 917);  // 2026-11-27
    CHECK(within_sk["fp16"] == 933);  // 928 before the fp16 tensor rate
    CHECK(within_sk["bf16"] + within_sk["fp16"] == 1850);
    CHECK(median(err) < 0.05);    // 4.4%
    // The built-in rows' whole-tile waves: 832 with whole 128-row tiles, 1,040 with tile_rows, 1,315 with the fuller
    // of the two tile orientations (swapped_tiles, 2026-11-30).
    CHECK(within_waves == 1315);
    CHECK(misses["A"] == 75);
    CHECK(misses["A2"] == 28);
    CHECK(misses["B"] == 112);
    CHECK(misses["C"] == 77);
    CHECK(misses["D"] == 72);
    // How many points can a model whose time never falls with M reach at all? Per series (type × layer, in M order)
    // the largest set it can hold within 10% (monotone_reachable): 2,160 of the 2,214; the other 54 are the far side
    // of the kernel switches (bf16: 22016×4096 17, 4096×11008 4, 4096×4096 2; fp16: 26, 4 and 1; 12288×4096 none).
    // So the done-when's "within 10%" is judged on 2,160 points: 1,850 of them today (85.6%).
    int reachable = 0;
    std::map<std::string, int> unreachable;
    for (const auto& [key, s] : t_meas) {
      std::vector<double> times;
      for (const auto& [mm, tt] : s) times.push_back(tt);
      const int r = monotone_reachable(times, 0.10);
      reachable += r;
      unreachable[key] = int(times.size()) - r;
    }
    CHECK(reachable == 2160);
    CHECK(unreachable["bf16/gate_up_7b"] == 17);
    CHECK(unreachable["fp16/gate_up_7b"] == 26);
    CHECK(unreachable["bf16/down_7b"] + unreachable["fp16/down_7b"] == 8);
    CHECK(unreachable["bf16/out_7b"] + unreachable["fp16/out_7b"] == 3);
    CHECK(unreachable["bf16/qkv_7b"] + unreachable["fp16/qkv_7b"] == 0);
    // By hand: {10, 12, 8, 12.5} holds 10, 12 and 12.5; 8 cannot join 10 or 12 (0.9·10 = 9 > 1.1·8 = 8.8).
    CHECK(monotone_reachable({10.0, 12.0, 8.0, 12.5}, 0.10) == 3);
    CHECK(monotone_reachable({10.0, 8.0}, 0.10) == 1);
    CHECK(monotone_reachable({1.0, 2.0, 3.0}, 0.10) == 3);
    // The heuristic band: at M = 209…240 (but 224) the 22016×4096 GEMM takes over 1.2× its time at M = 241, in both
    // types; a model whose time never falls with M (the test above) misses either those points or M = 241 by 10%.
    for (const char* dt : {"bf16", "fp16"}) {
      const auto& g = t_meas.at(std::string(dt) + "/gate_up_7b");
      for (int m = 209; m <= 240; ++m) {
        CAPTURE(m);
        if (m == 224) CHECK(g.at(m) < 1.05 * g.at(241));
        else CHECK(g.at(m) > 1.2 * g.at(241));
      }
    }
  }

  TEST_CASE("inside a CUDA graph a memory-bound GEMM pays about 3 µs over its streaming time, not the 0.79 µs replay gap") {
    // #27: is the built-in 5 µs per kernel too high inside CUDA graphs, where an empty kernel costs 0.79 µs (our
    // calibration profile's graph_kernel_s)? The graph sweep answers for GEMMs. Its memory-bound points (M ≤ 16, all
    // four Llama-2-7B layers, bf16 and fp16: 128 points, weights 34-180 MB) fit t = a + bytes / (η·BW) with
    // a = 3.17 µs, η = 0.846 (least squares, residual 1.3 µs rms). The calibration bench, which times short GEMMs
    // in CUDA graphs too (calibrate/bench/common.cuh, graph_below_s), fitted 2.96 µs and 0.8461 on other shapes
    // (profile.json, gemm_memory): the two agree. So a GEMM inside a graph pays the replay gap plus its own ramp and
    // drain; the gap is a quarter of it.
    const auto j = measured("gemm_graph_staircase.json");
    const double bw = h100().gpu->memory.bandwidth.raw();
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int n = 0;
    for (const auto& r : j.at("results")) {
      const double m = r.at("M"), nn = r.at("N"), k = r.at("K");
      if (m > 16) continue;
      const double x = (m * k + k * nn + m * nn) * 2.0, y = r.at("time_median_s");
      sx += x, sy += y, sxx += x * x, sxy += x * y;
      ++n;
    }
    REQUIRE(n == 128);
    const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - slope * sx) / n;
    const double eta = 1.0 / (slope * bw);
    CHECK(a == gptest::approx(3.17e-6).epsilon(0.05));
    CHECK(eta == gptest::approx(0.846).epsilon(0.01));
    std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/calibration/h100-sxm5-80gb/profile.json");
    REQUIRE(in.good());
    const auto prof = nlohmann::json::parse(in);
    const double t0_cal = prof.at("gemm_memory").at("t0_s"), eta_cal = prof.at("gemm_memory").at("efficiency");
    const double gap = prof.at("graph_kernel_s");
    CHECK(eta / eta_cal == gptest::approx(1.0).epsilon(0.01));  // 0.846 / 0.8461
    CHECK(std::fabs(a - t0_cal) < 0.4e-6);                        // 3.17 against 2.96 µs
    CHECK(a > 3.5 * gap);                                         // the empty kernel's 0.79 µs is the smaller part
    // The built-in H100 row streams GEMMs at the BabelStream fraction 0.887, and at that bandwidth the same points
    // need 4.6 µs (median of measured − bytes/(0.887·BW)): its 5 µs is near what a graph pays. Per layer at M = 1 the
    // built-in pair is within 6% (0.971-1.059: out bf16 16.3 against 15.8 µs, gate_up 65.7 against 67.4, qkv 38.9
    // against 36.7).
    for (const auto& r : j.at("results")) {
      if (r.at("M") != 1) continue;
      CAPTURE(r.at("layer").get<std::string>());
      const Precision p = r.at("dtype") == "fp16" ? Precision::fp16 : Precision::bf16;
      CHECK(t(1, r.at("N"), r.at("K"), p, h100_sk()) / r.at("time_median_s").get<double>() ==
            gptest::approx(1.0).epsilon(0.06));
    }
    // Priced with the replay gap as the whole per-kernel cost, the staircase loses a third of its points: 1,850 → 1,209
    // within 10% (every layer gets worse; the memory-bound points fall 20-25% short).
    model::Device gap_only = h100_sk();
    gap_only.eff.kernel_launch = units::Seconds(gap);
    int within_5us = 0, within_gap = 0;
    for (const auto& r : j.at("results")) {
      const Precision p = r.at("dtype") == "fp16" ? Precision::fp16 : Precision::bf16;
      const double meas = r.at("time_median_s");
      within_5us += std::fabs(t(r.at("M"), r.at("N"), r.at("K"), p, h100_sk()) / meas - 1.0) <= 0.10 ? 1 : 0;
      within_gap += std::fabs(t(r.at("M"), r.at("N"), r.at("K"), p, gap_only) / meas - 1.0) <= 0.10 ? 1 : 0;
    }
    CHECK(within_5us == 1850);
    CHECK(within_gap == 1209);
  }

  TEST_CASE("where cuBLAS splits K in the graph sweep, and what the split costs: one reduce kernel, 1-1.6 µs") {
    // gemm_graph_kernels.json (the kernels of every bf16 staircase point): cuBLAS 13 splits K at 47 of 1,107 points —
    // 4096×11008 at M ≤ 120 and M = 144, 160, 4096×4096 at M ≤ 16 — always followed by one splitKreduce kernel over
    // the fp32 partials. The split's price is that kernel: 4096×11008 takes 40.0 µs at M = 120 (split) and 38.4 µs at
    // M = 121 (not split); 4096×4096 15.7-16.0 µs at M ≤ 16 and 14.5-15.0 µs at M = 24…72 (docs/gemm-shapes.md).
    static const nlohmann::json k = [] {
      std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured/h100-sxm5-80gb/gemm_graph_kernels.json");
      REQUIRE(in.good());
      return nlohmann::json::parse(in).at("kernels");
    }();
    int split = 0, with_reduce = 0;
    std::map<std::string, int> split_max_m;
    for (const auto& [key, kernels] : k.items()) {
      const std::string layer = key.substr(0, key.find('|'));
      const int m = std::stoi(key.substr(key.find('|') + 1));
      if (!split_k_at(layer, m)) continue;
      ++split;
      split_max_m[layer] = std::max(split_max_m[layer], m);
      with_reduce += kernels.size() == 2 && kernels.at(1).at(0).get<std::string>().find("splitKreduce") != std::string::npos;
    }
    CHECK(k.size() == 1107);
    CHECK(split == 47);
    CHECK(with_reduce == 47);
    CHECK(split_max_m.size() == 2);
    CHECK(split_max_m["out_7b"] == 16);
    CHECK(split_max_m["down_7b"] == 160);
    const auto j = measured("gemm_graph_staircase.json");
    std::map<std::string, double> tm;
    for (const auto& r : j.at("results"))
      tm[r.at("dtype").get<std::string>() + "/" + r.at("layer").get<std::string>() + "/" + std::to_string(r.at("M").get<int>())] =
          r.at("time_median_s");
    for (const char* dt : {"bf16", "fp16"}) {
      CAPTURE(dt);
      const std::string d = dt;
      const double extra_down = tm.at(d + "/down_7b/120") - tm.at(d + "/down_7b/121");
      CHECK(extra_down > 1.0e-6);
      CHECK(extra_down < 2.5e-6);
      CHECK(tm.at(d + "/out_7b/16") - tm.at(d + "/out_7b/24") > 0.8e-6);
    }
    // The model prices the split points as memory-bound streams (no split term): 89 of their 94 (bf16 + fp16) within
    // 10%; the 5 misses are 4096×11008 at M = 144 and 160 (inside class B's data-parallel range, model 13-14% fast)
    // and 4096×4096 at M = 8 in fp16 (class D).
    int within = 0, n = 0;
    for (const auto& r : j.at("results")) {
      const std::string layer = r.at("layer");
      const int m = r.at("M");
      if (!split_k_at(layer, m)) continue;
      const Precision p = r.at("dtype") == "fp16" ? Precision::fp16 : Precision::bf16;
      ++n;
      within += std::fabs(t(m, r.at("N"), r.at("K"), p, h100_sk()) / r.at("time_median_s").get<double>() - 1.0) <= 0.10;
    }
    CHECK(n == 94);
    CHECK(within == 89);
  }

  TEST_CASE("a kernel's fixed cost in a CUDA graph depends on the kernel: GEMM 4.4 µs, streaming 2.0, empty 1.1 (H200)") {
    // data/validation/measured/h200-sxm-141gb/gemm_fixed_cost.json (scripts/measure/gemm_fixed_cost.py, 2026-11-28,
    // one H200; README there). Least squares t = a + bytes / BW over the large memory-bound calls (≥ 60 MB): in a graph
    // a GEMM pays a = 4.41 µs, a streaming mul 2.03 µs, an empty one-element add 1.07 µs per kernel; eager back to
    // back (GPU-bound) 5.98 and 3.82 µs. The H200 calibration profile's fits (memory-bound GEMM t₀ 4.36 µs, HBM stream
    // t₀ 2.03 µs; the bench times short kernels in graphs) are the same two numbers: one fixed cost per kernel
    // class, which the model's one kernel_launch per device does not have (docs/gemm-shapes.md).
    std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured/h200-sxm-141gb/gemm_fixed_cost.json");
    REQUIRE(in.good());
    const auto j = nlohmann::json::parse(in);
    auto fit = [&j](const std::string& op_prefix, const std::string& mode) {
      double sx = 0, sy = 0, sxx = 0, sxy = 0;
      int n = 0;
      for (const auto& r : j.at("results")) {
        if (r.at("part") != "fixed" || r.at("op").get<std::string>().rfind(op_prefix, 0) != 0) continue;
        const double x = r.at("bytes"), y = r.at(mode).at("time_median_s");
        if (x < 60e6) continue;
        sx += x, sy += y, sxx += x * x, sxy += x * y;
        ++n;
      }
      REQUIRE(n >= 4);
      const double b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
      return (sy - b * sx) / n;
    };
    const double gemm_graph = fit("F.linear", "graph"), mul_graph = fit("torch.mul", "graph");
    const double gemm_eager = fit("F.linear", "eager"), mul_eager = fit("torch.mul", "eager");
    CHECK(gemm_graph == gptest::approx(4.41e-6).epsilon(0.03));
    CHECK(mul_graph == gptest::approx(2.03e-6).epsilon(0.03));
    CHECK(gemm_graph - mul_graph > 2.0e-6);  // the GEMM's own prologue and epilogue
    CHECK(gemm_eager - gemm_graph == gptest::approx(1.6e-6).epsilon(0.15));
    CHECK(mul_eager - mul_graph == gptest::approx(1.8e-6).epsilon(0.15));
    double empty_graph = 0;
    for (const auto& r : j.at("results"))
      if (r.at("op").get<std::string>().rfind("torch.add", 0) == 0) empty_graph = r.at("graph").at("time_median_s");
    CHECK(empty_graph == gptest::approx(1.07e-6).epsilon(0.03));
    std::ifstream pin(std::string(GPUPLAN_TEST_DATA_DIR) + "/calibration/h200-sxm-141gb/profile.json");
    REQUIRE(pin.good());
    const auto prof = nlohmann::json::parse(pin);
    CHECK(gemm_graph / prof.at("gemm_memory").at("t0_s").get<double>() == gptest::approx(1.0).epsilon(0.05));
    CHECK(mul_graph / prof.at("hbm").at("t0_s").get<double>() == gptest::approx(1.0).epsilon(0.05));
    // cuBLAS's split-K choice on this GPU (96 points, N 1024-8192, K 4096-28672, M 16-512): split exactly when
    // M·N/K < 64 at 91 of them.
    int heur = 0, rule = 0;
    for (const auto& r : j.at("results")) {
      if (r.at("part") != "heuristic" || r.at("status") != "ok") continue;
      bool split = false;
      for (const auto& kname : r.at("kernels")) split = split || kname.get<std::string>().find("splitKreduce") != std::string::npos;
      const double ratio = r.at("M").get<double>() * r.at("N").get<double>() / r.at("K").get<double>();
      ++heur;
      rule += split == (ratio < 64.0);
    }
    CHECK(heur == 96);
    CHECK(rule == 91);
  }

  TEST_CASE("the CUDA-graph alignment sweep: the leading-dimension classes within 10% at 171 of 204 bf16/fp16 points") {
    // gemm_graph_alignment.json: 4096³ with M, K or N at 4088…4104, nn and nt, timed in CUDA graphs (these GEMMs take
    // 0.17-1.4 ms, so the first sweep's events were not host-bound: the classes are the same, 0.176 and 0.368). Model
    // with stream-K over measured, every point: 171 within 10% (84%), median 4.7%; whole-tile waves 141. fp16's
    // tensor rate (0.961) applies to the aligned class only — the fallback kernels are load-bound and measure alike in
    // both types (their ratios to the aligned neighbour are 1.03× higher in fp16) — and leaves the count at 171.
    // The 33 misses, all in the element-aligned (odd K or N) class, whose one factor 0.176 is the median of series
    // that differ by layout, which the model does not know:
    //  - F.linear (nt) with N odd: 0.126-0.139 of the aligned rate (only the output's rows are misaligned there; the
    //    slowest series of the four): the model 27-40% fast — 16;
    //  - torch.matmul (nn) with K or N odd at 0.19-0.20: the model 10-14% slow — 16;
    //  - one nt K-odd point (fp16, K = 4089: 0.156) — 1.
    const auto j = measured("gemm_graph_alignment.json");
    int n = 0, within = 0, refused_8bit = 0, nt_odd_n = 0, nn_slow = 0, other = 0;
    std::vector<double> err;
    for (const auto& r : j.at("results")) {
      const std::string dt = r.at("dtype");
      if (dt == "fp8" || dt == "int8") {
        const std::string v = r.at("varied");
        if (v != "M" && r.at(v).get<int>() % (dt == "fp8" ? 16 : 8) != 0) refused_8bit += r.at("status") == "refused" ? 1 : 0;
        continue;
      }
      REQUIRE(r.at("status") == "ok");
      const Precision p = dt == "fp16" ? Precision::fp16 : Precision::bf16;
      const double e = t(r.at("M"), r.at("N"), r.at("K"), p, h100_sk()) / r.at("time_median_s").get<double>() - 1.0;
      ++n;
      within += std::fabs(e) <= 0.10 ? 1 : 0;
      err.push_back(std::fabs(e));
      if (std::fabs(e) <= 0.10) continue;
      const std::string v = r.at("varied");
      CHECK(v != "M");
      CHECK(r.at(v).get<int>() % 2 == 1);  // every miss is in the element class
      if (r.at("layout") == "nt" && v == "N" && e < 0) ++nt_odd_n;
      else if (r.at("layout") == "nn" && e > 0) ++nn_slow;
      else ++other;
    }
    CHECK(n == 204);
    CHECK(within == 171);  // 2026-11-27
    CHECK(median(err) < 0.06);
    CHECK(nt_odd_n == 16);
    CHECK(nn_slow == 16);
    CHECK(other == 1);
    // fp8 (_scaled_mm) refuses every K, N not a multiple of 16, int8 (_int_mm) every one not a multiple of 8.
    CHECK(refused_8bit == 32 + 28);
  }

  TEST_CASE("fp16 GEMMs run at 0.961 of bf16's rate on Hopper where the tensor cores bound them, and the graph sweeps agree") {
    // gemm_fp16.hpp: the calibration fits of our H100 sweep without this term, fp16 0.7076 against bf16 0.7366 (H200:
    // 0.7293 / 0.7578; with the term both profiles' fp16 fits land at their bf16 level, profile.json). Checked here on the CUDA-graph sweeps it was not fitted to:
    // the median fp16/bf16 time at M ≥ 512 (compute-bound) of each Llama-2-7B layer and of the aligned 4096³ points.
    const auto& d = h100_sk();
    CHECK(model::gemm_fp16_rate(d.eff) == gptest::approx(0.961));
    const double bf = model::gemm_cost("b", {4096, 4096, 4096, 1}, Precision::bf16, d).efficiency;
    const double hf = model::gemm_cost("h", {4096, 4096, 4096, 1}, Precision::fp16, d).efficiency;
    CHECK(hf / bf == gptest::approx(0.961).epsilon(1e-9));
    // The fallback class (odd K) is load-bound: fp16 runs at bf16's fallback rate.
    const double bf_odd = model::gemm_cost("b", {4096, 4096, 4097, 1}, Precision::bf16, d).efficiency;
    const double hf_odd = model::gemm_cost("h", {4096, 4096, 4097, 1}, Precision::fp16, d).efficiency;
    CHECK(hf_odd / bf_odd == gptest::approx(1.0).epsilon(1e-9));
    // Memory-bound decode shapes: no change (the weights' streaming bounds both).
    CHECK(t(1, 22016, 4096, Precision::fp16, d) == gptest::approx(t(1, 22016, 4096, Precision::bf16, d)));
    // Parts without fp8 tensor cores: not measured, 1.
    CHECK(model::gemm_fp16_rate(a100().eff) == 1.0);
    const auto j = measured("gemm_graph_staircase.json");
    std::map<std::string, double> bf16_t;
    std::map<std::string, std::vector<double>> ratio;
    for (const auto& r : j.at("results"))
      if (r.at("dtype") == "bf16" && r.at("M").get<int>() >= 512)
        bf16_t[r.at("layer").get<std::string>() + "|" + std::to_string(r.at("M").get<int>())] = r.at("time_median_s");
    for (const auto& r : j.at("results"))
      if (r.at("dtype") == "fp16" && r.at("M").get<int>() >= 512)
        ratio[r.at("layer")].push_back(r.at("time_median_s").get<double>() /
                                       bf16_t.at(r.at("layer").get<std::string>() + "|" + std::to_string(r.at("M").get<int>())));
    REQUIRE(ratio.size() == 4);
    for (const auto& [layer, v] : ratio) {
      const auto& captured_layer = layer;  // clang 14: no structured binding in CAPTURE's lambda
      CAPTURE(captured_layer);
      CHECK(median(v) == gptest::approx(1.0 / 0.961).epsilon(0.01));  // measured 1.037-1.047
    }
    const auto a = measured("gemm_graph_alignment.json");
    std::map<std::string, double> bf_al;
    std::vector<double> al_ratio;
    auto key = [](const nlohmann::json& r) {
      return r.at("layout").get<std::string>() + r.at("varied").get<std::string>() + std::to_string(r.at("M").get<int>()) +
             "x" + std::to_string(r.at("N").get<int>()) + "x" + std::to_string(r.at("K").get<int>());
    };
    for (const auto& r : a.at("results"))
      if (r.at("dtype") == "bf16" && r.at("N").get<int>() % 8 == 0 && r.at("K").get<int>() % 8 == 0)
        bf_al[key(r)] = r.at("time_median_s");
    for (const auto& r : a.at("results"))
      if (r.at("dtype") == "fp16" && bf_al.count(key(r))) al_ratio.push_back(r.at("time_median_s").get<double>() / bf_al.at(key(r)));
    REQUIRE(al_ratio.size() >= 40);
    CHECK(median(al_ratio) == gptest::approx(1.0 / 0.961).epsilon(0.015));
  }

  TEST_CASE("a tile-exact GEMM keeps the reference tile and a full machine: 128·132 × 256 × 8192 has u = 1") {
    const auto& d = h100_sk();
    const auto c = model::gemm_cost("full", {128 * 132, 256, 8192, 1}, Precision::bf16, d);
    CHECK(c.efficiency == gptest::approx(model::gemm_ceiling(d.eff, Precision::bf16)).epsilon(1e-12));
  }

  TEST_CASE("Llama-2-7B decode GEMMs on A100 with stream-K: time per token falls from batch 128 to 142 (no cliff)") {
    // The serving cliff of the issue (2,595 tok/s at batch 128, 2,204 at 142) comes from whole 128-row tiles: M = 142
    // needs a second tile row and doubles the compute time of every layer GEMM. With the decomposition, per token, the
    // layer's GEMMs do not get dearer as the batch grows (the built-in rows, whole-tile waves, still have the cliff).
    const auto& d = a100();
    double per_token_128 = 0, per_token_142 = 0;
    for (const auto& [n, k] : {std::tuple{12288, 4096}, std::tuple{4096, 4096}, std::tuple{22016, 4096},
                               std::tuple{4096, 11008}}) {
      per_token_128 += t(128, n, k, Precision::bf16, d) / 128.0;
      per_token_142 += t(142, n, k, Precision::bf16, d) / 142.0;
    }
    CHECK(per_token_142 <= per_token_128);
  }
}

