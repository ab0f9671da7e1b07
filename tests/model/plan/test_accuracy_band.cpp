// Error bands (model/accuracy_band.hpp): the random-effects prediction interval, sources weighted alike, the fallback
// hierarchy and leave-one-source-out coverage, checked against values worked by hand on small synthetic residual sets.
#include <cmath>

#include <doctest/doctest.h>
#include "approx.hpp"
#include <fmt/format.h>

#include "gpuplan/model/accuracy_band.hpp"

using namespace gpuplan::model;

namespace {
BandCase bc(const std::string& id, const std::string& src, const std::string& gen, const std::string& arch,
            const std::string& scale, double ratio) {
  return BandCase{id, src, Regime{"train", gen, arch, scale}, ratio, "", ""};
}
}  // namespace

TEST_CASE("quantile interpolates linearly between order statistics (type 7)") {
  // Sorted 1,2,3,4,5: h = q·(n−1); q=0.1 → h=0.4 → 1 + 0.4·(2−1) = 1.4; q=0.9 → h=3.6 → 4 + 0.6 = 4.6; median 3.
  CHECK(quantile({5, 1, 4, 2, 3}, 0.10) == gptest::approx(1.4));
  CHECK(quantile({5, 1, 4, 2, 3}, 0.90) == gptest::approx(4.6));
  CHECK(quantile({5, 1, 4, 2, 3}, 0.50) == gptest::approx(3.0));
  CHECK(quantile({7}, 0.9) == gptest::approx(7.0));
}

TEST_CASE("Student's t 90% quantile: the table to 30 degrees of freedom, the Cornish-Fisher series beyond") {
  CHECK(student_t90(1) == gptest::approx(3.078));
  CHECK(student_t90(2) == gptest::approx(1.886));
  CHECK(student_t90(10) == gptest::approx(1.372));
  CHECK(student_t90(30) == gptest::approx(1.310));
  // Exact values (any table): t(0.90; 40) = 1.303, t(0.90; 120) = 1.289, t(0.90; ∞) = 1.2816.
  CHECK(student_t90(40) == gptest::approx(1.303).epsilon(1e-3));
  CHECK(student_t90(120) == gptest::approx(1.289).epsilon(1e-3));
  CHECK(student_t90(1000000) == gptest::approx(1.2816).epsilon(1e-4));
}

TEST_CASE("a band is the random-effects prediction interval over the regime's sources, on the log ratio") {
  // Source a: logs 0.0, 0.2 (mean 0.1, within variance 0.01); b: 0.2, 0.4 (0.3, 0.01); c: 0.5 (0.5, 0). k = 3:
  // μ = 0.3, τ² = (0.2² + 0 + 0.2²)/2 = 0.04, σ_w² = 0.02/3, sd = √(0.04·4/3 + 0.02/3) = √0.06, t(0.9; 2) = 1.886.
  std::vector<BandCase> cs = {bc("a0", "a", "Hopper", "dense", "1 node", std::exp(0.0)),
                              bc("a1", "a", "Hopper", "dense", "1 node", std::exp(0.2)),
                              bc("b0", "b", "Hopper", "dense", "1 node", std::exp(0.2)),
                              bc("b1", "b", "Hopper", "dense", "1 node", std::exp(0.4)),
                              bc("c0", "c", "Hopper", "dense", "1 node", std::exp(0.5)),
                              bc("other", "s9", "Ampere", "dense", "1 node", 9.0)};  // another regime: not pooled
  const auto b = band_for(cs, Regime{"train", "Hopper", "dense", "1 node"});
  REQUIRE(b);
  CHECK(b->cases == 5);
  CHECK(b->sources == 3);
  CHECK(b->level == 0);
  CHECK(b->fallback.empty());
  const double half = 1.886 * std::sqrt(0.06);
  CHECK(b->p50 == gptest::approx(std::exp(0.3)));
  CHECK(b->p10 == gptest::approx(std::exp(0.3 - half)));
  CHECK(b->p90 == gptest::approx(std::exp(0.3 + half)));
  CHECK(b->regime == "train Hopper dense 1 node");
}

TEST_CASE("every source weighs the same: a 300-row sweep does not outvote two one-row sources") {
  std::vector<BandCase> cs;
  for (int i = 0; i < 300; ++i) cs.push_back(bc(fmt::format("w{}", i), "sweep", "Hopper", "dense", "1 node", std::exp(0.9)));
  cs.push_back(bc("x", "x", "Hopper", "dense", "1 node", 1.0));
  cs.push_back(bc("y", "y", "Hopper", "dense", "1 node", 1.0));
  const auto b = band_for(cs, Regime{"train", "Hopper", "dense", "1 node"});
  REQUIRE(b);
  CHECK(b->p50 == gptest::approx(std::exp(0.3)));  // (0.9 + 0 + 0)/3, not ≈ 0.9
  CHECK(b->sources == 3);
  // The group, not the source text, is the unit: the same three rows under one group are one source.
  for (auto& c : cs) c.group = "one paper";
  const auto one = band_for(cs, Regime{"train", "Hopper", "dense", "1 node"});
  REQUIRE(one);
  CHECK(one->sources == 1);
  CHECK(one->level == 4);  // fewer than 3 sources at every level: all cases, one source
}

TEST_CASE("a regime with fewer than five cases or three sources pools up to the coarser regime and says so") {
  std::vector<BandCase> cs;
  // Three Hopper MoE cases at ≤256 GPUs (too few, and MoE has no more), plus three Hopper dense: the kind alone has six
  // from six sources.
  for (int i = 0; i < 3; ++i)
    cs.push_back(bc(fmt::format("m{}", i), fmt::format("a{}", i), "Hopper", "moe", "<=256 GPUs", 1.0 + 0.1 * i));
  for (int i = 0; i < 3; ++i)
    cs.push_back(bc(fmt::format("d{}", i), fmt::format("b{}", i), "Hopper", "dense", "1 node", 1.3 + 0.1 * i));
  const auto b = band_for(cs, Regime{"train", "Hopper", "moe", "<=256 GPUs"});
  REQUIRE(b);
  CHECK(b->level == 3);  // scale dropped (3 MoE cases), then generation (still 3 MoE), then dense/MoE (6 cases)
  CHECK(b->cases == 6);
  CHECK(b->regime == "train");
  CHECK(b->fallback.find("pooled up to train") != std::string::npos);
  // Five Blackwell cases from only two sources are not a regime of their own: they pool with the other dense cases
  // of every generation (dense/MoE is kept longer than the generation), 8 cases from 5 sources.
  for (int i = 0; i < 5; ++i)
    cs.push_back(bc(fmt::format("bw{}", i), i < 3 ? "p" : "q", "Blackwell", "dense", "1 node", 1.2));
  const auto bw = band_for(cs, Regime{"train", "Blackwell", "dense", "1 node"});
  REQUIRE(bw);
  CHECK(bw->level == 2);
  CHECK(bw->regime == "train dense");
  CHECK(bw->cases == 8);
  // A regime nobody has measured still gets the pooled band of all cases.
  const auto any = band_for(cs, Regime{"serve", "Blackwell", "dense", "1 node"});
  REQUIRE(any);
  CHECK(any->cases == 11);
  CHECK(any->regime == "all cases");
  CHECK_FALSE(band_for({}, Regime{"train", "Hopper", "dense", "1 node"}));
}

TEST_CASE("leave one source out: a case is judged against the band built without its own source") {
  // Four sources of two rows each near 1 (log ±0.01) and one source of three rows at e^1. Left out, the far source
  // meets a band from the four near ones (μ = 0, τ² = 0, sd = 0.01, t(0.9; 3) = 1.638): its three rows fall outside.
  // A near source left out meets a band that holds the far one (τ² large): inside. So 8 of 11 values, 4 of 5 sources.
  std::vector<BandCase> cs;
  for (int s = 0; s < 4; ++s)
    for (int i = 0; i < 2; ++i)
      cs.push_back(bc(fmt::format("n{}{}", s, i), fmt::format("near{}", s), "Hopper", "dense", "1 node",
                      std::exp(i == 0 ? -0.01 : 0.01)));
  for (int i = 0; i < 3; ++i) {
    cs.push_back(bc(fmt::format("f{}", i), "far", "Hopper", "dense", "1 node", std::exp(1.0)));
    cs.back().dev_case = "far sweep";  // one dev case of three rows
  }
  const auto b = band_for(cs, Regime{"train", "Hopper", "dense", "1 node"}, "far");
  REQUIRE(b);
  CHECK(b->cases == 8);
  CHECK(b->sources == 4);
  CHECK(b->p90 == gptest::approx(std::exp(1.638 * 0.01)));
  const auto cov = loso_coverage(cs);
  CHECK(cov.cases == 11);
  CHECK(cov.inside == 8);
  CHECK(cov.fraction() == gptest::approx(8.0 / 11.0));
  CHECK(cov.sources == 5);
  CHECK(cov.source_mean == gptest::approx(4.0 / 5.0));
  CHECK(cov.dev_cases == 9);
  CHECK(cov.dev_case_mean == gptest::approx(8.0 / 9.0));
  const auto far = loso_coverage(cs, "", "far");
  CHECK(far.cases == 3);
  CHECK(far.inside == 0);
  CHECK(loso_coverage(cs, "serve").cases == 0);
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
