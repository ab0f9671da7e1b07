#include "timeline_chart.hpp"

#include <algorithm>
#include <cmath>

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include "gpuplan/core/format.hpp"

namespace gpuplan::gui::charts {

using model::SpanKind;

QColor span_colour(SpanKind k) {
  switch (k) {
    case SpanKind::forward: return QColor("#4e79a7");
    case SpanKind::backward: return QColor("#f28e2b");
    case SpanKind::recompute: return QColor("#edc948");
    case SpanKind::embedding: return QColor("#76b7b2");
    case SpanKind::head_loss: return QColor("#59a14f");
    case SpanKind::extra: return QColor("#9c755f");
    case SpanKind::comm_exposed: return QColor("#e15759");
    case SpanKind::comm_tp: return QColor("#b07aa1");
    case SpanKind::comm_cp: return QColor("#ff9da7");
    case SpanKind::comm_ep: return QColor("#d37295");
    case SpanKind::comm_pp: return QColor("#8cd17d");
    case SpanKind::dp_reduce: return QColor("#499894");
    case SpanKind::dp_gather: return QColor("#86bcb6");
    case SpanKind::dp_wait: return QColor("#e15759");
    case SpanKind::sm_contention: return QColor("#fabfd2");
    case SpanKind::dp_copy: return QColor("#bab0ac");
    case SpanKind::bubble: return QColor("#eeeeee");
    case SpanKind::optimizer: return QColor("#79706e");
    case SpanKind::offload: return QColor("#d4a6c8");
    case SpanKind::allowance: return QColor("#cccccc");
    case SpanKind::gemm: return QColor("#4e79a7");
    case SpanKind::attention: return QColor("#f28e2b");
    case SpanKind::elementwise: return QColor("#edc948");
    case SpanKind::sampling: return QColor("#59a14f");
    case SpanKind::host: return QColor("#9c755f");
    case SpanKind::launch_gap: return QColor("#eeeeee");
    case SpanKind::data_load: return QColor("#bcbd22");
    case SpanKind::data_wait: return QColor("#d62728");
  }
  return Qt::black;
}

namespace {
constexpr double kLeft = 130, kRight = 12, kTop = 10, kBottom = 28;

QString time_text(double s) { return QString::fromStdString(units::format(units::seconds(s))); }

/// Tick positions over [t0, t1]: a 1-2-5 step giving about 8 ticks.
std::vector<double> ticks(double t0, double t1) {
  std::vector<double> out;
  const double span = t1 - t0;
  if (!(span > 0)) return out;
  const double raw = span / 8, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (mag * m >= raw) {
      step = mag * m;
      break;
    }
  for (double t = std::ceil(t0 / step) * step; t <= t1 + 1e-15; t += step) out.push_back(t);
  return out;
}
}  // namespace

// ------------------------------------------------------------------------------------------------- step timeline

TimelineChart::TimelineChart(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(160);
}

void TimelineChart::setTimeline(const model::StepTimeline& t) {
  tl_ = t;
  view_ = {0, std::max(1e-9, tl_.end.raw())};
  update();
}

QRectF TimelineChart::plot() const {
  return QRectF(kLeft, kTop, std::max(10.0, width() - kLeft - kRight), std::max(10.0, height() - kTop - kBottom));
}
double TimelineChart::xOf(double t) const {
  const QRectF p = plot();
  return p.left() + (t - view_.t0) / (view_.t1 - view_.t0) * p.width();
}
double TimelineChart::tOf(double x) const {
  const QRectF p = plot();
  return view_.t0 + (x - p.left()) / p.width() * (view_.t1 - view_.t0);
}

void TimelineChart::zoom(double factor, double x) {
  const double end = std::max(1e-9, tl_.end.raw());
  const double at = tOf(x);
  double w = (view_.t1 - view_.t0) / factor;
  w = std::clamp(w, end * 1e-5, end);
  double t0 = at - (at - view_.t0) / (view_.t1 - view_.t0) * w;
  t0 = std::clamp(t0, 0.0, end - w);
  view_ = {t0, t0 + w};
  update();
}

const model::TimelineSpan* TimelineChart::spanAt(QPointF pos) const {
  if (!tl_.ok || tl_.lanes.empty() || !plot().contains(pos)) return nullptr;
  const QRectF p = plot();
  const double row = p.height() / double(tl_.lanes.size());
  const int lane = int((pos.y() - p.top()) / row);
  const double t = tOf(pos.x());
  const double slack = (view_.t1 - view_.t0) / p.width();  // one pixel: thin spans stay reachable
  const model::TimelineSpan* best = nullptr;
  for (const auto& s : tl_.spans)
    if (s.lane == lane && s.start.raw() - slack <= t && t <= s.end.raw() + slack)
      if (best == nullptr || s.duration() < best->duration()) best = &s;
  return best;
}

void TimelineChart::paintEvent(QPaintEvent*) {
  QPainter g(this);
  g.fillRect(rect(), palette().base());
  if (!tl_.ok) {
    g.drawText(rect(), Qt::AlignCenter,
               tl_.error.empty() ? tr("No timeline: the layout is not valid") : QString::fromStdString(tl_.error));
    return;
  }
  const QRectF p = plot();
  const double row = p.height() / double(std::max<std::size_t>(1, tl_.lanes.size()));
  g.setPen(palette().text().color());
  for (std::size_t i = 0; i < tl_.lanes.size(); ++i)
    g.drawText(QRectF(0, p.top() + row * double(i), kLeft - 6, row), Qt::AlignRight | Qt::AlignVCenter,
               QString::fromStdString(tl_.lanes[i].name));
  g.setPen(QColor("#dddddd"));
  for (double t : ticks(view_.t0, view_.t1)) {
    g.drawLine(QPointF(xOf(t), p.top()), QPointF(xOf(t), p.bottom()));
  }
  g.setClipRect(p);
  for (const auto& s : tl_.spans) {
    if (s.end.raw() < view_.t0 || s.start.raw() > view_.t1) continue;
    const double x0 = xOf(s.start.raw()), x1 = xOf(s.end.raw());
    const QRectF r(x0, p.top() + row * double(s.lane) + 2, std::max(0.8, x1 - x0), row - 4);
    g.fillRect(r, span_colour(s.kind));
    if (r.width() > 28 && s.kind != SpanKind::bubble) {
      g.setPen(Qt::white);
      g.drawText(r, Qt::AlignCenter, QString::fromStdString(s.label));
    }
  }
  g.setClipping(false);
  g.setPen(palette().text().color());
  for (double t : ticks(view_.t0, view_.t1))
    g.drawText(QRectF(xOf(t) - 40, p.bottom() + 4, 80, 18), Qt::AlignHCenter | Qt::AlignTop, time_text(t));
}

void TimelineChart::wheelEvent(QWheelEvent* e) {
  zoom(e->angleDelta().y() > 0 ? 1.25 : 0.8, e->position().x());
  e->accept();
}
void TimelineChart::mousePressEvent(QMouseEvent* e) {
  drag_x_ = e->position().x();
  drag_t0_ = view_.t0;
}
void TimelineChart::mouseMoveEvent(QMouseEvent* e) {
  if (drag_x_ < 0 || !(e->buttons() & Qt::LeftButton)) {
    drag_x_ = -1;
    return;
  }
  const double w = view_.t1 - view_.t0, end = std::max(1e-9, tl_.end.raw());
  double t0 = drag_t0_ - (e->position().x() - drag_x_) / plot().width() * w;
  t0 = std::clamp(t0, 0.0, std::max(0.0, end - w));
  view_ = {t0, t0 + w};
  update();
}
void TimelineChart::mouseDoubleClickEvent(QMouseEvent*) {
  view_ = {0, std::max(1e-9, tl_.end.raw())};
  update();
}

bool TimelineChart::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* h = static_cast<QHelpEvent*>(e);
    if (const auto* s = spanAt(h->pos())) {
      QToolTip::showText(h->globalPos(),
                         QStringLiteral("<b>%1</b> %2 → %3 (%4)<br>%5")
                             .arg(QString::fromStdString(s->label).toHtmlEscaped(), time_text(s->start.raw()),
                                  time_text(s->end.raw()), time_text(s->duration().raw()),
                                  QString::fromStdString(s->detail).toHtmlEscaped()),
                         this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(e);
}

// ----------------------------------------------------------------------------------------------- memory timeline

MemoryTimelineChart::MemoryTimelineChart(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(140);
}

void MemoryTimelineChart::setTimeline(const model::MemoryTimeline& m) {
  mt_ = m;
  t_end_ = 1e-9;
  lo_ = 1e300;
  hi_ = 0;
  for (const auto& s : mt_.stages)
    for (const auto& x : s.samples) {
      t_end_ = std::max(t_end_, x.time.raw());
      lo_ = std::min(lo_, x.allocated.raw());
      hi_ = std::max(hi_, x.allocated.raw());
    }
  if (hi_ <= lo_) {
    lo_ = 0;
    hi_ = std::max(1.0, hi_);
  }
  const double pad = (hi_ - lo_) * 0.05;
  lo_ = std::max(0.0, lo_ - pad);
  hi_ += pad;
  update();
}

QRectF MemoryTimelineChart::plot() const {
  return QRectF(kLeft, kTop, std::max(10.0, width() - kLeft - kRight), std::max(10.0, height() - kTop - kBottom));
}

const model::MemorySample* MemoryTimelineChart::sampleAt(QPointF pos, int* stage) const {
  const QRectF p = plot();
  if (!mt_.ok || !p.contains(pos)) return nullptr;
  const double t = (pos.x() - p.left()) / p.width() * t_end_;
  const double bytes = lo_ + (p.bottom() - pos.y()) / p.height() * (hi_ - lo_);
  const model::MemorySample* best = nullptr;
  double dist = 1e300;
  for (std::size_t i = 0; i < mt_.stages.size(); ++i) {
    const auto& ss = mt_.stages[i].samples;
    // The sample in force at time t: the last one at or before it.
    auto it = std::upper_bound(ss.begin(), ss.end(), t,
                               [](double v, const model::MemorySample& x) { return v < x.time.raw(); });
    if (it == ss.begin()) continue;
    const auto& x = *(it - 1);
    const double d = std::fabs(x.allocated.raw() - bytes);
    if (d < dist) {
      dist = d;
      best = &x;
      if (stage != nullptr) *stage = mt_.stages[i].stage;
    }
  }
  return best;
}

void MemoryTimelineChart::paintEvent(QPaintEvent*) {
  QPainter g(this);
  g.fillRect(rect(), palette().base());
  if (!mt_.ok) {
    g.drawText(rect(), Qt::AlignCenter,
               mt_.error.empty() ? tr("No memory timeline: the layout is not valid") : QString::fromStdString(mt_.error));
    return;
  }
  const QRectF p = plot();
  auto X = [&](double t) { return p.left() + t / t_end_ * p.width(); };
  auto Y = [&](double b) { return p.bottom() - (b - lo_) / (hi_ - lo_) * p.height(); };
  g.setPen(QColor("#dddddd"));
  g.drawRect(p);
  g.setPen(palette().text().color());
  for (int i = 0; i <= 4; ++i) {
    const double b = lo_ + (hi_ - lo_) * i / 4.0;
    g.drawText(QRectF(0, Y(b) - 9, kLeft - 6, 18), Qt::AlignRight | Qt::AlignVCenter,
               QString::fromStdString(units::format(units::bytes(b), units::BytePrefix::binary)));
  }
  for (double t : ticks(0, t_end_))
    g.drawText(QRectF(X(t) - 40, p.bottom() + 4, 80, 18), Qt::AlignHCenter | Qt::AlignTop, time_text(t));
  static const char* kColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#e15759"};
  g.setRenderHint(QPainter::Antialiasing, true);
  for (std::size_t i = 0; i < mt_.stages.size(); ++i) {
    const auto& s = mt_.stages[i];
    if (s.samples.empty()) continue;
    QPolygonF line;
    double prev = s.samples.front().allocated.raw();
    for (const auto& x : s.samples) {
      line << QPointF(X(x.time.raw()), Y(prev)) << QPointF(X(x.time.raw()), Y(x.allocated.raw()));
      prev = x.allocated.raw();
    }
    const QColor c(kColours[i % 8]);
    g.setPen(QPen(c, 1.5));
    g.drawPolyline(line);
    g.setBrush(c);
    g.drawEllipse(QPointF(X(s.peak_time.raw()), Y(s.peak.raw())), 3.5, 3.5);
    g.drawText(QPointF(p.left() + 8 + 70.0 * double(i), p.top() + 14), tr("stage %1").arg(s.stage));
  }
}

bool MemoryTimelineChart::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* h = static_cast<QHelpEvent*>(e);
    int stage = 0;
    if (const auto* x = sampleAt(h->pos(), &stage)) {
      QToolTip::showText(h->globalPos(),
                         tr("<b>stage %1</b> at %2: %3 allocated (activations %4, gradients %5)<br>%6")
                             .arg(stage)
                             .arg(time_text(x->time.raw()),
                                  QString::fromStdString(units::format(x->allocated, units::BytePrefix::binary)),
                                  QString::fromStdString(units::format(x->activations, units::BytePrefix::binary)),
                                  QString::fromStdString(units::format(x->gradients, units::BytePrefix::binary)),
                                  QString::fromStdString(x->event).toHtmlEscaped()),
                         this);
    } else {
      QToolTip::hideText();
    }
    return true;
  }
  return QWidget::event(e);
}

}  // namespace gpuplan::gui::charts
