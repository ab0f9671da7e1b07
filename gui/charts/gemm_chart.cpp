#include "gemm_chart.hpp"

#include <algorithm>
#include <cmath>

#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>
#include <QVBoxLayout>

#include "chart_util.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui::charts {

GemmChart::GemmChart(QWidget* parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = make_view(chart_, tr("GEMM time"), this);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(view_);
}

void GemmChart::setSweep(const std::vector<app::GemmShapePoint>& pts, int axis, int chosen, const QString& title) {
  chart_->removeAllSeries();
  for (auto* a : chart_->axes()) {
    chart_->removeAxis(a);
    delete a;
  }
  times_us_.clear();
  xs_.clear();
  chart_->setTitle(title);
  if (pts.empty()) return;
  static const char* kAxis[] = {"M", "N", "K"};
  auto* line = new QLineSeries;
  line->setName(tr("time per GEMM"));
  line->setColor(series_colour(0));
  line->setPointsVisible(pts.size() <= 64);
  double ymax = 0, xmin = 0, xmax = 0;
  std::vector<QString> tips;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const auto& p = pts[i];
    const double x = double(axis == 0 ? p.m : axis == 1 ? p.n : p.k);
    const double y = p.cost.time.raw() * 1e6;
    line->append(x, y);
    times_us_.push_back(y);
    xs_.push_back(x);
    ymax = std::max(ymax, y);
    xmin = i == 0 ? x : std::min(xmin, x);
    xmax = i == 0 ? x : std::max(xmax, x);
    tips.push_back(QString("%1×%2×%3: %4, %5 TFLOP/s (%6-bound)")
                       .arg(p.m)
                       .arg(p.n)
                       .arg(p.k)
                       .arg(QString::fromStdString(units::format(p.cost.time)))
                       .arg(p.tflops, 0, 'f', 0)
                       .arg(QString::fromStdString(model::to_string(p.cost.bound))));
  }
  connect(line, &QLineSeries::hovered, this, [tips, xs = xs_](const QPointF& at, bool on) {
    if (!on || xs.empty()) return;
    std::size_t best = 0;
    for (std::size_t i = 1; i < xs.size(); ++i)
      if (std::abs(xs[i] - at.x()) < std::abs(xs[best] - at.x())) best = i;
    show_tip(tips[best]);
  });
  chart_->addSeries(line);
  QScatterSeries* mark = nullptr;
  if (chosen >= 0 && std::size_t(chosen) < pts.size()) {
    mark = new QScatterSeries;
    mark->setName(tr("this shape"));
    mark->setColor(series_colour(3));
    mark->setMarkerSize(10);
    mark->append(xs_[std::size_t(chosen)], times_us_[std::size_t(chosen)]);
    chart_->addSeries(mark);
  }
  auto* x = new QValueAxis;
  x->setTitleText(QString::fromLatin1(kAxis[std::clamp(axis, 0, 2)]));
  x->setRange(xmin, xmax > xmin ? xmax : xmin + 1);
  x->setLabelFormat("%g");
  auto* y = new QValueAxis;
  y->setTitleText(tr("µs per GEMM"));
  y->setRange(0, ymax > 0 ? ymax * 1.08 : 1.0);
  y->applyNiceNumbers();
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  line->attachAxis(x);
  line->attachAxis(y);
  if (mark != nullptr) {
    mark->attachAxis(x);
    mark->attachAxis(y);
  }
  line_legend_markers(chart_);
}

}  // namespace gpuplan::gui::charts
