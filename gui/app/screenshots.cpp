#include "screenshots.hpp"

#include <memory>
#include <vector>

#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QPixmap>
#include <QSpinBox>
#include <QTabWidget>
#include <QTimer>

#include "drills_page.hpp"
#include "explain_pane.hpp"
#include "main_window.hpp"
#include "timeline_page.hpp"
#include "gemm_page.hpp"
#include "compress_view.hpp"
#include "serving_timeline_view.hpp"
#include "pipeline_page.hpp"
#include "scenario_panel.hpp"
#include "serving_page.hpp"
#include "stack_page.hpp"
#include "simulation_page.hpp"

namespace gpuplan::gui {
namespace {

/// CPU ms per sample for the loader screenshot: the default scenario (Llama-3.1-70B, 1024 GPUs, DP 32, global batch
/// 1024) feeds 32 samples per GPU a step, so 2 workers need 32 × 1 s / 2 = 16 s per batch against a GPU step of about
/// 7.7 s: the GPU idles about half the step waiting for it. (100 ms, as before, needed 1.6 s: the loader kept up and
/// the picture showed nothing.)
constexpr double kLoaderShotMs = 1000.0;

struct Step {
  QString file;                   ///< PNG name, empty for an action without a picture
  std::function<void()> action;   ///< done before waiting for the results
};

struct Runner {
  MainWindow* w;
  QString dir;
  std::vector<Step> steps;
  std::size_t next = 0;
  int settle = 0;
  bool ok = true;
  std::function<void(bool)> done;
  QTimer timer;
};

void select_gpu(QComboBox* c, const char* id) {
  const int i = c->findData(id);
  if (i >= 0) c->setCurrentIndex(i);
}

}  // namespace

void take_screenshots(MainWindow& w, const QString& dir, std::function<void(bool)> done) {
  QDir().mkpath(dir);
  auto r = std::make_shared<Runner>();
  r->w = &w;
  r->dir = dir;
  r->done = std::move(done);
  auto tab = [&w](int t) { return [&w, t] { w.tabs()->setCurrentIndex(t); }; };
  r->steps = {
      {"overview.png", [&w] {
         w.tabs()->setCurrentIndex(MainWindow::kOverview);
         w.explain()->selectId("memory");
       }},
      {"explain.png", [&w] { w.explain()->selectId("memory.activations"); }},
      {"roofline.png", [&w, tab] {
         tab(MainWindow::kRoofline)();
         w.explain()->selectId("roofline.ridge");
       }},
      {"scaling.png", tab(MainWindow::kScaling)},
      {"collectives.png", [&w, tab] {
         tab(MainWindow::kCollectives)();
         w.explain()->selectId("collectives.scale_up");
       }},
      {"serving.png", [&w, tab] {
         tab(MainWindow::kServing)();
         w.explain()->selectId("serving.steady_state");
       }},
      {"serving-capacity.png", [&w] {
         w.servingPage()->views()->setCurrentIndex(1);
         w.explain()->selectId("serving.plan");
       }},
      // The serving simulation (issue #28): the same replica under bursty arrivals, simulated request by request.
      {"serving-simulation.png", [&w] {
         auto* sim = w.simulationPage();
         sim->arrivalCombo()->setCurrentIndex(sim->arrivalCombo()->findData("gamma"));
         sim->rateSpin()->setValue(6);  // near the replica's ~7 req/s: the bursts queue
         w.servingPage()->views()->setCurrentIndex(MainWindow::kServingSimulation);
       }},
      // A100 as the scenario's GPU: the comparison the issue asks for (A100 -> H100 changes memory, time, cost).
      {"overview-a100.png", [&w] {
         w.tabs()->setCurrentIndex(MainWindow::kOverview);
         select_gpu(w.panel()->gpuCombo(), "a100-sxm4-80gb");
         select_gpu(w.panel()->compareCombo(0), "h100-sxm5-80gb");
         w.explain()->selectId("train");
       }},
      // Compare mode: A100 bf16 pinned as A, then H100 fp8 as B.
      {"compare.png", [&w] {
         w.pin();
         select_gpu(w.panel()->gpuCombo(), "h100-sxm5-80gb");
         select_gpu(w.panel()->precisionCombo(), "fp8");
         w.tabs()->setCurrentIndex(MainWindow::kCompare);
       }},
      // An invalid layout: the model's own reasons in the status area.
      {"infeasible.png", [&w] {
         w.unpin();
         w.tabs()->setCurrentIndex(MainWindow::kOverview);
         select_gpu(w.panel()->precisionCombo(), "bf16");
         select_gpu(w.panel()->gpuCombo(), "h100-sxm5-80gb");
         select_gpu(w.panel()->compareCombo(0), "a100-sxm4-80gb");
         w.panel()->gpusSpin()->setValue(1000);
       }},
      {"", [&w] {
         w.servingPage()->views()->setCurrentIndex(0);
         w.panel()->setDefaults();
       }},
  };
  // The step timeline (issue #27): the default scenario's step as a Gantt chart over its memory timeline.
  r->steps.push_back({"timeline.png", [&w] { w.tabs()->setCurrentWidget(w.timelinePage()); }});
  // The same step fed by a DataLoader that cannot keep up (issue #27 d2): its host lane and the GPU's wait for the batch.
  r->steps.push_back({"timeline-loader.png", [&w] {
                        w.timelinePage()->workersSpin()->setValue(2);
                        w.timelinePage()->sampleMsSpin()->setValue(kLoaderShotMs);
                      }});
  r->steps.push_back({"", [&w] {
                        w.timelinePage()->workersSpin()->setValue(0);
                        w.timelinePage()->sampleMsSpin()->setValue(0);
                      }});
  // The optimisation stack (issue #27 d3): the default scenario from the fp32 eager baseline through the toggles.
  r->steps.push_back({"stack.png", [&w] { w.tabs()->setCurrentWidget(w.stackPage()); }});
  // One serving iteration kernel by kernel, and the compression choices (issue #27 d2, d5), on the serving replica.
  r->steps.push_back({"serving-timeline.png", [&w] {
                        w.tabs()->setCurrentIndex(MainWindow::kServing);
                        w.servingPage()->views()->setCurrentWidget(w.servingTimelineView());
                      }});
  r->steps.push_back({"compression.png", [&w] {
                        w.servingPage()->views()->setCurrentWidget(w.compressView());
                      }});
  // GEMM shapes (issue #27 d6): 4096×4096×4097 bf16 on the scenario's GPU, K swept over 4088…4104 (alignment classes).
  r->steps.push_back({"gemm.png", [&w] { w.tabs()->setCurrentWidget(w.gemmPage()); }});
  // Interview drills: a wrong answer checked (the verdict, the model's answer and its derivation).
  r->steps.push_back({"drills.png", [&w] {
                        auto* d = w.drillsPage();
                        w.tabs()->setCurrentWidget(d);
                        d->selectDrill("T2-H100");
                        d->answerEdit()->setText("291");
                        d->check();
                      }});
  // The real-time pipeline (issue #25): the bundled AD perception stack on the Jetson AGX Orin of its file, then on an
  // H100 — the Gantt with the 33 ms deadline line and the critical path.
  r->steps.push_back({"pipeline.png", [&w] { w.tabs()->setCurrentWidget(w.pipelinePage()); }});
  r->steps.push_back({"pipeline-h100.png", [&w] { select_gpu(w.pipelinePage()->hardwareCombo(), "h100-sxm5-80gb"); }});
  r->timer.setInterval(100);
  QObject::connect(&r->timer, &QTimer::timeout, &w, [r] {
    if (!r->w->idle()) {
      r->settle = 0;
      return;
    }
    if (r->next > 0 && ++r->settle < 4) return;  // let the charts lay out after the last result
    r->settle = 0;
    if (r->next > 0) {
      const auto& s = r->steps[r->next - 1];
      if (!s.file.isEmpty()) {
        const QPixmap px = r->w->grab();
        r->ok = px.save(r->dir + "/" + s.file) && r->ok;
      }
    }
    if (r->next == r->steps.size()) {
      r->timer.stop();
      r->done(r->ok);
      return;
    }
    r->steps[r->next++].action();
  });
  r->timer.start();
}

}  // namespace gpuplan::gui
