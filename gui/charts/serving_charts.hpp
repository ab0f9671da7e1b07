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

}  // namespace gpuplan::gui::charts
