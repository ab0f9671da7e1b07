#pragma once
// The serving simulation's charts: the TTFT, ITL and E2E distributions (cumulative, from every request's sample and
// the token-gap histogram, with p50 / p90 / p99 marked at the model's own percentiles) and the time series of the
// simulated replica (queue depth, running batch, KV use) over simulated time.
#include <vector>

#include <QPointF>
#include <QWidget>

#include "simulation_job.hpp"

class QChart;
class QChartView;

namespace gpuplan::gui::charts {

class SimulationCharts : public QWidget {
  Q_OBJECT
 public:
  enum Dist { kTtft = 0, kItl, kE2e, kDistCount };
  /// Most points drawn per distribution curve (the CDF is sampled at evenly spaced ranks beyond that).
  static constexpr int kMaxCurvePoints = 400;
  /// Most time-series samples drawn (an overloaded replica drains its backlog long after the last arrival: every k-th
  /// sample beyond that).
  static constexpr int kMaxSeriesPoints = 2000;

  explicit SimulationCharts(QWidget* parent = nullptr);
  void setResult(const SimulationResult& r);

  /// The percentile markers on a distribution chart as (latency in seconds, cumulative fraction), p50, p90, p99.
  [[nodiscard]] std::vector<QPointF> markers(Dist d) const;
  /// The cumulative curve of a distribution chart as (latency in seconds, fraction).
  [[nodiscard]] std::vector<QPointF> curve(Dist d) const;
  /// Points of the time series as (simulated seconds, value): 0 running, 1 waiting, 2 KV in use (percent).
  [[nodiscard]] std::vector<QPointF> series(int which) const;
  [[nodiscard]] QChartView* view(Dist d) const { return dist_views_[d]; }
  [[nodiscard]] QChartView* seriesView() const { return series_view_; }

 private:
  void setDistribution(Dist d, const QString& title, const std::vector<QPointF>& cdf_s, const model::LatencyStats& st);
  QChart* dist_charts_[kDistCount];
  QChartView* dist_views_[kDistCount];
  double scale_[kDistCount] = {1, 1, 1};  ///< the chart's unit per second (1e3: ms)
  QChart* series_chart_;
  QChartView* series_view_;
};

}  // namespace gpuplan::gui::charts
