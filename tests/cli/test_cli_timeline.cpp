// End-to-end tests of `gpuplan train --timeline` and `--memory-timeline`: the JSON agrees with the report's own numbers
// (the step time, the peak per GPU), the SVG has one <rect> per span, and every bad value or combination is exit 2
// with a diagnostic naming the flag.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

std::vector<std::string> plan_args() {
  return {"train", "--data-dir", kData, "-m", "llama-3.1-70b", "--node", "dgx-h100", "--gpus", "32", "--tp", "8",
          "--pp", "4", "--global-batch", "8"};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("train --timeline json ends at the report's step time and lists every stage's streams") {
  const Run rep = run(with(plan_args(), {"--format", "json"}));
  REQUIRE(rep.rc == 0);
  const auto est = parse_json(rep);
  const Run r = run(with(plan_args(), {"--timeline", "json"}));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto j = parse_json(r);
  const double step = est["step_time_s"].get<double>();
  CHECK(std::fabs(j["step_time_s"].get<double>() - step) <= 1e-12 * step);
  CHECK(std::fabs(j["end_s"].get<double>() - step) <= 1e-9 * step);
  CHECK(j["lanes"].size() == 8);  // PP 4 × (compute, comm)
  int forwards = 0;
  for (const auto& s : j["spans"])
    if (s["kind"] == "forward" && s["lane"] == 0) ++forwards;
  CHECK(forwards == 8);  // 8 micro-batches through stage 0
}

TEST_CASE("train --timeline svg draws a rect per span with its terms as a tooltip") {
  const Run j = run(with(plan_args(), {"--timeline", "json"}));
  const Run r = run(with(plan_args(), {"--timeline", "svg"}));
  REQUIRE(r.rc == 0);
  REQUIRE(j.rc == 0);
  std::size_t rects = 0;
  for (std::size_t p = r.out.find("<rect class=\"span "); p != std::string::npos; p = r.out.find("<rect class=\"span ", p + 1))
    ++rects;
  CHECK(rects == parse_json(j)["spans"].size());
  CHECK(contains(r.out, "<title>"));
}

TEST_CASE("train --memory-timeline json: each stage's peak and the report's peak per GPU") {
  const Run rep = run(with(plan_args(), {"--format", "json"}));
  const Run r = run(with(plan_args(), {"--memory-timeline", "json"}));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto j = parse_json(r);
  REQUIRE(j["stages"].size() == 4);
  // The report's peak is the heaviest stage's allocated peak plus the context, NCCL buffers and fragmentation.
  double heaviest = 0;
  for (const auto& s : j["stages"]) {
    CHECK(std::fabs(s["peak_bytes"].get<double>() - s["model_peak_bytes"].get<double>()) <=
          1e-9 * s["model_peak_bytes"].get<double>());
    heaviest = std::max(heaviest, s["model_peak_bytes"].get<double>());
  }
  const double total = heaviest * (1 + j["fragmentation"].get<double>()) + j["cuda_context_bytes"].get<double>() +
                       j["nccl_buffers_bytes"].get<double>();
  const double reported = parse_json(rep)["memory"]["peak_bytes_per_gpu"].get<double>();
  CHECK(std::fabs(total - reported) <= 1e-9 * reported);
  CHECK(contains(run(with(plan_args(), {"--memory-timeline", "text"})).out, "stage 3: states"));
  CHECK(contains(run(with(plan_args(), {"--memory-timeline", "svg"})).out, "<polyline class=\"stage\""));
}

TEST_CASE("train --timeline / --memory-timeline: bad values and combinations are exit 2 naming the flag") {
  const Run bad = run(with(plan_args(), {"--timeline", "xml"}));
  CHECK(bad.rc == kInvalid);
  CHECK(contains(bad.err, "--timeline: error: 'xml' is not a timeline format: give text, svg or json"));
  const Run bad_m = run(with(plan_args(), {"--memory-timeline", ""}));
  CHECK(bad_m.rc == kInvalid);
  CHECK(contains(bad_m.err, "--memory-timeline: error: an empty value is not allowed"));
  const Run both = run(with(plan_args(), {"--timeline", "text", "--memory-timeline", "text"}));
  CHECK(both.rc == kInvalid);
  CHECK(contains(both.err, "give one of --timeline and --memory-timeline"));
  const Run search = run({"train", "--data-dir", kData, "-m", "llama-3.1-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "8",
                          "--global-batch", "64", "--search", "--timeline", "text"});
  CHECK(search.rc == kInvalid);
  CHECK(contains(search.err, "--timeline: error: lays out one plan: it does not combine with --search"));
  const Run dual = run({"train", "--data-dir", kData, "-m", "llama-3.1-8b", "--node", "dgx-h100", "--gpus", "4", "--pp",
                        "4", "--schedule", "dualpipe", "--global-batch", "16", "--memory-timeline", "json"});
  CHECK(dual.rc == kInvalid);
  CHECK(contains(dual.err, "--memory-timeline: error: cannot lay out this plan: the DualPipe schedule"));
  const Run layout = run({"train", "--data-dir", kData, "-m", "llama-3.1-8b", "--node", "dgx-h100", "--gpus", "8",
                          "--tp", "3", "--timeline", "text"});
  CHECK(layout.rc == kInvalid);
  CHECK(contains(layout.err, "--timeline: error: cannot lay out this plan"));
}
