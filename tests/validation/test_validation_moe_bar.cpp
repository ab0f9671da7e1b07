// Issue #21's done-when on our own measured MoE cases: "median |error| ≤ 10%, none over 25%, for decode steps,
// prefill and training steps at EP 1/2/4", with the built-in defaults and with the calibration profile. The cases:
//  - serving at EP 1: data/validation/measured_moe_inference_cases.json (serve_qwen3_30b_a3b.json: Qwen3-30B-A3B-shaped
//    decoder on one H100, CUDA-graph decode batch 1-256 at contexts 1K/4K, eager prefill 1K/4K);
//  - serving at EP 2 and EP 4: the 2- and 4-GPU runs' node-x<N>-moe-serving-cases.json in data/validation/measured/<gpu>/
//    (node_serve_step.py --model moe: attention TP N, experts EP N, fixed-capacity all-to-all, one CUDA graph a step);
//  - training at EP 1/2/4: data/validation/measured_moe_training_cases.json and node-x<N>-moe-training-cases.json
//    (moe_train_step.py: 4 Qwen3-30B-A3B-shaped MoE layers, eager, all-to-all dispatcher with host syncs).
// Each group (decode, prefill, training) is held to the bar over all its cases, and each EP it was measured at to the
// worst-case half of it (none over 25%).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "test_paths.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "validate.hpp"

using namespace gpuplan;

namespace {
struct MoeBarData {
  hw::HardwareDb db;
  wl_io::ModelLibrary lib;
};
const MoeBarData& moe_bar_data() {
  static const MoeBarData d = [] {
    auto db = hw_io::load_hardware_db(GPUPLAN_TEST_DATA_DIR);
    auto lib = wl_io::load_model_library(GPUPLAN_TEST_DATA_DIR);
    REQUIRE(db.ok());
    REQUIRE(lib.ok());
    return MoeBarData{db.value(), lib.value()};
  }();
  return d;
}

/// "EP4" in a layout such as "TP4 EP4 PP1 …" or "TP1 PP1 DP4 EP4 mb1 …"; no EP in it: 1.
int ep_of(const std::string& layout) {
  const auto at = layout.find("EP");
  if (at == std::string::npos) return 1;
  return std::stoi(layout.substr(at + 2));
}

struct Group {
  std::vector<double> built_in, calibrated;
  std::set<int> eps;
};
double median(std::vector<double> v) {
  REQUIRE(!v.empty());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double worst(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

void collect(std::map<std::string, Group>& groups, const cli::ValidationSummary& s, bool training) {
  for (const auto& c : s.cases) {
    CAPTURE(c.id);
    REQUIRE_MESSAGE(c.status == "ok", c.status);
    REQUIRE(c.error.has_value());
    REQUIRE(c.error_calibrated.has_value());
    const std::string kind = training ? "training" : c.metric == "prefill_time_s" ? "prefill" : "decode";
    if (!training) REQUIRE((c.metric == "prefill_time_s" || c.metric == "decode_step_time_s"));
    Group& g = groups[kind];
    g.built_in.push_back(std::abs(*c.error));
    g.calibrated.push_back(std::abs(*c.error_calibrated));
    g.eps.insert(ep_of(c.layout));
  }
}

std::map<std::string, Group> moe_groups() {
  const auto& d = moe_bar_data();
  const std::string data_dir = GPUPLAN_TEST_DATA_DIR;
  std::map<std::string, Group> groups;
  auto serve1 = cli::validate_inference(data_dir + "/validation/measured_moe_inference_cases.json", d.db, d.lib,
                                        nullptr, data_dir);
  REQUIRE_MESSAGE(serve1.ok(), serve1.diagnostics().to_string());
  collect(groups, serve1.value(), false);
  auto train = cli::validate_training(data_dir + "/validation/measured_moe_training_cases.json", d.db, d.lib, data_dir);
  REQUIRE_MESSAGE(train.ok(), train.diagnostics().to_string());
  collect(groups, train.value(), true);
  auto node = cli::validate_node_runs(data_dir, d.db, d.lib);
  REQUIRE_MESSAGE(node.ok(), node.diagnostics().to_string());
  collect(groups, node.value().moe_serving, false);
  collect(groups, node.value().moe_training, true);
  REQUIRE(groups.size() == 3);
  return groups;
}
}  // namespace

// On 2026-11-27 (43 cases: 27 decode, 6 prefill, 10 training): decode median 7.4% / worst 14.2% built-in, 3.0% /
// 10.6% calibrated; training 3.0% / 7.7%, 1.9% / 7.1%; prefill 9.7% / 13.4% built-in, 8.2% / 11.3% calibrated (before
// the eager unpermute gather and SwiGLU passes were priced in serving, model/src/serve/serving.cpp: prefill 10.01% /
// 18.6% built-in, the bar missed). Every group is measured at EP 1, 2 and 4.
TEST_CASE("our own MoE cases at EP 1/2/4 meet issue #21's bar: decode, prefill and training, built-in and calibrated") {
  auto groups = moe_groups();
  for (const auto& kv : groups) {
    const std::string& kind = kv.first;  // no structured bindings: CAPTURE's lambda (clang 14)
    const Group& g = kv.second;
    CAPTURE(kind);
    CAPTURE(g.built_in.size());
    CHECK(g.eps == std::set<int>{1, 2, 4});
    CHECK(median(g.built_in) <= 0.10);
    CHECK(worst(g.built_in) <= 0.25);
    CHECK(median(g.calibrated) <= 0.10);
    CHECK(worst(g.calibrated) <= 0.25);
  }
  CHECK(groups["decode"].built_in.size() == 28);
  CHECK(groups["prefill"].built_in.size() == 9);
  CHECK(groups["training"].built_in.size() == 10);
  // Session 33 (issue #21): the TP 2 / EP 2 prefill and decode b = 1 on two H200s joined the cases
  // (data/validation/measured/h200-sxm-141gb/node-x2-moe-serving-cases.json; built-in -15.4 / -21.9 / -23.3% at
  // 1K/2K/4K, decode +3.0%, before the change below), and index_put and the non-vectorised elementwise kernels (the
  // strided SiLU and gate product, the combine's row scale) are priced by their SM-issue rate (moe_cost.hpp,
  // issue_bound_cost; measured on the H100 TP4/EP4 and H200 TP2/EP2 prefill profiles, the same absolute rates on both
  // GPUs). Built-in prefill errors now: EP 1 1K/4K +16.7 / -3.6%; EP 2 H100 1K/2K/4K -0.5 / -6.1 / -8.3%, H200
  // -6.6 / -10.9 / -10.3%; EP 4 2K -0.8%: median 6.6%, worst the EP 1 1K eager prefill (+16.7%, was +12.4%: its
  // eager SwiGLU and combine pay the issue-bound rate too, and it was already over-priced by its uniform routing,
  // data/validation/ANALYSIS.md session 32).
  // The same session's 16-bit GEMMs of more than 128 rows in the fuller of two tile orientations (ops.cpp
  // swapped_tiles) make the too-fast prefills a little faster (9.93% -> 9.96% before the change above).
  CHECK(median(groups["prefill"].built_in) <= 0.07);
  CHECK(worst(groups["prefill"].built_in) <= 0.17);
}
