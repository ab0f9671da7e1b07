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

TEST_CASE("train --timeline with a DataLoader: its host lane, the GPU's wait when it starves, the utilisation") {
  // Llama 3.1 70B, TP 8 × PP 4, global batch 8: DP 1, so 8 sequences per step reach the first stage. One worker at
  // 3·t_GPU/8 a sequence needs 3·t_GPU per batch: the GPU waits 2·t_GPU at every step's start, utilisation 1/3.
  const auto est = parse_json(run(with(plan_args(), {"--format", "json"})));
  const double gpu = est["step_time_s"].get<double>();
  const std::string ms = std::to_string(3.0 * gpu / 8.0 * 1e3);
  const Run r = run(with(plan_args(), {"--timeline", "json", "--loader-sample-ms", ms, "--loader-workers", "1"}));
  REQUIRE_MESSAGE(r.rc == 0, r.err);
  const auto j = parse_json(r);
  CHECK(std::fabs(j["gpu_step_s"].get<double>() / gpu - 1) < 1e-12);
  CHECK(std::fabs(j["gpu_utilisation"].get<double>() * 3 - 1) < 1e-5);
  CHECK(std::fabs(j["end_s"].get<double>() / (3 * gpu) - 1) < 1e-5);
  REQUIRE(j["lanes"].size() == 9);  // PP 4 × (compute, comm) + the loader
  CHECK(j["lanes"][8]["stream"] == "host");
  int waits = 0, loads = 0;
  for (const auto& s : j["spans"]) {
    if (s["kind"] == "data_wait") ++waits;
    if (s["kind"] == "data_load") ++loads;
  }
  CHECK(waits == 4);  // every stage's compute stream waits for the first stage's batch
  CHECK(loads == 1);
  CHECK(contains(j["notes"][0].get<std::string>(), "GPU utilisation 33% because the loader starves it"));
  // The text chart: the loader's lane and the idle glyph at the start of each compute row.
  const Run t = run(with(plan_args(), {"--timeline", "text", "--loader-sample-ms", ms, "--loader-workers", "1"}));
  REQUIRE(t.rc == 0);
  CHECK(contains(t.out, "host · loader (1 worker)"));
  CHECK(contains(t.out, "~ GPU idle: waiting for the batch"));
  CHECK(contains(t.out, "utilisation 33%"));
}

TEST_CASE("train --loader-workers / --loader-sample-ms: what they need, and bad values, are exit 2 naming the flag") {
  const Run alone = run(with(plan_args(), {"--timeline", "text", "--loader-workers", "2"}));
  CHECK(alone.rc == kInvalid);
  CHECK(contains(alone.err, "--loader-workers: error: the loader needs its CPU cost per sample to be priced"));
  const Run no_tl = run(with(plan_args(), {"--loader-workers", "2", "--loader-sample-ms", "1"}));
  CHECK(no_tl.rc == kInvalid);
  CHECK(contains(no_tl.err, "--loader-workers: error: lays the data loader out in the step timeline"));
  const Run neg = run(with(plan_args(), {"--timeline", "text", "--loader-workers", "-1", "--loader-sample-ms", "1"}));
  CHECK(neg.rc == kInvalid);
  CHECK(contains(neg.err, "--loader-workers: error: -1 is not a worker count (0 to 4096 per GPU"));
  const Run stack = run(with(plan_args(), {"--stack", "amp", "--loader-workers", "2", "--loader-sample-ms", "1"}));
  CHECK(stack.rc == kInvalid);
  CHECK(contains(stack.err, "--loader-workers: error: the optimisation stack sets the workers with its workers=N step"));
  const Run zero = run(with(plan_args(), {"--timeline", "text", "--loader-sample-ms", "0"}));
  CHECK(zero.rc == kInvalid);
  CHECK(contains(zero.err, "--loader-sample-ms: error: 0 is not a CPU time per sample in (0, 10⁶] ms"));
}
