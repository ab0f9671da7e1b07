// Issue #24's yardstick by family (cli/validate_families.cpp): cases grouped by GPU generation × dense/MoE and by
// scale, the median signed error positive where the model is optimistic whatever the metric, and the verdict
// (median |error| ≤ 10%, median signed within ±7%, at least five cases).
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "approx.hpp"

#include "bands.hpp"

using namespace gpuplan;

namespace {
cli::CaseResult row(const std::string& gen, const std::string& arch, const std::string& scale, const char* metric,
                    double measured, double predicted, bool in_bands = true) {
  cli::CaseResult c;
  c.id = gen + arch + scale + std::to_string(predicted);
  c.metric = metric;
  c.measured = measured;
  c.predicted = predicted;
  c.error = predicted / measured - 1.0;
  c.status = "ok";
  c.regime = {in_bands ? "train" : "", gen, arch, scale};
  return c;
}
}  // namespace

TEST_CASE("family_stats: medians per family and per scale, signed positive when optimistic for rates and times") {
  cli::ValidationSummary s;
  // Hopper dense: five throughputs 5%, 8%, 9% over and 6% under, and one step time 20% under the measured one
  // (optimistic: |error| 0.2, signed +0.2).
  for (double p : {105.0, 108.0, 109.0, 94.0}) s.cases.push_back(row("Hopper", "dense", "1 node", "tokens_per_s_per_gpu", 100, p));
  s.cases.push_back(row("Hopper", "dense", "<=256 GPUs", "step_time_s", 10.0, 8.0));
  // Blackwell MoE: two rows (under five: not judged), one kept out of the bands.
  s.cases.push_back(row("Blackwell", "moe", "<=256 GPUs", "tflops_per_gpu", 100, 130));
  s.cases.push_back(row("Blackwell", "moe", "<=256 GPUs", "tflops_per_gpu", 100, 140, false));
  // Not priced: ignored.
  auto bad = row("Ampere", "dense", "1 node", "tokens_per_s_per_gpu", 100, 100);
  bad.status = "infeasible";
  s.cases.push_back(bad);

  const auto f = cli::family_stats(s);
  REQUIRE(f.size() == 5);
  CHECK(f[0].family == "Hopper dense");
  CHECK_FALSE(f[0].by_scale);
  CHECK(f[0].cases == 5);
  // signed: +0.05, +0.08, +0.09, -0.06, +0.2 -> median +0.08; |error|: 0.05 0.06 0.08 0.09 0.2 -> 0.08
  CHECK(f[0].median_speed_error == gptest::approx(0.08).epsilon(1e-9));
  CHECK(f[0].median_abs_error == gptest::approx(0.08).epsilon(1e-9));
  CHECK(f[0].within_10 == gptest::approx(0.8).epsilon(1e-12));
  CHECK(f[0].judged);
  CHECK_FALSE(f[0].meets);  // |error| 8% <= 10% but signed +8% is beyond ±7%
  CHECK(f[1].family == "Hopper dense, 1 node");
  CHECK(f[1].cases == 4);
  CHECK_FALSE(f[1].judged);
  // 1 node: +0.05 +0.08 +0.09 -0.06 -> median (0.05 + 0.08) / 2
  CHECK(f[1].median_speed_error == gptest::approx(0.065).epsilon(1e-9));
  CHECK(f[2].family == "Hopper dense, <=256 GPUs");
  CHECK(f[2].median_speed_error == gptest::approx(0.2).epsilon(1e-9));  // time 8 for 10: |8/10 - 1|, made positive
  CHECK(f[2].median_abs_error == gptest::approx(0.2).epsilon(1e-9));
  CHECK(f[3].family == "Blackwell moe");
  CHECK(f[3].cases == 2);
  CHECK(f[3].out_of_bands == 1);
  CHECK(f[3].median_speed_error == gptest::approx(0.35).epsilon(1e-9));
  CHECK_FALSE(f[3].judged);
  CHECK(f[4].family == "Blackwell moe, <=256 GPUs");
}

TEST_CASE("family verdict: a family of five within 10% and ±7% meets the target, and the table says so") {
  cli::ValidationSummary s;
  for (double p : {103.0, 106.0, 95.0, 104.0, 109.0}) s.cases.push_back(row("Ampere", "dense", "1 node", "mfu", 100, p));
  for (double p : {120.0, 130.0}) s.cases.push_back(row("Hopper", "dense", "1 node", "mfu", 100, p));
  const auto f = cli::family_stats(s);
  REQUIRE(f.size() == 4);
  CHECK(f[0].family == "Ampere dense");
  CHECK(f[0].median_speed_error == gptest::approx(0.04).epsilon(1e-9));
  CHECK(f[0].meets);
  const std::string md = cli::render_families_markdown(s);
  CHECK(md.find("1 of the 1 families with at least 5 cases meet it") != std::string::npos);
  CHECK(md.find("| Ampere dense | 5 | +4.0% | 5.0% | 100% | yes |") != std::string::npos);
  CHECK(md.find("| · Hopper dense, 1 node | 2 | +25.0% | 25.0% | 0% | — (under 5 cases) |") != std::string::npos);
  const auto j = cli::families_json(s);
  REQUIRE(j.size() == 4);
  CHECK(j[0]["meets_target"] == true);
  CHECK(j[2]["meets_target"].is_null());
}

TEST_CASE("one family only: no table, no JSON") {
  cli::ValidationSummary s;
  for (double p : {103.0, 106.0}) s.cases.push_back(row("Hopper", "dense", "1 node", "mfu", 100, p));
  CHECK(cli::render_families_markdown(s).empty());
  CHECK(cli::families_json(s).empty());
}
