#include "main_window.hpp"

#include <QAction>
#include <QApplication>
#include <QChartView>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QScrollArea>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "drills_page.hpp"
#include "timeline_page.hpp"
#include "gemm_page.hpp"
#include "collectives_chart.hpp"
#include "compare_model.hpp"
#include "compare_page.hpp"
#include "explain_pane.hpp"
#include "chart_util.hpp"
#include "job_controller.hpp"
#include "markdown_report.hpp"
#include "pipeline_page.hpp"
#include "gpuplan/app/file_write.hpp"
#include "gpuplan/app/resolve.hpp"
#include "scenario_panel.hpp"
#include "stack_page.hpp"
#include "compress_view.hpp"
#include "serving_timeline_view.hpp"
#include "serving_charts.hpp"
#include "serving_page.hpp"
#include "simulation_page.hpp"
#include "training_charts.hpp"
#include "training_page.hpp"

namespace gpuplan::gui {
namespace {
QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
constexpr int kMaxRecent = 8;

QString diag_html(const Diagnostic& d) {
  const char* colour = d.severity == Severity::error ? "#b00020" : d.severity == Severity::warning ? "#a05a00" : "#666";
  return QString("<div style='color:%1'>%2</div>").arg(colour, q(d.to_string()));
}
}  // namespace

MainWindow::MainWindow(std::shared_ptr<const AppData> app_data, QWidget* parent)
    : QMainWindow(parent), data_(std::move(app_data)) {
  setWindowTitle(tr("gpuplan — LLM training and serving planner"));
  train_jobs_ = new JobController(this);
  serve_jobs_ = new JobController(this);

  // Left: scenario and status.
  panel_ = new ScenarioPanel(data_);
  auto* scroll = new QScrollArea;
  scroll->setWidget(panel_);
  scroll->setWidgetResizable(true);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  status_ = new QTextBrowser;
  status_->setOpenLinks(false);
  status_->setPlaceholderText(tr("Diagnostics and feasibility appear here."));
  auto* left = new QSplitter(Qt::Vertical);
  left->addWidget(scroll);
  left->addWidget(status_);
  left->setStretchFactor(0, 4);
  left->setStretchFactor(1, 1);
  auto* dock = new QDockWidget(tr("Scenario"), this);
  dock->setObjectName("scenario");
  dock->setWidget(left);
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  dock->setMinimumWidth(290);
  addDockWidget(Qt::LeftDockWidgetArea, dock);

  // Right: explain.
  explain_ = new ExplainPane;
  auto* edock = new QDockWidget(tr("Explain"), this);
  edock->setObjectName("explain");
  edock->setWidget(explain_);
  edock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  edock->setMinimumWidth(380);
  addDockWidget(Qt::RightDockWidgetArea, edock);

  // Middle: views.
  tabs_ = new QTabWidget;
  training_ = new TrainingPage;
  roofline_ = new charts::RooflineChart;
  scaling_ = new charts::ScalingChart;
  collectives_ = new charts::CollectivesChart;
  serving_ = new ServingPage(data_);
  compare_ = new ComparePage;
  tabs_->addTab(training_, tr("Memory && step time"));
  tabs_->addTab(roofline_, tr("Roofline"));
  tabs_->addTab(scaling_, tr("Scaling"));
  tabs_->addTab(collectives_, tr("Collectives"));
  tabs_->addTab(serving_, tr("Serving"));
  tabs_->addTab(compare_, tr("Compare"));
  drills_ = new DrillsPage(data_);
  tabs_->addTab(drills_, tr("Interview drills"));
  timeline_ = new TimelinePage;
  tabs_->addTab(timeline_, tr("Step timeline"));
  pipeline_ = new PipelinePage(data_);
  tabs_->addTab(pipeline_, tr("Real-time pipeline"));
  stack_ = new StackPage(data_);
  tabs_->addTab(stack_, tr("Optimisation stack"));
  gemm_ = new GemmPage(data_);
  tabs_->addTab(gemm_, tr("GEMM shapes"));
  simulation_ = new SimulationPage(data_);
  serving_->views()->insertTab(kServingSimulation, simulation_, tr("Simulation (live rate)"));
  serving_timeline_ = new ServingTimelineView;
  serving_->views()->addTab(serving_timeline_, tr("Iteration timeline"));
  compress_ = new CompressView;
  serving_->views()->addTab(compress_, tr("Compression"));
  setCentralWidget(tabs_);

  auto explain = [this](const QString& id) { explain_->selectId(id); };
  connect(training_, &TrainingPage::derivationRequested, this, explain);
  connect(roofline_, &charts::RooflineChart::derivationRequested, this, explain);
  connect(collectives_, &charts::CollectivesChart::derivationRequested, this, explain);
  connect(serving_, &ServingPage::derivationRequested, this, explain);
  connect(panel_, &ScenarioPanel::changed, this, &MainWindow::requestTraining);
  connect(timeline_, &TimelinePage::loaderChanged, this, &MainWindow::requestTraining);
  connect(panel_, &ScenarioPanel::modelAdded, serving_, &ServingPage::addModel);  // an import reaches the Serving tab
  connect(serving_, &ServingPage::changed, this, &MainWindow::requestServing);
  connect(compare_, &ComparePage::pinRequested, this, &MainWindow::pin);
  connect(compare_, &ComparePage::unpinRequested, this, &MainWindow::unpin);
  auto busy = [this](bool) {
    const bool b = train_jobs_->busy() || serve_jobs_->busy();
    if (b) statusBar()->showMessage(tr("computing…"));
  };
  connect(train_jobs_, &JobController::busyChanged, this, busy);
  connect(serve_jobs_, &JobController::busyChanged, this, busy);

  buildMenus();
  resize(1600, 1000);
  requestTraining();
  requestServing();
}

void MainWindow::buildMenus() {
  auto* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&New (defaults)"), QKeySequence::New, this, [this] {
    current_file_.clear();
    file_diags_ = {};
    panel_->setDefaults();
  });
  file->addAction(tr("&Open scenario…"), QKeySequence::Open, this, [this] {
    const auto path = QFileDialog::getOpenFileName(this, tr("Open scenario"), QString(), tr("Scenario (*.json)"));
    if (!path.isEmpty()) openScenario(path);
  });
  recent_menu_ = file->addMenu(tr("Open &recent"));
  rebuildRecent();
  file->addAction(tr("&Save scenario"), QKeySequence::Save, this, [this] {
    QString path = current_file_;
    if (path.isEmpty())
      path = QFileDialog::getSaveFileName(this, tr("Save scenario"), "scenario.json", tr("Scenario (*.json)"));
    if (!path.isEmpty()) saveScenario(path);
  });
  file->addAction(tr("Save scenario &as…"), QKeySequence::SaveAs, this, [this] {
    const auto path = QFileDialog::getSaveFileName(this, tr("Save scenario"), "scenario.json", tr("Scenario (*.json)"));
    if (!path.isEmpty()) saveScenario(path);
  });
  file->addSeparator();
  file->addAction(tr("&Import Hugging Face config.json…"), this, [this] {
    const auto path = QFileDialog::getOpenFileName(this, tr("Import model"), QString(), tr("Model config (*.json)"));
    if (!path.isEmpty()) importModel(path);
  });
  file->addSeparator();
  file->addAction(tr("Export &charts of this view (PNG + SVG)…"), this, [this] {
    const auto dir = QFileDialog::getExistingDirectory(this, tr("Export charts to"));
    if (!dir.isEmpty()) exportCharts(dir);
  });
  file->addAction(tr("Export &Markdown report…"), this, [this] {
    const auto path = QFileDialog::getSaveFileName(this, tr("Export Markdown"), "gpuplan-report.md", tr("Markdown (*.md)"));
    if (!path.isEmpty()) exportMarkdown(path);
  });
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, qApp, &QApplication::quit);
  auto* view = menuBar()->addMenu(tr("&Compare"));
  view->addAction(tr("&Pin current scenario (A)"), QKeySequence(Qt::CTRL | Qt::Key_P), this, [this] {
    pin();
    tabs_->setCurrentIndex(kCompare);
  });
  view->addAction(tr("&Unpin"), this, &MainWindow::unpin);
  auto* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About"), this, [this] {
    QMessageBox::about(this, tr("About gpuplan"),
                       tr("<b>gpuplan</b> — analytical performance model and capacity planner for LLM training and "
                          "serving.<br>Data: %1")
                           .arg(QString::fromStdString(data_->data_dir).toHtmlEscaped()));
  });
}

bool MainWindow::idle() const {
  return have_training_ && have_serving_ && !train_jobs_->busy() && !serve_jobs_->busy() && simulation_->idle() &&
         pipeline_->idle() && stack_->idle();
}

void MainWindow::requestTraining() {
  TrainingRequest req;
  req.scenario = panel_->scenario();
  req.compare_gpus = panel_->compareGpus();
  req.calibration = panel_->calibration();
  req.loader_workers = timeline_->loaderWorkers();
  req.loader_sample_ms = timeline_->loaderSampleMs();
  gemm_->setGpu(panel_->gpuCombo()->currentData().toString().toStdString(), req.calibration);
  stack_->setScenario(req.scenario, req.calibration);
  serving_->followTraining(panel_->modelCombo()->currentData().toString(), panel_->gpuCombo()->currentData().toString());
  train_clock_.start();
  auto shared = data_;
  train_jobs_->submit<TrainingResult>([shared, req] { return evaluate_training(*shared, req); },
                                      [this](TrainingResult& r) { showTraining(r); });
}

void MainWindow::requestServing() {
  ServingRequest req = serving_->request();
  req.calibration = panel_->calibration();
  simulation_->setServing(req);
  serve_clock_.start();
  auto shared = data_;
  serve_jobs_->submit<ServingResult>([shared, req] { return evaluate_serving(*shared, req); },
                                     [this](ServingResult& r) { showServing(r); });
}

void MainWindow::showTraining(TrainingResult& r) {
  last_training_ = std::move(r);
  have_training_ = true;
  const auto& t = last_training_;
  training_->setResult(t);
  timeline_->setResult(t);
  roofline_->setResult(t);
  scaling_->setResult(t);
  collectives_->setResult(t.collectives);
  panel_->showDerived(t.valid && t.layout_ok ? t.plan.par.dp : 0);
  updateStatus();
  updateExplain();
  updateCompare();
  statusBar()->showMessage(tr("training estimate updated in %1 ms").arg(train_clock_.elapsed()));
}

void MainWindow::showServing(ServingResult& r) {
  last_serving_ = std::move(r);
  have_serving_ = true;
  serving_->setResult(last_serving_);
  serving_timeline_->setResult(last_serving_);
  compress_->setResult(last_serving_);
  updateExplain();
  updateCompare();
  statusBar()->showMessage(tr("serving estimate updated in %1 ms").arg(serve_clock_.elapsed()));
}

void MainWindow::pin() {
  compare_->model()->setPinned(snapshot_of(last_training_, last_serving_));
  compare_->refresh();
  statusBar()->showMessage(tr("pinned the current scenario as A"), 5000);
}

void MainWindow::unpin() {
  compare_->model()->clearPinned();
  compare_->refresh();
}

void MainWindow::updateCompare() { compare_->model()->setCurrent(snapshot_of(last_training_, last_serving_)); }

void MainWindow::updateExplain() {
  std::vector<Derivation> roots;
  if (have_training_) {
    if (!last_training_.gpus_evaluated.empty() && !last_training_.gpus_evaluated[0].est.derivation.empty())
      roots.push_back(last_training_.gpus_evaluated[0].est.derivation);
    for (const auto& c : last_training_.rooflines)
      if (!c.ridge.empty()) roots.push_back(c.ridge);
    for (const auto& t : last_training_.collectives.tiers)
      if (!t.sample.empty()) roots.push_back(t.sample);
  }
  if (have_serving_)
    for (const auto& d : last_serving_.derivations) roots.push_back(d);
  explain_->setDerivations(std::move(roots));
}

void MainWindow::updateStatus() {
  QString html;
  for (const auto& d : file_diags_.items()) html += diag_html(d);
  const auto& t = last_training_;
  // Errors first, then feasibility, then notes: what stops the estimate is at the top.
  for (const auto& d : t.diags.items())
    if (d.severity == Severity::error) html += diag_html(d);
  for (std::size_t i = 0; i < t.gpus_evaluated.size(); ++i) {
    const auto& g = t.gpus_evaluated[i];
    if (g.est.feasibility.ok) continue;
    if (i > 0 && g.est.feasibility.reasons == t.gpus_evaluated[0].est.feasibility.reasons) continue;  // same layout problem
    html += QString("<div style='color:#b00020'><b>%1 infeasible%2:</b></div><ul style='margin-top:0'>")
                .arg(i == 0 ? tr("Scenario") : q(g.gpu_name), i == 0 ? QString(" on ") + q(g.gpu_name) : QString());
    for (const auto& why : g.est.feasibility.reasons) html += "<li style='color:#b00020'>" + q(why) + "</li>";
    html += "</ul>";
  }
  for (const auto& d : t.diags.items())
    if (d.severity != Severity::error) html += diag_html(d);
  if (html.isEmpty()) html = tr("<span style='color:#2e7d32'>Scenario valid; every GPU fits.</span>");
  status_->setHtml(html);
}

bool MainWindow::openScenario(const QString& path) {
  file_diags_ = {};
  const std::string file = path.toStdString();
  auto text = json_io::read_text_file(file, file_diags_);
  std::optional<json_io::Json> j;
  if (text) j = json_io::parse(*text, file, file_diags_);
  bool ok = false;
  if (j) {
    auto s = wl_io::decode_training_scenario(*j, file);
    file_diags_.append(s.diagnostics());
    if (s.ok()) {
      // What the CLI would derive for absent keys (the global batch = micro × DP) comes from its own resolution.
      std::optional<long long> global;
      Diagnostics quiet;
      if (auto r = app::resolve_training(s.value(), j->contains("global_batch"), data_->db, data_->library,
                                         [](const std::string& k) { return k; }, quiet))
        global = r->plan.global_batch;
      current_file_ = path;
      addRecent(path);
      panel_->setScenario(s.value(), *j, global);
      ok = true;
    }
  }
  if (!ok) file_diags_.note(file, "", "not loaded: the scenario on screen is unchanged");
  updateStatus();
  statusBar()->showMessage(ok ? tr("opened %1").arg(path) : tr("could not open %1").arg(path), 5000);
  return ok;
}

bool MainWindow::saveScenario(const QString& path) {
  file_diags_ = {};
  // The CLI's writer (app/): a temporary file beside it renamed over it, the file's permissions and a symbolic link
  // kept, a folder or device refused with its reason.
  const bool ok = app::write_file_atomically(path.toStdString(), panel_->scenario().dump(2) + "\n", file_diags_);
  if (ok) {
    current_file_ = path;
    addRecent(path);
  }
  updateStatus();
  statusBar()->showMessage(ok ? tr("saved %1").arg(path) : tr("could not save %1").arg(path), 5000);
  return ok;
}

void MainWindow::importModel(const QString& path) {
  file_diags_ = {};
  auto m = wl_io::load_model_file(path.toStdString());
  file_diags_.append(m.diagnostics());
  if (m.ok()) {
    for (const auto& a : m->arch.assumptions) file_diags_.note(path.toStdString(), "", "assumed: " + a);
    panel_->addModelPath(path, QFileInfo(path).fileName() + " (" + QString::fromStdString(m->arch.id) + ")");
  }
  updateStatus();
}

QStringList MainWindow::exportCharts(const QString& dir) {
  static const char* const slug[] = {"overview", "roofline", "scaling", "collectives", "serving", "compare"};
  const int tab = tabs_->currentIndex();
  const QString base = QString(tab >= 0 && tab < int(std::size(slug)) ? slug[tab] : "view");
  QStringList written;
  int n = 0;
  for (auto* v : tabs_->currentWidget()->findChildren<QChartView*>()) {
    if (!v->isVisible()) continue;  // an inner tab not on screen (its charts are not laid out)
    ++n;
    for (const char* ext : {"png", "svg"}) {
      const QString path = QDir(dir).filePath(QString("%1-%2.%3").arg(base).arg(n).arg(ext));
      if (charts::export_chart(v, path)) written << path;
    }
  }
  statusBar()->showMessage(written.isEmpty() ? tr("this view has no chart to export")
                                             : tr("wrote %1 files to %2").arg(written.size()).arg(dir),
                           5000);
  return written;
}

bool MainWindow::exportMarkdown(const QString& path) {
  const std::string md = markdown_report(last_training_, panel_->scenario(), last_serving_, compare_->model());
  Diagnostics written;
  const bool ok = app::write_file_atomically(path.toStdString(), md, written);
  if (!ok) {
    file_diags_ = std::move(written);
    updateStatus();
  }
  statusBar()->showMessage(ok ? tr("wrote %1").arg(path) : tr("could not write %1").arg(path), 5000);
  return ok;
}

void MainWindow::addRecent(const QString& path) {
  QSettings s;
  QStringList files = s.value("recentFiles").toStringList();
  const QString abs = QFileInfo(path).absoluteFilePath();
  files.removeAll(abs);
  files.prepend(abs);
  while (files.size() > kMaxRecent) files.removeLast();
  s.setValue("recentFiles", files);
  rebuildRecent();
}

void MainWindow::rebuildRecent() {
  if (recent_menu_ == nullptr) return;
  recent_menu_->clear();
  const QStringList files = QSettings().value("recentFiles").toStringList();
  for (const auto& f : files) recent_menu_->addAction(f, this, [this, f] { openScenario(f); });
  recent_menu_->setEnabled(!files.isEmpty());
}

}  // namespace gpuplan::gui
