// The whole-host validation path (issue #30): scripts/measure/run_node.sh's files -> node_cases.py's case files ->
// `gpuplan validate`. The fixture (tests/fixtures/node-run-synthetic/, made by its make_fixture.py) is SYNTHETIC:
// made-up numbers in the formats the scripts write, for a pretend 4-GPU H100 host. These tests check the plumbing
// (every case is found, priced with the built-in data and the H100 calibration profile, in the layout it was
// measured in), not accuracy: the errors against made-up numbers mean nothing.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

#include "test_paths.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "validate.hpp"

using namespace gpuplan;

namespace {
struct NodeData {
  hw::HardwareDb db;
  wl_io::ModelLibrary lib;
};
const NodeData& node_data() {
  static const NodeData d = [] {
    auto db = hw_io::load_hardware_db(GPUPLAN_TEST_DATA_DIR);
    auto lib = wl_io::load_model_library(GPUPLAN_TEST_DATA_DIR);
    REQUIRE(db.ok());
    REQUIRE(lib.ok());
    return NodeData{db.value(), lib.value()};
  }();
  return d;
}
const std::string kFixture = std::string(GPUPLAN_TEST_FIXTURES) + "/node-run-synthetic";

const cli::CaseResult* find(const cli::ValidationSummary& s, const std::string& id) {
  for (const auto& c : s.cases)
    if (c.id == id) return &c;
  return nullptr;
}

// Every evaluated case carries both predictions and errors that are predicted / measured − 1 of them.
void check_evaluated(const cli::CaseResult& c) {
  CAPTURE(c.id);
  REQUIRE(c.status == "ok");
  REQUIRE(c.predicted.has_value());
  REQUIRE(c.predicted_calibrated.has_value());
  CHECK(*c.predicted > 0.0);
  CHECK(*c.predicted_calibrated > 0.0);
  CHECK(std::abs(*c.error - (*c.predicted / c.measured - 1.0)) < 1e-12);
  CHECK(std::abs(*c.error_calibrated - (*c.predicted_calibrated / c.measured - 1.0)) < 1e-12);
}
}  // namespace

TEST_CASE("whole-host runs: the synthetic 4-GPU fixture's case files all reach validate, with calibrated predictions") {
  auto r = cli::validate_node_runs(GPUPLAN_TEST_DATA_DIR, node_data().db, node_data().lib, kFixture);
  REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
  const auto& v = r.value();
  CHECK(v.files.size() == 4);
  // dense serving: 5 TP4 points (one refused by the spread rule) + 2 replica points
  REQUIRE(v.serving.cases.size() == 7);
  CHECK(v.serving.evaluated == 6);
  CHECK(v.serving.evaluated_calibrated == 6);
  const std::string pre = "own-h100-sxm5-80gb-x4-";
  const auto* tp4 = find(v.serving, pre + "serve_tp4_llama3_70b_l20-decode-b64-ctx2048");
  REQUIRE(tp4 != nullptr);
  check_evaluated(*tp4);
  CHECK(tp4->model == "bench-llama3-70b-shape-l20");
  CHECK(tp4->layout.rfind("TP4 PP1", 0) == 0);
  CHECK(std::abs(tp4->measured / 0.0062 - 1.0) < 1e-12);
  const auto* refused = find(v.serving, pre + "serve_tp4_llama3_70b_l20-decode-b256-ctx2048");
  REQUIRE(refused != nullptr);
  CHECK(refused->status == "not runnable");
  CHECK(!refused->predicted.has_value());
  const auto* replica = find(v.serving, pre + "serve_tp2x2_llama3_70b_l20-decode-b32-ctx2048");
  REQUIRE(replica != nullptr);
  check_evaluated(*replica);
  CHECK(replica->layout.rfind("TP2 PP1", 0) == 0);
  // The same model at half the TP degree and half the batch: each replica's step reads twice the weights per GPU,
  // so the model must price it slower than TP4 at the full batch (64 = 2 x 32 sequences).
  CHECK(*replica->predicted > *tp4->predicted);
  for (const auto& c : v.serving.cases)
    if (c.status == "ok") check_evaluated(c);
  CHECK(v.serving_by_source.size() == 2);

  // MoE serving: attention TP4, experts EP4, eager
  REQUIRE(v.moe_serving.cases.size() == 3);
  CHECK(v.moe_serving.evaluated == 3);
  for (const auto& c : v.moe_serving.cases) {
    check_evaluated(c);
    CHECK(c.model == "qwen3-30b-a3b");
    CHECK(c.layout.rfind("TP4 EP4 PP1", 0) == 0);
  }
  // DDP and FSDP: throughput and peak memory each
  REQUIRE(v.training.cases.size() == 4);
  CHECK(v.training.evaluated == 4);
  for (const auto& c : v.training.cases) check_evaluated(c);
  const auto* fsdp = find(v.training, "M-h100-sxm5-80gb-x4-node_llama1b_s2048_b4_fsdp4");
  REQUIRE(fsdp != nullptr);
  CHECK(fsdp->metric == "tokens_per_s_per_gpu");
  CHECK(std::abs(fsdp->measured / 47000.0 - 1.0) < 1e-12);
  // MoE training at EP4 and EP2 x DP2: tokens/s per GPU = seq x micro-batch / step = 4096 / step
  REQUIRE(v.moe_training.cases.size() == 2);
  for (const auto& c : v.moe_training.cases) check_evaluated(c);
  const auto* ep2 = find(v.moe_training, "M-h100-sxm5-80gb-x4-node_moe_train_L4_s4096_b1_ep2_w4");
  REQUIRE(ep2 != nullptr);
  CHECK(std::abs(ep2->measured / (4096.0 / 0.095) - 1.0) < 1e-12);
  CHECK(ep2->layout.find("EP2") != std::string::npos);
}

TEST_CASE("whole-host runs: merged into a shipped set, the union is summarised again") {
  auto r = cli::validate_node_runs(GPUPLAN_TEST_DATA_DIR, node_data().db, node_data().lib, kFixture);
  REQUIRE(r.ok());
  cli::ValidationSummary a = r.value().training;
  const int before = a.evaluated;
  cli::merge_cases(a, r.value().moe_training);
  CHECK(a.cases.size() == 6);
  CHECK(a.evaluated == before + 2);
  CHECK(a.evaluated_calibrated == 6);
}

TEST_CASE("whole-host runs: the synthetic held-out collectives at 4 GPUs up to 4 GiB reach the collectives check") {
  auto v = cli::validate_collectives(GPUPLAN_TEST_DATA_DIR, node_data().db, kFixture);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  REQUIRE(v->cases.size() == 20);  // 5 ops x 4 sizes
  int at_4gib = 0;
  for (const auto& c : v->cases) {
    check_evaluated(c);
    CHECK(c.layout.rfind("4 GPUs of ", 0) == 0);
    if (c.id.find("4 GiB") != std::string::npos) ++at_4gib;
  }
  CHECK(at_4gib == 5);
}

TEST_CASE("whole-host runs: no node-x files means no cases, and the shipped ones all read cleanly") {
  auto none = cli::validate_node_runs(GPUPLAN_TEST_DATA_DIR, node_data().db, node_data().lib,
                                      kFixture + "/no-such-folder");
  REQUIRE(none.ok());
  CHECK(none.value().files.empty());
  CHECK(none.value().serving.cases.empty());
  // data/validation/measured/<gpu>/node-x*-cases.json: none until a whole-host run is committed; then every case
  // file must parse and every runnable case evaluate
  auto r = cli::validate_node_runs(GPUPLAN_TEST_DATA_DIR, node_data().db, node_data().lib);
  REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
  for (const auto* s : {&r.value().serving, &r.value().moe_serving, &r.value().training, &r.value().moe_training})
    for (const auto& c : s->cases) {
      CAPTURE(c.id);
      CHECK((c.status == "ok" || c.status == "not runnable"));
      if (c.status == "ok") CHECK(c.predicted.has_value());
    }
}

TEST_CASE("a serving case whose ep does not divide tp is refused with its JSON pointer") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "gpuplan_test_node_ep";
  fs::create_directories(dir / "h100-sxm5-80gb");
  {
    std::ofstream f(dir / "h100-sxm5-80gb" / "node-x4-moe-serving-cases.json");
    f << R"({"schema": 1, "cases": [{"id": "bad-ep", "source": "s", "model": "qwen3-30b-a3b",
            "gpu": "h100-sxm5-80gb", "tp": 4, "ep": 3, "pp": 1, "metric": "decode_step_time_s",
            "inputs": {"batch": 1, "context_tokens": 1024}, "measured": {"value": 0.01}, "runnable": true}]})";
  }
  auto r = cli::validate_node_runs(GPUPLAN_TEST_DATA_DIR, node_data().db, node_data().lib, dir.string());
  CHECK(!r.ok());
  const std::string msg = r.diagnostics().to_string();
  CHECK(msg.find("/cases/0/ep") != std::string::npos);
  CHECK(msg.find("ep 3 with tp 4") != std::string::npos);
  fs::remove_all(dir);
}
