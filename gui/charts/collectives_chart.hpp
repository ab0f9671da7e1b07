#pragma once
// Collectives: time and bus bandwidth vs message size (log–log) for all-reduce, all-gather, reduce-scatter and
// all-to-all on the scenario's scale-up (NVLink) tier and its scale-out (InfiniBand/RoCE) tier. Colour is the
// collective, the line style the tier; hovering a point shows its time, algorithm bandwidth, bus bandwidth and the
// algorithm the model chose. Every value is model::collective_cost (CollectivesResult).
#include <QWidget>

#include "collectives_job.hpp"

class QChart;
class QChartView;
class QLabel;

namespace gpuplan::gui::charts {

class CollectivesChart : public QWidget {
  Q_OBJECT
 public:
  explicit CollectivesChart(QWidget* parent = nullptr);
  void setResult(const CollectivesResult& r);
  [[nodiscard]] QChartView* timeView() const { return time_view_; }
  [[nodiscard]] QChartView* bandwidthView() const { return bw_view_; }
  [[nodiscard]] QLabel* header() const { return header_; }
  [[nodiscard]] int seriesCount() const { return series_; }
  /// The hover text of point `index` of `op` on tier `tier` (tests; the tooltip shows the same).
  [[nodiscard]] QString pointText(int tier, int op, int index) const;
 signals:
  void derivationRequested(const QString& id);

 private:
  CollectivesResult result_;
  QLabel* header_;
  QChart* time_chart_;
  QChart* bw_chart_;
  QChartView* time_view_;
  QChartView* bw_view_;
  int series_ = 0;
};

}  // namespace gpuplan::gui::charts
