#pragma once
// Charts of a training evaluation: memory per GPU (stacked, against the device's HBM), step-time breakdown with MFU,
// roofline, and scaling. Each renders a TrainingResult as computed by the model; clicking a bar of the current GPU
// asks for its derivation (derivationRequested) so the explain tree can select it.
#include <vector>

#include <QWidget>

#include "training_job.hpp"

class QChart;
class QChartView;

namespace gpuplan::gui::charts {

class MemoryChart : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryChart(QWidget* parent = nullptr);
  void setResult(const TrainingResult& r);
  [[nodiscard]] QChartView* view() const { return view_; }
  [[nodiscard]] int barCount() const { return bars_; }  ///< GPUs drawn (tests)
 signals:
  void derivationRequested(const QString& id);

 private:
  QChart* chart_;
  QChartView* view_;
  int bars_ = 0;
};

class StepChart : public QWidget {
  Q_OBJECT
 public:
  explicit StepChart(QWidget* parent = nullptr);
  void setResult(const TrainingResult& r);
  [[nodiscard]] QChartView* view() const { return view_; }
 signals:
  void derivationRequested(const QString& id);

 private:
  QChart* chart_;
  QChartView* view_;
};

class RooflineChart : public QWidget {
  Q_OBJECT
 public:
  explicit RooflineChart(QWidget* parent = nullptr);
  void setResult(const TrainingResult& r);
  [[nodiscard]] QChartView* view() const { return view_; }
  [[nodiscard]] int pointCount() const { return points_; }
 signals:
  void derivationRequested(const QString& id);

 private:
  QChart* chart_;
  QChartView* view_;
  int points_ = 0;
};

class ScalingChart : public QWidget {
  Q_OBJECT
 public:
  explicit ScalingChart(QWidget* parent = nullptr);
  void setResult(const TrainingResult& r);
  [[nodiscard]] QChartView* timeView() const { return time_view_; }

 private:
  QChart* time_chart_;
  QChart* eff_chart_;
  QChartView* time_view_;
  QChartView* eff_view_;
};

}  // namespace gpuplan::gui::charts
