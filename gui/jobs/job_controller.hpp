#pragma once
// Runs model evaluations off the UI thread, latest request wins: every submit() bumps a generation counter; a job
// whose generation is no longer the latest when it starts is skipped, and a result that comes back after a newer
// submit() is dropped. Results are delivered on the controller's (the UI) thread, so views never see a stale answer
// and the UI never waits for the model.
#include <atomic>
#include <functional>
#include <memory>

#include <QObject>
#include <QThreadPool>

namespace gpuplan::gui {

class JobController : public QObject {
  Q_OBJECT
 public:
  explicit JobController(QObject* parent = nullptr);
  ~JobController() override;
  JobController(const JobController&) = delete;
  JobController& operator=(const JobController&) = delete;

  /// Computes `compute()` on a worker thread and hands the value to `deliver` on this object's thread, unless a
  /// newer request was submitted meanwhile. Returns the request's generation.
  template <class R>
  quint64 submit(std::function<R()> compute, std::function<void(R&)> deliver) {
    auto result = std::make_shared<R>();
    return submit_erased([compute = std::move(compute), result] { *result = compute(); },
                         [deliver = std::move(deliver), result] { deliver(*result); });
  }

  [[nodiscard]] quint64 latest() const { return latest_.load(); }
  [[nodiscard]] bool busy() const { return pending_ > 0; }
  /// Blocks until every submitted job has run (tests, screenshots); queued deliveries still need the event loop.
  void wait_for_workers();

 signals:
  void busyChanged(bool busy);
  void delivered(quint64 generation);
  void dropped(quint64 generation);

 private:
  quint64 submit_erased(std::function<void()> compute, std::function<void()> deliver);

  QThreadPool pool_;
  std::atomic<quint64> latest_{0};
  int pending_ = 0;  ///< submitted and not yet delivered or dropped (UI thread only)
};

}  // namespace gpuplan::gui
