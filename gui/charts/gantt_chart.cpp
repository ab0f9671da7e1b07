#include "gantt_chart.hpp"

#include <algorithm>
#include <cmath>

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>

namespace gpuplan::gui::charts {
namespace {
constexpr int kLabelWidth = 170, kRowHeight = 26, kTop = 28, kBottom = 36, kRight = 16;

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `target` ticks over `span`.
double tick_step(double span, int target) {
  const double raw = span / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}
}  // namespace

GanttChart::GanttChart(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void GanttChart::setData(QVector<GanttBar> bars, double deadline_ms, double mean_ms, double p99_ms) {
  bars_ = std::move(bars);
  deadline_ms_ = deadline_ms;
  mean_ms_ = mean_ms;
  p99_ms_ = p99_ms;
  updateGeometry();
  update();
}

void GanttChart::clear() { setData({}, 0, 0, 0); }

double GanttChart::axisEndMs() const {
  double end = std::max({deadline_ms_, p99_ms_, mean_ms_});
  for (const auto& b : bars_) end = std::max(end, b.finish_ms);
  return end > 0 ? end * 1.05 : 1.0;
}

QRectF GanttChart::plotArea() const {
  return QRectF(kLabelWidth, kTop, std::max(10, width() - kLabelWidth - kRight), std::max(10, height() - kTop - kBottom));
}

double GanttChart::xOf(double ms) const {
  const QRectF a = plotArea();
  return a.left() + a.width() * ms / axisEndMs();
}

QRectF GanttChart::barRect(int i) const {
  const auto& b = bars_[i];
  const QRectF a = plotArea();
  const double row = std::min<double>(kRowHeight, a.height() / static_cast<double>(std::max<qsizetype>(1, bars_.size())));
  const double x0 = xOf(b.start_ms), x1 = std::max(xOf(b.finish_ms), x0 + 1.0);
  return QRectF(x0, a.top() + i * row + 3, x1 - x0, row - 6);
}

QColor GanttChart::engineColour(const QString& engine) {
  if (engine.startsWith("dla")) return QColor(0x2e, 0x8b, 0x57);  // green
  if (engine.startsWith("cpu")) return QColor(0xe0, 0x8a, 0x1e);  // orange
  return QColor(0x3a, 0x6e, 0xc8);                                // GPU: blue
}

QSize GanttChart::sizeHint() const { return {900, kTop + kBottom + kRowHeight * int(std::max<qsizetype>(4, bars_.size()))}; }
QSize GanttChart::minimumSizeHint() const { return {400, kTop + kBottom + 12 * int(std::max<qsizetype>(2, bars_.size()))}; }

void GanttChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  p.fillRect(rect(), palette().base());
  const QRectF a = plotArea();
  const QFontMetrics fm(font());
  if (bars_.isEmpty()) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter, tr("No schedule"));
    return;
  }
  // Time axis with ticks and a light grid.
  const double end = axisEndMs();
  const double step = tick_step(end, std::max(2, int(a.width() / 90)));
  p.setPen(palette().color(QPalette::Text));
  p.drawLine(QPointF(a.left(), a.bottom()), QPointF(a.right(), a.bottom()));
  for (double t = 0; t <= end + 1e-9; t += step) {
    const double x = xOf(t);
    p.setPen(QColor(0xdd, 0xdd, 0xdd));
    p.drawLine(QPointF(x, a.top()), QPointF(x, a.bottom()));
    p.setPen(palette().color(QPalette::Text));
    p.drawLine(QPointF(x, a.bottom()), QPointF(x, a.bottom() + 4));
    const QString label = QString::number(t, 'g', 4);
    p.drawText(QPointF(x - fm.horizontalAdvance(label) / 2.0, a.bottom() + 4 + fm.ascent()), label);
  }
  const QString unit = tr("time since the frame's sensor data, ms");
  p.drawText(QPointF(a.center().x() - fm.horizontalAdvance(unit) / 2.0, height() - 4), unit);

  // Bars and their labels.
  for (int i = 0; i < bars_.size(); ++i) {
    const auto& b = bars_[i];
    const QRectF r = barRect(i);
    const QString label = QString("%1  [%2]").arg(b.id, b.engine);
    p.setPen(palette().color(QPalette::Text));
    p.drawText(QRectF(4, r.top(), kLabelWidth - 8, r.height()), Qt::AlignVCenter | Qt::AlignLeft,
               fm.elidedText(label, Qt::ElideMiddle, kLabelWidth - 8));
    p.setBrush(engineColour(b.engine));
    p.setPen(b.critical ? QPen(QColor(0xc0, 0x10, 0x20), 2.5) : QPen(engineColour(b.engine).darker(130), 1));
    p.drawRect(r);
    const QString dur = QString::number(b.finish_ms - b.start_ms, 'f', 2);
    if (fm.horizontalAdvance(dur) + 6 < r.width()) {
      p.setPen(Qt::white);
      p.drawText(r, Qt::AlignCenter, dur);
    }
  }

  // Lines: mean latency (frame 0), P99, deadline.
  auto vline = [&](double ms, const QColor& c, Qt::PenStyle style, const QString& text) {
    if (ms <= 0) return;
    const double x = xOf(ms);
    p.setPen(QPen(c, 2, style));
    p.drawLine(QPointF(x, a.top() - 4), QPointF(x, a.bottom()));
    if (text.isEmpty()) return;
    p.setPen(c);
    const double w = fm.horizontalAdvance(text);
    const double tx = std::clamp(x - w / 2, a.left(), std::max(a.left(), a.right() - w));
    p.drawText(QPointF(tx, 2 + fm.ascent()), text);
  };
  // Only the deadline is labelled at its line (drawn last, so it stays readable); the legend names the other two.
  vline(mean_ms_, QColor(0x44, 0x44, 0x44), Qt::DotLine, QString());
  vline(p99_ms_, QColor(0x80, 0x30, 0xa0), Qt::DashDotLine, QString());
  vline(deadline_ms_, QColor(0xc0, 0x10, 0x20), Qt::DashLine, tr("deadline %1 ms").arg(deadline_ms_, 0, 'g', 4));
  // Legend of the other two lines, top right.
  const QString legend = tr("···· mean latency %1 ms   -·-· P99 %2 ms").arg(mean_ms_, 0, 'f', 1).arg(p99_ms_, 0, 'f', 1);
  p.setPen(palette().color(QPalette::Text));
  p.drawText(QPointF(4, 2 + fm.ascent()), fm.elidedText(legend, Qt::ElideRight, kLabelWidth + 140));
}

bool GanttChart::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    const auto* h = static_cast<QHelpEvent*>(e);
    for (int i = 0; i < bars_.size(); ++i)
      if (barRect(i).adjusted(0, -2, 0, 2).contains(h->pos())) {
        const auto& b = bars_[i];
        QToolTip::showText(h->globalPos(),
                           tr("<b>%1</b> on %2<br>%3<br>%4 → %5 ms (%6 ms)%7")
                               .arg(b.id.toHtmlEscaped(), b.engine.toHtmlEscaped(), b.what.toHtmlEscaped())
                               .arg(b.start_ms, 0, 'f', 2)
                               .arg(b.finish_ms, 0, 'f', 2)
                               .arg(b.finish_ms - b.start_ms, 0, 'f', 2)
                               .arg(b.critical ? tr("<br><span style='color:#c01020'>on the critical path</span>") : QString()),
                           this);
        return true;
      }
    QToolTip::hideText();
    e->ignore();
    return true;
  }
  return QWidget::event(e);
}

}  // namespace gpuplan::gui::charts
