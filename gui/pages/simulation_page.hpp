#pragma once
// Serving simulation (issue #28, deliverable 5): the serving page's replica simulated request by request under a live
// arrival rate. Moving the rate slider (or any control) re-runs model::simulate_serving on this page's own
// JobController (worker thread, latest wins); the page shows the latency table (TTFT, ITL, TPOT, E2E percentiles),
// their distributions with p50/p90/p99 marked, throughput, KV utilisation, preemptions and the time series.
// Shown as an inner tab of the serving page; it simulates only while on screen (or when run() is called).
#include <memory>

#include <QElapsedTimer>
#include <QWidget>

#include "app_data.hpp"
#include "simulation_job.hpp"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSlider;
class QSpinBox;
class QTableView;

namespace gpuplan::gui {
class JobController;
class SimStatsModel;
namespace charts {
class SimulationCharts;
}

class SimulationPage : public QWidget {
  Q_OBJECT
 public:
  /// The rate slider is logarithmic: position p is 10^(p/kStepsPerDecade) × kMinRate requests/s.
  static constexpr double kMinRate = 0.01, kMaxRate = 1000;
  static constexpr int kStepsPerDecade = 100;

  explicit SimulationPage(std::shared_ptr<const AppData> data, QWidget* parent = nullptr);

  /// The replica to simulate (the serving page's request); when its model, GPU, TP, formats, lengths or calibration
  /// changed, re-simulates now when on screen, else when next shown.
  void setServing(const ServingRequest& r);
  [[nodiscard]] SimulationRequest request() const;
  /// Submits the current request to the job controller (latest wins).
  void run();
  /// No simulation running or waiting to run.
  [[nodiscard]] bool idle() const;
  [[nodiscard]] const SimulationResult& lastResult() const { return last_; }
  [[nodiscard]] bool hasResult() const { return has_result_; }

  [[nodiscard]] static double rateAt(int slider_position);
  [[nodiscard]] static int positionOf(double rate);

  [[nodiscard]] QSlider* rateSlider() const { return rate_slider_; }
  [[nodiscard]] QDoubleSpinBox* rateSpin() const { return rate_; }
  [[nodiscard]] QComboBox* arrivalCombo() const { return arrival_; }
  [[nodiscard]] QDoubleSpinBox* cvSpin() const { return cv_; }
  [[nodiscard]] QSpinBox* requestsSpin() const { return requests_; }
  [[nodiscard]] QSpinBox* seedSpin() const { return seed_; }
  [[nodiscard]] QComboBox* batchingCombo() const { return batching_; }
  [[nodiscard]] QSpinBox* staticBatchSpin() const { return static_batch_; }
  [[nodiscard]] QDoubleSpinBox* timeoutSpin() const { return timeout_; }
  [[nodiscard]] SimStatsModel* statsModel() const { return stats_; }
  [[nodiscard]] QTableView* statsView() const { return table_; }
  [[nodiscard]] charts::SimulationCharts* charts() const { return charts_; }
  [[nodiscard]] QLabel* summary() const { return summary_; }
  [[nodiscard]] JobController* jobs() const { return jobs_; }

 signals:
  /// A result reached the page (after the views were updated).
  void simulated();

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void changed();
  void setResult(SimulationResult& r);
  std::shared_ptr<const AppData> data_;
  ServingRequest serving_;
  JobController* jobs_;
  QSlider* rate_slider_;
  QDoubleSpinBox *rate_, *cv_;
  QComboBox *arrival_, *batching_;
  QSpinBox *requests_, *seed_, *static_batch_;
  QDoubleSpinBox* timeout_;
  QLabel *summary_, *status_;
  SimStatsModel* stats_;
  QTableView* table_;
  charts::SimulationCharts* charts_;
  SimulationResult last_;
  bool has_result_ = false;
  bool has_serving_ = false;
  bool stale_ = true;  ///< the request changed since the last submit
  QElapsedTimer clock_;
};

}  // namespace gpuplan::gui
