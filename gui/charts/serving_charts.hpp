#pragma once
// Serving charts: TTFT and ITL vs batch, and KV cache per sequence and max concurrency vs context.
#include <QWidget>

#include "serving_job.hpp"

class QChart;
class QChartView;

namespace gpuplan::gui::charts {

class ServingCharts : public QWidget {
  Q_OBJECT
 public:
  explicit ServingCharts(QWidget* parent = nullptr);
  void setResult(const ServingResult& r);
  [[nodiscard]] int latencyPoints() const { return latency_points_; }

 private:
  QChart* lat_chart_;
  QChart* kv_chart_;
  QChartView* lat_view_;
  QChartView* kv_view_;
  int latency_points_ = 0;
};

/// The capacity planner swept over the request rate: GPUs needed and cost per million output tokens vs requests/s,
/// the operating rate marked; points that miss the SLA hollow. Hover: the layout the planner chose.
class CapacityCharts : public QWidget {
  Q_OBJECT
 public:
  explicit CapacityCharts(QWidget* parent = nullptr);
  void setResult(const ServingResult& r);
  [[nodiscard]] int points() const { return points_; }
  [[nodiscard]] QChartView* gpusView() const { return gpus_view_; }
  [[nodiscard]] QChartView* costView() const { return cost_view_; }
  /// The hover text of sweep point `i` (tests; the tooltip shows the same).
  [[nodiscard]] QString pointText(int i) const;
 signals:
  void derivationRequested(const QString& id);

 private:
  ServingResult result_;
  QChart* gpus_chart_;
  QChart* cost_chart_;
  QChartView* gpus_view_;
  QChartView* cost_view_;
  int points_ = 0;
};

}  // namespace gpuplan::gui::charts
