#pragma once
// Optimisation stack (issue #27 d3): the scenario panel's training plan taken from a PyTorch fp32 eager baseline
// through the optimisations toggled here, in the order listed (model::optimisation_stack, each stage a full
// estimate_training run): bars of the step time per stage with the cumulative speed-up, and a table of time, memory,
// cost and speed-ups. Any toggle re-runs it on the page's own JobController (worker thread, latest wins).
#include <memory>
#include <vector>

#include <QWidget>

#include "app_data.hpp"
#include "stack_job.hpp"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;

namespace gpuplan::gui {
class JobController;
namespace charts {
class StackChart;
}

class StackPage : public QWidget {
  Q_OBJECT
 public:
  /// The toggles, in the order the stack applies them.
  enum Toggle { kAmp = 0, kFlash, kFusedAdam, kCompile, kWorkers, kOverlap, kRecompute, kCudaGraphs, kFp8, kToggleCount };

  explicit StackPage(std::shared_ptr<const AppData> data, QWidget* parent = nullptr);

  /// The scenario panel's plan (re-runs now when on screen, else when next shown).
  void setScenario(const json_io::Json& scenario, bool calibration);
  [[nodiscard]] StackRequest request() const;
  void run();
  [[nodiscard]] bool idle() const;
  [[nodiscard]] const StackResult& lastResult() const { return last_; }

  [[nodiscard]] QCheckBox* toggle(Toggle t) const { return toggles_[t]; }
  [[nodiscard]] QSpinBox* workersSpin() const { return workers_; }
  [[nodiscard]] QComboBox* recomputeCombo() const { return recompute_; }
  [[nodiscard]] QDoubleSpinBox* sampleSpin() const { return sample_ms_; }
  [[nodiscard]] charts::StackChart* chart() const { return chart_; }
  [[nodiscard]] QLabel* table() const { return table_; }
  [[nodiscard]] JobController* jobs() const { return jobs_; }

 signals:
  void stacked();

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void changed();
  void setResult(StackResult& r);
  std::shared_ptr<const AppData> data_;
  json_io::Json scenario_ = json_io::Json::object();
  bool calibration_ = true;
  JobController* jobs_;
  QCheckBox* toggles_[kToggleCount];
  QSpinBox* workers_;
  QComboBox* recompute_;
  QDoubleSpinBox* sample_ms_;
  QLabel *summary_, *status_, *table_;
  charts::StackChart* chart_;
  StackResult last_;
  bool stale_ = true;
};

}  // namespace gpuplan::gui
