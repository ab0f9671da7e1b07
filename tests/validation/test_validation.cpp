// Accuracy against measurements: the same code path as `gpuplan validate`.
#include <cmath>

#include <doctest/doctest.h>

#include "gpuplan/hw_io/hardware_io.hpp"
#include "validate.hpp"

using namespace gpuplan;

namespace {
struct Data {
  hw::HardwareDb db;
  wl_io::ModelLibrary lib;
};
const Data& data() {
  static const Data d = [] {
    auto db = hw_io::load_hardware_db(GPUPLAN_TEST_DATA_DIR);
    auto lib = wl_io::load_model_library(GPUPLAN_TEST_DATA_DIR);
    REQUIRE(db.ok());
    REQUIRE(lib.ok());
    return Data{db.value(), lib.value()};
  }();
  return d;
}
cli::ValidationSummary run(const char* file) {
  auto v = cli::validate_training(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/" + file, data().db, data().lib);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  return v.value();
}
}  // namespace

// Our own H100/H200 measurements (data/validation/measured/): step throughput and peak allocated memory of
// single-GPU, DDP and FSDP runs with exactly known configurations. Tolerance: the bar for training
// throughput (median |error| ≤ 10%, none over 25%). The H100 GEMM and FA2 efficiencies were calibrated from the
// kernel profiles of two of these 28 cases (w7b_L8_s4096_b4 and llama1b_s2048_b4); the rest are out of sample.
TEST_CASE("our own measured training steps and memory: median error at most 10% and none over 25%") {
  const auto s = run("measured_cases.json");
  CHECK(s.evaluated == 28);
  CHECK(s.median_abs_error <= 0.10);
  CHECK(s.max_abs_error <= 0.25);
  for (const auto& c : s.cases) {
    CAPTURE(c.id);
    REQUIRE(c.predicted.has_value());
    CHECK(std::isfinite(*c.predicted));
  }
}

// The published throughput cases (data/validation/training_cases.json). The bar is a median |error| ≤ 10%
// with none over 25%; the model does not meet it yet (docs/accuracy.md says where and why), so this test is
// expected to fail — when it starts passing, doctest reports it and the bar can become a plain assertion.
TEST_CASE("published training throughput meets the issue's bar (median 10%, max 25%)" * doctest::should_fail()) {
  const auto s = run("training_cases.json");
  CHECK(s.median_abs_error <= 0.10);
  CHECK(s.max_abs_error <= 0.25);
}

// Regression guard on the published cases at today's accuracy (docs/accuracy.md): catches a change that makes the
// model worse or stops cases from running.
TEST_CASE("published training throughput does not regress: at least 50 cases evaluated, median error at most 25%") {
  const auto s = run("training_cases.json");
  CHECK(s.evaluated >= 50);
  CHECK(s.median_abs_error <= 0.25);
  for (const auto& c : s.cases) {
    if (!c.predicted) continue;
    CAPTURE(c.id);
    CHECK(std::isfinite(*c.predicted));
    CHECK(*c.predicted > 0);
  }
}

// The textbook's worked examples (../shared/reference/textbook.md), with its assumptions as explicit inputs, run
// through the model's own formulas: each must land within the precision the textbook states.
TEST_CASE("every textbook worked example is reproduced within the textbook's stated precision") {
  auto v = cli::validate_textbook(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/textbook_cases.json", data().lib);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  CHECK(v->evaluated == 16);
  for (const auto& c : v->cases) {
    CAPTURE(c.id);
    CHECK(c.status == "ok");
  }
}
