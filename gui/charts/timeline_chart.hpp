#pragma once
// The step timeline as a zoomable Gantt chart (a row per pipeline stage and stream, one box per span of
// model::StepTimeline, coloured by kind, its model terms in the tooltip) and the memory timeline (allocated bytes over
// the step per stage, the peak marked, the event under the cursor in the tooltip). Painted directly (QPainter): a
// step holds thousands of spans. Wheel zooms around the cursor, dragging pans, a double click resets.
#include <QWidget>

#include "gpuplan/model/timeline.hpp"

namespace gpuplan::gui::charts {

/// Horizontal zoom and pan over [0, end] seconds shared by both charts.
struct TimeView {
  double t0 = 0, t1 = 1;  ///< the visible window, seconds
};

class TimelineChart : public QWidget {
  Q_OBJECT
 public:
  explicit TimelineChart(QWidget* parent = nullptr);
  void setTimeline(const model::StepTimeline& t);
  [[nodiscard]] const model::StepTimeline& timeline() const { return tl_; }
  /// The span under a widget position, or nullptr (the hover text's source; tests).
  [[nodiscard]] const model::TimelineSpan* spanAt(QPointF pos) const;
  /// Zooms by `factor` (> 1 in) around the time at widget x `x`.
  void zoom(double factor, double x);
  [[nodiscard]] TimeView view() const { return view_; }
  [[nodiscard]] QSize sizeHint() const override { return {900, 360}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mouseDoubleClickEvent(QMouseEvent*) override;
  bool event(QEvent*) override;

 private:
  [[nodiscard]] QRectF plot() const;
  [[nodiscard]] double xOf(double t) const;
  [[nodiscard]] double tOf(double x) const;
  model::StepTimeline tl_;
  TimeView view_;
  double drag_x_ = -1, drag_t0_ = 0;
};

class MemoryTimelineChart : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryTimelineChart(QWidget* parent = nullptr);
  void setTimeline(const model::MemoryTimeline& m);
  [[nodiscard]] const model::MemoryTimeline& timeline() const { return mt_; }
  /// The sample shown for a widget position: the stage nearest the cursor's height at that time; nullptr outside.
  [[nodiscard]] const model::MemorySample* sampleAt(QPointF pos, int* stage = nullptr) const;
  [[nodiscard]] QSize sizeHint() const override { return {900, 300}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  bool event(QEvent*) override;

 private:
  [[nodiscard]] QRectF plot() const;
  model::MemoryTimeline mt_;
  double t_end_ = 1, lo_ = 0, hi_ = 1;
};

/// The colour of a span kind (shared with the legend).
QColor span_colour(model::SpanKind k);

}  // namespace gpuplan::gui::charts
