#include "stack_chart.hpp"

#include <algorithm>

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QStackedBarSeries>
#include <QValueAxis>
#include <QVBoxLayout>

#include "chart_util.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui::charts {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

StackChart::StackChart(QWidget* parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = make_view(chart_, tr("Step time per stage of the stack"), this);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(view_);
}

void StackChart::setResult(const StackResult& r) {
  chart_->removeAllSeries();
  for (auto* a : chart_->axes()) {
    chart_->removeAxis(a);
    delete a;
  }
  categories_.clear();
  gpu_ms_.clear();
  wait_ms_.clear();
  if (!r.valid || r.stack.rows.empty()) {
    chart_->setTitle(tr("Optimisation stack — no estimate (see the status above)"));
    return;
  }
  chart_->setTitle(tr("Step time per stage, cumulative speed-up over the baseline"));
  auto* gpu = new QBarSet(tr("GPU step"));
  auto* wait = new QBarSet(tr("waiting for input"));
  gpu->setColor(series_colour(0));
  wait->setColor(series_colour(1));
  double ymax = 0;
  std::vector<QString> tips;
  for (const auto& row : r.stack.rows) {
    const double g = std::min(row.gpu_step.raw(), row.step_time.raw()) * 1e3;
    const double w = std::max(0.0, row.step_time.raw() * 1e3 - g);
    gpu_ms_.push_back(g);
    wait_ms_.push_back(w);
    gpu->append(g);
    wait->append(w);
    ymax = std::max(ymax, g + w);
    categories_ << (row.name == "baseline" ? tr("baseline")
                                           : QString("%1 ×%2").arg(q(row.name)).arg(row.cumulative_speedup, 0, 'f', 2));
    tips.push_back(QString("%1: %2 per step (%3 GPU, %4 input)\n×%5 over the previous, ×%6 over the baseline\npeak %7 "
                           "per GPU%8\n%9")
                       .arg(q(row.name), q(units::format(row.step_time)), q(units::format(row.gpu_step)),
                            q(units::format(row.loader)))
                       .arg(row.speedup, 0, 'f', 3)
                       .arg(row.cumulative_speedup, 0, 'f', 3)
                       .arg(q(units::format(row.peak, units::BytePrefix::binary)))
                       .arg(row.fits ? QString() : tr(" — does not fit"))
                       .arg(q(row.what)));
  }
  for (auto* set : {gpu, wait})
    connect(set, &QBarSet::hovered, this, [tips](bool on, int i) {
      if (on && i >= 0 && i < int(tips.size())) show_tip(tips[std::size_t(i)]);
    });
  auto* series = new QStackedBarSeries;
  series->append(gpu);
  series->append(wait);
  chart_->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(categories_);
  auto* y = new QValueAxis;
  y->setTitleText(tr("ms per step"));
  y->setRange(0, ymax * 1.08);
  y->applyNiceNumbers();
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
}

}  // namespace gpuplan::gui::charts
