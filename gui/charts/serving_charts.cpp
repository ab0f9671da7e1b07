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
#include <tuple>

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
  line_legend_markers(lat_chart_);
  line_legend_markers(kv_chart_);
}

}  // namespace gpuplan::gui::charts

namespace gpuplan::gui::charts {

CapacityCharts::CapacityCharts(QWidget* parent) : QWidget(parent), gpus_chart_(new QChart), cost_chart_(new QChart) {
  gpus_view_ = make_view(gpus_chart_, tr("GPUs needed vs request rate"), this);
  cost_view_ = make_view(cost_chart_, tr("Cost per million output tokens vs request rate"), this);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(gpus_view_);
  l->addWidget(cost_view_);
}

QString CapacityCharts::pointText(int i) const {
  if (i < 0 || i >= int(result_.capacity.size())) return {};
  const auto& c = result_.capacity[std::size_t(i)];
  return tr("%1 req/s: %2 GPUs = %3, batch %4 per replica\nTTFT p99 %5 · ITL %6%7\n%8")
      .arg(c.rate, 0, 'g', 4)
      .arg(c.gpus)
      .arg(QString::fromStdString(model::replica_layout(c.replicas, c.tp, c.pp)))
      .arg(c.batch)
      .arg(QString::fromStdString(u::format(u::Seconds(c.ttft_s))), QString::fromStdString(u::format(u::Seconds(c.itl_s))),
           c.cost_per_mtok_usd > 0 ? QString(" · $%1 per million output tokens").arg(c.cost_per_mtok_usd, 0, 'g', 3)
                                   : QString(" · no price for this GPU"),
           c.meets_sla ? tr("meets the SLA") : tr("misses the SLA: best achievable"));
}

void CapacityCharts::setResult(const ServingResult& r) {
  result_ = r;
  clear(gpus_chart_);
  clear(cost_chart_);
  points_ = 0;
  if (!r.valid || r.capacity.empty()) {
    gpus_chart_->setTitle(tr("GPUs needed vs request rate — no plan (see the status line)"));
    cost_chart_->setTitle(tr("Cost per million output tokens vs request rate"));
    return;
  }
  QString sla;
  if (r.plan && r.plan->sla.ttft) sla += tr("TTFT p99 ≤ %1").arg(QString::fromStdString(u::format(*r.plan->sla.ttft)));
  if (r.plan && r.plan->sla.itl)
    sla += (sla.isEmpty() ? "" : ", ") + tr("ITL ≤ %1").arg(QString::fromStdString(u::format(*r.plan->sla.itl)));
  if (sla.isEmpty()) sla = tr("no SLA");
  gpus_chart_->setTitle(tr("GPUs needed vs request rate (%1; the planner picks TP and batch)").arg(sla));
  cost_chart_->setTitle(tr("Cost per million output tokens vs request rate"));
  auto* gx = log_axis(tr("requests/s"), 10);
  auto* gy = log_axis(tr("GPUs"), 10);
  auto* cx = log_axis(tr("requests/s"), 10);
  auto* cy = new QValueAxis;
  cy->setTitleText(tr("$ per million output tokens"));
  cy->setLabelFormat("%.2f");
  gpus_chart_->addAxis(gx, Qt::AlignBottom);
  gpus_chart_->addAxis(gy, Qt::AlignLeft);
  cost_chart_->addAxis(cx, Qt::AlignBottom);
  cost_chart_->addAxis(cy, Qt::AlignLeft);
  auto* gpus = new QLineSeries;
  gpus->setName(tr("GPUs (meets the SLA)"));
  gpus->setPen(QPen(series_colour(0), 2.5));
  gpus->setPointsVisible(true);
  auto* cost = new QLineSeries;
  cost->setName(tr("$ / M output tokens"));
  cost->setPen(QPen(series_colour(4), 2.5));
  cost->setPointsVisible(true);
  auto* miss = new QScatterSeries;
  miss->setName(tr("misses the SLA (best achievable)"));
  miss->setMarkerSize(11);
  miss->setColor(Qt::white);
  miss->setBorderColor(Qt::red);
  auto* miss_cost = new QScatterSeries;
  miss_cost->setName(miss->name());
  miss_cost->setMarkerSize(11);
  miss_cost->setColor(Qt::white);
  miss_cost->setBorderColor(Qt::red);
  auto* here = new QScatterSeries;
  here->setName(tr("operating rate %1 req/s").arg(r.rate, 0, 'g', 4));
  here->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  here->setMarkerSize(13);
  here->setColor(series_colour(2));
  auto* here_cost = new QScatterSeries;
  here_cost->setName(here->name());
  here_cost->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
  here_cost->setMarkerSize(13);
  here_cost->setColor(series_colour(2));
  double xmin = std::numeric_limits<double>::max(), xmax = 0, gmax = 1, gmin = std::numeric_limits<double>::max(), cmax = 0;
  bool priced = false;
  for (const auto& c : r.capacity) {
    gpus->append(c.rate, double(c.gpus));
    if (c.cost_per_mtok_usd > 0) {
      cost->append(c.rate, c.cost_per_mtok_usd);
      priced = true;
      cmax = std::max(cmax, c.cost_per_mtok_usd);
    }
    if (!c.meets_sla) {
      miss->append(c.rate, double(c.gpus));
      if (c.cost_per_mtok_usd > 0) miss_cost->append(c.rate, c.cost_per_mtok_usd);
    }
    if (c.rate == r.rate) {
      here->append(c.rate, double(c.gpus));
      if (c.cost_per_mtok_usd > 0) here_cost->append(c.rate, c.cost_per_mtok_usd);
    }
    xmin = std::min(xmin, c.rate);
    xmax = std::max(xmax, c.rate);
    gmin = std::min(gmin, double(c.gpus));
    gmax = std::max(gmax, double(c.gpus));
    ++points_;
  }
  auto attach = [](QChart* ch, QAbstractSeries* s, QAbstractAxis* x, QAbstractAxis* y) {
    ch->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  };
  attach(gpus_chart_, gpus, gx, gy);
  attach(cost_chart_, cost, cx, cy);
  for (auto [ch, s, x, y] : {std::tuple{gpus_chart_, miss, gx, static_cast<QAbstractAxis*>(gy)},
                             std::tuple{gpus_chart_, here, gx, static_cast<QAbstractAxis*>(gy)},
                             std::tuple{cost_chart_, miss_cost, cx, static_cast<QAbstractAxis*>(cy)},
                             std::tuple{cost_chart_, here_cost, cx, static_cast<QAbstractAxis*>(cy)}}) {
    if (s->count() > 0) attach(ch, s, x, y);
    else delete s;
  }
  auto hover = [this](const QPointF& p, bool on) {
    if (!on || p.x() <= 0) return;
    int best = 0;  // the nearest sweep point in log(rate)
    for (int i = 1; i < int(result_.capacity.size()); ++i)
      if (std::fabs(std::log(result_.capacity[std::size_t(i)].rate / p.x())) <
          std::fabs(std::log(result_.capacity[std::size_t(best)].rate / p.x())))
        best = i;
    show_tip(pointText(best));
  };
  connect(gpus, &QLineSeries::hovered, this, hover);
  connect(cost, &QLineSeries::hovered, this, hover);
  connect(gpus, &QLineSeries::clicked, this, [this](const QPointF&) { emit derivationRequested("serving.plan"); });
  gx->setRange(floor10(xmin), ceil10(xmax));
  cx->setRange(floor10(xmin), ceil10(xmax));
  gy->setRange(floor10(gmin), ceil10(gmax * 1.01));
  cy->setRange(0, std::max(cmax * 1.1, 1e-3));
  cy->applyNiceNumbers();
  if (!priced) cost_chart_->setTitle(tr("Cost per million output tokens — no price for this GPU in the data"));
  line_legend_markers(gpus_chart_);
  line_legend_markers(cost_chart_);
}

}  // namespace gpuplan::gui::charts
