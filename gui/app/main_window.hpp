#pragma once
// The main window: the scenario panel and its status area on the left, the views in tabs in the middle, the explain
// tree on the right. Every edit submits a request to a JobController (worker thread, latest wins); results are
// rendered when they arrive.
#include <memory>

#include <QElapsedTimer>
#include <QMainWindow>

#include "app_data.hpp"
#include "serving_job.hpp"
#include "training_job.hpp"

class QMenu;
class QTabWidget;
class QTextBrowser;

namespace gpuplan::gui {

class DrillsPage;
class TimelinePage;
class GemmPage;
class ServingTimelineView;
class CompressView;
class PipelinePage;
class ComparePage;
class ExplainPane;
class JobController;
class ScenarioPanel;
class ServingPage;
class SimulationPage;
class StackPage;
class TrainingPage;
namespace charts {
class CollectivesChart;
class RooflineChart;
class ScalingChart;
}  // namespace charts

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  enum Tab { kOverview = 0, kRoofline, kScaling, kCollectives, kServing, kCompare };
  static constexpr int kServingSimulation = 2;  ///< the inner tab of the serving page
  explicit MainWindow(std::shared_ptr<const AppData> data, QWidget* parent = nullptr);

  /// Loads a scenario file (the JSON of `gpuplan train --scenario`); problems go to the status area. False when the
  /// file does not decode.
  bool openScenario(const QString& path);
  /// Writes the current scenario; false (with a status message) when the file cannot be written.
  bool saveScenario(const QString& path);
  /// Adds a Hugging Face config.json (or model JSON) to the model list and selects it.
  void importModel(const QString& path);
  /// Writes every chart on screen in the current tab to `dir` as <view>-<n>.png and .svg (the serving tab: those of
  /// its inner tab on screen); returns the files written.
  QStringList exportCharts(const QString& dir);
  /// Writes the current results as a Markdown report (markdown_report); false when the file cannot be written.
  bool exportMarkdown(const QString& path);

  [[nodiscard]] ScenarioPanel* panel() const { return panel_; }
  [[nodiscard]] TrainingPage* trainingPage() const { return training_; }
  [[nodiscard]] ServingPage* servingPage() const { return serving_; }
  [[nodiscard]] DrillsPage* drillsPage() const { return drills_; }
  [[nodiscard]] TimelinePage* timelinePage() const { return timeline_; }
  [[nodiscard]] GemmPage* gemmPage() const { return gemm_; }
  /// The serving page's inner tab kServingSimulation: the replica simulated under a live arrival rate.
  [[nodiscard]] SimulationPage* simulationPage() const { return simulation_; }
  /// The Real-time pipeline tab (issue #25): a pipeline file's schedule on a chosen chip.
  [[nodiscard]] PipelinePage* pipelinePage() const { return pipeline_; }
  [[nodiscard]] StackPage* stackPage() const { return stack_; }
  /// The serving page's inner tabs after the simulation: one iteration kernel by kernel, the compression choices.
  [[nodiscard]] ServingTimelineView* servingTimelineView() const { return serving_timeline_; }
  [[nodiscard]] CompressView* compressView() const { return compress_; }
  [[nodiscard]] charts::CollectivesChart* collectivesChart() const { return collectives_; }
  [[nodiscard]] ComparePage* comparePage() const { return compare_; }
  [[nodiscard]] ExplainPane* explain() const { return explain_; }
  [[nodiscard]] QTabWidget* tabs() const { return tabs_; }
  [[nodiscard]] QTextBrowser* statusArea() const { return status_; }
  [[nodiscard]] JobController* trainingJobs() const { return train_jobs_; }
  [[nodiscard]] JobController* servingJobs() const { return serve_jobs_; }
  [[nodiscard]] const TrainingResult& lastTraining() const { return last_training_; }
  [[nodiscard]] const ServingResult& lastServing() const { return last_serving_; }
  /// True when no request is running or waiting and both pages have a result.
  [[nodiscard]] bool idle() const;

 public slots:
  /// Compare mode: the current results become A (pinned); unpin forgets them.
  void pin();
  void unpin();
  void requestTraining();
  void requestServing();

 private:
  void buildMenus();
  void showTraining(TrainingResult& r);
  void showServing(ServingResult& r);
  void updateStatus();
  void updateExplain();
  void updateCompare();
  void addRecent(const QString& path);
  void rebuildRecent();

  std::shared_ptr<const AppData> data_;
  ScenarioPanel* panel_;
  QTextBrowser* status_;
  QTabWidget* tabs_;
  TrainingPage* training_;
  charts::RooflineChart* roofline_;
  charts::ScalingChart* scaling_;
  charts::CollectivesChart* collectives_;
  ServingPage* serving_;
  DrillsPage* drills_;  ///< the Interview drills tab
  TimelinePage* timeline_;  ///< the step and memory timelines (issue #27)
  GemmPage* gemm_;          ///< GEMM shapes: alignment classes and the tile staircase (issue #27)
  SimulationPage* simulation_;
  ServingTimelineView* serving_timeline_;
  CompressView* compress_;
  PipelinePage* pipeline_;  ///< the Real-time pipeline tab
  StackPage* stack_;  ///< the optimisation stack tab (issue #27 d3)
  ComparePage* compare_;
  ExplainPane* explain_;
  JobController* train_jobs_;
  JobController* serve_jobs_;
  QMenu* recent_menu_ = nullptr;
  QString current_file_;
  Diagnostics file_diags_;  ///< from the last open/save/import, shown until the next one
  TrainingResult last_training_;
  ServingResult last_serving_;
  bool have_training_ = false, have_serving_ = false;
  QElapsedTimer train_clock_, serve_clock_;
};

}  // namespace gpuplan::gui
