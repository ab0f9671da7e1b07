// Error bands (model/accuracy_band.hpp): quantiles, the fallback hierarchy and leave-one-source-out coverage, checked
// against values worked by hand on small synthetic residual sets.
#include <cmath>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "gpuplan/model/accuracy_band.hpp"

using namespace gpuplan::model;

namespace {
BandCase bc(const std::string& id, const std::string& src, const std::string& gen, const std::string& arch,
            const std::string& scale, double ratio) {
  return BandCase{id, src, Regime{"train", gen, arch, scale}, ratio};
}
}  // namespace

TEST_CASE("quantile interpolates linearly between order statistics (type 7)") {
  // Sorted 1,2,3,4,5: h = q·(n−1); q=0.1 → h=0.4 → 1 + 0.4·(2−1) = 1.4; q=0.9 → h=3.6 → 4 + 0.6 = 4.6; median 3.
  CHECK(quantile({5, 1, 4, 2, 3}, 0.10) == doctest::Approx(1.4));
  CHECK(quantile({5, 1, 4, 2, 3}, 0.90) == doctest::Approx(4.6));
  CHECK(quantile({5, 1, 4, 2, 3}, 0.50) == doctest::Approx(3.0));
  CHECK(quantile({7}, 0.9) == doctest::Approx(7.0));
}

TEST_CASE("a band is the p10-p90 of measured/predicted over its regime, taken on the log ratio") {
  // Five Hopper dense single-node cases with ratios e^0, e^0.1, …, e^0.4: the log quantiles are 0.04, 0.2, 0.36.
  std::vector<BandCase> cs;
  for (int i = 0; i < 5; ++i)
    cs.push_back(bc(fmt::format("c{}", i), fmt::format("s{}", i), "Hopper", "dense", "1 node", std::exp(0.1 * i)));
  cs.push_back(bc("other", "s9", "Ampere", "dense", "1 node", 9.0));  // another regime: not pooled
  const auto b = band_for(cs, Regime{"train", "Hopper", "dense", "1 node"});
  REQUIRE(b);
  CHECK(b->cases == 5);
  CHECK(b->level == 0);
  CHECK(b->fallback.empty());
  CHECK(b->p10 == doctest::Approx(std::exp(0.04)));
  CHECK(b->p50 == doctest::Approx(std::exp(0.20)));
  CHECK(b->p90 == doctest::Approx(std::exp(0.36)));
  CHECK(b->regime == "train Hopper dense 1 node");
}

TEST_CASE("a regime with fewer than five cases pools up to the coarser regime and says so") {
  std::vector<BandCase> cs;
  // Three Hopper MoE cases at ≤256 GPUs (too few), plus three Hopper dense: Hopper (without arch) has six.
  for (int i = 0; i < 3; ++i) cs.push_back(bc(fmt::format("m{}", i), "a", "Hopper", "moe", "<=256 GPUs", 1.0 + 0.1 * i));
  for (int i = 0; i < 3; ++i) cs.push_back(bc(fmt::format("d{}", i), "b", "Hopper", "dense", "1 node", 1.3 + 0.1 * i));
  const auto b = band_for(cs, Regime{"train", "Hopper", "moe", "<=256 GPUs"});
  REQUIRE(b);
  CHECK(b->level == 2);  // scale dropped (3 MoE cases), then arch (6 Hopper cases)
  CHECK(b->cases == 6);
  CHECK(b->regime == "train Hopper");
  CHECK(b->fallback.find("pooled up to train Hopper") != std::string::npos);
  // A regime nobody has measured still gets the pooled band of all cases.
  const auto any = band_for(cs, Regime{"serve", "Blackwell", "dense", "1 node"});
  REQUIRE(any);
  CHECK(any->cases == 6);
  CHECK(any->regime == "all cases");
  CHECK_FALSE(band_for({}, Regime{"train", "Hopper", "dense", "1 node"}));
}

TEST_CASE("leave one source out: a case is judged against the band built without its own source") {
  // Six cases in one regime, each its own source, ratios 1.0..1.5. Without case i the other five give the band;
  // p10/p90 of five sorted logs sit 40% of the way from the 1st to 2nd and 60% from the 4th to 5th: the smallest and
  // largest fall outside their LOSO band, the four in between inside.
  std::vector<BandCase> cs;
  for (int i = 0; i < 6; ++i)
    cs.push_back(bc(fmt::format("c{}", i), fmt::format("s{}", i), "Hopper", "dense", "1 node", 1.0 + 0.1 * i));
  const auto cov = loso_coverage(cs);
  CHECK(cov.cases == 6);
  CHECK(cov.inside == 4);
  CHECK(cov.fraction() == doctest::Approx(4.0 / 6.0));
  // Excluding s0 leaves the other five: p10 sits 40% of the way from log 1.1 to log 1.2.
  const auto b = band_for(cs, Regime{"train", "Hopper", "dense", "1 node"}, "s0");
  REQUIRE(b);
  CHECK(b->cases == 5);
  CHECK(b->p10 == doctest::Approx(std::exp(std::log(1.1) + 0.4 * (std::log(1.2) - std::log(1.1)))));
}

TEST_CASE("generation and scale buckets") {
  CHECK(generation_of("Blackwell Ultra") == "Blackwell");
  CHECK(generation_of("Hopper") == "Hopper");
  CHECK(generation_of("Ampere") == "Ampere");
  CHECK(generation_of("CDNA3") == "other");
  CHECK(scale_bucket(8, 8) == "1 node");
  CHECK(scale_bucket(9, 8) == "<=256 GPUs");
  CHECK(scale_bucket(256, 8) == "<=256 GPUs");
  CHECK(scale_bucket(2048, 8) == "<=2048 GPUs");
  CHECK(scale_bucket(2049, 8) == ">2048 GPUs");
  CHECK(scale_bucket(72, 72) == "1 node");
}
