// The "Step timeline" tab (issue #27): the Gantt chart shows the training job's model::training_timeline (its end is
// the estimate's step time, hovering a box finds its span), zooming narrows the window around the cursor, and the
// recompute toggle switches the memory chart between the timelines of the three modes (full keeps less).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QSpinBox>

#include "support.hpp"
#include "timeline_chart.hpp"
#include "timeline_page.hpp"
#include "training_job.hpp"

using namespace gpuplan;

TEST_CASE("timeline page: the step's Gantt chart and the memory timeline with its recompute toggle") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-70b"}, {"gpu", "h100"}, {"gpus", 32}, {"tp", 8}, {"pp", 4},
                  {"global_batch", 8}, {"seq", 4096}, {"recompute", "selective"}};
  req.scaling = false;
  req.collectives = false;
  const auto r = gui::evaluate_training(*data, req);
  REQUIRE(r.valid);
  REQUIRE(r.timeline.ok);
  const auto& est = r.gpus_evaluated.at(0).est;
  CHECK(r.timeline.end.raw() == gptest::approx(est.step_time.raw()).epsilon(1e-9));
  REQUIRE(r.memory_timelines.size() == 3);

  gui::TimelinePage page;
  page.resize(1200, 800);
  page.show();
  page.setResult(r);
  auto* chart = page.stepChart();
  CHECK(chart->timeline().spans.size() == r.timeline.spans.size());
  CHECK(page.summary()->text().contains("One training step"));
  // Hovering the middle of stage 0's first forward box finds that span.
  const model::TimelineSpan* first = nullptr;
  for (const auto& s : r.timeline.spans)
    if (s.lane == 0 && s.kind == model::SpanKind::forward) {
      first = &s;
      break;
    }
  REQUIRE(first != nullptr);
  chart->zoom(1.0, 0);  // lay out the view over the whole step
  const auto v = chart->view();
  const QRectF area(130, 10, chart->width() - 142, chart->height() - 38);
  const double row = area.height() / double(r.timeline.lanes.size());
  const double tm = (first->start.raw() + first->end.raw()) / 2;
  const QPointF at(area.left() + (tm - v.t0) / (v.t1 - v.t0) * area.width(), area.top() + row * 0.5);
  const auto* hit = chart->spanAt(at);
  REQUIRE(hit != nullptr);
  CHECK(hit->kind == model::SpanKind::forward);
  CHECK(hit->micro_batch == first->micro_batch);
  // Zooming in around that point keeps it under the cursor and narrows the window.
  chart->zoom(4.0, at.x());
  CHECK(chart->view().t1 - chart->view().t0 == gptest::approx((v.t1 - v.t0) / 4));
  CHECK(chart->spanAt(at) == hit);

  // The toggle starts at the plan's mode and switches the memory chart between the three timelines.
  CHECK(page.recomputeCombo()->currentIndex() == 1);
  auto peak = [&] {
    double p = 0;
    for (const auto& s : page.memoryChart()->timeline().stages) p = std::max(p, s.peak.raw());
    return p;
  };
  const double selective = peak();
  page.recomputeCombo()->setCurrentIndex(2);
  const double full = peak();
  page.recomputeCombo()->setCurrentIndex(0);
  const double none = peak();
  CHECK(full < selective);
  CHECK(selective <= none);
  double full_model = 0;
  for (const auto& s : r.memory_timelines[2].stages) full_model = std::max(full_model, s.peak.raw());
  CHECK(full == full_model);
  CHECK(page.memorySummary()->text().contains("Peak"));
}

TEST_CASE("timeline page: the DataLoader controls lay the loader out on its own lane, the GPU waiting when it starves") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-8b"}, {"gpu", "h100"}, {"gpus", 8}, {"global_batch", 64}, {"seq", 4096}};
  req.scaling = false;
  req.collectives = false;
  const auto plain = gui::evaluate_training(*data, req);
  REQUIRE(plain.timeline.ok);
  const double gpu = plain.timeline.step_time.raw();
  // 8 sequences per GPU; one worker at 3·t_GPU/8 per sequence needs 3·t_GPU per batch: the GPU busy a third.
  req.loader_workers = 1;
  req.loader_sample_ms = 3.0 * gpu / 8.0 * 1e3;
  const auto r = gui::evaluate_training(*data, req);
  REQUIRE(r.timeline.ok);
  CHECK(r.timeline.loader_priced);
  CHECK(r.timeline.gpu_utilisation == gptest::approx(1.0 / 3.0).epsilon(1e-9));
  CHECK(r.timeline.lanes.size() == plain.timeline.lanes.size() + 1);
  CHECK(r.timeline.lanes.back().host);

  gui::TimelinePage page;
  page.resize(1200, 800);
  page.show();
  page.setResult(r);
  CHECK(page.summary()->text().contains("GPU utilisation 33%"));
  CHECK(page.summary()->text().contains("because the loader starves it"));
  CHECK(page.stepChart()->timeline().lanes.size() == r.timeline.lanes.size());
  // The controls: what MainWindow puts into the next request, and a signal when they change.
  int changed = 0;
  QObject::connect(&page, &gui::TimelinePage::loaderChanged, [&] { ++changed; });
  page.workersSpin()->setValue(4);
  page.sampleMsSpin()->setValue(2.5);
  CHECK(changed == 2);
  CHECK(page.loaderWorkers() == 4);
  CHECK(page.loaderSampleMs() == gptest::approx(2.5));
  // Out-of-range values from a request are diagnostics, not a silent default.
  req.loader_workers = -1;
  const auto bad = gui::evaluate_training(*data, req);
  CHECK(bad.diags.has_errors());
  CHECK_FALSE(bad.timeline.ok);
}
