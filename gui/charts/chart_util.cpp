#include "chart_util.hpp"

#include <cstring>

#include <QAction>
#include <QCursor>
#include <QFileDialog>
#include <QFileInfo>
#include <QImage>
#include <QSvgGenerator>
#include <QFont>
#include <QLegend>
#include <QLegendMarker>
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
  // Right click: export this chart.
  v->setContextMenuPolicy(Qt::ActionsContextMenu);
  for (const char* kind : {"png", "svg"}) {
    auto* a = new QAction(QObject::tr("Export chart as %1…").arg(QString(kind).toUpper()), v);
    QObject::connect(a, &QAction::triggered, v, [v, kind] {
      const QString ext = kind;
      const QString path = QFileDialog::getSaveFileName(v, QObject::tr("Export chart"), "chart." + ext,
                                                        ext.toUpper() + " (*." + ext + ")");
      if (!path.isEmpty()) export_chart(v, path);
    });
    v->addAction(a);
  }
  return v;
}

void line_legend_markers(QChart* chart) {
  for (QLegendMarker* m : chart->legend()->markers()) {
    const auto t = m->series()->type();
    if (t == QAbstractSeries::SeriesTypeLine || t == QAbstractSeries::SeriesTypeSpline)
      m->setShape(QLegend::MarkerShapeFromSeries);
  }
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

bool export_chart(QChartView* view, const QString& path, QString* error) {
  const QSize size = view->size().isEmpty() ? QSize(900, 600) : view->size();
  if (view->size().isEmpty()) view->resize(size);
  bool ok = false;
  if (QFileInfo(path).suffix().compare("svg", Qt::CaseInsensitive) == 0) {
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(size);
    svg.setViewBox(QRect(QPoint(0, 0), size));
    svg.setTitle(view->chart()->title());
    svg.setDescription(QObject::tr("gpuplan-gui chart"));
    QPainter p;
    ok = p.begin(&svg);
    if (ok) {
      view->render(&p, QRectF(QPointF(0, 0), QSizeF(size)), view->viewport()->rect());
      ok = p.end();
    }
    ok = ok && QFileInfo(path).size() > 0;
  } else {
    QImage img(size * 2, QImage::Format_ARGB32);
    img.setDevicePixelRatio(2.0);
    img.fill(Qt::white);
    QPainter p(&img);
    p.setRenderHint(QPainter::Antialiasing);
    view->render(&p, QRectF(QPointF(0, 0), QSizeF(size)), view->viewport()->rect());
    p.end();
    ok = img.save(path, "PNG");
  }
  if (!ok && error != nullptr) *error = QObject::tr("cannot write %1").arg(path);
  return ok;
}

}  // namespace gpuplan::gui::charts
