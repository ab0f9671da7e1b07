#pragma once
// Serving: a model on a GPU at a TP size; TTFT and ITL vs batch, KV cache and concurrency vs context, and the
// operating point at a chosen batch (continuous batching steady state); the capacity planner (GPUs and $/Mtok vs
// request rate within an SLA).
#include <memory>

#include <QWidget>

#include "app_data.hpp"
#include "serving_job.hpp"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;
class QTabWidget;

namespace gpuplan::gui {
namespace charts {
class CapacityCharts;
class ServingCharts;
}

class ServingPage : public QWidget {
  Q_OBJECT
 public:
  explicit ServingPage(std::shared_ptr<const AppData> data, QWidget* parent = nullptr);
  [[nodiscard]] ServingRequest request() const;
  void setResult(const ServingResult& r);
  /// Lists a model file (an imported Hugging Face config.json, or a gpuplan model JSON) in the model list; the
  /// request then names its path, which app::resolve_serving reads as `gpuplan serve --model PATH` does.
  void addModel(const QString& path, const QString& label);
  /// Follows the training panel's model and GPU until the user picks their own here.
  void followTraining(const QString& model_id, const QString& gpu_id);
  [[nodiscard]] charts::ServingCharts* charts() const { return charts_; }
  [[nodiscard]] charts::CapacityCharts* capacityCharts() const { return capacity_; }
  /// Inner tabs: 0 = latency and KV, 1 = capacity.
  [[nodiscard]] QTabWidget* views() const { return views_; }
  [[nodiscard]] QDoubleSpinBox* rateSpin() const { return rate_; }
  [[nodiscard]] QComboBox* gpuCombo() const { return gpu_; }
  [[nodiscard]] QComboBox* modelCombo() const { return model_; }
  [[nodiscard]] QLabel* summary() const { return summary_; }
 signals:
  void changed();

  void derivationRequested(const QString& id);

 private:
  static QString plannerLine(const ServingResult& r);
  std::shared_ptr<const AppData> data_;
  QComboBox *model_, *gpu_, *weights_, *kv_;
  QSpinBox *tp_, *prompt_, *output_, *batch_;
  QDoubleSpinBox *rate_, *ttft_, *itl_;
  QLabel* summary_;
  QLabel* status_;
  charts::ServingCharts* charts_;
  charts::CapacityCharts* capacity_;
  QTabWidget* views_;
  bool own_choice_ = false;
  bool following_ = false;
};

}  // namespace gpuplan::gui
