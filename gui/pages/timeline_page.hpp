#pragma once
// The "Step timeline" tab: the training step as a zoomable Gantt chart (what a profiler trace shows) above the
// memory timeline of the same step, with a recompute toggle (none / selective / full) that switches between the memory
// timelines the training job computed for each mode (model/timeline.hpp), and the input pipeline's controls (DataLoader
// workers, CPU ms per sample: the training job lays the loader out on its own lane; changing them emits
// loaderChanged). Renders only.
#include <QWidget>

#include "training_job.hpp"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;

namespace gpuplan::gui {
namespace charts {
class TimelineChart;
class MemoryTimelineChart;
}  // namespace charts

class TimelinePage : public QWidget {
  Q_OBJECT
 public:
  explicit TimelinePage(QWidget* parent = nullptr);
  void setResult(const TrainingResult& r);
  [[nodiscard]] charts::TimelineChart* stepChart() const { return step_; }
  [[nodiscard]] charts::MemoryTimelineChart* memoryChart() const { return memory_; }
  [[nodiscard]] QComboBox* recomputeCombo() const { return recompute_; }
  [[nodiscard]] QLabel* summary() const { return summary_; }
  [[nodiscard]] QLabel* memorySummary() const { return memory_summary_; }
  [[nodiscard]] QSpinBox* workersSpin() const { return workers_; }
  [[nodiscard]] QDoubleSpinBox* sampleMsSpin() const { return sample_ms_; }
  /// The loader the controls ask for (TrainingRequest::loader_workers / loader_sample_ms).
  [[nodiscard]] int loaderWorkers() const;
  [[nodiscard]] double loaderSampleMs() const;

 signals:
  void loaderChanged();

 private:
  void showMemory();
  QLabel* summary_;
  QLabel* memory_summary_;
  QComboBox* recompute_;
  QSpinBox* workers_;
  QDoubleSpinBox* sample_ms_;
  charts::TimelineChart* step_;
  charts::MemoryTimelineChart* memory_;
  std::vector<model::MemoryTimeline> memory_timelines_;
};

}  // namespace gpuplan::gui
