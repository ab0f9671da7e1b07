// Interview drills (cli/answer_check.hpp, cli/drills.hpp, data/drills/textbook.json): the answer checker, the drill
// file's decoder and its diagnostics, and — the real check that the data is right — every drill's answer, computed
// by the model, against the answer its source states.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <set>

#include "test_paths.hpp"
#include "../cli/cli_runner.hpp"
#include "gpuplan/app/answer_check.hpp"
#include "gpuplan/app/drills.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"

using namespace gpuplan;
using app::AnswerUnit;
using app::Dimension;

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
app::DrillContext ctx() { return {&data().lib, &data().db, ""}; }

const AnswerUnit& unit(const char* s) {
  const AnswerUnit* u = app::find_unit(s);
  REQUIRE(u != nullptr);
  return *u;
}

std::string error_of(std::string_view text, const char* u) {
  auto r = app::parse_answer(text, unit(u));
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.diagnostics().items().size() == 1);
  return r.diagnostics().items().front().message;
}

Result<app::DrillSet> decode(const char* text) {
  return app::decode_drills(nlohmann::json::parse(text), "drills.json", ctx());
}

const char* kOneDrill = R"({"schema": 1, "kind": "drill-set", "source_file": "test", "drills": [
  {"id": "R", "topic": "roofline", "question": "ridge?", "source": "test", "kind": "ridge",
   "inputs": {"peak_TFLOPs": 312, "bandwidth_TBps": 2.0}, "unit": "FLOP/B", "rel_tolerance": 0.01,
   "stated_answer": 156}]})";
}  // namespace

TEST_SUITE("answer checker") {
  TEST_CASE("plain numbers, exponents, thousands separators and a leading ≈ parse in the answer's unit") {
    CHECK(app::parse_answer("156", unit("FLOP/B")).value() == 156);
    CHECK(app::parse_answer("  1.2e3 ", unit("FLOP/B")).value() == 1200);
    CHECK(app::parse_answer("1,365.3", unit("FLOP/B")).value() == gptest::approx(1365.3));
    CHECK(app::parse_answer("≈0.1", unit("s")).value() == gptest::approx(0.1));
    CHECK(app::parse_answer("~ 4.2e22", unit("FLOP")).value() == gptest::approx(4.2e22));
  }
  TEST_CASE("an answer with a unit of the same dimension converts: 70 GB in GiB, 4180 us in ms, 2.77x") {
    CHECK(app::parse_answer("70 GB", unit("GB")).value() == gptest::approx(70));
    CHECK(app::parse_answer("70GB", unit("GiB")).value() == gptest::approx(70e9 / 1073741824.0));
    CHECK(app::parse_answer("4180 us", unit("ms")).value() == gptest::approx(4.18));
    CHECK(app::parse_answer("2.77x", unit("×")).value() == gptest::approx(2.77));
    CHECK(app::parse_answer("112 gb", unit("TB")).value() == gptest::approx(0.112));
    CHECK(app::parse_answer("18.75 %", unit("%")).value() == gptest::approx(18.75));
    CHECK(app::parse_answer("3 GPUs", unit("GPUs")).value() == 3);
  }
  TEST_CASE("bad input says what was wrong: empty, not a number, unknown unit, a unit of another dimension") {
    CHECK(error_of("", "GB") == "enter a number (in GB)");
    CHECK(error_of("abc", "GB") == "'abc' is not a number (write e.g. 156, 1.2e3 or 1,365.3)");
    CHECK(error_of("1,5", "GB").find("'1,5' is not a number") != std::string::npos);
    CHECK(error_of("1.2.3", "GB").find("is not a number") != std::string::npos);
    CHECK(error_of("70 GBB", "GB") == "unknown unit 'GBB' (did you mean 'GB'?)");
    CHECK(error_of("4 ms", "GB") == "'ms' is a unit of time; this answer is bytes (in GB)");
  }
  TEST_CASE("right within the relative tolerance, wrong outside it, with the signed relative error") {
    auto v = app::check_answer(156, 156, 0.01);
    CHECK(v.correct);
    CHECK(v.relative_error == 0);
    v = app::check_answer(157.5, 156, 0.01);  // +0.96%
    CHECK(v.correct);
    v = app::check_answer(291, 295.22, 0.01);  // −1.4%
    CHECK_FALSE(v.correct);
    CHECK(v.relative_error == gptest::approx(291 / 295.22 - 1));
    CHECK(app::check_answer(154.44, 156, 0.01).correct);  // exactly −1%
  }
  TEST_CASE("a tolerance of 0 asks for the exact value, and a known common wrong answer is recognised") {
    CHECK(app::check_answer(3, 3, 0).correct);
    auto v = app::check_answer(2, 3, 0, 2.0);
    CHECK_FALSE(v.correct);
    CHECK(v.common_wrong);
    CHECK_FALSE(app::check_answer(4, 3, 0, 2.0).common_wrong);
    CHECK(app::describe(v, "GPUs", 0) ==
          "wrong: 2 GPUs (model: 3 GPUs; error -33.3%, tolerance exact) — that is the common wrong answer");
    CHECK(app::describe(app::check_answer(156, 156.0, 0.01), "FLOP/B", 0.01) ==
          "correct: 156 FLOP/B (model: 156 FLOP/B; error +0.0%, tolerance ±1%)");
  }
}

TEST_SUITE("drill file") {
  TEST_CASE("a minimal drill file decodes and its answer comes from the model") {
    auto s = decode(kOneDrill);
    REQUIRE_MESSAGE(s.ok(), s.diagnostics().to_string());
    REQUIRE(s->drills.size() == 1);
    auto a = app::answer_drill(*s, s->drills[0], ctx());
    REQUIRE(a.ok());
    CHECK(a->value == gptest::approx(156));
    CHECK(a->derivation.id == "roofline.ridge");
    REQUIRE_FALSE(a->derivation.inputs.empty());
    CHECK(a->derivation.inputs[0].origin.ref == "test");
  }
  TEST_CASE("every problem is reported with file and JSON pointer: unknown keys, kind, unit, inputs, duplicates") {
    auto s = decode(R"({"schema": 1, "kind": "drill-set", "source_file": "test", "drills": [
      {"id": "A", "topic": "t", "question": "q", "source": "s", "kind": "ridge", "inputs": {"peak_TFLOP": 312,
       "bandwidth_TBps": -2}, "unit": "GB", "rel_tolerance": 0.01, "stated": 1},
      {"id": "A", "topic": "t", "question": "q", "source": "s", "kind": "rigde", "inputs": {}, "unit": "FLOP/B",
       "rel_tolerance": 0.01},
      {"id": "B", "topic": "t", "question": "q", "source": "s", "kind": "kv_token",
       "inputs": {"model": "llama-2-7", "bytes_per_element": 2}, "unit": "KiB", "rel_tolerance": 2}]})");
    REQUIRE_FALSE(s.ok());
    const std::string all = s.diagnostics().to_string();
    INFO(all);
    CHECK(all.find("drills.json: /drills/0/stated: error: unknown key 'stated' (did you mean 'stated_answer'?)") !=
          std::string::npos);
    CHECK(all.find("drills.json: /drills/0/unit: error: 'GB' measures bytes, but kind 'ridge' computes arithmetic "
                   "intensity") != std::string::npos);
    CHECK(all.find("/drills/0/inputs/peak_TFLOP: error: unknown key 'peak_TFLOP' (did you mean 'peak_TFLOPs'?)") !=
          std::string::npos);
    CHECK(all.find("/drills/0/inputs/bandwidth_TBps: error:") != std::string::npos);
    CHECK(all.find("/drills/1/id: error: duplicate id 'A'") != std::string::npos);
    CHECK(all.find("/drills/1/kind: error: unknown kind 'rigde' (did you mean 'ridge'?)") != std::string::npos);
    CHECK(all.find("/drills/2/inputs/model: error: unknown model 'llama-2-7'") != std::string::npos);
    CHECK(all.find("/drills/2/rel_tolerance: error:") != std::string::npos);
  }
  TEST_CASE("a file that is not a drill set says so") {
    CHECK(decode("[]").diagnostics().to_string().find("drills.json: error: expected an object, got an array") !=
        std::string::npos);
    auto s = decode(R"({"schema": 1, "kind": "drill-set", "source_file": "x", "drills": {}})");
    CHECK(s.diagnostics().to_string().find("drills.json: /drills: error: expected an array of drills, got an object") !=
          std::string::npos);
    Diagnostics none;
    auto missing = app::load_drills("/nonexistent/drills.json", "drills.json", ctx());
    CHECK_FALSE(missing.ok());
  }
}

// The shipped drills: the model's answer against the answer the source states. A drill whose model_differs says why
// must really differ (so the note is removed when the model changes).
TEST_CASE("every shipped drill: the model's answer matches the stated answer within the drill's tolerance") {
  auto s = app::load_drills(std::string(GPUPLAN_TEST_DATA_DIR) + "/drills/textbook.json", "data/drills/textbook.json",
                            ctx());
  REQUIRE_MESSAGE(s.ok(), s.diagnostics().to_string());
  CHECK(s->drills.size() >= 30);
  std::set<std::string> topics;
  for (const auto& d : s->drills) {
    CAPTURE(d.id);
    topics.insert(d.topic);
    auto a = app::answer_drill(*s, d, ctx());
    REQUIRE_MESSAGE(a.ok(), a.diagnostics().to_string());
    CHECK_FALSE(a->derivation.empty());
    CHECK_FALSE(d.source.empty());
    REQUIRE(d.stated_answer.has_value());
    const auto v = app::check_answer(*d.stated_answer, a->value, d.rel_tolerance);
    INFO("model " << a->value << " " << d.unit << ", stated " << *d.stated_answer);
    if (d.model_differs.empty()) CHECK(v.correct);
    else CHECK_FALSE(v.correct);
    // The common wrong answer is wrong.
    if (d.common_wrong_answer) CHECK_FALSE(app::check_answer(*d.common_wrong_answer, a->value, d.rel_tolerance).correct);
  }
  for (const char* t : {"roofline", "gemm", "training", "memory", "kv-cache", "serving", "collectives", "decode",
                        "prefill", "pipeline", "speculative"})
    CHECK_MESSAGE(topics.count(t) == 1, t);
}

TEST_CASE("inference before/after: each change is its own model run, and bad modes and choices are diagnostics") {
  // The kind behind IB1/IB2 (issue #27, the course's inference before/after): decode tokens/s after / before, each
  // side a compression study of its choice on its plan (eager / graphs / engine). No side is a constant: the same
  // sides give 1, CUDA graphs never lose to eager, and W8A8 int8 on int8 tensor cores beats bf16 at batch 1 (half the
  // weight bytes to stream).
  auto ratio = [](const std::string& before, const std::string& after, const char* bc, const char* ac, int bb, int ab) {
    const std::string text = std::string(R"({"schema": 1, "kind": "drill-set", "source_file": "test", "drills": [
      {"id": "X", "topic": "serving", "question": "q", "source": "s", "kind": "inference_before_after", "inputs":
       {"model": "llama-2-7b", "gpu": "h100-sxm5-80gb", "context": 1024, "before_mode": ")") + before +
                             R"(", "after_mode": ")" + after + R"(", "before_choice": ")" + bc +
                             R"(", "after_choice": ")" + ac + R"(", "before_batch": )" + std::to_string(bb) +
                             R"(, "after_batch": )" + std::to_string(ab) + R"(}, "unit": "×", "rel_tolerance": 0.01}]})";
    auto s = app::decode_drills(nlohmann::json::parse(text), "drills.json", ctx());
    REQUIRE_MESSAGE(s.ok(), s.diagnostics().to_string());
    auto a = app::answer_drill(*s, s->drills[0], ctx());
    REQUIRE_MESSAGE(a.ok(), a.diagnostics().to_string());
    return a->value;
  };
  CHECK(ratio("eager", "eager", "baseline", "baseline", 1, 1) == gptest::approx(1.0));
  for (int b : {1, 8, 64}) {
    CAPTURE(b);
    CHECK(ratio("eager", "graphs", "baseline", "baseline", b, b) >= 1.0);
    CHECK(ratio("graphs", "engine", "baseline", "baseline", b, b) >= 1.0);  // fused kernels: fewer, fewer bytes
  }
  const double int8 = ratio("engine", "engine", "baseline", "w8a8-int8", 1, 1);
  // Faster, but by less than the weight bytes' 2×: the KV cache, the 16-bit embeddings, the per-token activation
  // quantisation passes and the per-kernel cost do not shrink (1.25× on 2026-11-28).
  CHECK(int8 > 1.0);
  CHECK(int8 < 2.0);
  // The whole stack (fusion, graphs, int8, batch 64) multiplies: more than each step alone.
  CHECK(ratio("eager", "engine", "baseline", "w8a8-int8", 1, 64) > ratio("eager", "eager", "baseline", "baseline", 1, 64));
  auto bad = decode(R"({"schema": 1, "kind": "drill-set", "source_file": "test", "drills": [
    {"id": "X", "topic": "serving", "question": "q", "source": "s", "kind": "inference_before_after", "inputs":
     {"model": "llama-2-7b", "gpu": "h100-sxm5-80gb", "context": 1024, "before_mode": "trt", "after_mode": "graphs",
      "before_choice": "baseline", "after_choice": "w8a8-int9", "before_batch": 1, "after_batch": 1},
     "unit": "×", "rel_tolerance": 0.01}]})");
  std::string all = bad.diagnostics().to_string();
  if (bad.ok()) {
    auto a = app::answer_drill(*bad, bad->drills[0], ctx());
    REQUIRE_FALSE(a.ok());
    all += a.diagnostics().to_string();
  }
  INFO(all);
  CHECK(all.find("/drills/0/inputs/before_mode") != std::string::npos);
}

TEST_CASE("T2-H100: 295 (989 / 3.35) is right, 291 is the textbook's named wrong answer (3.4 TB/s), outside the ±1%") {
  // Issue 29 asked whether ±1% rejects the course's own rounding. textbook.md's answer key computes the ridge from the
  // datasheet's 989 TFLOP/s and 3.35 TB/s, 295.2 FLOP/B, and lists 291 as the common wrong answer (989 / 3.4): the
  // tolerance must reject it, and it does, while every rounding the key itself prints (295) passes.
  auto s = app::load_drills(std::string(GPUPLAN_TEST_DATA_DIR) + "/drills/textbook.json", "data/drills/textbook.json",
                            ctx());
  REQUIRE_MESSAGE(s.ok(), s.diagnostics().to_string());
  const app::Drill* d = s->find("T2-H100");
  REQUIRE(d != nullptr);
  auto a = app::answer_drill(*s, *d, ctx());
  REQUIRE(a.ok());
  CHECK(a->value == gptest::approx(989.0 / 3.35));
  CHECK(d->rel_tolerance == 0.01);
  for (double right : {295.0, 295.2, 989.0 / 3.35}) CHECK(app::check_answer(right, a->value, d->rel_tolerance).correct);
  const auto v = app::check_answer(291, a->value, d->rel_tolerance, d->common_wrong_answer);
  CHECK_FALSE(v.correct);
  CHECK(v.common_wrong);
  CHECK(v.relative_error == gptest::approx(291.0 / (989.0 / 3.35) - 1));
  REQUIRE(d->common_wrong_answer.has_value());
  CHECK(*d->common_wrong_answer == gptest::approx(989.0 / 3.4).epsilon(0.001));  // 290.9: the 3.4 TB/s input
}

TEST_CASE("a tolerance wider than 1% is the source's own rounding, stated in the drill, and keeps the wrong answer out") {
  auto s = app::load_drills(std::string(GPUPLAN_TEST_DATA_DIR) + "/drills/textbook.json", "data/drills/textbook.json",
                            ctx());
  REQUIRE_MESSAGE(s.ok(), s.diagnostics().to_string());
  int wide = 0;
  for (const auto& d : s->drills) {
    CAPTURE(d.id);
    if (d.rel_tolerance <= 0.01) continue;
    ++wide;
    CHECK_FALSE(d.tolerance_why.empty());
    // The source's own answer passes within it (unless model_differs says why not: the shipped-drills test checks
    // that those really differ).
    if (!d.model_differs.empty()) continue;
    auto a = app::answer_drill(*s, d, ctx());
    REQUIRE(a.ok());
    REQUIRE(d.stated_answer.has_value());
    CHECK(std::fabs(*d.stated_answer / a->value - 1) <= d.rel_tolerance);
  }
  CHECK(wide >= 6);  // T3 (two), T13, T14, T18-kv, T19-kv
  // The decoder asks for the reason.
  auto bad = decode(R"({"schema": 1, "kind": "drill-set", "source_file": "test", "drills": [
    {"id": "R", "topic": "roofline", "question": "ridge?", "source": "test", "kind": "ridge",
     "inputs": {"peak_TFLOPs": 312, "bandwidth_TBps": 2.0}, "unit": "FLOP/B", "rel_tolerance": 0.05}]})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.diagnostics().to_string().find("/drills/0/rel_tolerance: error: a tolerance of 5% (wider than 1%) needs "
                                           "tolerance_why") != std::string::npos);
}

TEST_CASE("inputs the model's tree attributes to a CLI flag are attributed to the question in a drill") {
  auto s = app::load_drills(std::string(GPUPLAN_TEST_DATA_DIR) + "/drills/textbook.json", "data/drills/textbook.json",
                            ctx());
  REQUIRE(s.ok());
  auto a = app::answer_drill(*s, *s->find("T9"), ctx());
  REQUIRE(a.ok());
  bool found = false;
  for (const auto& in : a->derivation.inputs)
    if (in.symbol == "b") {
      found = true;
      CHECK(in.origin.ref == "textbook.md T9 (as --kv-dtype)");
    }
  CHECK(found);
}

TEST_CASE("T22: the model's FSDP states are the textbook's 17.5 GB plus the gathered layer (5.25 GB)") {
  auto s = app::load_drills(std::string(GPUPLAN_TEST_DATA_DIR) + "/drills/textbook.json", "data/drills/textbook.json",
                            ctx());
  REQUIRE(s.ok());
  const auto* d = s->find("T22");
  REQUIRE(d != nullptr);
  auto a = app::answer_drill(*s, *d, ctx());
  REQUIRE(a.ok());
  CHECK(a->value == gptest::approx(17.5 + 70.0 / 80 * (2 * 2 + 2)));
}

// ------------------------------------------------------------------------------------------------ gpuplan drill
TEST_SUITE("gpuplan drill") {
  using cli_test::contains;
  TEST_CASE("--list prints every drill, --topic narrows it, an unknown topic is exit 2 with did you mean") {
    const auto all = cli_test::run({"drill", "--list", "--format", "json"});
    REQUIRE(all.rc == 0);
    CHECK(cli_test::parse_json(all).size() >= 30);
    const auto kv = cli_test::run({"drill", "--topic", "kv-cache"});
    CHECK(kv.rc == 0);
    CHECK(contains(kv.out, "MLA-V3"));
    CHECK_FALSE(contains(kv.out, "T1 "));
    const auto bad = cli_test::run({"drill", "--topic", "kv"});
    CHECK(bad.rc == 2);
    CHECK(contains(bad.err, "--topic: error: no drill has topic 'kv'"));
  }
  TEST_CASE("a right answer is exit 0 with the derivation, a wrong one exit 1, a bad one exit 2") {
    const auto right = cli_test::run({"drill", "T1", "--answer", "156"});
    CHECK(right.rc == 0);
    CHECK(contains(right.out, "correct: 156 FLOP/B"));
    CHECK(contains(right.out, "I* = P_peak / BW_mem"));
    const auto wrong = cli_test::run({"drill", "T2-H100", "--answer", "291"});
    CHECK(wrong.rc == 1);
    CHECK(contains(wrong.out, "wrong: 291 FLOP/B"));
    CHECK(contains(wrong.out, "that is the common wrong answer"));
    const auto units = cli_test::run({"drill", "T21", "--answer", "1120 GB"});
    CHECK(units.rc == 0);
    const auto bad = cli_test::run({"drill", "T21", "--answer", "1.1 s"});
    CHECK(bad.rc == 2);
    CHECK(contains(bad.err, "--answer: error: 's' is a unit of time; this answer is bytes (in TB)"));
    const auto unknown = cli_test::run({"drill", "T99"});
    CHECK(unknown.rc == 2);
    CHECK(contains(unknown.err, "DRILL: error: unknown drill 'T99' (did you mean 'T9'?)"));
  }
  TEST_CASE("--reveal and --format json give the model's answer, the verdict and the derivation") {
    const auto r = cli_test::run({"drill", "T15", "--reveal"});
    CHECK(r.rc == 0);
    CHECK(contains(r.out, "model's answer: 60.86 days"));
    const auto j = cli_test::run({"drill", "T15", "--answer", "60.9", "--format", "json"});
    CHECK(j.rc == 0);
    const auto o = cli_test::parse_json(j);
    CHECK(o["verdict"]["correct"] == true);
    CHECK(o["answer"].get<double>() == gptest::approx(60.86).epsilon(0.001));
    CHECK(o["derivation"]["id"] == "train.time");
    const auto q = cli_test::run({"drill", "T15"});
    CHECK(q.rc == 0);
    CHECK_FALSE(contains(q.out, "60.86"));  // reading the question does not give the answer away
  }
}
