#pragma once
// The optimisation stack's bars (issue #27 d3): one bar per stage (the baseline, then each optimisation applied),
// its height the step time, split into the GPU's step and the time the GPU waits for its input; each category labelled
// with the cumulative speed-up over the baseline.
#include <vector>

#include <QWidget>

#include "stack_job.hpp"

class QChart;
class QChartView;

namespace gpuplan::gui::charts {

class StackChart : public QWidget {
  Q_OBJECT
 public:
  explicit StackChart(QWidget* parent = nullptr);
  void setResult(const StackResult& r);
  /// The category labels as drawn ("baseline", "amp ×3.2", ...).
  [[nodiscard]] QStringList categories() const { return categories_; }
  /// Bar heights in milliseconds: [0] the GPU's step, [1] the wait for the input, per category.
  [[nodiscard]] std::vector<double> values(int set) const { return set == 0 ? gpu_ms_ : wait_ms_; }
  [[nodiscard]] QChartView* view() const { return view_; }

 private:
  QChart* chart_;
  QChartView* view_;
  QStringList categories_;
  std::vector<double> gpu_ms_, wait_ms_;
};

}  // namespace gpuplan::gui::charts
