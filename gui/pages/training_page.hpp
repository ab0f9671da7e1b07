#pragma once
// Overview of a training scenario: the headline numbers (each a link to its derivation), the memory breakdown and
// the step-time breakdown, for the scenario's GPU and the compare GPUs side by side.
#include <QWidget>

#include "training_job.hpp"

class QLabel;

namespace gpuplan::gui {
namespace charts {
class MemoryChart;
class StepChart;
}  // namespace charts

class TrainingPage : public QWidget {
  Q_OBJECT
 public:
  explicit TrainingPage(QWidget* parent = nullptr);
  void setResult(const TrainingResult& r);
  [[nodiscard]] QLabel* summary() const { return summary_; }
  [[nodiscard]] charts::MemoryChart* memoryChart() const { return memory_; }
  [[nodiscard]] charts::StepChart* stepChart() const { return step_; }
 signals:
  void derivationRequested(const QString& id);

 private:
  QLabel* summary_;
  charts::MemoryChart* memory_;
  charts::StepChart* step_;
};

}  // namespace gpuplan::gui
