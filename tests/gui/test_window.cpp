#include <doctest/doctest.h>
#include "approx.hpp"

#include <fstream>

#include <QComboBox>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QSpinBox>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTextBrowser>

#include "derivation_model.hpp"
#include "explain_pane.hpp"
#include "job_controller.hpp"
#include "main_window.hpp"
#include "scenario_panel.hpp"
#include "serving_charts.hpp"
#include "serving_page.hpp"
#include "support.hpp"
#include "training_charts.hpp"
#include "training_page.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

using namespace gpuplan;
using gui::MainWindow;
using gui::test::wait_until;

namespace {
void select(QComboBox* c, const char* id) {
  const int i = c->findData(id);
  REQUIRE(i >= 0);
  c->setCurrentIndex(i);
}
double step_time(const MainWindow& w) {
  const auto& r = w.lastTraining();
  return r.gpus_evaluated.empty() ? 0.0 : r.gpus_evaluated[0].est.step_time.raw();
}
}  // namespace

TEST_CASE("smoke: the window opens on Llama-3.1-70B on 1,024 H100 and A100 -> H100 lowers the step time") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  MainWindow w(data);
  w.show();
  REQUIRE(wait_until([&] { return w.idle(); }));
  // Something meaningful at once: the default scenario, four GPUs side by side, ops on the roofline.
  const auto& first = w.lastTraining();
  REQUIRE(first.valid);
  CHECK(first.model_name == "Llama 3.1 70B");
  CHECK(first.gpus == 1024);
  CHECK(w.trainingPage()->memoryChart()->barCount() == 4);
  CHECK(w.trainingPage()->summary()->text().contains("MFU"));
  CHECK(w.servingPage()->charts()->latencyPoints() > 0);
  CHECK(w.explain()->model()->rowCount() > 0);
  const double h100 = step_time(w);
  CHECK(h100 > 0);

  select(w.panel()->gpuCombo(), "a100-sxm4-80gb");
  REQUIRE(wait_until([&] { return w.idle() && w.lastTraining().gpus_evaluated[0].gpu_id == "a100-sxm4-80gb"; }));
  const double a100 = step_time(w);
  CHECK(a100 > h100);

  select(w.panel()->gpuCombo(), "h100-sxm5-80gb");
  REQUIRE(wait_until([&] { return w.idle() && w.lastTraining().gpus_evaluated[0].gpu_id == "h100-sxm5-80gb"; }));
  CHECK(step_time(w) < a100);
  CHECK(step_time(w) == gptest::approx(h100));
}

TEST_CASE("a burst of edits in the panel ends with the last one on screen") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  MainWindow w(data);
  REQUIRE(wait_until([&] { return w.idle(); }));
  int delivered = 0;
  QObject::connect(w.trainingJobs(), &gui::JobController::delivered, [&](quint64) { ++delivered; });
  for (int tp : {1, 2, 4, 8, 2, 4}) w.panel()->tpSpin()->setValue(tp);
  REQUIRE(wait_until([&] { return w.idle(); }));
  CHECK(delivered == 1);
  CHECK(w.lastTraining().plan.par.tp == 4);
  CHECK(w.lastTraining().plan.par.dp == 1024 / (4 * 4));
}

TEST_CASE("an invalid layout shows the model's reasons inline, and clicking a number selects its derivation") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  MainWindow w(data);
  REQUIRE(wait_until([&] { return w.idle(); }));
  emit w.trainingPage()->summary()->linkActivated("train.mfu");
  CHECK(w.explain()->selectedId() == "train.mfu");
  emit w.trainingPage()->memoryChart()->derivationRequested("memory.activations");
  CHECK(w.explain()->selectedId() == "memory.activations");

  w.panel()->gpusSpin()->setValue(1000);
  REQUIRE(wait_until([&] { return w.idle() && w.lastTraining().gpus == 1000; }));
  CHECK(w.statusArea()->toPlainText().contains("not divisible by TP × PP × CP = 32"));
  CHECK(w.trainingPage()->summary()->text().contains("Infeasible"));
  CHECK(w.trainingPage()->memoryChart()->barCount() == 0);
}

TEST_CASE("save and open a scenario file: the CLI's JSON, keys without a widget kept, bad files reported inline") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString path = dir.filePath("run.json");
  {
    std::ofstream f(path.toStdString());
    f << R"({"model": "llama-3.1-8b", "gpu": "a100", "gpus": 64, "tp": 2, "pp": 1, "seq": 4096,
            "global_batch": 256, "zero": 1, "overlap_tp_comm": true, "price_usd_per_hour": 1.5})";
  }
  MainWindow w(data);
  REQUIRE(wait_until([&] { return w.idle(); }));
  REQUIRE(w.openScenario(path));
  REQUIRE(wait_until([&] { return w.idle() && w.lastTraining().gpus == 64; }));
  CHECK(w.lastTraining().model_name == "Llama 3.1 8B");
  CHECK(w.lastTraining().gpus_evaluated[0].gpu_id == "a100-sxm4-80gb");
  CHECK(w.lastTraining().plan.par.tp == 2);
  CHECK(w.lastTraining().plan.zero == wl::ZeroStage::optimizer);
  CHECK(w.lastTraining().plan.overlap_tp_comm);

  // A folder is refused by the shared writer (app::write_file_atomically) and left a folder.
  CHECK_FALSE(w.saveScenario(dir.path()));
  CHECK(QFileInfo(dir.path()).isDir());
  const QString saved = dir.filePath("saved.json");
  REQUIRE(w.saveScenario(saved));
  Diagnostics diags;
  auto text = json_io::read_text_file(saved.toStdString(), diags);
  REQUIRE(text);
  auto j = json_io::parse(*text, saved.toStdString(), diags);
  REQUIRE(j);
  auto s = wl_io::decode_training_scenario(*j, saved.toStdString());
  REQUIRE(s.ok());  // what the GUI writes, `gpuplan train --scenario` reads
  CHECK(s->model == "llama-3.1-8b");
  CHECK(*s->gpus == 64);
  CHECK(s->plan.seq_len == 4096);
  CHECK(s->plan.overlap_tp_comm);
  CHECK(*s->price_usd_per_hour == 1.5);

  const QString bad = dir.filePath("bad.json");
  {
    std::ofstream f(bad.toStdString());
    f << R"({"model": "llama-3.1-8b", "tpp": 2})";
  }
  CHECK_FALSE(w.openScenario(bad));
  const QString status = w.statusArea()->toPlainText();
  CHECK(status.contains("/tpp"));
  CHECK(status.contains("did you mean"));
  CHECK(w.lastTraining().gpus == 64);  // the scenario on screen is unchanged
}
