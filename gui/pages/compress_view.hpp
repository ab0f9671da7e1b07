#pragma once
// The serving page's "Compression" view (issue #27 d5): the choices of `gpuplan compress` — W8A8 int8 / fp8, W4A16,
// NVFP4, 2:4 sparsity, pruned FFN and heads, dropped layers — priced on the serving page's replica at its operating
// batch (model::compression_study, computed by the serving job): size, memory, TTFT, ITL and throughput per choice in a
// table, one metric as bars. Accuracy is out of scope, and the view says so.
#include <QWidget>

#include "serving_job.hpp"

class QComboBox;
class QLabel;
class QTableWidget;

namespace gpuplan::gui {
namespace charts {
class CompressChart;
}

class CompressView : public QWidget {
  Q_OBJECT
 public:
  explicit CompressView(QWidget* parent = nullptr);
  void setResult(const ServingResult& r);
  [[nodiscard]] QComboBox* metricCombo() const { return metric_; }
  [[nodiscard]] QTableWidget* table() const { return table_; }
  [[nodiscard]] charts::CompressChart* chart() const { return chart_; }
  [[nodiscard]] QLabel* note() const { return note_; }

 private:
  void redraw();
  QComboBox* metric_;
  QLabel* note_;
  QTableWidget* table_;
  charts::CompressChart* chart_;
  std::optional<model::CompressionStudy> study_;
};

}  // namespace gpuplan::gui
