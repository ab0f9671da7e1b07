// Issue #27 d3/d4 in the GUI: the optimisation stack tab (its job's rows are model::optimisation_stack's for the
// scenario the CLI's resolution gives; toggling a step re-runs it with one stage fewer; the chart's bars are the rows'
// times) and the serving simulation's batching toggle (static and continuous simulated on the same requests and KV
// memory: the comparison line, and the selected policy in the table).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QSpinBox>

#include "job_controller.hpp"
#include "simulation_page.hpp"
#include "stack_chart.hpp"
#include "stack_job.hpp"
#include "stack_page.hpp"
#include "support.hpp"

using namespace gpuplan;
using gui::test::wait_until;

namespace {
json_io::Json gpt2_scenario() {
  json_io::Json j = json_io::Json::object();
  j["model"] = "gpt2";
  j["gpu"] = "h100-sxm5-80gb";
  j["gpus"] = 1;
  j["seq"] = 1024;
  j["micro_batch"] = 16;
  j["global_batch"] = 16;
  return j;
}
}  // namespace

TEST_CASE("the stack job: the CLI's --stack rows, amp faster than the fp32 baseline, the flag spelled back") {
  const auto data = gui::test::data();
  gui::StackRequest req;
  req.scenario = gpt2_scenario();
  req.steps = {{model::OptKind::workers, 4}, {model::OptKind::amp}, {model::OptKind::flash}};
  req.sample_ms = 5.0;
  const auto r = gui::evaluate_stack(*data, req);
  REQUIRE_MESSAGE(r.valid, r.diags.to_string());
  REQUIRE(r.stack.rows.size() == 4);
  CHECK(gui::stack_flag(req) == "workers=4,amp,flash");
  CHECK(r.stack.rows[2].speedup > 2.0);
  // The baseline waits 16 × 5 ms for its input between steps; 4 workers hide it.
  CHECK(r.stack.rows[0].step_time.raw() == gptest::approx(r.stack.rows[0].gpu_step.raw() + 0.080).epsilon(1e-9));
  CHECK(r.stack.rows[1].step_time.raw() == gptest::approx(r.stack.rows[1].gpu_step.raw()).epsilon(1e-9));
  gui::StackRequest bad = req;
  bad.sample_ms = -1;
  CHECK_FALSE(gui::evaluate_stack(*data, bad).valid);
}

TEST_CASE("offscreen stack page: toggles re-run the stack, the chart draws one bar per stage") {
  gui::StackPage page(gui::test::data());
  page.resize(1200, 800);
  page.show();
  page.setScenario(gpt2_scenario(), true);
  REQUIRE(wait_until([&] { return page.idle() && page.lastResult().valid; }));
  const std::size_t rows = page.lastResult().stack.rows.size();
  CHECK(rows == 6);  // baseline + the five steps ticked by default
  CHECK(page.chart()->categories().size() == int(rows));
  CHECK(page.chart()->values(0).size() == rows);
  CHECK(page.table()->text().contains("fused-adam"));
  page.toggle(gui::StackPage::kCompile)->setChecked(false);
  REQUIRE(wait_until([&] { return page.idle() && page.lastResult().stack.rows.size() == rows - 1; }));
  CHECK_FALSE(page.table()->text().contains("compile"));
}

TEST_CASE("offscreen simulation page: the batching toggle shows static batching and compares it with continuous") {
  gui::SimulationPage page(gui::test::data());
  gui::ServingRequest s;
  s.model = "llama-3.1-8b";
  s.gpu = "h100-sxm5-80gb";
  s.tp = 1;
  s.prompt_tokens = 1024;
  s.output_tokens = 256;
  page.resize(1200, 900);
  page.show();
  page.requestsSpin()->setValue(300);
  page.setServing(s);
  REQUIRE(wait_until([&] { return page.idle() && page.hasResult(); }));
  REQUIRE(page.lastResult().valid);
  CHECK(page.lastResult().sim.batches == 0);       // continuous shown
  CHECK(page.lastResult().other.batches > 0);      // static simulated beside it
  const int i = page.batchingCombo()->findData("static");
  REQUIRE(i >= 0);
  page.batchingCombo()->setCurrentIndex(i);
  REQUIRE(wait_until([&] { return page.idle() && page.lastResult().request.batching == model::Batching::static_; }));
  CHECK(page.lastResult().sim.batches > 0);
  CHECK(page.lastResult().other.batches == 0);
  CHECK(page.summary()->text().contains("static"));
  CHECK(page.lastResult().sim.requests == page.lastResult().other.requests);
}
