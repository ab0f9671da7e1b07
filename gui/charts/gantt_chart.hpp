#pragma once
// The Gantt chart of a real-time pipeline's frame (issue #25, deliverable 4): one row per stage that ran in frame 0,
// a bar from its start to its finish coloured by engine (GPU, DLA, CPU), the critical path's bars outlined in red, and
// vertical lines for the deadline (red, dashed), the mean end-to-end latency and the Monte-Carlo P99. Painted with
// QPainter (no QtCharts: a Gantt is not an XY series). It draws what it is given: the page fills it from
// app::PipelineResult without arithmetic beyond seconds → milliseconds.
#include <QString>
#include <QVector>
#include <QWidget>

namespace gpuplan::gui::charts {

struct GanttBar {
  QString id, engine, what;
  double start_ms = 0, finish_ms = 0;
  bool critical = false;
};

class GanttChart : public QWidget {
  Q_OBJECT
 public:
  explicit GanttChart(QWidget* parent = nullptr);

  /// Bars in the order given (top to bottom); the lines at `deadline_ms`, `mean_ms` and `p99_ms`.
  void setData(QVector<GanttBar> bars, double deadline_ms, double mean_ms, double p99_ms);
  void clear();

  [[nodiscard]] const QVector<GanttBar>& bars() const { return bars_; }
  [[nodiscard]] double deadlineMs() const { return deadline_ms_; }
  [[nodiscard]] double p99Ms() const { return p99_ms_; }
  /// The time axis' end: the largest of the deadline, P99 and the last finish, plus 5%.
  [[nodiscard]] double axisEndMs() const;
  /// Pixel x of a time on the axis, and the rectangle bar `i` is painted in (for tests and tooltips).
  [[nodiscard]] double xOf(double ms) const;
  [[nodiscard]] QRectF barRect(int i) const;
  /// The fill colour of an engine ("gpu", "dla0", "cpu1", …): by its kind.
  [[nodiscard]] static QColor engineColour(const QString& engine);

  [[nodiscard]] QSize sizeHint() const override;
  [[nodiscard]] QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* e) override;
  bool event(QEvent* e) override;  // tooltips

 private:
  [[nodiscard]] QRectF plotArea() const;
  QVector<GanttBar> bars_;
  double deadline_ms_ = 0, mean_ms_ = 0, p99_ms_ = 0;
};

}  // namespace gpuplan::gui::charts
