#pragma once
// The Pipeline tab (issue #25, deliverable 4): a real-time multi-model pipeline file (data/scenarios/*.json, kind
// "pipeline") on a chosen chip — the Gantt chart of frame 0's stages per engine (GPU, DLA, CPU) with the deadline
// line and the critical path outlined, whether the deadline is met at the mean and at P99 with the slack, the engine
// loads, a table of the stages and the derivations. The toggles (backbone sharing, INT8, TensorRT-like fusion, CUDA
// graphs, temporal reuse) and the hardware selector re-run app::evaluate_pipeline — `gpuplan pipeline`'s own code —
// on the page's JobController (worker thread, latest wins). It evaluates only while on screen (or when run() is
// called).
#include <memory>

#include <QWidget>

#include "app_data.hpp"
#include "pipeline_job.hpp"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableWidget;

namespace gpuplan::gui {
class ExplainPane;
class JobController;
namespace charts {
class GanttChart;
}

class PipelinePage : public QWidget {
  Q_OBJECT
 public:
  /// Table columns.
  enum Column { kStage = 0, kEngine, kStart, kFinish, kDuration, kCritical, kWhat, kColumnCount };

  explicit PipelinePage(std::shared_ptr<const AppData> data, QWidget* parent = nullptr);

  /// Opens a pipeline file: its own `options` set the toggles when its result arrives. Evaluates now when on screen.
  void setFile(const QString& path);
  [[nodiscard]] QString file() const;
  /// The request of the current controls.
  [[nodiscard]] PipelinePageRequest request() const;
  /// Submits the current request (latest wins).
  void run();
  /// No evaluation running or waiting to run.
  [[nodiscard]] bool idle() const;
  [[nodiscard]] bool hasResult() const { return has_result_; }
  [[nodiscard]] const PipelinePageResult& lastResult() const { return last_; }

  [[nodiscard]] QComboBox* hardwareCombo() const { return hardware_; }
  [[nodiscard]] QCheckBox* shareBackboneBox() const { return share_; }
  [[nodiscard]] QCheckBox* int8Box() const { return int8_; }
  [[nodiscard]] QCheckBox* fusionBox() const { return fusion_; }
  [[nodiscard]] QCheckBox* cudaGraphsBox() const { return graphs_; }
  [[nodiscard]] QCheckBox* temporalReuseBox() const { return reuse_; }
  [[nodiscard]] charts::GanttChart* gantt() const { return gantt_; }
  [[nodiscard]] QTableWidget* table() const { return table_; }
  [[nodiscard]] QLabel* summary() const { return summary_; }
  [[nodiscard]] QLabel* status() const { return status_; }
  [[nodiscard]] ExplainPane* explain() const { return explain_; }
  [[nodiscard]] JobController* jobs() const { return jobs_; }

 signals:
  /// A result reached the page (after the views were updated).
  void evaluated();

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void changed();
  void setResult(PipelinePageResult& r);
  std::shared_ptr<const AppData> data_;
  JobController* jobs_;
  QLineEdit* file_;
  QPushButton* open_;
  QComboBox* hardware_;
  QCheckBox *share_, *int8_, *fusion_, *graphs_, *reuse_;
  QLabel *summary_, *status_;
  charts::GanttChart* gantt_;
  QTableWidget* table_;
  ExplainPane* explain_;
  PipelinePageResult last_;
  bool has_result_ = false;
  bool stale_ = true;              ///< the request changed since the last submit
  bool options_from_file_ = true;  ///< the toggles still wait for the file's `options`
};

}  // namespace gpuplan::gui
