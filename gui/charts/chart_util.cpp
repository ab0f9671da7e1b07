#include "chart_util.hpp"

#include <cstring>

#include <QCursor>
#include <QFont>
#include <QLegend>
#include <QPainter>
#include <QToolTip>

namespace gpuplan::gui::charts {

QChartView* make_view(QChart* chart, const QString& title, QWidget* parent) {
  chart->setTitle(title);
  QFont tf = chart->titleFont();
  tf.setPointSizeF(tf.pointSizeF() + 1.0);
  tf.setBold(true);
  chart->setTitleFont(tf);
  chart->legend()->setAlignment(Qt::AlignBottom);
  chart->setAnimationOptions(QChart::NoAnimation);  // results update live; animation would lag the sliders
  chart->setMargins(QMargins(4, 4, 4, 4));
  auto* v = new QChartView(chart, parent);
  v->setRenderHint(QPainter::Antialiasing);
  v->setMinimumSize(320, 240);
  return v;
}

QColor series_colour(int i) {
  static const QColor c[] = {QColor(0x4e79a7), QColor(0xf28e2b), QColor(0xe15759), QColor(0x76b7b2),
                             QColor(0x59a14f), QColor(0xedc948), QColor(0xb07aa1), QColor(0xff9da7),
                             QColor(0x9c755f), QColor(0xbab0ac), QColor(0x1f77b4), QColor(0x8c564b)};
  return c[std::size_t(i) % (sizeof(c) / sizeof(c[0]))];
}

QString short_gpu_name(const std::string& name) {
  QString s = QString::fromStdString(name);
  for (const char* p : {"NVIDIA ", "AMD Instinct ", "AMD "})
    if (s.startsWith(p)) s = s.mid(int(strlen(p)));
  if (const auto paren = s.indexOf(" ("); paren > 0) s = s.left(paren);  // "B200 (HGX/DGX B200, per GPU)"
  return s;
}

void show_tip(const QString& text) { QToolTip::showText(QCursor::pos(), text); }

}  // namespace gpuplan::gui::charts
