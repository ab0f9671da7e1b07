#pragma once
// The "GEMM shapes" tab (issue #27 d6): one GEMM on the scenario panel's GPU (its calibration profile where the data
// has one, as `gpuplan roofline`), its time, achieved TFLOP/s and the kernel class of its leading dimensions; the same
// GEMM padded to 16-byte leading dimensions and the speed-up; and its time over a sweep of one dimension (K or N over
// 4088…4104 shows the alignment classes, M over 1…1024 the tile staircase). Every number is app::gemm_shape_sweep's
// (model::gemm_cost); the CLI line that prints the same sweep is shown.
#include <memory>
#include <string>
#include <vector>

#include <QWidget>

#include "app_data.hpp"
#include "gpuplan/app/gemm_shapes.hpp"

class QComboBox;
class QLabel;
class QSpinBox;

namespace gpuplan::gui {
namespace charts {
class GemmChart;
}

class GemmPage : public QWidget {
  Q_OBJECT
 public:
  explicit GemmPage(std::shared_ptr<const AppData> app_data, QWidget* parent = nullptr);
  /// The scenario panel's GPU (an id of the hardware data) and whether its calibration profile is used.
  void setGpu(const std::string& gpu_id, bool calibration);
  /// Recomputes from the controls (called on every change).
  void update();

  [[nodiscard]] QComboBox* dtypeCombo() const { return dtype_; }
  [[nodiscard]] QSpinBox* dim(int i) const { return dims_[i]; }
  [[nodiscard]] QComboBox* axisCombo() const { return axis_; }
  [[nodiscard]] QSpinBox* fromSpin() const { return from_; }
  [[nodiscard]] QSpinBox* toSpin() const { return to_; }
  [[nodiscard]] QSpinBox* stepSpin() const { return step_; }
  [[nodiscard]] QLabel* summary() const { return summary_; }
  [[nodiscard]] charts::GemmChart* chart() const { return chart_; }
  /// The chosen shape and its padded twin as last computed (tests).
  [[nodiscard]] const std::vector<app::GemmShapePoint>& shapes() const { return shapes_; }
  /// `gpuplan roofline` with the sweep shown.
  [[nodiscard]] QString cliLine() const;

 private:
  std::shared_ptr<const AppData> data_;
  std::string gpu_id_ = "h100-sxm5-80gb";
  bool calibration_ = true;
  QComboBox* dtype_;
  QSpinBox* dims_[3];
  QComboBox* axis_;
  QSpinBox* from_;
  QSpinBox* to_;
  QSpinBox* step_;
  QLabel* summary_;
  charts::GemmChart* chart_;
  std::vector<app::GemmShapePoint> shapes_;  ///< [0] the shape, [1] padded
};

}  // namespace gpuplan::gui
