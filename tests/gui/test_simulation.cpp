// The serving simulation page (issue #28, deliverable 5): the job's numbers are model::simulate_serving's on the
// replica app::resolve_serving resolves, called here directly with the same seed; the page's table and charts hold
// those percentiles; a burst of slider moves ends with the last rate on screen and nothing in between.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <set>
#include <string>

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/sim_kv.hpp"
#include "gpuplan/model/simulate.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "job_controller.hpp"
#include "main_window.hpp"
#include "gpuplan/app/resolve.hpp"
#include "serving_page.hpp"
#include "sim_stats_model.hpp"
#include "simulation_charts.hpp"
#include "simulation_job.hpp"
#include "simulation_page.hpp"
#include "support.hpp"

using namespace gpuplan;
using gui::test::wait_until;
using Charts = gui::charts::SimulationCharts;

namespace {

/// Llama 3.1 8B on one H100, 1024-token prompts and 256-token answers: a replica that runs ~10 req/s.
gui::ServingRequest replica() {
  gui::ServingRequest s;
  s.model = "llama-3.1-8b";
  s.gpu = "h100-sxm5-80gb";
  s.tp = 1;
  s.prompt_tokens = 1024;
  s.output_tokens = 256;
  return s;
}

/// `gpuplan simulate -m llama-3.1-8b --gpu h100-sxm5-80gb --tp 1 --input-tokens 1024 --output-tokens 256 --rate R
/// --requests N --seed S [--arrival gamma --cv C]`, called on the model directly: the CLI's resolution, the
/// arrivals spelled out here, the replica's KV pool, the simulator.
model::SimResult direct(const gui::AppData& data, double rate, std::int64_t n, std::uint64_t seed, double cv = 0) {
  wl_io::ServingScenario sc;
  sc.model = "llama-3.1-8b";
  sc.gpu = "h100-sxm5-80gb";
  sc.tp = 1;
  sc.weight_dtype = model::StoreDtype::bf16;
  sc.kv_dtype = model::StoreDtype::bf16;
  sc.input_tokens = 1024;
  sc.output_tokens = 256;
  Diagnostics diags;
  auto r = app::resolve_serving(sc, data.data_dir, false, data.db, data.library, [](const std::string& k) { return k; },
                                diags);
  REQUIRE(r.has_value());
  model::ArrivalSpec a;
  a.kind = cv > 0 ? model::ArrivalSpec::Kind::gamma : model::ArrivalSpec::Kind::poisson;
  a.cv = cv > 0 ? cv : 1.0;
  a.rate_per_s = rate;
  a.count = n;
  a.input = {model::LengthSampler::Kind::fixed, 1024, 1024};
  a.output = {model::LengthSampler::Kind::fixed, 256, 256};
  a.seed = seed;
  const auto reqs = model::generate_requests(a);
  const auto pool = model::sim_kv_pool(r->arch, r->params, *r->sys.gpu, r->memory, r->perf, reqs);
  REQUIRE(pool.fits);
  auto perf = r->perf;
  perf.kv_block_tokens = pool.block_size;
  model::SimOptions o;
  o.block_size = pool.block_size;
  o.kv_blocks = pool.blocks;
  return model::simulate_serving(r->arch, perf, r->sys, reqs, o);
}

double rel(double a, double b) { return std::abs(a / b - 1.0); }

}  // namespace

TEST_CASE("serving simulation job: a rate gives the simulator's own percentiles for the serving page's replica") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::SimulationRequest req;
  req.serving = replica();
  req.rate = 6;
  req.requests = 1500;
  req.seed = 3;
  const auto r = gui::evaluate_simulation(*data, req);
  INFO(r.diags.to_string());
  REQUIRE(r.valid);
  MESSAGE("simulated " << req.requests << " requests at " << req.rate << " req/s in " << r.simulate_ms
                       << " ms (job " << r.total_ms << " ms): TTFT p50 " << r.sim.ttft.p50 << " s, p99 "
                       << r.sim.ttft.p99 << " s");
  const auto d = direct(*data, 6, 1500, 3);
  CHECK(r.sim.completed == 1500);
  CHECK(r.sim.ttft.p50 == d.ttft.p50);
  CHECK(r.sim.ttft.p90 == d.ttft.p90);
  CHECK(r.sim.ttft.p99 == d.ttft.p99);
  CHECK(r.sim.itl.p99 == d.itl.p99);
  CHECK(r.sim.e2e.p99 == d.e2e.p99);
  CHECK(r.sim.output_tokens_per_s == d.output_tokens_per_s);
  CHECK(r.sim.kv_utilisation_mean == d.kv_utilisation_mean);
  CHECK(r.sim.preemptions == d.preemptions);
  CHECK(r.kv_blocks > 0);
  CHECK(r.max_seqs > 0);
  // The distributions and the time series come with it: every request's TTFT, a sample per interval.
  CHECK(r.sim.samples.ttft.size() == 1500);
  CHECK(r.series_interval_s == gptest::approx(1500.0 / 6 / req.series_points));
  CHECK(double(r.sim.series.size()) >= std::floor(r.sim.duration_s / r.series_interval_s));
  // Throughput follows the offered rate below saturation: 1500 arrivals over ~250 s.
  CHECK(rel(r.sim.requests_per_s, 6.0) < 0.1);

  // Bursty arrivals at the same mean rate wait longer at the tail.
  req.gamma = true;
  req.cv = 4;
  const auto b = gui::evaluate_simulation(*data, req);
  REQUIRE(b.valid);
  CHECK(b.sim.ttft.p99 == direct(*data, 6, 1500, 3, 4).ttft.p99);
  CHECK(b.sim.ttft.p99 > r.sim.ttft.p99);

  // The page's bounds are the job's: beyond them a diagnostic named by the control, no simulation.
  req.requests = gui::kMaxSimulatedRequests + 1;
  const auto bad = gui::evaluate_simulation(*data, req);
  CHECK_FALSE(bad.valid);
  CHECK(bad.diags.to_string().find("Requests") != std::string::npos);
}

TEST_CASE("serving simulation page: the table and the charts hold the model's percentiles and time series") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::SimulationPage page(data);
  QAbstractItemModelTester tester(page.statsModel(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  page.setServing(replica());  // hidden: nothing runs until shown or asked
  CHECK(page.idle());
  CHECK_FALSE(page.hasResult());
  page.requestsSpin()->setValue(1200);
  page.seedSpin()->setValue(5);
  page.rateSpin()->setValue(9);
  CHECK(page.rateSlider()->value() == gui::SimulationPage::positionOf(9));
  page.run();
  REQUIRE(wait_until([&] { return page.idle() && page.hasResult(); }));
  const auto& r = page.lastResult();
  REQUIRE(r.valid);
  const auto d = direct(*data, 9, 1200, 5);

  using M = gui::SimStatsModel;
  auto raw = [&](int row, int col) { return page.statsModel()->index(row, col).data(M::RawRole).toDouble(); };
  REQUIRE(page.statsModel()->rowCount() == M::kRowCount);
  const model::LatencyStats* rows[] = {&d.ttft, &d.itl, &d.tpot, &d.e2e};
  for (int row = 0; row < M::kRowCount; ++row) {
    CAPTURE(row);
    CHECK(raw(row, M::kMean) == rows[row]->mean);
    CHECK(raw(row, M::kP50) == rows[row]->p50);
    CHECK(raw(row, M::kP90) == rows[row]->p90);
    CHECK(raw(row, M::kP99) == rows[row]->p99);
    CHECK(raw(row, M::kMax) == rows[row]->max);
    CHECK(raw(row, M::kSamples) == double(rows[row]->samples));
  }
  CHECK(page.statsModel()->index(M::kTtft, M::kP99).data().toString().toStdString() ==
        units::format(units::Seconds(d.ttft.p99)));

  // Each distribution chart: p50, p90, p99 at the model's values; the CDF rises to 1 at the largest sample.
  const model::LatencyStats* dists[] = {&d.ttft, &d.itl, &d.e2e};
  for (int k = 0; k < Charts::kDistCount; ++k) {
    CAPTURE(k);
    const auto m = page.charts()->markers(Charts::Dist(k));
    REQUIRE(m.size() == 3);
    CHECK(rel(m[0].x(), dists[k]->p50) < 1e-12);
    CHECK(rel(m[1].x(), dists[k]->p90) < 1e-12);
    CHECK(rel(m[2].x(), dists[k]->p99) < 1e-12);
    CHECK(m[0].y() == 0.5);
    CHECK(m[2].y() == 0.99);
    const auto c = page.charts()->curve(Charts::Dist(k));
    REQUIRE(c.size() >= 2);
    CHECK(c.size() <= std::size_t(2 * Charts::kMaxCurvePoints));
    CHECK(c.back().y() == 1.0);
    // The largest sample (ITL: the last bucket's gap, within the histogram's 0.1% buckets of the largest gap).
    CHECK(rel(c.back().x(), dists[k]->max) < (k == Charts::kItl ? 1e-3 : 1e-12));
    bool monotone = true;
    for (std::size_t i = 1; i < c.size(); ++i) monotone = monotone && c[i].x() >= c[i - 1].x() && c[i].y() >= c[i - 1].y();
    CHECK(monotone);
  }
  // The time series: the simulator's samples, KV in percent.
  const auto running = page.charts()->series(0), waiting = page.charts()->series(1), kv = page.charts()->series(2);
  REQUIRE(r.sim.series.size() > 10);
  REQUIRE(running.size() == r.sim.series.size());
  REQUIRE(kv.size() == r.sim.series.size());
  for (std::size_t i = 0; i < r.sim.series.size(); i += 17) {
    CHECK(running[i].x() == r.sim.series[i].t_s);
    CHECK(running[i].y() == double(r.sim.series[i].running));
    CHECK(waiting[i].y() == double(r.sim.series[i].waiting));
    CHECK(rel(kv[i].y(), 100 * r.sim.series[i].kv_utilisation) < 1e-12);
  }
  // The summary: throughput, KV utilisation, preemptions.
  const QString text = page.summary()->text();
  CHECK(text.contains(QString("%1 preemptions").arg(d.preemptions)));
  CHECK(text.contains("1200 of 1200 completed"));
}

TEST_CASE("serving simulation page: a burst of slider moves shows the last rate only, as a direct simulation gives it") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::SimulationPage page(data);
  page.setServing(replica());
  page.requestsSpin()->setValue(800);
  page.show();  // on screen: every change runs at once
  REQUIRE(wait_until([&] { return page.idle() && page.hasResult(); }));
  int delivered = 0, dropped = 0;
  QObject::connect(page.jobs(), &gui::JobController::delivered, [&](quint64) { ++delivered; });
  QObject::connect(page.jobs(), &gui::JobController::dropped, [&](quint64) { ++dropped; });
  // A drag across 2 to 16 req/s in 16 steps, faster than one simulation.
  const int from = gui::SimulationPage::positionOf(2), to = gui::SimulationPage::positionOf(16);
  int moves = 0;
  for (int p = from; p <= to; p += (to - from) / 15) {
    page.rateSlider()->setValue(p);
    ++moves;
  }
  CHECK(moves >= 15);
  CHECK(page.jobs()->busy());
  REQUIRE(wait_until([&] { return page.idle(); }));
  CHECK(delivered == 1);
  CHECK(dropped == moves - 1);
  const double last = page.rateSpin()->value();
  CHECK(last == gptest::approx(gui::SimulationPage::rateAt(page.rateSlider()->value())).epsilon(1e-3));
  const auto& r = page.lastResult();
  REQUIRE(r.valid);
  CHECK(r.request.rate == last);
  const auto d = direct(*data, last, 800, 1);
  CHECK(r.sim.ttft.p99 == d.ttft.p99);
  CHECK(r.sim.e2e.p50 == d.e2e.p50);
  CHECK(page.charts()->markers(Charts::kTtft)[2].x() == gptest::approx(d.ttft.p99).epsilon(1e-12));
}

TEST_CASE("the serving page's Simulation tab simulates the replica set above it, and follows its edits") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::MainWindow w(data);
  w.show();
  REQUIRE(wait_until([&] { return w.idle(); }));
  auto* sim = w.simulationPage();
  CHECK_FALSE(sim->hasResult());  // off screen: nothing simulated yet
  REQUIRE(w.servingPage()->views()->count() == 5);  // charts, explain, simulation, iteration timeline, compression
  w.tabs()->setCurrentIndex(gui::MainWindow::kServing);
  w.servingPage()->views()->setCurrentIndex(gui::MainWindow::kServingSimulation);
  REQUIRE(wait_until([&] { return w.idle() && sim->hasResult(); }));
  const gui::SimulationResult first = sim->lastResult();  // a copy: the page replaces its result
  REQUIRE(first.valid);
  const auto serving = w.servingPage()->request();
  CHECK(first.request.serving.model == serving.model);
  CHECK(first.request.serving.tp == serving.tp);
  CHECK(first.request.serving.prompt_tokens == serving.prompt_tokens);
  CHECK(first.gpu_name.find("H100") != std::string::npos);
  // Another GPU on the serving page: the simulation re-runs on it.
  const int h200 = w.servingPage()->gpuCombo()->findData("h200-sxm-141gb");
  REQUIRE(h200 >= 0);
  w.servingPage()->gpuCombo()->setCurrentIndex(h200);
  REQUIRE(wait_until([&] { return w.idle() && sim->lastResult().request.serving.gpu == "h200-sxm-141gb"; }));
  CHECK(sim->lastResult().valid);
  CHECK(sim->lastResult().gpu_name.find("H200") != std::string::npos);
  // More HBM, the same model: a larger KV pool.
  CHECK(sim->lastResult().kv_blocks > first.kv_blocks);
  // The planner's rate above is not the simulation's: editing it re-runs the serving estimate only.
  int delivered = 0;
  QObject::connect(sim->jobs(), &gui::JobController::delivered, [&](quint64) { ++delivered; });
  const int serving_before = int(w.servingJobs()->latest());
  w.servingPage()->rateSpin()->setValue(w.servingPage()->rateSpin()->value() * 2);
  REQUIRE(wait_until([&] { return w.idle() && int(w.servingJobs()->latest()) > serving_before; }));
  CHECK(delivered == 0);
  CHECK_FALSE(sim->jobs()->busy());
}

TEST_CASE("serving simulation page: each control of simulate's options takes its label and tooltip from the table") {
  const auto data = gui::test::data();
  gui::SimulationPage page(data);
  std::set<std::string> labels;
  for (const QLabel* l : page.findChildren<QLabel*>()) labels.insert(l->text().toStdString());
  for (const char* key : {"arrival", "cv", "requests", "seed", "batching", "static_batch", "batch_timeout_s"}) {
    CAPTURE(key);
    const wl_io::ScenarioField* f = wl_io::find_field(wl_io::simulate_fields(), key);
    REQUIRE(f != nullptr);
    const QWidget* w = page.findChild<QWidget*>(QString::fromStdString(key));
    REQUIRE(w != nullptr);
    // The table's tooltip (help, default, key, flag), then what the page adds.
    CHECK(w->toolTip().toStdString().rfind(f->tooltip(), 0) == 0);
    // The labelled controls show the table's label (B and the timeout sit beside "Batching", by their suffixes).
    if (std::string(key) != "static_batch" && std::string(key) != "batch_timeout_s") CHECK(labels.count(f->label) == 1);
  }
  CHECK(page.findChild<QWidget*>("cv")->toolTip().toStdString() ==
        "gamma arrivals: coefficient of variation of the gaps (> 1: bursty) (default: 1)\nscenario key \"cv\", flag --cv");
}
