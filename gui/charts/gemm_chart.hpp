#pragma once
// GEMM shape what-ifs (issue #27 d6): the time of one GEMM as one of its dimensions sweeps a range (app/gemm_shapes.hpp)
// — the alignment classes' cliffs over K or N, the tile staircase over M — with the chosen shape marked; hovering a
// point shows its shape, time, achieved TFLOP/s and bound.
#include <vector>

#include <QString>
#include <QWidget>

#include "gpuplan/app/gemm_shapes.hpp"

class QChart;
class QChartView;

namespace gpuplan::gui::charts {

class GemmChart : public QWidget {
  Q_OBJECT
 public:
  explicit GemmChart(QWidget* parent = nullptr);
  /// `axis`: 0 = M, 1 = N, 2 = K (the dimension that varies); `chosen`: the marked point's index (-1: none).
  void setSweep(const std::vector<app::GemmShapePoint>& pts, int axis, int chosen, const QString& title);
  /// The times drawn (µs, one per point, in order) and the swept values (tests).
  [[nodiscard]] const std::vector<double>& times_us() const { return times_us_; }
  [[nodiscard]] const std::vector<double>& xs() const { return xs_; }
  [[nodiscard]] QChartView* view() const { return view_; }

 private:
  QChart* chart_;
  QChartView* view_;
  std::vector<double> times_us_, xs_;
};

}  // namespace gpuplan::gui::charts
