// End-to-end tests of `gpuplan serve --timeline` (issue #27 d2): the decode pass ends at the decode-only step `serve`
// reports, the prefill pass at the prefill time of one prompt, eager mode adds the host row, the SVG draws every span,
// and bad values or combinations are exit 2 naming the flag.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

std::vector<std::string> serve_args() {
  return {"serve", "--data-dir", kData, "-m", "llama-3.1-8b", "--gpu", "h100-sxm5-80gb", "--tp", "2", "--batch", "32",
          "--input-tokens", "1024", "--output-tokens", "256"};
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

}  // namespace

TEST_CASE("serve --timeline json: the decode pass ends at serve's decode-only step, the prefill pass at its TTFT") {
  const Run rep = run(with(serve_args(), {"--format", "json"}));
  REQUIRE_MESSAGE(rep.rc == 0, rep.err);
  const auto s = parse_json(rep);
  const Run r = run(with(serve_args(), {"--timeline", "json"}));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto j = parse_json(r);
  CHECK(j["what"] == "serving iteration");
  const double step = s["decode_step_s"].get<double>();
  CHECK(std::fabs(j["end_s"].get<double>() - step) <= 1e-9 * step);
  CHECK(j["lanes"].size() == 1);  // CUDA graphs (the default): no host row
  int allreduce = 0, sampling = 0;
  for (const auto& x : j["spans"]) {
    if (x["kind"] == "comm_tp") ++allreduce;
    if (x["kind"] == "sampling") ++sampling;
  }
  CHECK(allreduce == 2 * 32 + 1);  // two per layer, the logits' all-gather
  CHECK(sampling == 1);
  const Run p = run(with(serve_args(), {"--timeline", "json", "--timeline-pass", "prefill"}));
  REQUIRE(p.rc == 0);
  const double ttft = s["ttft_s"].get<double>();
  CHECK(std::fabs(parse_json(p)["end_s"].get<double>() - ttft) <= 1e-9 * ttft);
}

TEST_CASE("serve --timeline text and svg, eager mode shows the host issuing kernels") {
  const Run t = run(with(serve_args(), {"--timeline", "text", "--enforce-eager"}));
  if (t.rc != 0) MESSAGE(t.err);
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("Serving iteration timeline") != std::string::npos);
  CHECK(t.out.find("stage 0 · host") != std::string::npos);
  CHECK(t.out.find("GPU idle: waiting for the host") != std::string::npos);
  const Run j = run(with(serve_args(), {"--timeline", "json"}));
  const Run v = run(with(serve_args(), {"--timeline", "svg"}));
  REQUIRE(v.rc == 0);
  std::size_t rects = 0;
  for (std::size_t at = v.out.find("<rect"); at != std::string::npos; at = v.out.find("<rect", at + 1)) ++rects;
  CHECK(rects >= parse_json(j)["spans"].size());
}

TEST_CASE("serve --timeline: bad values and combinations are exit 2 naming the flag") {
  Run r = run(with(serve_args(), {"--timeline", "png"}));
  CHECK(r.rc == 2);
  CHECK(r.err.find("--timeline: error: 'png' is not a timeline format: give text, svg or json") != std::string::npos);
  r = run(with(serve_args(), {"--timeline", "text", "--timeline-pass", "verify"}));
  CHECK(r.rc == 2);
  CHECK(r.err.find("--timeline-pass: error: 'verify' is not an iteration: give decode or prefill") != std::string::npos);
  r = run(with(serve_args(), {"--timeline-pass", "prefill"}));
  CHECK(r.rc == 2);
  CHECK(r.err.find("--timeline-pass: error: applies to --timeline only") != std::string::npos);
  r = run(with(serve_args(), {"--timeline", "text", "--rate", "5"}));
  CHECK(r.rc == 2);
  CHECK(r.err.find("--timeline: error: lays out one replica's iteration") != std::string::npos);
}
