// Whole tiles in fused causal attention (issue #24): a kernel runs its 128-row query tiles whole, so a sequence (or a
// packed document) whose length is not a multiple of 128 pays for the tiles it starts; at multiples of 128, where the
// sequence law was measured, nothing changes (model/src/ops/ops.cpp attention_whole_tile_ratio).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "approx.hpp"
#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/model/ops.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {
const model::Device& h100_tiles_device() {
  static const model::Device d = [] {
    const hw::GpuSpec* g = test::hardware().find_gpu("h100-sxm5-80gb");
    REQUIRE(g != nullptr);
    return model::make_device(*g);
  }();
  return d;
}
// The model's efficiency of one causal self-attention pass over s tokens (32 heads of d = 128, bf16).
double tiles_eff(double s, bool causal, bool backward) {
  const auto c = model::attention_cost("a", 32, std::int64_t(s), std::int64_t(s), 128, 128, causal, true, backward,
                                       hw::Precision::bf16, h100_tiles_device());
  REQUIRE(c.size() == 1);
  return c[0].efficiency;
}
// The sequence law's factor k/(k + c) (efficiency.hpp), without the reference normalisation (it cancels in ratios).
double law_term(double s, bool causal, double c) {
  const double k = model::attention_key_tiles(s, causal);
  return k / (k + c);
}
}  // namespace

TEST_SUITE("fused attention runs whole tiles") {
  TEST_CASE("a 177-token causal document pays for two 128-row query tiles: 3 key iterations + 2 fixed costs") {
    const model::AttentionTileCost& t = h100_tiles_device().eff.attention_tile;
    for (bool bwd : {false, true}) {
      const double c = bwd ? t.bwd : t.fwd;
      // By hand: n = 2 query tiles of 1 and 2 key tiles; the law counts (177/128)·(k + c), k = 177/256 + 0.5.
      const double whole = 3.0 + 2.0 * c;
      const double counted = 177.0 / 128.0 * (177.0 / 256.0 + 0.5 + c);
      const double expected = law_term(177, true, c) / law_term(128, true, c) / (whole / counted);
      CHECK(tiles_eff(177, true, bwd) / tiles_eff(128, true, bwd) == gptest::approx(expected).epsilon(1e-9));
      // The whole tiles cost more than the law's continuous count (cuDNN's c = 1.5 forward: 6 / 3.72 = 1.61x).
      CHECK(whole / counted > 1.4);
    }
  }
  TEST_CASE("at multiples of 128 the law is unchanged") {
    const model::AttentionTileCost& t = h100_tiles_device().eff.attention_tile;
    for (bool bwd : {false, true}) {
      const double c = bwd ? t.bwd : t.fwd;
      for (double s : {256.0, 512.0, 4096.0})
        CHECK(tiles_eff(s, true, bwd) / tiles_eff(128, true, bwd) ==
              gptest::approx(law_term(s, true, c) / law_term(128, true, c)).epsilon(1e-9));
    }
  }
  TEST_CASE("non-causal attention keeps the law (not measured off the tile grid)") {
    const model::AttentionTileCost& t = h100_tiles_device().eff.attention_tile;
    CHECK(tiles_eff(197, false, false) / tiles_eff(256, false, false) ==
          gptest::approx(law_term(197, false, t.fwd) / law_term(256, false, t.fwd)).epsilon(1e-9));
  }
}
