#include "job_controller.hpp"

#include <QMetaObject>
#include <QRunnable>

namespace gpuplan::gui {

JobController::JobController(QObject* parent) : QObject(parent) {
  // One worker: requests run in order, and the skip below makes a burst of edits cost one evaluation, not N.
  pool_.setMaxThreadCount(1);
}

JobController::~JobController() { pool_.waitForDone(); }

void JobController::wait_for_workers() { pool_.waitForDone(); }

quint64 JobController::submit_erased(std::function<void()> compute, std::function<void()> deliver) {
  const quint64 gen = ++latest_;
  if (pending_++ == 0) emit busyChanged(true);
  auto finish = [this, gen, deliver = std::move(deliver)](bool ran) {
    const bool current = ran && gen == latest_.load();
    if (current) {
      deliver();
      emit delivered(gen);
    } else {
      emit dropped(gen);
    }
    if (--pending_ == 0) emit busyChanged(false);
  };
  pool_.start([this, gen, compute = std::move(compute), finish = std::move(finish)]() mutable {
    const bool stale = gen != latest_.load();
    if (!stale) compute();
    // Queued to this object's thread; Qt discards it if the controller is gone.
    QMetaObject::invokeMethod(this, [finish = std::move(finish), stale]() mutable { finish(!stale); },
                              Qt::QueuedConnection);
  });
  return gen;
}

}  // namespace gpuplan::gui
