// `gpuplan pipeline FILE` (cli/cmd_pipeline.cpp, wl_io/pipeline_io.hpp): the course's AD perception stack on an Orin
// and on an H100 (schedule, verdicts at the mean and at P99, the SVG's deadline line), the options as flags, and
// hostile pipeline files — each refused with exit 2, the file, the JSON pointer, the value and the rule.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "approx.hpp"
#include "cli_runner.hpp"
#include "gpuplan/wl_io/pipeline_io.hpp"

using namespace gpuplan::cli_test;
namespace fs = std::filesystem;

namespace {
const std::string kAd = kData + "/scenarios/ad-perception.json";

/// Writes `text` to a fresh temporary pipeline file and runs `gpuplan pipeline` on it.
Run run_file(const std::string& text, std::vector<std::string> extra = {}) {
  static int n = 0;
  const fs::path p = fs::temp_directory_path() / ("gpuplan-pipeline-" + std::to_string(::getpid()) + "-" +
                                                  std::to_string(n++) + ".json");
  std::ofstream(p) << text;
  std::vector<std::string> args{"pipeline", p.string(), "--frames", "200"};
  if (std::find(extra.begin(), extra.end(), "--gpu") == extra.end()) extra.insert(extra.end(), {"--gpu", "orin"});
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run(args);
  fs::remove(p);
  return r;
}

/// A valid two-stage pipeline with `stage` spliced in as a third stage (and `top` as extra top-level keys).
std::string file_with(const std::string& stage, const std::string& top = "") {
  return R"({"schema": 1, "kind": "pipeline", "name": "t", "sensors": [{"id": "cam", "kind": "camera", "rate_Hz": 30}],
  "deadline_ms": 33.3, "sources": ["test"], )" +
         top + R"("stages": [
  {"id": "pre", "engine": "cpu0", "cpu_ms": 1, "inputs": ["cam"]},
  {"id": "net", "engine": "gpu", "model": "resnet50", "after": ["pre"]})" +
         (stage.empty() ? std::string() : ", " + stage) + "]}";
}
}  // namespace

TEST_CASE("a minimal file runs: a CPU stage then ResNet-50 on the GPU, in order, deadline met") {
  auto r = run_file(file_with(""), {"--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  REQUIRE(j["stages"].size() == 2);
  CHECK(j["stages"][0]["finish_s"].get<double>() == gptest::approx(0.001));
  CHECK(j["stages"][1]["start_s"].get<double>() == gptest::approx(0.001));
  CHECK(j["critical_path"] == nlohmann::json({"pre", "net"}));
  const double lat = j["latency_mean_s"].get<double>();
  CHECK(lat == gptest::approx(0.001 + j["stages"][1]["mean_s"].get<double>()));
  CHECK(j["slack_mean_s"].get<double>() == gptest::approx(0.0333 - lat));
  // No jitter: P99 is the mean.
  CHECK(j["latency_p99_s"].get<double>() == gptest::approx(lat));
}

TEST_CASE("the model stage is priced as `gpuplan serve` prices it (one formula): same latency for the same plan") {
  auto p = run_file(file_with("", R"("options": {"fusion": true, "int8": true}, )"), {"--format", "json"});
  REQUIRE(p.rc == 0);
  auto s = run({"serve", "-m", "resnet50", "--gpu", "orin", "--batch", "1", "--compute", "int8", "--fold-bn",
                "--fuse-epilogue", "--format", "json"});
  REQUIRE(s.rc == 0);
  CHECK(parse_json(p)["stages"][1]["mean_s"].get<double>() ==
        gptest::approx(parse_json(s)["latency_s"].get<double>()).epsilon(1e-9));
}

TEST_CASE("the Orin's one memory: two 10 ms CPU stages streaming 150 GB/s each stretch to 10 ms × 300 GB/s / BW") {
  const std::string text = R"({"schema": 1, "kind": "pipeline", "name": "t", "deadline_ms": 33,
    "sensors": [{"id": "cam", "kind": "camera", "rate_Hz": 30}], "sources": ["test"], "stages": [
    {"id": "a", "engine": "cpu0", "cpu_ms": 10, "memory_GBps": 150},
    {"id": "b", "engine": "cpu1", "cpu_ms": 10, "memory_GBps": 150}]})";
  const auto orin = parse_json(run_file(text, {"--format", "json"}));
  const double bw = orin["shared_memory_bandwidth_Bps"].get<double>();
  REQUIRE(bw < 300e9);
  CHECK(orin["latency_mean_s"].get<double>() == gptest::approx(0.010 * 300e9 / bw).epsilon(1e-9));
  // On an H100 the CPU's memory is not the GPU's: no shared resource, the two overlap fully.
  const auto h100 = parse_json(run_file(text, {"--format", "json", "--gpu", "h100"}));
  CHECK(h100["latency_mean_s"].get<double>() == gptest::approx(0.010).epsilon(1e-9));
}

TEST_CASE("ad-perception on the Orin: a Gantt against the deadline, the verdicts at mean and P99") {
  auto r = run({"pipeline", kAd, "--gpu", "orin"});
  INFO(r.err);
  REQUIRE((r.rc == 0 || r.rc == kInfeasible));
  CHECK(contains(r.out, "Pipeline: AD perception"));
  CHECK(contains(r.out, "jetson-agx-orin-64gb"));
  CHECK(contains(r.out, "deadline 33.30 ms"));
  CHECK(contains(r.out, "critical path: preprocess → backbone"));
  CHECK(contains(r.out, "latency at the mean (frame 0)"));
  CHECK(contains(r.out, "P99 (Monte-Carlo, 20000 frames, seed 1)"));
  CHECK(contains(r.out, "segmentation [dla0]"));
  auto j = parse_json(run({"pipeline", kAd, "--gpu", "orin", "--format", "json"}));
  CHECK(j["shared_memory_bandwidth_Bps"].get<double>() < 204.8e9);  // datasheet × η_hbm
  CHECK(j["shared_memory_bandwidth_Bps"].get<double>() > 0.5 * 204.8e9);
  CHECK(j["latency_p99_s"].get<double>() > j["latency_mean_s"].get<double>());
  CHECK((r.rc == 0) == j["meets_deadline_p99"].get<bool>());
}

TEST_CASE("ad-perception on an H100: the DLA heads fall back to the GPU with a note, and no shared memory") {
  auto r = run({"pipeline", kAd, "--gpu", "h100", "--format", "json"});
  INFO(r.err);
  REQUIRE((r.rc == 0 || r.rc == kInfeasible));
  CHECK(contains(r.err, "has no DLA: 'segmentation' runs on the GPU (TensorRT's GPU fallback)"));
  const auto j = parse_json(r);
  CHECK(j["shared_memory_bandwidth_Bps"].is_null());
  for (const auto& s : j["stages"])
    if (s["id"] == "segmentation") {
      CHECK(s["engine"] == "gpu");
      CHECK(s["engine_in_file"] == "dla0");
    }
}

TEST_CASE("backbone sharing off: the heads each run a backbone copy, FLOPs rise by 2 backbones, latency rises") {
  const auto on = parse_json(run({"pipeline", kAd, "--gpu", "orin", "--format", "json"}));
  const auto off = parse_json(run({"pipeline", kAd, "--gpu", "orin", "--format", "json", "--share-backbone", "off"}));
  double backbone = 0;
  for (const auto& s : on["stages"])
    if (s["id"] == "backbone") backbone = s["model_flops"].get<double>();
  REQUIRE(backbone > 0);
  CHECK(off["flops_per_frame"]["as_run"].get<double>() ==
        gptest::approx(on["flops_per_frame"]["as_run"].get<double>() + 2 * backbone));
  CHECK(off["stages"].size() == on["stages"].size() - 1);
  CHECK(off["latency_mean_s"].get<double>() > on["latency_mean_s"].get<double>());
}

TEST_CASE("the SVG Gantt has one bar per stage and the deadline line, and Markdown has the chart in a code block") {
  auto r = run({"pipeline", kAd, "--gpu", "orin", "--format", "svg", "--frames", "500"});
  REQUIRE((r.rc == 0 || r.rc == kInfeasible));
  std::size_t bars = 0;
  for (std::size_t p = r.out.find("class=\"stage\""); p != std::string::npos; p = r.out.find("class=\"stage\"", p + 1))
    ++bars;
  CHECK(bars == 9);
  CHECK(contains(r.out, "class=\"deadline\""));
  CHECK(contains(r.out, "deadline 33.30 ms"));
  auto m = run({"pipeline", kAd, "--gpu", "orin", "--format", "md", "--frames", "500"});
  CHECK(contains(m.out, "### Gantt chart (frame 0)\n\n```\n"));
}

TEST_CASE("hostile pipeline files: exit 2 with file, JSON pointer, value and rule") {
  struct Case {
    std::string text, want;
  };
  const std::vector<Case> cases = {
      {file_with(R"({"id": "x", "engine": "gpu", "cpu_ms": 1, "colour": "red"})"),
       "/stages/2/colour: error: unknown key 'colour'"},
      {file_with(R"({"id": "x", "engine": "tpu", "cpu_ms": 1})"), "/stages/2/engine: error: 'tpu' is not an engine"},
      {file_with(R"({"id": "x", "engine": "gpu", "cpu_ms": 1, "model": "resnet50"})"),
       "/stages/2: error: a stage is a model, an op list or a fixed time: give exactly one of model, ops, cpu_ms (got 2)"},
      {file_with(R"({"id": "x", "engine": "gpu"})"), "give exactly one of model, ops, cpu_ms (got 0)"},
      {file_with(R"({"id": "x", "engine": "gpu", "model": "resnet5"})"),
       "/stages/2/model: error: unknown vision model 'resnet5'"},
      {file_with(R"({"id": "x", "engine": "cpu0", "cpu_ms": 1, "after": ["y"]}, {"id": "y", "engine": "cpu0", "cpu_ms": 1})"),
       "/stages/2/after: error: 'y' is listed after this stage"},
      {file_with(R"({"id": "x", "engine": "cpu0", "cpu_ms": 1, "after": ["x"]})"), "cannot wait for itself"},
      {file_with(R"({"id": "x", "engine": "cpu0", "cpu_ms": -3})"), "/stages/2/cpu_ms: error:"},
      {file_with(R"({"id": "x", "engine": "cpu0", "model": "resnet50"})"),
       "/stages/2/engine: error: a model or op-list stage runs on gpu or a dla"},
      {file_with(R"({"id": "x", "engine": "cpu0", "cpu_ms": 1, "jitter": {"distribution": "lognormal", "basis": "b"}})"),
       "/stages/2/jitter/distribution: error: a lognormal spread needs cv"},
      {file_with(R"({"id": "x", "engine": "cpu0", "cpu_ms": 1, "jitter": {"distribution": "gamma", "cv": 1, "basis": "b"}})"),
       "/stages/2/jitter/distribution: error:"},
      {file_with(R"({"id": "x", "engine": "dla7", "model": "resnet50"})"),
       "/stages/2/engine: error: 'dla7': jetson-agx-orin-64gb has 2 DLA engines (dla0…dla1)"},
      {file_with(R"({"id": "x", "engine": "gpu", "ops": [{"kind": "upsample", "name": "u", "c_in": 8, "h": 8}], "ops_source": "s"})"),
       "/stages/2/ops/0/scale: error: an upsample op needs scale"},
      {file_with(R"({"id": "x", "engine": "gpu", "ops": [{"kind": "conv", "name": "c", "c_in": 8, "h": 8, "groups": 3}], "ops_source": "s"})"),
       "/stages/2/ops/0/groups: error: groups 3 must divide c_in 8 and c_out 8"},
      {file_with(R"({"id": "x", "engine": "gpu", "ops": [{"kind": "conv", "name": "c", "c_in": 8, "h": 8}]})"),
       "/stages/2/ops: error: an op list needs ops_source"},
      {file_with(R"({"id": "x", "engine": "gpu", "backbone": "pre", "ops": [{"kind": "add", "name": "a", "c_in": 8, "h": 8}], "ops_source": "s"})"),
       "/stages/2/backbone: error: 'pre' is not a model stage"},
      {file_with(R"({"id": "x", "engine": "cpu0", "cpu_ms": 1, "inputs": ["radar"]})"),
       "/stages/2/inputs: error: unknown sensor 'radar'"},
      {file_with(R"({"id": "net", "engine": "cpu0", "cpu_ms": 1})"), "/stages/2/id: error: duplicate stage id 'net'"},
      {file_with("", R"("options": {"int9": true}, )"), "/options/int9: error: unknown key 'int9'"},
      {R"({"schema": 1, "kind": "pipeline", "name": "t", "sensors": [], "deadline_ms": 33, "sources": ["s"], "stages": []})",
       "/sensors: error: expected a non-empty list of sensors, got an empty list"},
      {R"([1, 2])", "error: expected a pipeline object, got an array"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const auto r = run_file(c.text);
    CHECK(r.rc == kInvalid);
    CHECK_MESSAGE(contains(r.err, c.want), r.err);
  }
}

TEST_CASE("bad option values, an unknown GPU and a precision an engine lacks are exit 2") {
  auto r = run({"pipeline", kAd, "--int8", "maybe"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--int8: error: 'maybe' is not on or off"));
  auto g = run({"pipeline", kAd, "--gpu", "orinn"});
  CHECK(g.rc == kInvalid);
  CHECK(contains(g.err, "unknown GPU 'orinn'"));
  auto f = run_file(file_with(R"({"id": "x", "engine": "gpu", "model": "resnet50", "precision": "bf16"})"));
  CHECK(f.rc == 0);  // the Orin GPU has bf16; its DLAs have only int8 in the data:
  auto d = run_file(file_with(R"({"id": "x", "engine": "dla0", "model": "resnet50", "precision": "fp16"})"));
  CHECK(d.rc == kInvalid);
  CHECK(contains(d.err, "/stages/2/precision: error: jetson-agx-orin-64gb/dla has no fp16 rate in the hardware data"));
}

TEST_CASE("the detection head's op list: B4 + BiFPN + box/class nets at 896 px is EfficientDet-D4's 55 GMACs scaled") {
  // EfficientDet (Tan, Pang, Le, CVPR 2020) Table 2: D4, 1024 px, 55B FLOPs (multiply-adds, EfficientNet's count).
  // Convolution work scales with the pixels: at 896 px, 55e9 · (896/1024)² = 42.1e9.
  auto lib = gpuplan::wl_io::load_vision_library(kData);
  REQUIRE(lib.ok());
  auto p = gpuplan::wl_io::load_pipeline(kAd, "ad-perception.json", lib.value());
  REQUIRE_MESSAGE(p.ok(), p.diagnostics().to_string());
  const auto* bb = p->find("backbone");
  const auto* det = p->find("detection");
  REQUIRE(bb != nullptr);
  REQUIRE(det != nullptr);
  const auto g = gpuplan::wl::build_vision_graph(lib->find(bb->model)->arch, *bb->resolution);
  double macs = static_cast<double>(g.macs());
  for (const auto& op : det->ops) macs += static_cast<double>(op.macs());
  CHECK(macs == gptest::approx(55e9 * (896.0 / 1024) * (896.0 / 1024)).epsilon(0.03));
}
