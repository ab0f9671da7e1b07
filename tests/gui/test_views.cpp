// The views added for the issue "gpuplan-gui: a Qt 6 what-if explorer": collectives, serving capacity, compare mode,
// export and the panel's pipeline/overlap/offload widgets. Every expected value is recomputed here with the model's
// own functions, never typed in.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <QAbstractItemModelTester>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QXmlStreamReader>
#include <fmt/format.h>
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QLabel>
#include <QSpinBox>

#include "collectives_chart.hpp"
#include "collectives_job.hpp"
#include "compare_model.hpp"
#include "compare_page.hpp"
#include "main_window.hpp"
#include "scenario_panel.hpp"
#include "serving_page.hpp"
#include "serving_charts.hpp"
#include "serving_job.hpp"
#include "gpuplan/app/report_sections.hpp"
#include "gpuplan/app/resolve.hpp"
#include "support.hpp"
#include "training_job.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

using namespace gpuplan;
using gui::test::wait_until;

namespace {
void select(QComboBox* c, const char* id) {
  const int i = c->findData(id);
  REQUIRE(i >= 0);
  c->setCurrentIndex(i);
}
/// The hardware the CLI resolves for a GPU id (default node, calibration profile when present).
model::TrainingSystem system_of(const gui::AppData& data, const std::string& gpu) {
  model::TrainingSystem sys;
  Diagnostics diags;
  REQUIRE(app::resolve_hardware(gpu, "", "", data.db, [](const std::string& k) { return k; }, diags, sys));
  REQUIRE(app::load_calibration(data.data_dir, sys, false, diags));
  return sys;
}
}  // namespace

TEST_CASE("collectives view: every point is model::collective_cost on the group estimate_training prices") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-70b"}, {"gpu", "h100"}, {"gpus", 1024}, {"tp", 8}, {"pp", 4},
                  {"global_batch", 1024}, {"seq", 8192}};
  req.scaling = false;
  const auto r = gui::evaluate_training(*data, req);
  REQUIRE(r.valid);
  const auto& c = r.collectives;
  REQUIRE(c.tiers.size() == 2);
  const auto sys = system_of(*data, "h100");
  const auto& up = c.tiers[0];
  const auto& out = c.tiers[1];
  CHECK(up.size == r.plan.par.tp);
  CHECK(up.scale_up_size == up.size);  // the TP group lives in one NVLink domain
  CHECK(out.size == r.plan.par.dp);
  CHECK(out.scale_up_size == 1);       // one rank per domain: only the scale-out fabric
  CHECK(out.domains == out.size);
  for (const auto* t : {&up, &out}) {
    const auto g = model::training_comm_group(t->size, t->stride, sys);
    REQUIRE(t->curves.size() == 4);
    for (const auto& curve : t->curves) {
      REQUIRE(curve.points.size() > 20);
      for (const auto& p : curve.points) {
        const auto m = model::collective_cost(curve.op, units::bytes(p.bytes), g, model::CollectiveAlgorithm::automatic,
                                              Explain::off);
        CHECK(p.time_s == gptest::approx(m.time.raw()));
        CHECK(p.algbw_Bps == gptest::approx(m.algbw.raw()));
        CHECK(p.busbw_Bps == gptest::approx(m.busbw.raw()));
        CHECK(p.algorithm == m.algorithm);
      }
    }
  }
  // The scale-out tier is the slower one at a large message.
  CHECK(out.curves[0].points.back().time_s > up.curves[0].points.back().time_s);
  // Both the H100's and the H200's profiles measure NVLink; the GUI reports whichever the system uses.
  CHECK(c.profile_used);
  CHECK(c.calibration.empty() == !sys.scale_up_calibration.has_value());
  req.scenario["gpu"] = "h200";
  const auto h200 = gui::evaluate_training(*data, req);
  REQUIRE(h200.valid);
  const auto sys200 = system_of(*data, "h200");
  REQUIRE(sys200.scale_up_calibration.has_value());
  CHECK(h200.collectives.calibration == sys200.scale_up_calibration->origin);
  CHECK(h200.collectives.tiers[0].calibrated);
  CHECK_FALSE(h200.collectives.tiers[1].calibrated);
}

TEST_CASE("collectives chart: eight series, hover text with algorithm and bus bandwidth from the result") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-70b"}, {"gpu", "h100"}, {"gpus", 1024}, {"tp", 8}, {"pp", 4},
                  {"global_batch", 1024}};
  req.scaling = false;
  const auto r = gui::evaluate_training(*data, req);
  REQUIRE(r.valid);
  gui::charts::CollectivesChart chart;
  chart.setResult(r.collectives);
  CHECK(chart.seriesCount() == 8);
  const auto& p = r.collectives.tiers[0].curves[0].points[10];
  const QString tip = chart.pointText(0, 0, 10);
  CHECK(tip.contains("all-reduce"));
  CHECK(tip.contains(QString::fromStdString(units::format(units::Bandwidth(p.busbw_Bps)))));
  CHECK(tip.contains(QString::fromStdString(units::format(units::Bandwidth(p.algbw_Bps)))));
  CHECK(tip.contains(QString::fromStdString(gui::algorithm_name(p.algorithm))));
  // H100's profile measures its NVLink (2026-11-26 sweeps): the header names the calibration it priced with.
  REQUIRE_FALSE(r.collectives.calibration.empty());
  CHECK(chart.header()->text().contains("calibrated"));
  CHECK(chart.header()->text().contains(QString::fromStdString(r.collectives.calibration).toHtmlEscaped()));
}

TEST_CASE("serving capacity: GPUs and $/Mtok vs rate are plan_serving's answers, swept on the worker") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::ServingRequest req;
  req.rate = 8;
  req.ttft_ms = 1000;
  req.itl_ms = 50;
  const auto r = gui::evaluate_serving(*data, req);
  INFO(r.diags.to_string());
  REQUIRE(r.valid);
  REQUIRE(r.plan.has_value());
  REQUIRE(r.planner.has_value());
  REQUIRE(r.capacity.size() >= 10);
  // Each point is the planner's best layout at that rate, as `gpuplan serve --rate` (the CLI's resolution, TP free).
  const auto& rs = *r.planner;
  CHECK_FALSE(rs.tp_given);
  for (const auto& c : r.capacity) {
    auto at = rs;
    at.rate = c.rate;
    const auto pr = model::plan_serving(rs.arch, rs.params, rs.perf, at.traffic(), rs.sla, rs.sys, at.plan_options(),
                                        Explain::off);
    REQUIRE(pr.best);
    CHECK(c.gpus == pr.best->gpus);
    CHECK(c.tp == pr.best->tp);
    CHECK(c.meets_sla == pr.feasible);
    CHECK(c.cost_per_mtok_usd == gptest::approx(pr.best->cost_per_mtok_usd));
  }
  // More traffic never needs fewer GPUs.
  for (std::size_t i = 1; i < r.capacity.size(); ++i) CHECK(r.capacity[i].gpus >= r.capacity[i - 1].gpus);
  // The operating rate is on the sweep and equals the planner's answer shown in the summary.
  bool found = false;
  for (const auto& c : r.capacity)
    if (c.rate == r.rate) {
      found = true;
      CHECK(c.gpus == r.plan->best->gpus);
    }
  CHECK(found);
  gui::charts::CapacityCharts chart;
  chart.setResult(r);
  CHECK(chart.points() == int(r.capacity.size()));
  CHECK(chart.pointText(0).contains(QString::number(r.capacity[0].gpus) + " GPUs"));
}

TEST_CASE("compare model passes QAbstractItemModelTester through pin, update and unpin") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-8b"}, {"gpu", "a100"}, {"gpus", 64}, {"tp", 2}, {"pp", 1},
                  {"global_batch", 256}, {"seq", 4096}, {"tokens", 1e12}};
  req.scaling = false;
  req.collectives = false;
  const auto a = gui::evaluate_training(*data, req);
  req.scenario["gpu"] = "h100";
  const auto b = gui::evaluate_training(*data, req);
  REQUIRE(a.valid);
  REQUIRE(b.valid);
  gui::CompareModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  m.setCurrent(gui::snapshot_of(a, {}));
  CHECK_FALSE(m.delta(m.rowOf("step_time")));
  m.setPinned(gui::snapshot_of(a, {}));
  m.setCurrent(gui::snapshot_of(b, {}));
  const int row = m.rowOf("step_time");
  REQUIRE(row >= 0);
  const double ta = a.gpus_evaluated[0].est.step_time.raw(), tb = b.gpus_evaluated[0].est.step_time.raw();
  REQUIRE(m.delta(row));
  CHECK(*m.delta(row) == gptest::approx(tb - ta));
  CHECK(*m.deltaPct(row) == gptest::approx((tb - ta) / ta));
  CHECK(m.data(m.index(row, gui::CompareModel::kDelta), gui::CompareModel::DeltaRole).toDouble() ==
        gptest::approx(tb - ta));
  CHECK(m.data(m.index(row, gui::CompareModel::kPinned)).toString() ==
        QString::fromStdString(units::format(a.gpus_evaluated[0].est.step_time)));
  CHECK_FALSE(m.delta(m.rowOf("ttft")));  // no serving result in either snapshot
  m.clearPinned();
  CHECK_FALSE(m.delta(row));
  CHECK(m.data(m.index(row, gui::CompareModel::kPinned)).toString().isEmpty());
}

TEST_CASE("compare model: A on-demand against B spot names the kinds on every cost and colours no cost delta") {
  // #22 deliverable 3: a spot B is not "better" than an on-demand A. The snapshots come from real evaluations: the
  // H100 SXM file is priced on-demand (RunPod), the H100 NVL file spot (an Azure spot VM).
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-8b"}, {"gpu", "h100-sxm5-80gb"}, {"gpus", 8}, {"tp", 1}, {"pp", 1},
                  {"global_batch", 64}, {"seq", 4096}, {"tokens", 1e10}};
  req.scaling = false;
  req.collectives = false;
  const auto a = gui::evaluate_training(*data, req);
  req.scenario["gpu"] = "h100-nvl";
  const auto b = gui::evaluate_training(*data, req);
  REQUIRE(a.valid);
  REQUIRE(b.valid);
  const auto sa = gui::snapshot_of(a, {}), sb = gui::snapshot_of(b, {});
  CHECK(sa.price_kind == "on-demand");
  CHECK(sb.price_kind == "spot");
  CHECK(sa.price.find("$2.69/GPU-h on-demand") == 0);
  gui::CompareModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  m.setPinned(sa);
  m.setCurrent(sb);
  CHECK(m.priceNote().find("these costs mix on-demand and spot prices") == 0);
  const int cost = m.rowOf("cost");
  REQUIRE(cost >= 0);
  REQUIRE(m.delta(cost));
  CHECK(m.data(m.index(cost, gui::CompareModel::kPinned)).toString().endsWith(" (on-demand)"));
  CHECK(m.data(m.index(cost, gui::CompareModel::kCurrent)).toString().endsWith(" (spot)"));
  CHECK(m.data(m.index(cost, gui::CompareModel::kDelta)).toString().endsWith(" (on-demand → spot)"));
  CHECK(m.data(m.index(cost, gui::CompareModel::kDeltaPct)).toString().endsWith(" (on-demand → spot)"));
  CHECK_FALSE(m.data(m.index(cost, gui::CompareModel::kDelta), Qt::ForegroundRole).isValid());
  CHECK(m.data(m.index(cost, gui::CompareModel::kDelta), Qt::ToolTipRole).toString().startsWith("these costs mix"));
  CHECK(m.data(m.index(m.rowOf("price"), gui::CompareModel::kCurrent)).toString().startsWith("$1.61/GPU-h spot"));
  // Rows that are not money keep their colour and carry no kind.
  const int step = m.rowOf("step_time");
  CHECK_FALSE(m.data(m.index(step, gui::CompareModel::kCurrent)).toString().contains("spot"));
  // Both on-demand: no note, no kinds on the costs.
  m.setCurrent(sa);
  CHECK(m.priceNote().empty());
  CHECK_FALSE(m.data(m.index(cost, gui::CompareModel::kCurrent)).toString().contains("on-demand"));
}

TEST_CASE("compare mode in the window: pin A100 bf16, switch to H100 fp8 and TP 4, deltas are B - A of the model") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::MainWindow w(data);
  REQUIRE(wait_until([&] { return w.idle(); }));
  select(w.panel()->gpuCombo(), "a100-sxm4-80gb");
  REQUIRE(wait_until([&] { return w.idle() && w.lastTraining().gpus_evaluated[0].gpu_id == "a100-sxm4-80gb"; }));
  const auto a_train = w.lastTraining().gpus_evaluated[0].est;
  const auto a_serve = w.lastServing();
  w.pin();
  auto* m = w.comparePage()->model();
  REQUIRE(m->pinned());
  CHECK(*m->delta(m->rowOf("step_time")) == 0.0);

  select(w.panel()->gpuCombo(), "h100-sxm5-80gb");
  select(w.panel()->precisionCombo(), "fp8");
  w.panel()->tpSpin()->setValue(4);
  REQUIRE(wait_until([&] {
    return w.idle() && w.lastTraining().gpus_evaluated[0].gpu_id == "h100-sxm5-80gb" &&
           w.lastTraining().plan.par.tp == 4 && w.lastServing().gpu_name != a_serve.gpu_name;
  }));
  const auto& b_train = w.lastTraining().gpus_evaluated[0].est;
  const auto& b_serve = w.lastServing();
  REQUIRE(b_train.step_time.raw() > 0);
  CHECK(*m->delta(m->rowOf("step_time")) == gptest::approx(b_train.step_time.raw() - a_train.step_time.raw()));
  CHECK(*m->delta(m->rowOf("tokens_per_s")) == gptest::approx(b_train.tokens_per_s - a_train.tokens_per_s));
  CHECK(*m->delta(m->rowOf("mfu")) == gptest::approx(b_train.mfu - a_train.mfu));
  CHECK(*m->delta(m->rowOf("memory")) == gptest::approx(b_train.memory.total.raw() - a_train.memory.total.raw()));
  CHECK(*m->delta(m->rowOf("time_to_train")) ==
        gptest::approx(b_train.time_to_train->raw() - a_train.time_to_train->raw()));
  CHECK(*m->delta(m->rowOf("cost")) == gptest::approx(b_train.cost->raw() - a_train.cost->raw()));
  CHECK(*m->delta(m->rowOf("ttft")) == gptest::approx(b_serve.ttft_s - a_serve.ttft_s));
  CHECK(*m->delta(m->rowOf("itl")) == gptest::approx(b_serve.itl_s - a_serve.itl_s));
  REQUIRE(b_serve.plan);
  REQUIRE(a_serve.plan);
  CHECK(*m->delta(m->rowOf("serving_gpus")) == gptest::approx(double(b_serve.plan->best->gpus - a_serve.plan->best->gpus)));
  CHECK(*m->delta(m->rowOf("cost_per_mtok")) ==
        gptest::approx(b_serve.plan->best->cost_per_mtok_usd - a_serve.plan->best->cost_per_mtok_usd));
  CHECK(*m->delta(m->rowOf("step_time")) < 0);  // H100 fp8 is faster than A100 bf16
  w.unpin();
  CHECK_FALSE(m->pinned());
  CHECK_FALSE(m->delta(m->rowOf("step_time")));
}

TEST_CASE("export: every chart of a view to a non-empty PNG and a well-formed SVG, Markdown with the model step time") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  gui::MainWindow w(data);
  w.resize(1600, 1000);
  w.show();
  REQUIRE(wait_until([&] { return w.idle(); }));
  for (int tab : {int(gui::MainWindow::kCollectives), int(gui::MainWindow::kServing), -1}) {
    if (tab >= 0) w.tabs()->setCurrentIndex(tab);
    else w.servingPage()->views()->setCurrentIndex(1);  // the capacity charts
    QCoreApplication::processEvents();
    QTemporaryDir sub;
    const QStringList files = w.exportCharts(sub.path());
    REQUIRE(files.size() >= 4);  // two charts or more, each as PNG and SVG
    for (const auto& f : files) {
      INFO(f.toStdString());
      CHECK(QFileInfo(f).size() > 1000);
      if (f.endsWith(".png")) {
        const QImage img(f);
        CHECK_FALSE(img.isNull());
        CHECK(img.width() > 300);
      } else {
        QFile file(f);
        REQUIRE(file.open(QIODevice::ReadOnly));
        QXmlStreamReader xml(&file);
        QString root;
        int texts = 0;
        while (!xml.atEnd()) {
          xml.readNext();
          if (xml.isStartElement() && root.isEmpty()) root = xml.name().toString();
          if (xml.isStartElement() && xml.name() == QStringLiteral("text")) ++texts;
        }
        CHECK_FALSE(xml.hasError());
        CHECK(root == "svg");
        CHECK(texts > 5);  // axis labels and titles as text, not only pixels
      }
    }
  }
  // Markdown: the CLI's sections of the same estimate and the planner's answer.
  w.pin();
  const QString md_path = dir.filePath("report.md");
  REQUIRE(w.exportMarkdown(md_path));
  QFile f(md_path);
  REQUIRE(f.open(QIODevice::ReadOnly));
  const std::string md = f.readAll().toStdString();
  const auto& est = w.lastTraining().gpus_evaluated[0].est;
  CHECK(md.find("| step time | " + units::format(est.step_time) + " |") != std::string::npos);
  CHECK(md.find("### Throughput") != std::string::npos);
  CHECK(md.find("\"tp\": 8") != std::string::npos);  // the scenario that reproduces it
  const auto& plan = *w.lastServing().plan;
  CHECK(md.find(fmt::format("| GPUs | {} = {} replicas × TP {}", plan.best->gpus, plan.best->replicas, plan.best->tp)) !=
        std::string::npos);
  CHECK(md.find("## Compare: pinned (A) vs current (B)") != std::string::npos);
  // The training section rows are what `gpuplan train --format md` renders (headings one level deeper).
  const auto& t = w.lastTraining();
  const std::string cli_md = app::render_sections(
      app::training_sections(t.resolved->arch, t.gpus, t.resolved->sys, t.plan, est), app::Format::md);
  const auto rows_at = cli_md.find("| --- | --- |\n| step time");
  REQUIRE(rows_at != std::string::npos);
  CHECK(md.find(cli_md.substr(rows_at, cli_md.find("\n\n", rows_at) - rows_at)) != std::string::npos);
}

TEST_CASE("panel: schedule, virtual stages, overlap flags and CPU offload are scenario keys that round-trip save/open") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  gui::MainWindow w(data);
  REQUIRE(wait_until([&] { return w.idle(); }));
  auto* p = w.panel();
  // Defaults are the decoder's defaults: what the CLI runs for a file without these keys.
  {
    const auto d = wl_io::decode_training_scenario(json_io::Json{{"model", "llama-3.1-70b"}}, "");
    REQUIRE(d.ok());
    CHECK(w.lastTraining().plan.schedule == d->plan.schedule);
    CHECK(w.lastTraining().plan.overlap_grad_reduce == d->plan.overlap_grad_reduce);
    CHECK(w.lastTraining().plan.overlap_param_gather == d->plan.overlap_param_gather);
    CHECK(w.lastTraining().plan.overlap_tp_comm == d->plan.overlap_tp_comm);
    CHECK(w.lastTraining().plan.offload == d->plan.offload);
  }
  const double before = w.lastTraining().gpus_evaluated[0].est.step.bubble.raw();
  select(p->scheduleCombo(), "interleaved");
  CHECK(p->virtualStagesSpin()->value() == 2);  // interleaving brings v = 2 along
  p->virtualStagesSpin()->setValue(5);          // 80 layers / PP 4 = 20 per stage: v = 5 divides it
  p->zeroCombo()->setCurrentIndex(1);  // ZeRO 1: offload needs it
  select(p->offloadCombo(), "optimizer");
  p->overlapGradReduce()->setChecked(false);
  p->overlapParamGather()->setChecked(false);
  p->overlapTpComm()->setChecked(true);
  REQUIRE(wait_until([&] {
    const auto& pl = w.lastTraining().plan;
    return w.idle() && pl.par.virtual_stages == 5 && pl.overlap_tp_comm && !pl.overlap_param_gather &&
           pl.offload == wl::Offload::optimizer;
  }));
  // The model got them: the plan it evaluated, and the interleaved bubble is smaller.
  const auto& plan = w.lastTraining().plan;
  CHECK(plan.schedule == wl::PipelineSchedule::interleaved);
  CHECK_FALSE(plan.overlap_grad_reduce);
  CHECK(plan.zero == wl::ZeroStage::optimizer);
  INFO(w.statusArea()->toPlainText().toStdString());
  REQUIRE(w.lastTraining().gpus_evaluated[0].est.step_time.raw() > 0);
  CHECK(w.lastTraining().gpus_evaluated[0].est.step.bubble.raw() < before);

  const QString path = dir.filePath("panel.json");
  REQUIRE(w.saveScenario(path));
  Diagnostics diags;
  auto text = json_io::read_text_file(path.toStdString(), diags);
  REQUIRE(text);
  auto j = json_io::parse(*text, path.toStdString(), diags);
  REQUIRE(j);
  CHECK((*j)["schedule"] == "interleaved");
  CHECK((*j)["virtual_stages"] == 5);
  CHECK((*j)["offload"] == "optimizer");
  CHECK((*j)["overlap_grad_reduce"] == false);
  CHECK((*j)["overlap_param_gather"] == false);
  CHECK((*j)["overlap_tp_comm"] == true);
  auto s = wl_io::decode_training_scenario(*j, path.toStdString());
  REQUIRE(s.ok());  // `gpuplan train --scenario` reads it
  CHECK(s->plan.par.virtual_stages == 5);

  // A fresh window opens it with the same widgets and evaluates the same plan.
  gui::MainWindow w2(data);
  REQUIRE(wait_until([&] { return w2.idle(); }));
  REQUIRE(w2.openScenario(path));
  REQUIRE(wait_until([&] { return w2.idle() && w2.lastTraining().plan.par.virtual_stages == 5; }));
  auto* p2 = w2.panel();
  CHECK(p2->scheduleCombo()->currentData().toString() == "interleaved");
  CHECK(p2->virtualStagesSpin()->value() == 5);
  CHECK(p2->offloadCombo()->currentData().toString() == "optimizer");
  CHECK_FALSE(p2->overlapGradReduce()->isChecked());
  CHECK_FALSE(p2->overlapParamGather()->isChecked());
  CHECK(p2->overlapTpComm()->isChecked());
  CHECK(p2->scenario() == w.panel()->scenario());
  CHECK(w2.lastTraining().gpus_evaluated[0].est.step_time.raw() ==
        gptest::approx(w.lastTraining().gpus_evaluated[0].est.step_time.raw()));
}

TEST_CASE("panel: bf16 optimizer states and FP8 parameters reach the plan, each enabled only where it applies") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::MainWindow w(data);
  REQUIRE(wait_until([&] { return w.idle(); }));
  auto* p = w.panel();
  const double fp32_opt = w.lastTraining().gpus_evaluated[0].est.memory.optimizer_states.raw();
  CHECK_FALSE(p->fp8ParamsCheck()->isEnabled());  // bf16 GEMMs: no FP8 parameters
  select(p->optimizerStatesCombo(), "bf16");
  REQUIRE(wait_until([&] { return w.idle() && w.lastTraining().plan.optimizer_states == wl::StateDtype::bf16; }));
  CHECK(w.lastTraining().gpus_evaluated[0].est.memory.optimizer_states.raw() == gptest::approx(fp32_opt / 2));
  select(p->precisionCombo(), "fp8");
  CHECK(p->fp8ParamsCheck()->isEnabled());
  p->fp8ParamsCheck()->setChecked(true);
  REQUIRE(wait_until([&] { return w.idle() && w.lastTraining().plan.precision.fp8_params; }));
  CHECK(p->scenario()["fp8_params"] == true);
  select(p->optimizerCombo(), "adamw-8bit");  // its own 8-bit states: the dtype choice leaves the scenario
  CHECK_FALSE(p->optimizerStatesCombo()->isEnabled());
  CHECK_FALSE(p->scenario().contains("optimizer_states"));
}

TEST_CASE("panel: LoRA rank, targets and base are scenario keys the model evaluates and that round-trip save/open") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  gui::MainWindow w(data);
  REQUIRE(wait_until([&] { return w.idle(); }));
  auto* p = w.panel();
  CHECK_FALSE(p->loraTargetsCombo()->isEnabled());  // no adapters yet: targets and base mean nothing
  const double full_opt = w.lastTraining().gpus_evaluated[0].est.memory.optimizer_states.raw();
  p->loraRankSpin()->setValue(16);
  select(p->loraTargetsCombo(), "attention");
  select(p->loraBaseCombo(), "nf4");
  CHECK(p->loraTargetsCombo()->isEnabled());
  REQUIRE(wait_until([&] {
    const auto& pl = w.lastTraining().plan;
    return w.idle() && pl.lora.rank == 16 && pl.lora.targets == wl::LoraTargets::attention &&
           pl.lora.base == wl::LoraBase::nf4;
  }));
  const auto& est = w.lastTraining().gpus_evaluated[0].est;
  REQUIRE(est.step_time.raw() > 0);
  CHECK(est.memory.optimizer_states.raw() < 0.01 * full_opt);  // adapters only
  const QString path = dir.filePath("lora.json");
  REQUIRE(w.saveScenario(path));
  Diagnostics diags;
  auto text = json_io::read_text_file(path.toStdString(), diags);
  REQUIRE(text);
  auto j = json_io::parse(*text, path.toStdString(), diags);
  REQUIRE(j);
  CHECK((*j)["lora_rank"] == 16);
  CHECK((*j)["lora_targets"] == "attention");
  CHECK((*j)["lora_base"] == "nf4");
  gui::MainWindow w2(data);
  REQUIRE(wait_until([&] { return w2.idle(); }));
  REQUIRE(w2.openScenario(path));
  REQUIRE(wait_until([&] { return w2.idle() && w2.lastTraining().plan.lora.rank == 16; }));
  CHECK(w2.panel()->loraBaseCombo()->currentData().toString() == "nf4");
  CHECK(w2.panel()->scenario() == w.panel()->scenario());
  // Back to full training: the keys leave the scenario.
  p->loraRankSpin()->setValue(0);
  CHECK_FALSE(p->scenario().contains("lora_rank"));
}
