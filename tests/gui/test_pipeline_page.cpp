// The Real-time pipeline tab (issue #25, deliverable 4): the page shows `gpuplan pipeline`'s own schedule (the
// application layer's evaluate_pipeline, called here directly with the CLI's request), its Gantt bars are frame 0's
// stages with the critical path marked and the deadline line painted at the file's 33.3 ms, and the toggles and the
// hardware selector re-run the model: backbone sharing off adds two backbone copies of EfficientNet-B4 at 896 px (its
// FLOPs from the vision library, counted here), the H100 runs the DLA heads on its GPU.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>

#include <QCheckBox>
#include <QComboBox>
#include <QImage>
#include <QLabel>
#include <QTabWidget>
#include <QTableWidget>

#include "explain_pane.hpp"
#include "gantt_chart.hpp"
#include "gpuplan/app/pipeline.hpp"
#include "gpuplan/wl_io/vision_io.hpp"
#include "main_window.hpp"
#include "pipeline_page.hpp"
#include "support.hpp"

using namespace gpuplan;
using gui::test::wait_until;

namespace {

std::string bundled(const gui::AppData& data) { return data.data_dir + "/scenarios/ad-perception.json"; }

/// `gpuplan pipeline data/scenarios/ad-perception.json [--gpu G] [--share-backbone off]`, called directly.
app::PipelineResult direct(const gui::AppData& data, const std::string& gpu, std::optional<bool> share = std::nullopt) {
  auto spec = app::load_pipeline_spec(data.data_dir, bundled(data), bundled(data));
  REQUIRE_MESSAGE(spec.ok(), spec.diagnostics().to_string());
  app::PipelineRequest req;
  req.data_dir = data.data_dir;
  req.db = &data.db;
  req.spec = spec.value();
  req.gpu = gpu;
  req.overrides.share_backbone = share;
  auto r = app::evaluate_pipeline(req);
  REQUIRE_MESSAGE(r.ok(), r.diagnostics().to_string());
  return r.value();
}

void run_and_wait(gui::PipelinePage& page) {
  page.run();
  REQUIRE(wait_until([&] { return page.idle() && page.hasResult(); }));
}

bool near(double a, double b, double rel = 1e-12) { return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b)); }

}  // namespace

TEST_CASE("pipeline page: the bundled AD stack on its Orin shows the CLI's schedule, critical path and deadline") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::PipelinePage page(data);
  CHECK(page.file().toStdString() == bundled(*data));  // the bundled file is preloaded
  CHECK(page.idle());                                   // hidden: nothing runs until shown or asked
  run_and_wait(page);
  const auto& r = page.lastResult();
  REQUIRE_MESSAGE(r.valid, r.diags.to_string());
  const auto d = direct(*data, "");
  const auto& s = r.result.schedule;
  CHECK(r.result.gpu->info.id == "jetson-agx-orin-64gb");  // the file's `hardware`
  CHECK(s.latency_mean_frame0.raw() == d.schedule.latency_mean_frame0.raw());
  CHECK(s.latency_p.raw() == d.schedule.latency_p.raw());
  CHECK(s.meets_p == d.schedule.meets_p);
  // The file's options set the toggles: all on in ad-perception.json.
  for (auto* b : {page.shareBackboneBox(), page.int8Box(), page.fusionBox(), page.cudaGraphsBox(), page.temporalReuseBox()})
    CHECK(b->isChecked());

  // The Gantt: one bar per stage that ran in frame 0, at its start and finish, in start order.
  const auto* g = page.gantt();
  std::size_t ran = 0;
  for (const auto& f : d.schedule.frame0) ran += f.ran ? 1 : 0;
  REQUIRE(std::size_t(g->bars().size()) == ran);
  REQUIRE(page.table()->rowCount() == int(ran));
  double prev = -1;
  int critical = 0;
  for (const auto& b : g->bars()) {
    const auto it = std::find_if(d.rt.stages.begin(), d.rt.stages.end(),
                                 [&b](const model::RtStage& st) { return st.id == b.id.toStdString(); });
    REQUIRE(it != d.rt.stages.end());
    const auto i = std::size_t(it - d.rt.stages.begin());
    CHECK(near(b.start_ms, 1e3 * d.schedule.frame0[i].start_s));
    CHECK(near(b.finish_ms, 1e3 * d.schedule.frame0[i].finish_s));
    CHECK(b.engine.toStdString() == it->engine);
    const bool on_path = std::find(d.schedule.critical_path.begin(), d.schedule.critical_path.end(), i) !=
                         d.schedule.critical_path.end();
    CHECK(b.critical == on_path);
    critical += b.critical ? 1 : 0;
    CHECK(b.start_ms >= prev);
    prev = b.start_ms;
  }
  CHECK(critical == int(d.schedule.critical_path.size()));
  // The critical path ends the frame: its last stage finishes at the frame's mean latency.
  const auto last = d.schedule.critical_path.back();
  CHECK(near(1e3 * d.schedule.frame0[last].finish_s, 1e3 * s.latency_mean_frame0.raw()));
  CHECK(g->deadlineMs() == gptest::approx(33.3).epsilon(1e-12));  // ad-perception.json: "deadline_ms": 33.3
  CHECK(near(g->p99Ms(), 1e3 * s.latency_p.raw()));

  // The verdicts as the model gives them, at the mean and at P99.
  const auto text = page.summary()->text().toStdString();
  CHECK(text.find("Orin") != std::string::npos);
  CHECK(text.find("P99") != std::string::npos);
  const auto mean_at = text.find("mean (frame 0");
  const auto p99_at = text.find("P99");
  REQUIRE(mean_at != std::string::npos);
  CHECK(text.find(s.meets_mean ? "met" : "missed", mean_at) < p99_at);
  CHECK(text.find(s.meets_p ? "met" : "missed", p99_at) != std::string::npos);
  // Every stage's pricing and the schedule's derivation are in the page's explain tree.
  CHECK(page.explain()->selectId("rt.stage.backbone"));
}

TEST_CASE("pipeline page: the deadline line and the critical path are painted where the chart says") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::PipelinePage page(data);
  page.resize(1200, 800);
  page.show();  // shown: it evaluates by itself
  REQUIRE(wait_until([&] { return page.idle() && page.hasResult(); }));
  auto* g = page.gantt();
  REQUIRE(g->width() > 300);
  const QImage img = g->grab().toImage();
  // The deadline (red, dashed, drawn over the bars): look for its colour in the column at xOf(33.3) over the plot.
  const int x = int(std::lround(g->xOf(g->deadlineMs())));
  int red = 0;
  for (int y = 30; y < img.height() - 40; ++y) {
    const QColor c = img.pixelColor(std::clamp(x, 0, img.width() - 1), y);
    red += (c.red() > 150 && c.green() < 90 && c.blue() < 90) ? 1 : 0;
  }
  CHECK(red > 10);
  // A critical bar's outline is red at its left edge's middle; a bar off the path has none.
  for (int i = 0; i < g->bars().size(); ++i) {
    const QRectF r = g->barRect(i);
    const QColor c = img.pixelColor(int(std::lround(r.left())), int(r.center().y()));
    const bool outlined_red = c.red() > 150 && c.green() < 90 && c.blue() < 90;
    CAPTURE(g->bars()[i].id.toStdString());
    CHECK(outlined_red == g->bars()[i].critical);
  }
  page.hide();
}

TEST_CASE("pipeline page: backbone sharing off runs a B4 copy per head, and the H100 runs the DLA heads on its GPU") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::PipelinePage page(data);
  run_and_wait(page);
  REQUIRE(page.lastResult().valid);
  const auto shared = page.lastResult().result;
  const int rows_shared = int(page.gantt()->bars().size());

  page.shareBackboneBox()->setChecked(false);  // hidden: toggling marks it stale, run() submits
  CHECK(page.request().overrides.share_backbone == false);
  CHECK(page.request().overrides.int8 == true);  // the other toggles keep the file's values
  run_and_wait(page);
  const auto& unshared = page.lastResult().result;
  REQUIRE(page.lastResult().valid);
  CHECK_FALSE(unshared.spec.options.share_backbone);
  // Three heads (detection, segmentation, depth) on one backbone: two more B4 passes at 896 px per frame,
  // 2 · (2 · MACs) of the library's EfficientNet-B4 graph at that resolution.
  auto lib = wl_io::load_vision_library(data->data_dir);
  REQUIRE(lib.ok());
  const auto* b4 = lib.value().find("efficientnet-b4");
  REQUIRE(b4 != nullptr);
  const double backbone = 2.0 * double(wl::build_vision_graph(b4->arch, 896).macs());
  CHECK(near(unshared.flops_as_run.raw() - shared.flops_as_run.raw(), 2 * backbone, 1e-9));
  CHECK(near(unshared.flops_as_run.raw(), direct(*data, "", false).flops_as_run.raw()));
  // The backbone is no stage of its own any more: one row fewer; the heads start after preprocessing.
  CHECK(int(page.gantt()->bars().size()) == rows_shared - 1);
  for (const auto& b : page.gantt()->bars()) CHECK(b.id != "backbone");

  // The hardware selector: H100 SXM has no DLA; every model stage runs on its GPU, as `--gpu h100-sxm5-80gb` does.
  page.shareBackboneBox()->setChecked(true);
  auto* hw = page.hardwareCombo();
  REQUIRE(hw->findData("h100-sxm5-80gb") > 0);
  hw->setCurrentIndex(hw->findData("h100-sxm5-80gb"));
  run_and_wait(page);
  const auto& h = page.lastResult();
  REQUIRE(h.valid);
  CHECK(h.result.gpu->info.id == "h100-sxm5-80gb");
  const auto dh = direct(*data, "h100-sxm5-80gb");
  CHECK(h.result.schedule.latency_p.raw() == dh.schedule.latency_p.raw());
  for (const auto& b : page.gantt()->bars()) CHECK_FALSE(b.engine.startsWith("dla"));
  CHECK(h.diags.to_string().find("has no DLA") != std::string::npos);
  CHECK(page.status()->text().contains("has no DLA"));
}

TEST_CASE("pipeline page: a file that does not decode leaves no schedule and names the file") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::PipelinePage page(data);
  page.setFile("/nonexistent/pipeline.json");
  run_and_wait(page);
  CHECK_FALSE(page.lastResult().valid);
  CHECK(page.gantt()->bars().isEmpty());
  CHECK(page.table()->rowCount() == 0);
  CHECK(page.summary()->text().contains("No schedule"));
  CHECK(page.status()->text().contains("/nonexistent/pipeline.json"));
}

TEST_CASE("main window: the Real-time pipeline tab evaluates when shown") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::MainWindow w(data);
  w.show();
  w.tabs()->setCurrentWidget(w.pipelinePage());
  REQUIRE(wait_until([&] { return w.idle() && w.pipelinePage()->hasResult(); }));
  CHECK(w.pipelinePage()->lastResult().valid);
  CHECK(w.tabs()->tabText(w.tabs()->indexOf(w.pipelinePage())).contains("pipeline"));
}
