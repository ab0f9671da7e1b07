#include "serving_charts.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <QChart>
#include <QChartView>
#include <QVBoxLayout>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QValueAxis>

#include "chart_util.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui::charts {
namespace {
namespace u = gpuplan::units;
void clear(QChart* c) {
  c->removeAllSeries();
  for (auto* a : c->axes()) {
    c->removeAxis(a);
    delete a;
  }
}
QLogValueAxis* log_axis(const QString& title, double base) {
  auto* a = new QLogValueAxis;
  a->setBase(base);
  a->setLabelFormat("%g");
  a->setTitleText(title);
  a->setMinorTickCount(base == 10 ? -1 : 0);
  return a;
}
double floor10(double v) { return std::pow(10.0, std::floor(std::log10(v))); }
double ceil10(double v) { return std::pow(10.0, std::ceil(std::log10(v))); }
}  // namespace

ServingCharts::ServingCharts(QWidget* parent) : QWidget(parent), lat_chart_(new QChart), kv_chart_(new QChart) {
  lat_view_ = make_view(lat_chart_, tr("Latency vs batch"), this);
  kv_view_ = make_view(kv_chart_, tr("KV cache vs context"), this);
  // One above the other: full-width charts keep the legends and the context labels whole.
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(lat_view_);
  l->addWidget(kv_view_);
}

void ServingCharts::setResult(const ServingResult& r) {
  clear(lat_chart_);
  clear(kv_chart_);
  latency_points_ = 0;
  if (!r.valid) {
    lat_chart_->setTitle(tr("Latency vs batch — no estimate (see the status line)"));
    kv_chart_->setTitle(tr("KV cache vs context"));
    return;
  }
  // Latency.
  lat_chart_->setTitle(tr("TTFT and ITL vs batch (prompt %1, output %2, TP %3)")
                           .arg(r.prompt_tokens)
                           .arg(r.output_tokens)
                           .arg(r.tp));
  auto* x = log_axis(tr("concurrent sequences (batch)"), 2);
  auto* y = log_axis(tr("milliseconds"), 10);
  lat_chart_->addAxis(x, Qt::AlignBottom);
  lat_chart_->addAxis(y, Qt::AlignLeft);
  auto* ttft = new QLineSeries;
  ttft->setName(tr("TTFT (no queueing)"));
  ttft->setPen(QPen(series_colour(0), 2.5));
  ttft->setPointsVisible(true);
  auto* itl = new QLineSeries;
  itl->setName(tr("ITL (mean iteration)"));
  itl->setPen(QPen(series_colour(1), 2.5));
  itl->setPointsVisible(true);
  auto* floor = new QLineSeries;
  floor->setName(tr("ITL, decode only"));
  QPen fp(series_colour(1), 1.5);
  fp.setStyle(Qt::DashLine);
  floor->setPen(fp);
  auto* over = new QScatterSeries;
  over->setName(tr("over KV capacity (%1)").arg(r.max_concurrency));
  over->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  over->setMarkerSize(11);
  over->setColor(Qt::white);
  over->setBorderColor(Qt::red);
  double ymin = std::numeric_limits<double>::max(), ymax = 0, xmax = 1;
  for (const auto& p : r.batches) {
    const double b = double(p.batch);
    ttft->append(b, p.ttft_s * 1e3);
    itl->append(b, p.itl_s * 1e3);
    floor->append(b, p.itl_decode_only_s * 1e3);
    if (!p.fits) {
      over->append(b, p.ttft_s * 1e3);
      over->append(b, p.itl_s * 1e3);
    }
    ymin = std::min({ymin, p.ttft_s * 1e3, p.itl_s * 1e3, p.itl_decode_only_s * 1e3});
    ymax = std::max({ymax, p.ttft_s * 1e3, p.itl_s * 1e3});
    xmax = std::max(xmax, b);
    ++latency_points_;
  }
  for (auto* s : {ttft, itl, floor}) {
    lat_chart_->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  }
  if (over->count() > 0) {
    lat_chart_->addSeries(over);
    over->attachAxis(x);
    over->attachAxis(y);
  } else {
    delete over;
  }
  auto tip = [](const QString& what) {
    return [what](const QPointF& p, bool on) {
      if (on) show_tip(QString("%1 at batch %2: %3 ms").arg(what).arg(p.x(), 0, 'g', 6).arg(p.y(), 0, 'g', 4));
    };
  };
  connect(ttft, &QLineSeries::hovered, this, tip(tr("TTFT")));
  connect(itl, &QLineSeries::hovered, this, tip(tr("ITL")));
  x->setRange(0.7, xmax * 1.4);
  y->setRange(floor10(std::max(ymin, 1e-3)), ceil10(ymax));

  // KV cache.
  kv_chart_->setTitle(tr("KV cache and sequences that fit vs context"));
  auto* kx = log_axis(tr("context (K tokens, K = 1024)"), 2);
  auto* ky = log_axis(tr("GiB per sequence"), 10);
  auto* kc = log_axis(tr("max sequences"), 10);
  kv_chart_->addAxis(kx, Qt::AlignBottom);
  kv_chart_->addAxis(ky, Qt::AlignLeft);
  kv_chart_->addAxis(kc, Qt::AlignRight);
  auto* whole = new QLineSeries;
  whole->setName(tr("KV/sequence, model"));
  whole->setPen(QPen(series_colour(4), 2.5));
  whole->setPointsVisible(true);
  auto* per_gpu = new QLineSeries;
  per_gpu->setName(tr("KV/sequence, 1 GPU"));
  QPen pg(series_colour(4), 2.0);
  pg.setStyle(Qt::DashLine);
  per_gpu->setPen(pg);
  auto* conc = new QLineSeries;
  conc->setName(tr("max sequences (right)"));
  conc->setPen(QPen(series_colour(2), 2.5));
  conc->setPointsVisible(true);
  double kmin = std::numeric_limits<double>::max(), kmax = 0, cmin = std::numeric_limits<double>::max(), cmax = 0;
  double cxmin = std::numeric_limits<double>::max(), cxmax = 0;
  for (const auto& p : r.contexts) {
    const double c = double(p.context) / 1024.0;  // axis in K tokens: 131072 does not fit as a label
    const double w = u::to_GiB(u::Bytes(p.kv_per_sequence_bytes)), g = u::to_GiB(u::Bytes(p.kv_per_sequence_per_gpu_bytes));
    whole->append(c, w);
    per_gpu->append(c, g);
    kmin = std::min({kmin, w, g});
    kmax = std::max({kmax, w, g});
    if (p.max_concurrency > 0) {
      conc->append(c, double(p.max_concurrency));
      cmin = std::min(cmin, double(p.max_concurrency));
      cmax = std::max(cmax, double(p.max_concurrency));
    }
    cxmin = std::min(cxmin, c);
    cxmax = std::max(cxmax, c);
  }
  for (auto* s : {whole, per_gpu}) {
    kv_chart_->addSeries(s);
    s->attachAxis(kx);
    s->attachAxis(ky);
  }
  kv_chart_->addSeries(conc);
  conc->attachAxis(kx);
  conc->attachAxis(kc);
  connect(whole, &QLineSeries::hovered, this, [](const QPointF& p, bool on) {
    if (on) show_tip(QString("context %1K tokens: %2 GiB per sequence").arg(p.x(), 0, 'g', 6).arg(p.y(), 0, 'g', 3));
  });
  connect(conc, &QLineSeries::hovered, this, [](const QPointF& p, bool on) {
    if (on) show_tip(QString("context %1K tokens: %2 sequences fit").arg(p.x(), 0, 'g', 6).arg(p.y(), 0, 'f', 0));
  });
  if (cxmax > 0) kx->setRange(cxmin / 1.3, cxmax * 1.3);
  if (kmax > 0) ky->setRange(floor10(std::max(kmin, 1e-4)), ceil10(kmax));
  if (cmax > 0) kc->setRange(floor10(std::max(cmin, 1.0)) , ceil10(cmax));
}

}  // namespace gpuplan::gui::charts
