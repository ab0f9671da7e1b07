#pragma once
// Compression what-ifs (issue #27 d5): one bar per choice of model::CompressionStudy for a chosen metric (decode
// tokens/s, ITL, TTFT, weights, weights + KV), the baseline first; refused choices get no bar and say why in the
// tooltip.
#include <QStringList>
#include <QWidget>

#include "gpuplan/model/compression.hpp"

class QChart;
class QChartView;

namespace gpuplan::gui::charts {

class CompressChart : public QWidget {
  Q_OBJECT
 public:
  enum Metric { kDecodeTokens = 0, kItl, kTtft, kWeights, kMemory, kMetricCount };
  explicit CompressChart(QWidget* parent = nullptr);
  void setStudy(const model::CompressionStudy& s, Metric m);
  /// The bar values drawn (one per row; 0 for a refused choice) and their category labels (tests).
  [[nodiscard]] const std::vector<double>& values() const { return values_; }
  [[nodiscard]] const QStringList& categories() const { return categories_; }
  /// The value a row shows for a metric, in the chart's unit (tok/s, ms, GB).
  static double value_of(const model::CompressionRow& r, Metric m);
  static QString unit_of(Metric m);

 private:
  QChart* chart_;
  QChartView* view_;
  std::vector<double> values_;
  QStringList categories_;
};

}  // namespace gpuplan::gui::charts
