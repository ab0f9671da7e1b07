#include "compress_chart.hpp"

#include <algorithm>

#include <QBarCategoryAxis>
#include <QBarSeries>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QValueAxis>
#include <QVBoxLayout>

#include "chart_util.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui::charts {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

CompressChart::CompressChart(QWidget* parent) : QWidget(parent) {
  chart_ = new QChart;
  view_ = make_view(chart_, tr("Compression choices"), this);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(view_);
}

double CompressChart::value_of(const model::CompressionRow& r, Metric m) {
  if (!r.refused.empty()) return 0.0;
  switch (m) {
    case kDecodeTokens: return r.decode_tokens_per_s;
    case kItl: return r.itl.raw() * 1e3;
    case kTtft: return r.ttft.raw() * 1e3;
    case kWeights: return r.weight_bytes.raw() / 1e9;
    case kMemory: return r.memory.raw() / 1e9;
    case kMetricCount: break;
  }
  return 0.0;
}

QString CompressChart::unit_of(Metric m) {
  switch (m) {
    case kDecodeTokens: return tr("decode tokens/s");
    case kItl: return tr("ITL, ms");
    case kTtft: return tr("TTFT, ms");
    case kWeights: return tr("weights, GB");
    case kMemory: return tr("weights + KV, GB");
    case kMetricCount: break;
  }
  return {};
}

void CompressChart::setStudy(const model::CompressionStudy& s, Metric m) {
  chart_->removeAllSeries();
  for (auto* a : chart_->axes()) {
    chart_->removeAxis(a);
    delete a;
  }
  values_.clear();
  categories_.clear();
  if (s.rows.empty()) {
    chart_->setTitle(tr("Compression — no study (see the serving status)"));
    return;
  }
  chart_->setTitle(tr("%1 per choice (batch %2, %3 + %4 tokens)")
                       .arg(unit_of(m))
                       .arg(s.batch)
                       .arg(s.input_tokens)
                       .arg(s.output_tokens));
  auto* set = new QBarSet(unit_of(m));
  set->setColor(series_colour(int(m)));
  double ymax = 0;
  std::vector<QString> tips;
  for (const auto& r : s.rows) {
    const double v = value_of(r, m);
    values_.push_back(v);
    set->append(v);
    ymax = std::max(ymax, v);
    categories_ << q(r.label);
    tips.push_back(r.refused.empty()
                       ? QString("%1 (%2; %3)\nweights %4, weights + KV %5%6\nTTFT %7, ITL %8, %9 decode tok/s")
                             .arg(q(r.label), q(r.weights), q(r.compute), q(units::format(r.weight_bytes)),
                                  q(units::format(r.memory)), r.fits ? QString() : tr(" — does not fit"),
                                  q(units::format(r.ttft)), q(units::format(r.itl)))
                             .arg(r.decode_tokens_per_s, 0, 'f', 0)
                       : tr("%1: refused — %2").arg(q(r.label), q(r.refused)));
  }
  connect(set, &QBarSet::hovered, this, [tips](bool on, int i) {
    if (on && i >= 0 && i < int(tips.size())) show_tip(tips[std::size_t(i)]);
  });
  auto* series = new QBarSeries;
  series->append(set);
  chart_->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(categories_);
  auto* y = new QValueAxis;
  y->setTitleText(unit_of(m));
  y->setRange(0, ymax > 0 ? ymax * 1.08 : 1.0);
  y->applyNiceNumbers();
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
}

}  // namespace gpuplan::gui::charts
