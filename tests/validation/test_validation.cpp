// Accuracy against measurements: the same code path as `gpuplan validate`.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "approx.hpp"
#include <fmt/format.h>

#include "test_paths.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "bands.hpp"
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
// kernel profiles of two of these 36 cases (w7b_L8_s4096_b4 and llama1b_s2048_b4); the rest are out of sample.
TEST_CASE("our own measured training steps and memory: median error at most 10% and none over 25%") {
  const auto s = run("measured_cases.json");
  CHECK(s.evaluated == 38);
  CHECK(s.median_abs_error <= 0.10);
  CHECK(s.max_abs_error <= 0.25);
  // Today's level, guarded (docs/accuracy.md): built-in within 15%, calibrated within 8% on every case. (PyTorch's
  // unvectorised bf16 → fp32 gradient copy rate and FSDP2's copies come from the kernel profiles of four of these
  // steps: llama1b_s2048_b4 on H100 and H200 (single, DDP×4, FSDP×4) and w7b_L8_s4096_b4 on H100.)
  CHECK(s.max_abs_error <= 0.15);
  CHECK(s.max_abs_error_calibrated <= 0.08);
  for (const auto& c : s.cases) {
    CAPTURE(c.id);
    REQUIRE(c.predicted.has_value());
    CHECK(std::isfinite(*c.predicted));
  }
}

// Our own eager MPT-shaped steps on one H100 (issue #24; scripts/measure/mpt_nongemm_probe.py, data/validation/measured/
// h100-sxm5-80gb/mpt_nongemm_*_resbf16.json: GPT-2 layout, bias LayerNorm, biased linears, bf16 residual stream). The
// LayerNorm and bias-gradient rates (layer_cost.cpp) come from the same run's ops timed alone, not from the steps.
// Before those rates: +8.6% (MPT-1b, micro-batch 6) and +6.1% (MPT-760m, 12); with them +4.3% and +1.2%.
TEST_CASE("our own eager MPT-shaped steps on H100 are within 6% (LayerNorm and bias gradients at measured rates)") {
  const auto s = run("measured_cases.json");
  int seen = 0;
  for (const auto& c : s.cases) {
    if (c.id.find("mpt_nongemm") == std::string::npos) continue;
    CAPTURE(c.id);
    REQUIRE(c.error.has_value());
    CHECK(std::fabs(*c.error) <= 0.06);
    ++seen;
  }
  CHECK(seen == 2);
}

// Our own MoE training steps (data/validation/measured_moe_training_cases.json, from
// data/validation/measured/h100-sxm5-80gb/moe_train_L4_s4096_b{1,2}_ep{1,2,4}_w{1,2,4}.json, scripts/measure/
// moe_train_step.py): a 4-layer decoder with Qwen3-30B-A3B-shaped MoE layers on 1, 2 and 4 H100s at EP 1/2/4, eager
// PyTorch with an all-to-all dispatcher, gradients all-reduced after backward. Issue #21's bar (median |error| ≤ 10%,
// none over 25%, built-in and calibrated) is met calibrated (median 8.7%, worst 12.0%) and missed by a hair with the
// built-in defaults (median 10.15%, worst 14.9%); every case is still optimistic, +6.8% to +14.9%. Since the MoE
// layer is priced from its measured parts (model/src/ops/moe_cost.hpp: the grouped-GEMM law, the eager dispatcher's host
// syncs, session 14) — before it +20% to +33% (median 25.9%). What is left is outside the MoE layer: the gradient
// sync of the reduced experts (EP 2 × EDP 2, EP 1 × DP 4: the script flattens, divides and copies back every reduced
// gradient, the model counts one copy pass) and the fused AdamW step (2.6 TB/s measured against the streaming rate).
// Met since session 15 (the flattened gradient buffer's three passes and the fused AdamW rate are priced).
TEST_CASE("our own MoE training steps at EP 1/2/4 meet issue #21's bar (median 10%, none over 25%)") {
  auto v = cli::validate_training(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_moe_training_cases.json",
                                  data().db, data().lib, GPUPLAN_TEST_DATA_DIR);
  REQUIRE(v.ok());
  CHECK(v->median_abs_error <= 0.10);
  CHECK(v->max_abs_error <= 0.25);
  CHECK(v->median_abs_error_calibrated <= 0.10);
  CHECK(v->max_abs_error_calibrated <= 0.25);
}

TEST_CASE("our own MoE training steps at EP 1/2/4: all 6 evaluate, optimistic, median error at most 11%, none over 16%") {
  auto v = cli::validate_training(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_moe_training_cases.json",
                                  data().db, data().lib, GPUPLAN_TEST_DATA_DIR);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  CHECK(v->evaluated == 6);
  CHECK(v->evaluated_calibrated == 6);
  CHECK(v->median_abs_error <= 0.11);             // 10.15% (was 25.9% before session 14's MoE layer pricing)
  CHECK(v->max_abs_error <= 0.16);                // 14.9%
  CHECK(v->median_abs_error_calibrated <= 0.10);  // 8.7%
  CHECK(v->max_abs_error_calibrated <= 0.13);     // 12.0%
  for (const auto& c : v->cases) {
    CAPTURE(c.id);
    REQUIRE(c.error.has_value());
    CHECK(*c.error > 0);  // too fast today: the guard notices a change of sign
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
TEST_CASE("published training throughput does not regress: at least 50 cases evaluated, median error at most 19%") {
  const auto s = run("training_cases.json");
  CHECK(s.evaluated >= 50);
  CHECK(s.median_abs_error <= 0.19);  // 17.4% on 2026-11-22 with the GEMM depth law (22.9% before that day's measured kernel properties)
  for (const auto& c : s.cases) {
    if (!c.predicted) continue;
    CAPTURE(c.id);
    CHECK(std::isfinite(*c.predicted));
    CHECK(*c.predicted > 0);
  }
}

// Issue #22's done-when: every recipe of the dev tables (NeMo / Megatron-Bridge 24.09-25.09 performance tables,
// MLPerf Training, the TorchTitan paper's tables, DeepSeek-V3's report) runs with its own flags - priced, or infeasible only with the reason - and
// validate reports how much the structure #22 made expressible moved each case that uses it.
TEST_CASE("every recipe of issue #22's dev tables runs with its own flags") {
  const auto s = run("training_cases.json");
  int dev = 0, unrecorded = 0;
  for (const auto& c : s.cases) {
    const bool table = c.id.rfind("A-mb", 0) == 0 || c.id.rfind("A-nemo", 0) == 0 || c.id.rfind("A-mlperf", 0) == 0 ||
                       c.id.rfind("A-dsv3", 0) == 0 || c.id.rfind("A-torchtitan", 0) == 0;
    if (!table) continue;
    ++dev;
    CAPTURE(c.id);
    CAPTURE(c.note);
    // A run whose source does not record part of its recipe is no recipe to express (MLPerf v5.1's two 512-GPU
    // Llama 3.1 405B runs: an FP8 and an NVFP4 config of one layout, neither named by the log): unpriced, and it says
    // why. Anything else not runnable is a recipe gpuplan cannot express, which this test forbids.
    if (c.status == "not runnable" && c.note.rfind("underspecified: the source does not record", 0) == 0) {
      ++unrecorded;
      continue;
    }
    CHECK(c.status != "not runnable");
    if (c.status == "infeasible") CHECK(c.note.find("GiB") != std::string::npos);  // says by how much
  }
  CHECK(dev >= 84);
  CHECK(unrecorded <= 2);
}

// The TorchTitan paper's tables on Meta's Grand Teton H100 (hardware/gpus/h100-sxm-96gb-hbm2e.json): every recipe
// runs, and every row comes out optimistic, as the GPU file's stated assumption predicts (the SXM datasheet peak, the
// top of the authors' "between SXM and NVL"). The 500 W power limit is priced since session 28 (the part's own
// efficiency row, compute ceilings x 0.855 by the sustained-clock law, model/power_limit.hpp), which took the rows
// from 15-63% to 10-60% optimistic. The rows are kept out of the error bands ("not_in_bands"), and Table 5's
// interleaved-over-1F1B gain, which neither the peak nor the clock moves, is the model's own.
TEST_CASE("the TorchTitan rows run on the Grand Teton H100, optimistic, out of the bands, with Table 5's schedule ratio") {
  const auto s = run("training_cases.json");
  std::vector<gpuplan::model::BandCase> bands;
  gpuplan::cli::append_band_cases(s, bands);
  int rows = 0;
  double one_f_one_b = 0, interleaved = 0;
  for (const auto& c : s.cases) {
    if (c.id.rfind("A-torchtitan-", 0) != 0) continue;
    ++rows;
    CAPTURE(c.id);
    CAPTURE(c.note);
    CHECK(c.gpu == "grand-teton-h100");
    REQUIRE(c.error.has_value());
    CHECK(*c.error > 0.05);  // 9.7-59.9% at the SXM peak and the 500 W clock: optimistic, never pessimistic
    CHECK(*c.error < 0.70);
    CHECK(c.regime.kind.empty());
    CHECK(std::none_of(bands.begin(), bands.end(), [&](const auto& b) { return b.id == c.id; }));
    if (c.id == "A-torchtitan-t5-llama31-405b-512gpu-1f1b") one_f_one_b = *c.predicted / c.measured;
    if (c.id == "A-torchtitan-t5-llama31-405b-512gpu-interleaved") interleaved = *c.predicted / c.measured;
  }
  CHECK(rows == 18);
  // Measured 128 / 100 tokens/s per GPU; the ratio of the two predictions over that: 1.303 / 1.28 = +1.8%.
  REQUIRE(one_f_one_b > 0);
  CHECK(interleaved / one_f_one_b == gptest::approx(1.0).epsilon(0.05));
}

TEST_CASE("validate reports how much issue #22's structure moved each case that uses it") {
  const auto s = run("training_cases.json");
  int priced = 0, moved = 0;
  for (const auto& c : s.cases) {
    if (!c.predicted) continue;
    ++priced;
    if (c.structure.empty()) continue;
    CAPTURE(c.id);
    CAPTURE(c.structure);
    // Either the case priced without the structure, or the reason there is no such price.
    CHECK((c.predicted_before.has_value() || !c.before_note.empty()));
    if (c.predicted_before) ++moved;
  }
  CHECK(moved >= 20);
  auto case_by_id = [&](const std::string& id) -> const cli::CaseResult& {
    for (const auto& c : s.cases)
      if (c.id == id) return c;
    FAIL("no case " << id);
    return s.cases.front();
  };
  // DeepSeek-V3 on 1024 H100s (Megatron-Bridge 25.09): its layout string with the MTP layer, the EP all-to-all
  // overlap, the dense-MLP recompute and expert TP 1 beside TP 2 are all structure of #22.
  const auto& h = case_by_id("A-mb2509-H100-DeepSeekV3-1024gpu");
  REQUIRE(h.predicted);
  for (const char* w : {"expert TP 1", "pipeline layout", "MTP", "recompute modules", "EP A2A overlap", "FP8 tensorwise"})
    CHECK(h.structure.find(w) != std::string::npos);
  // Qwen3-235B on 64 GB200s: the nearest layout before folding is the case's own 'before' (EP 32, expert TP = TP 2).
  const auto& q = case_by_id("A-mb2509-GB200-Qwen3_235B_a22B-64gpu");
  REQUIRE(q.predicted_before);
  CHECK(q.before_layout.find("EP32") != std::string::npos);
  CHECK(*q.predicted != *q.predicted_before);
  // The report has the section, and counts the cases that use none of it.
  const std::string md = cli::render_validation_markdown(s, "t");
  CHECK(md.find("### What issue #22's structure moved") != std::string::npos);
  CHECK(md.find(fmt::format("of the {} priced cases", priced)) != std::string::npos);
}

// The textbook's worked examples (../shared/reference/textbook.md), with its assumptions as explicit inputs, run
// through the model's own formulas: each must land within the precision the textbook states.
TEST_CASE("every textbook worked example is reproduced within the textbook's stated precision") {
  auto v = cli::validate_textbook(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/textbook_cases.json", data().lib);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  CHECK(v->evaluated == 19);
  for (const auto& c : v->cases) {
    CAPTURE(c.id);
    CHECK(c.status == "ok");
  }
}

namespace {
struct InferenceRun {
  cli::ValidationSummary all;
  std::vector<std::pair<std::string, cli::ValidationSummary>> by_source;
};
const InferenceRun& inference() {
  static const InferenceRun r = [] {
    InferenceRun x;
    auto v = cli::validate_inference(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/inference_cases.json", data().db,
                                     data().lib, &x.by_source);
    REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
    x.all = v.value();
    return x;
  }();
  return r;
}
const cli::ValidationSummary& source(const std::string& key) {
  for (const auto& [k, v] : inference().by_source)
    if (k == key) return v;
  FAIL("no source " << key);
  static cli::ValidationSummary none;
  return none;
}
}  // namespace

// Published inference measurements from current engines: TensorRT-LLM's offline max-throughput table on H100 (FP8
// Llama 3.1 8B, 3.3 70B, 3.1 405B at ten ISL/OSL pairs; KV in FP8, see the case notes) and Azure's static-batch
// TensorRT-LLM latencies on A100 (fp16). The bar: median |error| ≤ 15%, none over 35%. The B200 NVFP4 rows
// are run too but not in this bar: every B200 efficiency is an assumption (Hopper's, no B200 measured) and the
// model is 28-60% optimistic there (next test).
TEST_CASE("published B200 NVFP4 throughput meets the bar (median 15%, max 35%)" * doctest::should_fail()) {
  std::vector<double> errs;
  for (const auto& c : source("trtllm-perf-overview").cases)
    if (c.error && c.gpu == "b200-hgx") errs.push_back(std::fabs(*c.error));
  REQUIRE(errs.size() == 20);
  std::sort(errs.begin(), errs.end());
  CHECK(errs[errs.size() / 2] <= 0.15);
  CHECK(errs.back() <= 0.35);
}
// Attention-DP with wide EP (issue #21 d2): LMSYS's 2025-05-05 DeepSeek-V3 runs on H100 (EP72 decode, EP32 prefill)
// and DeepSeek's EP32 prefill profile on H800 as LMSYS turned it into throughput (data/validation/inference_cases.json).
// The decode step is within 25% (+17%: the all-to-all in series, where SGLang overlaps it with the other micro-batch).
// Mapped to what the blog ran (DeepEP low-latency, two-batch overlap): 55.9 ms against 91.9 (-39%). DeepEP's
// kernels in series with the compute give 92.1 ms (+0.2%); the overlap as modelled (each half's all-to-all hidden
// behind the other half's compute) gains +65% where the blog measured +25.5% at 256 sequences: the blog's breakdown
// has the communication kernels slower under TBO than in DeepEP's unit tests (dispatch 0.17 ms a layer against 0.06,
// busy-waiting) and the compute kernels slower beside them. Not tuned: this test fails until that is modelled.
TEST_CASE("wide-EP DeepSeek-V3 decode on 72 H100 (LMSYS 2025-05-05) within 25%" * doctest::should_fail()) {
  const auto& s = source("lmsys-large-scale-ep-2025-05");
  CHECK(s.evaluated == 3);
  bool seen = false;
  for (const auto& c : s.cases)
    if (c.id == "D-lmsys-ep72-decode-H100-DeepSeek-V3-b256") {
      REQUIRE(c.error.has_value());
      CHECK(std::fabs(*c.error) <= 0.25);
      seen = true;
    }
  CHECK(seen);
}
// The prefill with DeepEP's normal kernels (a token once per destination node: 2.7 copies over IB against NCCL's 6,
// fp8 dispatch) and two-batch overlap: 1.61 s against 2.606 (SGLang, H100: -38%) and 2.09 (DeepSeek's profile, H800:
// -23%). In series (no overlap) the same kernels give 2.588 s (-0.7%, +24%): the overlap as modelled gains +61% where
// the blog measured +27-35%, and SGLang's default expert placement is 18% slower than its simulated perfect EPLB
// (uniform routing here). Not tuned: this asserts the bar and fails until the overlap's costs are modelled.
TEST_CASE("wide-EP DeepSeek-V3 prefill (EP32, 16,384 tokens a GPU) within 25%" * doctest::should_fail()) {
  for (const auto& c : source("lmsys-large-scale-ep-2025-05").cases)
    if (c.error && c.id.find("prefill") != std::string::npos) {
      CAPTURE(c.id);
      CHECK(std::fabs(*c.error) <= 0.25);
    }
}
TEST_CASE("published inference from current engines: median error at most 15% and none over 35%") {
  const auto& trt = source("trtllm-perf-overview");
  const auto& az = source("azure-nd-a100-v4");
  CHECK(trt.evaluated == 50);
  CHECK(az.evaluated == 5);
  std::vector<double> errs;
  for (const auto* s : {&trt, &az})
    for (const auto& c : s->cases)
      if (c.error && c.gpu != "b200-hgx") {
        CAPTURE(c.id);
        CHECK(std::fabs(*c.error) <= 0.35);
        errs.push_back(std::fabs(*c.error));
      }
  std::sort(errs.begin(), errs.end());
  REQUIRE(!errs.empty());
  CHECK(errs[errs.size() / 2] <= 0.15);
}

// Splitwise's 2023 profiles (Llama-2-70B and BLOOM-176B on DGX-A100/H100, fp16): decode steps do not fall below a
// per-layer floor that is the same at TP 2, 4 and 8 and at batch 1 to 16 — a host-bound engine, which the model
// (CUDA graphs) does not reproduce. The bar is not met (docs/accuracy.md); this test fails until it is.
TEST_CASE("Splitwise profiles meet the issue's bar (median 15%, max 35%)" * doctest::should_fail()) {
  const auto& s = source("splitwise-sim");
  CHECK(s.median_abs_error <= 0.15);
  CHECK(s.max_abs_error <= 0.35);
}

// The bar read per dev case (../shared/validation/dev_cases.json: a Splitwise sweep is one dev case of ~45 rows,
// a TensorRT-LLM point one of one row), each dev case scored by its rows' median |error|. The median holds (12.0% over
// 63 dev cases on 2026-11-22); the max does not: the B200 NVFP4 points (an unmeasured GPU) and the host-bound
// Splitwise sweeps reach 63%. The median is guarded; the whole bar is an expected failure.
TEST_CASE("published inference per dev case: median error at most 15%") {
  const auto& all = inference().all;
  CHECK(all.dev_cases_evaluated >= 60);
  CHECK(all.dev_cases_evaluated < all.evaluated);
  CHECK(all.dev_case_median_abs_error <= 0.15);
}
TEST_CASE("published inference per dev case meets the whole bar (median 15%, none over 35%)" * doctest::should_fail()) {
  const auto& all = inference().all;
  CHECK(all.dev_case_max_abs_error <= 0.35);
}

// Regression guard on every runnable inference case: all run, none is NaN or non-positive, and the overall median
// stays at today's level or better.
TEST_CASE("published inference cases do not regress: every runnable case evaluates, median error at most 40%") {
  const auto& all = inference().all;
  CHECK(all.evaluated == 415);  // 412 + the three wide-EP DeepSeek-V3 cases (lmsys-large-scale-ep-2025-05)
  CHECK(all.median_abs_error <= 0.40);
  for (const auto& c : all.cases) {
    if (c.status == "not runnable") continue;
    CAPTURE(c.id);
    REQUIRE(c.predicted.has_value());
    CHECK(std::isfinite(*c.predicted));
    CHECK(*c.predicted > 0);
  }
}

// Our own serving measurements (data/validation/measured/<gpu>/serve_llama3_8b.json): prefill and decode steps of a
// Llama-3-8B-shaped model in plain PyTorch ops under CUDA graphs, H100 and H200, predicted with the implementation's
// kernel style (eager ops, FlashAttention-2) and the built-in efficiency defaults. Guard at today's accuracy: median
// |error| ≤ 15%, none over 25% (the calibrated target, 5% / 15%, is for the calibrated profiles).
TEST_CASE("our own serving measurements: every trusted point evaluates, median error at most 15%, none over 25%") {
  std::vector<std::pair<std::string, cli::ValidationSummary>> by;
  auto v = cli::validate_inference(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_inference_cases.json",
                                   data().db, data().lib, &by);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  CHECK(v->evaluated == 75);
  CHECK(v->median_abs_error <= 0.15);
  CHECK(v->max_abs_error <= 0.25);
}

// Issue #27's done-when, "throughput is monotone in batch wherever the measured one is", against our own one-row
// batch steps (data/validation/measured_batch_steps.json: Llama-3-8B decode on one H200, context 1024, CUDA graphs,
// every batch 112-144, 152-168, 200-216, 248-257 and every second one 240-264; scripts/measure/serve_batch_fine_run*.sh,
// 2026-11-29). The measured throughput itself is not monotone at one-row steps: it falls where cuBLAS changes kernel
// or tiling (0.956 at 116, 0.963 at 133, 0.989 at 161, 0.961 at 166, 0.992 at 209, 0.974 at 215, 0.981 at 257), each
// fall held by the points after it. The built-in rows fall at 161 (0.986), 209 (0.983), 242 (0.987), 257 (0.963) and
// 258 (0.964): each where the measured throughput falls too (0.989, 0.992, 0.9996, 0.981, 0.984), and nowhere else
// by more than 0.1% (129: −0.02%, the time held flat where the tile rows regroup; measured +1.7%). Every point is within 7% (worst
// +6.3% at 257, where the model's tile row steps by 8 rows at once).
namespace {
struct BatchStepPoint {
  std::string source;
  int batch;
  double measured, predicted;
};
struct BatchStepFalls {
  int pairs = 0, measured_falls = 0, model_falls = 0;
  double max_abs_error = 0.0;
  std::vector<int> model_falls_where_measured_rises;  // the batch q of each such pair (q − 1 or q − 2, q)
};
// Neighbouring points (one or two rows apart) of one source: where the measured and the model's throughput fall.
// A model fall is one of more than 0.1% (at 129 the tile rows' cap leaves a flat −0.02% on the 8B).
BatchStepFalls batch_step_falls(const std::vector<BatchStepPoint>& pts, const std::string& source) {
  BatchStepFalls f;
  const BatchStepPoint* p = nullptr;
  for (const auto& q : pts) {
    if (q.source != source) continue;
    f.max_abs_error = std::max(f.max_abs_error, std::abs(q.predicted / q.measured - 1.0));
    if (p != nullptr && q.batch - p->batch <= 2) {
      const double measured = (q.batch / q.measured) / (p->batch / p->measured);
      const double predicted = (q.batch / q.predicted) / (p->batch / p->predicted);
      ++f.pairs;
      if (measured < 1.0) ++f.measured_falls;
      if (predicted < 0.999) {
        ++f.model_falls;
        if (measured >= 1.0) f.model_falls_where_measured_rises.push_back(q.batch);
      }
    }
    p = &q;
  }
  return f;
}
std::vector<BatchStepPoint> batch_step_points() {
  auto v = cli::validate_inference(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_batch_steps.json",
                                   data().db, data().lib);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  REQUIRE(v->evaluated == 145);
  std::vector<BatchStepPoint> pts;
  for (const auto& c : v->cases) {
    REQUIRE(c.predicted);
    const auto b = c.id.find("-decode-b");
    REQUIRE(b != std::string::npos);
    pts.push_back({c.source, std::stoi(c.id.substr(b + 9)), c.measured, *c.predicted});
  }
  return pts;
}
}  // namespace

// Issue #27's done-when: "throughput is monotone in batch wherever the measured one is". The hardware's own throughput
// falls at one-row steps where cuBLAS re-tiles (data/validation/measured_batch_steps.json), so the test is that the
// model's falls lie where the measured ones do.
TEST_CASE("one-row batch steps on our H200: Llama-3-8B, the model's throughput falls only where the measured one falls") {
  const auto pts = batch_step_points();
  int model_falls = 0, measured_falls = 0, pairs = 0;
  for (const char* src : {"own-h200-sxm-141gb-fine", "own-h200-sxm-141gb-fine2"}) {
    CAPTURE(src);
    const auto f = batch_step_falls(pts, src);
    // 8.1% / 8.3% since session 33 (≤ 7% before): the eager SwiGLU's strided SiLU and product run at the SMs' issue
    // rate (moe_cost.hpp issue_bound_cost), a few µs a layer more at b 32-128, where these decodes were already slow.
    CHECK(f.max_abs_error <= 0.085);
    CHECK(f.model_falls_where_measured_rises.empty());
    model_falls += f.model_falls;
    measured_falls += f.measured_falls;
    pairs += f.pairs;
  }
  CHECK(pairs == 85);
  CHECK(model_falls == 5);
  CHECK(measured_falls == 25);
}

// The second model (session 32): Llama-3-70B's shape at TP 2 on two H200s, in windows around the model's falls. The
// measured throughput falls at 17 of 44 neighbouring pairs; the model's GEMM tile rows (steps of 16 rows above 128)
// fall at 16k + 1 where the hardware falls at 16k at some of them (176 → 177, 192 → 193, 288 → 289).
TEST_CASE("one-row batch steps on two H200s at TP 2: the measured falls and the model's error") {
  const auto f = batch_step_falls(batch_step_points(), "own-h200-sxm-141gb-x2-tp2-l20");
  CHECK(f.pairs == 44);
  CHECK(f.measured_falls == 17);
  CHECK(f.max_abs_error <= 0.15);
}
TEST_CASE("one-row batch steps on two H200s at TP 2: the model's throughput falls only where the measured one falls"
          * doctest::should_fail()) {
  // Open (#27): the model falls at 177, 193 and 289, where the measured throughput rises (it fell one row earlier).
  // The measured rise there is the far side of a one-row spike: at M = 176, 192 and 288 cuBLAS runs a different kernel
  // (gemm_graph_kernels_llama3_70b_tp2.json: 64×176 / 192×64 / 384×96, 6-10% slower than its neighbours), and at
  // 16k + 1 its tile rows do step (8192×14336: 128×88 → 128×96 tiles, +2.9% from 175 to 177; 28672×8192 +2.6%): a
  // model without the spikes, even one exact elsewhere, falls at 177 (~0.5% on the step). Session 33's turned tile
  // (ops.cpp swapped_tiles) leaves these three as they were.
  const auto f = batch_step_falls(batch_step_points(), "own-h200-sxm-141gb-x2-tp2-l20");
  CHECK(f.model_falls_where_measured_rises.empty());
}

// Our own MoE serving measurement (data/validation/measured/h100-sxm5-80gb/serve_qwen3_30b_a3b.json): decode steps of a
// Qwen3-30B-A3B-shaped decoder under CUDA graphs, batch 1-256 at contexts 1K and 4K, and two eager prefills. A group
// of its own, guarded at today's accuracy: 6.8% median, 13.4% worst with the built-in defaults, since the grouped
// expert GEMMs follow the measured grouped-kernel law (1.065 × batched + 11 µs; before: 16.1% / 22.3%), the eager
// routing kernels are priced (moe_kernels_profile.json: 24 per MoE layer; before them 27% / 49.8%), and the outputs'
// gather back into pair order and the eager SwiGLU's two kernels are (2026-11-27; before: 6.8% / 18.6%). The worst is
// the 4096-token prefill (-13.4%). The guard fails if a change makes it worse; tighten it as the op list grows.
TEST_CASE("our own MoE serving measurements: all 20 evaluate, median error at most 8%, none over 20%") {
  std::vector<std::pair<std::string, cli::ValidationSummary>> by;
  auto v = cli::validate_inference(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_moe_inference_cases.json",
                                   data().db, data().lib, &by);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  CHECK(v->evaluated == 20);
  CHECK(v->median_abs_error <= 0.08);  // 3.2% since the per-class in-graph costs (issue #27; 6.8% before)
  // 15.3%: decode b = 1 at 1024 tokens, now too slow; the H200 profile of the same step (kernel_class_cost.json) puts
  // the excess in the grouped calls (the law's 1.065 × the GEMM class + 11 µs + 2 descriptor kernels at 2.4 µs: 56.5
  // µs a layer against 50.9 measured), the 3 device copies (2.4 µs each against 1.32) and the small GEMMs (ANALYSIS.md).
  // Session 33: the EP 1 1K eager prefill is the worst, +16.7% (was +12.4%): its strided SwiGLU and row-scale kernels
  // now run at the SMs' issue rate (moe_cost.hpp), and it was already over-priced by the uniform routing (the random
  // router touches 30.5 of 128 experts at 1K; ANALYSIS.md, session 32).
  CHECK(v->max_abs_error <= 0.17);
}

// Before / after calibration (issue "Calibration on the real target"): with the fitted H100 and H200 profiles
// (data/calibration/), our own serving measurements are predicted within the calibrated target (median 5%)
// and, until session 33, with a smaller worst case than the built-in defaults (13.1% against 15.0%; the worst is H200 prefill,
// compute-bound at the 700 W cap, where the benches' short GEMM bursts run faster than a sustained prefill). The
// calibration no longer halves the median: since issue #27 the built-in defaults carry the per-class in-graph costs
// measured on our own decode steps too (built-in 2.9%, calibrated 3.5%; before, 10.4% against 4.7%).
TEST_CASE("calibration profiles keep our own serving measurements within 5% median, with a smaller worst case") {
  std::vector<std::pair<std::string, cli::ValidationSummary>> by;
  auto v = cli::validate_inference(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_inference_cases.json",
                                   data().db, data().lib, &by, GPUPLAN_TEST_DATA_DIR);
  REQUIRE_MESSAGE(v.ok(), v.diagnostics().to_string());
  CHECK(v->evaluated_calibrated == 75);
  CHECK(v->median_abs_error_calibrated <= 0.05);
  // Session 33: the built-in worst case fell to 11.0% (the eager SwiGLU's strided kernels priced at the SMs' issue
  // rate moved every own dense prefill towards its measurement), below the calibrated 12.0%: the calibrated worst
  // is held to the 15% instead (the test below), and here to today's level.
  CHECK(v->max_abs_error_calibrated <= 0.125);
}

// The full target on all our own measured cases (training steps, peak memory and serving steps) with the
// calibrated profiles: median ≤ 5%, none over 15%. Met since the memory model follows the allocator timelines of
// our runs (mem_*.json: PyTorch's set_to_none gradients, autocast weight copies, the eager cross-entropy buffers,
// FSDP2's root unit) and serving runs at the sustained GEMM rate; the worst are the FSDP2 steps (+11 to +12.3%) and
// the H200 prefill points (−11 to −14%).
TEST_CASE("calibrated predictions of all our own measurements: median 5%, none over 15%") {
  auto t = cli::validate_training(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_cases.json", data().db,
                                  data().lib, GPUPLAN_TEST_DATA_DIR);
  auto s = cli::validate_inference(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_inference_cases.json",
                                   data().db, data().lib, nullptr, GPUPLAN_TEST_DATA_DIR);
  REQUIRE(t.ok());
  REQUIRE(s.ok());
  std::vector<double> e;
  for (const auto* sum : {&t.value(), &s.value()})
    for (const auto& c : sum->cases)
      if (c.error_calibrated) e.push_back(std::fabs(*c.error_calibrated));
  REQUIRE(e.size() == 113);  // + the two eager MPT steps on one H100 (session 16)
  std::sort(e.begin(), e.end());
  CHECK(e[e.size() / 2] <= 0.05);
  CHECK(e.back() <= 0.15);
}

// What the overlap items buy (docs/calibration.md): the DDP steps on 2 and 4 H200s, whose error came from
// communication beside compute, are predicted within 10% with the H200 profile (measured GEMM loss and per-call wait).
// Since issue #24 the built-in defaults carry the wait too (the median of the H100 and H200 overlap items,
// efficiency.cpp kCommWaitKernels): they were +6.4 to +12.6% without it, and are now within 5%.
TEST_CASE("the overlap items' wait brings the DDP steps within 10% calibrated and 5% built-in") {
  auto v = cli::validate_training(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured_cases.json", data().db,
                                  data().lib, GPUPLAN_TEST_DATA_DIR);
  REQUIRE(v.ok());
  const auto& s = v.value();
  int ddp = 0;
  for (const auto& c : s.cases) {
    if (c.id.find("_ddp") == std::string::npos || c.id.find("-memory") != std::string::npos) continue;
    CAPTURE(c.id);
    REQUIRE(c.error.has_value());
    REQUIRE(c.error_calibrated.has_value());
    CHECK(std::fabs(*c.error_calibrated) <= 0.10);
    CHECK(std::fabs(*c.error) <= 0.05);
    ++ddp;
  }
  CHECK(ddp == 3);
}

// Our NCCL collectives held out from the calibration (data/validation/measured/h200-sxm-141gb/heldout-collectives-*):
// the collectives bench run after the calibration's dense sweeps (4 sizes per octave) on the same hosts, at sizes
// halfway between theirs and at the powers of two again, never fitted. Predicted by the communicator the models use,
// built-in link tables against the H200 profile.
namespace {
double held_out_bytes(const cli::CaseResult& c) {
  // id: <gpu>-<op>-<n>gpu-<size> <unit>-<file tag>, e.g. h200-sxm-141gb-all_reduce-2gpu-1.25 KiB-2gpu-repeat-...
  const std::string rest = c.id.substr(c.id.find("gpu-", c.gpu.size()) + 4);
  const std::string unit = rest.substr(rest.find(' ') + 1, 3);
  const double scale = unit == "GiB" ? 1024.0 * 1024 * 1024 : unit == "MiB" ? 1024.0 * 1024 : unit == "KiB" ? 1024.0 : 1.0;
  return std::stod(rest) * scale;
}
}  // namespace

TEST_CASE("our held-out collectives: the calibrated communicator within 5% median, bandwidth-bound within 15%") {
  auto v = cli::validate_collectives(GPUPLAN_TEST_DATA_DIR, data().db);
  REQUIRE(v.ok());
  const auto& s = v.value();
  CHECK(s.evaluated >= 1500);
  // Every case of a GPU whose profile measures its NVLink (the H200's, and the H100's since its 2026-11-26 sweeps on
  // 2 and 4 GPUs) is priced calibrated too.
  const auto profiled = std::count_if(s.cases.begin(), s.cases.end(), [](const cli::CaseResult& c) {
    return (c.gpu == "h200-sxm-141gb" || c.gpu == "h100-sxm5-80gb") && c.status == "ok";
  });
  CHECK(s.evaluated_calibrated == profiled);
  CHECK(s.median_abs_error_calibrated <= 0.05);
  CHECK(s.median_abs_error_calibrated <= 0.2 * s.median_abs_error_same_cases);
  // From 4 MiB up a collective is a bandwidth, a property of the NVLink fabric: the profile's curve holds across the
  // hosts and the hours between the sweeps (H200: within 6.3%; the same size measured twice agrees within 2.4%). The
  // exception is a step in NCCL's own choice: on the 4×H100 host send/recv takes 776 µs at 117 MiB and 518 µs at
  // 140 MiB (more channels above 128 MiB); the calibration grid has 128 and 181 MiB around it (its 152 MiB sample was
  // refused for spread), so the held-out 140 and 166 MiB fall on an interpolation across the step (+45%, +24%).
  // Bench sweeps only: PyTorch's all_to_all_single times (a2a-torch) have their own test.
  int large = 0, over = 0;
  for (const auto& c : s.cases) {
    if (!c.error_calibrated || held_out_bytes(c) < 4.0 * 1024 * 1024) continue;
    if (c.id.find("-a2a-torch-") != std::string::npos) continue;
    CAPTURE(c.id);
    CHECK(std::fabs(*c.error_calibrated) <= 0.50);
    if (std::fabs(*c.error_calibrated) > 0.15) ++over;
    ++large;
  }
  CHECK(large >= 600);
  CHECK(over <= large / 100);
}

// NCCL's all-to-all as PyTorch issues it (all_to_all_single, EP 2, 2×H100 SXM5; heldout-collectives-a2a-torch-*):
// the repeats of the equal-split sweep and the token-shaped dispatches, GPU-side times, all out of the η_p2p fit
// (fitted on moe_alltoall.json's equal sweep). Built-in link data (c.error); the H100 profile's own all-to-all fit
// (2026-11-26) is checked on the same cases below.
TEST_CASE("our measured all-to-all on 2xH100: median within 10% from 1 MiB, none over 20% from 16 MiB") {
  auto v = cli::validate_collectives(GPUPLAN_TEST_DATA_DIR, data().db);
  REQUIRE(v.ok());
  std::vector<double> errors;
  for (const auto& c : v.value().cases) {
    if (c.id.find("-a2a-torch-") == std::string::npos || c.status != "ok") continue;
    if (c.id.find("-2gpu-") == std::string::npos) continue;
    if (held_out_bytes(c) < 1024.0 * 1024) continue;
    errors.push_back(std::fabs(*c.error));
    CAPTURE(c.id);
    if (held_out_bytes(c) >= 16.0 * 1024 * 1024) CHECK(std::fabs(*c.error) <= 0.20);
  }
  REQUIRE(errors.size() >= 60);
  std::nth_element(errors.begin(), errors.begin() + errors.size() / 2, errors.end());
  CHECK(errors[errors.size() / 2] <= 0.10);
}

// EP 4 on a 4×H100 SXM5 NVSwitch host (nvidia-h100-x4, 2026-11-26; heldout-collectives-a2a-torch-*-ep4-*), priced with
// η_p2p fitted on the EP 2 sweep: out of the fit in group size too. The model is slow by a median of about 10% at EP 4
// (NVSwitch serves four peers' sends better than the 2-GPU fit implies) and by up to 34% between 8 and 32 MiB, where
// NCCL changes protocol (#21: to be modelled from these samples).
TEST_CASE("our measured all-to-all on 4xH100 (out of the EP 2 fit): median within 15% from 1 MiB, none over 35%") {
  auto v = cli::validate_collectives(GPUPLAN_TEST_DATA_DIR, data().db);
  REQUIRE(v.ok());
  std::vector<double> errors;
  for (const auto& c : v.value().cases) {
    if (c.id.find("-a2a-torch-") == std::string::npos || c.id.find("-4gpu-") == std::string::npos) continue;
    if (c.status != "ok" || held_out_bytes(c) < 1024.0 * 1024) continue;
    errors.push_back(std::fabs(*c.error));
    CAPTURE(c.id);
    CHECK(std::fabs(*c.error) <= 0.35);
  }
  REQUIRE(errors.size() >= 30);
  std::nth_element(errors.begin(), errors.begin() + errors.size() / 2, errors.end());
  CHECK(errors[errors.size() / 2] <= 0.15);
}

// The same PyTorch all-to-all times priced with the H100 profile's all-to-all curve (the collectives bench's grouped
// send/recv, 2 and 4 GPUs): from 4 MiB the median is within 10%; PyTorch's eager and loop timings of token-shaped
// dispatches (8 MiB, 128 MiB top-8 on 4 GPUs) run up to 31% slower than the bench's calls of the same size.
TEST_CASE("our measured PyTorch all-to-all against the calibrated H100 curve: median within 10% from 4 MiB") {
  auto v = cli::validate_collectives(GPUPLAN_TEST_DATA_DIR, data().db);
  REQUIRE(v.ok());
  std::vector<double> errors;
  for (const auto& c : v.value().cases) {
    if (c.id.find("-a2a-torch-") == std::string::npos || !c.error_calibrated) continue;
    if (held_out_bytes(c) < 4.0 * 1024 * 1024) continue;
    errors.push_back(std::fabs(*c.error_calibrated));
  }
  REQUIRE(errors.size() >= 80);
  std::nth_element(errors.begin(), errors.begin() + errors.size() / 2, errors.end());
  CHECK(errors[errors.size() / 2] <= 0.10);
}

// The bar of none over 15% is not met below 4 MiB: latency-bound collectives (5–13 µs) move with the host and
// over minutes (the same op and size measured twice, 40 s apart on one host, differ by up to 39%; on two hosts by up to
// 101%), and NCCL's protocol switch near 3 MiB moves between sweeps (docs/accuracy.md). Tracked as an expected failure:
// when it starts to pass, make it a plain assertion.
TEST_CASE("our held-out collectives: none over 15% (not met below 4 MiB)" * doctest::should_fail()) {
  auto v = cli::validate_collectives(GPUPLAN_TEST_DATA_DIR, data().db);
  REQUIRE(v.ok());
  CHECK(v.value().max_abs_error_calibrated <= 0.15);
}

// Issue #21's done-when for DeepSeek-V3 as trained: 2048 H800, PP 16 DualPipe, EP 64, ZeRO-1 DP 128, no TP, FP8
// (DeepSeek-V3 technical report, arXiv:2412.19437 §3.2-§3.3), priced against the reported 2.664M H800 GPU-hours of
// pre-training on 14.8T tokens (Table 1; the case A-dsv3-tr-H800-2048gpu-pretrain in training_cases.json). The bar
// the issue sets: within 15%.
namespace {
const cli::CaseResult* dsv3_case(const cli::ValidationSummary& s) {
  for (const auto& c : s.cases)
    if (c.id == "A-dsv3-tr-H800-2048gpu-pretrain") return &c;
  return nullptr;
}
}  // namespace

// Met since session 33: with the layer split of NVIDIA's Megatron-Bridge DeepSeek-V3 recipe for PP 16 (the case's
// pipeline_layout; DeepSeek publishes none), the model prices the step at 17.1 s against the measured 19.93 s (ISCA '25
// Table 4), 2.29M GPU-hours, 14.1% short (session 25: 26.4% short; session 26: 19.5%, DeepSeek's per-axis FP8 casts,
// MLA's copies, the E5M6 store and the paired GEMMs on the SMs DeepEP leaves; session 27: the paired attention beside
// those SMs at its measured loss and the bubble's lone backward chunk waiting for its own all-to-all; session 32:
// DualPipe's pipeline sends per micro-batch, 18.0% short; session 33: MLA's QKV block as the four GEMMs DeepSeek's
// profile runs, each at its own shape with its own FP8 operands, 15.1%, and the router as the profile's ~58 small
// kernels, 14.1%, and DeepGEMM's per-GEMM scale transposes, 13.9% on that branch; 14.1% merged with F4's rotary). What is still short (docs/deepseek-v3-profile.md, "Kernel classes against the priced terms"):
// DeepSeek's elementwise and cast kernels below gpuplan's streaming rate, DeepEP's combine beside compute, the
// production pair's 11% over the profiled one, the bubble (1.17 s against 2.06 s) and the optimizer with the DP
// collectives (0.11 s against 0.29 s).
TEST_CASE("DeepSeek-V3's published pre-training on 2048 H800 is priced within 15% of its 2.664M GPU-hours") {
  const auto s = run("training_cases.json");
  const cli::CaseResult* c = dsv3_case(s);
  REQUIRE(c != nullptr);
  REQUIRE(c->predicted);
  CAPTURE(*c->predicted);
  CHECK(c->measured == gptest::approx(2.664e6));
  CHECK(std::abs(*c->predicted / 2.664e6 - 1.0) <= 0.15);
}

// The priced side of the same gap, so that it cannot drift unnoticed: at the recipe's split the model is still short
// of the report, 10-15% (session 26: 19.5%; session 27: 18.5%; session 32: 18.0%; session 33: 14.1%).
TEST_CASE("DeepSeek-V3 at Megatron-Bridge's PP 16 split is priced 10-15% short of the reported GPU-hours") {
  const auto s = run("training_cases.json");
  const cli::CaseResult* c = dsv3_case(s);
  REQUIRE(c != nullptr);
  REQUIRE(c->predicted);
  CAPTURE(*c->predicted);
  CHECK(*c->predicted / 2.664e6 - 1.0 < -0.10);
  CHECK(*c->predicted / 2.664e6 - 1.0 > -0.15);
}

// The other half of the done-when: at the recipe's split device 0 (stages 0 and 15 under DualPipe: the embedding,
// 5 layers, the MTP module and the head) needs 78.7 GiB of the H800's 81,008 MiB (79.1 GiB), with the FP8 weights kept
// in one layout as DeepSeek's profile shows (deepseek-ai/profile-data train.json), the MTP depth's logits (§2.2) and
// the loss kernel at gpuplan's default (Transformer Engine's cross entropy, which keeps only the logits). It fits by
// 0.4 GiB, inside terms DeepSeek does not publish (its loss kernel, DeepEP's buffers, the allocator's slack;
// docs/deepseek-v3-profile.md): a fit, not a margin.
TEST_CASE("DeepSeek-V3's published layout fits on the H800 (issue #21 done-when)") {
  const auto s = run("training_cases.json");
  const cli::CaseResult* c = dsv3_case(s);
  REQUIRE(c != nullptr);
  CAPTURE(c->note);
  CHECK(c->status == "ok");
}
